"""What ``q_pareto_k`` vouches for and what it misses, case by case (the numbers of Choosing q's "Did it work").

    python -m benchmarks.studies.k_cases [--json benchmarks/results/studies/k_cases.json]

Each case is fitted at the library's defaults with ``random_seed=0`` and prints one line:

- ``reweighted``: Laplace on three posteriordb regressions with gold-standard references (arK, an
  autoregression; kidscore_interaction; diamonds): the largest error of q's own means and of the
  PSIS-reweighted ones (:func:`bnn_zoo.reweighted`), in reference sds, beside q's k on 4,000 draws.
- ``noise``: k is an estimate. Mean-field ADVI on a two-coefficient regression whose predictor
  sits far from 0 (so intercept and slope are correlated 0.99 and the mean-field q is far too
  narrow): k on 2,000 and on 20,000 draws of one q, and on three disjoint sets of 2,000.
- ``schools``: the same near 0.7: mean-field ADVI on the centred eight schools, k on three disjoint
  sets of 4,000 draws of one q.
- ``loo``: PSIS-LOO's pointwise k on Getting started's regression (200 points, three
  parameters): the share above 0.7 and the largest after mean-field fits of 5,000 and 20,000 steps,
  and after NUTS (``pm.sample`` on NumPyro, 4 x 1,000), with each one's ELPD.
- ``modes``: full rank on an equal mixture of N(-4, 1) and N(4, 1): k, and the share of q's draws
  at the right-hand mode.
- ``funnel``: ``auto``'s Gaussian rung alone on Neal's funnel (v ~ N(0, 3), nine x ~ N(0, e^(v/2)))
  after 3,000 steps: k on 8,000 draws and on their halves, k on 32,000 more draws where it looks
  again, whether it passed, and q's mean and sd of v against the posterior's 0 and 3.
- ``tail``: ``auto``'s Laplace rung alone on a HalfNormal(1) scale of three observations near
  0.001, whose posterior falls as s^-3 beyond them: k, whether it passed, and the resampled draws'
  median and sd against the exact ones (a grid of 200,000 points).
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np


def _reweighted(name: str) -> dict:
    import bnn_zoo
    from benchmarks import posteriordb

    result = bnn_zoo.fit(posteriordb.POSTERIORS[name](), method="laplace", random_seed=0)
    idata = bnn_zoo.sample(result, 4000, random_seed=0)
    weighted = bnn_zoo.reweighted(idata)
    raw = weighted_err = 0.0
    for var, (mean, sd) in posteriordb.reference_moments(name).items():
        own = idata["posterior"][var].mean(("chain", "draw")).values
        raw = max(raw, float(np.max(np.abs(own - mean) / sd)))
        weighted_err = max(weighted_err, float(np.max(np.abs(weighted[var].sel(stat="mean").values - mean) / sd)))
    return {"case": "reweighted", "model": name, "k": float(idata.attrs["q_pareto_k"]),
            "raw_error_sd": raw, "reweighted_error_sd": weighted_err}


def _noise() -> dict:
    import pymc as pm

    import bnn_zoo
    from bnn_zoo.inference.diagnostics import qcheck

    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 1.0, size=50)
    with pm.Model() as model:
        a, b = pm.Normal("a", 0, 100), pm.Normal("b", 0, 100)
        pm.Normal("y", a + b * x, 1.0, observed=1.0 + 2.0 * x + rng.normal(size=50))
    result = bnn_zoo.fit(model, method="advi", random_seed=0, progressbar=False)
    idata = bnn_zoo.sample(result, 20_000, random_seed=0)
    log_p, log_q = (idata["sample_stats"][v].values.ravel() for v in ("log_p", "log_q"))
    k = lambda part: float(qcheck.q_pareto_k(log_p[part], log_q[part])[0])  # noqa: E731
    return {"case": "noise", "k_2000": k(slice(0, 2000)), "k_20000": k(slice(None)),
            "k_2000_sets": [k(slice(i * 2000, (i + 1) * 2000)) for i in (1, 2, 3)]}


def _schools() -> dict:
    import bnn_zoo
    from bnn_zoo.inference.diagnostics import qcheck
    from benchmarks.reference_posteriors import eight_schools_centered

    result = bnn_zoo.fit(eight_schools_centered(), method="advi", random_seed=0, progressbar=False)
    idata = bnn_zoo.sample(result, 12_000, random_seed=0)
    log_p, log_q = (idata["sample_stats"][v].values.ravel() for v in ("log_p", "log_q"))
    return {"case": "schools", "k_4000_sets": [float(qcheck.q_pareto_k(log_p[i * 4000:(i + 1) * 4000],
                                                                       log_q[i * 4000:(i + 1) * 4000])[0])
                                               for i in range(3)]}


def _loo() -> dict:
    import pymc as pm

    import bnn_zoo

    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, size=200)
    y = 0.5 + 1.5 * x + rng.normal(0.0, 0.3, size=200)
    with pm.Model(coords={"obs": np.arange(200)}) as model:
        x_data = pm.Data("x", x, dims="obs")
        intercept, slope = pm.Normal("intercept", 0, 5), pm.Normal("slope", 0, 5)
        pm.Normal("y", intercept + slope * x_data, pm.HalfNormal("sigma", 1), observed=y, dims="obs")
    row = {"case": "loo"}
    for steps in (5_000, 20_000):
        elpd = bnn_zoo.loo(bnn_zoo.sample(bnn_zoo.fit(model, steps=steps, random_seed=0, progressbar=False), 1000))
        k = elpd.pareto_k.values
        row.update({f"advi_{steps}_share_above": float(np.mean(k > 0.7)), f"advi_{steps}_k_max": float(k.max()),
                    f"advi_{steps}_elpd": float(elpd.elpd)})
    with model:
        idata = pm.sample(1000, tune=1000, chains=4, nuts_sampler="numpyro", random_seed=0, progressbar=False,
                          idata_kwargs={"log_likelihood": True})
    import arviz as az

    nuts = az.loo(idata)
    return row | {"nuts_k_max": float(nuts.pareto_k.max()), "nuts_elpd": float(nuts.elpd)}


def _modes() -> dict:
    import pymc as pm

    import bnn_zoo

    with pm.Model() as model:
        pm.NormalMixture("x", w=[0.5, 0.5], mu=[-4.0, 4.0], sigma=1)
    result = bnn_zoo.fit(model, method="fullrank_advi", random_seed=0, progressbar=False)
    idata = bnn_zoo.sample(result, 4000, random_seed=0)
    x = idata["posterior"]["x"].values.ravel()
    return {"case": "modes", "k": float(idata.attrs["q_pareto_k"]), "share_right": float(np.mean(x > 0))}


def _funnel() -> dict:
    import pymc as pm

    import bnn_zoo

    with pm.Model() as model:
        v = pm.Normal("v", 0, 3)
        pm.Normal("x", 0, pm.math.exp(v / 2), shape=9)
    result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("gaussian",)), steps=3000, random_seed=0,
                         progressbar=False)
    entry = result.config["auto"]["path"][-1]
    return {"case": "funnel", "k": entry["q_pareto_k_first"], "k_halves": list(entry["q_pareto_k_halves"]),
            "k_more": entry["q_pareto_k_more"], "passed": bool(entry["passed"]),
            "v_mean": float(result.mean["v"]), "v_sd": float(result.sd["v"]),
            "v_mean_error_sd": abs(float(result.mean["v"])) / 3.0}


def _tail() -> dict:
    import pymc as pm
    import scipy.stats as st

    import bnn_zoo

    y = np.array([0.001, -0.0012, 0.0008])
    with pm.Model() as model:
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", 0.0, s, observed=y)
    result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("laplace",)), random_seed=0, progressbar=False)
    idata = bnn_zoo.sample(result, 4000, random_seed=0)
    draws = idata["posterior"]["s"].values.ravel()
    grid = np.linspace(1e-5, 5.0, 200_000)
    log_post = st.halfnorm.logpdf(grid) + st.norm.logpdf(y[:, None], 0.0, grid).sum(0)
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    mean = float(np.sum(w * grid))
    median = float(grid[np.searchsorted(np.cumsum(w), 0.5)])
    return {"case": "tail", "k": float(idata.attrs["q_pareto_k"]),
            "passed": bool(result.config["auto"]["passed"]), "resampled": "importance_resampled" in idata.attrs,
            "median": float(np.median(draws)), "exact_median": median,
            "sd": float(draws.std()), "exact_sd": float(np.sqrt(np.sum(w * (grid - mean) ** 2)))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.k_cases", description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the rows here as well")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = [_reweighted(name) for name in ("arK-arK", "kidiq-kidscore_interaction", "diamonds-diamonds")]
    rows += [_noise(), _schools(), _loo(), _modes(), _funnel(), _tail()]
    for row in rows:
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else
                        f"{k} {', '.join(f'{x:.2f}' for x in v)}" if isinstance(v, list) else f"{k} {v}"
                        for k, v in row.items()), flush=True)
    if args.json:
        from bnn_zoo.inference.support.io import write_json

        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
