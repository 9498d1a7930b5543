"""What the two MNIST experiments share: data flags, the data, the test predictions and their metrics.

:mod:`~bnn_zoo.experiments.mnist.cnn` and :mod:`~bnn_zoo.experiments.mnist.bbb` build on
:class:`MNISTConfig` (the prior, hyperprior and data settings of a run), add the data flags with
:func:`data_arguments` and read them with :func:`data_settings`, load the splits with :func:`load`,
predict the test images with :func:`test_predictions` and score them with :func:`classification`
(metrics, ``reliability.csv``, a reliability diagram and the ELBO trace).
"""

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
from bnn_zoo.evaluation.calibration import coverage_metrics
from bnn_zoo.evaluation.metrics import all_metrics, reliability_table
from bnn_zoo.experiments.harness import config
from bnn_zoo.experiments.harness.flags import positive_int

__all__ = ["Data", "MNISTConfig", "classification", "data_arguments", "data_settings", "load",
           "test_predictions"]


@dataclass(frozen=True)
class MNISTConfig(config.RunConfig):
    """One MNIST run's settings: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, and these.

    The run folder is ``<out>/<dataset>/<prior>-<hyperprior>-s<seed>``.

    Parameters
    ----------
    prior : str, default "normal"
        The weight prior, a name of :data:`bnn_zoo.models.WEIGHT_PRIORS` (or the experiment's own).
    hyperprior : str, default "inversegamma"
        The hyperprior on each layer's prior scale, a name of :data:`bnn_zoo.models.HYPERPRIORS`.
    normalize : str, default "255"
        The pixel scaling, one of :data:`bnn_zoo.data.mnist.NORMALIZATIONS`.
    data_dir : pathlib.Path, optional
        The folder of the MNIST files; default ``$MNIST_DIR``, else the user's cache
        (:func:`bnn_zoo.data.mnist.resolve_dir`).
    limit_train : int, optional
        Fit on the first this many training images only; default all of them.
    """

    prior: str = "normal"
    hyperprior: str = "inversegamma"
    normalize: str = "255"
    data_dir: Path | None = None
    limit_train: int | None = None

    @property
    def name(self) -> str:
        """The run folder's name, ``<prior>-<hyperprior>-s<seed>``."""
        return f"{self.prior}-{self.hyperprior}-s{self.seed}"

    def record(self) -> dict:
        """The settings as written to metrics.json, ``data_dir`` as text."""
        out = super().record()
        out["data_dir"] = None if self.data_dir is None else str(self.data_dir)
        return out


def data_arguments(p: argparse.ArgumentParser, normalize: str) -> None:
    """Add the MNIST data flags to a parser: ``--data-dir``, ``--normalize`` and ``--limit-train``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser; the flags go into a group "data".
    normalize : str
        ``--normalize``'s default, one of :data:`bnn_zoo.data.mnist.NORMALIZATIONS`.
    """
    g = p.add_argument_group("data")
    g.add_argument("--data-dir", type=Path, default=None,
                   help="folder with the four MNIST IDX files (default: $MNIST_DIR, else a "
                   "download into the user's cache, ~/.cache/bnn-zoo/mnist)")
    g.add_argument("--normalize", choices=mnist.NORMALIZATIONS, default=normalize,
                   help="pixel scaling: /255, standardise, or /126 (Blundell et al.)")
    g.add_argument("--limit-train", type=positive_int, default=None, metavar="N",
                   help="fit on the first N training images only (quick runs)")


def data_settings(args) -> dict:
    """The data flags' values, as :class:`MNISTConfig`'s fields.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (with those of :func:`data_arguments`).

    Returns
    -------
    dict
        ``normalize``, ``data_dir`` and ``limit_train``.
    """
    return dict(normalize=args.normalize, data_dir=args.data_dir, limit_train=args.limit_train)


@dataclass(frozen=True)
class Data:
    """The splits the fit sees: training images (possibly limited), validation and test.

    Parameters
    ----------
    X_train : numpy.ndarray
        The training images the model is fitted to: the first ``limit_train`` of them, flat
        ``(n, 784)`` or ``(n, 1, 28, 28)``.
    y_train : numpy.ndarray
        Their labels, int64 in 0..9.
    splits : bnn_zoo.data.mnist.MNIST
        All three splits as loaded (images ``(n, 1, 28, 28)``, training split not limited).
    """

    X_train: np.ndarray
    y_train: np.ndarray
    splits: mnist.MNIST


def load(cfg: MNISTConfig, flat: bool) -> Data:
    """A run's MNIST data (:func:`bnn_zoo.data.mnist.load`), its training images limited.

    Parameters
    ----------
    cfg : MNISTConfig
        The run (its data folder, pixel scaling, ``limit_train`` and seed, which seeds the
        validation split).
    flat : bool
        Give the training images as ``(n, 784)`` (an MLP) instead of ``(n, 1, 28, 28)`` (a CNN).

    Returns
    -------
    Data
        The training images and labels the fit sees, and all the splits.

    Raises
    ------
    bnn_zoo.data.mnist.MNISTError
        If the files are missing and cannot be downloaded, or are corrupt or malformed.
    """
    d = mnist.load(cfg.data_dir, normalize=cfg.normalize, seed=cfg.seed)
    X = d.flat(d.X_train) if flat else d.X_train
    n = cfg.limit_train or len(X)
    return Data(X[:n], d.y_train[:n], d)


def test_predictions(cfg: MNISTConfig, fit, idata, X: np.ndarray, chunk: int) -> np.ndarray:
    """Class probabilities of every draw at the images ``X``.

    Parameters
    ----------
    cfg : MNISTConfig
        The run (not read: the experiments pass it to every step).
    fit : bnn_zoo.FitResult
        The fit whose model predicts.
    idata : xarray.DataTree
        The posterior draws to predict with.
    X : numpy.ndarray
        The images, shaped as the model's ``X`` container.
    chunk : int
        Images per forward pass (:func:`bnn_zoo.predict`'s ``chunk``).

    Returns
    -------
    numpy.ndarray
        The model's ``p`` of the first chain, ``(draws, n, 10)``.
    """
    pred = predict(fit, {"X": X}, idata=idata, var_names=["p"], chunk=chunk)
    return pred["predictions"]["p"].values[0]


def classification(cfg: MNISTConfig, idata, proba: np.ndarray, y: np.ndarray, fits, steps_per_epoch: int,
                   title: str) -> tuple[dict, dict]:
    """Test metrics, the reliability table and the ELBO figure; the test predictions into ``idata``.

    Adds the group ``predictions`` (``p``, float32, dims chain, draw, test_obs, class) to ``idata``
    and draws ``reliability_<prior>-<hyperprior>.png`` and ``elbo_<prior>-<hyperprior>.png`` into
    ``<figures>/<dataset>/``.

    Parameters
    ----------
    cfg : MNISTConfig
        The run (its figures folder, data set, prior and hyperprior).
    idata : xarray.DataTree
        The run's posterior; the predictions are added to it.
    proba : numpy.ndarray
        Class probabilities ``(draws, n, 10)`` (:func:`test_predictions`).
    y : numpy.ndarray
        The true labels, ``(n,)``.
    fits : list of bnn_zoo.FitResult
        The run's fits; the first one's ELBO trace is drawn.
    steps_per_epoch : int
        Steps per epoch, the ELBO figure's x axis unit.
    title : str
        The reliability diagram's title, before the pair and its scores.

    Returns
    -------
    metrics : dict
        :func:`bnn_zoo.evaluation.metrics.all_metrics`, the prediction sets' coverage and size,
        raw and conformal (:func:`bnn_zoo.evaluation.calibration.coverage_metrics`), and
        ``test_error`` (1 - accuracy).
    files : dict of str to callable
        ``reliability.csv`` (:func:`bnn_zoo.evaluation.metrics.reliability_table`) for the run
        folder.
    """
    metrics = {**all_metrics(proba, y), **coverage_metrics(y, proba=proba)}
    metrics["test_error"] = 1.0 - metrics["accuracy"]
    idata["predictions"] = DataTree(xr.Dataset(
        {"p": (("chain", "draw", "test_obs", "class"), proba[None].astype("float32"))}))
    table = pd.DataFrame(reliability_table(proba, y))
    table.index.name = "bin"
    fig_dir = cfg.figures / cfg.dataset
    name = f"{cfg.prior}-{cfg.hyperprior}"
    plots.save(plots.reliability(table, title=f"{title} ({name}): test error {metrics['test_error']:.2%}, "
                                              f"ECE {metrics['ece']:.2%}"),
               fig_dir / f"reliability_{name}.png")
    plots.save(plots.elbo_trace(fits[0].elbo, steps_per_epoch), fig_dir / f"elbo_{name}.png")
    return metrics, {"reliability.csv": lambda path: table.to_csv(path, float_format="%.6g")}
