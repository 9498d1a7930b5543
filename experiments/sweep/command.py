"""Prior sweeps: many toy fits, vectorised, resumable, on one machine or a Dask cluster.

    bnn-zoo sweep --out sweeps/priors --datasets moons,circles --noise 0.1,0.2,0.3,0.4,0.5 \\
        --all-priors --seeds 10

runs every combination of data set, noise level, prior pair and seed (and of
any list given to ``--steps``, ``--lr``, ``--n-train``, ``--restarts``,
``--pick-at``, ``--init-std``) with the toy experiment's defaults, and writes one record per
fit: its settings, the test metrics on ``--n-test`` fresh points (accuracy,
NLL, Brier, ECE, the held-out ELPD), the Bayes-optimal classifier's on the
same points and the gaps to it, PSIS-LOO (``elpd_loo``, its SE, ``p_loo``,
the share of Pareto k above 0.7) and the convergence test. Each fit is what
``bnn-zoo moons``/``circles`` would fit and report for the same settings
(``tests/test_sweep.py`` checks they agree).

The store (``--out``):

- ``records/<key>.parquet``: one row per fit, named by the hash of its
  settings, written to a temporary file and renamed, by the client only;
- ``fits.parquet``: every record in the store in one tidy table (``pandas.read_parquet``),
  rewritten at the end of each run;
- ``draws/<key>.nc``: the fit's posterior draws as an ArviZ DataTree (``--keep-draws``).

A rerun of the same command keeps every finished fit and fits only the
missing ones (after a ``kill -9`` too); a changed spec adds its new fits.
Fits that compute the same numbers under two pairs' names (the flat prior's,
which ignores its hyperprior) are fitted once and recorded under each key;
a record's ``fit_of`` is the key of the record that was fitted.

Fits that share a model structure (the same architecture, training-set size,
fit settings and variables; the prior pair is data) run together, ``--fits-per-task`` at a
time, in one vmapped program (:mod:`~bnn_zoo.experiments.sweep.fits`, on
:mod:`bnn_zoo.inference.advi.batch`). The tasks run in this process
(``--workers 1``), on a Dask ``LocalCluster`` of ``--workers``
single-threaded processes (default: one per core), or on an existing
cluster (``--scheduler tcp://host:8786``).

:func:`main` is the command; :func:`build_parser`, :func:`run_sweep`,
:func:`~bnn_zoo.experiments.sweep.spec.specs` and
:func:`~bnn_zoo.experiments.sweep.spec.tasks`,
:func:`~bnn_zoo.experiments.sweep.fits.fit_task` and
:class:`~bnn_zoo.experiments.harness.store.Store` are its steps, for notebooks and
scripts (docs/user_guide/sweeps.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bnn_zoo.cache import use_compiled_programs
from bnn_zoo.experiments.harness.flags import (HelpFormatter, Parser, UsageError, check_writable, int_list,
                                               n_train, names, nonneg_int, positive_float, positive_int,
                                               unit_interval)
from bnn_zoo.experiments.harness.resources import check_scheduler, cluster, progress, run_lock
from bnn_zoo.experiments.harness.runtime import keep_interrupts, worker_xla_flags, xla_flags
from bnn_zoo.experiments.harness.store import Store
from bnn_zoo.experiments.sweep.fits import bayes_task, describe_times, fit_task, shared_record, time_split
from bnn_zoo.experiments.sweep.spec import choices, fit_identity, fit_key, specs, split_settings, structure, tasks
from bnn_zoo.experiments.toy import priors as toy

__all__ = ["build_parser", "check", "main", "run_sweep"]


# --- the run ---------------------------------------------------------------------------


def run_sweep(args, report=print) -> tuple[Path, int]:
    """Fit what the store lacks; returns the consolidated table's path and the records written now.

    Sets aside the records that cannot be read or are not their key's
    (:meth:`~bnn_zoo.experiments.harness.store.Store.set_aside_damaged`), runs the
    tasks in this process or on a Dask cluster
    (:func:`~bnn_zoo.experiments.harness.runtime.worker_xla_flags` on a local one),
    adds each record's Bayes-optimal reference and gaps, writes it to the
    store as it arrives, and rewrites ``fits.parquet`` with every record in
    the store. Fits of one :func:`~bnn_zoo.experiments.sweep.spec.fit_identity`
    are fitted once: the others are recorded from it
    (:func:`~bnn_zoo.experiments.sweep.fits.shared_record`), or from the store's
    record of it.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags (:func:`build_parser`).
    report : callable, default print
        Called with a line per damaged record set aside, the line that
        counts the sweep's fits, those already in the store, those to fit and
        the damaged records set aside, and at the end, where it fitted any,
        where the tasks' time went (:func:`~bnn_zoo.experiments.sweep.fits.describe_times`).

    Returns
    -------
    tuple of (pathlib.Path, int)
        ``fits.parquet``'s path and the number of records written now (the fits made and
        those recorded from them).

    Raises
    ------
    UsageError
        If two fits of the sweep have the same settings.
    """
    t0 = time.perf_counter()
    cfgs = specs(args)
    keys = [fit_key(c, args.kfold) for c in cfgs]
    if len(set(keys)) != len(keys):
        raise UsageError("the sweep's lists repeat a value (two fits with the same settings)")
    store = Store(args.out)
    store.open()
    damaged = store.report_damaged(report)
    done = store.done()
    todo = [(c, k) for c, k in zip(cfgs, keys) if k not in done]
    choice = choices(cfgs)  # of all the sweep's fits: a resumed sweep builds the same models
    # One fit per identity: the others of it are recorded from it (from the store's, if it has one).
    identity = {k: fit_identity(c, choice[structure(c)]) for c, k in zip(cfgs, keys)}
    needed = {identity[k] for _, k in todo}
    recorded = {}  # identity: a record in the store to record the others of it from
    for key in sorted(done & set(keys)):
        if identity[key] in needed and identity[key] not in recorded and _whole(store, key, done, args.keep_draws):
            recorded[identity[key]] = key
    fitted_for, shared = {}, {}  # identity: the key of its fit; that key: the fits recorded from it
    for cfg, key in todo:
        source = recorded.get(identity[key]) or fitted_for.get(identity[key])
        if source is None:
            fitted_for[identity[key]] = key
        else:
            shared.setdefault(source, []).append(cfg)
    fitting = set(fitted_for.values())
    to_fit = [c for c, k in todo if k in fitting]
    n_shared = len(todo) - len(to_fit)
    report(f"{len(cfgs)} fits in the sweep, {len(cfgs) - len(todo)} already in {args.out}, {len(todo)} to fit"
           + (f" ({n_shared} of them recorded from another pair's same fit: a prior without a scale ignores "
              "its hyperprior)" if n_shared else "")
           + (f"; {damaged} damaged record{'s' * (damaged > 1)} set aside" if damaged else ""))
    for source in sorted(done & set(shared)):  # fits already in the store
        record = store.table([source]).iloc[0].to_dict()
        for cfg in shared.pop(source):
            store.copy(source, shared_record(record, cfg, args.kfold))
    work = tasks(to_fit, args.fits_per_task)
    splits = {json.dumps(split_settings(c), sort_keys=True): split_settings(c) for c in to_fit}
    client, close = cluster(args)
    # The Bayes-optimal references in a thread of this process, while the fits run: on a cluster
    # a record waits for its data set's, and the workers' queues would put it behind fits.
    references = ThreadPoolExecutor(1)
    try:
        bayes = {s: references.submit(bayes_task, settings) for s, settings in splits.items()}

        made = []  # this run's records, for the time split

        def finish(task, results) -> int:
            """Write a task's records, and those of the other fits they are; how many written."""
            written = 0
            for cfg, result in zip(task, results):
                reference = bayes[json.dumps(split_settings(cfg), sort_keys=True)].result()
                _finish(store, result, reference)
                made.append(result["record"])
                others = shared.get(result["record"]["key"], [])
                for other in others:
                    _finish(store, {"record": shared_record(result["record"], other, args.kfold),
                                    "draws": result["draws"]}, reference)
                written += 1 + len(others)
            return written

        with progress(len(to_fit) + sum(map(len, shared.values())), not args.no_progress) as advance:
            if client is None:
                for task in work:
                    advance(finish(task, fit_task(task, args.keep_draws, args.kfold, choice[structure(task[0])])))
            else:
                from dask.distributed import as_completed

                futures = {client.submit(fit_task, task, args.keep_draws, args.kfold, choice[structure(task[0])],
                                         pure=False): task for task in work}
                for future in as_completed(futures):
                    advance(finish(futures[future], future.result()))
        workers = 1 if client is None else len(client.scheduler_info()["workers"])
    finally:
        references.shutdown(wait=False, cancel_futures=True)  # a Ctrl-C cancels the references not begun
        close()
    if made:
        report(describe_times(time_split(made), time.perf_counter() - t0, workers))
    return store.consolidate(), len(todo)


def _whole(store: Store, key: str, done: set, keep_draws: bool) -> bool:
    """Whether the store's record ``key`` can stand for the other fits of its identity: the record
    that was fitted is in the store (else it is fitted again, its time recorded), and so are its
    draws where the sweep keeps them."""
    import pyarrow.parquet as pq

    fit_of = pq.read_table(store.records / f"{key}.parquet").to_pylist()[0].get("fit_of") or key
    return fit_of in done and (not keep_draws or (store.draws / f"{key}.nc").exists())


def _finish(store: Store, result: dict, bayes: dict) -> None:
    record = dict(result["record"], **bayes)
    record["gap_accuracy"] = bayes["bayes_accuracy"] - record["accuracy"]
    record["gap_nll"] = record["nll"] - bayes["bayes_nll"]
    record["gap_elpd_test"] = bayes["bayes_elpd_test"] - record["elpd_test"]
    store.write(record, result["draws"])


# --- the command line ------------------------------------------------------------------


def _list(kind, flag):
    """Comma-separated distinct values of ``kind`` (an argparse type)."""
    def parse(text):
        values = [kind(v) for v in text.split(",")]
        if len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(f"repeated value in {text!r}")
        return values
    return parse


def build_parser(prog: str = "bnn-zoo sweep") -> argparse.ArgumentParser:
    """The command line of ``bnn-zoo sweep``.

    Parameters
    ----------
    prog : str, default "bnn-zoo sweep"
        The program's name in usage and error messages.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.harness.flags.Parser`; ``--out`` is required.
    """
    p = Parser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the sweep's store (created; rerun to resume)")
    p.add_argument("--datasets", type=names(toy.NOISE, "data set"), default=["moons"], help="e.g. moons,circles")
    p.add_argument("--noise", type=_list(positive_float, "--noise"), default=[0.2],
                   help="noise levels, e.g. 0.1,0.3")
    p.add_argument("--priors", type=names(toy.WEIGHT_PRIORS, "prior"), default=["normal"],
                   help="weight priors, e.g. normal,laplace")
    p.add_argument("--hyperpriors", type=names(toy.HYPERPRIORS, "hyperprior"), default=["inversegamma"],
                   help="hyperpriors, e.g. fixed,inversegamma")
    p.add_argument("--all-priors", action="store_true",
                   help=f"the 16 pairs of {', '.join(toy.GRID_PRIORS)} x every hyperprior")
    p.add_argument("--seeds", type=positive_int, default=3, help="seeds 0..N-1 (data, test points and fit)")
    p.add_argument("--steps", type=_list(positive_int, "--steps"), default=[toy.DEFAULTS["steps"]],
                   help="ADVI steps per fit, e.g. 2000,10000")
    p.add_argument("--lr", type=_list(positive_float, "--lr"), default=[toy.DEFAULTS["lr"]],
                   help="initial learning rates, e.g. 0.01,0.05")
    p.add_argument("--n-train", type=_list(n_train, "--n-train"), default=[700],
                   help="training-set sizes, e.g. 100,700")
    p.add_argument("--restarts", type=_list(positive_int, "--restarts"), default=[toy.DEFAULTS["restarts"]],
                   help="fits from other initial means per fit, of which the best runs on, e.g. 1,6")
    p.add_argument("--pick-at", type=_list(unit_interval, "--pick-at"), default=[toy.DEFAULTS["pick_at"]],
                   help="the share of the steps after which each fit's best restart runs on alone "
                   "(0: all run to the end)")
    p.add_argument("--init-std", type=_list(positive_float, "--init-std"), default=[toy.DEFAULTS["init_std"]],
                   help="initial posterior stds of every parameter, e.g. 0.01,0.1")
    p.add_argument("--init-offset", type=nonneg_int, default=0,
                   help="start seed s's restarts from the initial means of seeds s+N, s+N+1, ... "
                   "(other initialisations for the same data)")
    p.add_argument("--n-test", type=positive_int, default=10_000, help="fresh test points per data set")
    p.add_argument("--draws", type=positive_int, default=toy.DEFAULTS["draws"],
                   help="posterior draws per fit, for predictions and PSIS-LOO")
    p.add_argument("--hidden", type=int_list, default=(5, 5), help="hidden layer sizes, e.g. 5,5")
    p.add_argument("--float32", action="store_true", help="fit and evaluate in single precision")
    p.add_argument("--kfold", type=nonneg_int, default=0,
                   help="also K-fold cross-validation of every fit (K refits on folds of the training data; "
                   "0: none)")
    p.add_argument("--keep-draws", action="store_true", help="also write each fit's DataTree to draws/")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                   help="Dask LocalCluster processes (1: in this process)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--fits-per-task", type=positive_int, default=300,
                   help="fits (restarts counted) vmapped together in one task")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def check(args) -> None:
    """Check what the flags' own types cannot, before anything is fitted.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags.

    Raises
    ------
    UsageError
        If ``--draws`` is below PSIS-LOO's minimum or below ``--restarts``,
        ``--kfold`` is 1 or does not divide every ``--n-train``, ``--steps``
        exceeds :data:`~bnn_zoo.inference.advi.prepare.MAX_STEPS`, ``--scheduler``
        is not a Dask address, or ``--out`` is not a writable folder.
    """
    from bnn_zoo.inference.advi.prepare import MAX_STEPS
    from bnn_zoo.inference.diagnostics.psis import MIN_DRAWS

    if args.draws < MIN_DRAWS:
        raise UsageError(f"--draws must be at least {MIN_DRAWS} for PSIS-LOO, got {args.draws}")
    if max(args.restarts) > args.draws:
        raise UsageError(f"--restarts {max(args.restarts)} is more than --draws {args.draws}")
    if args.kfold == 1 or any(args.kfold and n % args.kfold for n in args.n_train):
        raise UsageError(f"--kfold {args.kfold} must be at least 2 and divide --n-train "
                         f"({','.join(map(str, args.n_train))}) into folds of one size")
    if max(args.steps) > MAX_STEPS:
        raise UsageError(f"--steps {max(args.steps):,} is more than {MAX_STEPS:,}")
    check_scheduler(args.scheduler)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is not a folder")
    check_writable(args.out, "--out")


def main(argv=None, prog: str = "bnn-zoo sweep") -> int:
    """``bnn-zoo sweep``: exit 0 when every fit is in the store, 2 on bad input.

    Prints the counts of the sweep's fits on stderr and, at the end, the
    records written (the fits made and those recorded from them), their rate and the table's path.

    Parameters
    ----------
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo sweep"
        The program's name in usage and error messages.

    Returns
    -------
    int
        The exit code: 0 on success and for ``--help``; 2 on bad flags or
        input, or when another sweep is writing the store (a one-line error
        on stderr); 130 on an interrupt, after which the same command goes
        on.
    """
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0), or a bad flag: argparse's one line (2)
        return exit_.code
    try:
        check(args)
        use_compiled_programs()
        # in this process (--workers 1) the flags apply if JAX has not started yet
        with run_lock(args.out), warnings.catch_warnings(), xla_flags(worker_xla_flags()), keep_interrupts():
            warnings.simplefilter("ignore", UserWarning)  # k-hat and convergence are in the records
            t0 = time.perf_counter()
            path, written = run_sweep(args, report=lambda line: print(line, file=sys.stderr))
            seconds = time.perf_counter() - t0
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted (rerun the same command to go on)", file=sys.stderr)
        return 130
    rate = f" ({written / seconds:.2f} records/s)" if written else ""
    print(f"{written} records in {seconds:.1f} s{rate}; table: {path}")
    return 0

