"""The one path every experiment takes: flags -> typed config -> fit -> sample -> predict -> write.

An experiment (:class:`Experiment`) brings only what is its own: its flags,
its data, its model, its metrics and figures, and optionally a summary of
several runs. The runner does the rest the same way for all of them:

1. parse the shared flags (:func:`add_fit_arguments`) and the experiment's
   into one :class:`RunConfig` per run, which names its run folder; bad
   input is one line on stderr and exit code 2, before anything is fitted
   or written;
2. build the model, :func:`bnn_zoo.fit` it (``--restarts`` times from other
   initial means; with checkpoints and ``--resume`` where the experiment
   asks for them; with ``--pick-at``, the restarts run together and the best
   early on runs on alone), and :func:`bnn_zoo.sample` the posterior (a
   mixture of the restarts, or the best);
3. let the experiment predict and score (:class:`Evaluation`), then write
   ``idata.nc`` (the ArviZ DataTree, unless the config's ``keep_draws`` is
   off), ``metrics.json``, the experiment's files and, with checkpoints,
   q's final state ``variational.nc`` into the run folder, staged and
   renamed into place whole.

:func:`main` is every experiment's command line, :func:`run` one run of it.
The run folder's contents: docs/user_guide/experiments.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm

import bnn_zoo
from bnn_zoo.data.mnist import MNISTError
from bnn_zoo.experiments.cli import (HelpFormatter, Parser, UsageError, check_writable, fraction,
                                     nonneg_int, positive_float, positive_int, unit_interval)
from bnn_zoo.inference import CheckpointError, ConvergenceWarning, NonFiniteLossError, optim, psis
from bnn_zoo.inference.advi import MAX_STEPS, fullrank_from
from bnn_zoo.inference.diagnostics import Convergence
from bnn_zoo.inference.batch import fit_many, pick_step
from bnn_zoo.inference.engine import steps_per_epoch
from bnn_zoo.inference.estimators import ESTIMATORS
from bnn_zoo.inference.families import METHODS
from bnn_zoo.inference.io import atomic_dir, write_json
from bnn_zoo.inference.posterior import elbo as q_elbo

__all__ = ["Evaluation", "Experiment", "Record", "RunConfig", "add_fit_arguments", "add_xla_flag",
           "build_parser", "check", "fit_settings", "jaxlib_at_least", "main", "make_optimizer",
           "minibatch_rows", "recorded_convergence", "run", "run_many", "use_compilation_cache"]


@dataclass(frozen=True)
class RunConfig:
    """The settings of one run. An experiment's subclass adds its own and names the run folder.

    ``steps`` is the number of optimisation steps, unless ``epochs`` is set
    (minibatch experiments): then each epoch is ``N // batch_size`` steps, as
    the engine runs them, and ``lr_decay_epochs`` decay the learning rate by
    ``lr_decay_factor`` after those epochs. The shared flags
    (:func:`add_fit_arguments`) set the fields of the same names
    (:func:`fit_settings`); a subclass must define :attr:`name`.

    Parameters
    ----------
    dataset : str, default ""
        The run folder's parent: one per data set (or architecture).
    seed : int, default 0
        The data, initialisation and Monte Carlo seed.
    init_seed : int, optional
        The seed of the initial means and the Monte Carlo noise only;
        default ``seed``. Restart ``k`` uses it + ``k``.
    method : {"advi", "fullrank_advi"}, default "advi"
        Mean-field or full-rank Gaussian q; a full-rank fit starts from a
        mean-field one made with ``lr``.
    steps : int, default 10000
        Optimisation steps, unless ``epochs`` is set.
    epochs : int, optional
        Passes over the training set instead of ``steps``.
    optimizer : str, default "adam"
        An optimizer of :data:`bnn_zoo.inference.optim.OPTIMIZERS`.
    lr : float, default 0.05
        The initial learning rate.
    lr_schedule : str, default "constant"
        The learning rate's schedule, one of
        :data:`bnn_zoo.inference.optim.SCHEDULES`.
    lr_final : float, default 0.01
        The final learning rate of a decaying schedule, as a share of ``lr``.
    lr_decay_epochs : tuple of int, default ()
        Epochs after which the learning rate is multiplied by
        ``lr_decay_factor``.
    lr_decay_factor : float, default 0.1
        The factor of each of those decays.
    batch_size : int, optional
        Minibatch size; default the full data every step.
    beta : float, default 1.0
        KL weight.
    kl_weighting : {"constant", "blundell"}, default "constant"
        How the KL part is spread over an epoch's minibatches
        (:func:`bnn_zoo.fit`'s ``kl_weighting``).
    init_std : float, default 0.01
        Initial posterior sd of every unconstrained variable.
    mc_samples : int, default 1
        Monte Carlo draws of q per gradient step.
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        The likelihood's gradient estimator (:func:`bnn_zoo.fit`'s
        ``estimator``).
    path_derivative : bool, default False
        The "sticking the landing" gradient of the entropy term, in the
        mean-field fit and the full-rank phase alike.
    average : float, default 0.0
        Share of the final steps whose iterates are averaged into q (0:
        none).
    fullrank_lr : float, default 0.001
        With ``method="fullrank_advi"``: the full-rank phase's learning rate.
    restarts : int, default 1
        Fits from other initial means (seeds ``fit_seed``, ``fit_seed + 1``,
        ...).
    pick : {"mixture", "best"}, default "mixture"
        Of the restarts: their equal-weight mixture, or the one with the
        highest ELBO.
    pick_at : float, default 0.0
        With ``pick="best"``: the share of the steps after which the best
        restart runs on alone (the restarts run together until then); 0:
        all run to the end and the best by q's ELBO is kept.
    draws : int, default 500
        Posterior draws for predictions (and PSIS-LOO).
    float32 : bool, default False
        Build and fit the model in float32.
    resume : bool, default False
        Continue from the run's checkpoint, or re-evaluate a finished run
        from its ``variational.nc``.
    checkpoint_every : int, default 500
        Steps between checkpoints (experiments with minibatches).
    out : pathlib.Path, default Path("results")
        The results folder; the run folder is ``out / dataset / name``.
    figures : pathlib.Path, default Path("figures")
        The figures folder.
    progress : bool, default True
        Show the progress bar.
    keep_draws : bool, default True
        Write ``idata.nc``; a sweep's many runs keep only their metrics.

    Attributes
    ----------
    name : str
        The run folder's name (the subclass's).
    run_dir : pathlib.Path
        The run folder, ``out / dataset / name``.
    fit_seed : int
        The seed of the first restart's initial means and noise.
    """

    dataset: str = ""  # the run folder's parent: one per data set (or architecture)
    seed: int = 0
    init_seed: int | None = None  # of the initial means and the noise; default: seed
    method: str = "advi"
    steps: int = 10_000
    epochs: int | None = None
    optimizer: str = "adam"
    lr: float = 0.05
    lr_schedule: str = "constant"
    lr_final: float = 0.01
    lr_decay_epochs: tuple[int, ...] = ()
    lr_decay_factor: float = 0.1
    batch_size: int | None = None
    beta: float = 1.0
    kl_weighting: str = "constant"
    init_std: float = 0.01
    mc_samples: int = 1
    estimator: str = "weights"
    path_derivative: bool = False
    average: float = 0.0
    fullrank_lr: float = 0.001  # the full-rank phase's, after a mean-field fit with ``lr``
    restarts: int = 1
    pick: str = "mixture"
    pick_at: float = 0.0  # with pick "best": the share of the steps after which the best restart runs on alone (0: at the end)
    draws: int = 500
    float32: bool = False
    resume: bool = False
    checkpoint_every: int = 500
    out: Path = Path("results")
    figures: Path = Path("figures")
    progress: bool = True
    keep_draws: bool = True  # write idata.nc (a sweep's many runs keep only their metrics)

    @property
    def name(self) -> str:
        """The run folder's name."""
        raise NotImplementedError

    @property
    def run_dir(self) -> Path:
        """The run folder, ``out / dataset / name``."""
        return self.out / self.dataset / self.name

    @property
    def fit_seed(self) -> int:
        """The seed of the first restart's initial means and noise (restart ``k``'s: it + ``k``)."""
        return self.seed if self.init_seed is None else self.init_seed

    def early_pick(self, steps: int) -> int:
        """The step at which the best restart runs on alone (:func:`~bnn_zoo.inference.batch.pick_step`
        of ``steps``), or 0: no early pick (one fit, a mixture, or all run to the end)."""
        return pick_step(self.pick_at, steps) if self.pick == "best" and self.restarts > 1 else 0

    def record(self) -> dict:
        """The settings as written to metrics.json."""
        skip = {"out", "figures", "progress", "resume", "checkpoint_every", "keep_draws"}
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items() if k not in skip}


@dataclass
class Evaluation:
    """What an experiment makes of a fit: metrics, files for the run folder, and what a summary needs.

    ``files`` maps a file name in the run folder to a function writing it
    (given its path); ``summary`` is kept in the run's :class:`Record`.
    Figures go to ``cfg.figures`` directly, before the run folder appears.

    Parameters
    ----------
    metrics : dict
        The experiment's metrics, merged into the run's ``metrics.json``.
    files : dict of str to callable, default {}
        File name in the run folder -> a function that writes the file at
        the path it is given (a staging folder's).
    summary : dict, default {}
        What the experiment's ``summarize`` needs of the run, beyond its
        metrics.
    """

    metrics: dict
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)


@dataclass
class Record:
    """One finished run: what :func:`run` returns and an experiment's ``report`` and ``summarize`` read.

    Parameters
    ----------
    cfg : RunConfig
        The run's settings.
    metrics : dict
        What the run wrote to ``metrics.json``.
    dir : pathlib.Path
        The run folder.
    summary : dict
        The :class:`Evaluation`'s ``summary``.
    """

    cfg: RunConfig
    metrics: dict
    dir: Path
    summary: dict


@dataclass(frozen=True)
class Experiment:
    """One experiment: its command, flags, data, model and metrics.

    ``configs(args)`` turns the parsed flags into the runs (one, or a sweep);
    ``data(cfg)``, ``model(cfg, data)`` and ``evaluate(cfg, data, fits, idata)``
    make one run; ``report(record)`` is its line on stdout and
    ``summarize(args, records)`` an optional closing summary (tables,
    figures across runs). ``defaults`` overrides :class:`RunConfig`'s
    defaults for the shared flags.

    Parameters
    ----------
    name : str
        The experiment's name, recorded in ``metrics.json``; the default
        program name is ``python -m bnn_zoo.experiments.<name>`` (dashes
        as underscores).
    description : str
        The command's description in ``--help``.
    arguments : callable
        Adds the experiment's own flags to the parser it is given.
    configs : callable
        The parsed flags (``argparse.Namespace``) -> the runs, a list of
        :class:`RunConfig`.
    data : callable
        A run's config -> its data.
    model : callable
        A run's config and data -> the ``pymc.Model`` to fit.
    evaluate : callable
        ``(cfg, data, fits, idata)`` -> an :class:`Evaluation`: the run's
        fits (a list of :class:`~bnn_zoo.inference.advi.FitResult`, the
        restarts kept) and their posterior draws (an ArviZ DataTree).
    report : callable
        A :class:`Record` -> its line on stdout.
    summarize : callable, optional
        ``(args, records)`` -> a closing summary printed after all runs
        (nothing when it is empty); default none.
    defaults : dict, default {}
        Defaults of the shared flags, by :class:`RunConfig` field, instead
        of :class:`RunConfig`'s.
    loo : bool, default False
        Sample the pointwise log likelihood (for PSIS-LOO); ``--draws``
        must then be at least :data:`bnn_zoo.inference.psis.MIN_DRAWS`.
    keep_posterior : bool, default True
        Write the posterior draws into ``idata.nc``.
    minibatches : bool, default False
        The experiment takes ``--epochs``, ``--batch-size``,
        ``--kl-weighting``, learning-rate decays, checkpoints and
        ``--resume`` (and not ``--steps``).
    jobs : bool, default False
        The experiment takes ``--jobs``: runs in parallel processes.
    xla_flags : tuple of str, default ()
        XLA flags set while it runs (a flag the user's ``XLA_FLAGS`` set is
        kept as the user set it).
    """

    name: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    configs: Callable[[argparse.Namespace], list]
    data: Callable[[Any], Any]
    model: Callable[[Any, Any], pm.Model]
    evaluate: Callable[..., Evaluation]
    report: Callable[[Record], str]
    summarize: Callable[[argparse.Namespace, list], str] | None = None
    defaults: dict = field(default_factory=dict)
    loo: bool = False  # sample the pointwise log likelihood (PSIS-LOO)
    keep_posterior: bool = True  # write the posterior draws into idata.nc
    minibatches: bool = False  # --epochs, --batch-size, --kl-weighting, checkpoints, --resume
    jobs: bool = False  # --jobs: runs in parallel processes
    xla_flags: tuple[str, ...] = ()  # XLA flags set while it runs (kept if the user set them)


# --- flags ----------------------------------------------------------------------


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
        Its ``defaults`` override :class:`RunConfig`'s, and its
        ``minibatches`` and ``jobs`` decide which flags there are.
    """
    d = {f.name: f.default for f in dataclasses.fields(RunConfig)} | exp.defaults
    g = p.add_argument_group("fit")
    g.add_argument("--method", choices=METHODS, default=d["method"],
                   help="mean-field or full-rank Gaussian approximation")
    if exp.minibatches:
        g.add_argument("--epochs", type=positive_int, default=d["epochs"],
                       help="passes over the training set (each N // batch-size steps)")
        g.add_argument("--batch-size", type=positive_int, default=d["batch_size"], help="minibatch size")
        g.add_argument("--kl-weighting", choices=("constant", "blundell"), default=d["kl_weighting"],
                       help="KL spread equally over an epoch's minibatches, or Blundell's "
                       "2^(M-i)/(2^M-1)")
        g.add_argument("--lr-decay-epochs", type=_epochs, default=d["lr_decay_epochs"],
                       metavar="E[,E...]", help="multiply the learning rate by --lr-decay-factor "
                       "after each of these epochs (default: none)")
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
                   help="the 'sticking the landing' gradient of the entropy term (also in the "
                   "full-rank phase of --method fullrank_advi, which without it uses the plain gradient)")
    g.add_argument("--fullrank-lr", type=positive_float, default=d["fullrank_lr"],
                   help="with --method fullrank_advi: the learning rate of the full-rank fit, which "
                   "starts from a mean-field fit made with --lr (same schedule and steps each)")
    g.add_argument("--average", type=unit_interval, default=d["average"],
                   help="share of the final steps whose iterates are averaged into q")
    g.add_argument("--restarts", type=positive_int, default=d["restarts"],
                   help="fits from other initial means (seeds seed, seed + 1, ...)")
    g.add_argument("--pick", choices=("best", "mixture"), default=d["pick"],
                   help="of the restarts: the one with the highest ELBO, or their equal-weight mixture")
    g.add_argument("--pick-at", type=unit_interval, default=d.get("pick_at", 0.0),
                   help="with --pick best: after this share of the steps, the restart with the highest "
                   "mean ELBO estimate over the last 500 steps runs on alone (the restarts run together, "
                   "vectorised); 0: all run to the end and the best by q's ELBO (1,000 draws) is kept")
    g.add_argument("--draws", type=positive_int, default=d["draws"],
                   help="posterior draws for predictions" + (" and LOO" if exp.loo else ""))
    g.add_argument("--seed", type=nonneg_int, default=d["seed"], help="data, init and Monte Carlo seed")
    g.add_argument("--init-seed", type=nonneg_int, default=None,
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
    """The shared flags as :class:`RunConfig` fields.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    dict
        Each flag named as a :class:`RunConfig` field, by field, and
        ``progress`` (not ``--no-progress``).
    """
    keys = {f.name for f in dataclasses.fields(RunConfig)}
    out = {k: v for k, v in vars(args).items() if k in keys}
    out["progress"] = not args.no_progress
    return out


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
        A :class:`~bnn_zoo.experiments.cli.Parser` (one-line errors, exit
        code 2) with ``exp``'s description.
    """
    p = Parser(prog=prog, description=exp.description, formatter_class=HelpFormatter)
    exp.arguments(p)
    add_fit_arguments(p, exp)
    return p


# --- one run --------------------------------------------------------------------


def _checkpoints(cfg: RunConfig) -> list[tuple[Path, Path | None]]:
    """Per restart: where the running fit checkpoints, and what ``--resume`` continues from.

    A running fit checkpoints next to its run folder; a finished run keeps its
    final state as ``variational.nc`` inside it, so ``--resume`` on a finished
    run re-evaluates it.
    """
    out = []
    for k in range(cfg.restarts):
        tag = f"-r{k}" if cfg.restarts > 1 else ""
        running = cfg.run_dir.parent / f"{cfg.run_dir.name}{tag}.checkpoint.nc"
        finished = cfg.run_dir / f"variational{tag}.nc"
        resume = next((p for p in (running, finished) if p.is_file()), None) if cfg.resume else None
        if cfg.resume and resume is None:
            raise UsageError(f"--resume: no checkpoint to resume from ({running} and {finished} "
                             "are absent)")
        out.append((running, resume))
    return out


def minibatch_rows(model: pm.Model) -> int:
    """Rows of the model's data containers (the engine cuts them all into minibatches).

    Parameters
    ----------
    model : pymc.Model
        A model with at least one data container.

    Returns
    -------
    int
        The first data container's rows.
    """
    return int(model.data_vars[0].get_value().shape[0])


def make_optimizer(cfg: RunConfig, lr: float, steps: int, decays: dict | None = None):
    """The run's optimizer at learning rate ``lr``: ``cfg.optimizer`` under its schedule.

    Parameters
    ----------
    cfg : RunConfig
        Its ``optimizer``, ``lr_schedule`` and ``lr_final`` are used.
    lr : float
        The initial learning rate (``cfg.lr``, or ``cfg.fullrank_lr`` for a
        full-rank phase).
    steps : int
        The fit's steps, over which the schedule decays.
    decays : dict of int to float, optional
        ``{step: factor}`` on top of the schedule; default none.

    Returns
    -------
    bnn_zoo.inference.optim.Described
        The optax transformation, with its description
        (:func:`bnn_zoo.inference.optim.make`).
    """
    return optim.make(cfg.optimizer, lr, steps, schedule_kind=cfg.lr_schedule, final=cfg.lr_final,
                      decays=decays or {})


def run(exp: Experiment, cfg: RunConfig, data=None) -> Record:
    """Fit, sample, evaluate and write one run.

    Builds the model (in float32 with ``cfg.float32``), fits it
    ``cfg.restarts`` times (together, with an early pick), draws
    ``cfg.draws`` from q (the restarts' mixture, or the best), lets the
    experiment evaluate them and writes the run folder whole. With
    checkpoints (``exp.minibatches``), each restart checkpoints beside the
    run folder and its final state is kept in it as ``variational.nc``.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    cfg : RunConfig
        The run's settings.
    data : object, optional
        The run's data; default ``exp.data(cfg)``.

    Returns
    -------
    Record
        The run's config, metrics, folder and the experiment's summary.

    Raises
    ------
    UsageError
        If the steps exceed :data:`~bnn_zoo.inference.advi.MAX_STEPS`, the
        batch is larger than the training set, or ``--resume`` finds no
        checkpoint.
    NonFiniteLossError
        If a fit's ELBO becomes NaN or infinite.
    """
    data = exp.data(cfg) if data is None else data
    with bnn_zoo.precision(cfg.float32):
        model = exp.model(cfg, data)
    per_epoch = steps_per_epoch(minibatch_rows(model), cfg.batch_size)
    steps = cfg.epochs * per_epoch if cfg.epochs else cfg.steps
    if steps > MAX_STEPS:
        raise UsageError(f"--epochs {cfg.epochs:,} of {per_epoch:,} steps is more than {MAX_STEPS:,} steps")
    decays = {e * per_epoch: cfg.lr_decay_factor for e in cfg.lr_decay_epochs}
    if cfg.batch_size is not None and cfg.batch_size > minibatch_rows(model):
        raise UsageError(f"--batch-size {cfg.batch_size} is larger than the training set "
                         f"({minibatch_rows(model)} rows)")
    checkpoints = _checkpoints(cfg) if exp.minibatches else [(None, None)] * cfg.restarts

    def optimizer(lr):
        return make_optimizer(cfg, lr, steps, decays)

    shared = dict(steps=steps, batch_size=cfg.batch_size, beta=cfg.beta, kl_weighting=cfg.kl_weighting,
                  mc_samples=cfg.mc_samples, average=cfg.average, path_derivative=cfg.path_derivative,
                  estimator=cfg.estimator)

    def by_method(mean_field):
        if cfg.method == "advi":
            return mean_field
        # Full-rank from the mean-field fit (docs/user_guide/engine.md, "Defaults and why"): from
        # its own narrow start it diverges at the mean-field learning rate, and is slow at smaller ones.
        full = fullrank_from(model, mean_field, optimizer=optimizer(cfg.fullrank_lr),
                             seed=mean_field.config["seed"], progressbar=cfg.progress, **shared)
        full.config.update({k: mean_field.config[k] for k in ("picked_restart", "pick_elbos")
                            if k in mean_field.config})
        return full

    def one_fit(k, running, resume):
        return by_method(bnn_zoo.fit(model, optimizer=optimizer(cfg.lr), init_std=cfg.init_std,
                                     seed=cfg.fit_seed + k, progressbar=cfg.progress, checkpoint=running,
                                     resume=resume, checkpoint_every=cfg.checkpoint_every, **shared))

    def picked_early():
        # The restarts run together until the pick; the best runs on (inference.batch).
        mean_field, = fit_many([model], [cfg.fit_seed], optimizer=optimizer(cfg.lr), init_std=cfg.init_std,
                               restarts=cfg.restarts, pick_at=cfg.early_pick(steps), **shared)
        return by_method(mean_field)

    early = cfg.early_pick(steps) > 0
    with warnings.catch_warnings():  # reported in the metrics, and as one line by main
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = ([picked_early()] if early else
                [one_fit(k, running, resume) for k, (running, resume) in enumerate(checkpoints)])
    t0 = time.perf_counter()
    if early:
        elbos, picked = fits[0].config["pick_elbos"], fits[0].config["picked_restart"]
    else:
        elbos = [q_elbo(f, seed=cfg.seed)[0] for f in fits] if cfg.restarts > 1 else None
        picked = int(np.argmax(elbos)) if cfg.pick == "best" and cfg.restarts > 1 else None
    chosen = fits if picked is None or early else [fits[picked]]
    checks = [f.convergence for f in chosen]
    worst = next((c for c in checks if not c.converged), checks[0])
    idata = bnn_zoo.sample(chosen, cfg.draws, seed=cfg.seed, log_likelihood=exp.loo, var_names=())
    evaluation = exp.evaluate(cfg, data, chosen, idata)
    stats = idata["sample_stats"]
    ratio = (stats["log_p"] - stats["log_q"]).values.ravel()  # the ELBO of q (of the mixture, for several)
    q_elbo_mean = float(ratio.mean()) if np.isfinite(ratio).all() else None
    predict_seconds = time.perf_counter() - t0
    if not exp.keep_posterior:
        del idata["posterior"]
    ran = [len(f.elbo) - f.config["resumed_at"] for f in fits]
    metrics = {
        "experiment": exp.name, **cfg.record(), "steps": steps, "steps_per_epoch": per_epoch,
        "warm_start_steps": chosen[0].config.get("warm_start"),
        "optimizer_description": chosen[0].config["optimizer"],
        "optimizer_history": chosen[0].config["history"],
        "n_params": chosen[0].layout.dim,
        **worst.record(), "converged": all(c.converged for c in checks),
        **evaluation.metrics,
        "elbo_final": float(np.mean([f.elbo_final for f in chosen])),
        "elbo_q": q_elbo_mean,
        "elbo_q_se": float(ratio.std(ddof=1) / np.sqrt(len(ratio))) if q_elbo_mean is not None else None,
        "elbo_restarts": elbos, "picked_restart": picked,
        "fit_seconds": float(sum(f.seconds for f in fits)),
        "ms_per_step": float(np.mean([f.ms_per_step for f in fits])) if min(ran) > 1 else None,
        "compile_seconds": fits[0].compile_seconds if ran[0] else None,
        "predict_seconds": predict_seconds,
        "resumed_at_step": fits[0].config["resumed_at"],
    }
    with atomic_dir(cfg.run_dir) as staging:
        if cfg.keep_draws:
            idata.to_netcdf(staging / "idata.nc")
        write_json(staging / "metrics.json", metrics)
        for name, write in evaluation.files.items():
            write(staging / name)
        for k, (running, resume) in enumerate(checkpoints):
            if running is not None:  # the final state: this run's last checkpoint, or the one re-evaluated
                tag = f"-r{k}" if cfg.restarts > 1 else ""
                shutil.copyfile(running if ran[k] else resume, staging / f"variational{tag}.nc")
    for running, _ in checkpoints:
        if running is not None:
            running.unlink(missing_ok=True)
    return Record(cfg, metrics, cfg.run_dir, evaluation.summary)


# --- many runs, and the command line ---------------------------------------------


def _run_group(exp: Experiment, cfgs: list) -> list[Record]:
    # Runs of one model structure in one process: the later ones reuse the first's
    # compiled functions.
    return [run(exp, cfg) for cfg in cfgs]


def run_many(exp: Experiment, groups: list[list], jobs: int, report: Callable[[Record], None]) -> list:
    """Every run, ``jobs`` processes at a time, each group of runs in one process, in order.

    Runs stay in this process when there is one group, or when JAX has
    already started here (a caller's earlier work): forking a process whose
    JAX runtime threads are running can deadlock the child. Worker
    processes are forked, each pinned to a core of its own where there are
    enough, and run XLA single-threaded.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    groups : list of list of RunConfig
        The runs, in groups that share one process (runs of one model
        structure reuse its compiled programs).
    jobs : int
        The most worker processes at once.
    report : callable
        Called with each :class:`Record` as its run finishes, in order.

    Returns
    -------
    list of Record
        Every run's record, in the groups' order.
    """
    from jax._src import xla_bridge

    if len(groups) == 1 or xla_bridge.backends_are_initialized():
        jobs = 1
    records = []
    with _pool(min(jobs, len(groups))) as pool:
        for done in pool.imap(_run_group_star, [(exp, g) for g in groups]):
            for r in done:
                records.append(r)
                report(r)
    return records


def _run_group_star(item):
    exp, cfgs = item
    return _run_group(exp, cfgs)


class _Serial:
    """What :func:`run_many` uses of a process pool, in this process."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap(self, fn, items):
        return map(fn, items)


def _pool(jobs: int):
    """``jobs`` worker processes, each on a core of its own where there are enough."""
    if jobs == 1:
        return _Serial()
    # Fork: the workers start with everything imported. Nothing in this process
    # has started JAX's backend yet, so there is no JAX state to copy.
    ctx = mp.get_context("fork")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    queue = ctx.SimpleQueue()
    for i in range(jobs):
        queue.put(cores[i] if jobs <= len(cores) else None)
    return ctx.Pool(jobs, initializer=_worker_init, initargs=(queue,))


def _worker_init(cores) -> None:
    # Small models' XLA programs gain nothing from threads, and with one process per
    # core the threads of each compete for the others' cores: single-threaded XLA and
    # one core per worker (docs/user_guide/experiments.md, "Flags of the toy commands").
    core = cores.get()
    if core is not None:
        os.sched_setaffinity(0, {core})
    add_xla_flag("--xla_cpu_multi_thread_eigen=false")


def add_xla_flag(flag: str) -> None:
    """Append ``flag`` to ``XLA_FLAGS`` unless the user's flags already set it (before JAX starts).

    XLA reads ``XLA_FLAGS`` when JAX's backend starts, so a flag added later
    has no effect in this process.

    Parameters
    ----------
    flag : str
        An XLA flag, ``--name=value``; it counts as set when ``XLA_FLAGS``
        has a flag of that name, whatever its value.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    name = flag.split("=", 1)[0]
    if all(token.split("=", 1)[0] != name for token in flags.split()):
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def jaxlib_at_least(*version: int) -> bool:
    """Whether the installed jaxlib is at least ``version``.

    Compares the release's leading numbers (a part's trailing letters, as
    in ``0.10.0rc1``, are dropped), as many as ``version`` has.

    Parameters
    ----------
    *version : int
        The release's numbers, e.g. ``0, 10`` for 0.10.

    Returns
    -------
    bool
        ``True`` if jaxlib's release is ``version`` or later.
    """
    release = importlib.metadata.version("jaxlib").split(".")
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in release[:len(version)]) >= version


def use_compilation_cache() -> None:
    """Keep JAX's compiled programs on disk, so that a run reuses what an earlier one compiled.

    The cache is ``$XDG_CACHE_HOME/bnn-zoo/jax`` (``~/.cache/bnn-zoo/jax``)
    unless ``JAX_COMPILATION_CACHE_DIR`` names another folder. Programs are
    keyed by their XLA graph, not by the data (the engine passes data as
    arguments), and every program is kept however fast it compiled.
    Changes JAX's configuration for the whole process.
    """
    import jax

    from bnn_zoo.data import user_cache

    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", str(user_cache() / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@contextlib.contextmanager
def _xla_flags(flags):
    """Set ``flags`` while the experiment runs (XLA reads them when JAX starts, inside it), then
    put ``XLA_FLAGS`` back, so that a caller's later processes keep theirs."""
    saved = os.environ.get("XLA_FLAGS")
    for flag in flags:
        add_xla_flag(flag)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = saved


def main(exp: Experiment, argv=None, prog: str | None = None) -> int:
    """The command line of ``exp``: exit 0 on success, 2 on bad input, 1 on a diverged fit.

    Parses the flags into the runs, checks them all (:func:`check`, the
    folders writable, no two runs into one folder, none being written by
    another process) before anything is fitted, then runs them
    (:func:`run_many`), printing each run's line, a warning for a fit that
    did not converge, and the experiment's summary.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, optional
        The program's name in usage and error messages; default
        ``python -m bnn_zoo.experiments.<module>``.

    Returns
    -------
    int
        The exit code: 0 on success; 2 on bad input (a one-line error on
        stderr); 1 when a fit's ELBO became non-finite; 130 on an
        interrupt.

    Raises
    ------
    SystemExit
        From the flags' parsing: code 2 on a bad flag (a one-line error),
        0 after ``--help``.
    """
    prog = prog or f"python -m bnn_zoo.experiments.{exp.name.replace('-', '_')}"
    parser = build_parser(exp, prog)
    args = parser.parse_args(argv)
    try:
        cfgs = exp.configs(args)
        dirs = [c.run_dir for c in cfgs]
        if len(set(dirs)) < len(dirs):
            raise UsageError("two runs would write the same run folder: "
                             f"{next(d for d in dirs if dirs.count(d) > 1)}")
        check_writable(args.out, "--out")
        check_writable(args.figures, "--figures")
        for cfg in cfgs:
            check(exp, cfg)
            late = [e for e in cfg.lr_decay_epochs if cfg.epochs and e >= cfg.epochs]
            if late:
                raise UsageError(f"--lr-decay-epochs {','.join(map(str, late))} is not before "
                                 f"--epochs {cfg.epochs}: no epoch would run at the decayed rate")
            if exp.minibatches:
                _checkpoints(cfg)
        use_compilation_cache()
        with contextlib.ExitStack() as locks, _xla_flags(exp.xla_flags):
            for cfg in cfgs:
                locks.enter_context(_lock(cfg.run_dir))
            t0 = time.perf_counter()
            groups = _groups(cfgs)
            records = run_many(exp, groups, getattr(args, "jobs", 1), partial(_report, exp, prog))
            summary = exp.summarize(args, records) if exp.summarize is not None else ""
            if summary:
                print(summary)
            if len(records) > 1:
                jobs = getattr(args, "jobs", 1)
                print(f"{len(records)} runs in {time.perf_counter() - t0:.1f} s wall ({jobs} jobs)")
    except (UsageError, MNISTError, CheckpointError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLossError as err:
        resume = "; --resume continues from the last checkpoint" if exp.minibatches else ""
        print(f"{prog}: error: {err} (try a smaller --lr or --init-std{resume})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        hint = " (add --resume to continue from the last checkpoint)" if exp.minibatches else ""
        print(f"{prog}: interrupted{hint}", file=sys.stderr)
        return 130
    return 0


@contextlib.contextmanager
def _lock(run_dir: Path):
    """Hold a lock on the run folder while the run writes it: a second run into the same
    folder, at the same time, is refused instead of overwriting this one's checkpoints.

    The lock files live outside ``--out`` (in the system's temporary folder,
    named by a hash of the folder's absolute path), so a refused or failed run
    leaves nothing behind there.
    """
    folder = Path(tempfile.gettempdir()) / f"bnn-zoo-locks-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    name = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:24]
    with open(folder / f"{name}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another run is writing {run_dir} right now") from None
        yield


def check(exp: Experiment, cfg: RunConfig) -> None:
    """Check what the flags' own types cannot, before anything is fitted.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    cfg : RunConfig
        One run's settings.

    Raises
    ------
    UsageError
        If PSIS-LOO gets fewer than :data:`~bnn_zoo.inference.psis.MIN_DRAWS`
        draws, ``--pick-at`` meets minibatches, there are fewer draws than
        restarts, a per-example estimator meets full-rank q, a minibatch
        experiment asks for full-rank q, or the steps or epochs exceed
        :data:`~bnn_zoo.inference.advi.MAX_STEPS`.
    """
    if exp.loo and cfg.draws < psis.MIN_DRAWS:
        raise UsageError(f"--draws {cfg.draws}: PSIS-LOO needs at least {psis.MIN_DRAWS} draws")
    if cfg.pick == "best" and cfg.restarts > 1 and cfg.pick_at and exp.minibatches:
        raise UsageError("--pick-at needs full-batch fits; use --pick-at 0 with minibatches")
    if cfg.draws < cfg.restarts:
        raise UsageError(f"--draws {cfg.draws} is fewer than --restarts {cfg.restarts}: each fit "
                         "needs a draw")
    if cfg.estimator != "weights" and cfg.method != "advi":
        raise UsageError(f"--estimator {cfg.estimator} needs mean-field q (--method advi)")
    if exp.minibatches and cfg.method == "fullrank_advi":
        raise UsageError("--method fullrank_advi: a full-rank factor of every weight would not fit in "
                         "memory (d^2 numbers); use advi")
    if cfg.steps > MAX_STEPS or (cfg.epochs or 0) > MAX_STEPS:
        flag = "--epochs" if cfg.epochs else "--steps"
        raise UsageError(f"{flag} {cfg.epochs or cfg.steps:,} is more than {MAX_STEPS:,} steps")


def _report(exp: Experiment, prog: str, record: Record) -> None:
    """The run's line on stdout, and a one-line warning on stderr if a fit did not converge."""
    print(exp.report(record), flush=True)
    if not record.metrics["converged"]:
        check = recorded_convergence(record.metrics)
        hint = check.hint(smaller="a smaller --fullrank-lr" if record.metrics.get("method") == "fullrank_advi"
                          else "a smaller learning rate", decaying="a decaying --lr-schedule")
        print(f"{prog}: warning: {record.dir}: the fit did not converge: {check.describe()}; {hint}",
              file=sys.stderr, flush=True)


def recorded_convergence(metrics: dict) -> Convergence:
    """The convergence test's finding, from a run's metrics.

    For a fit that did not converge: ``converged`` is ``False``, and a
    ``convergence_*`` key the metrics lack (such as the shortfall, in
    metrics written without it) takes its default.

    Parameters
    ----------
    metrics : dict
        A run's metrics, as in its ``metrics.json``.

    Returns
    -------
    Convergence
        The finding, whose ``describe`` and ``hint`` make the warning.
    """
    keys = ("finite", "elbo_change", "elbo_change_se", "window", "elbo_mean", "elbo_shortfall", "fell",
            "moving")
    return Convergence(**{k: metrics[f"convergence_{k}"] for k in keys if f"convergence_{k}" in metrics},
                       converged=False)


def _groups(cfgs: list) -> list[list]:
    """Runs with the same ``group_key`` (if their config has one) go to one process, in order:
    runs of one model structure share compiled programs."""
    groups: dict = {}
    for i, cfg in enumerate(cfgs):
        groups.setdefault(getattr(cfg, "group_key", i), []).append(cfg)
    return list(groups.values())
