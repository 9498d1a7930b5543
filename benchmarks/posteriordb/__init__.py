"""Six posteriors of posteriordb, translated to PyMC, with their gold-standard reference draws.

posteriordb is described by Måns Magnusson, Paul Bürkner and Aki Vehtari in "posteriordb: a set of
posteriors for Bayesian inference and probabilistic programming". Each of its posteriors is a Stan
program, a data set and reference draws from long Stan runs (10 chains of 1,000 thinned draws).
This package vendors six of them as a development set for the project's inference methods:

========================================= ===============================================
posterior                                 what it is
========================================= ===============================================
eight_schools-eight_schools_noncentered   hierarchical normal means, non-centred
arK-arK                                   autoregression of order 5
diamonds-diamonds                         linear regression, 24 correlated coefficients
gp_pois_regr-gp_pois_regr                 Poisson regression on a latent GP (Cholesky)
kidiq-kidscore_interaction                linear regression with an interaction, flat betas
low_dim_gauss_mix-low_dim_gauss_mix       two-component normal mixture, ordered means
========================================= ===============================================

Each builder translates its Stan program line for line and keeps Stan's parameter names; Stan's
indexed scalars ``b[1]``, ..., ``b[24]`` are the PyMC vector ``b``. A bounded parameter with no
prior statement is flat on its support, and a prior on a parameter declared ``<lower=0>`` is the
half distribution (a truncation constant does not change the posterior). Transformed parameters
that the reference draws hold (eight schools' ``theta``, the GP's ``f``) are ``pm.Deterministic``.

The files in ``data/`` hold the Stan data exactly (diamonds' design matrix is stored column by
column as distinct values and codes), the reference draws thinned to every 10th draw (6
significant digits) and the mean and sd of each scalar over all 10,000 reference draws.
``README.md`` gives the source commit and posteriordb's licence.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

__all__ = ["POSTERIORS", "DIMS", "load", "stan_data", "reference", "reference_moments"]

DATA = Path(__file__).resolve().parent / "data"

#: The dimension names of each posterior's vector variables (the builders' ``dims``).
DIMS = {
    "eight_schools-eight_schools_noncentered": {"theta": "school", "theta_trans": "school"},
    "arK-arK": {"beta": "lag"},
    "diamonds-diamonds": {"b": "coef"},
    "gp_pois_regr-gp_pois_regr": {"f": "obs", "f_tilde": "obs"},
    "kidiq-kidscore_interaction": {"beta": "coef"},
    "low_dim_gauss_mix-low_dim_gauss_mix": {"mu": "component", "sigma": "component"},
}


@cache
def load(name: str) -> dict:
    """The vendored file of posterior ``name``, parsed.

    Parameters
    ----------
    name : str
        A key of `POSTERIORS`.

    Returns
    -------
    dict
        Its ``data``, ``reference``, ``reference_mean``, ``reference_sd``, ``stan_names`` and
        ``source``, as stored.
    """
    if name not in DIMS:
        raise KeyError(f"unknown posterior {name!r}; known: {', '.join(DIMS)}")
    return json.loads((DATA / f"{name}.json").read_text())


def stan_data(name: str) -> dict:
    """The Stan data of posterior ``name``: lists as float or int arrays, matrices decoded.

    Parameters
    ----------
    name : str
        A key of `POSTERIORS`.

    Returns
    -------
    dict
        Each Stan data variable as a NumPy array (or a Python number).
    """
    out = {}
    for key, value in load(name)["data"].items():
        if isinstance(value, dict) and value.get("encoding") == "column_codes":
            columns = [np.asarray(v, float)[np.asarray(c)] for v, c in zip(value["values"], value["codes"])]
            value = np.stack(columns, axis=1).reshape(value["shape"])
        out[key] = np.asarray(value) if isinstance(value, list) else value
    return out


def _coords(name: str, sizes: dict) -> dict:
    return {dim: np.arange(sizes[dim]) for dim in set(DIMS[name].values())}


# --- the models, one per Stan program ---------------------------------------------------------

def eight_schools_noncentered() -> pm.Model:
    """posteriordb's ``eight_schools_noncentered``: theta = mu + tau * theta_trans."""
    name = "eight_schools-eight_schools_noncentered"
    d = stan_data(name)
    with pm.Model(coords=_coords(name, {"school": d["J"]})) as model:
        theta_trans = pm.Normal("theta_trans", 0, 1, dims="school")
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta = pm.Deterministic("theta", theta_trans * tau + mu, dims="school")
        pm.Normal("y", theta, d["sigma"].astype(float), observed=d["y"].astype(float), dims="school")
    return model


def ark() -> pm.Model:
    """posteriordb's ``arK``: y[t] ~ normal(alpha + sum_k beta[k] y[t-k], sigma) for t > K."""
    name = "arK-arK"
    d = stan_data(name)
    K, T, y = int(d["K"]), int(d["T"]), d["y"].astype(float)
    lags = np.stack([y[K - k:T - k] for k in range(1, K + 1)], axis=1)  # row t-K-1: y[t-1], ..., y[t-K]
    with pm.Model(coords=_coords(name, {"lag": K})) as model:
        alpha = pm.Normal("alpha", 0, 10)
        beta = pm.Normal("beta", 0, 10, dims="lag")
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("y", alpha + pt.dot(lags, beta), sigma, observed=y[K:])
    return model


def diamonds() -> pm.Model:
    """posteriordb's ``diamonds`` (brms): a normal GLM on the centred design matrix."""
    name = "diamonds-diamonds"
    d = stan_data(name)
    X = d["X"][:, 1:]
    Xc = X - X.mean(axis=0)
    with pm.Model(coords=_coords(name, {"coef": Xc.shape[1]})) as model:
        b = pm.Normal("b", 0, 1, dims="coef")
        intercept = pm.StudentT("Intercept", nu=3, mu=8, sigma=10)
        sigma = pm.HalfStudentT("sigma", nu=3, sigma=10)
        if not d["prior_only"]:
            pm.Normal("Y", intercept + pt.dot(Xc, b), sigma, observed=d["Y"].astype(float))
    return model


def gp_pois_regr() -> pm.Model:
    """posteriordb's ``gp_pois_regr``: k ~ poisson_log(f), f = cholesky(K(x; alpha, rho)) f_tilde."""
    name = "gp_pois_regr-gp_pois_regr"
    d = stan_data(name)
    x, n = d["x"].astype(float), int(d["N"])
    sq_dist = (x[:, None] - x[None, :]) ** 2
    with pm.Model(coords=_coords(name, {"obs": n})) as model:
        rho = pm.Gamma("rho", alpha=25, beta=4)
        alpha = pm.HalfNormal("alpha", 2)
        f_tilde = pm.Normal("f_tilde", 0, 1, dims="obs")
        cov = alpha**2 * pt.exp(-0.5 * sq_dist / rho**2) + 1e-10 * np.eye(n)
        f = pm.Deterministic("f", pt.dot(pt.linalg.cholesky(cov), f_tilde), dims="obs")
        pm.Poisson("k", pt.exp(f), observed=d["k"], dims="obs")
    return model


def kidscore_interaction() -> pm.Model:
    """posteriordb's ``kidscore_interaction``: kid_score on mom_hs, mom_iq and their product."""
    name = "kidiq-kidscore_interaction"
    d = stan_data(name)
    hs, iq = d["mom_hs"].astype(float), d["mom_iq"].astype(float)
    with pm.Model(coords=_coords(name, {"coef": 4})) as model:
        beta = pm.Flat("beta", dims="coef")  # Stan states no prior: flat
        sigma = pm.HalfCauchy("sigma", 2.5)
        mean = beta[0] + beta[1] * hs + beta[2] * iq + beta[3] * (hs * iq)
        pm.Normal("kid_score", mean, sigma, observed=d["kid_score"].astype(float))
    return model


def low_dim_gauss_mix() -> pm.Model:
    """posteriordb's ``low_dim_gauss_mix``: log_mix(theta, normal(mu[1], sigma[1]), normal(mu[2], sigma[2]))."""
    name = "low_dim_gauss_mix-low_dim_gauss_mix"
    d = stan_data(name)
    with pm.Model(coords=_coords(name, {"component": 2})) as model:
        mu = pm.Normal("mu", 0, 2, dims="component", transform=pm.distributions.transforms.ordered,
                       initval=np.array([-1.0, 1.0]))
        sigma = pm.HalfNormal("sigma", 2, dims="component")
        theta = pm.Beta("theta", 5, 5)
        # log_mix(theta, a, b) = log(theta exp(a) + (1 - theta) exp(b)): the weights of components 1, 2
        pm.NormalMixture("y", w=pt.stack([theta, 1 - theta]), mu=mu, sigma=sigma, observed=d["y"].astype(float))
    return model


#: Each posterior's name, as posteriordb spells it, and the function that builds a fresh model.
POSTERIORS = {
    "eight_schools-eight_schools_noncentered": eight_schools_noncentered,
    "arK-arK": ark,
    "diamonds-diamonds": diamonds,
    "gp_pois_regr-gp_pois_regr": gp_pois_regr,
    "kidiq-kidscore_interaction": kidscore_interaction,
    "low_dim_gauss_mix-low_dim_gauss_mix": low_dim_gauss_mix,
}


# --- the reference ------------------------------------------------------------------------------

def reference(name: str) -> xr.Dataset:
    """The thinned reference draws of posterior ``name``, laid out as an ArviZ posterior group.

    Parameters
    ----------
    name : str
        A key of `POSTERIORS`.

    Returns
    -------
    xarray.Dataset
        One variable per PyMC variable of the reference, dims ``("chain", "draw", ...)`` with the
        builder's dimension names and coordinates (10 chains of 100 draws).
    """
    variables = {}
    for var, values in load(name)["reference"].items():
        array = np.asarray(values, float)
        dims = ("chain", "draw") + ((DIMS[name][var],) if array.ndim == 3 else ())
        variables[var] = (dims, array)
    ds = xr.Dataset(variables)
    return ds.assign_coords({dim: np.arange(ds.sizes[dim]) for dim in ds.dims})


def reference_moments(name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The mean and sd of each reference variable over all 10,000 reference draws.

    Parameters
    ----------
    name : str
        A key of `POSTERIORS`.

    Returns
    -------
    dict
        Variable name -> ``(mean, sd)``, arrays of the variable's shape (sd with ``ddof=1``).
    """
    stored = load(name)
    return {var: (np.asarray(stored["reference_mean"][var], float), np.asarray(stored["reference_sd"][var], float))
            for var in stored["reference"]}
