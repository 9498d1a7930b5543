"""Draws of q, and the model evaluated at any unconstrained draws, in compiled JAX.

:func:`draw_z` draws from q (or from a mixture of several fits' q) with each
draw's ``log q``; :func:`evaluate_z` and :func:`evaluate_draws` evaluate model
outputs (variables, ``log p``, pointwise log likelihoods) at many draws at
once through a :class:`DrawMap`, which :mod:`~bnn_zoo.inference.posterior.prediction`
uses too. What :mod:`~bnn_zoo.inference.posterior.sampling` (the DataTree),
:mod:`~bnn_zoo.inference.posterior.prediction` and :mod:`~bnn_zoo.inference.posterior.restarts`
(q's ELBO) build on.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
import pymc as pm
from jax.extend import core as jax_core

from bnn_zoo.inference.compile.cost import cheap
from bnn_zoo.inference.compile.jaxmodel import ModelFunction
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["MAP_BYTES", "MAX_BLOCK_DRAWS", "DrawMap", "draw_z", "evaluate_draws", "evaluate_z", "fit_list", "map_draws",
           "model_data"]

#: Memory for the draws evaluated together, in bytes (:class:`DrawMap`), every intermediate array counted.
#: XLA fuses most of them, so a block's working set is a fraction of this. Of 8, 32, 64 and 256 MB, 64 MB
#: gives the shortest total time for ``log p`` at 8,000 draws (``method="auto"``'s test) over six models
#: of the development set (``python -m benchmarks.draw_blocks``).
MAP_BYTES = 64 * 2**20
#: The most draws of a block, however small a draw: ``method="auto"``'s test (8,000 draws), ``sample``'s
#: resampling pool (16,000) and the draws it keeps (a few thousand) then run one compiled program.
MAX_BLOCK_DRAWS = 2048


class DrawMap:
    """``f(per_draw, consts) -> list of NumPy arrays (draws, ...)``: ``fn(one_draw, consts)`` for every draw.

    ``per_draw`` is a pytree of arrays with a leading draws axis. As the
    engine does with steps, cheap draws (under
    :data:`~bnn_zoo.inference.compile.cost.LOOP_BELOW_FLOPS` by XLA's cost
    analysis) are evaluated vectorised, in blocks of as
    many draws as fit in :data:`MAP_BYTES` (every intermediate array of one
    draw counted, though XLA fuses most of them); expensive
    ones one compiled call per draw, because XLA's CPU backend runs
    convolutions several times slower inside a loop
    (docs/user_guide/engine.md). The compiled program takes a fixed number
    of draws, a power of two (the draws' own power of two, at most what
    ``MAP_BYTES`` allows and at most :data:`MAX_BLOCK_DRAWS`), and runs as
    often as the draws need, the last time padded: counts of draws up to
    one power of two share its program (1,500 and 2,000 draws run as
    2,048), and larger counts share the largest, where a program for each
    count compiled again for each.

    Parameters
    ----------
    fn : callable
        ``fn(one_draw, consts) -> list of arrays``, traceable by JAX.
    """

    def __init__(self, fn):
        self.fn, self.one, self.block_draws = fn, jax.jit(fn), {}
        self.block = jax.jit(jax.vmap(fn, in_axes=(0, None)))  # a block of draws; one program per block size

    def __call__(self, per_draw, consts) -> list:
        # Draws are sliced, padded and joined in NumPy: on JAX arrays each slice, pad and join is
        # an XLA program of its own, traced and compiled (or read back from disk) in every process.
        per_draw = jax.tree_util.tree_map(np.asarray, per_draw)
        first = jax.tree_util.tree_map(lambda a: a[0], per_draw)
        n = len(jax.tree_util.tree_leaves(per_draw)[0])
        shapes = str(jax.tree_util.tree_map(lambda a: (a.shape, a.dtype), (first, consts)))
        if shapes not in self.block_draws:  # per draw's shape: the block's draws, or None where draws go one by one
            self.block_draws[shapes] = (_block_draws(jax.make_jaxpr(self.fn)(first, consts).jaxpr)
                                        if cheap(self.one.lower(first, consts)) else None)
        largest = self.block_draws[shapes]
        if largest is None:
            outs = [self.one(jax.tree_util.tree_map(lambda a: a[i], per_draw), consts) for i in range(n)]
            return [np.stack(jax.device_get(parts)) for parts in zip(*outs)]
        chunk = min(largest, 1 << (n - 1).bit_length())  # n's power of two: padding at most doubles the work
        parts = []
        for start in range(0, n, chunk):  # the last chunk padded with copies of its last draw
            piece = jax.tree_util.tree_map(lambda a: _padded(a[start:start + chunk], chunk), per_draw)
            parts.append([o[: min(chunk, n - start)] for o in jax.device_get(self.block(piece, consts))])
        return [np.concatenate(outs) if len(outs) > 1 else outs[0] for outs in zip(*parts)]


def map_draws(cache: dict, key, fn) -> DrawMap:
    """The :class:`DrawMap` of ``fn``, kept in ``cache`` under ``key``.

    Parameters
    ----------
    cache : dict
        Where it is kept: a compiled model's ``jitted`` (one per model
        structure and outputs).
    key : hashable
        Its key in ``cache``.
    fn : callable
        ``fn(one_draw, consts) -> list of arrays``, used when ``key`` is new.

    Returns
    -------
    DrawMap
        The cached map.
    """
    if key not in cache:
        cache[key] = DrawMap(fn)
    return cache[key]


def _block_draws(jaxpr) -> int:
    """The draws of a block: the largest power of two whose intermediates fit in :data:`MAP_BYTES`, at most
    :data:`MAX_BLOCK_DRAWS`."""
    draws = min(max(MAP_BYTES // max(_jaxpr_bytes(jaxpr), 1), 1), MAX_BLOCK_DRAWS)
    return 1 << (int(draws).bit_length() - 1)


def _padded(a, size: int):
    """``a``'s rows, then copies of its last row up to ``size`` rows."""
    return a if len(a) == size else np.concatenate([a, np.broadcast_to(a[-1:], (size - len(a), *a.shape[1:]))])


def _jaxpr_bytes(jaxpr) -> int:
    """Bytes of every array a jaxpr's equations produce, nested jaxprs included."""
    total = sum(int(np.prod(v.aval.shape)) * v.aval.dtype.itemsize
                for eqn in jaxpr.eqns for v in eqn.outvars if hasattr(v.aval, "shape"))
    return total + sum(_jaxpr_bytes(sub) for sub in jax_core.subjaxprs(jaxpr))


def model_data(model: pm.Model) -> list[np.ndarray]:
    """The current value of each of ``model``'s data containers.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    list of numpy.ndarray
        One array per ``model.data_vars``, in their order.
    """
    return [np.asarray(v.get_value()) for v in model.data_vars]


# --- draws from q -------------------------------------------------------------


def fit_list(fits) -> list[FitResult]:
    """One fit, or fits of one model, as a list.

    Parameters
    ----------
    fits : FitResult or sequence of FitResult
        One fit, or fits of one model (the same variables and shapes).

    Returns
    -------
    list of FitResult
        The fits.

    Raises
    ------
    TypeError
        For anything other than a fit or a sequence of fits.
    ValueError
        For no fits, or fits of different models or of one model on different data.
    """
    if not isinstance(fits, (FitResult, list, tuple)) or (
            not isinstance(fits, FitResult) and not all(isinstance(f, FitResult) for f in fits)):
        raise TypeError(f"takes a fit (what bnn_zoo.fit returns) or a list of fits of one model, got "
                        f"{type(fits).__name__}")
    fits = [fits] if isinstance(fits, FitResult) else list(fits)
    if not fits:
        raise ValueError("sample needs at least one fit")
    layouts = {tuple((name, shape) for name, _, shape, _ in f.layout.slots) for f in fits}
    if len(layouts) > 1:
        raise ValueError("a mixture needs fits of one model (the same variables and shapes)")
    first = _data_of(fits[0].model)
    for i, f in enumerate(fits[1:], 1):
        if f.model is not fits[0].model and not _same_data(first, _data_of(f.model)):
            raise ValueError(f"a mixture needs fits of one model on the same data: fit {i}'s data containers or "
                             f"observed values differ from fit 0's (its draws would be weighed on fit 0's data)")
    return fits


def _data_of(model) -> list[np.ndarray]:
    """A model's data: its containers' values and its observed variables' observed values."""
    values = [v.get_value() for v in model.data_vars]
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        values.append(value.get_value() if hasattr(value, "get_value") else getattr(value, "data", None))
    return [np.asarray(v) for v in values]


def _same_data(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


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
    fits = fit_list(fits)
    if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= len(fits)):
        raise ValueError(f"need an integer number of draws >= the number of fits ({len(fits)}), got {n!r}")
    rng = np.random.default_rng(seed)
    if len(fits) == 1:
        return fits[0].family.sample(fits[0].params, n, rng)
    sizes = np.array([len(part) for part in np.array_split(np.arange(n), len(fits))])
    z = np.concatenate([f.family.sample(f.params, k, rng)[0] for f, k in zip(fits, sizes)])
    log_qs = np.stack([f.family.log_q(f.params, z) for f in fits]) + np.log(sizes / n)[:, None]
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
        (:meth:`~bnn_zoo.inference.compile.jaxmodel.ModelFunction.select`).

    Returns
    -------
    dict of str to numpy.ndarray
        Each output's values, with a leading axis of draws.

    Raises
    ------
    ValueError
        For a name the model does not have.
    """
    return evaluate_draws(result.density, z, model_data(result.model), outputs)


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
    evaluate = map_draws(density.jitted, ("evaluate", outputs),
                          lambda z, data: select(unflatten(z), *data))
    values = evaluate(np.asarray(z, dtype=density.layout.slots[0][3]), tuple(data))
    return {name: np.asarray(v) for name, v in zip(outputs, values)}
