"""The posterior predictive of any model variable on new data, from any DataTree's posterior.

:func:`predict` evaluates any model variable, or redraws any observed one,
at new values of the model's data containers, for every posterior draw, in
compiled JAX: from q (:func:`~bnn_zoo.inference.posterior.sampling.sample`) or from
any other method's draws (``pm.sample``, the alternatives of
:mod:`~bnn_zoo.inference.alternatives.baselines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
from arviz_base import from_dict
from xarray import DataTree

from bnn_zoo.inference.support.renamed import refuse_renamed
from bnn_zoo.inference.support.seeds import check_seed
from bnn_zoo.inference.posterior.draws import map_draws
from bnn_zoo.inference.compile.jaxmodel import compile_predictive, predicted_from
from bnn_zoo.inference.posterior.result import FitResult
from bnn_zoo.inference.posterior.sampling import model_coords, sample

__all__ = ["predict"]


def describe_containers(model: pm.Model) -> str:
    """The model's data containers in words: name, shape, and what each one is.

    A container the engine made for an array given to ``pm.Minibatch``
    (``minibatch_0``, ...) says which argument it was; a container that is
    observed data says so, since predictions need only the inputs.

    Parameters
    ----------
    model : pymc.Model
        The model (a ``FitResult``'s ``model``).

    Returns
    -------
    str
        One clause per container, e.g. ``"minibatch_0 (500, 2): the 1st array given to
        pm.Minibatch"``.
    """
    observed = {model.rvs_to_values[rv]: rv.name for rv in model.observed_RVs}
    clauses = []
    for v in sorted(model.data_vars, key=lambda v: v.name):
        text = f"{v.name} {tuple(np.shape(v.get_value()))}"
        if v.name.startswith("minibatch_") and v.name[len("minibatch_"):].isdigit():
            k = int(v.name[len("minibatch_"):]) + 1
            text += f": the {k}{'st' if k == 1 else 'nd' if k == 2 else 'rd' if k == 3 else 'th'} array given to pm.Minibatch"
        if v in observed:
            text += f"{',' if ':' in text else ':'} observed by {observed[v]} (leave it out to predict)"
        clauses.append(text)
    return "; ".join(clauses)


def _index_lengths(model: pm.Model) -> dict[str, int]:
    """The length of the shortest axis each data container indexes directly (``a[g]``), by name.

    JAX clamps an index past an axis' end to its last element, where NumPy and PyMC raise: a new
    group index out of range would predict the last group's values, silently.
    """
    from pytensor.graph.traversal import applys_between

    containers, out = set(model.data_vars), {}
    for node in applys_between(model.data_vars, [*model.observed_RVs, *model.deterministics]):
        if "AdvancedSubtensor" not in type(node.op).__name__:
            continue
        lengths = node.inputs[0].type.shape
        for axis, index in enumerate(node.inputs[1:len(lengths) + 1]):
            if index in containers and lengths[axis] is not None:
                out[index.name] = min(out.get(index.name, lengths[axis]), lengths[axis])
    return out


def _feeding(model: pm.Model, names) -> set[str]:
    """The data containers the predicted variables ``names`` are computed from
    (:func:`~bnn_zoo.inference.compile.jaxmodel.predicted_from`: an observed variable's from its
    distribution's parameters, not its observed values)."""
    from pytensor.graph.traversal import ancestors

    containers = set(model.data_vars)
    return {v.name for v in ancestors([out for name in names for out in predicted_from(model, name)])
            if v in containers}


def _new_data(model: pm.Model, new_data: Mapping | None, feeding: set = frozenset()
              ) -> tuple[list[np.ndarray], dict[str, int]]:
    """Every container's value for the prediction, and the dims whose length changes.

    Containers in ``new_data`` take its values (checked against the
    container's rank and trailing shape); containers left out that share a
    changed dim (or, without dims, the changed leading length) are filled
    with zeros of the new length where they only feed observed values, which
    a prediction does not use, and refused where the predicted variables are
    computed from them (``feeding``, :func:`_feeding`).
    """
    if new_data is not None and not isinstance(new_data, Mapping):
        raise ValueError(f"new_data must map data container names to their new values ({{'x': x_new}}), got "
                         f"{type(new_data).__name__}; the model's containers: {describe_containers(model) or 'none'}")
    new_data = dict(new_data or {})
    containers = {v.name: v for v in model.data_vars}
    unknown = sorted(set(new_data) - set(containers))
    if unknown:
        raise ValueError(f"model has no data container {', '.join(map(repr, unknown))}; "
                         f"its containers: {describe_containers(model) or 'none'}")
    dims, lengths = model.named_vars_to_dims, _index_lengths(model) if new_data else {}
    changed, old_rows = {}, set()
    for name, value in new_data.items():
        old = np.asarray(containers[name].get_value())
        value = np.asarray(value)
        if value.ndim != old.ndim or value.shape[1:] != old.shape[1:] or (value.ndim and len(value) == 0):
            raise ValueError(f"new data {name!r} must be non-empty with shape (n, {', '.join(map(str, old.shape[1:]))})"
                             f" like the container, got {value.shape}")
        if np.issubdtype(value.dtype, np.number) and not np.all(np.isfinite(value)):
            raise ValueError(f"new data {name!r} must be finite")
        if np.issubdtype(old.dtype, np.integer) and not (np.issubdtype(value.dtype, np.integer) or (
                np.issubdtype(value.dtype, np.floating) and np.array_equal(value, np.round(value)))):
            raise ValueError(f"new data {name!r} must be integers like the container ({old.dtype}), got "
                             f"{value.dtype} values such as {value.ravel()[0].item()!r}")
        length = lengths.get(name) if np.issubdtype(old.dtype, np.integer) else None
        if length is not None and value.size and not (-length <= value.min() and value.max() < length):
            wrong = value[(value < -length) | (value >= length)].ravel()[0].item()
            raise ValueError(f"new data {name!r} indexes an axis of {length} (0..{length - 1}), got {wrong!r}: "
                             f"an index past the end would predict from the last one, silently")
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
        if list(old.shape) != shape and name in feeding:
            raise ValueError(f"new data must give {name!r} too: it runs over the rows that "
                             f"{', '.join(map(repr, new_data))} change{'s' * (len(new_data) == 1)}, and the "
                             f"predicted variables are computed from it; pass its new values as well")
        out.append(old if list(old.shape) == shape else np.zeros(shape, old.dtype))
    return out, {k: v for k, v in changed.items() if not k.startswith("__rows_")}


@refuse_renamed
def predict(source, new_data: Mapping | None = None, *, idata: DataTree | None = None,
            var_names: Sequence[str] | None = None, draws: int = 500, random_seed: int = 0,
            coords: Mapping | None = None, chunk: int | None = None) -> DataTree:
    """The posterior predictive of model variables on new data, as an ArviZ DataTree.

    Evaluates the model at new values of its data containers for every
    posterior draw, in compiled JAX, without changing the model: each
    observed variable is drawn afresh from its distribution, and
    deterministics (class probabilities, a regression's mean) are
    evaluated. The posterior may come from q or from any other method
    (``pm.sample``, the alternatives of :mod:`~bnn_zoo.inference.alternatives.baselines`).

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
        Default: ``sample(source, draws, random_seed=random_seed, log_likelihood=False)``.
    var_names : sequence of str, optional
        Deterministics, free or observed variables. An observed variable is
        drawn afresh from its distribution for each posterior draw (the
        posterior predictive); default: every observed variable.
    draws : int, default 500
        Draws from q when ``idata`` is not given.
    random_seed : int, default 0
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
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=100)
    >>> with pm.Model() as model:
    ...     X = pm.Data("X", x)
    ...     b = pm.Normal("b", 0, 10)
    ...     mu = pm.Deterministic("mu", b * X)
    ...     y = pm.Normal("y", mu, 1, observed=2 * x + rng.normal(size=100), shape=X.shape)
    >>> result = bnn_zoo.fit(model, steps=5_000, progressbar=False)
    >>> pred = bnn_zoo.predict(result, {"X": np.array([0.0, 1.0, 2.0])}, var_names=["mu", "y"])
    >>> pred["predictions"]["y"].shape            # chain, draw, the three new points
    (1, 500, 3)
    >>> print(pred["predictions"]["mu"].mean(("chain", "draw")).values.round(1))
    [0.  2.  4.1]

    From draws already made, or from any method's posterior (``pm.sample``'s,
    say), with the model:

    >>> idata = bnn_zoo.sample(result, 1000, log_likelihood=False)
    >>> pred = bnn_zoo.predict(model, {"X": np.array([1.0])}, idata=idata, var_names=["mu"])
    >>> pred["predictions"]["mu"].shape
    (1, 1000, 1)
    """
    model = source.model if isinstance(source, FitResult) else source
    if not isinstance(model, pm.Model):
        raise ValueError(f"predict needs a FitResult or a pm.Model, got {type(source).__name__}")
    random_seed = check_seed(random_seed)
    if idata is not None and not (isinstance(idata, DataTree) and "posterior" in idata.children):
        raise ValueError(f"idata must be a DataTree with a posterior group (what bnn_zoo.sample or pm.sample "
                         f"returns), got {type(idata).__name__}")
    names = tuple(var_names) if var_names is not None else tuple(rv.name for rv in model.observed_RVs)
    if not names:
        raise ValueError("no variables to predict: pass var_names")
    predictive = compile_predictive(model, names)  # a ValueError for unknown names
    data, changed = _new_data(model, new_data,
                              _feeding(model, names) if isinstance(new_data, Mapping) and new_data else set())
    if chunk is not None and not (isinstance(chunk, (int, np.integer)) and chunk >= 1 and new_data):
        raise ValueError(f"chunk must be an integer >= 1 with new_data, got {chunk!r}")
    if idata is None:
        if not isinstance(source, FitResult):
            raise ValueError("predict from a model needs idata with a posterior")
        idata = sample(source, draws, random_seed=random_seed, log_likelihood=False, var_names=())
    posterior = idata["posterior"]
    missing = [rv.name for rv in model.free_RVs if rv.name not in posterior]
    if missing:
        raise ValueError(f"the posterior lacks free variable(s) {', '.join(missing)}")
    chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    free = tuple(np.asarray(posterior[rv.name].values, dtype=rv.dtype)
                 .reshape(chains * n_draws, *posterior[rv.name].shape[2:]) for rv in model.free_RVs)
    keys = jax.random.key_data(jax.random.split(jax.random.key(random_seed),
                                                (chains * n_draws, max(predictive.n_random, 1))))
    def one_draw(per_draw, data):
        return predictive.fn(per_draw[0], data, list(per_draw[1])[:predictive.n_random])

    evaluate = map_draws(predictive.jitted, "predict", one_draw)
    rows = len(next(iter(new_data.values()))) if chunk else None
    if chunk is not None and rows > chunk:
        _check_rows(one_draw, (free, keys), data, rows, chunk, names)
    values = _in_chunks(evaluate, (free, keys), data, rows, chunk)
    return _predictions_tree(model, names, values, data, changed, coords, chains, n_draws)


def _folded(keys: np.ndarray, j: int) -> np.ndarray:
    """Each of ``keys`` (raw key data, ``(..., 2)``) with ``j`` folded in: chunk ``j``'s own noise."""
    if j == 0:
        return keys
    flat = jax.random.wrap_key_data(jnp.asarray(keys).reshape(-1, keys.shape[-1]))
    return np.asarray(jax.random.key_data(jax.vmap(lambda k: jax.random.fold_in(k, j))(flat))).reshape(keys.shape)


def _over_rows(data: list, rows: int) -> list[bool]:
    """Which of the data containers run over the new rows (the ones ``chunk`` cuts)."""
    return [np.ndim(d) > 0 and len(d) == rows for d in data]


def _check_rows(one_draw, per_draw, data: list, rows: int, chunk: int, names) -> None:
    """Refuse ``chunk`` unless every output's first axis runs over the rows: as long as the rows with all
    of them, and as long as a chunk with a chunk of them (shapes traced, nothing evaluated)."""
    first, cut = jax.tree_util.tree_map(lambda a: a[0], per_draw), _over_rows(data, rows)
    lengths = [[o.shape[0] if o.ndim else None for o in jax.eval_shape(
        one_draw, first, tuple(np.asarray(d)[:n] if c else d for d, c in zip(data, cut)))] for n in (rows, chunk)]
    wrong = [name for name, whole, part in zip(names, *lengths) if (whole, part) != (rows, chunk)]
    if wrong:
        raise ValueError(f"chunk needs every predicted variable's first axis to run over the new rows; "
                         f"{', '.join(map(repr, wrong))} do{'es' * (len(wrong) == 1)} not: predict "
                         f"{'it' if len(wrong) == 1 else 'them'} without chunk")


def _in_chunks(evaluate, per_draw, data: list, rows: int | None, chunk: int | None) -> list:
    """``evaluate(per_draw, data)``, over the data's ``rows`` ``chunk`` at a time (the last padded).

    ``per_draw`` is ``(free values, keys)``; chunk ``j`` draws with the keys folded with ``j``, so
    that no two chunks' rows share their noise.
    """
    if chunk is None or rows <= chunk:
        return [np.asarray(v) for v in evaluate(per_draw, tuple(data))]
    cut = _over_rows(data, rows)
    out = None
    for j, start in enumerate(range(0, rows, chunk)):
        stop = min(start + chunk, rows)
        part = tuple(np.concatenate([d[start:stop], np.repeat(d[stop - 1:stop], chunk - (stop - start), 0)])
                     if c else d for d, c in zip(data, cut))
        values = [np.asarray(v) for v in evaluate((per_draw[0], _folded(per_draw[1], j)), part)]
        if out is None:
            out = [np.empty((v.shape[0], rows, *v.shape[2:]), v.dtype) for v in values]
        for o, v in zip(out, values):
            o[:, start:stop] = v[:, : stop - start]
    return out


def _predictions_tree(model, names, values, data, changed, coords, chains, n_draws) -> DataTree:
    all_coords = model_coords(model)
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
    return from_dict(groups, pred_dims=dims,
                        pred_coords={k: v for k, v in all_coords.items() if k in used})
