"""Runs the core's ADVI steps fast, in compiled JAX.

What makes it fast, each measured (docs/user_guide/engine.md):

- the data is put on the device once and passed to the compiled programs as
  arguments (so models of one structure on other data share the programs);
- minibatches are gathered on the device, each epoch of ``N // batch_size``
  steps walking a fresh random permutation (the remainder is skipped);
- the state is donated to each call, so parameters and optimizer state are
  updated in place instead of copied;
- cheap steps run :data:`CHUNK` at a time inside one ``lax.fori_loop``, so
  that the per-call overhead does not dominate them; expensive ones one per
  call, because XLA's CPU backend runs convolutions several times slower
  inside a loop. Both ways take identical steps.

The permutation of epoch ``e`` is derived from ``(seed, e)`` and the noise
of step ``t`` from ``(seed, t)``, so a fit resumed from its state continues
exactly where it stopped.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bnn_zoo.inference.advi import core, noise
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.advi.core import ADVIState
from bnn_zoo.inference.advi.objective import ELBOFunction
from bnn_zoo.inference.compile.cost import cheap

__all__ = ["CHUNK", "Runner", "batch_indices", "compile_loops", "compile_steps",
           "steps_per_epoch"]

#: Steps per call of the compiled loop.
CHUNK = 100
def steps_per_epoch(n: int, batch_size: int | None) -> int:
    """Steps in one pass over ``n`` rows.

    Parameters
    ----------
    n : int
        Rows of the data cut into minibatches.
    batch_size : int or None
        Minibatch size; ``None`` (or 0) without minibatches.

    Returns
    -------
    int
        ``n // batch_size`` (the remainder of the rows is skipped), or 1
        without minibatches.
    """
    return n // batch_size if batch_size else 1


def _permutation(key, epoch, n):
    return jax.random.permutation(jax.random.fold_in(key, epoch), n)


def batch_indices(seed: int, n: int, batch_size: int, steps: int) -> np.ndarray:
    """The rows the engine's minibatches take in the steps from 0 to ``steps - 1``.

    For benchmarks that feed other implementations the same batches.

    Parameters
    ----------
    seed : int
        The fit's seed.
    n : int
        Rows of the data cut into minibatches.
    batch_size : int
        Minibatch size.
    steps : int
        The number of steps.

    Returns
    -------
    numpy.ndarray
        ``(steps, batch_size)`` row indices: row ``t`` is step ``t``'s minibatch.
    """
    per_epoch = n // batch_size
    perm_key = jax.random.fold_in(jax.random.key(seed), 1)
    epochs = [np.asarray(_permutation(perm_key, e, n)) for e in range(-(-steps // per_epoch))]
    rows = [epochs[t // per_epoch][(t % per_epoch) * batch_size:][:batch_size] for t in range(steps)]
    return np.stack(rows)


def compile_steps(objective: ELBOFunction, optimizer: optax.GradientTransformation, *, sliced: tuple,
                  n: int, batch_size: int | None, mc_samples: int, kl_weight: Callable,
                  dtype: str, average_from: int = 0) -> dict:
    """:func:`compile_loops` of the core's ADVI step (the trace holds the steps' ELBO estimates).

    Parameters
    ----------
    objective : ELBOFunction
        The objective (:class:`~bnn_zoo.inference.advi.objective.ELBOFunction`).
    optimizer : optax.GradientTransformation
        The optimizer.
    sliced : tuple of bool
        Per data container, whether it is cut into minibatches.
    n : int
        Rows of the containers cut into minibatches (0 without minibatches).
    batch_size : int or None
        Minibatch size; ``None`` for the full data.
    mc_samples : int
        Monte Carlo draws per step.
    kl_weight : callable
        The KL weighting, a function of the step.
    dtype : str
        The fit's float dtype (of the trace).
    average_from : int, default 0
        The step after which the iterates are averaged (with averaging).

    Returns
    -------
    dict
        The jitted functions of :func:`compile_loops`.
    """

    def update(state, words, batch):
        state, info = core.step(state, words, batch, objective=objective, optimizer=optimizer,
                                mc_samples=mc_samples, kl_weight=kl_weight, average_from=average_from)
        return state, info.elbo

    return compile_loops(update, sliced=sliced, n=n, batch_size=batch_size, dtype=dtype)


def compile_loops(update: Callable, *, sliced: tuple, n: int, batch_size: int | None, dtype: str) -> dict:
    """Jitted ways to run ``update`` steps; each donates the state (the caller's handle becomes invalid).

    Parameters
    ----------
    update : callable
        ``update(state, words, batch) -> (state, value)``: one step of any
        method whose state has a ``step`` counter (ADVI's, or the
        point-iterate methods' of :mod:`bnn_zoo.inference.alternatives.iterates`);
        ``value`` is a scalar kept in the trace.
    sliced : tuple of bool
        Per data container, whether it is cut into minibatches.
    n : int
        Rows of the containers cut into minibatches (0 without minibatches).
    batch_size : int or None
        Minibatch size; ``None`` for the full data.
    dtype : str
        The trace's dtype.

    Returns
    -------
    dict
        ``"loop"``: ``loop(state, key, k, data) -> (state, trace[CHUNK])``
        runs ``k <= CHUNK`` steps inside one ``lax.fori_loop`` (NaN past
        ``k``); ``"batched_loop"``: the same for many fits at once
        (``jax.vmap`` over their stacked states, keys and data: one compiled
        program for all of them); ``"step"``: ``step(state, key, perm, data)
        -> (state, perm, value)`` runs one, given the current epoch's
        permutation ``perm``; ``"epoch_permutation"``:
        ``epoch_permutation(key, t)``, that permutation at step ``t``.
        ``data`` holds one device array per data container, the ``sliced``
        ones of ``n`` rows cut into minibatches of ``batch_size``.
    """
    per_epoch = steps_per_epoch(n, batch_size)

    def one_step(state, words, perm_key, perm, data):
        t = state.step
        if batch_size:
            pos = t % per_epoch
            perm = jax.lax.cond(pos == 0, lambda: _permutation(perm_key, t // per_epoch, n),
                                lambda: perm)
            idx = jax.lax.dynamic_slice(perm, (pos * batch_size,), (batch_size,))
            batch = tuple(jnp.take(d, idx, axis=0) if cut else d for d, cut in zip(data, sliced))
        else:
            batch = data
        state, value = update(state, words, batch)
        return state, perm, value

    def epoch_permutation(key, t):
        return _permutation(jax.random.fold_in(key, 1), t // per_epoch, n) if batch_size else None

    def loop(state, key, k, data):
        words, perm_key = noise.key_words(key), jax.random.fold_in(key, 1)

        def body(i, carry):
            state, perm, trace = carry
            state, perm, value = one_step(state, words, perm_key, perm, data)
            return state, perm, trace.at[i].set(value.astype(trace.dtype))

        carry = (state, epoch_permutation(key, state.step), jnp.full(CHUNK, jnp.nan, dtype))
        state, _, trace = jax.lax.fori_loop(0, k, body, carry)
        return state, trace

    @partial(jax.jit, donate_argnums=(0,))
    def step(state, key, perm, data):
        return one_step(state, noise.key_words(key), jax.random.fold_in(key, 1), perm, data)

    return {"loop": jax.jit(loop, donate_argnums=(0,)), "step": step,
            "epoch_permutation": jax.jit(epoch_permutation),
            # Many fits of one structure at once: states, keys and data stacked on a leading axis.
            "batched_loop": jax.jit(jax.vmap(loop, in_axes=(0, 0, None, 0)), donate_argnums=(0,))}


class Runner:
    """Advances a state (an :class:`~bnn_zoo.inference.advi.core.ADVIState` or any with a ``step``
    counter) by compiled steps.

    On its first call it asks XLA's cost analysis what one step costs: steps
    under :data:`~bnn_zoo.inference.compile.cost.LOOP_BELOW_FLOPS` run :data:`CHUNK` at a time in the
    compiled loop, dearer ones one per call (XLA's CPU backend runs
    convolutions several times slower inside a loop). Both take identical
    steps.

    Parameters
    ----------
    steps : dict
        :func:`compile_loops`' functions, shared by fits of one structure and
        settings (the runner records its choice of loop in it).
    data : tuple of jax.Array
        The fit's data on the device, one array per data container.
    seed : int
        Seeds the steps' noise and the minibatches' permutations.
    """

    def __init__(self, steps: dict, data: tuple, seed: int):
        self.steps, self.data, self.key = steps, data, jax.random.key(seed)

    def advance(self, state: ADVIState, start: int, n: int) -> tuple[ADVIState, np.ndarray]:
        """Run steps ``start .. start + n - 1``.

        Parameters
        ----------
        state : ADVIState
            The state at step ``start``; donated (invalid after the call).
        start : int
            ``state.step``.
        n : int
            The number of steps.

        Returns
        -------
        state : ADVIState
            The state after the steps.
        trace : numpy.ndarray
            ``(n,)`` float64: each step's value (the ELBO estimate, for ADVI).
        """
        steps, data = self.steps, self.data
        if "in_loop" not in steps:
            # XLA's cost analysis counts the loop's body once: the flops of one step.
            lowered = steps["loop"].lower(state, self.key, 1, data)
            steps["in_loop"] = cheap(lowered)
            if steps["in_loop"]:
                steps["loop"] = lowered.compile()
        if steps["in_loop"]:
            trace = []
            for first in range(start, start + n, CHUNK):
                k = min(CHUNK, start + n - first)
                state, part = steps["loop"](state, self.key, k, data)
                trace.append(part[:k])
                calls.interrupted()  # a Ctrl-C a callback swallowed ends the fit here
            return state, np.asarray(jnp.concatenate(trace), dtype="float64")
        perm, elbos = steps["epoch_permutation"](self.key, start), []
        for _ in range(n):
            state, perm, elbo = steps["step"](state, self.key, perm, data)
            elbos.append(elbo)
            calls.interrupted()
        return state, np.asarray(jnp.stack(elbos), dtype="float64")
