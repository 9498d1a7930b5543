"""ADVI as a small functional core: ``init``, ``step`` and ``sample`` on a ``NamedTuple`` state.

In the style of blackjax's ``vi/meanfield_vi.py``::

    state = core.init(params, optimizer)
    state, info = core.step(state, words, batch, objective=elbo, optimizer=optimizer)
    z = core.sample(key, state.params, family, 100)

``params`` are q's parameters (:mod:`bnn_zoo.inference.families`),
``objective`` an :class:`~bnn_zoo.inference.advi.objective.ELBOFunction`, ``optimizer``
an optax ``GradientTransformation``. The step's Monte Carlo noise is a pure
function of the key words and the state's step counter, so a state saved as
its leaves (a checkpoint) continues exactly. :mod:`bnn_zoo.inference.advi.engine`
runs these steps fast; :func:`bnn_zoo.fit` is the user-facing loop.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.advi.objective import ELBOFunction

__all__ = ["ADVIInfo", "ADVIState", "init", "sample", "step"]

class ADVIState(NamedTuple):
    """Everything a step updates: q's parameters, the optimizer's state, the step counter, and
    (with iterate averaging) the running mean of the parameters.

    A pytree of arrays: it passes through ``jax.jit`` and ``jax.vmap``, and a
    checkpoint stores its leaves.

    Attributes
    ----------
    params : dict of str to jax.Array
        q's parameters (:mod:`~bnn_zoo.inference.families`): ``mu`` and
        ``rho`` or ``mu`` and ``L_tril``.
    opt_state : Any
        The optax optimizer's state.
    step : jax.Array
        The number of steps taken, an int32 scalar. It indexes the step's
        Monte Carlo noise and minibatch.
    average : dict of str to jax.Array or None, default None
        The running mean of the iterates since ``average_from`` (before that,
        the latest iterate), or ``None`` without averaging.
    average_from : jax.Array or None, default None
        Where the running mean begins, an int32 scalar the host may move
        between steps (a fit that stops once converged begins it then); ``None``:
        the step's own ``average_from``.
    fitted : dict of str to jax.Array
        q's parameters as a fit returns them.
    """

    params: dict
    opt_state: Any
    step: jax.Array  # int32, the steps taken
    average: dict | None = None  # mean of the iterates since ``average_from`` (or the latest before)
    average_from: jax.Array | None = None  # int32; None: the step's own ``average_from``

    @property
    def fitted(self) -> dict:
        """q's parameters as a fit returns them: the running mean when averaging, else the latest."""
        return self.params if self.average is None else self.average


class ADVIInfo(NamedTuple):
    """What a step reports besides the new state.

    Attributes
    ----------
    elbo : jax.Array
        The step's ELBO estimate (with the KL weight ``beta``), at
        full-data scale.
    """

    elbo: jax.Array  # the step's ELBO estimate, at full-data scale


def init(params: dict, optimizer: optax.GradientTransformation, average: bool = False) -> ADVIState:
    """The state before the first step.

    Parameters
    ----------
    params : dict of str to jax.Array
        q's initial parameters, e.g. ``family.init(mean, sd)``
        (:class:`~bnn_zoo.inference.families.Family`) as JAX arrays.
    optimizer : optax.GradientTransformation
        The optimizer whose state to initialise.
    average : bool, default False
        Keep a running mean of the iterates (Polyak-Ruppert averaging),
        starting as a copy of ``params``.

    Returns
    -------
    ADVIState
        At step 0.
    """
    copy = jax.tree_util.tree_map(jnp.copy, params) if average else None  # its own buffers
    return ADVIState(params, optimizer.init(params), jnp.asarray(0, jnp.int32), copy)


def step(state: ADVIState, words, batch: tuple, *, objective: ELBOFunction,
         optimizer: optax.GradientTransformation, mc_samples: int = 1,
         kl_weight: Callable = lambda t: 1.0, average_from: int = 0) -> tuple[ADVIState, ADVIInfo]:
    """One optimisation step of q on ``batch``.

    Draws ``mc_samples`` standard-normal rows from the noise stream at
    ``state.step``, takes the gradient of ``objective``'s loss and applies
    the optimizer's update. A pure function of its arguments: jit it, vmap
    it, or run it in a loop (:mod:`bnn_zoo.inference.advi.engine` does all three).

    Parameters
    ----------
    state : ADVIState
        The state before the step.
    words : jax.Array
        The noise stream's two uint32 key words
        (:func:`~bnn_zoo.inference.advi.noise.key_words` of a JAX key).
    batch : tuple of jax.Array
        One array per data container of the model (a minibatch of the ones
        cut into minibatches).
    objective : ELBOFunction
        The objective (:class:`~bnn_zoo.inference.advi.objective.ELBOFunction`).
    optimizer : optax.GradientTransformation
        The optimizer whose state ``state.opt_state`` holds.
    mc_samples : int, default 1
        Monte Carlo draws of q in the step's estimate.
    kl_weight : callable, default ``lambda t: 1.0``
        The KL weighting: a function of the step that scales the KL part of
        the loss (:func:`~bnn_zoo.inference.advi.objective.constant`,
        :func:`~bnn_zoo.inference.advi.objective.blundell`).
    average_from : int, default 0
        With a running mean in the state: the step after which the iterates
        are averaged (Polyak-Ruppert averaging, whose noise shrinks as one
        over the number averaged); before it the mean follows the iterates.
        ``state.average_from``, where set, takes its place.

    Returns
    -------
    state : ADVIState
        The state after the step.
    info : ADVIInfo
        The step's ELBO estimate.
    """
    mu = state.params["mu"]
    # The barrier keeps XLA from fusing the generator into every consumer of the
    # draw (each variable's slice, the gradient), which would slow the step
    # several-fold (docs/user_guide/engine.md).
    eps = jax.lax.optimization_barrier(
        noise.normal(words, state.step, 0, (mc_samples, objective.family.noise_size(state.params)), mu.dtype))
    (_, elbo), grads = jax.value_and_grad(objective, has_aux=True)(
        state.params, eps, batch, kl_weight(state.step), words=words, step=state.step)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    average = None
    if state.average is not None:
        start = average_from if state.average_from is None else state.average_from
        weight = 1.0 / jnp.maximum(state.step + 1 - start, 1).astype(mu.dtype)
        average = jax.tree_util.tree_map(lambda a, p: a + weight * (p - a), state.average, params)
    return ADVIState(params, opt_state, state.step + 1, average, state.average_from), ADVIInfo(elbo)


def sample(key, params: dict, family: Family, n: int):
    """``n`` draws of q, in JAX.

    Parameters
    ----------
    key : jax.Array
        A JAX random key.
    params : dict of str to jax.Array
        q's parameters.
    family : Family
        q's variational family.
    n : int
        The number of draws.

    Returns
    -------
    jax.Array
        ``(n, dim)``: one flat vector of unconstrained values per row.
    """
    eps = jax.random.normal(key, (n, family.noise_size(params)), params["mu"].dtype)
    return jax.vmap(lambda e: family.draw(params, e)[0])(eps)
