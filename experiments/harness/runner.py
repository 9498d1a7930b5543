"""The one path every experiment takes: flags -> typed config -> fit -> sample -> predict -> write.

An experiment (:class:`~bnn_zoo.experiments.harness.config.Experiment`) brings only
what is its own: its flags, its data, its model, its metrics and figures,
and optionally a summary of several runs. The runner does the rest the same
way for all of them:

1. parse the shared flags (:mod:`~bnn_zoo.experiments.harness.fit_flags`) and the
   experiment's into one :class:`~bnn_zoo.experiments.harness.config.RunConfig` per
   run, which names its run folder; bad input is one line on stderr and
   exit code 2, before anything is fitted or written;
2. build the model, :func:`bnn_zoo.fit` it (``--restarts`` times from other
   initial means; with checkpoints and ``--resume`` where the experiment
   asks for them; with ``--pick-at``, the restarts run together and the best
   early on runs on alone), and :func:`bnn_zoo.sample` the posterior (a
   mixture of the restarts, or the best);
3. let the experiment predict and score
   (:class:`~bnn_zoo.experiments.harness.config.Evaluation`), then write
   ``idata.nc`` (the ArviZ DataTree, unless the config's ``keep_draws`` is
   off), ``metrics.json``, the experiment's files and, with checkpoints,
   q's final state ``variational.nc`` into the run folder, staged and
   renamed into place whole.

:func:`main` is every experiment's command line, :func:`run` one run of it;
the runs go to worker processes through :mod:`~bnn_zoo.experiments.harness.runtime`.
The run folder's contents: docs/user_guide/experiments.md.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pymc as pm

import bnn_zoo
from bnn_zoo.cache import use_compiled_programs
from bnn_zoo.data.mnist import MNISTError
from bnn_zoo.experiments.harness.config import Experiment, Record, RunConfig
from bnn_zoo.experiments.harness.fit_flags import ADVI_ONLY, build_parser, flag_defaults
from bnn_zoo.experiments.harness.flags import UsageError, check_writable
from bnn_zoo.experiments.harness.resources import run_lock
from bnn_zoo.experiments.harness.runtime import keep_interrupts, run_many, xla_flags
from bnn_zoo.inference import CheckpointError, ConvergenceWarning, NonFiniteLossError, methods
from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.diagnostics import psis, qcheck
from bnn_zoo.inference.families import FAMILIES
from bnn_zoo.inference.advi.prepare import MAX_STEPS
from bnn_zoo.inference.diagnostics import convergence
from bnn_zoo.inference.advi.engine import steps_per_epoch
from bnn_zoo.inference.support.io import atomic_dir, write_json
from bnn_zoo.inference.posterior import restarts
from bnn_zoo.inference.posterior.restarts import fit_elbo

__all__ = ["check", "main", "make_optimizer", "minibatch_rows", "recorded_convergence", "run"]


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
    bnn_zoo.inference.advi.optim.Described
        The optax transformation, with its description
        (:func:`bnn_zoo.inference.advi.optim.make`).
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
        If the steps exceed :data:`~bnn_zoo.inference.advi.prepare.MAX_STEPS`, the
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

    objective = bnn_zoo.ELBO(beta=cfg.beta, kl_weighting=cfg.kl_weighting, mc_samples=cfg.mc_samples,
                             estimator=cfg.estimator, path_derivative=cfg.path_derivative)
    shared = dict(steps=steps, batch_size=cfg.batch_size, average=cfg.average, objective=objective)
    # The library decides what each method is (inference.methods); the run asks for it by name. A
    # family that bnn_zoo.fit starts from a mean-field fit (full rank) starts here from one made with
    # --lr, then runs its own phase with --fullrank-lr and the same steps (docs/user_guide/engine.md,
    # "Defaults and why"): from its own narrow start it diverges at the mean-field rate. fit records
    # the mean-field phase (its steps and ELBO) as it does for a warm start of its own.
    method = methods.spec(cfg.method, cfg.init_std)
    first = bnn_zoo.MeanField(init_std=cfg.init_std) if cfg.method in methods.WARM_STARTED else method

    def then(fit):
        if fit.method == cfg.method:
            return fit
        richer = bnn_zoo.fit(model, method=method, init=fit, optimizer=optimizer(cfg.fullrank_lr),
                             random_seed=fit.config["seed"], progressbar=cfg.progress, **shared)
        richer.seconds += fit.seconds  # the run's time is both phases'
        richer.config.update({k: fit.config[k] for k in ("picked_restart", "pick_elbos") if k in fit.config})
        return richer

    def one_fit(k, running, resume):
        if cfg.method == "laplace":  # the mode by L-BFGS on the full data: no optimizer, objective or checkpoint
            return bnn_zoo.fit(model, method=method, steps=steps, random_seed=cfg.fit_seed + k)
        checkpoint = None if running is None else bnn_zoo.Checkpoint(running, every=cfg.checkpoint_every,
                                                                     resume=resume or False)
        return then(bnn_zoo.fit(model, method=first, optimizer=optimizer(cfg.lr), random_seed=cfg.fit_seed + k,
                                progressbar=cfg.progress, checkpoint=checkpoint, **shared))

    def picked_early():
        # The restarts run together until the pick; the best runs on (inference.batch).
        fit, = bnn_zoo.fit_many([model], method=first, optimizer=optimizer(cfg.lr), random_seed=cfg.fit_seed,
                                restarts=cfg.restarts, pick_at=cfg.pick_at, **shared)
        return then(fit)

    early = cfg.early_pick(steps) > 0 and cfg.method in FAMILIES  # fit_many fits the ADVI families
    with warnings.catch_warnings():  # reported in the metrics, and as one line by main
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = ([picked_early()] if early else
                [one_fit(k, running, resume) for k, (running, resume) in enumerate(checkpoints)])
    t0 = time.perf_counter()
    if early:
        elbos, picked = fits[0].config["pick_elbos"], fits[0].config["picked_restart"]
    else:
        elbos = [fit_elbo(f, seed=cfg.seed)[0] for f in fits] if cfg.restarts > 1 else None
        picked = int(restarts.best(elbos)) if cfg.pick == "best" and cfg.restarts > 1 else None
    chosen = fits if picked is None or early else [fits[picked]]
    checks = [f.convergence for f in chosen]
    worst = next((c for c in checks if not c.converged), checks[0])
    with warnings.catch_warnings():  # recorded as q_pareto_k, and as one line by main
        warnings.simplefilter("ignore", qcheck.ApproximationWarning)
        idata = bnn_zoo.sample(chosen, cfg.draws, random_seed=cfg.seed, log_likelihood=exp.loo, var_names=())
    evaluation = exp.evaluate(cfg, data, chosen, idata)
    stats = idata["sample_stats"]
    # The ELBO of q (of the mixture, for several), from the draws above
    q_elbo_mean, q_elbo_se = (None if np.isnan(v) else v for v in restarts.draws_elbo(
        stats["log_p"].values.ravel(), stats["log_q"].values.ravel()))
    predict_seconds = time.perf_counter() - t0
    if not exp.keep_posterior:
        del idata["posterior"]
    ran = [len(f.elbo) - f.config.get("resumed_at", 0) for f in fits]
    metrics = {
        "experiment": exp.name, **cfg.record(), "method": chosen[0].method, "steps": steps,
        "steps_per_epoch": per_epoch, "warm_start_steps": chosen[0].config.get("warm_start"),
        "optimizer_description": chosen[0].config.get("optimizer"),
        "optimizer_history": chosen[0].config.get("history"),
        "n_params": chosen[0].layout.dim,
        **worst.record(), "converged": all(c.converged for c in checks),
        **evaluation.metrics,
        "elbo_final": float(np.mean([f.elbo_final for f in chosen])),
        qcheck.NAME: float(idata.attrs.get(qcheck.NAME, np.nan)),
        "elbo_q": q_elbo_mean, "elbo_q_se": q_elbo_se,
        "elbo_restarts": elbos, "picked_restart": picked,
        "fit_seconds": float(sum(f.seconds for f in fits)),
        "ms_per_step": float(np.mean([f.ms_per_step for f in fits])) if min(ran) > 1 else None,
        "compile_seconds": fits[0].compile_seconds if ran[0] else None,
        "predict_seconds": predict_seconds,
        "resumed_at_step": fits[0].config.get("resumed_at", 0),
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


# --- the command line ------------------------------------------------------------


def _run_group(exp: Experiment, cfgs: list) -> list[Record]:
    # Runs of one model structure in one process: the later ones reuse the first's
    # compiled functions.
    return [run(exp, cfg) for cfg in cfgs]


def main(exp: Experiment, argv=None, prog: str | None = None) -> int:
    """The command line of ``exp``: exit 0 on success, 2 on bad input, 1 on a diverged fit.

    Parses the flags into the runs, checks them all (:func:`check`, the
    folders writable, no two runs into one folder, none being written by
    another process) before anything is fitted, then runs them
    (:func:`~bnn_zoo.experiments.harness.runtime.run_many`), printing each run's
    line, a warning for a fit that did not converge, and the experiment's
    summary.

    Parameters
    ----------
    exp : Experiment
        The experiment.
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, optional
        The program's name in usage and error messages; default
        ``bnn-zoo <name>``, the experiment's command.

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
    prog = prog or f"bnn-zoo {exp.name}"
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
        use_compiled_programs()
        with contextlib.ExitStack() as locks, xla_flags(exp.xla_flags), keep_interrupts():
            for cfg in cfgs:
                locks.enter_context(run_lock(cfg.run_dir))
            t0 = time.perf_counter()
            groups = _groups(cfgs)
            records = run_many(partial(_run_group, exp), groups, getattr(args, "jobs", 1),
                               partial(_report, exp, prog))
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
        If PSIS-LOO gets fewer than :data:`~bnn_zoo.inference.diagnostics.psis.MIN_DRAWS`
        draws, ``--pick-at`` meets minibatches, there are fewer draws than
        restarts, a per-example estimator meets full-rank q, a minibatch
        experiment asks for full-rank q or Laplace, Laplace meets a KL weight or an ADVI setting,
        ``--fullrank-lr`` meets another method, ``--pick-at`` meets ``--pick mixture``, or the steps or epochs exceed
        :data:`~bnn_zoo.inference.advi.prepare.MAX_STEPS`.
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
                         "memory (d^2 numbers); use advi or lowrank_advi")
    if cfg.method == "laplace":
        if exp.minibatches:
            raise UsageError("--method laplace finds the mode by L-BFGS on the full data, which minibatch "
                             "experiments do not fit in one pass; use advi or lowrank_advi")
        if cfg.beta != 1:
            raise UsageError(f"--method laplace takes no KL weight (it takes the posterior's mode and curvature), "
                             f"and this run's --beta is {cfg.beta:g}; pass --beta 1, or an ADVI --method")
        defaults = flag_defaults(exp)
        given = [name for name in ADVI_ONLY if getattr(cfg, name) != defaults[name]]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} {getattr(cfg, given[0])}: --method laplace finds the "
                             "mode by L-BFGS and takes no ADVI setting; drop the flag, or use an ADVI --method")
    defaults = flag_defaults(exp)
    if cfg.method != "fullrank_advi" and cfg.fullrank_lr != defaults["fullrank_lr"]:
        raise UsageError(f"--fullrank-lr {cfg.fullrank_lr:g} sets the full-rank phase, which --method {cfg.method} "
                         "does not run; drop it, or use --method fullrank_advi")
    if cfg.pick != "best" and cfg.pick_at != defaults["pick_at"]:
        raise UsageError(f"--pick-at {cfg.pick_at:g} picks the best restart early, which --pick {cfg.pick} (every "
                         "restart kept) does not; drop it, or use --pick best")
    if cfg.steps > MAX_STEPS or (cfg.epochs or 0) > MAX_STEPS:
        flag = "--epochs" if cfg.epochs else "--steps"
        raise UsageError(f"{flag} {cfg.epochs or cfg.steps:,} is more than {MAX_STEPS:,} steps")


def _report(exp: Experiment, prog: str, record: Record) -> None:
    """The run's line on stdout; on stderr, a note when q's Pareto k is above
    :data:`bnn_zoo.inference.diagnostics.qcheck.K_WARN` (for these networks, the expected case), and a warning
    when some of q's draws are impossible or the fit did not pass its convergence test."""
    print(exp.report(record), flush=True)
    k = record.metrics.get(qcheck.NAME, np.nan)
    if k == np.inf:
        print(f"{prog}: warning: {record.dir}: {qcheck.NAME} inf: some of q's draws have zero posterior "
              "density (docs/user_guide/families.md)", file=sys.stderr, flush=True)
    elif k > qcheck.K_WARN:
        print(f"{prog}: note: {record.dir}: {qcheck.NAME} {k:.2f} > {qcheck.K_WARN}, as for every Gaussian q "
              "of a network: q's weight means and sds are not the posterior's; its predictions are judged "
              "by the test nll and coverage (docs/getting_started.md, 'What a run prints')",
              file=sys.stderr, flush=True)
    if not record.metrics["converged"]:
        check = recorded_convergence(record.metrics)
        hint = check.hint(smaller="a smaller --fullrank-lr" if record.metrics.get("method") == "fullrank_advi"
                          else "a smaller learning rate", decaying="a decaying --lr-schedule")
        print(f"{prog}: warning: {record.dir}: the fit did not pass its convergence test: {check.describe()}; "
              f"{hint}", file=sys.stderr, flush=True)


def recorded_convergence(metrics: dict):
    """The convergence test's finding, from a run's metrics, for one that did not pass it.

    Parameters
    ----------
    metrics : dict
        A run's metrics, as in its ``metrics.json``.

    Returns
    -------
    bnn_zoo.inference.diagnostics.convergence.Convergence or bnn_zoo.inference.diagnostics.modecheck.ModeCheck
        The finding (of the ELBO trace, or of the Laplace approximation's mode), whose
        ``describe`` and ``hint`` make the warning; ``converged`` is ``False``.
    """
    return convergence.recorded({**metrics, "converged": False})


def _groups(cfgs: list) -> list[list]:
    """Runs with the same ``group_key`` (if their config has one) go to one process, in order:
    runs of one model structure share compiled programs."""
    groups: dict = {}
    for i, cfg in enumerate(cfgs):
        groups.setdefault(getattr(cfg, "group_key", i), []).append(cfg)
    return list(groups.values())
