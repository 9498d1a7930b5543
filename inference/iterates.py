"""Methods that follow one point through the parameter space: MAP (deep ensembles), SGLD, SWAG.

The functional core, in the style of blackjax, on the same compiled log
density and minibatches as ADVI (:mod:`bnn_zoo.inference.engine` runs the
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

from bnn_zoo.inference import noise
from bnn_zoo.inference.jaxmodel import ModelFunction


class IterateState(NamedTuple):
    z: jax.Array  # the current point, unconstrained and flat
    opt_state: Any  # the optimizer's state (None for Langevin steps)
    step: jax.Array  # int32, the steps taken


def init(z, optimizer: optax.GradientTransformation | None = None) -> IterateState:
    """The state before the first step at point ``z`` (with ``optimizer``'s state for MAP/SGD)."""
    z = jnp.asarray(z)
    return IterateState(z, None if optimizer is None else optimizer.init(z), jnp.asarray(0, jnp.int32))


def log_joint(density: ModelFunction, z, batch: tuple):
    """``log p(z)``: log prior (Jacobians included) plus the batch's log likelihood at full-data scale."""
    prior, lik = density.log_density(density.layout.unflatten(z), *batch)
    return prior + lik


def optimize_step(state: IterateState, words, batch: tuple, *, density: ModelFunction,
                  optimizer: optax.GradientTransformation, n: int) -> tuple[IterateState, jax.Array]:
    """One optimizer step on ``-log p(z) / n`` (``words``, the noise stream, is unused)."""
    del words
    value, grad = jax.value_and_grad(lambda z: log_joint(density, z, batch))(state.z)
    updates, opt_state = optimizer.update(-grad / n, state.opt_state, state.z)
    return IterateState(optax.apply_updates(state.z, updates), opt_state, state.step + 1), value


# --- Langevin dynamics --------------------------------------------------------


def constant_schedule(lr: float) -> Callable:
    """SGLD's step: ``lr`` at every step, always with noise."""
    return lambda t: (jnp.asarray(lr, jnp.float32), jnp.asarray(True))


def cyclical_schedule(lr: float, steps: int, cycles: int, explore: float) -> Callable:
    """Zhang et al.'s (2020) cyclical step: a cosine from ``lr`` to 0 in each of ``cycles`` equal
    cycles; noise only after the first ``explore`` share of each cycle."""
    length = -(-steps // cycles)

    def schedule(t):
        r = (t % length).astype(jnp.float32) / length
        return lr / 2 * (jnp.cos(jnp.pi * r) + 1), r >= explore

    return schedule


def sampling_steps(steps: int, *, burn_in: int, thin: int, cycles: int = 0, explore: float = 0.0) -> np.ndarray:
    """The steps after which SGLD's point is kept as a draw (counting from 1).

    Every ``thin``-th step after ``burn_in``; with ``cycles``, only steps in
    a cycle's sampling stage (its last ``1 - explore`` share).
    """
    t = np.arange(burn_in + thin, steps + 1, thin)
    if cycles:
        length = -(-steps // cycles)
        t = t[((t - 1) % length) / length >= explore]
    return t


def langevin_step(state: IterateState, words, batch: tuple, *, density: ModelFunction, schedule: Callable,
                  n: int, temperature: float = 1.0) -> tuple[IterateState, jax.Array]:
    """One SGLD step: ``z += (h / 2) grad log p(z) + sqrt(h T) xi``, ``h = lr_t / n``, where
    ``schedule(t) -> (lr_t, noisy_t)``; without noise it is an SGD step of rate ``lr_t / 2``."""
    value, grad = jax.value_and_grad(lambda z: log_joint(density, z, batch))(state.z)
    lr, noisy = schedule(state.step)
    h = (lr / n).astype(state.z.dtype)
    xi = noise.normal(words, state.step, 0, state.z.shape, state.z.dtype)
    z = state.z + h / 2 * grad + jnp.where(noisy, jnp.sqrt(h * temperature), 0.0).astype(state.z.dtype) * xi
    return IterateState(z, None, state.step + 1), value


# --- SWAG ---------------------------------------------------------------------


class SWAGMoments(NamedTuple):
    """SWAG's running moments of the collected iterates."""

    mean: np.ndarray  # (dim,)
    sq_mean: np.ndarray  # (dim,)
    deviations: np.ndarray  # (rank, dim): the last ``rank`` iterates minus the running mean then
    count: int


def swag_init(dim: int) -> SWAGMoments:
    """Empty moments of ``dim`` parameters (no iterate collected yet)."""
    return SWAGMoments(np.zeros(dim), np.zeros(dim), np.zeros((0, dim)), 0)


def swag_collect(m: SWAGMoments, z: np.ndarray, rank: int) -> SWAGMoments:
    """Add iterate ``z`` to the moments (Maddox et al. 2019, Algorithm 1)."""
    z = np.asarray(z, "float64")
    k = m.count + 1
    mean = m.mean + (z - m.mean) / k
    sq_mean = m.sq_mean + (z * z - m.sq_mean) / k
    deviations = np.concatenate([m.deviations, (z - mean)[None]])[-rank:]
    return SWAGMoments(mean, sq_mean, deviations, k)


def swag_draws(m: SWAGMoments, n: int, seed: int = 0) -> np.ndarray:
    """``n`` draws (rows) of SWAG's Gaussian: half the diagonal covariance plus half the low-rank one."""
    if m.count < 2:
        raise ValueError("SWAG needs at least 2 collected iterates")
    rng = np.random.default_rng(seed)
    var = np.clip(m.sq_mean - m.mean**2, 1e-30, None)
    rank = len(m.deviations)
    z = m.mean + np.sqrt(var / 2) * rng.standard_normal((n, len(m.mean)))
    return z + rng.standard_normal((n, rank)) @ m.deviations / np.sqrt(2 * max(rank - 1, 1))
