"""Methods that follow one point through the parameter space: MAP (deep ensembles), SGLD, SWAG.

The functional core, in the style of blackjax, on the same compiled log
density and minibatches as ADVI (:mod:`bnn_zoo.inference.advi.engine` runs the
steps)::

    state = iterates.init(z0, optimizer)
    state, log_p = iterates.optimize_step(state, words, batch, density=density, optimizer=optimizer, n=N)
    state, log_p = iterates.langevin_step(state, words, batch, density=density, schedule=sched, n=N)

``z`` is a flat vector of the model's unconstrained values (the layout of
ADVI's q); ``log p(z)`` is the log prior (with its Jacobians) plus the
minibatch's log likelihood at full-data scale (every model of the zoo sets
``total_size``), an unbiased estimate of the log joint.

- **MAP**: an optax optimizer on ``-log p(z) / N``. Deep ensembles
  (Lakshminarayanan et al. 2017) are MAP fits from other initial points.
- **SGLD** (Welling and Teh 2011): ``z += (h / 2) grad log p(z) + sqrt(h) xi``
  with ``h = lr / N`` (``lr`` in the units of an SGD step on the mean loss).
  The cyclical schedule (Zhang et al. 2020) restarts a cosine step size each
  cycle; the first ``explore`` share of a cycle takes SGD steps (no noise),
  the rest Langevin steps, whose points are the draws.
- **SWAG** (Maddox et al. 2019): the first two moments and the last
  ``rank`` deviations of SGD iterates at a constant rate; draws
  ``mean + sqrt(diag / 2) xi_1 + D xi_2 / sqrt(2 (rank - 1))``
  (:func:`swag_draws`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.compile.jaxmodel import ModelFunction

__all__ = ["IterateState", "SWAGMoments", "constant_schedule", "cyclical_schedule", "init", "langevin_step",
           "log_joint", "optimize_step", "sampling_steps", "swag_collect", "swag_draws", "swag_init"]

class IterateState(NamedTuple):
    """The state of a point-iterate method: the point, the optimizer's state, the step counter.

    Attributes
    ----------
    z : jax.Array
        The current point, flat unconstrained values.
    opt_state : Any
        The optimizer's state (``None`` for Langevin steps).
    step : jax.Array
        The number of steps taken, an int32 scalar.
    """

    z: jax.Array  # the current point, unconstrained and flat
    opt_state: Any  # the optimizer's state (None for Langevin steps)
    step: jax.Array  # int32, the steps taken


def init(z, optimizer: optax.GradientTransformation | None = None) -> IterateState:
    """The state before the first step at point ``z``.

    Parameters
    ----------
    z : array_like
        The initial point, ``(dim,)``.
    optimizer : optax.GradientTransformation, optional
        For MAP and SGD steps; ``None`` for Langevin steps.

    Returns
    -------
    IterateState
        At step 0.
    """
    z = jnp.asarray(z)
    return IterateState(z, None if optimizer is None else optimizer.init(z), jnp.asarray(0, jnp.int32))


def log_joint(density: ModelFunction, z, batch: tuple):
    """``log p(z)``: log prior (Jacobians included) plus the batch's log likelihood at full-data scale.

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    z : jax.Array
        A flat unconstrained point in ``density.layout``.
    batch : tuple of jax.Array
        One array per data container (a minibatch of the cut ones).

    Returns
    -------
    jax.Array
        The scalar ``log p(z)``.
    """
    prior, lik = density.log_density(density.layout.unflatten(z), *batch)
    return prior + lik


def optimize_step(state: IterateState, words, batch: tuple, *, density: ModelFunction,
                  optimizer: optax.GradientTransformation, n: int) -> tuple[IterateState, jax.Array]:
    """One optimizer step on ``-log p(z) / n``.

    Parameters
    ----------
    state : IterateState
        The state before the step (with the optimizer's state).
    words : jax.Array
        The noise stream's key words; unused (the engine passes them to
        every step).
    batch : tuple of jax.Array
        One array per data container.
    density : ModelFunction
        The compiled model.
    optimizer : optax.GradientTransformation
        The optimizer.
    n : int
        The training set's rows ``N``: the loss is the mean ``-log p / N``.

    Returns
    -------
    state : IterateState
        The state after the step.
    log_p : jax.Array
        ``log p`` at the point before the step.
    """
    del words
    value, grad = jax.value_and_grad(lambda z: log_joint(density, z, batch))(state.z)
    updates, opt_state = optimizer.update(-grad / n, state.opt_state, state.z)
    return IterateState(optax.apply_updates(state.z, updates), opt_state, state.step + 1), value


# --- Langevin dynamics --------------------------------------------------------


def constant_schedule(lr: float) -> Callable:
    """SGLD's constant step: ``lr`` at every step, always with noise.

    Parameters
    ----------
    lr : float
        The step size (in the units of SGD on the mean loss).

    Returns
    -------
    callable
        ``schedule(t) -> (lr_t, noisy_t)``.
    """
    return lambda t: (jnp.asarray(lr, jnp.float32), jnp.asarray(True))


def cyclical_schedule(lr: float, steps: int, cycles: int, explore: float) -> Callable:
    """Zhang et al.'s (2020) cyclical step: a cosine from ``lr`` to 0 in each of ``cycles`` equal cycles.

    Parameters
    ----------
    lr : float
        The largest step of each cycle.
    steps : int
        All the steps.
    cycles : int
        The number of cycles, at least 1.
    explore : float
        The share of each cycle without noise (SGD steps).

    Returns
    -------
    callable
        ``schedule(t) -> (lr_t, noisy_t)``: noise only after the first
        ``explore`` share of each cycle.
    """
    length = -(-steps // cycles)

    def schedule(t):
        r = (t % length).astype(jnp.float32) / length
        return lr / 2 * (jnp.cos(jnp.pi * r) + 1), r >= explore

    return schedule


def sampling_steps(steps: int, *, burn_in: int, thin: int, cycles: int = 0, explore: float = 0.0) -> np.ndarray:
    """The steps after which SGLD's point is kept as a draw (counting from 1).

    Every ``thin``-th step after ``burn_in``; with ``cycles``, only steps in
    a cycle's sampling stage (its last ``1 - explore`` share).

    Parameters
    ----------
    steps : int
        All the steps.
    burn_in : int
        Steps discarded at the start.
    thin : int
        Keep every ``thin``-th step.
    cycles : int, default 0
        Cycles of cyclical SGLD (0: a constant step).
    explore : float, default 0.0
        The share of each cycle whose points are not kept.

    Returns
    -------
    numpy.ndarray
        The kept steps, ascending.
    """
    t = np.arange(burn_in + thin, steps + 1, thin)
    if cycles:
        length = -(-steps // cycles)
        t = t[((t - 1) % length) / length >= explore]
    return t


def langevin_step(state: IterateState, words, batch: tuple, *, density: ModelFunction, schedule: Callable,
                  n: int, temperature: float = 1.0) -> tuple[IterateState, jax.Array]:
    """One SGLD step: ``z += (h / 2) grad log p(z) + sqrt(h T) xi``, ``h = lr_t / n``.

    Without noise (``noisy_t`` false) it is an SGD step of rate ``lr_t / 2``
    on the mean loss.

    Parameters
    ----------
    state : IterateState
        The state before the step.
    words : jax.Array
        The noise stream's key words (the step's ``xi``).
    batch : tuple of jax.Array
        One array per data container.
    density : ModelFunction
        The compiled model.
    schedule : callable
        ``schedule(t) -> (lr_t, noisy_t)`` (:func:`constant_schedule`,
        :func:`cyclical_schedule`).
    n : int
        The training set's rows ``N``.
    temperature : float, default 1.0
        ``T``, which scales the noise's variance.

    Returns
    -------
    state : IterateState
        The state after the step.
    log_p : jax.Array
        ``log p`` at the point before the step.
    """
    value, grad = jax.value_and_grad(lambda z: log_joint(density, z, batch))(state.z)
    lr, noisy = schedule(state.step)
    h = (lr / n).astype(state.z.dtype)
    xi = noise.normal(words, state.step, 0, state.z.shape, state.z.dtype)
    z = state.z + h / 2 * grad + jnp.where(noisy, jnp.sqrt(h * temperature), 0.0).astype(state.z.dtype) * xi
    return IterateState(z, None, state.step + 1), value


# --- SWAG ---------------------------------------------------------------------


class SWAGMoments(NamedTuple):
    """SWAG's running moments of the collected iterates.

    Attributes
    ----------
    mean : numpy.ndarray
        ``(dim,)``, the iterates' mean.
    sq_mean : numpy.ndarray
        ``(dim,)``, the mean of their squares.
    deviations : numpy.ndarray
        ``(rank, dim)``: the last ``rank`` iterates minus the running mean
        at their collection.
    count : int
        Iterates collected.
    """

    mean: np.ndarray  # (dim,)
    sq_mean: np.ndarray  # (dim,)
    deviations: np.ndarray  # (rank, dim): the last ``rank`` iterates minus the running mean then
    count: int


def swag_init(dim: int) -> SWAGMoments:
    """Empty moments of ``dim`` parameters (no iterate collected yet).

    Parameters
    ----------
    dim : int
        The number of parameters.

    Returns
    -------
    SWAGMoments
        With ``count`` 0.
    """
    return SWAGMoments(np.zeros(dim), np.zeros(dim), np.zeros((0, dim)), 0)


def swag_collect(m: SWAGMoments, z: np.ndarray, rank: int) -> SWAGMoments:
    """Add iterate ``z`` to the moments (Maddox et al. 2019, Algorithm 1).

    Parameters
    ----------
    m : SWAGMoments
        The moments so far.
    z : numpy.ndarray
        The iterate, ``(dim,)``.
    rank : int
        Deviations to keep.

    Returns
    -------
    SWAGMoments
        The updated moments.
    """
    z = np.asarray(z, "float64")
    k = m.count + 1
    mean = m.mean + (z - m.mean) / k
    sq_mean = m.sq_mean + (z * z - m.sq_mean) / k
    deviations = np.concatenate([m.deviations, (z - mean)[None]])[-rank:]
    return SWAGMoments(mean, sq_mean, deviations, k)


def swag_draws(m: SWAGMoments, n: int, seed: int = 0) -> np.ndarray:
    """``n`` draws of SWAG's Gaussian: half the diagonal covariance plus half the low-rank one.

    Parameters
    ----------
    m : SWAGMoments
        At least 2 iterates collected.
    n : int
        The number of draws.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    numpy.ndarray
        ``(n, dim)`` float64 draws.

    Raises
    ------
    ValueError
        With fewer than 2 iterates collected.
    """
    if m.count < 2:
        raise ValueError("SWAG needs at least 2 collected iterates")
    rng = np.random.default_rng(seed)
    var = np.clip(m.sq_mean - m.mean**2, 1e-30, None)
    rank = len(m.deviations)
    z = m.mean + np.sqrt(var / 2) * rng.standard_normal((n, len(m.mean)))
    return z + rng.standard_normal((n, rank)) @ m.deviations / np.sqrt(2 * max(rank - 1, 1))
