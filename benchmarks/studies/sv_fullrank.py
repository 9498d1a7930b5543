"""Full rank at its defaults on a 402-dimensional model: pymc-examples' stochastic volatility.

    python -m benchmarks.studies.sv_fullrank nuts   # the reference, once (about 10 min on 2 cores)
    python -m benchmarks.studies.sv_fullrank fit [--methods advi,fullrank_advi,lowrank_advi]

The model is pymc-examples' "Stochastic volatility model" as its page writes it (a
``GaussianRandomWalk`` of 400 log volatilities, Student-t returns, ``nu ~ Exponential(0.1)``),
on returns simulated from it (step size 0.1, nu 8). ``nuts`` runs ``pm.sample`` (4 chains of
2,000 draws after 2,000 tuning steps, target acceptance 0.95) and stores the posterior means and
sds of ``nu`` and ``step_size`` with r-hat and divergences. ``fit`` runs ``bnn_zoo.fit`` at its
defaults with each method and prints its final ELBO (mean of the last 1,000 steps), nu's and
step_size's posterior mean from 4,000 draws against NUTS's, and the seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm

RESULT = Path(__file__).resolve().parents[1] / "results" / "studies" / "sv_nuts.json"


def returns(n: int = 400, seed: int = 0) -> np.ndarray:
    """Daily returns simulated from the model: a random walk of log volatilities, Student-t noise."""
    rng = np.random.default_rng(seed)
    log_vol = np.log(0.01) + np.cumsum(rng.normal(0, 0.1, n))
    return np.exp(log_vol) * rng.standard_t(8, n)


def model(y: np.ndarray | None = None) -> pm.Model:
    """The stochastic-volatility model, written as pymc-examples writes it."""
    y = returns() if y is None else y
    with pm.Model(coords={"time": np.arange(len(y))}) as m:
        step_size = pm.Exponential("step_size", 10)
        volatility = pm.GaussianRandomWalk("volatility", sigma=step_size, dims="time",
                                           init_dist=pm.Normal.dist(0, 100))
        nu = pm.Exponential("nu", 0.1)
        pm.StudentT("returns", nu=nu, lam=np.exp(-2 * volatility), observed=y, dims="time")
    return m


def nuts(seed: int = 0) -> dict:
    import arviz as az

    with model():
        idata = pm.sample(2000, tune=2000, chains=4, cores=2, target_accept=0.95, random_seed=seed,
                          progressbar=False)
    post = idata.posterior
    out = {v: {"mean": float(post[v].mean()), "sd": float(post[v].std())} for v in ("nu", "step_size")}
    summary = az.rhat(idata)
    out["rhat_max"] = float(max(float(summary[v].max()) for v in ("nu", "step_size", "volatility")))
    out["divergences"] = int(idata.sample_stats["diverging"].sum())
    return out


def fits(methods) -> list[dict]:
    import bnn_zoo

    ref = json.loads(RESULT.read_text()) if RESULT.exists() else None
    rows = []
    for method in methods:
        m = model()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            result = bnn_zoo.fit(m, method=method, progressbar=False)
            seconds = time.perf_counter() - t0
            draws = bnn_zoo.sample(result, 4000)
        post = draws.posterior
        row = dict(method=method, elbo_final=round(result.elbo_final, 1), seconds=round(seconds, 1),
                   warnings=[str(w.message)[:80] for w in caught])
        for v in ("nu", "step_size"):
            row[v] = round(float(post[v].mean()), 3)
            if ref:
                row[f"{v}_error_ref_sd"] = round((row[v] - ref[v]["mean"]) / ref[v]["sd"], 2)
        if "q_pareto_k" in draws.attrs:
            row["q_pareto_k"] = draws.attrs["q_pareto_k"]
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.sv_fullrank", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["nuts", "fit"])
    p.add_argument("--methods", default="advi,fullrank_advi")
    args = p.parse_args(argv)
    if args.what == "nuts":
        out = nuts()
        RESULT.write_text(json.dumps(out, indent=1) + "\n")
        print(out)
    else:
        fits(args.methods.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
