"""The Bayesian CNN of Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks", on MNIST.

Minibatch ADVI on the JAX engine, and its predictive uncertainty.

``bnn-zoo mnist-cnn`` fits conv 32@5x5 tanh, pool, conv 32@5x5 tanh, pool,
dense 64 tanh, softmax with a prior and hyperprior from the registry,
checkpointing every ``--checkpoint-every`` steps (``--resume`` continues),
then predicts every test image with ``--draws`` networks from q and writes
the metrics, the per-image uncertainties, Zharikov et al.'s figures (Figs. 4-6) and
a reliability diagram.

The module is the experiment's pieces for :mod:`~bnn_zoo.experiments.harness.runner`:
:class:`CNNConfig` (one run's settings), :func:`arguments` and :func:`configs`
(flags to runs), :func:`model`, :func:`evaluate` and :func:`report`, put
together in :data:`EXPERIMENT`; the data and the shared metrics come from
:mod:`~bnn_zoo.experiments.mnist.shared`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from bnn_zoo.evaluation import plots
from bnn_zoo.evaluation.metrics import per_input_uncertainty
from bnn_zoo.experiments.harness import config, runner
from bnn_zoo.experiments.harness.fit_flags import fit_settings
from bnn_zoo.experiments.harness.flags import UsageError, positive_int
from bnn_zoo.experiments.mnist import shared as mnist_shared
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS
from bnn_zoo.models.cnn import cnn_classifier

__all__ = ["CNN_HYPERPRIOR_PARAMS", "DEFAULTS", "EXPERIMENT", "PREDICT_CHUNK", "CNNConfig", "arguments", "configs", "evaluate", "main",
           "model", "report"]

#: What a user gets with no flags: 30 epochs of minibatches of 128 at a constant rate, and a KL
#: weight of 0.1, which tempers the posterior: with the plain ELBO (``--beta 1``) the KL of the
#: weights outweighs the 50,000 images and the CNN underfits, underconfident. The measurements:
#: docs/reproductions.md (mnist-defaults).
DEFAULTS = dict(epochs=30, batch_size=128, lr=2e-3, beta=0.1, init_std=1e-3, draws=100,
                checkpoint_every=500, average=0.0, pick_at=0.0)
#: The CNN's hyperprior parameters, where they differ from the registry's defaults.
CNN_HYPERPRIOR_PARAMS = {"inversegamma": {"alpha": 3.0, "beta": 2.0}}
#: Test images per forward pass when predicting (:func:`bnn_zoo.predict`'s ``chunk``).
PREDICT_CHUNK = 1000  # test images per forward pass


@dataclass(frozen=True)
class CNNConfig(mnist_shared.MNISTConfig):
    """One CNN run's settings: :class:`~bnn_zoo.experiments.mnist.shared.MNISTConfig`'s, and these.

    Parameters
    ----------
    channels : tuple of int, default (32, 32)
        Filters of each 5x5 convolution layer, each followed by a 2x2 max-pool.
    dense : tuple of int, default (64,)
        Units of each hidden dense layer.
    """

    channels: tuple[int, ...] = (32, 32)
    dense: tuple[int, ...] = (64,)


def arguments(p) -> None:
    """Add the CNN experiment's own flags to a parser, and the MNIST data flags.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser (the shared fitting flags are added by the runner).
    """
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
    """The run a command line asks for.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of CNNConfig
        One run, in float32, into the data set folder ``mnist_cnn``.

    Raises
    ------
    bnn_zoo.experiments.harness.flags.UsageError
        If ``--channels`` names more conv layers than a 28x28 image allows (at most 2).
    """
    # Each conv (5x5, valid) and pool (2x2) shrinks the 28-pixel image: 28 -> 12 -> 4 -> 0.
    side = 28
    for _ in args.channels:
        side = (side - 4) // 2
        if side < 1:
            raise UsageError(f"--channels: {len(args.channels)} conv layers leave no pixels "
                             "of a 28x28 image (at most 2)")
    return [CNNConfig(**fit_settings(args), **mnist_shared.data_settings(args),
                      prior=args.prior, hyperprior=args.hyperprior, channels=tuple(args.channels),
                      dense=tuple(args.dense), float32=True, dataset="mnist_cnn")]


def model(cfg: CNNConfig, data: mnist_shared.Data):
    """A run's PyMC model: the hierarchical Bayesian CNN on its training images.

    Parameters
    ----------
    cfg : CNNConfig
        The run (its channels, dense layers, prior and hyperprior).
    data : bnn_zoo.experiments.mnist.shared.Data
        The run's data (images ``(n, 1, 28, 28)``).

    Returns
    -------
    pymc.Model
        :func:`bnn_zoo.models.cnn.cnn_classifier`'s model.
    """
    # The CNN's hyperprior: InverseGamma(3, 2), not the registry's (3, 4) (docs/reproductions.md).
    params = CNN_HYPERPRIOR_PARAMS.get(cfg.hyperprior)
    return cnn_classifier(data.X_train, data.y_train, channels=cfg.channels, dense=cfg.dense,
                          prior=cfg.prior, hyperprior=cfg.hyperprior, hyperprior_params=params)


def evaluate(cfg: CNNConfig, data: mnist_shared.Data, fits, idata) -> config.Evaluation:
    """A fitted run's test metrics, per-image uncertainties and figures.

    Predicts every test image with the posterior draws, scores them
    (:func:`~bnn_zoo.experiments.mnist.shared.classification`) and draws into
    ``<figures>/mnist_cnn/`` Zharikov et al.'s figures: expected error against variance
    (``variance_vs_error_<pair>.png``), the misclassified images with the lowest
    expected error (``confident_mistakes_<pair>.png``) and the images with the
    highest (``least_confident_<pair>.png``).

    Parameters
    ----------
    cfg : CNNConfig
        The run.
    data : bnn_zoo.experiments.mnist.shared.Data
        The run's data; its test split is predicted.
    fits : list of bnn_zoo.FitResult
        The run's fits; the first one predicts.
    idata : xarray.DataTree
        The posterior draws; the test predictions are added to it.

    Returns
    -------
    bnn_zoo.experiments.harness.config.Evaluation
        The metrics (``n_train``, ``n_test``, the test metrics and ``test_error``), and
        ``reliability.csv`` and ``per_image.csv`` (each test image's label, prediction,
        expected error and variance) for the run folder.
    """
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
    plots.save(plots.variance_vs_error(unc["expected_error"], unc["variance"], correct),
               fig_dir / f"variance_vs_error_{name}.png")

    def captions(index):
        return [f"label {test.y_test[i]}, said {unc['predicted'][i]}\n"
                f"exp. error {unc['expected_error'][i]:.3f}" for i in index]

    wrong_sure = np.flatnonzero(~correct)[np.argsort(unc["expected_error"][~correct], kind="stable")][:12]
    plots.save(plots.image_grid(test.X_test[wrong_sure], captions(wrong_sure),
                                "Misclassified test images with the lowest expected error"),
               fig_dir / f"confident_mistakes_{name}.png")
    unsure = np.argsort(-unc["expected_error"], kind="stable")[:12]
    plots.save(plots.image_grid(test.X_test[unsure], captions(unsure), "Test images with the highest expected error"),
               fig_dir / f"least_confident_{name}.png")
    return config.Evaluation(metrics={"n_train": len(data.X_train), "n_test": len(test.X_test),
                                      **metrics}, files=files)


def report(r: config.Record) -> str:
    """A finished run as one line: test error, NLL, ECE, fit and predict times, and its folder.

    Parameters
    ----------
    r : bnn_zoo.experiments.harness.config.Record
        The finished run.

    Returns
    -------
    str
        The line the command prints.
    """
    m = r.metrics
    return (f"test error {m['test_error']:.2%}  nll {m['nll']:.4f}  ece {m['ece']:.2%}  "
            f"fit {m['fit_seconds']:.0f} s  predict {m['predict_seconds']:.0f} s  -> {r.dir}")


#: The experiment for the runner: ``bnn-zoo mnist-cnn``, with :data:`DEFAULTS`, minibatches and
#: checkpoints, and no posterior draws in ``idata.nc``.
EXPERIMENT = config.Experiment(
    name="mnist-cnn",
    description="Fit Zharikov et al.'s Bayesian CNN to MNIST by minibatch ADVI and analyse its predictive "
                "uncertainty.",
    arguments=arguments, configs=configs, data=partial(mnist_shared.load, flat=False),
    model=model, evaluate=evaluate, report=report, defaults=DEFAULTS, keep_posterior=False,
    minibatches=True)


def main(argv=None, prog: str | None = None) -> int:
    """Run ``bnn-zoo mnist-cnn``.

    Parameters
    ----------
    argv : list of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, optional
        The command's name in help and errors.

    Returns
    -------
    int
        The exit code: 0 on success.
    """
    return runner.main(EXPERIMENT, argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m bnn_zoo.experiments.mnist.cnn"))
