"""Bayes by Backprop on MNIST MLPs (Blundell et al. 2015, as Garg, Singh and Loya reproduce it).

Blundell et al. 2015, "Weight Uncertainty in Neural Networks"; Garg, "Bayesian Neural Networks
and Variational Inference"; Singh, "Bayesian Neural Networks"; Loya, "Bayesian Neural
Networks" (slides).

``bnn-zoo mnist-bbb`` fits a 784-H-H-10 ReLU network with a mean-field
Gaussian q by minibatch ADVI, with a Gaussian or scale-mixture prior (or any
prior of the registry) and a constant or Blundell's per-minibatch KL
weighting. It reports the test error of the predictive averaged over
``--draws`` networks from q (Singh uses 10) and of the posterior-mean
network; ``--prune`` also removes 0-98% of the weights by signal-to-noise or
by magnitude (Blundell Table 2, Singh Table 1); what pruning costs:
docs/reproductions.md (snr-pruning).

The module is the experiment's pieces for :mod:`~bnn_zoo.experiments.harness.runner`:
:class:`BBBConfig` (one run's settings), :func:`arguments` and :func:`configs`
(flags to runs), :func:`model`, :func:`evaluate` and :func:`report`, put
together in :data:`EXPERIMENT`; the data and the shared metrics come from
:mod:`~bnn_zoo.experiments.mnist.shared`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial

import numpy as np

from bnn_zoo.evaluation import plots
from bnn_zoo.evaluation.metrics import accuracy
from bnn_zoo.evaluation.pruning import FRACTIONS, SCORES, cutoff, prune_table, pruning_masks
from bnn_zoo.experiments.harness import config, runner
from bnn_zoo.experiments.harness.fit_flags import fit_settings
from bnn_zoo.experiments.harness.flags import UsageError, positive_float
from bnn_zoo.experiments.mnist import shared as mnist_shared
from bnn_zoo.inference.posterior.sampling import point_posterior
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS, mlp_classifier
from bnn_zoo.models.priors import SCALE_FREE

__all__ = ["DEFAULTS", "EXPERIMENT", "HIDDEN", "PREDICT_CHUNK", "PRIORS", "BBBConfig", "arguments", "configs",
           "evaluate", "main", "model", "network_weights", "report"]

#: ``--prior``'s choices, each to its name in :data:`bnn_zoo.models.WEIGHT_PRIORS`: the registry's
#: priors, and "gaussian", Blundell's and Singh's name for the registry's normal prior.
PRIORS = {"gaussian": "normal", **{name: name for name in WEIGHT_PRIORS}}
#: ``--hidden``'s choices: the hidden layer widths of Blundell et al., Garg and Singh.
HIDDEN = (400, 800, 1024, 1200)
#: What a user gets with no flags: 100 epochs of minibatches of 128 with Blundell's KL weighting,
#: and a KL weight of 0.1, which tempers the posterior: with the plain ELBO (``--beta 1``) the
#: 2x400 network's test error grows the longer it is fitted. The measurements:
#: docs/reproductions.md (mnist-defaults).
DEFAULTS = dict(epochs=100, batch_size=128, lr=1e-3, beta=0.1, init_std=0.03, draws=10,
                kl_weighting="blundell", checkpoint_every=2000, average=0.0, pick_at=0.0)
#: Images per forward pass when predicting (:func:`bnn_zoo.predict`'s ``chunk``).
PREDICT_CHUNK = 2000  # test images per forward pass


@dataclass(frozen=True)
class BBBConfig(mnist_shared.MNISTConfig):
    """One Bayes by Backprop run's settings: :class:`~bnn_zoo.experiments.mnist.shared.MNISTConfig`'s, and these.

    ``prior`` is a key of :data:`PRIORS` here (``"gaussian"`` or a registry name).

    Parameters
    ----------
    hidden : int, default 400
        Units in each hidden layer, one of :data:`HIDDEN`.
    layers : int, default 2
        Hidden layers, 1 or 2.
    prior_scale : float, default 1.0
        The prior scale with the ``"fixed"`` hyperprior (the scale mixture's components are
        multiplied by it).
    prune : bool, default False
        Also prune the weights by signal-to-noise and by magnitude (``pruning.csv`` and two
        figures).
    """

    hidden: int = 400
    layers: int = 2
    prior_scale: float = 1.0
    prune: bool = False


def arguments(p) -> None:
    """Add the Bayes by Backprop experiment's own flags to a parser, and the MNIST data flags.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser (the shared fitting flags are added by the runner).
    """
    p.add_argument("--hidden", type=int, choices=HIDDEN, default=400, help="units in each hidden layer")
    p.add_argument("--layers", type=int, choices=(1, 2), default=2,
                   help="hidden layers (Garg's 1x1024 row: --layers 1 --hidden 1024)")
    p.add_argument("--prior", choices=sorted(PRIORS), default="gaussian",
                   help="prior on every weight and bias ('gaussian' is the registry's 'normal')")
    p.add_argument("--hyperprior", choices=sorted(HYPERPRIORS), default="fixed",
                   help="hyperprior on each layer's prior scale; 'fixed' keeps it at --prior-scale")
    p.add_argument("--prior-scale", type=positive_float, default=1.0,
                   help="the prior scale with --hyperprior fixed (the scale mixture's components "
                   "are multiplied by it)")
    p.add_argument("--prune", action="store_true",
                   help="also prune 0-98%% of the weights by signal-to-noise and by |mu| "
                   "(pruning.csv and two figures)")
    mnist_shared.data_arguments(p, normalize="126")


def configs(args) -> list[BBBConfig]:
    """The run a command line asks for.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of BBBConfig
        One run, in float32, into the data set folder ``mnist_bbb_<layers>x<hidden>``.

    Raises
    ------
    bnn_zoo.experiments.harness.flags.UsageError
        If ``--prior-scale`` is given with a hyperprior other than ``fixed``, or
        with a prior that has no scale.
    """
    if args.hyperprior != "fixed" and args.prior_scale != 1.0:
        raise UsageError("--prior-scale needs --hyperprior fixed")
    if PRIORS[args.prior] in SCALE_FREE and args.prior_scale != 1.0:
        raise UsageError(f"--prior-scale {args.prior_scale:g}: --prior {args.prior} has no scale; drop it")
    return [BBBConfig(**fit_settings(args), **mnist_shared.data_settings(args),
                      prior=args.prior, hyperprior=args.hyperprior, hidden=args.hidden,
                      layers=args.layers, prior_scale=args.prior_scale, prune=args.prune,
                      float32=True, dataset=f"mnist_bbb_{args.layers}x{args.hidden}")]


def model(cfg: BBBConfig, data: mnist_shared.Data):
    """A run's PyMC model: the ReLU MLP classifier on its flat training images.

    Parameters
    ----------
    cfg : BBBConfig
        The run (its layers, width, prior, hyperprior and prior scale).
    data : bnn_zoo.experiments.mnist.shared.Data
        The run's data (images ``(n, 784)``).

    Returns
    -------
    pymc.Model
        :func:`bnn_zoo.models.mlp_classifier`'s model; with the ``"fixed"`` hyperprior each
        layer's prior scale is ``prior_scale``.
    """
    return mlp_classifier(data.X_train, data.y_train, hidden=(cfg.hidden,) * cfg.layers, n_classes=10,
                          activation="relu", prior=PRIORS[cfg.prior], hyperprior=cfg.hyperprior,
                          hyperprior_params={"value": cfg.prior_scale} if cfg.hyperprior == "fixed"
                          else None)


def network_weights(fit) -> np.ndarray:
    """Positions in q's flat vector of the network's weights and biases (not of any scales).

    Parameters
    ----------
    fit : bnn_zoo.FitResult
        A fit of :func:`model`'s network, whose variables ``W_*`` and ``b_*`` are the weights
        and biases.

    Returns
    -------
    numpy.ndarray
        The positions, in the layout's order.
    """
    return np.concatenate([np.arange(slc.start, slc.stop) for name, slc, _, _ in fit.layout.slots
                           if name.startswith(("W_", "b_"))])


def evaluate(cfg: BBBConfig, data: mnist_shared.Data, fits, idata) -> config.Evaluation:
    """A fitted run's test and validation errors, calibration and, with ``prune``, its pruning.

    Predicts the test and validation images with the posterior draws, scores the test images
    (:func:`~bnn_zoo.experiments.mnist.shared.classification`) and predicts them with the
    posterior-mean network. With ``prune`` it sets 0-98% of the weights and biases
    (:data:`bnn_zoo.evaluation.pruning.FRACTIONS`) to zero by signal-to-noise and by magnitude,
    scores each pruned posterior-mean network, and draws ``snr_<pair>.png`` and
    ``pruned_weights_<pair>.png`` into ``<figures>/<dataset>/``.

    Parameters
    ----------
    cfg : BBBConfig
        The run.
    data : bnn_zoo.experiments.mnist.shared.Data
        The run's data; its validation and test splits are predicted.
    fits : list of bnn_zoo.FitResult
        The run's fits; the first one predicts and is pruned.
    idata : xarray.DataTree
        The posterior draws; the test predictions are added to it.

    Returns
    -------
    bnn_zoo.experiments.harness.config.Evaluation
        The metrics (the test metrics, ``test_error``, ``val_error``,
        ``test_error_mean_weights``, ``n_train``, ``n_test`` and, with ``prune``,
        ``snr_cutoffs_db``), and ``reliability.csv`` and, with ``prune``, ``pruning.csv`` for
        the run folder.
    """
    test, fit = data.splits, fits[0]
    X_test, X_val = test.flat(test.X_test), test.flat(test.X_val)
    proba = mnist_shared.test_predictions(cfg, fit, idata, X_test, PREDICT_CHUNK)
    proba_val = mnist_shared.test_predictions(cfg, fit, idata, X_val, PREDICT_CHUNK)
    metrics, files = mnist_shared.classification(
        cfg, idata, proba, test.y_test, fits, fit.config["steps"] // cfg.epochs,
        f"BBB {cfg.layers}x{cfg.hidden}")
    mu, sd = fit.family.mean_and_factor(fit.params)

    def errors(z: np.ndarray) -> np.ndarray:
        """Test error of each network whose unconstrained values are a row of ``z``."""
        p = mnist_shared.test_predictions(cfg, fit, point_posterior(fit, z), X_test, PREDICT_CHUNK)
        return np.mean(p.argmax(axis=2) != test.y_test, axis=1)

    metrics |= {"n_train": len(data.X_train), "n_test": len(X_test),
                "val_error": 1.0 - accuracy(proba_val, test.y_val),
                "test_error_mean_weights": float(errors(mu)[0])}
    if cfg.prune:
        weights = network_weights(fit)
        mu_w, sd_w = mu[weights], sd[weights]
        masks = pruning_masks(mu_w, sd_w)

        def pruned_error(w: np.ndarray) -> float:
            z = mu.copy()
            z[weights] = w
            return float(errors(z)[0])

        pruning = prune_table(mu_w, masks, pruned_error)
        files["pruning.csv"] = lambda path: pruning.to_csv(path, index=False, float_format="%.6g")
        snr = SCORES["signal_to_noise"](mu_w, sd_w)
        cut = [f for f in FRACTIONS if f > 0]
        fig_dir, name = cfg.figures / cfg.dataset, f"{cfg.prior}-{cfg.hyperprior}"
        plots.save(plots.snr_distribution(snr, cut, title=f"BBB {cfg.layers}x{cfg.hidden} ({name}): "
                                                          f"signal-to-noise of {snr.size:,} weights"),
                   fig_dir / f"snr_{name}.png")
        plots.save(plots.pruned_weights(mu_w, masks, title=f"BBB {cfg.layers}x{cfg.hidden} ({name}): "
                                                           "weights kept after pruning"),
                   fig_dir / f"pruned_weights_{name}.png")
        metrics["snr_cutoffs_db"] = {f"{f:g}": 10 * np.log10(cutoff(snr, f)) for f in cut}
    return config.Evaluation(metrics=metrics, files=files)


def report(r: config.Record) -> str:
    """A finished run as one line: test errors of the draws and of the mean weights, NLL, ECE, time.

    Parameters
    ----------
    r : bnn_zoo.experiments.harness.config.Record
        The finished run.

    Returns
    -------
    str
        The line the command prints.
    """
    m, cfg = r.metrics, r.cfg
    return (f"{cfg.layers}x{cfg.hidden} {cfg.prior}-{cfg.hyperprior}: test error {m['test_error']:.2%} "
            f"({cfg.draws} draws), {m['test_error_mean_weights']:.2%} (mean weights), "
            f"nll {m['nll']:.4f}, ece {m['ece']:.2%}, {cfg.epochs} epochs in {m['fit_seconds']:.0f} s "
            f"-> {r.dir}")


#: The experiment for the runner: ``bnn-zoo mnist-bbb``, with :data:`DEFAULTS`, minibatches and
#: checkpoints, and no posterior draws in ``idata.nc``.
EXPERIMENT = config.Experiment(
    name="mnist-bbb",
    description="Bayes by Backprop (mean-field ADVI) on a 784-H-H-10 ReLU MLP for MNIST, with test "
                "errors, calibration and signal-to-noise pruning.",
    arguments=arguments, configs=configs, data=partial(mnist_shared.load, flat=True), model=model,
    evaluate=evaluate, report=report, defaults=DEFAULTS, keep_posterior=False, minibatches=True)


def main(argv=None, prog: str | None = None) -> int:
    """Run ``bnn-zoo mnist-bbb``.

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
    sys.exit(main(prog="python -m bnn_zoo.experiments.mnist.bbb"))
