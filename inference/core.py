"""ADVI as a small functional core: ``init``, ``step`` and ``sample`` on a ``NamedTuple`` state.

In the style of blackjax's ``vi/meanfield_vi.py``::

    state = core.init(params, optimizer)
    state, info = core.step(state, words, batch, objective=elbo, optimizer=optimizer)
    z = core.sample(key, state.params, family, 100)

``params`` are q's parameters (:mod:`bnn_zoo.inference.families`),
``objective`` an :class:`~bnn_zoo.inference.objective.ELBO`, ``optimizer``
an optax ``GradientTransformation``. The step's Monte Carlo noise is a pure
function of the key words and the state's step counter, so a state saved as
its leaves (a checkpoint) continues exactly. :mod:`bnn_zoo.inference.engine`
runs these steps fast; :func:`bnn_zoo.fit` is the user-facing loop.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnn_zoo.inference import noise
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.objective import ELBO


class ADVIState(NamedTuple):
    """Everything a step updates: q's parameters, the optimizer's state, the step counter, and
    (with iterate averaging) the running mean of the parameters."""

    params: dict
    opt_state: Any
    step: jax.Array  # int32, the steps taken
    average: dict | None = None  # mean of the iterates since ``average_from`` (or the latest before)

    @property
    def fitted(self) -> dict:
        """q's parameters as a fit returns them: the running mean when averaging, else the latest."""
        return self.params if self.average is None else self.average


class ADVIInfo(NamedTuple):
    elbo: jax.Array  # the step's ELBO estimate, at full-data scale


def init(params: dict, optimizer: optax.GradientTransformation, average: bool = False) -> ADVIState:
    """The state before the first step (with a running mean of the iterates if ``average``)."""
    copy = jax.tree_util.tree_map(jnp.copy, params) if average else None  # its own buffers
    return ADVIState(params, optimizer.init(params), jnp.asarray(0, jnp.int32), copy)


def step(state: ADVIState, words, batch: tuple, *, objective: ELBO,
         optimizer: optax.GradientTransformation, mc_samples: int = 1,
         kl_weight: Callable = lambda t: 1.0, average_from: int = 0) -> tuple[ADVIState, ADVIInfo]:
    """One optimisation step on ``batch`` (one array per data container).

    ``words`` are the noise stream's key words (:func:`noise.key_words`). With
    a running mean in the state, it averages the iterates after step
    ``average_from`` (Polyak-Ruppert averaging: the final iterate's noise
    shrinks as one over the number averaged); before that it follows them.
    """
    mu = state.params["mu"]
    # The barrier keeps XLA from fusing the generator into every consumer of the
    # draw (each variable's slice, the gradient), which makes a toy step 4x slower.
    eps = jax.lax.optimization_barrier(
        noise.normal(words, state.step, 0, (mc_samples, mu.shape[0]), mu.dtype))
    (_, elbo), grads = jax.value_and_grad(objective, has_aux=True)(
        state.params, eps, batch, kl_weight(state.step), words=words, step=state.step)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    average = None
    if state.average is not None:
        weight = 1.0 / jnp.maximum(state.step + 1 - average_from, 1).astype(mu.dtype)
        average = jax.tree_util.tree_map(lambda a, p: a + weight * (p - a), state.average, params)
    return ADVIState(params, opt_state, state.step + 1, average), ADVIInfo(elbo)


def sample(key, params: dict, family: Family, n: int):
    """``n`` draws of q (rows), in JAX."""
    eps = jax.random.normal(key, (n, params["mu"].shape[0]), params["mu"].dtype)
    return jax.vmap(lambda e: family.draw(params, e)[0])(eps)
