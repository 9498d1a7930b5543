"""A sweep task's scores as one device program: every fit's restart pick, draws, PSIS-LOO and test metrics.

:func:`score` takes a task's fits (a
:class:`~bnn_zoo.experiments.sweep.fits.Batch`) and computes, for all of them
in one compiled JAX program mapped over the fits, what ``bnn-zoo moons``
computes for one: the restart with the highest ELBO by fresh draws
(:func:`~bnn_zoo.inference.posterior.restarts.q_elbo`), the draws of its q
(:func:`~bnn_zoo.inference.families.gaussians.transform`), the model's log density and
pointwise log likelihoods at them, PSIS-LOO
(:func:`~bnn_zoo.inference.diagnostics.psis.pointwise`), the posterior predictive mean on
the test points and its metrics (:func:`~bnn_zoo.evaluation.metrics.scores`).
:func:`fold_scores` does the same for K-fold refits' held-out points. The
host makes only the standard-normal noise, with NumPy's generator seeded as
:func:`bnn_zoo.sample` seeds it, so the draws are the ones a fit run alone
makes; the program's arrays come back at once.

A program is compiled once per shape (a task's fits, draws and data) and
kept with the compiled model, so the tasks of one structure in one worker
compile it once; :class:`Timing` says how long compiling and running took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from bnn_zoo.evaluation import metrics
from bnn_zoo.inference.compile.jax_fixes import elementwise_dots
from bnn_zoo.inference.diagnostics import psis
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.posterior import restarts
from bnn_zoo.inference.advi.batch import draws_mean
from bnn_zoo.inference.posterior.restarts import ELBO_DRAWS

__all__ = ["Timing", "fits_at_once", "fold_scores", "noise", "score"]


@dataclass
class Timing:
    """Seconds a program took: compiling it (0 when it was compiled before) and running it."""

    compile: float = 0.0
    run: float = 0.0


def fits_at_once() -> int:
    """Fits a program evaluates side by side (vmapped); the rest follow in a loop.

    One on a CPU, where a fit's arrays already fill a core's vector units and
    its caches; 32 on an accelerator, which needs many fits to be busy.
    """
    return 1 if jax.default_backend() == "cpu" else 32


def noise(seeds, n: int, dim: int) -> np.ndarray:
    """``(fits, n, dim)`` standard normals, fit ``i``'s from ``numpy.random.default_rng(seeds[i])``.

    What :func:`~bnn_zoo.inference.families.gaussians.sample` draws for a fit with
    that seed, so that the program's draws are the ones of a fit run alone.
    """
    return np.stack([np.random.default_rng(s).standard_normal((n, dim)) for s in seeds])


def _compiled(density, key, fn, args, timing: Timing):
    """``fn`` compiled for ``args``' shapes, kept in ``density.jitted`` under ``key``; traced with the
    network's small matrix products elementwise (:func:`~bnn_zoo.inference.compile.jax_fixes.elementwise_dots`)."""
    shapes = str(jax.tree_util.tree_map(lambda a: (np.shape(a), np.asarray(a).dtype.str), args))
    programs = density.jitted.setdefault(key, {})
    if shapes not in programs:
        t0 = time.perf_counter()
        with elementwise_dots():
            programs[shapes] = jax.jit(fn).lower(*args).compile()
        timing.compile += time.perf_counter() - t0
    return programs[shapes]


def _run(density, key, fn, args, timing: Timing) -> dict:
    program = _compiled(density, key, fn, args, timing)
    t0 = time.perf_counter()
    out = jax.device_get(program(*args))
    timing.run += time.perf_counter() - t0
    return out


def _map_fits(density, key, one, args: dict, timing: Timing) -> dict:
    """``one`` (a fit's outputs from its inputs) mapped over the fits as one program: compiled once
    per ``key`` and shapes (:func:`fits_at_once` side by side), then run."""
    def program(args):
        return jax.lax.map(one, args, batch_size=min(fits_at_once(), len(args["y"])))

    return _run(density, key, program, (args,), timing)


def _predictive(density, draws: int):
    """``(z, data) -> p``: the posterior predictive mean over ``draws`` draws ``z`` at ``data``'s points,
    a draw at a time (faster, on a CPU, than blocks of draws for a small network on many points)."""
    mean_p, dtype = draws_mean(density, "p", draws, block=1), density.layout.slots[0][3]
    return lambda z, data: mean_p(z.astype(dtype), data).astype("float64")


def _on_draws(density, outputs, z, data):
    """``outputs`` of the model at each draw (row) of ``z``, as float64, in blocks of 100 draws."""
    select, unflatten = density.select(outputs), density.layout.unflatten
    z = z.astype(density.layout.slots[0][3])
    values = jax.lax.map(lambda zi: select(unflatten(zi), *data), z, batch_size=min(100, len(z)))
    return [v.astype("float64") for v in values]


def _chosen(density, x, pick: bool):
    """One fit's q to score (of its candidates ``x["q"]``), with ``picked`` (and the ``elbos``).

    With ``pick``, the candidate with the highest ELBO (:func:`~bnn_zoo.inference.posterior.restarts.best`) by the draws
    ``x["eps_pick"]`` on ``x["train"]``, as
    :func:`~bnn_zoo.inference.posterior.restarts.q_elbo` estimates it; else the one
    candidate.
    """
    if not pick:
        return jax.tree_util.tree_map(lambda a: a[0], x["q"]), {"picked": jnp.zeros((), int)}

    def elbo(q):
        z, log_q = gaussians.transform(*q, x["eps_pick"], jnp)
        return restarts.draws_elbo(_on_draws(density, ("logp",), z, x["train"])[0], log_q, jnp)[0]

    elbos = jax.lax.map(elbo, x["q"])
    k = restarts.best(elbos, jnp)
    return jax.tree_util.tree_map(lambda a: a[k], x["q"]), {"picked": k, "elbos": elbos}


def _inputs(qs, seeds, draws: int, pick: bool, **data) -> dict:
    """A program's inputs: the q's, each fit's noise (and its ELBO noise with ``pick``) and data."""
    dim = qs[0].shape[-1]
    args = {"q": qs, "eps": noise(seeds, draws, dim), **data}
    if pick:
        args["eps_pick"] = noise(seeds, ELBO_DRAWS, dim)
    return args


def score(density, observed: str, qs, train, test, y_test, seeds, draws: int, pick: bool,
          timing: Timing | None = None) -> dict:
    """Every fit's scores, as ``bnn-zoo moons`` makes them for one fit after fitting it.

    Parameters
    ----------
    density : bnn_zoo.inference.compile.jaxmodel.ModelFunction
        The compiled model the fits share.
    observed : str
        The model's observed variable.
    qs : tuple
        ``(mean, factor)`` of each fit's candidates, stacked ``(fits,
        candidates, ...)`` (:meth:`~bnn_zoo.inference.families.Family.mean_and_factor`'s
        forms); one candidate unless ``pick``.
    train, test : tuple of numpy.ndarray
        Each data container's training and test data, stacked over fits.
    y_test : numpy.ndarray
        ``(fits, n_test)`` test labels.
    seeds : sequence of int
        Each fit's seed: of its draws and of its restarts' ELBO draws.
    draws : int
        Draws of the chosen q.
    pick : bool
        Pick each fit's candidate by q's ELBO from
        :data:`~bnn_zoo.inference.posterior.restarts.ELBO_DRAWS` fresh draws.
    timing : Timing, optional
        Adds the compile and run seconds to it.

    Returns
    -------
    dict of str to numpy.ndarray
        Per fit (leading axis): with ``pick``, ``elbos`` (each candidate's
        ELBO); ``picked`` (0 without ``pick``), ``log_p`` and ``log_q`` of each draw,
        PSIS-LOO's pointwise ``elpd_i``, ``pareto_k``, ``p_loo_i`` and
        ``flat`` (a tail of one value), the test points' ``lppd_i`` and
        :func:`~bnn_zoo.evaluation.metrics.scores`.

    Raises
    ------
    ValueError
        With fewer than :data:`~bnn_zoo.inference.diagnostics.psis.MIN_DRAWS` draws.
    """
    if draws < psis.MIN_DRAWS:
        raise ValueError(f"PSIS-LOO needs at least {psis.MIN_DRAWS} draws, got {draws}")
    timing = timing or Timing()
    args = _inputs(qs, seeds, draws, pick, train=tuple(train), test=tuple(test), y=np.asarray(y_test))
    predictive = _predictive(density, draws)

    def one(x):
        q, picked = _chosen(density, x, pick)
        z, log_q = gaussians.transform(*q, x["eps"], jnp)
        log_p, log_lik = _on_draws(density, ("logp", f"loglik:{observed}"), z, x["train"])
        elpd_i, k_i, p_loo_i, flat = psis.pointwise(log_lik, log_p, log_q)
        p = predictive(z, x["test"])
        return {**picked, "log_p": log_p, "log_q": log_q, "elpd_i": elpd_i, "pareto_k": k_i,
                "p_loo_i": p_loo_i, "flat": flat, "lppd_i": metrics.log_predictive(p, x["y"], jnp),
                **metrics.scores(p, x["y"], jnp)}

    return _map_fits(density, ("sweep_score", observed, draws, pick), one, args, timing)


def fold_scores(density, qs, train, held, y_held, seeds, draws: int, pick: bool,
                timing: Timing | None = None) -> np.ndarray:
    """Each K-fold refit's held-out log predictive densities, ``log mean_s p(y_i | z_s)``.

    Parameters
    ----------
    density : bnn_zoo.inference.compile.jaxmodel.ModelFunction
        The compiled model the refits share.
    qs : tuple
        ``(mean, factor)`` of each refit's candidates, stacked ``(refits,
        candidates, ...)``, as in :func:`score`.
    train : tuple of numpy.ndarray
        Each data container's training rows of each refit (for ``pick``).
    held : tuple of numpy.ndarray
        Each data container's held-out rows, stacked over refits.
    y_held : numpy.ndarray
        ``(refits, rows)`` their labels.
    seeds : sequence of int
        Each refit's draws' seed.
    draws : int
        Draws of each q.
    pick : bool
        Pick each refit's candidate by q's ELBO, as :func:`score`.
    timing : Timing, optional
        Adds the compile and run seconds to it.

    Returns
    -------
    numpy.ndarray
        ``(refits, rows)``.
    """
    timing = timing or Timing()
    args = _inputs(qs, seeds, draws, pick, train=tuple(train), held=tuple(held), y=np.asarray(y_held))
    predictive = _predictive(density, draws)

    def one(x):
        z, _ = gaussians.transform(*_chosen(density, x, pick)[0], x["eps"], jnp)
        return metrics.log_predictive(predictive(z, x["held"]), x["y"], jnp)

    return _map_fits(density, ("sweep_folds", draws, pick), one, args, timing)
