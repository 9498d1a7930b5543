"""The UCI regression benchmark: nine data sets, their published splits, six methods, one table.

    bnn-zoo uci --datasets yacht --splits 2 --out results

fits each data set's published train/test splits (:mod:`bnn_zoo.data.uci`)
with one hidden layer of ReLU units (50, and 100 for protein) by every method
of ``--method``, and writes one record per (data set, split, method) and the
table: per data set and method, the mean and standard error over splits of
the test RMSE and the test log-likelihood per point, in the target's own
units, next to the published VI, PBP and MC-dropout columns
(:data:`bnn_zoo.data.uci.PUBLISHED`; :mod:`~bnn_zoo.experiments.uci.table`).
The protocol and the methods: :mod:`~bnn_zoo.experiments.uci.fits`.

The job is resumable like ``bnn-zoo sweep`` (:class:`~bnn_zoo.experiments.harness.store.Store`):
``<out>/uci/records/<key>.parquet`` holds one record per fit, named by the
hash of its settings, so a rerun of a killed command fits only what is
missing. Tasks run in this process (``--workers 1``), on a Dask
``LocalCluster`` or on a running scheduler (``--scheduler``; the client
writes every record). At the end it writes ``fits.parquet`` (every record in the store),
``fits.csv`` (the job's records), ``table.csv`` and ``table.md``. A record whose columns are not
whole (:func:`~bnn_zoo.experiments.uci.fits.record_fault`) is set aside and fitted again.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from bnn_zoo.cache import use_compiled_programs
from bnn_zoo.data import uci
from bnn_zoo.experiments.harness import fit_flags
from bnn_zoo.experiments.harness.config import Experiment
from bnn_zoo.experiments.harness.flags import (HelpFormatter, Parser, UsageError, check_writable, names,
                                               positive_float, positive_int)
from bnn_zoo.experiments.harness.resources import check_scheduler, cluster, progress, run_lock
from bnn_zoo.experiments.harness.runtime import keep_interrupts, worker_xla_flags, xla_flags
from bnn_zoo.experiments.harness.store import Store
from bnn_zoo.experiments.uci.fits import (BATCH_SIZE, DEFAULTS, METHODS, UCIConfig, fit_key, fit_task, model,
                                          record_fault, tasks)
from bnn_zoo.experiments.uci.table import markdown, scored, table

__all__ = ["build_parser", "configs", "main", "run_job", "split_list"]


def split_list(text: str) -> tuple[int, ...] | int:
    """``--splits``: ``N`` (the first N splits) or ``I-J`` (splits I to J, inclusive).

    Parameters
    ----------
    text : str
        The flag's value.

    Returns
    -------
    int or tuple of int
        N, or the indices I..J.

    Raises
    ------
    argparse.ArgumentTypeError
        For anything else.
    """
    try:
        if "-" in text:
            first, last = (int(v) for v in text.split("-"))
            if 0 <= first <= last:
                return tuple(range(first, last + 1))
        elif int(text) >= 1:
            return int(text)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a count N (the first N splits) or a range I-J of split indices, "
                                     f"got {text!r}")


def configs(args) -> list[UCIConfig]:
    """The fits a command line asks for, after checking the data and the splits.

    Every file of each data set of ``--datasets`` is checked against its sha256
    first (:func:`bnn_zoo.data.uci.verify`, downloading missing files where
    ``--data-dir`` and ``UCI_DIR`` are unset).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of UCIConfig
        One per data set, split and method.

    Raises
    ------
    UsageError
        For a missing or damaged file, or a split that a data set does not have.
    """
    shared = {k: v for k, v in fit_flags.fit_settings(args).items()
              if k not in ("method", "batch_size", "restarts", "pick", "pick_at", "estimator", "figures")}
    data_dir = "" if args.data_dir is None else str(args.data_dir)
    out = []
    for name in args.datasets or uci.DATASETS:
        try:
            if not data_dir and not os.environ.get("UCI_DIR"):
                uci.fetch(name, mirror=uci.MIRROR)
            uci.verify(name, data_dir or None)
            count = uci.n_splits(name, data_dir or None)
        except uci.UCIError as err:
            raise UsageError(str(err)) from None
        chosen = range(count) if args.splits is None else (
            range(args.splits) if isinstance(args.splits, int) else args.splits)
        if max(chosen) >= count:
            raise UsageError(f"{name} has {count} splits (0..{count - 1}); --splits "
                             f"{args.splits if isinstance(args.splits, int) else f'{chosen[0]}-{chosen[-1]}'} "
                             "is out of range")
        rows = len(uci.load(name, 0, data_dir or None).y_train)
        for method in args.method or METHODS:
            out += [UCIConfig(**shared, dataset="uci", uci=name, split=k, approach=method, data_dir=data_dir,
                              noise_prior=tuple(args.noise_prior), dropout_rate=args.dropout_rate,
                              batch_size=None if rows <= args.batch_size else args.batch_size,
                              members=args.members, keep_draws=False) for k in chosen]
    return out


def run_job(args, report=print) -> tuple[Path, int]:
    """Fit what the store lacks and write the table; returns ``table.csv``'s path and the fits made now.

    A record written before the job scored the predictive intervals' coverage (one without any
    of their columns) is fitted again, unless ``--table-only`` is given: then the table shows
    its RMSE and log-likelihood, and the coverage of the records that have it. A record with
    some of them, or lacking another column of its method's
    (:func:`~bnn_zoo.experiments.uci.fits.record_fault`), is set aside as damaged and fitted
    again. A record written before ``method`` named the method (``method`` ``"advi"`` beside an
    ``approach`` column) is rewritten in place with ``method`` the approach, and kept.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (:func:`build_parser`).
    report : callable, default print
        Called with a line counting the records rewritten to name their method, if any, a line
        per damaged record set aside (one that cannot be read, is not its key's or is not
        whole, :meth:`~bnn_zoo.experiments.harness.store.Store.set_aside_damaged`), and the line that
        counts the job's fits and the records set aside.

    Returns
    -------
    tuple of (pathlib.Path, int)
        ``<out>/uci/table.csv`` and the number of fits made now.

    Raises
    ------
    UsageError
        For bad input (:func:`configs`), or ``--table-only`` on a store without any of the
        job's records.
    """
    from bnn_zoo.inference.support.io import atomic_write, write_text

    cfgs = configs(args)
    keys = {fit_key(c) for c in cfgs}
    store = Store(args.out / "uci", check=record_fault)
    if args.table_only and not keys & store.done():
        raise UsageError(f"--table-only: {store.root} holds none of this job's fits")
    store.open()
    named = _name_methods(store)
    if named:
        report(f"{named} record{'s' * (named > 1)} written before `method` named the method: method read "
               f"from `approach`, rewritten in {store.records}")
    damaged = store.report_damaged(report)
    done = store.done()
    unscored = set() if args.table_only else _unscored(store, keys & done)
    todo = [c for c in cfgs if fit_key(c) not in done or fit_key(c) in unscored]
    report(f"{len(cfgs)} fits in the job, {len(cfgs) - len(todo)} already in {store.root}, "
           + (f"{len(todo)} left out (--table-only)" if args.table_only else f"{len(todo)} to fit")
           + (f" ({len(unscored)} of them recorded without interval coverage)" if unscored else "")
           + (f"; {damaged} damaged record{'s' * (damaged > 1)} set aside" if damaged else ""))
    work = [] if args.table_only else tasks(todo, args.splits_per_task)
    client, close = cluster(args) if work else (None, lambda: None)
    try:
        with progress(len(todo) if work else 0, not args.no_progress) as advance:
            if client is None:
                for task in work:
                    for record in fit_task(task):
                        store.write(record)
                    advance(len(task))
            else:
                from dask.distributed import as_completed

                futures = [client.submit(fit_task, task, pure=False) for task in work]
                for future in as_completed(futures):
                    records = future.result()
                    for record in records:
                        store.write(record)
                    advance(len(records))
    finally:
        close()
    store.consolidate()
    fits = store.table(sorted(keys & store.done()))
    t = table(fits)
    path = store.root / "table.csv"
    atomic_write(store.root / "fits.csv", lambda tmp: fits.sort_values(["uci", "method", "split"]).to_csv(
        tmp, index=False, float_format="%.6g"))
    atomic_write(path, lambda tmp: t.to_csv(tmp, index=False, float_format="%.6g"))
    write_text(store.root / "table.md", markdown(t))
    return path, len(todo)


def _unscored(store: Store, keys: set[str]) -> set[str]:
    """The keys among ``keys`` whose records lack the intervals' coverage (written before it was scored)."""
    if not keys:
        return set()
    fits = store.table(sorted(keys))
    return set(fits.loc[~scored(fits), "key"])


def _name_methods(store: Store) -> int:
    """Rewrite the records written before ``method`` named the method: ``method`` from ``approach``.

    Such a record has ``method`` ``"advi"`` (the mean-field default that every record carried)
    and the method in ``approach``; its key is that of the same fit now (:func:`fit_key`), so it
    is kept, not fitted again. One whose ``method`` is neither ``"advi"`` nor its ``approach`` is
    left as it is, for :func:`~bnn_zoo.experiments.uci.fits.record_fault` to set aside.
    Returns the records rewritten.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    from bnn_zoo.inference.support.io import atomic_write

    count = 0
    for path in sorted(store.records.glob("*.parquet")):
        try:
            if "approach" not in pq.read_schema(path).names:
                continue
            frame = pd.read_parquet(path)
        except Exception:  # a damaged record: set_aside_damaged's to report
            continue
        if len(frame) != 1 or frame.get("method", pd.Series([None])).iloc[0] not in ("advi", frame["approach"].iloc[0]):
            continue
        named = frame.assign(method=frame["approach"]).drop(columns="approach")
        atomic_write(path, lambda tmp, named=named: named.to_parquet(tmp, index=False))
        count += 1
    return count


def build_parser(prog: str = "bnn-zoo uci") -> argparse.ArgumentParser:
    """The command line of ``bnn-zoo uci``: its own flags, then the shared fit flags.

    Parameters
    ----------
    prog : str, default "bnn-zoo uci"
        The program's name in usage and error messages.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.harness.flags.Parser`; ``--method`` takes a list of
        :data:`~bnn_zoo.experiments.uci.fits.METHODS`.
    """
    p = Parser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
               conflict_handler="resolve")
    p.add_argument("--datasets", type=names(uci.DATASETS, "data set"), default=None,
                   help="e.g. yacht,boston (default: all nine)")
    p.add_argument("--splits", type=split_list, default=None,
                   help="N: the first N splits; I-J: splits I to J (default: all, 20 or 5 for protein)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="the folder of the nine data sets (default: $UCI_DIR, else downloaded to the user's cache)")
    p.add_argument("--noise-prior", type=_pair, default="1,0.1", metavar="ALPHA,BETA",
                   help="shape and rate of the Gamma prior on the noise precision of the standardised target")
    p.add_argument("--dropout-rate", type=_rate, default=0.05, help="MC dropout's rate")
    p.add_argument("--members", type=positive_int, default=5, help="the deep ensemble's MAP fits")
    p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE,
                   help="minibatch rows on data sets with more training rows (the others: full batch)")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                   help="Dask LocalCluster processes (1: in this process)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--splits-per-task", type=positive_int, default=5,
                   help="splits of one data set and method fitted one after another in one task")
    p.add_argument("--table-only", action="store_true",
                   help="fit nothing: write the table of the job's fits already in the store")
    exp = Experiment(name="uci", description="", arguments=lambda p: None, configs=configs, data=None,
                     model=model, evaluate=None, report=None, defaults=DEFAULTS)
    fit_flags.add_fit_arguments(p, exp)
    p.add_argument("--method", type=names(METHODS, "method"), default=None,
                   help=f"methods, e.g. advi,dropout (default: all: {','.join(METHODS)})")
    for flag in ("--restarts", "--pick", "--pick-at", "--estimator", "--figures"):  # the shared ones it has not
        p.add_argument(flag, action=_NotHere, nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="results folder: the job's store is <out>/uci (rerun to resume)")
    return p


class _NotHere(argparse.Action):
    """A shared flag that ``bnn-zoo uci`` does not take: refused in one line."""

    def __call__(self, parser, namespace, values, option_string=None):
        why = " (the local-reparameterisation estimator is --method local_reparam)" \
            if option_string == "--estimator" else ""
        parser.error(f"{option_string} is not a setting of bnn-zoo uci{why}")


def _pair(text):
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 2 or not all(np.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be two positive numbers ALPHA,BETA, got {text!r}")
    return values


def _rate(text):
    rate = positive_float(text)
    if rate >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text!r}")
    return rate


def main(argv=None, prog: str = "bnn-zoo uci") -> int:
    """``bnn-zoo uci``: exit 0 when every fit is in the store and the table is written, 2 on bad input.

    Parameters
    ----------
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo uci"
        The program's name in usage and error messages.

    Returns
    -------
    int
        0 on success and for ``--help``; 2 on bad flags or input (an unknown data set, a
        split out of range, a missing or damaged file: one line on stderr, before any fit);
        130 on an interrupt, after which the same command goes on.
    """
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code
    try:
        from bnn_zoo.inference.advi.prepare import MAX_STEPS

        if args.steps > MAX_STEPS:
            raise UsageError(f"--steps {args.steps:,} is more than {MAX_STEPS:,}")
        check_scheduler(args.scheduler)
        check_writable(args.out, "--out")
        use_compiled_programs()
        with run_lock(args.out / "uci"), xla_flags(worker_xla_flags()), keep_interrupts():
            t0 = time.perf_counter()
            path, fitted = run_job(args, report=lambda line: print(line, file=sys.stderr))
            seconds = time.perf_counter() - t0
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted (rerun the same command to go on)", file=sys.stderr)
        return 130
    print((path.parent / "table.md").read_text())
    print(f"{fitted} fits in {seconds:.1f} s; table: {path}")
    return 0

