"""What the two MNIST experiments share: data flags, the data, the test predictions and their metrics."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from xarray import DataTree

from bnn_zoo import predict
from bnn_zoo.data import mnist
from bnn_zoo.evaluation import plots
from bnn_zoo.evaluation.metrics import all_metrics, reliability_table
from bnn_zoo.experiments import runner
from bnn_zoo.experiments.cli import positive_int


@dataclass(frozen=True)
class MNISTConfig(runner.RunConfig):
    prior: str = "normal"
    hyperprior: str = "inversegamma"
    normalize: str = "255"
    data_dir: Path | None = None
    limit_train: int | None = None

    @property
    def name(self) -> str:
        return f"{self.prior}-{self.hyperprior}-s{self.seed}"

    def record(self) -> dict:
        out = super().record()
        out["data_dir"] = None if self.data_dir is None else str(self.data_dir)
        return out


def data_arguments(p: argparse.ArgumentParser, normalize: str) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data-dir", type=Path, default=None,
                   help="folder with the four MNIST IDX files (default: $MNIST_DIR, else a "
                   "download into the user's cache, ~/.cache/bnn-zoo/mnist)")
    g.add_argument("--normalize", choices=mnist.NORMALIZATIONS, default=normalize,
                   help="pixel scaling: /255, standardise, or /126 (Blundell et al.)")
    g.add_argument("--limit-train", type=positive_int, default=None, metavar="N",
                   help="fit on the first N training images only (quick runs)")


def data_settings(args) -> dict:
    return dict(normalize=args.normalize, data_dir=args.data_dir, limit_train=args.limit_train)


@dataclass(frozen=True)
class Data:
    """The splits the fit sees: training images (possibly limited), validation and test."""

    X_train: np.ndarray
    y_train: np.ndarray
    splits: mnist.MNIST


def load(cfg: MNISTConfig, flat: bool) -> Data:
    d = mnist.load(cfg.data_dir, normalize=cfg.normalize, seed=cfg.seed)
    X = d.flat(d.X_train) if flat else d.X_train
    n = cfg.limit_train or len(X)
    return Data(X[:n], d.y_train[:n], d)


def test_predictions(cfg: MNISTConfig, fit, idata, X: np.ndarray, chunk: int) -> np.ndarray:
    """Class probabilities of every draw at the images ``X`` (draws, n, 10)."""
    pred = predict(fit, {"X": X}, idata=idata, var_names=["p"], chunk=chunk)
    return pred["predictions"]["p"].values[0]


def classification(cfg: MNISTConfig, idata, proba: np.ndarray, y: np.ndarray, fits, steps_per_epoch: int,
                   title: str) -> tuple[dict, dict]:
    """Test metrics, the reliability table and the ELBO figure; the test predictions into ``idata``.

    Returns the metrics and the run-folder files.
    """
    metrics = all_metrics(proba, y)
    metrics["test_error"] = 1.0 - metrics["accuracy"]
    idata["predictions"] = DataTree(xr.Dataset(
        {"p": (("chain", "draw", "test_obs", "class"), proba[None].astype("float32"))}))
    table = pd.DataFrame(reliability_table(proba, y))
    table.index.name = "bin"
    fig_dir = cfg.figures / cfg.dataset
    name = f"{cfg.prior}-{cfg.hyperprior}"
    plots.reliability(fig_dir / f"reliability_{name}.png", table,
                      title=f"{title} ({name}): test error {metrics['test_error']:.2%}, "
                            f"ECE {metrics['ece']:.2%}")
    plots.elbo_trace(fig_dir / f"elbo_{name}.png", fits[0].elbo, steps_per_epoch)
    return metrics, {"reliability.csv": lambda path: table.to_csv(path, float_format="%.6g")}
