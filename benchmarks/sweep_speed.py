"""Fits per second: the sweep's vectorised tasks against one run at a time, in one process.

    python -m benchmarks.sweep_speed [--fits 8] [--batch 48[,384...]] [--steps 10000] [--float32] [--no-warmup]

Both paths fit the same toy configurations at the experiment's defaults
(normal-inversegamma on moons at noise 0.3, 700 training and 10,000 test
points, 6 restarts picked at a fifth of the steps, 500 draws, PSIS-LOO and
the test metrics): one at a time as ``bnn-zoo moons`` runs them
(``runner.run``: fit, its restarts vectorised, sample, predict, LOO, write),
and together as ``bnn-zoo sweep`` runs a task (``sweep.fits.fit_task``: one
vmapped fit program, then one device program that scores every fit,
``sweep.evaluation.score``). On a CPU one core, the sweep workers' XLA flags for both
(``runtime.worker_xla_flags``); on an accelerator no pin. Each path is run once
untimed first, so that compilation is not timed (``--no-warmup``: not, and the
split shows it). Each vectorised task's line is followed by where its time went
per fit, from its records: the fit program (with its compilation and first
chunk of steps), the evaluation program and its compilation, and the host's
share (making the data and the noise, writing the records).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path


def main(argv=None) -> int:
    from bnn_zoo.experiments.harness import runner, runtime
    from bnn_zoo.experiments.sweep import command as sweep, fits as sweep_fits, spec as sweep_spec
    from bnn_zoo.experiments.toy import priors as toy_priors

    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep_speed", description=__doc__.splitlines()[0])
    p.add_argument("--fits", type=int, default=8,
                   help="fits timed one at a time (0: time the vectorised task of --batch alone)")
    p.add_argument("--batch", type=lambda text: [int(b) for b in text.split(",")], default=[48],
                   help="fits in the timed vectorised task; a comma-separated list times each")
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--float32", action="store_true", help="fit and evaluate in single precision")
    p.add_argument("--no-warmup", action="store_true",
                   help="time each path's first run, compilation included (where device time is scarce)")
    args = p.parse_args(argv)
    for flag in runtime.worker_xla_flags():  # before JAX starts its backend
        runtime.add_xla_flag(flag)
    import jax

    platform = jax.default_backend()
    if platform == "cpu" and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"platform: {platform} ({jax.devices()[0].device_kind})", flush=True)
    largest = max(args.batch)
    sweep_args = sweep.build_parser().parse_args(
        ["--out", "unused", "--noise", "0.3", "--seeds", str(max(args.fits, largest) + 2),
         "--steps", str(args.steps)] + (["--float32"] if args.float32 else []))
    cfgs = sweep_spec.specs(sweep_args)
    work = Path(tempfile.mkdtemp(prefix="sweep-speed-"))
    exp = toy_priors.experiment("moons")
    warnings.simplefilter("ignore")

    def one_at_a_time(part):
        for cfg in part:
            runner.run(exp, dataclasses.replace(cfg, out=work, figures=work, keep_draws=False))

    def split(records, seconds):
        """Where a vectorised task's time went, per fit, from its records' own timings."""
        n = len(records)
        part = {name: 1e3 * sum(r["record"][name] for r in records) / n
                for name in ("fit_seconds", "fit_compile_seconds", "evaluate_seconds", "evaluate_compile_seconds")}
        host = 1e3 * seconds / n - part["fit_seconds"] - part["evaluate_seconds"] - part["evaluate_compile_seconds"]
        return (f"  split per fit: fit program {part['fit_seconds']:.1f} ms (compiling and its first chunk "
                f"{part['fit_compile_seconds']:.1f}), evaluation program {part['evaluate_seconds']:.1f} ms, "
                f"compiling it {part['evaluate_compile_seconds']:.1f} ms, host {host:.1f} ms")

    rows = []
    paths = [("one at a time (bnn-zoo moons)", one_at_a_time, cfgs[2:2 + args.fits], cfgs[:1]),
             (f"vectorised, {args.fits} fits a task", sweep_fits.fit_task, cfgs[2:2 + args.fits], cfgs[:args.fits])]
    paths += [(f"vectorised, {b} fits a task", sweep_fits.fit_task, cfgs[2:2 + b], cfgs[:b]) for b in args.batch]
    for name, fn, part, warm in paths[2:] if args.fits == 0 else paths:
        if not args.no_warmup:
            fn(warm)  # compiles (and fills JAX's caches) for this path
        t0 = time.perf_counter()
        records = fn(part)
        seconds = time.perf_counter() - t0
        rows.append((name, len(part), seconds))
        print(f"{name:34s} {len(part):4d} fits {seconds:8.1f} s {len(part) / seconds:7.3f} fits/s", flush=True)
        if records:
            print(split(records, seconds), flush=True)
    base = rows[0][1] / rows[0][2]
    for name, n, seconds in rows[1:] if args.fits else []:
        print(f"{name}: {n / seconds / base:.2f}x the fits per second of one at a time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
