"""An experiment's types: its settings, what it makes of a fit, and a finished run.

:class:`RunConfig` holds one run's settings (an experiment subclasses it and
names the run folder), :class:`Experiment` what an experiment brings to the
runner (:mod:`~bnn_zoo.experiments.harness.runner`), :class:`Evaluation` what it makes
of a fit and :class:`Record` a finished run.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymc as pm

from bnn_zoo.inference import defaults
from bnn_zoo.inference.advi.batch import pick_step

__all__ = ["Evaluation", "Experiment", "Record", "RunConfig"]


@dataclass(frozen=True)
class RunConfig:
    """The settings of one run. An experiment's subclass adds its own and names the run folder.

    ``steps`` is the number of optimisation steps, unless ``epochs`` is set
    (minibatch experiments): then each epoch is ``N // batch_size`` steps, as
    the engine runs them, and ``lr_decay_epochs`` decay the learning rate by
    ``lr_decay_factor`` after those epochs. The shared flags
    (:func:`~bnn_zoo.experiments.harness.fit_flags.add_fit_arguments`) set the fields of the same
    names (:func:`~bnn_zoo.experiments.harness.fit_flags.fit_settings`); a subclass must define :attr:`name`.

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
    steps : int, default bnn_zoo.inference.defaults.STEPS
        Optimisation steps, unless ``epochs`` is set.
    epochs : int, optional
        Passes over the training set instead of ``steps``.
    optimizer : str, default bnn_zoo.inference.defaults.OPTIMIZER
        An optimizer of :data:`bnn_zoo.inference.advi.optim.OPTIMIZERS`.
    lr : float, default bnn_zoo.inference.defaults.LEARNING_RATE
        The initial learning rate.
    lr_schedule : str, default bnn_zoo.inference.defaults.SCHEDULE
        The learning rate's schedule, one of
        :data:`bnn_zoo.inference.advi.optim.SCHEDULES`.
    lr_final : float, default bnn_zoo.inference.defaults.FINAL
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
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        Initial posterior sd of every unconstrained variable.
    mc_samples : int, default 1
        Monte Carlo draws of q per gradient step.
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        The likelihood's gradient estimator (:func:`bnn_zoo.fit`'s
        ``estimator``).
    path_derivative : bool, default False
        The "sticking the landing" gradient of the entropy term, in the
        mean-field fit and the full-rank phase alike.
    average : float, default bnn_zoo.inference.defaults.AVERAGE
        Share of the final steps whose iterates are averaged into q (0:
        none).
    fullrank_lr : float, default bnn_zoo.inference.defaults.FULLRANK_LEARNING_RATE
        With ``method="fullrank_advi"``: the full-rank phase's learning rate.
    restarts : int, default bnn_zoo.inference.defaults.RESTARTS
        Fits from other initial means (seeds ``fit_seed``, ``fit_seed + 1``,
        ...).
    pick : {"mixture", "best"}, default "mixture"
        Of the restarts: their equal-weight mixture, or the one with the
        highest ELBO.
    pick_at : float, default bnn_zoo.inference.defaults.PICK_AT
        With ``pick="best"``: the share of the steps after which the best
        restart runs on alone (the restarts run together until then); 0:
        all run to the end and the best by q's ELBO is kept.
    draws : int, default bnn_zoo.inference.defaults.DRAWS
        Posterior draws for predictions (and PSIS-LOO).
    float32 : bool, default False
        Build and fit the model in float32.
    resume : bool, default False
        Continue from the run's checkpoint, or re-evaluate a finished run
        from its ``variational.nc``.
    checkpoint_every : int, default bnn_zoo.inference.defaults.CHECKPOINT_EVERY
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
    steps: int = defaults.STEPS
    epochs: int | None = None
    optimizer: str = defaults.OPTIMIZER
    lr: float = defaults.LEARNING_RATE
    lr_schedule: str = defaults.SCHEDULE
    lr_final: float = defaults.FINAL
    lr_decay_epochs: tuple[int, ...] = ()
    lr_decay_factor: float = 0.1
    batch_size: int | None = None
    beta: float = 1.0
    kl_weighting: str = "constant"
    init_std: float = defaults.INIT_STD
    mc_samples: int = 1
    estimator: str = "weights"
    path_derivative: bool = False
    average: float = defaults.AVERAGE
    fullrank_lr: float = defaults.FULLRANK_LEARNING_RATE  # the full-rank phase's, after a mean-field fit with ``lr``
    restarts: int = defaults.RESTARTS
    pick: str = "mixture"
    pick_at: float = defaults.PICK_AT  # with pick "best": the share of the steps after which the best restart runs on alone (0: at the end)
    draws: int = defaults.DRAWS
    float32: bool = False
    resume: bool = False
    checkpoint_every: int = defaults.CHECKPOINT_EVERY
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
        """The step at which the best restart runs on alone (:func:`~bnn_zoo.inference.advi.batch.pick_step`
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
    """One finished run: what :func:`~bnn_zoo.experiments.harness.runner.run` returns and an experiment's ``report`` and ``summarize`` read.

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
        The experiment's name, recorded in ``metrics.json``: its
        ``bnn-zoo`` command, and the default program name in usage and
        error messages (``bnn-zoo <name>``).
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
        fits (a list of :class:`~bnn_zoo.inference.posterior.result.FitResult`, the
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
        must then be at least :data:`bnn_zoo.inference.diagnostics.psis.MIN_DRAWS`.
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
