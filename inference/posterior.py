"""Draws from a fitted approximation, predictions, and the ArviZ DataTree.

Draws are made here rather than with ``approx.sample`` so that each one comes
with ``log q`` (the approximation's density) and ``log p`` (the model's joint
log density, Jacobian included), both in the unconstrained space where q
lives: PSIS-LOO for variational posteriors
(``az.loo_approximate_posterior``) needs exactly these.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
import scipy.linalg
from arviz_stats.utils import ELPDDataLOO
from jax.extend import core as jax_core
from xarray import DataTree

from inference import engine, psis
from inference.advi import FitResult


@dataclass
class Draws:
    """``n`` draws from q: unconstrained vectors ``z`` and their log densities."""

    z: np.ndarray  # (n, d)
    log_q: np.ndarray  # (n,)
    log_p: np.ndarray  # (n,)
    posterior: dict[str, np.ndarray]  # constrained free variables, each (n, *shape)


def q_factor(result: FitResult) -> tuple[np.ndarray, np.ndarray]:
    """Mean and lower-triangular (or diagonal, as a vector) factor of q."""
    params = result.approx.groups[0].params_dict
    mu = np.asarray(params["mu"].get_value(), dtype="float64")
    if "rho" in params:
        return mu, np.logaddexp(0.0, np.asarray(params["rho"].get_value(), dtype="float64"))
    d = mu.size
    L = np.zeros((d, d))
    L[np.tril_indices(d)] = params["L_tril"].get_value()
    L[np.diag_indices(d)] = np.logaddexp(0.0, np.diag(L))  # PyMC: diagonal = softplus(rho)
    return mu, L


def compiled_model(result: FitResult) -> engine.ModelFunction:
    """The fitted model as one JAX function (:func:`inference.engine.compile_model`).

    The ``"jax"`` engine leaves the one it fitted with in ``result.cache``;
    otherwise it is built on first use and kept there.
    """
    if "model" not in result.cache:
        result.cache["model"] = engine.compile_model(result.model, result.approx.groups[0].ordering)
    return result.cache["model"]


MAP_BYTES = 8 * 2**20  # memory for the draws evaluated together (see _evaluator)


def _evaluator(result: FitResult, outputs: tuple[str, ...]):
    """A jitted ``f(Z, *data) -> list of arrays (draws, ...)``: model ``outputs`` at each row of ``Z``.

    ``outputs`` names model variables, or ``"logp"`` for the joint log
    density (Jacobian included). Kept with the compiled model, so compiled
    once per model structure, output set and data shapes. Draws are
    evaluated in blocks (``lax.map`` with a ``batch_size``): as many draws at
    once as fit in :data:`MAP_BYTES`, counting every intermediate array of
    one draw (an upper bound on what XLA keeps). A small network evaluates
    many draws per block (on the toy BNN, one draw at a time spent most of
    its time in per-iteration overhead); a CNN on thousands of images one at
    a time. Blocks of a few MB ran the toy's predictions 10-20% faster than
    blocks of 256 MB (they stay in the CPU's caches).
    """
    functions = compiled_model(result)
    key = ("evaluator", outputs)
    if key not in functions.jitted:
        fn, unflatten = functions.select(outputs), functions.layout.unflatten

        @jax.jit
        def evaluate(Z, *data):
            one = jax.make_jaxpr(lambda z, *data: fn(unflatten(z), *data))(Z[0], *data)
            n = len(Z)
            largest = int(np.clip(MAP_BYTES // max(_jaxpr_bytes(one.jaxpr), 1), 1, n))
            # Equal blocks (Z padded with copies of its last row): lax.map compiles
            # one more copy of the body for a remainder (on the toy: 1.5 s -> 0.8 s).
            blocks = -(-n // largest)
            block = -(-n // blocks)
            Z = jnp.concatenate([Z, jnp.broadcast_to(Z[-1:], (blocks * block - n, *Z.shape[1:]))])
            out = jax.lax.map(lambda z: jax.core.eval_jaxpr(one.jaxpr, one.consts, z, *data),
                              Z, batch_size=block)
            return [o[:n] for o in out]

        functions.jitted[key] = evaluate
    return functions.jitted[key]


def _jaxpr_bytes(jaxpr) -> int:
    """Bytes of every array a jaxpr's equations produce, nested jaxprs included."""
    total = sum(int(np.prod(v.aval.shape)) * v.aval.dtype.itemsize
                for eqn in jaxpr.eqns for v in eqn.outvars if hasattr(v.aval, "shape"))
    return total + sum(_jaxpr_bytes(sub) for sub in jax_core.subjaxprs(jaxpr))


def _data(model: pm.Model, X: np.ndarray | None = None) -> list[np.ndarray]:
    """The model's data containers' values, or new inputs ``X`` in place of container ``X``.

    With ``X``, the other containers over the same rows (the observed ``y``)
    are filled with zeros of ``len(X)`` rows: the model function computes
    every output, the likelihood too, so their rows must match; the outputs
    asked for do not depend on them.
    """
    if X is None:
        return [np.asarray(v.get_value()) for v in model.data_vars]
    rows = model["X"].get_value().shape[0]
    data = []
    for v in model.data_vars:
        value = np.asarray(v.get_value())
        if v.name == "X":
            value = X
        elif value.ndim and value.shape[0] == rows:
            value = np.zeros((len(X), *value.shape[1:]), dtype=value.dtype)
        data.append(value)
    return data


def draw(result: FitResult, n: int = 500, seed: int = 0, *, log_p: bool = True) -> Draws:
    """Draw ``n`` samples from q with their ``log q`` and model ``log p``.

    ``log p`` is evaluated on the data currently in the model's containers
    (the training data right after :func:`inference.fit`); with
    ``log_p=False`` it is skipped (NaN), which saves a pass over the
    training set per draw when no LOO is wanted.
    """
    z, log_q = _sample_q(result, n, np.random.default_rng(seed))
    return _evaluate(result, z, log_q, log_p)


def draw_mixture(results: list[FitResult], n: int = 500, seed: int = 0, *,
                 log_p: bool = True) -> Draws:
    """``n`` draws from the mixture of several fits' q, e.g. restarts of one model.

    Fit ``k`` gives ``n_k`` of the draws, ``n / len(results)`` each (the
    first ones one more where that does not divide), so the draws are a
    sample of the mixture with weights ``n_k / n``, equal when it divides.
    ``log_q`` is that mixture's density, ``log sum_k (n_k / n) q_k(z)``, so
    :func:`loo` stays valid. Restarts from different initial means find
    different modes; their mixture keeps the spread between them, which one
    Gaussian q cannot (Wilson and Izmailov 2020 pool such fits, as
    MultiSWAG, in the same way). The fits must be of one model structure
    (same variables and shapes); ``log p`` and the variables are evaluated
    with the first fit's model and data. With one fit, the same draws as
    :func:`draw`.
    """
    if not results:
        raise ValueError("draw_mixture needs at least one fit")
    if n < len(results):
        raise ValueError(f"draw_mixture needs at least one draw per fit: n={n} for {len(results)} fits")
    layouts = {tuple((name, tuple(shape)) for name, _, shape, _ in compiled_model(r).layout.slots)
               for r in results}
    if len(layouts) > 1:
        raise ValueError("draw_mixture needs fits of one model (the same variables and shapes)")
    if len(results) == 1:
        return draw(results[0], n, seed, log_p=log_p)
    rng = np.random.default_rng(seed)
    sizes = np.array([len(part) for part in np.array_split(np.arange(n), len(results))])
    z = np.concatenate([_sample_q(r, k, rng)[0] for r, k in zip(results, sizes)])
    log_qs = np.stack([_log_q(r, z) for r in results]) + np.log(sizes / n)[:, None]
    return _evaluate(results[0], z, np.logaddexp.reduce(log_qs, axis=0), log_p)


def _sample_q(result: FitResult, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws ``z`` of q and their ``log q``."""
    mu, factor = q_factor(result)
    eps = rng.standard_normal((n, mu.size))
    z = mu + eps * factor if factor.ndim == 1 else mu + eps @ factor.T
    return z, _log_q_of_eps(eps, factor)


def _log_q(result: FitResult, z: np.ndarray) -> np.ndarray:
    """``log q(z)`` of the rows of ``z``."""
    mu, factor = q_factor(result)
    if factor.ndim == 1:
        eps = (z - mu) / factor
    else:
        eps = scipy.linalg.solve_triangular(factor, (z - mu).T, lower=True).T
    return _log_q_of_eps(eps, factor)


def _log_q_of_eps(eps: np.ndarray, factor: np.ndarray) -> np.ndarray:
    diag = factor if factor.ndim == 1 else np.diag(factor)
    d = eps.shape[1]
    return -0.5 * np.sum(eps**2, axis=1) - np.sum(np.log(np.abs(diag))) - 0.5 * d * np.log(2 * np.pi)


def _evaluate(result: FitResult, z: np.ndarray, log_q: np.ndarray, log_p: bool) -> Draws:
    """:class:`Draws` of ``z``: the model's free variables, and ``log p`` unless ``log_p=False``."""
    model = result.model
    names = tuple(rv.name for rv in model.free_RVs)
    outputs = (("logp",) if log_p else ()) + names
    values = _evaluator(result, outputs)(z.astype(model.value_vars[0].dtype), *_data(model))
    values = [np.asarray(v) for v in values]
    log_ps = values.pop(0).astype("float64") if log_p else np.full(len(z), np.nan)
    return Draws(z=z, log_q=log_q, log_p=log_ps, posterior=dict(zip(names, values)))


def predict(result: FitResult, draws: Draws, X: np.ndarray, var: str = "p",
            chunk: int = 2048) -> np.ndarray:
    """Model variable ``var`` of each draw at inputs ``X``: array (draws, n, ...).

    ``var`` is any variable of the model whose first axis (after the draws)
    runs over the rows of ``X``: ``"p"`` (class probabilities) of
    :func:`models.mlp_classifier`, ``"mu"`` (the regression function) of
    :func:`models.mlp_regressor`. ``X`` goes through in chunks of ``chunk``
    rows, the last one padded, so that one compiled function serves every
    call; the model's data containers are not changed. Returns float64.
    """
    model = result.model
    evaluate = _evaluator(result, (var,))  # a ValueError for a variable the model lacks
    if not chunk >= 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    X = np.asarray(X, dtype=model["X"].dtype)
    if len(X) == 0:
        raise ValueError("X has no rows")
    z = draws.z.astype(model.value_vars[0].dtype)
    out = None
    for start in range(0, len(X), chunk):
        block = X[start : start + chunk]
        padded = np.concatenate([block, np.repeat(block[-1:], chunk - len(block), axis=0)])
        part = np.asarray(evaluate(z, *_data(model, X=padded))[0])
        if out is None:
            out = np.empty((part.shape[0], len(X), *part.shape[2:]), dtype="float64")
        out[:, start : start + len(block)] = part[:, : len(block)]
    return out


def predict_proba(result: FitResult, draws: Draws, X: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Class probabilities ``p`` of each draw at inputs ``X``: array (draws, n, classes).

    :func:`predict` of ``"p"``.
    """
    return predict(result, draws, X, var="p", chunk=chunk)


def log_likelihood(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pointwise ``log p(y_i | w_s)`` from class probabilities: (draws, n)."""
    picked = np.take_along_axis(proba, np.asarray(y)[None, :, None], axis=2)[..., 0]
    return np.log(np.clip(picked, np.finfo("float64").tiny, None))


def to_datatree(
    result: FitResult,
    draws: Draws,
    *,
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    y_test: np.ndarray,
    proba_train: np.ndarray | None = None,
    proba_test: np.ndarray | None = None,
) -> DataTree:
    """ArviZ DataTree of the draws.

    Groups: ``posterior`` (free variables with the model's dims),
    ``log_likelihood`` (``y`` on the training points, for LOO),
    ``posterior_predictive`` (``p``: class probabilities on the test points),
    ``observed_data`` (``y`` train, ``y_test``), ``constant_data`` (inputs)
    and ``sample_stats`` (``log_p``, ``log_q`` of each draw).
    """
    model = result.model
    if proba_train is None:
        proba_train = predict_proba(result, draws, X_train)
    if proba_test is None:
        proba_test = predict_proba(result, draws, X_test)
    add_chain = lambda a: np.asarray(a)[None]  # noqa: E731 - one chain
    dims = {name: list(model.named_vars_to_dims.get(name, ())) for name in draws.posterior}
    dims.update(
        y=["obs"], p=["test_obs", "class"], y_test=["test_obs"], X=["obs", "feature"],
        X_test=["test_obs", "feature"],
    )
    coords = {k: np.asarray(v) for k, v in model.coords.items() if k != "obs"}
    coords.update(obs=np.arange(len(y_train)), test_obs=np.arange(len(y_test)))
    return az.from_dict(
        {
            "posterior": {k: add_chain(v) for k, v in draws.posterior.items()},
            "log_likelihood": {"y": add_chain(log_likelihood(proba_train, y_train))},
            "posterior_predictive": {"p": add_chain(proba_test)},
            "sample_stats": {"log_p": add_chain(draws.log_p), "log_q": add_chain(draws.log_q)},
            "observed_data": {"y": np.asarray(y_train), "y_test": np.asarray(y_test)},
            "constant_data": {"X": np.asarray(X_train), "X_test": np.asarray(X_test)},
        },
        dims=dims,
        coords=coords,
        attrs={"/": {"inference_library": "pymc", "inference_library_version": pm.__version__,
                     **{f"fit_{k}": str(v) for k, v in result.config.items()}}},
    )


def loo(idata: DataTree, var_name: str = "y") -> ELPDDataLOO:
    """PSIS-LOO corrected for the approximate posterior (uses log p and log q), pointwise.

    What ``az.loo_approximate_posterior(idata, log_p, log_q, var_name=...)``
    returns, computed over all observations at once (:mod:`inference.psis`):
    ArviZ's own per-observation loop takes 0.8 s of a 4 s toy fit.
    """
    stats = idata["sample_stats"]
    if not (np.isfinite(stats["log_p"]).all() and np.isfinite(stats["log_q"]).all()):
        raise ValueError("loo needs each draw's finite log p and log q (draw(..., log_p=True))")
    log_lik = idata["log_likelihood"][var_name]
    obs_dims = [d for d in log_lik.dims if d not in ("chain", "draw")]
    log_lik = log_lik.transpose("chain", "draw", *obs_dims)
    n_samples = log_lik.sizes["chain"] * log_lik.sizes["draw"]
    values = log_lik.values.reshape(n_samples, -1)
    elpd_i, pareto_k, p_loo_i = (
        log_lik.isel(chain=0, draw=0, drop=True).copy(data=v.reshape(log_lik.shape[2:]))
        for v in psis.loo_approximate_posterior(
            values, stats["log_p"].values.ravel(), stats["log_q"].values.ravel()))
    good_k = min(1 - 1 / np.log10(n_samples), 0.7) if n_samples > 1 else 0.7
    warning = bool(np.any(pareto_k.values > good_k))
    if warning:
        warnings.warn(f"Estimated shape parameter of Pareto distribution is greater than {good_k:.2f} "
                      "for one or more samples: importance sampling is less reliable for them.",
                      stacklevel=2)
    elpd, se, p_loo, _ = elpd_i.azstats.loo_summary(p_loo_i)
    return ELPDDataLOO(elpd=elpd, se=se, p=p_loo, n_samples=n_samples, n_data_points=values.shape[1],
                       scale="log", warning=warning, good_k=good_k, elpd_i=elpd_i, pareto_k=pareto_k,
                       approx_posterior=True)
