"""Mean-field ADVI against NUTS on a regression task: how much out-of-range uncertainty q loses.

    python -m benchmarks.studies.regression_nuts [--task sine] [--draws 1000] [--tune 1500] [--chains 2]
        [--json benchmarks/results/studies/regression_nuts_sine_cpu.json]

Fits the task's model with ``bnn-zoo regression``'s settings (beta 1, its
architecture) by mean-field ADVI, once and as the experiment's default
mixture of restarts (5 for the sine wave), then samples
the same PyMC model with NUTS (NumPyro's sampler), one chain after the
other. For each posterior it prints the in-range RMSE of the predictive mean
and the mean sd of the network output inside and outside the data range,
and their ratio (``sd_ratio_out_in``, whose target is >= 3): the NUTS
chains separately, since a BNN's chains explore different modes and do not
mix. A slow reference (minutes), not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pymc as pm

import bnn_zoo
from bnn_zoo.data import regression
from bnn_zoo.experiments.harness import runner
from bnn_zoo.experiments.regression.command import ARCHITECTURE, DEFAULTS, EXPERIMENT, RegressionConfig, spread


def _summary(mu: np.ndarray, task) -> dict:
    """The experiment's metrics of network outputs ``mu`` (draws, grid points)."""
    return spread(mu.mean(0), mu.std(0), task)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=regression.TASKS, default="sine")
    p.add_argument("--draws", type=int, default=1000, help="NUTS draws per chain")
    p.add_argument("--tune", type=int, default=1500, help="NUTS tuning steps per chain")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = p.parse_args(argv)
    task = regression.load(args.task, seed=args.seed)
    arch = ARCHITECTURE[args.task]
    rows = {}

    fits = {"mean-field ADVI": 1}
    if arch["restarts"] > 1:
        fits[f"mixture of {arch['restarts']} MF fits"] = arch["restarts"]
    for name, restarts in fits.items():
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            cfg = RegressionConfig(task=args.task, beta=1.0, seed=args.seed, restarts=restarts,
                                   hidden=arch["hidden"], activation=arch["activation"],
                                   dataset="regression", out=Path(out), figures=Path(out),
                                   progress=False, **{k: v for k, v in DEFAULTS.items()
                                                      if k not in ("restarts", "beta")})
            vi = runner.run(EXPERIMENT, cfg, data=task).metrics
            rows[name] = {k: vi[k] for k in ("rmse_in", "sd_in", "sd_out", "sd_ratio_out_in")}
            rows[name]["seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = EXPERIMENT.model(cfg, task)
    with model:
        idata = pm.sample(draws=args.draws, tune=args.tune, chains=args.chains, cores=1,
                          nuts_sampler="numpyro", target_accept=0.9, random_seed=args.seed,
                          progressbar=False)
    seconds = time.perf_counter() - t0
    # The same predictions as ADVI's, from NUTS's posterior.
    mu = bnn_zoo.predict(model, {"X": task.x_grid[:, None]}, idata=idata,
                         var_names=["mu"])["predictions"]["mu"].values
    divergent = idata.sample_stats["diverging"].values.sum(axis=1)
    for c in range(args.chains):
        rows[f"NUTS chain {c}"] = {**_summary(mu[c], task), "seconds": seconds / args.chains,
                                   "divergences": int(divergent[c])}
    rows["NUTS, all chains"] = {**_summary(mu.reshape(-1, mu.shape[-1]), task), "seconds": seconds,
                                "divergences": int(divergent.sum())}

    print(f"{args.task}: {len(task.x_train)} points, hidden layers {arch['hidden']} "
          f"{arch['activation']}, beta 1; NUTS {args.chains} x {args.draws} draws "
          f"after {args.tune} tuning steps (a chain's seconds: the total / chains; ADVI's "
          "include its draws and predictions)")
    print(f"{'':22s} {'rmse_in':>8s} {'sd_in':>8s} {'sd_out':>8s} {'out/in':>7s} {'seconds':>8s}")
    for name, r in rows.items():
        print(f"{name:22s} {r['rmse_in']:8.4f} {r['sd_in']:8.4f} {r['sd_out']:8.4f} "
              f"{r['sd_ratio_out_in']:7.2f} {r['seconds']:8.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
