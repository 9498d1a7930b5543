"""The Laplace fit's L-BFGS search with the process's BLAS threads and with one, alone and beside busy processes.

    python -m benchmarks.laplace_threads [--models NAME,...] [--busy 1] [--repeats 5] [--json FILE]

scipy's L-BFGS-B does its arithmetic through BLAS (OpenBLAS, in NumPy's and
scipy's wheels), which starts as many threads as the machine has cores. On
vectors of a model's size they gain nothing, and where the cores are busy they
wait on each other: :data:`bnn_zoo.inference.laplace.LBFGS_BLAS_THREADS` runs
the search with one. For each model (of :mod:`benchmarks.reference_posteriors`),
this times :func:`bnn_zoo.inference.laplace.fit_laplace` (the mode search from
four starts, as ``method="auto"`` runs it; compiled before the clock), the
median of ``--repeats``, with the process's own threads and with one, alone,
then with ``--busy`` other processes spinning on the CPU. Prints each time and
its ratio to one thread's in the same conditions.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings

import numpy as np

DEFAULT_MODELS = ("eight_schools_centered", "logistic_breast_cancer", "hierarchical_regression")


def _median_seconds(model, repeats: int) -> float:
    from bnn_zoo.inference.laplace import fit_laplace
    from bnn_zoo.inference.methods import Laplace

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fit_laplace(model, Laplace(starts=4))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.laplace_threads", description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model names")
    p.add_argument("--busy", type=int, default=1, help="processes spinning on the CPU in the loaded runs")
    p.add_argument("--repeats", type=int, default=5, help="timed fits per setting (the median is printed)")
    p.add_argument("--json", default=None, help="write the rows here")
    args = p.parse_args(argv)
    from benchmarks.reference_posteriors import MODELS

    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown or args.busy < 0 or args.repeats < 1:
        print(f"{p.prog}: error: " + (f"unknown models {', '.join(unknown)}" if unknown
                                      else "--busy must be at least 0 and --repeats at least 1"), file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    from bnn_zoo.inference import laplace

    rows = []
    for name in args.models.split(","):
        model = MODELS[name][0]()
        _median_seconds(model, 1)  # compiled before the clock
        row = {"model": name}
        for load in ("alone", "busy"):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(args.busy if load == "busy" else 0)]
            try:
                for threads in (None, 1):  # the process's own, then one
                    laplace.LBFGS_BLAS_THREADS = threads
                    row[f"{load}_{'own' if threads is None else 'one'}"] = _median_seconds(model, args.repeats)
            finally:
                laplace.LBFGS_BLAS_THREADS = 1
                for s in spinners:
                    s.kill()
                    s.wait()
        rows.append(row)
        print(f"{name}: alone {row['alone_own']:.3f} s with the process's BLAS threads, {row['alone_one']:.3f} s with "
              f"one ({row['alone_own'] / row['alone_one']:.2f}x); beside {args.busy} busy process(es) "
              f"{row['busy_own']:.3f} s against {row['busy_one']:.3f} s ({row['busy_own'] / row['busy_one']:.2f}x)",
              flush=True)
    if args.json:
        from bnn_zoo.inference.support.io import write_json

        write_json(args.json, {"busy": args.busy, "repeats": args.repeats, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
