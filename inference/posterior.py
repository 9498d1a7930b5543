"""From a fitted q to ArviZ: posterior draws, predictions on new data, and PSIS-LOO.

:func:`sample` draws from q (or from a mixture of several fits' q) and
returns an ArviZ DataTree whose draws carry ``log q`` (q's density) and
``log p`` (the model's joint log density, Jacobian included), both in the
unconstrained space where q lives: what PSIS-LOO for variational posteriors
(``az.loo_approximate_posterior``, :func:`loo`) needs. :func:`predict`
evaluates any model variable, or redraws any observed one, at new data, from
any DataTree's posterior.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
from arviz_stats.utils import ELPDDataLOO
from pymc.backends.arviz import find_constants, find_observations
from jax.extend import core as jax_core
import xarray as xr
from xarray import DataTree

from bnn_zoo.inference import families, psis
from bnn_zoo.inference.engine import cheap
from bnn_zoo.inference.advi import FitResult
from bnn_zoo.inference.jaxmodel import ModelFunction, compile_predictive

__all__ = ["best", "draw_z", "draws_posterior", "elbo", "evaluate_draws", "evaluate_z", "loo",
           "point_posterior", "predict", "q_elbo", "sample"]

MAP_BYTES = 8 * 2**20  # memory for the draws evaluated together (see _map_draws)


class _DrawMap:
    """``f(per_draw, consts) -> list of arrays (draws, ...)``: ``fn(one_draw, consts)`` for every draw.

    ``per_draw`` is a pytree of arrays with a leading draws axis. As the
    engine does with steps, cheap draws (under
    :data:`~bnn_zoo.inference.engine.LOOP_BELOW_FLOPS` by XLA's cost
    analysis) are evaluated inside one compiled ``lax.map``, in blocks of as
    many draws as fit in :data:`MAP_BYTES` (every intermediate array of one
    draw counted; blocks of a few MB stay in the CPU's caches); expensive
    ones one compiled call per draw, because XLA's CPU backend runs
    convolutions several times slower inside a loop
    (docs/user_guide/engine.md).
    """

    def __init__(self, fn):
        self.fn, self.one, self.looped = fn, jax.jit(fn), {}

    def __call__(self, per_draw, consts) -> list:
        first = jax.tree_util.tree_map(lambda a: a[0], per_draw)
        shapes = str(jax.tree_util.tree_map(lambda a: (a.shape, a.dtype), (per_draw, consts)))
        if shapes not in self.looped:
            self.looped[shapes] = jax.jit(self._blocks) if cheap(self.one.lower(first, consts)) else None
        if self.looped[shapes] is not None:
            return self.looped[shapes](per_draw, consts)
        n = len(jax.tree_util.tree_leaves(per_draw)[0])
        outs = [self.one(jax.tree_util.tree_map(lambda a: a[i], per_draw), consts) for i in range(n)]
        return [jnp.stack(parts) for parts in zip(*outs)]

    def _blocks(self, per_draw, consts):
        one = jax.make_jaxpr(self.fn)(jax.tree_util.tree_map(lambda a: a[0], per_draw), consts)
        flat = jax.tree_util.tree_leaves(per_draw)
        n = len(flat[0])
        largest = int(np.clip(MAP_BYTES // max(_jaxpr_bytes(one.jaxpr), 1), 1, n))
        # Equal blocks (padded with copies of the last draw): lax.map compiles one more
        # copy of the body for a remainder.
        blocks = -(-n // largest)
        block = -(-n // blocks)
        flat = [jnp.concatenate([a, jnp.broadcast_to(a[-1:], (blocks * block - n, *a.shape[1:]))])
                for a in flat]
        consts_flat = jax.tree_util.tree_leaves(consts)
        out = jax.lax.map(lambda leaves: jax.core.eval_jaxpr(one.jaxpr, one.consts, *leaves, *consts_flat),
                          flat, batch_size=block)
        return [o[:n] for o in out]


def _map_draws(cache: dict, key, fn) -> _DrawMap:
    """The :class:`_DrawMap` of ``fn``, kept in ``cache`` under ``key`` (a compiled model's
    ``jitted``: one per model structure and outputs)."""
    if key not in cache:
        cache[key] = _DrawMap(fn)
    return cache[key]


def _jaxpr_bytes(jaxpr) -> int:
    """Bytes of every array a jaxpr's equations produce, nested jaxprs included."""
    total = sum(int(np.prod(v.aval.shape)) * v.aval.dtype.itemsize
                for eqn in jaxpr.eqns for v in eqn.outvars if hasattr(v.aval, "shape"))
    return total + sum(_jaxpr_bytes(sub) for sub in jax_core.subjaxprs(jaxpr))


def _data(model: pm.Model) -> list[np.ndarray]:
    return [np.asarray(v.get_value()) for v in model.data_vars]


# --- draws from q -------------------------------------------------------------


def _as_list(fits) -> list[FitResult]:
    fits = [fits] if isinstance(fits, FitResult) else list(fits)
    if not fits:
        raise ValueError("sample needs at least one fit")
    layouts = {tuple((name, shape) for name, _, shape, _ in f.layout.slots) for f in fits}
    if len(layouts) > 1:
        raise ValueError("a mixture needs fits of one model (the same variables and shapes)")
    return fits


def draw_z(fits, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unconstrained draws of q, or of the mixture of several fits' q, with ``log q``.

    Fit ``k`` of ``K`` gives ``n_k`` of the draws, ``n / K`` each (the first
    ones one more where that does not divide), so the draws are a sample of
    the mixture with weights ``n_k / n``; ``log q`` is that mixture's density,
    ``log sum_k (n_k / n) q_k(z)``, so PSIS-LOO stays valid. Restarts from
    different initial means find different modes; their mixture keeps the
    spread between them, which one Gaussian q cannot (Wilson and Izmailov
    2020 pool such fits, as MultiSWAG, in the same way).

    Parameters
    ----------
    fits : FitResult or sequence of FitResult
        One fit, or fits of one model (the same variables and shapes).
    n : int
        The number of draws, at least the number of fits.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    z : numpy.ndarray
        ``(n, dim)`` float64, one flat vector of unconstrained values per row
        (in the fits' ``layout``), fit after fit.
    log_q : numpy.ndarray
        ``(n,)``, the density of q (or of the mixture) at each draw.

    Raises
    ------
    ValueError
        For no fits, fits of different models, or a bad ``n``.
    """
    fits = _as_list(fits)
    if not (isinstance(n, (int, np.integer)) and n >= len(fits)):
        raise ValueError(f"need an integer number of draws >= the number of fits ({len(fits)}), got {n!r}")
    rng = np.random.default_rng(seed)
    qs = [f.family.mean_and_factor(f.params) for f in fits]
    if len(fits) == 1:
        return families.sample(*qs[0], n, rng)
    sizes = np.array([len(part) for part in np.array_split(np.arange(n), len(fits))])
    z = np.concatenate([families.sample(mu, factor, k, rng)[0] for (mu, factor), k in zip(qs, sizes)])
    log_qs = np.stack([families.log_q(mu, factor, z) for mu, factor in qs]) + np.log(sizes / n)[:, None]
    return z, np.logaddexp.reduce(log_qs, axis=0)


def evaluate_z(result: FitResult, z: np.ndarray, outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """Model ``outputs`` at each row of unconstrained draws ``z``, on the model's current data.

    Parameters
    ----------
    result : FitResult
        A fit of the model (its compiled density and its model's data).
    z : numpy.ndarray
        ``(draws, dim)``, flat unconstrained values in the fit's ``layout``
        (:func:`draw_z`).
    outputs : sequence of str
        Model variables (free, deterministic), ``"logp"`` (the joint log
        density, Jacobians included) or ``"loglik:<observed>"`` (an
        observed variable's pointwise log density)
        (:meth:`~bnn_zoo.inference.jaxmodel.ModelFunction.select`).

    Returns
    -------
    dict of str to numpy.ndarray
        Each output's values, with a leading axis of draws.

    Raises
    ------
    ValueError
        For a name the model does not have.
    """
    return evaluate_draws(result.density, z, _data(result.model), outputs)


def evaluate_draws(density: ModelFunction, z: np.ndarray, data: Sequence[np.ndarray],
                   outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """:func:`evaluate_z` on given data instead of the model's.

    Parameters
    ----------
    density : ModelFunction
        The compiled model (``result.density``).
    z : numpy.ndarray
        ``(draws, dim)`` flat unconstrained values in ``density.layout``.
    data : sequence of numpy.ndarray
        One array per data container of the model, of any number of rows.
    outputs : sequence of str
        As in :func:`evaluate_z`.

    Returns
    -------
    dict of str to numpy.ndarray
        Each output's values, with a leading axis of draws.
    """
    outputs = tuple(outputs)
    select, unflatten = density.select(outputs), density.layout.unflatten
    evaluate = _map_draws(density.jitted, ("evaluate", outputs),
                          lambda z, data: select(unflatten(z), *data))
    values = evaluate(jnp.asarray(z, dtype=density.layout.slots[0][3]), tuple(data))
    return {name: np.asarray(v) for name, v in zip(outputs, values)}


def elbo(result: FitResult, draws: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The ELBO of the fitted q, ``E_q[log p - log q]`` at full-data scale, by Monte Carlo.

    Unlike the trace's per-step estimates it is the final q's, with no
    optimiser noise, and without the KL weight ``beta``: the quantity to
    compare fits (restarts) of one model by.

    Parameters
    ----------
    result : FitResult
        The fit.
    draws : int, default 1000
        Draws of q in the estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    estimate : float
        The ELBO estimate.
    se : float
        Its Monte Carlo standard error.
    """
    return q_elbo(result.density, result.family.mean_and_factor(result.params), _data(result.model),
                  draws, seed)


def q_elbo(density: ModelFunction, q: tuple[np.ndarray, np.ndarray], data: Sequence[np.ndarray],
           draws: int = 1000, seed: int = 0) -> tuple[float, float]:
    """:func:`elbo` of a q given as its mean and factor, on given data.

    For fits without a model of their own data (a sweep's stacked fits).

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    q : tuple of numpy.ndarray
        ``(mean, factor)`` (:meth:`~bnn_zoo.inference.families.Family.mean_and_factor`).
    data : sequence of numpy.ndarray
        One array per data container of the model.
    draws : int, default 1000
        Draws of q in the estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    estimate : float
        The ELBO estimate.
    se : float
        Its Monte Carlo standard error.
    """
    z, log_q = families.sample(*q, draws, np.random.default_rng(seed))
    ratio = evaluate_draws(density, z, data, ("logp",))["logp"].astype("float64") - log_q
    return float(ratio.mean()), float(ratio.std(ddof=1) / np.sqrt(len(ratio)))


def best(fits, draws: int = 1000, seed: int = 0) -> FitResult:
    """The fit whose q has the highest :func:`elbo`.

    Of restarts that found different optima, the one closest to the
    posterior in KL(q || p).

    Parameters
    ----------
    fits : sequence of FitResult
        Fits of one model.
    draws : int, default 1000
        Draws of each q in its ELBO estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    FitResult
        The best of ``fits``.

    Raises
    ------
    ValueError
        For no fits, or fits of different models.
    """
    fits = _as_list(fits)
    return max(fits, key=lambda f: elbo(f, draws, seed)[0])


def point_posterior(result: FitResult, z: np.ndarray) -> DataTree:
    """A DataTree whose ``posterior`` holds the free variables at given unconstrained points.

    What :func:`predict` takes (as ``idata``) to evaluate those networks.

    Parameters
    ----------
    result : FitResult
        A fit of the model.
    z : array_like
        One flat unconstrained point ``(dim,)``, or one per row ``(k, dim)``
        (e.g. q's mean, or pruned copies of it), in the fit's ``layout``.

    Returns
    -------
    xarray.DataTree
        Its ``posterior`` has one chain of ``k`` draws.
    """
    return draws_posterior(result.model, result.density, np.atleast_2d(np.asarray(z)))


def draws_posterior(model: pm.Model, density: ModelFunction, z: np.ndarray) -> DataTree:
    """A DataTree whose ``posterior`` holds the free variables (constrained) at unconstrained draws.

    What every method that makes points of the unconstrained space (SGLD,
    SWAG, ensembles) returns, so that :func:`predict` and ArviZ take their
    draws like ``pm.sample``'s.

    Parameters
    ----------
    model : pymc.Model
        The model (its free variables, dims and coords).
    density : ModelFunction
        The compiled model.
    z : numpy.ndarray
        ``(draws, dim)`` (one chain) or ``(chains, draws, dim)``, in
        ``density.layout``.

    Returns
    -------
    xarray.DataTree
        With a ``posterior`` group of the free variables, with the model's dims.
    """
    z = np.asarray(z)
    z3 = z[None] if z.ndim == 2 else z
    names = tuple(rv.name for rv in model.free_RVs)
    values = evaluate_draws(density, z3.reshape(-1, z3.shape[-1]), _data(model), names)
    dims = {name: [d for d in model.named_vars_to_dims.get(name, ())] for name in names}
    coords = {d: v for d, v in _coords(model).items() if any(d in x for x in dims.values())}
    return az.from_dict({"posterior": {name: values[name].reshape(z3.shape[:2] + values[name].shape[1:])
                                       for name in names}},
                        dims={k: v for k, v in dims.items() if v}, coords=coords)


def sample(fits, draws: int = 500, *, seed: int = 0, log_likelihood: bool = True,
           var_names: Sequence[str] | None = None) -> DataTree:
    """Posterior draws of a fitted q (or of a mixture of fits: pass a list) as an ArviZ DataTree.

    Draws from q itself in the unconstrained space, maps them to the model's
    variables, and records each draw's ``log q`` and ``log p`` (the model's
    joint log density, Jacobian included): what PSIS-LOO for an approximate
    posterior (:func:`loo`) needs. A list of fits of one model gives draws
    from their equal-weight mixture, with the mixture's ``log q``
    (:func:`draw_z`).

    Parameters
    ----------
    fits : FitResult or sequence of FitResult
        One fit, or fits of one model (restarts, say).
    draws : int, default 500
        The number of draws, at least the number of fits.
    seed : int, default 0
        Seeds the draws.
    log_likelihood : bool, default True
        Evaluate ``log p`` and each observed variable's pointwise log
        likelihood on the model's data (a pass over the data per draw).
        Without it ``log_p`` is NaN and there is no ``log_likelihood`` group.
    var_names : sequence of str, optional
        Further variables for the ``posterior`` group. Default: every
        ``pm.Deterministic`` of the model, as ``pm.sample`` does; ``()``: the
        free variables alone (a network's per-observation deterministics can
        be large: draws x observations x classes).

    Returns
    -------
    xarray.DataTree
        Groups:

        - ``posterior``: the free variables (and ``var_names``), one chain,
          with the model's dims;
        - ``sample_stats``: ``log_q`` and ``log_p`` of each draw;
        - ``log_likelihood``: each observed variable's pointwise log density
          on the model's data (with ``log_likelihood``);
        - ``observed_data``, ``constant_data``: the observed values and the
          other data containers;
        - ``fit``: q's ``mean`` and ``sd`` of each value variable (the
          unconstrained space) along a ``param`` dim, with a ``component``
          dim for a mixture;
        - ``fit_stats``: the ELBO trace (``elbo`` along ``step``).

    Raises
    ------
    ValueError
        For no fits, fits of different models, too few draws, or a name in
        ``var_names`` the model does not have.

    See Also
    --------
    loo : PSIS-LOO from these draws.
    predict : The posterior predictive on new data.

    Examples
    --------
    >>> result = bnn_zoo.fit(model)
    >>> idata = bnn_zoo.sample(result, 1000)
    >>> az.summary(idata, var_names=["scale_0"])
    >>> idata["sample_stats"]["log_q"]      # q's log density of each draw

    The mixture of restarts from other seeds:

    >>> fits = [bnn_zoo.fit(model, seed=s) for s in range(4)]
    >>> idata = bnn_zoo.sample(fits, 1000)
    """
    fits = _as_list(fits)
    result, model = fits[0], fits[0].model
    z, log_q = draw_z(fits, draws, seed)
    if var_names is None:
        var_names = [v.name for v in model.deterministics]
    names = tuple(rv.name for rv in model.free_RVs) + tuple(v for v in var_names
                                                           if v not in {rv.name for rv in model.free_RVs})
    observed = tuple(rv.name for rv in model.observed_RVs)
    outputs = names + (("logp", *(f"loglik:{o}" for o in observed)) if log_likelihood else ())
    values = evaluate_z(result, z, outputs)
    log_p = values["logp"].astype("float64") if log_likelihood else np.full(len(z), np.nan)
    groups = {
        "posterior": {name: values[name][None] for name in names},
        "sample_stats": {"log_p": log_p[None], "log_q": log_q[None]},
    }
    if log_likelihood:
        groups["log_likelihood"] = {o: values[f"loglik:{o}"][None] for o in observed}
    groups["observed_data"] = find_observations(model)
    groups["constant_data"] = find_constants(model)
    dims = {name: list(d) for name, d in model.named_vars_to_dims.items()}
    tree = az.from_dict({k: v for k, v in groups.items() if v}, dims=_dims_that_fit(groups, dims, model),
                        coords=_coords(model),
                        attrs={"/": {"inference_library": "pymc", "inference_library_version": pm.__version__,
                                     "fit_method": result.method, "draws_from": f"{len(fits)} fit(s)"}})
    tree["fit"] = DataTree(_fit_group(fits))
    tree["fit_stats"] = DataTree(_fit_stats(fits))
    return tree


def _coords(model: pm.Model) -> dict:
    return {k: np.asarray(v) for k, v in model.coords.items() if v is not None}


def _dims_that_fit(groups: dict, dims: dict, model: pm.Model) -> dict:
    """``dims`` of the variables whose trailing shape matches their dims' coordinate lengths."""
    lengths = {k: len(v) for k, v in model.coords.items() if v is not None}
    out = {}
    for group in groups.values():
        for name, value in group.items():
            d = dims.get(name)
            if d is None:
                continue
            shape = np.shape(value)[-len(d):] if d else ()
            if len(shape) == len(d) and all(lengths.get(dim) in (None, size) for dim, size in zip(d, shape)):
                out[name] = d
    return out


def _fit_group(fits: list[FitResult]):
    """q's mean and sd of each value variable, by name, along ``param`` (and ``component``)."""
    model = fits[0].model
    value_dims = {}
    for rv in model.free_RVs:
        value_dims[model.rvs_to_values[rv].name] = list(model.named_vars_to_dims.get(rv.name, ()))
    coords = _coords(model)
    data = {}
    for name, _, shape, _ in fits[0].layout.slots:
        stack = np.stack([np.stack([f.mean[name], f.sd[name]]) for f in fits])
        d = value_dims.get(name) or [f"{name}_dim_{i}" for i in range(len(shape))]
        if len(d) != len(shape):
            d = [f"{name}_dim_{i}" for i in range(len(shape))]
        if len(fits) == 1:
            data[name] = (["param", *d], stack[0])
        else:
            data[name] = (["component", "param", *d], stack)
    ds = xr.Dataset(data, coords={"param": ["mean", "sd"]})
    return ds.assign_coords({k: v for k, v in coords.items() if k in ds.dims and len(v) == ds.sizes[k]})


def _fit_stats(fits: list[FitResult]):
    if len(fits) == 1:
        return xr.Dataset({"elbo": ("step", fits[0].elbo)}, coords={"step": np.arange(len(fits[0].elbo))})
    elbo = np.full((len(fits), max(len(f.elbo) for f in fits)), np.nan)  # NaN past a shorter fit
    for row, f in zip(elbo, fits):
        row[: len(f.elbo)] = f.elbo
    return xr.Dataset({"elbo": (("component", "step"), elbo)})


# --- predictions on new data --------------------------------------------------


def _new_data(model: pm.Model, new_data: Mapping | None) -> tuple[list[np.ndarray], dict[str, int]]:
    """Every container's value for the prediction, and the dims whose length changes.

    Containers in ``new_data`` take its values (checked against the
    container's rank and trailing shape); containers left out that share a
    changed dim (or, without dims, the changed leading length) are filled
    with zeros of the new length: they only feed observed values, which a
    prediction does not use.
    """
    new_data = dict(new_data or {})
    containers = {v.name: v for v in model.data_vars}
    unknown = sorted(set(new_data) - set(containers))
    if unknown:
        raise ValueError(f"model has no data container {', '.join(map(repr, unknown))}; "
                         f"its containers: {', '.join(containers) or 'none'}")
    dims = model.named_vars_to_dims
    changed, old_rows = {}, set()
    for name, value in new_data.items():
        old = np.asarray(containers[name].get_value())
        value = np.asarray(value)
        if value.ndim != old.ndim or value.shape[1:] != old.shape[1:] or (value.ndim and len(value) == 0):
            raise ValueError(f"new data {name!r} must be non-empty with shape (n, {', '.join(map(str, old.shape[1:]))})"
                             f" like the container, got {value.shape}")
        if np.issubdtype(value.dtype, np.number) and not np.all(np.isfinite(value)):
            raise ValueError(f"new data {name!r} must be finite")
        for axis, dim in enumerate(dims.get(name, ())):
            if value.shape[axis] != old.shape[axis]:
                changed[dim] = value.shape[axis]
        if value.ndim and value.shape[0] != old.shape[0]:
            old_rows.add(old.shape[0])
            changed.setdefault(f"__rows_{old.shape[0]}", value.shape[0])
    out = []
    for name, v in containers.items():
        old = np.asarray(v.get_value())
        if name in new_data:
            out.append(np.asarray(new_data[name]).astype(old.dtype))
            continue
        shape = list(old.shape)
        for axis, dim in enumerate(dims.get(name, ())):
            shape[axis] = changed.get(dim, shape[axis])
        if name not in dims and old.ndim and old.shape[0] in old_rows:
            shape[0] = changed[f"__rows_{old.shape[0]}"]
        out.append(old if list(old.shape) == shape else np.zeros(shape, old.dtype))
    return out, {k: v for k, v in changed.items() if not k.startswith("__rows_")}


def predict(source, new_data: Mapping | None = None, *, idata: DataTree | None = None,
            var_names: Sequence[str] | None = None, draws: int = 500, seed: int = 0,
            coords: Mapping | None = None, chunk: int | None = None) -> DataTree:
    """The posterior predictive of model variables on new data, as an ArviZ DataTree.

    Evaluates the model at new values of its data containers for every
    posterior draw, in compiled JAX, without changing the model: each
    observed variable is drawn afresh from its distribution, and
    deterministics (class probabilities, a regression's mean) are
    evaluated. The posterior may come from q or from any other method
    (``pm.sample``, the alternatives of :mod:`~bnn_zoo.inference.alternatives`).

    Parameters
    ----------
    source : FitResult or pymc.Model
        A fit (its q is sampled unless ``idata`` is given) or a model with
        ``idata`` (a posterior from any method, e.g. ``pm.sample``).
    new_data : dict of str to array_like, optional
        New values of the model's ``pm.Data`` containers, as ``pm.set_data``
        takes them (any number of rows). Containers left out keep their
        values, or are filled with zeros where they share a changed dim (the
        observed values, which a prediction does not use). Default: the
        model's own data.
    idata : xarray.DataTree, optional
        Whose ``posterior`` group holds every free variable (constrained).
        Default: ``sample(source, draws, seed=seed, log_likelihood=False)``.
    var_names : sequence of str, optional
        Deterministics, free or observed variables. An observed variable is
        drawn afresh from its distribution for each posterior draw (the
        posterior predictive); default: every observed variable.
    draws : int, default 500
        Draws from q when ``idata`` is not given.
    seed : int, default 0
        Seeds those draws and the observed variables' draws.
    coords : dict, optional
        Coordinates of the dims whose length changed (default ``0..n-1``).
    chunk : int, optional
        Evaluate the new rows this many at a time (less memory for large
        inputs); every output's first axis must run over the rows. Only
        with ``new_data``.

    Returns
    -------
    xarray.DataTree
        ``predictions`` (chain, draw, then the variable's dims) and
        ``predictions_constant_data`` (the data used).

    Raises
    ------
    ValueError
        For an unknown variable or data container, new data of the wrong
        shape or not finite, a model without ``idata``, a posterior that
        lacks a free variable, or a bad ``chunk``.
    NotImplementedError
        For an observed variable that is not a plain random variable (it
        cannot be redrawn): ask for the deterministics it depends on.

    Examples
    --------
    >>> result = bnn_zoo.fit(model)
    >>> pred = bnn_zoo.predict(result, {"X": X_new}, var_names=["p"])
    >>> p = pred["predictions"]["p"].mean(("chain", "draw"))   # predictive class probabilities

    From draws already made, or from NUTS:

    >>> idata = bnn_zoo.sample(result, 1000)
    >>> pred = bnn_zoo.predict(result, {"X": X_new}, idata=idata)
    >>> pred = bnn_zoo.predict(model, {"X": X_new}, idata=pm.sample(model=model))
    """
    model = source.model if isinstance(source, FitResult) else source
    if not isinstance(model, pm.Model):
        raise ValueError(f"predict needs a FitResult or a pm.Model, got {type(source).__name__}")
    names = tuple(var_names) if var_names is not None else tuple(rv.name for rv in model.observed_RVs)
    if not names:
        raise ValueError("no variables to predict: pass var_names")
    predictive = compile_predictive(model, names)  # a ValueError for unknown names
    data, changed = _new_data(model, new_data)
    if chunk is not None and not (isinstance(chunk, (int, np.integer)) and chunk >= 1 and new_data):
        raise ValueError(f"chunk must be an integer >= 1 with new_data, got {chunk!r}")
    if idata is None:
        if not isinstance(source, FitResult):
            raise ValueError("predict from a model needs idata with a posterior")
        idata = sample(source, draws, seed=seed, log_likelihood=False, var_names=())
    posterior = idata["posterior"]
    missing = [rv.name for rv in model.free_RVs if rv.name not in posterior]
    if missing:
        raise ValueError(f"the posterior lacks free variable(s) {', '.join(missing)}")
    chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    free = tuple(np.asarray(posterior[rv.name].values, dtype=rv.dtype)
                 .reshape(chains * n_draws, *posterior[rv.name].shape[2:]) for rv in model.free_RVs)
    keys = jax.random.key_data(jax.random.split(jax.random.key(seed),
                                                (chains * n_draws, max(predictive.n_random, 1))))
    evaluate = _map_draws(predictive.jitted, "predict", lambda per_draw, data: predictive.fn(
        per_draw[0], data, list(per_draw[1])[:predictive.n_random]))
    rows = len(next(iter(new_data.values()))) if chunk else None
    values = _in_chunks(evaluate, (free, keys), data, rows, chunk)
    return _predictions_tree(model, names, values, data, changed, coords, chains, n_draws)


def _in_chunks(evaluate, per_draw, data: list, rows: int | None, chunk: int | None) -> list:
    """``evaluate(per_draw, data)``, over the data's ``rows`` ``chunk`` at a time (the last padded)."""
    if chunk is None or rows <= chunk:
        return [np.asarray(v) for v in evaluate(per_draw, tuple(data))]
    cut = [np.ndim(d) > 0 and len(d) == rows for d in data]
    out = None
    for start in range(0, rows, chunk):
        stop = min(start + chunk, rows)
        part = tuple(np.concatenate([d[start:stop], np.repeat(d[stop - 1:stop], chunk - (stop - start), 0)])
                     if c else d for d, c in zip(data, cut))
        values = [np.asarray(v) for v in evaluate(per_draw, part)]
        if out is None:
            if any(v.ndim < 2 or v.shape[1] != chunk for v in values):
                raise ValueError("chunk needs every predicted variable's first axis to run over the rows")
            out = [np.empty((v.shape[0], rows, *v.shape[2:]), v.dtype) for v in values]
        for o, v in zip(out, values):
            o[:, start:stop] = v[:, : stop - start]
    return out


def _predictions_tree(model, names, values, data, changed, coords, chains, n_draws) -> DataTree:
    all_coords = _coords(model)
    for dim, length in changed.items():
        all_coords[dim] = np.arange(length)
    all_coords.update({dim: np.asarray(value) for dim, value in (coords or {}).items()})
    lengths = {k: len(v) for k, v in all_coords.items()}

    def fits(d, shape):
        return len(d) == len(shape) and all(lengths.get(x, s) == s for x, s in zip(d, shape))

    groups = {"predictions": {}, "predictions_constant_data": {}}
    dims = {}
    for name, value in zip(names, values):
        value = value.reshape(chains, n_draws, *value.shape[1:])
        groups["predictions"][name] = value
        d = list(model.named_vars_to_dims.get(name, ()))
        if fits(d, value.shape[2:]):
            dims[name] = d
    for v, value in zip(model.data_vars, data):
        groups["predictions_constant_data"][v.name] = value
        d = list(model.named_vars_to_dims.get(v.name, ()))
        if fits(d, value.shape):
            dims[v.name] = d
    used = {x for d in dims.values() for x in d}
    return az.from_dict(groups, pred_dims=dims,
                        pred_coords={k: v for k, v in all_coords.items() if k in used})


# --- PSIS-LOO -----------------------------------------------------------------


def loo(idata: DataTree, var_name: str | None = None) -> ELPDDataLOO:
    """PSIS-LOO for draws from an approximate posterior, corrected by each draw's ``log p - log q``.

    What ``az.loo_approximate_posterior(idata, log_p, log_q, var_name=...)``
    returns (Pareto-smoothed importance sampling, Vehtari et al.; the
    approximate-posterior correction of Magnusson et al. 2019), computed for
    all observations at once (:mod:`~bnn_zoo.inference.psis`), so
    ``az.compare`` takes it.

    Parameters
    ----------
    idata : xarray.DataTree
        From :func:`sample` with ``log_likelihood=True``: the
        ``log_likelihood`` group and ``sample_stats`` with every draw's
        finite ``log_p`` and ``log_q``.
    var_name : str, optional
        The observed variable; default the one in ``log_likelihood``.

    Returns
    -------
    arviz_stats.utils.ELPDDataLOO
        ``elpd``, its ``se``, ``p`` (the effective number of parameters),
        and pointwise ``elpd_i`` and ``pareto_k``, with
        ``approx_posterior=True``.

    Raises
    ------
    ValueError
        Without the ``log_likelihood`` group or finite ``log_p`` and
        ``log_q``; without ``var_name`` when there are several observed
        variables; with fewer than 25 draws.

    Warns
    -----
    UserWarning
        When a Pareto k estimate exceeds ``good_k`` (0.7, or less for fewer
        than about 2,200 draws): the importance sampling is less reliable
        for those observations.

    Examples
    --------
    >>> idata = bnn_zoo.sample(result, 1000)
    >>> elpd = bnn_zoo.loo(idata)
    >>> elpd.elpd, elpd.se
    >>> az.compare({"normal": bnn_zoo.loo(idata_a), "laplace": bnn_zoo.loo(idata_b)})
    """
    stats = idata["sample_stats"]
    if "log_likelihood" not in idata.children:
        raise ValueError("loo needs the log_likelihood group (sample(..., log_likelihood=True))")
    if not (np.isfinite(stats["log_p"]).all() and np.isfinite(stats["log_q"]).all()):
        raise ValueError("loo needs each draw's finite log p and log q (sample(..., log_likelihood=True))")
    group = idata["log_likelihood"]
    if var_name is None:
        if len(group.data_vars) != 1:
            raise ValueError(f"name the observed variable: var_name one of {', '.join(group.data_vars)}")
        var_name = next(iter(group.data_vars))
    log_lik = group[var_name]
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
