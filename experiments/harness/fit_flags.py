"""The flags every experiment shares, and an experiment's command line.

:func:`add_fit_arguments` adds the fit and output flags (with an
experiment's defaults), :func:`fit_settings` turns them into
:class:`~bnn_zoo.experiments.harness.config.RunConfig` fields, and
:func:`build_parser` makes an experiment's parser: its own flags, then the
shared ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from bnn_zoo.experiments.harness.config import Experiment, RunConfig
from bnn_zoo.experiments.harness.flags import (HelpFormatter, Parser, fraction, positive_float, seed,
                                               positive_int, unit_interval)
from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.advi.estimators import ESTIMATORS
from bnn_zoo.inference.methods import SINGLE

__all__ = ["ADVI_ONLY", "add_fit_arguments", "build_parser", "fit_settings", "flag_defaults"]


def add_fit_arguments(p: argparse.ArgumentParser, exp: Experiment) -> None:
    """Add the flags every experiment shares, with ``exp``'s defaults.

    The groups "fit" (the family, optimizer, schedule, restarts, draws and
    seeds) and "output" (``--out``, ``--figures``, ``--no-progress``, and
    checkpoints and ``--resume`` or ``--jobs`` where ``exp`` takes them).

    Parameters
    ----------
    p : argparse.ArgumentParser
        The parser to add them to.
    exp : Experiment
        Its ``defaults`` override :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, and its
        ``minibatches`` and ``jobs`` decide which flags there are.
    """
    d = flag_defaults(exp)
    g = p.add_argument_group("fit")
    g.add_argument("--method", choices=SINGLE, default=d["method"],
                   help="q: a mean-field, low-rank or full-rank Gaussian fitted by ADVI, or the Laplace "
                   "approximation at the mode (docs/user_guide/families.md)")
    if exp.minibatches:
        g.add_argument("--epochs", type=positive_int, default=d["epochs"],
                       help="passes over the training set (each N // batch-size steps)")
        g.add_argument("--batch-size", type=positive_int, default=d["batch_size"], help="minibatch size")
        g.add_argument("--kl-weighting", choices=("constant", "blundell"), default=d["kl_weighting"],
                       help="KL spread equally over an epoch's minibatches, or Blundell's "
                       "2^(M-i)/(2^M-1)")
        g.add_argument("--lr-decay-epochs", type=_epochs, default=d["lr_decay_epochs"],
                       metavar="E[,E...]", help="multiply the learning rate by --lr-decay-factor "
                       "after each of these epochs")
        g.add_argument("--lr-decay-factor", type=positive_float, default=d["lr_decay_factor"],
                       help="factor of each learning-rate decay")
    else:
        g.add_argument("--steps", type=positive_int, default=d["steps"], help="ADVI steps")
    g.add_argument("--optimizer", choices=sorted(optim.OPTIMIZERS), default=d["optimizer"],
                   help="optax optimizer")
    g.add_argument("--lr", type=positive_float, default=d["lr"], help="initial learning rate")
    g.add_argument("--lr-schedule", choices=optim.SCHEDULES, default=d["lr_schedule"],
                   help="learning rate over the fit: constant, or decayed to --lr-final x --lr")
    g.add_argument("--lr-final", type=fraction, default=d["lr_final"],
                   help="final learning rate of a decaying --lr-schedule, as a share of --lr")
    g.add_argument("--beta", type=positive_float, default=d["beta"], help="KL weight")
    g.add_argument("--init-std", type=positive_float, default=d["init_std"],
                   help="initial posterior std of every parameter")
    g.add_argument("--mc-samples", type=positive_int, default=d["mc_samples"],
                   help="Monte Carlo draws of q per step")
    g.add_argument("--estimator", choices=ESTIMATORS, default=d.get("estimator", "weights"),
                   help="the likelihood's gradient estimator: one weight draw per minibatch, or "
                   "per-example noise in the dense layers (local reparameterisation, Flipout; "
                   "mean-field only)")
    g.add_argument("--path-derivative", action="store_true",
                   help="the 'sticking the landing' gradient of the entropy term, in the mean-field fit and the "
                   "full-rank phase of --method fullrank_advi alike. Without it both use the standard gradient; "
                   "bnn_zoo.fit's default (ELBO(path_derivative=None)) uses this one in the full-rank phase, but "
                   "the commands keep the standard one, with which docs/reproductions.md measures their full-rank fits")
    g.add_argument("--fullrank-lr", type=positive_float, default=d["fullrank_lr"],
                   help="with --method fullrank_advi: the learning rate of the full-rank fit, which "
                   "starts from a mean-field fit made with --lr (same schedule and steps each)")
    g.add_argument("--average", type=unit_interval, default=d["average"],
                   help="share of the final steps whose iterates are averaged into q")
    g.add_argument("--restarts", type=positive_int, default=d["restarts"],
                   help="fits from other initial means (seeds seed, seed + 1, ...)")
    g.add_argument("--pick", choices=("best", "mixture"), default=d["pick"],
                   help="of the restarts: the one with the highest ELBO, or their equal-weight mixture")
    g.add_argument("--pick-at", type=unit_interval, default=d["pick_at"],
                   help="with --pick best: after this share of the steps, the restart with the highest "
                   "mean ELBO estimate over the last 500 steps runs on alone (the restarts run together, "
                   "vectorised); 0: all run to the end and the best by q's ELBO (1,000 draws) is kept")
    g.add_argument("--draws", type=positive_int, default=d["draws"],
                   help="posterior draws for predictions" + (" and LOO" if exp.loo else ""))
    g.add_argument("--seed", type=seed, default=d["seed"], help="data, init and Monte Carlo seed")
    g.add_argument("--init-seed", type=seed, default=None,
                   help="seed of the initial means and the Monte Carlo noise only (default: --seed); "
                   "restart k uses it + k")
    g = p.add_argument_group("output")
    if exp.minibatches:
        g.add_argument("--checkpoint-every", type=positive_int, default=d["checkpoint_every"],
                       help="steps between checkpoints")
        g.add_argument("--resume", action="store_true",
                       help="continue from this run's checkpoint (or re-evaluate a finished run)")
    if exp.jobs:
        g.add_argument("--jobs", type=positive_int, default=min(2, os.cpu_count() or 1),
                       help="runs in parallel processes")
    g.add_argument("--out", type=Path, default=Path("results"), help="results folder")
    g.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _epochs(text):
    try:
        epochs = tuple(sorted({int(e) for e in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated epochs, got {text!r}") from None
    if not epochs or epochs[0] < 1:
        raise argparse.ArgumentTypeError(f"epochs must be >= 1, got {text!r}")
    return epochs


def fit_settings(args: argparse.Namespace) -> dict:
    """The shared flags as :class:`~bnn_zoo.experiments.harness.config.RunConfig` fields.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    dict
        Each flag named as a :class:`~bnn_zoo.experiments.harness.config.RunConfig` field, by field, and
        ``progress`` (not ``--no-progress``).
    """
    keys = {f.name for f in dataclasses.fields(RunConfig)}
    out = {k: v for k, v in vars(args).items() if k in keys}
    out["progress"] = not args.no_progress
    return out


#: The shared flags that set ADVI alone, which ``--method laplace`` refuses when they are given.
ADVI_ONLY = ("optimizer", "lr", "lr_schedule", "lr_final", "init_std", "mc_samples", "path_derivative",
             "fullrank_lr", "average")


def flag_defaults(exp: Experiment) -> dict:
    """The shared flags' defaults for ``exp``: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, with the
    experiment's own ``defaults`` over them.

    Parameters
    ----------
    exp : Experiment
        The experiment.

    Returns
    -------
    dict
        Field name -> default.
    """
    return {f.name: f.default for f in dataclasses.fields(RunConfig)} | exp.defaults


def build_parser(exp: Experiment, prog: str) -> argparse.ArgumentParser:
    """The command line of ``exp``: its own flags, then the shared ones.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    prog : str
        The program's name in usage and error messages.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.harness.flags.Parser` (one-line errors, exit
        code 2) with ``exp``'s description.
    """
    p = Parser(prog=prog, description=exp.description, formatter_class=HelpFormatter)
    exp.arguments(p)
    add_fit_arguments(p, exp)
    return p
