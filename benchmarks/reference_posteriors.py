"""ADVI's accuracy on models written outside this project, against NUTS, in one run.

    pip install --no-deps "pymc-extras==0.15.1"   # optional: adds its fit_advi and fit_pathfinder
    python -m benchmarks.reference_posteriors [--models NAME,...] [--json FILE] [--markdown FILE]

The models come from PyMC's example gallery and PyMC's own tests, with data inline, generated
or bundled with scikit-learn: eight schools (centred and non-centred), a hierarchical linear
regression with varying intercepts and slopes, logistic regression on scikit-learn's
breast-cancer data, a Poisson GLM, pymc-examples' BNN (full-batch and with ``pm.Minibatch``),
a model with bounded parameters (Beta) and one with a ``pm.Deterministic``.

The reference is NUTS (``pm.sample``, 4 chains of 1,000 draws after 1,000 tuning steps, target
acceptance 0.95),
computed once and stored as netCDF in ``benchmarks/results/reference_posteriors/`` with its
largest r-hat and its divergences; a reference with r-hat above 1.01 or any divergence is
marked unhealthy. The centred eight schools, whose NUTS diverges in its funnel, is scored
against the non-centred one's reference (the same posterior of ``mu``, ``tau`` and ``theta``),
and the ``pm.Minibatch`` BNN against the full-batch BNN's.

Each model is fitted by ``bnn_zoo.fit`` (mean-field, low-rank, full-rank and Laplace, at their
defaults; each with the Pareto k of its draws' importance ratios, ``bnn_zoo.sample``'s diagnostic),
``pm.fit`` (ADVI and FullRankADVI, at their defaults) and, where it is installed,
pymc-extras' ``fit_advi`` (at its defaults) and ``fit_pathfinder`` (at its defaults, and with one
path), one after another in this process; each then
draws 4,000 posterior samples, as many as the reference has. Per model and method: the wall time, fit and draws included
(compilation too); the largest error of a posterior mean over every scalar of every variable
the reference has, in units of the reference sd; and the range of the ratio of sds.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import scipy.stats
import pytensor
import xarray as xr

import bnn_zoo
from benchmarks import posteriordb
from bnn_zoo.inference.families.centring import candidates as centring_candidates
from bnn_zoo.inference.support.io import atomic_write, write_json, write_text

REFERENCES = Path(__file__).resolve().parent / "results" / "reference_posteriors"
REF_DRAWS = 1000  # per chain of the reference
DRAWS = 4000  # of each method: as many as the reference's, so that both means carry the same Monte Carlo error
SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


# --- the models ------------------------------------------------------------------------------

def eight_schools_centered():
    with pm.Model(coords={"school": np.arange(8)}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta = pm.Normal("theta", mu, tau, dims="school")
        pm.Normal("y", theta, SCHOOLS_SIGMA, observed=SCHOOLS_Y, dims="school")
    return model


def eight_schools_noncentered():
    with pm.Model(coords={"school": np.arange(8)}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta_tilde = pm.Normal("theta_tilde", 0, 1, dims="school")
        theta = pm.Deterministic("theta", mu + tau * theta_tilde, dims="school")
        pm.Normal("y", theta, SCHOOLS_SIGMA, observed=SCHOOLS_Y, dims="school")
    return model


def hierarchical_regression():
    """Varying intercepts and slopes over 8 groups of 15 points (non-centred, as PyMC's radon
    example writes them)."""
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(8), 15)
    x = rng.normal(size=len(groups))
    a, b = rng.normal(1.0, 0.5, 8), rng.normal(-0.5, 0.3, 8)
    y = a[groups] + b[groups] * x + rng.normal(0, 0.5, len(groups))
    with pm.Model(coords={"group": np.arange(8), "obs": np.arange(len(y))}) as model:
        g = pm.Data("g", groups, dims="obs")
        xd = pm.Data("x", x, dims="obs")
        mu_a, mu_b = pm.Normal("mu_a", 0, 2), pm.Normal("mu_b", 0, 2)
        sigma_a, sigma_b = pm.HalfNormal("sigma_a", 1), pm.HalfNormal("sigma_b", 1)
        za = pm.Normal("za", 0, 1, dims="group")
        zb = pm.Normal("zb", 0, 1, dims="group")
        intercept = mu_a + sigma_a * za
        slope = mu_b + sigma_b * zb
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", intercept[g] + slope[g] * xd, sigma, observed=y, dims="obs")
    return model


def _varying_slopes(centred: bool):
    """Varying intercepts and slopes over 6 groups of 4 to 50 points, the groups data-rich enough for
    the centred form to suit them."""
    rng = np.random.default_rng(4)
    sizes = [4, 8, 15, 25, 40, 50]
    groups = np.repeat(np.arange(6), sizes)
    x = rng.normal(size=len(groups))
    a, b = rng.normal(1.0, 0.7, 6), rng.normal(-0.5, 0.7, 6)
    y = a[groups] + b[groups] * x + rng.normal(0, 0.5, len(groups))
    with pm.Model(coords={"group": np.arange(6), "obs": np.arange(len(y))}) as model:
        mu_a, mu_b = pm.Normal("mu_a", 0, 2), pm.Normal("mu_b", 0, 2)
        sigma_a, sigma_b = pm.HalfNormal("sigma_a", 1), pm.HalfNormal("sigma_b", 1)
        if centred:
            intercept = pm.Normal("intercept", mu_a, sigma_a, dims="group")
            slope = pm.Normal("slope", mu_b, sigma_b, dims="group")
        else:
            intercept = pm.Deterministic("intercept", mu_a + sigma_a * pm.Normal("za", 0, 1, dims="group"),
                                         dims="group")
            slope = pm.Deterministic("slope", mu_b + sigma_b * pm.Normal("zb", 0, 1, dims="group"), dims="group")
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", intercept[groups] + slope[groups] * x, sigma, observed=y, dims="obs")
    return model


def varying_slopes_centered():
    return _varying_slopes(True)


def varying_slopes_noncentered():
    return _varying_slopes(False)


def logistic_breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import scale

    X, y = load_breast_cancer(return_X_y=True)
    X = scale(X)
    with pm.Model(coords={"feature": np.arange(X.shape[1])}) as model:
        intercept = pm.Normal("intercept", 0, 5)
        beta = pm.Normal("beta", 0, 1, dims="feature")
        pm.Bernoulli("y", logit_p=intercept + pm.math.dot(X, beta), observed=y)
    return model


def poisson_glm():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    counts = rng.poisson(np.exp(0.5 + X @ [0.4, -0.3, 0.2]))
    with pm.Model(coords={"feature": np.arange(3)}) as model:
        intercept = pm.Normal("intercept", 0, 2)
        beta = pm.Normal("beta", 0, 1, dims="feature")
        pm.Poisson("y", mu=pm.math.exp(intercept + pm.math.dot(X, beta)), observed=counts)
    return model


def _moons():
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import scale

    X, Y = make_moons(noise=0.2, random_state=0, n_samples=1000)
    X = scale(X).astype(pytensor.config.floatX)
    return train_test_split(X, Y.astype(pytensor.config.floatX), test_size=0.5, random_state=0)


def _construct_nn(minibatches=None):
    """pymc-examples' network, as its page writes it: on ``pm.Data`` containers, or on the
    tensors of ``pm.Minibatch`` (its minibatch section); ``initval`` from the page's seed."""
    X_train, _, Y_train, _ = _moons()
    rng = np.random.default_rng(9927)
    floatX = pytensor.config.floatX
    init_1 = rng.standard_normal(size=(2, 5)).astype(floatX)
    init_2 = rng.standard_normal(size=(5, 5)).astype(floatX)
    init_out = rng.standard_normal(size=5).astype(floatX)
    coords = {"hidden_layer_1": np.arange(5), "hidden_layer_2": np.arange(5), "train_cols": np.arange(2)}
    if minibatches is not None:
        minibatches = pm.Minibatch(X_train, Y_train, batch_size=50)
    with pm.Model(coords=coords) as model:
        if minibatches is None:
            ann_input, ann_output = pm.Data("ann_input", X_train), pm.Data("ann_output", Y_train)
        else:
            ann_input, ann_output = minibatches
        w_in_1 = pm.Normal("w_in_1", 0, sigma=1, initval=init_1, dims=("train_cols", "hidden_layer_1"))
        w_1_2 = pm.Normal("w_1_2", 0, sigma=1, initval=init_2, dims=("hidden_layer_1", "hidden_layer_2"))
        w_2_out = pm.Normal("w_2_out", 0, sigma=1, initval=init_out, dims="hidden_layer_2")
        act_1 = pm.math.tanh(pm.math.dot(ann_input, w_in_1))
        act_2 = pm.math.tanh(pm.math.dot(act_1, w_1_2))
        act_out = pm.math.sigmoid(pm.math.dot(act_2, w_2_out))
        pm.Bernoulli("out", act_out, observed=ann_output, total_size=len(Y_train))
    return model


def bnn_full_batch():
    return _construct_nn()


def bnn_minibatch():
    return _construct_nn(minibatches=True)


def bounded_beta_binomial():
    """Five success rates with Beta(2, 2) priors: parameters bounded to (0, 1)."""
    with pm.Model(coords={"group": np.arange(5)}) as model:
        p = pm.Beta("p", 2, 2, dims="group")
        pm.Binomial("k", n=[20, 30, 15, 40, 25], p=p, observed=[6, 14, 3, 31, 12], dims="group")
    return model


def deterministic_regression():
    rng = np.random.default_rng(3)
    x = rng.normal(size=30)
    y = 1.0 + 2.0 * x + rng.normal(0, 0.7, 30)
    with pm.Model(coords={"obs": np.arange(30)}) as model:
        a, b = pm.Normal("a", 0, 5), pm.Normal("b", 0, 5)
        sigma = pm.HalfNormal("sigma", 2)
        mu = pm.Deterministic("mu", a + b * x, dims="obs")
        pm.Normal("y", mu, sigma, observed=y, dims="obs")
    return model


#: posteriordb's posteriors (benchmarks/posteriordb): whether each is close to Gaussian, and why not.
POSTERIORDB_SHAPES = {
    "eight_schools-eight_schools_noncentered": "no: tau's posterior is skewed, with a heavy tail",
    "arK-arK": "yes",
    "diamonds-diamonds": "yes, but badly conditioned: 26 correlated coefficients",
    "gp_pois_regr-gp_pois_regr": "no: a Gaussian process's length scale and amplitude",
    "kidiq-kidscore_interaction": "yes, but badly conditioned: predictors on scales 100 apart",
    "low_dim_gauss_mix-low_dim_gauss_mix": "yes",
}

#: name: (builder, the reference's model, whether its posterior is close to Gaussian in the
#: unconstrained space, and why not)
MODELS = {
    "eight_schools_centered": (eight_schools_centered, "eight_schools_noncentered",
                               "no: a funnel in (tau, theta)"),
    "eight_schools_noncentered": (eight_schools_noncentered, "eight_schools_noncentered",
                                  "no: tau's posterior is skewed, with a heavy tail, even in log space"),
    "hierarchical_regression": (hierarchical_regression, "hierarchical_regression",
                                "no: the group scales' posteriors (8 groups) are skewed in log space"),
    "logistic_breast_cancer": (logistic_breast_cancer, "logistic_breast_cancer", "yes"),
    "poisson_glm": (poisson_glm, "poisson_glm", "yes"),
    "bnn_full_batch": (bnn_full_batch, "bnn_full_batch", "no: multimodal (hidden units permute and flip sign)"),
    "bnn_minibatch": (bnn_minibatch, "bnn_full_batch", "no: multimodal (hidden units permute and flip sign)"),
    "varying_slopes_centered": (varying_slopes_centered, "varying_slopes_noncentered",
                                "no: the group scales' posteriors are skewed in log space"),
    "varying_slopes_noncentered": (varying_slopes_noncentered, "varying_slopes_noncentered",
                                   "no: the group scales' posteriors are skewed in log space"),
    "bounded_beta_binomial": (bounded_beta_binomial, "bounded_beta_binomial", "yes"),
    **{name: (build, name, POSTERIORDB_SHAPES[name]) for name, build in posteriordb.POSTERIORS.items()},
    "deterministic_regression": (deterministic_regression, "deterministic_regression", "yes"),
}


# --- the reference -----------------------------------------------------------------------------

def reference(name: str, seed: int = 0):
    """The reference of model ``name``: posteriordb's moments (from its 10,000 reference draws), or
    NUTS's draws, loaded from their netCDF, or sampled and stored."""
    if name in posteriordb.POSTERIORS:
        return posteriordb.reference_moments(name)
    path = REFERENCES / f"{name}.nc"
    if not path.exists():
        model = MODELS[name][0]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(draws=REF_DRAWS, tune=1000, chains=4, cores=2, random_seed=seed, model=model,
                              target_accept=0.95, progressbar=False, compute_convergence_checks=False)
        import arviz as az

        rhat = float(max(float(v.max()) for v in az.rhat(idata).data_vars.values()))
        divergences = int(idata["sample_stats"]["diverging"].sum())
        posterior = idata["posterior"].to_dataset()
        posterior.attrs.update(rhat_max=rhat, divergences=divergences)
        REFERENCES.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: posterior.to_netcdf(tmp))
    with xr.open_dataset(path) as ds:
        return ds.load()


# --- the methods ---------------------------------------------------------------------------------

def _bnn_zoo(method, centring=False):
    def run(model, seed):
        if centring and not centring_candidates(model):
            raise NotApplicable("no hierarchical loc-scale variable")
        spec = {"advi": bnn_zoo.MeanField, "lowrank_advi": bnn_zoo.LowRank,
                "fullrank_advi": bnn_zoo.FullRank}[method](centring=True) if centring else method
        spec = bnn_zoo.Flow(df=5) if spec == "flow_t" else spec  # five degrees of freedom
        result = bnn_zoo.fit(model, method=spec, random_seed=seed, progressbar=False)
        draws = bnn_zoo.sample(result, DRAWS, random_seed=seed)
        extra = {"q_pareto_k": float(draws.attrs["q_pareto_k"])}
        if "auto" in result.config:
            auto = result.config["auto"]
            extra.update(rung=auto["path"][auto["returned"]]["rung"], rung_method=result.method,
                         passed=auto["passed"], path=[(e["rung"], e["q_pareto_k"]) for e in auto["path"]])
        if "centring" in result.config:
            extra["centring"] = {k: [round(x, 3) for x in v] for k, v in result.config["centring"].items()}
        return draws["posterior"].to_dataset(), extra
    return run


class NotApplicable(Exception):
    """A method that does not apply to a model (learned centring without a hierarchy)."""


def _handoff(model, seed):
    """``method="auto"``, then, where no rung passed, :func:`bnn_zoo.nuts` from the rung it returned."""
    result = bnn_zoo.fit(model, method="auto", random_seed=seed, progressbar=False)
    auto = result.config["auto"]
    if auto["passed"]:
        raise NotApplicable(f"auto passed at its {auto['path'][auto['returned']]['rung']} rung")
    tree = bnn_zoo.nuts(result, REF_DRAWS, chains=4, random_seed=seed)
    return tree["posterior"].to_dataset(), {"rhat": tree.attrs["rhat_max"], "nuts_seconds": tree.attrs["seconds"],
                                            "divergences": int(tree["sample_stats"]["diverging"].sum())}


def _nuts(model, seed):
    """PyMC's NUTS on NumPyro, as the reference is made but with target acceptance 0.8 (its default)."""
    with model:
        idata = pm.sample(draws=REF_DRAWS, tune=1000, chains=4, cores=1, random_seed=seed, nuts_sampler="numpyro",
                          progressbar=False, compute_convergence_checks=False)
    import arviz as az

    rhat = float(max(float(v.max()) for v in az.rhat(idata).data_vars.values()))
    return idata["posterior"].to_dataset(), {"rhat": rhat, "divergences": int(idata["sample_stats"]["diverging"].sum())}


def _pm_fit(method):
    def run(model, seed):
        with model:
            approx = pm.fit(method=method, random_seed=seed, progressbar=False)
            return approx.sample(DRAWS, random_seed=seed)["posterior"].to_dataset(), {}
    return run


def _pymc_extras(model, seed):
    from pymc_extras.inference.advi import fit_advi

    return fit_advi(model, draws=DRAWS, random_seed=seed)["posterior"].to_dataset(), {}


def _pathfinder(num_paths=None):
    """pymc-extras' multi-path Pathfinder at its defaults (four paths), or with ``num_paths``;
    ``num_draws=4000``, the draws it returns after importance resampling."""
    def run(model, seed):
        from pymc_extras.inference.pathfinder import fit_pathfinder

        paths = {} if num_paths is None else {"num_paths": num_paths}
        tree = fit_pathfinder(model=model, num_draws=DRAWS, random_seed=seed, progressbar=False, **paths)
        return tree["posterior"].to_dataset(), {}
    return run


METHODS = {"bnn_zoo.fit (advi)": _bnn_zoo("advi"), "bnn_zoo.fit (lowrank_advi)": _bnn_zoo("lowrank_advi"),
           "bnn_zoo.fit (fullrank_advi)": _bnn_zoo("fullrank_advi"), "bnn_zoo.fit (laplace)": _bnn_zoo("laplace"),
           "bnn_zoo.fit (advi + centring)": _bnn_zoo("advi", centring=True),
           "bnn_zoo.fit (lowrank_advi + centring)": _bnn_zoo("lowrank_advi", centring=True),
           "bnn_zoo.fit (fullrank_advi + centring)": _bnn_zoo("fullrank_advi", centring=True),
           "bnn_zoo.fit (flow)": _bnn_zoo("flow"), "bnn_zoo.fit (flow on a Student-t base)": _bnn_zoo("flow_t"),
           "bnn_zoo.fit (auto)": _bnn_zoo("auto"), "auto then bnn_zoo.nuts": _handoff,
           "pm.sample (nuts on numpyro)": _nuts,
           "pm.fit (advi)": _pm_fit("advi"), "pm.fit (fullrank_advi)": _pm_fit("fullrank_advi"),
           "pymc-extras fit_advi": _pymc_extras, "pymc-extras fit_pathfinder": _pathfinder(),
           "pymc-extras fit_pathfinder (1 path)": _pathfinder(num_paths=1)}


def errors(draws: xr.Dataset, ref) -> dict:
    """The largest |mean - reference mean| / reference sd over every scalar the reference has, and
    the range of sd / reference sd. ``ref``: reference draws, or each variable's ``(mean, sd)``."""
    if isinstance(ref, xr.Dataset):
        ref = {name: (ref[name].values.reshape(-1, *ref[name].shape[2:]).mean(0),
                      ref[name].values.reshape(-1, *ref[name].shape[2:]).std(0)) for name in ref.data_vars}
    z, ratios = [], []
    for name, (mean, sd) in ref.items():
        if name not in draws:
            continue
        d = draws[name].values.reshape(-1, *draws[name].shape[2:])
        z.append((np.abs(d.mean(0) - mean) / sd).ravel())
        ratios.append((d.std(0) / sd).ravel())
    z, ratios = np.concatenate(z), np.concatenate(ratios)
    return {"mean_error_sd": float(z.max()), "sd_ratio_min": float(ratios.min()), "sd_ratio_max": float(ratios.max())}


def run(models, seed: int = 0, methods=None) -> list[dict]:
    rows = []
    methods = {m: METHODS[m] for m in (methods or METHODS)}
    for name in models:
        builder, ref_name, gaussian = MODELS[name]
        ref = reference(ref_name)
        rhat, divergences = (float(ref.attrs["rhat_max"]), int(ref.attrs["divergences"])) if isinstance(
            ref, xr.Dataset) else (1.0, 0)  # posteriordb's: validated long Stan runs
        healthy = bool(rhat <= 1.01 and divergences == 0)
        for method, fit in methods.items():
            row = {"model": name, "method": method, "reference": ref_name, "reference_rhat": rhat,
                   "reference_divergences": divergences, "reference_healthy": healthy,
                   "close_to_gaussian": gaussian}
            model = builder()
            start = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    draws, extra = fit(model, seed)
                row.update(seconds=time.perf_counter() - start, **errors(draws, ref), **extra)
            except ImportError as err:
                row.update(error=f"not installed ({err.name})")
            except NotApplicable as err:
                row.update(error=f"n/a: {err}")
            except Exception as err:  # a method that fails on a model is a result, not a crash
                row.update(error=f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
                traceback.print_exc(limit=2, file=sys.stderr)
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def fresh(models, seed: int, methods, timeout: float | None = None) -> list[dict]:
    """:func:`run`, each model and method in a fresh Python process, one after another; a process that
    fails, or runs past ``timeout`` seconds, is a row that says so."""
    import json
    import subprocess
    import tempfile

    from benchmarks.processes import write_bytecode

    write_bytecode()  # as pip install leaves an environment: no timed process compiles its modules' source
    rows = []
    for name in models:
        for method in methods:
            with tempfile.TemporaryDirectory() as folder:
                out = Path(folder) / "rows.json"
                try:
                    ran = subprocess.run([sys.executable, "-m", "benchmarks.reference_posteriors", "--models", name,
                                          "--methods", method, "--seed", str(seed), "--json", str(out)],
                                         stdout=subprocess.DEVNULL, timeout=timeout)
                    rows += json.loads(out.read_text())["rows"] if ran.returncode == 0 else [
                        {"model": name, "method": method, "error": f"its process failed (exit {ran.returncode})"}]
                except subprocess.TimeoutExpired:
                    rows.append({"model": name, "method": method, "error": f"stopped at --timeout {timeout:g} s"})
            print(_line(rows[-1]), flush=True)
    return rows


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['model']:<26} {row['method']:<28} {row['error']}"
    return (f"{row['model']:<26} {row['method']:<28} {row['seconds']:7.1f} s  mean error "
            f"{row['mean_error_sd']:6.2f} sd  sd ratio {row['sd_ratio_min']:.2f}-{row['sd_ratio_max']:.2f}"
            + (f"  k {row['q_pareto_k']:.2f}" if "q_pareto_k" in row else "") + f"  {_note(row)}")


def _note(row: dict) -> str:
    """What else a row says: auto's rung, the lambdas learned, NUTS' r-hat and divergences."""
    notes = []
    if "rung" in row:
        notes.append(f"{row['rung']} ({row['rung_method']}), {'passed' if row['passed'] else 'none passed'}")
    if "centring" in row:
        notes.append("lambda " + ", ".join(f"{k} {min(v):.2f}-{max(v):.2f}" for k, v in row["centring"].items()))
    if "rhat" in row:
        notes.append(f"r-hat {row['rhat']:.3f}, {row['divergences']} divergences")
    return "; ".join(notes)


def markdown(rows: list[dict]) -> str:
    """Two tables: each model's reference, and each model and method's time and errors."""
    out = ["| model | reference | r-hat | divergences | healthy | close to Gaussian |",
           "| --- | --- | ---: | ---: | --- | --- |"]
    for r in {r["model"]: r for r in rows if "reference" in r}.values():  # a process stopped has none
        out.append(f"| {r['model']} | {r['reference']} | {r['reference_rhat']:.3f} | {r['reference_divergences']} "
                   f"| {'yes' if r['reference_healthy'] else 'no'} | {r['close_to_gaussian']} |")
    out += ["", "| model | method | seconds | largest mean error (ref. sd) | sd / ref. sd | Pareto k | note |",
            "| --- | --- | ---: | ---: | --- | ---: | --- |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['method']} | | {r['error']} | | | |")
        else:
            k = f"{r['q_pareto_k']:.2f}" if "q_pareto_k" in r else ""
            out.append(f"| {r['model']} | {r['method']} | {r['seconds']:.1f} | {r['mean_error_sd']:.2f} "
                       f"| {r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f} | {k} | {_note(r)} |")
    ranked = []
    for model in dict.fromkeys(r["model"] for r in rows):
        scored = [r for r in rows if r["model"] == model and "q_pareto_k" in r]
        if len(scored) >= 3:
            rho = scipy.stats.spearmanr([r["q_pareto_k"] for r in scored], [r["mean_error_sd"] for r in scored])[0]
            ranked.append(f"| {model} | {rho:.2f} | {len(scored)} |")
    if ranked:  # only where three or more methods of a model have a k
        out += ["", "Does k rank the methods as their error does? Per model, Spearman's rank correlation of "
                "k and the largest mean error over the methods with a k:", "",
                "| model | rank correlation | methods |", "| --- | ---: | --- |", *ranked]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reference_posteriors", description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ", ".join(MODELS))
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated, from " + ", ".join(METHODS))
    p.add_argument("--fresh", action="store_true",
                   help="each model and method in a fresh process (its time includes every compilation)")
    p.add_argument("--timeout", type=float, default=None,
                   help="with --fresh: seconds after which a model and method's process is stopped")
    args = p.parse_args(argv)
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"{p.prog}: error: unknown models {', '.join(unknown)}", file=sys.stderr)
        return 2
    methods = args.methods.split(",")
    if [m for m in methods if m not in METHODS]:
        print(f"{p.prog}: error: unknown methods {', '.join(m for m in methods if m not in METHODS)}", file=sys.stderr)
        return 2
    rows = fresh(models, args.seed, methods, args.timeout) if args.fresh else run(models, args.seed, methods)
    table = markdown(rows)
    print(table)
    if args.markdown:
        write_text(args.markdown, table + "\n")
    if args.json:
        write_json(args.json, {"draws": DRAWS, "reference_draws": 4 * REF_DRAWS, "seed": args.seed, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
