"""PSIS-LOO of a toy fit: :func:`bnn_zoo.loo` beside ArviZ's ``az.loo_approximate_posterior``.

    python -m benchmarks.loo_speed [--draws 500] [--repeats 5] [--json FILE]

The moons data and model of ``bnn-zoo moons`` at its defaults (700 training points, the 2-5-5-2
network under the normal prior and inverse-gamma hyperprior), fitted by mean-field ADVI (2,000
steps: the time of LOO depends on the draws and points, not on how well q fits), then
``--draws`` draws with their ``log_p`` and ``log_q`` (:func:`bnn_zoo.sample`). Each LOO runs once
to compile or warm up, then ``--repeats`` times in alternation; prints the medians, their ratio,
and the largest differences between the two results' ``elpd_i`` and Pareto k.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from bnn_zoo.inference.support.io import write_json


def _host() -> str:
    """The CPU's model name, and whether it has AVX-512 (Linux; the machine's type elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    return f"{name}, {os.cpu_count()} cores, {'AVX-512' if ' avx512f' in info else 'no AVX-512'}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.loo_speed", description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=500, help="draws from q (the toy experiment's default)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs of each, after one untimed")
    p.add_argument("--json", help="write the row here")
    args = p.parse_args(argv)

    import arviz as az

    import bnn_zoo
    from bnn_zoo.experiments.toy.priors import ToyConfig, data, model

    cfg = ToyConfig(dataset="moons")
    split = data(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 2,000 steps do not converge, and a network's k is large
        result = bnn_zoo.fit(model(cfg, split), steps=2000, random_seed=0, progressbar=False)
        idata = bnn_zoo.sample(result, args.draws, random_seed=0)
    stats = idata["sample_stats"]
    log_p, log_q = stats["log_p"].values.ravel(), stats["log_q"].values.ravel()

    runs = {"bnn_zoo.loo": lambda: bnn_zoo.loo(idata),
            "az.loo_approximate_posterior": lambda: az.loo_approximate_posterior(
                idata, log_p=log_p, log_q=log_q, var_name="y_obs")}
    times = {name: [] for name in runs}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Pareto-k warnings, from both
        for name, run in runs.items():
            out[name] = run()
        for _ in range(args.repeats):
            for name, run in runs.items():
                t0 = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t0)
    ours, theirs = out.values()
    row = {"draws": args.draws, "points": int(split.X_train.shape[0]),
           **{f"{name} s": float(np.median(t)) for name, t in times.items()},
           "ratio": float(np.median(times["bnn_zoo.loo"]) / np.median(times["az.loo_approximate_posterior"])),
           "elpd_i max abs diff": float(np.abs(ours.elpd_i.values - theirs.elpd_i.values).max()),
           "pareto_k max abs diff": float(np.abs(ours.pareto_k.values - theirs.pareto_k.values).max()),
           "host": _host()}
    for key, value in row.items():
        print(f"{key:>28}: {value:.4g}" if isinstance(value, float) else f"{key:>28}: {value}")
    if args.json:
        write_json(args.json, row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
