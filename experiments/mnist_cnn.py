"""Seed 004's Bayesian CNN on MNIST: minibatch ADVI on the JAX engine, and its predictive uncertainty.

``bnn-zoo mnist-cnn`` fits conv 32@5x5 tanh, pool, conv 32@5x5 tanh, pool,
dense 64 tanh, softmax with a prior and hyperprior from the registry,
checkpointing every ``--checkpoint-every`` steps (``--resume`` continues),
then predicts every test image with ``--draws`` networks from q and writes
the metrics, the per-image uncertainties, seed 004's figures (Figs. 4-6) and
a reliability diagram.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from bnn_zoo.evaluation import plots
from bnn_zoo.evaluation.metrics import per_input_uncertainty
from bnn_zoo.experiments import mnist_shared, runner
from bnn_zoo.experiments.cli import UsageError, positive_int
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS
from bnn_zoo.models.cnn import cnn_classifier

# Measured on the full data (docs/results.md): beta = 1 gave 1.68% test error and an
# underconfident 1.80% ECE after 30 epochs; beta = 0.1 gave 0.94% and 0.25%.
DEFAULTS = dict(epochs=30, batch_size=128, lr=2e-3, beta=0.1, init_std=1e-3, draws=100,
                checkpoint_every=500)
PREDICT_CHUNK = 1000  # test images per forward pass


@dataclass(frozen=True)
class CNNConfig(mnist_shared.MNISTConfig):
    channels: tuple[int, ...] = (32, 32)
    dense: tuple[int, ...] = (64,)


def arguments(p) -> None:
    p.add_argument("--prior", choices=sorted(WEIGHT_PRIORS), default="normal",
                   help="prior on every weight and bias")
    p.add_argument("--hyperprior", choices=sorted(HYPERPRIORS), default="inversegamma",
                   help="hyperprior on each layer's prior scale (ignored by 'flat')")
    p.add_argument("--channels", type=positive_int, nargs="+", default=[32, 32],
                   help="filters of each conv layer")
    p.add_argument("--dense", type=positive_int, nargs="+", default=[64],
                   help="units of each hidden dense layer")
    mnist_shared.data_arguments(p, normalize="255")


def configs(args) -> list[CNNConfig]:
    # Each conv (5x5, valid) and pool (2x2) shrinks the 28-pixel image: 28 -> 12 -> 4 -> 0.
    side = 28
    for _ in args.channels:
        side = (side - 4) // 2
        if side < 1:
            raise UsageError(f"--channels: {len(args.channels)} conv layers leave no pixels "
                             "of a 28x28 image (at most 2)")
    return [CNNConfig(**runner.fit_settings(args), **mnist_shared.data_settings(args),
                      prior=args.prior, hyperprior=args.hyperprior, channels=tuple(args.channels),
                      dense=tuple(args.dense), float32=True, dataset="mnist_cnn")]


def model(cfg: CNNConfig, data: mnist_shared.Data):
    return cnn_classifier(data.X_train, data.y_train, channels=cfg.channels, dense=cfg.dense,
                          prior=cfg.prior, hyperprior=cfg.hyperprior)


def evaluate(cfg: CNNConfig, data: mnist_shared.Data, fits, idata) -> runner.Evaluation:
    test = data.splits
    proba = mnist_shared.test_predictions(cfg, fits[0], idata, test.X_test, PREDICT_CHUNK)
    metrics, files = mnist_shared.classification(
        cfg, idata, proba, test.y_test, fits, fits[0].config["steps"] // cfg.epochs, "MNIST CNN")
    unc = per_input_uncertainty(proba)
    per_image = pd.DataFrame({"label": test.y_test, "predicted": unc["predicted"],
                              "expected_error": unc["expected_error"], "variance": unc["variance"]})
    per_image.index.name = "test_image"
    files["per_image.csv"] = lambda path: per_image.to_csv(path, float_format="%.6g")

    fig_dir, name = cfg.figures / cfg.dataset, f"{cfg.prior}-{cfg.hyperprior}"
    correct = unc["predicted"] == test.y_test
    plots.variance_vs_error(fig_dir / f"variance_vs_error_{name}.png", unc["expected_error"],
                            unc["variance"], correct)

    def captions(index):
        return [f"label {test.y_test[i]}, said {unc['predicted'][i]}\n"
                f"exp. error {unc['expected_error'][i]:.3f}" for i in index]

    wrong_sure = np.flatnonzero(~correct)[np.argsort(unc["expected_error"][~correct], kind="stable")][:12]
    plots.image_grid(fig_dir / f"confident_mistakes_{name}.png", test.X_test[wrong_sure],
                     captions(wrong_sure), "Misclassified test images with the lowest expected error")
    unsure = np.argsort(-unc["expected_error"], kind="stable")[:12]
    plots.image_grid(fig_dir / f"least_confident_{name}.png", test.X_test[unsure],
                     captions(unsure), "Test images with the highest expected error")
    return runner.Evaluation(metrics={"n_train": len(data.X_train), "n_test": len(test.X_test),
                                      **metrics}, files=files)


def report(r: runner.Record) -> str:
    m = r.metrics
    return (f"test error {m['test_error']:.2%}  nll {m['nll']:.4f}  ece {m['ece']:.2%}  "
            f"fit {m['fit_seconds']:.0f} s  predict {m['predict_seconds']:.0f} s  -> {r.dir}")


EXPERIMENT = runner.Experiment(
    name="mnist-cnn",
    description="Fit seed 004's Bayesian CNN to MNIST by minibatch ADVI and analyse its predictive "
                "uncertainty.",
    arguments=arguments, configs=configs, data=partial(mnist_shared.load, flat=False),
    model=model, evaluate=evaluate, report=report, defaults=DEFAULTS, keep_posterior=False,
    minibatches=True)


def main(argv=None, prog: str | None = None) -> int:
    return runner.main(EXPERIMENT, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
