"""ADVI against the alternatives in Loya's slides, on the same models and data: ``bnn-zoo alternatives``.

Loya, "Bayesian Neural Networks" (lecture slides), lists HMC, MC dropout, SGLD, SWAG and ensembles.

    bnn-zoo alternatives toy          # moons, noise 0.2, N(0, 1) weights: every method against NUTS
    bnn-zoo alternatives regression   # sine, Blundell's curve, and the sine with a gap (Foong 2019)
    bnn-zoo alternatives mnist        # the 2x400 MLP: test error, rotations 0-180, OOD detection

Each method runs in its own process, one after another (``--processes 0``:
in this one), so that its wall time and peak memory are its own. A method's
predictions go to ``<out>/draws/<key>.nc`` and its record to
``<out>/records/<key>.parquet`` (the sweep store's layout; a run skips the
methods already there), where ``<key>`` is ``<benchmark>-<case>-s<seed>-<method>``.
Then each case's comparison goes to ``<out>/<benchmark>-<case>-s<seed>.csv``
and ``.md`` (MNIST adds ``..._shift.csv``, the metrics per rotation and
out-of-distribution set), and its figures to ``--figures``. With ``--quick``,
``-quick`` follows the seed in these names.

Methods (``--methods``): NUTS (``pm.sample`` with NumPyro), mean-field ADVI
with the experiment's defaults (``advi``), full-rank ADVI from it
(``fullrank_advi``), the mixture of 6 mean-field restarts (``advi_mixture``),
mean-field ADVI with the prior study's best pair (``advi_best_prior``, toy
only), SGLD, cyclical SGLD, a deep ensemble of 5 MAP fits, MC dropout
and SWAG (:mod:`bnn_zoo.inference.alternatives.baselines`, :mod:`bnn_zoo.inference.alternatives.dropout`).

The cases live in :mod:`~bnn_zoo.experiments.alternatives.cases`, one
method's run in :mod:`~bnn_zoo.experiments.alternatives.fits`; this module
compares the methods (:func:`compare`) and is the command (:func:`main`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from pathlib import Path

from bnn_zoo.experiments.alternatives.cases import (BENCHES, BENCHMARKS, METHODS, NOT_ON, REGRESSION_TASKS,
                                                    Benchmark, Spec)
from bnn_zoo.experiments.alternatives.fits import load_draws, run_one
from bnn_zoo.experiments.harness.flags import Parser, UsageError, check_writable, names, positive_int, seed
from bnn_zoo.experiments.harness.runtime import hold_interrupts, keep_interrupts
from bnn_zoo.experiments.harness.store import Store

__all__ = ["build_parser", "compare", "main", "specs"]


# --- comparing the methods -----------------------------------------------------------


#: ``--epochs``' default: each method's epochs on MNIST.
MNIST_EPOCHS = 10

def compare(spec: Spec, bench: Benchmark, out: Path, methods: list[str], figures: Path) -> "pd.DataFrame":
    """The benchmark's table (methods as rows), written to ``out``; and its figures.

    Writes ``<out>/<key prefix>.csv`` and ``.md`` (and, for MNIST, ``<key prefix>_shift.csv``), and
    the figures of :func:`bnn_zoo.evaluation.baseline_tables.figures` into ``figures``.

    Parameters
    ----------
    spec : Spec
        The case.
    bench : Benchmark
        The case's data and inputs.
    out : pathlib.Path
        The store's folder, with every method's draws and record.
    methods : list of str
        The methods to compare.
    figures : pathlib.Path
        The figures' folder.

    Returns
    -------
    pandas.DataFrame
        The table: :func:`bnn_zoo.evaluation.baseline_tables.table`'s metrics, and each method's
        seconds, peak memory and checks.
    """
    import pandas as pd

    from bnn_zoo.evaluation import baseline_tables as report

    store = Store(out)
    records = store.table([f"{spec.key_prefix}-{m}" for m in methods]).set_index("method")
    draws = {m: load_draws(out, f"{spec.key_prefix}-{m}") for m in methods}
    table = report.table(spec.benchmark, bench, draws)
    table = table.join(records[[c for c in ("seconds", "fit_seconds", "predict_seconds", "rss_before_mb",
                                            "fit_peak_rss_mb", "peak_rss_mb",
                                            "divergences", "rhat_pred_max", "rhat_pred_over_101", "converged")
                                if c in records]])
    table.index.name = "method"
    report.figures(spec.benchmark, bench, draws, figures, spec.key_prefix)
    from bnn_zoo.inference.support.io import atomic_write, write_text

    atomic_write(out / f"{spec.key_prefix}.csv", lambda tmp: table.to_csv(tmp, float_format="%.6g"))
    if spec.benchmark == "mnist":
        shift = report.shift_table(bench, draws)
        atomic_write(out / f"{spec.key_prefix}_shift.csv", lambda tmp: shift.to_csv(tmp, index=False,
                                                                                 float_format="%.6g"))
    write_text(out / f"{spec.key_prefix}.md", report.markdown(table))
    return table


# --- the command line ----------------------------------------------------------------


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The command's flags.

    Parameters
    ----------
    prog : str
        The command's name in help and errors.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.harness.flags.Parser`: a bad flag is one line on stderr and exit code 2.
    """
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("benchmark", choices=BENCHMARKS, help="the model and data every method fits")
    p.add_argument("--methods", type=names(METHODS, "method"), default=None,
                   help=f"comma-separated, from {', '.join(METHODS)} (default: all the benchmark runs)")
    p.add_argument("--cases", type=str, default=None,
                   help="toy: the data set (moons or circles; default moons); regression: tasks from "
                        f"{', '.join(REGRESSION_TASKS)} (default all)")
    p.add_argument("--noise", type=float, default=0.2, help="toy: the data's noise")
    p.add_argument("--seed", type=seed, default=0, help="the data's and every method's seed")
    p.add_argument("--epochs", type=positive_int, default=MNIST_EPOCHS, help="mnist: epochs of every method")
    p.add_argument("--limit-train", type=positive_int, default=None, help="mnist: use the first N training images")
    p.add_argument("--data-dir", default=None, help="mnist: folder of the IDX files (default $MNIST_DIR or a download)")
    p.add_argument("--quick", action="store_true", help="tiny data and few steps (what the tests run)")
    p.add_argument("--processes", type=int, choices=(0, 1), default=1,
                   help="1: each method in a fresh process, for its own time and memory; 0: all here")
    p.add_argument("--out", type=Path, default=Path("results/alternatives"),
                   help="the store of records and draws (rerun to go on)")
    p.add_argument("--figures", type=Path, default=Path("figures/alternatives"), help="figures folder")
    return p


def specs(args) -> list[Spec]:
    """The cases a command line asks for.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of Spec
        One per case of ``--cases`` (MNIST: one).

    Raises
    ------
    bnn_zoo.experiments.harness.flags.UsageError
        For an unknown case, ``--cases`` with mnist, an mnist flag with another
        benchmark, or a ``--noise`` outside (0, 10).
    """
    if args.benchmark == "toy":
        cases = (args.cases or "moons").split(",")
        bad = [c for c in cases if c not in ("moons", "circles")]
    elif args.benchmark == "regression":
        cases = (args.cases or ",".join(REGRESSION_TASKS)).split(",")
        bad = [c for c in cases if c not in REGRESSION_TASKS]
    else:
        if args.cases is not None:
            raise UsageError(f"--cases {args.cases}: bnn-zoo alternatives mnist has one case, the 2x400 MLP; drop it")
        cases, bad = ["mlp2x400"], []
    if bad:
        raise UsageError(f"--cases: unknown {', '.join(bad)}")
    given = [flag for flag, value, default in (("--epochs", args.epochs, MNIST_EPOCHS),
                                               ("--limit-train", args.limit_train, None),
                                               ("--data-dir", args.data_dir, None)) if value != default]
    if args.benchmark != "mnist" and given:
        raise UsageError(f"{given[0]} sets the mnist benchmark, not {args.benchmark}; drop it")
    if not (0 < args.noise < 10):
        raise UsageError(f"--noise must be in (0, 10), got {args.noise}")
    return [Spec(args.benchmark, c, seed=args.seed, quick=args.quick, noise=args.noise, data_dir=args.data_dir,
                 epochs=args.epochs, limit_train=args.limit_train) for c in cases]


def main(argv=None, prog: str = "bnn-zoo alternatives") -> int:
    """Run ``bnn-zoo alternatives``: every method not stored yet, then each case's comparison.

    Parameters
    ----------
    argv : list of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo alternatives"
        The command's name in help and errors.

    Returns
    -------
    int
        The exit code: 0 on success and for ``--help``; 2 on a bad flag value, a missing MNIST
        or an unwritable folder (one line on stderr, before any fit); 130 on an interrupt (one
        line), after which the same command goes on from the methods stored.
    """
    try:
        args = build_parser(prog).parse_args(argv)
    except SystemExit as exit_:  # --help (0), or a bad flag: the parser's one line (2)
        return exit_.code
    try:
        todo = specs(args)
        methods = [m for m in (args.methods or METHODS) if m not in NOT_ON.get(args.benchmark, ())]
        skipped = sorted(set(args.methods or ()) & set(NOT_ON.get(args.benchmark, ())))
        if skipped:
            raise UsageError(f"--methods: {', '.join(skipped)} do not run on {args.benchmark}")
        if args.benchmark == "mnist":
            from bnn_zoo.data import mnist

            mnist.fetch(args.data_dir)  # a clear error before any fit
        check_writable(args.out, "--out")
        check_writable(args.figures, "--figures")
    except (UsageError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    try:
        with keep_interrupts():
            _run_all(args, todo, methods)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (rerun the same command to go on)", file=sys.stderr)
        return 130
    return 0


def _run_all(args, todo: list[Spec], methods: list[str]) -> None:
    store = Store(args.out)
    store.open()
    store.report_damaged(lambda line: print(line, file=sys.stderr))
    for spec in todo:
        done = store.done()
        for method in methods:
            if f"{spec.key_prefix}-{method}" in done:
                print(f"{spec.key_prefix} {method}: done before (in {args.out})")
                continue
            record = _run(spec, method, args.out, args.processes)
            print(f"{spec.key_prefix} {method}: {record['seconds']:.1f} s, peak RSS {record['peak_rss_mb']:.0f} MB "
                  f"({record['rss_before_mb']:.0f} before the fit, {record['fit_peak_rss_mb']:.0f} after it)",
                  flush=True)
        bench = BENCHES[spec.benchmark](spec)
        table = compare(spec, bench, args.out, methods, args.figures)
        print(table.to_string(float_format=lambda v: f"{v:.4g}"))


def _run(spec: Spec, method: str, out: Path, processes: int) -> dict:
    """One method, here or in a fresh spawned process (which leaves Ctrl-C to this one, that ends it)."""
    if not processes:
        return run_one(spec, method, str(out))
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, spec, method, str(out)))
    try:
        with hold_interrupts(spawn=True):  # a Ctrl-C meanwhile is raised at its end: the child is ended below
            child.start()
        send.close()
        record, failure = receive.recv()
    except EOFError:  # it died without a word (a signal, the memory killer)
        child.join()
        raise RuntimeError(f"the process of {method} ended with exit code {child.exitcode} "
                           "before it stored its record") from None
    finally:
        receive.close()
        if child.is_alive():  # interrupted: its record and draws are written atomically, or not at all
            child.terminate()
        if child.pid is not None:
            child.join()
    if failure is not None:
        raise RuntimeError(f"{method} failed in its process:\n{failure}")
    return record


def _child(send, spec: Spec, method: str, out: str) -> None:
    """A spawned process's work: :func:`run_one`, and its record or its traceback back through ``send``."""
    try:
        result = (run_one(spec, method, out), None)
    except Exception:
        import traceback

        result = (None, traceback.format_exc())
    send.send(result)
    send.close()

