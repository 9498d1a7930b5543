"""Many fits of one model structure at once: one compiled program, ``jax.vmap`` over the fits.

A prior sweep fits the same network to many data sets of one size (seeds,
noise levels, data sets) and from many initial means (restarts). Their
models have the same structure, so they share one compiled log density
(:func:`~bnn_zoo.inference.jaxmodel.compile_model`); the engine's loop runs
for all of them in one vmapped program over their stacked states, data and
random keys, so the per-fit costs of tracing, compiling and calling (which
dominate a small network's fit) are paid once.

:func:`fit_many` takes models and returns one :class:`FitResult` each;
:func:`run_stacked` is its core, for callers (the sweep) that hold one
model and many data sets and want the stacked parameters.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pymc as pm

from bnn_zoo.inference import core, families, optim
from bnn_zoo.inference.advi import (FitResult, _kl_weighting, _minibatch, check_estimator, checked_settings,
                                    compiled_steps, given_initvals, initial_mean, model_dtype)
from bnn_zoo.inference.engine import CHUNK, steps_per_epoch
from bnn_zoo.inference.jaxmodel import Layout, ModelFunction, compile_model

__all__ = ["PICK_WINDOW", "Stacked", "fit_many", "pick_rows", "pick_step", "posterior_mean", "run_stacked"]

@dataclass
class Stacked:
    """The outcome of :func:`run_stacked`: row ``i`` of each array is fit ``i``'s.

    Parameters
    ----------
    params : dict of str to numpy.ndarray
        q's parameters, stacked (the averaged iterate when averaging).
    elbo : numpy.ndarray
        ``(fits, steps)`` ELBO traces.
    seconds : float
        Wall time of all fits together, compilation included.
    compile_seconds : float
        Wall time of compilation and the first chunk of steps.
    config : dict
        The settings the fits share, as recorded in results.
    picked : numpy.ndarray, optional
        With ``pick_at``: ``(fits,)``, the restart each fit kept.
    pick_scores : numpy.ndarray, optional
        With ``pick_at``: ``(fits, restarts)``, each restart's mean ELBO
        estimate at the pick.
    """

    params: dict[str, np.ndarray]  # q's parameters (the averaged iterate when averaging)
    elbo: np.ndarray  # (fits, steps) ELBO traces
    seconds: float  # all fits together, compilation included
    compile_seconds: float  # compilation and the first chunk of steps
    config: dict  # the settings shared by the fits
    picked: np.ndarray | None = None  # with pick_at: (fits,) the restart each fit kept
    pick_scores: np.ndarray | None = None  # with pick_at: (fits, restarts) what it was picked by


#: Steps over which an early pick compares the restarts' mean ELBO estimates.
PICK_WINDOW = 500


def pick_step(fraction: float, steps: int) -> int:
    """The step of an early pick at ``fraction`` of ``steps``.

    Parameters
    ----------
    fraction : float
        The share of the steps after which the best restart runs on alone
        (the command line's ``--pick-at``); 0 for no early pick.
    steps : int
        The fit's steps.

    Returns
    -------
    int
        The nearest multiple of the engine's chunk of steps
        (:data:`~bnn_zoo.inference.engine.CHUNK`), at least one chunk in and
        one before the end; 0 (no early pick) when ``fraction`` is 0 or
        there is no such step.
    """
    if not fraction or steps < 2 * CHUNK:
        return 0
    return int(min(max(CHUNK, CHUNK * round(fraction * steps / CHUNK)), CHUNK * ((steps - 1) // CHUNK)))


def pick_rows(trace: np.ndarray, restarts: int) -> tuple[np.ndarray, np.ndarray]:
    """The restart each fit keeps: the one with the highest mean ELBO estimate over the last steps.

    Parameters
    ----------
    trace : numpy.ndarray
        ``(fits * restarts, steps)`` ELBO traces, each fit's ``restarts``
        rows consecutive.
    restarts : int
        Restarts per fit.

    Returns
    -------
    picked : numpy.ndarray
        ``(fits,)``, the index of the kept restart within each fit.
    scores : numpy.ndarray
        ``(fits, restarts)``, each restart's mean over the last
        :data:`PICK_WINDOW` steps (minus infinity for one that diverged).
    """
    scores = trace[:, -PICK_WINDOW:].mean(axis=1).reshape(-1, restarts)
    scores = np.where(np.isfinite(scores), scores, -np.inf)
    return scores.argmax(axis=1), scores


def run_stacked(model: pm.Model, density: ModelFunction, means: np.ndarray, data: Sequence[np.ndarray],
                seeds: Sequence[int], *, method: str = "advi", steps: int = 10_000,
                optimizer: optax.GradientTransformation | None = None, init_std: float = 0.01,
                beta: float = 1.0, mc_samples: int = 1, average: float = 0.0, batch_size: int | None = None,
                kl_weighting: str = "constant", path_derivative: bool = False, restarts: int = 1,
                pick_at: int = 0, estimator: str = "weights") -> Stacked:
    """Fit ``density`` (``model``'s structure) ``len(seeds)`` times at once.

    The core of :func:`fit_many`, for callers (the sweep) that hold one
    model and many data sets, and want the stacked parameters rather than a
    :class:`~bnn_zoo.inference.advi.FitResult` per fit.

    With ``pick_at`` (a multiple of the engine's chunk of steps, before
    ``steps``; :func:`pick_step`), consecutive groups of ``restarts``
    rows are the restarts of one fit: at step ``pick_at`` each fit keeps the
    restart with the highest mean ELBO estimate over the steps just before
    (:func:`pick_rows`), and only the kept ones run on. Each kept row takes
    exactly the steps it would have taken had all run on. The result then has
    one row per fit, and says which restart each kept.

    Parameters
    ----------
    model : pymc.Model
        A model of the structure (its data containers, dtype and settings).
    density : ModelFunction
        ``model`` compiled (:func:`~bnn_zoo.inference.jaxmodel.compile_model`).
    means : numpy.ndarray
        ``(rows, dim)``: each row's initial mean
        (:func:`~bnn_zoo.inference.advi.initial_mean`).
    data : sequence of numpy.ndarray
        One array per data container of ``model``, with the rows on a
        leading axis.
    seeds : sequence of int
        ``seeds[i]`` seeds row ``i``'s noise and minibatches.
    method : {"advi", "fullrank_advi"}, default "advi"
        The variational family (no warm start here).
    steps : int, default 10000
        Optimisation steps.
    optimizer : optax.GradientTransformation, optional
        Default: Adam at a constant 0.01.
    init_std : float, default 0.01
        Initial posterior sd.
    beta : float, default 1.0
        KL weight.
    mc_samples : int, default 1
        Monte Carlo draws per step.
    average : float, default 0.0
        Share of the final steps whose iterates are averaged.
    batch_size : int, optional
        Minibatch size (every container is cut); ``None`` for the full data.
    kl_weighting : {"constant", "blundell"} or callable, default "constant"
        The KL part's weighting over an epoch, as in :func:`bnn_zoo.fit`.
    path_derivative : bool, default False
        The "sticking the landing" entropy gradient.
    restarts : int, default 1
        Restarts per fit: consecutive groups of this many rows; must divide
        the number of rows.
    pick_at : int, default 0
        The step at which each fit keeps its best restart (0: none).
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        The likelihood's gradient estimator.

    Returns
    -------
    Stacked
        One row per fit (per kept restart with ``pick_at``).

    Raises
    ------
    ValueError
        For bad arguments, as :func:`bnn_zoo.fit`, a ``restarts`` that does
        not divide the rows, or a ``pick_at`` that is not a multiple of the
        chunk of steps below ``steps``.
    """
    family = families.get(method)
    check_estimator(estimator, method)
    average_from, optimizer = checked_settings(steps=steps, mc_samples=mc_samples, init_std=init_std,
                                               beta=beta, average=average, optimizer=optimizer)
    if not (isinstance(restarts, (int, np.integer)) and restarts >= 1 and len(seeds) % restarts == 0):
        raise ValueError(f"restarts must be a positive integer dividing the {len(seeds)} rows, got {restarts!r}")
    if pick_at and not (pick_at % CHUNK == 0 and 0 < pick_at < steps):
        raise ValueError(f"pick_at must be a multiple of {CHUNK} below steps ({steps}), got {pick_at!r}")
    pick_at = pick_at if restarts > 1 else 0
    dtype = model_dtype(model)
    t0 = time.perf_counter()
    sliced, n = _minibatch(model, None, batch_size)
    kl_weight, kl_key = _kl_weighting(kl_weighting, batch_size, steps_per_epoch(n, batch_size))
    init = [family.init(np.asarray(mu, dtype), np.float64(init_std)) for mu in means]
    state = jax.vmap(lambda params: core.init(params, optimizer, average=average > 0))(
        {k: jnp.asarray(np.stack([p[k] for p in init]), dtype) for k in init[0]})
    data = tuple(jnp.asarray(d) for d in data)
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    loop = compiled_steps(density, family, optimizer, sliced=sliced, n=n, batch_size=batch_size, beta=beta,
                          mc_samples=mc_samples, dtype=dtype, kl_weight=kl_weight, kl_key=kl_key,
                          path_derivative=path_derivative, average_from=average_from,
                          estimator=estimator, model=model, shapes=tuple((d.shape[1:], str(d.dtype)) for d in data))["batched_loop"]
    traces, first_chunk, picked, scores = [], None, None, None
    for start in range(0, steps, CHUNK):
        if start == pick_at and picked is None and pick_at:
            trace = np.concatenate(traces, axis=1)
            picked, scores = pick_rows(trace, restarts)
            keep = np.arange(len(picked)) * restarts + picked
            state, keys = jax.tree_util.tree_map(lambda a: a[keep], (state, keys))
            data, traces = tuple(d[keep] for d in data), [trace[keep]]
        k = min(CHUNK, steps - start)
        state, trace = loop(state, keys, k, data)
        traces.append(np.asarray(trace[:, :k], dtype="float64"))
        if first_chunk is None:
            first_chunk = time.perf_counter()
    return Stacked(params={name: np.asarray(value) for name, value in state.fitted.items()},
                   elbo=np.concatenate(traces, axis=1), seconds=time.perf_counter() - t0,
                   compile_seconds=first_chunk - t0,
                   config=dict(method=method, steps=steps, optimizer=optim.describe(optimizer),
                               batch_size=batch_size, beta=beta, kl_weighting=kl_key, mc_samples=mc_samples,
                               dtype=dtype, init_std=init_std, average=average, resumed_at=0,
                               path_derivative=path_derivative, estimator=estimator,
                               history=[[0, optim.describe(optimizer)]],
                               batched_with=len(seeds), restarts=restarts, pick_at=pick_at),
                   picked=picked, pick_scores=scores)


def fit_many(models: Sequence[pm.Model], seeds: Sequence[int], *, method: str = "advi",
             steps: int = 20_000, optimizer: optax.GradientTransformation | None = None,
             init_std: float = 0.01, beta: float = 1.0, mc_samples: int = 1, average: float = 0.5,
             batch_size: int | None = None, kl_weighting: str = "constant", path_derivative: bool = False,
             restarts: int = 1, pick_at: int = 0, estimator: str = "weights") -> list[FitResult]:
    """Fit ``models[i]`` from seed ``seeds[i]``, all at once, in one compiled program.

    The models must share their structure: the same builder and settings on
    data of one shape (a model may appear more than once, with other seeds,
    for restarts run to the end). They share one compiled log density, and
    the engine runs all the fits in one ``jax.vmap``-ed program over their
    stacked states, data and keys, so tracing, compiling and calling are
    paid once. Each fit takes exactly the steps :func:`bnn_zoo.fit` would
    take alone with that seed (same initial means, noise and minibatches, to
    rounding). A fit whose ELBO becomes NaN or infinite comes back with that
    in its trace and ``config["diverged"]``; it does not stop the others.

    ``restarts`` R with ``pick_at`` K: model ``i`` is fitted from seeds
    ``seeds[i] .. seeds[i] + R - 1`` (initial means and noise, as
    :func:`bnn_zoo.fit` with those seeds) for K steps; the restart with the
    highest mean ELBO estimate over the last :data:`PICK_WINDOW` of them
    runs on alone: a cheaper way to escape a bad local optimum than
    restarts run to the end (docs/reproductions.md).

    Parameters
    ----------
    models : sequence of pymc.Model
        Models of one structure.
    seeds : sequence of int
        One seed per model.
    method : {"advi", "fullrank_advi"}, default "advi"
        The variational family (no mean-field warm start here: see
        :func:`~bnn_zoo.inference.advi.fullrank_from`).
    steps : int, default 20000
        Optimisation steps of each fit.
    optimizer : optax.GradientTransformation, optional
        Default: Adam at a constant 0.01.
    init_std : float, default 0.01
        Initial posterior sd of every unconstrained variable.
    beta : float, default 1.0
        KL weight.
    mc_samples : int, default 1
        Monte Carlo draws per step.
    average : float, default 0.5
        Share of the final steps whose iterates are averaged, as in
        :func:`bnn_zoo.fit`.
    batch_size : int, optional
        Minibatch size (every data container is cut); ``None`` for the full data.
    kl_weighting : {"constant", "blundell"} or callable, default "constant"
        The KL part's weighting over an epoch, as in :func:`bnn_zoo.fit`.
    path_derivative : bool, default False
        The "sticking the landing" entropy gradient.
    restarts : int, default 1
        Restarts per model, from consecutive seeds; more than 1 needs ``pick_at``.
    pick_at : int, default 0
        The step at which each model keeps its best restart: a multiple of
        the engine's chunk of steps below ``steps`` (:func:`pick_step` makes
        one from a share of the steps).
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        The likelihood's gradient estimator.

    Returns
    -------
    list of FitResult
        One per model, in order. Each ``config`` has the fit's ``seed`` (of
        the kept restart), ``diverged``, ``batched_with`` and, with
        ``pick_at``, ``picked_restart`` and ``pick_elbos`` (every restart's
        mean at the pick). ``seconds`` are the whole run's shared equally.

    Raises
    ------
    ValueError
        For a seed count other than the model count, models of different
        structures, ``restarts`` without ``pick_at``, or bad settings as
        :func:`bnn_zoo.fit`.

    See Also
    --------
    bnn_zoo.fit : One fit, with every option.

    Examples
    --------
    Six restarts of one model, the best after 2,000 of 10,000 steps running on:

    >>> from bnn_zoo.inference.batch import fit_many
    >>> [result] = fit_many([model], seeds=[0], steps=10_000, restarts=6, pick_at=2_000)

    One model per data set, fitted together:

    >>> models = [mlp_classifier(d.X_train, d.y_train) for d in datasets]
    >>> results = fit_many(models, seeds=range(len(models)))
    """
    if len(models) != len(seeds) or not models:
        raise ValueError(f"need one seed per model, got {len(models)} models and {len(seeds)} seeds")
    if restarts != 1 and not pick_at:
        raise ValueError("restarts need pick_at (the step at which each fit keeps its best restart); "
                         "for restarts run to the end, pass a model once per restart")
    points = [m.initial_point() for m in models]
    layouts = [Layout.of(m, p) for m, p in zip(models, points)]
    density = compile_model(models[0], layouts[0])
    for m, layout in zip(models, layouts):
        if compile_model(m, layout) is not density:
            raise ValueError("fit_many needs models of one structure (the same builder and settings "
                             "on data of one shape)")
    rows = [(i, seed + k) for i, seed in enumerate(seeds) for k in range(restarts)]  # (model, seed)
    means = np.stack([initial_mean(layouts[i], points[i], seed, given_initvals(models[i])) for i, seed in rows])
    data = [np.stack([np.asarray(models[i].data_vars[j].get_value()) for i, _ in rows])
            for j in range(len(models[0].data_vars))]
    out = run_stacked(models[0], density, means, data, [seed for _, seed in rows], method=method, steps=steps,
                      optimizer=optimizer, init_std=init_std, beta=beta, mc_samples=mc_samples, average=average,
                      batch_size=batch_size, kl_weighting=kl_weighting, path_derivative=path_derivative,
                      restarts=restarts, pick_at=pick_at, estimator=estimator)
    # one row of ``out`` per model: its only fit, or the restart it kept
    family, timed, n = families.get(method), steps - CHUNK if steps > CHUNK else 0, len(models)
    results = []
    for i, model in enumerate(models):
        picks = {} if out.picked is None else {"picked_restart": int(out.picked[i]),
                                               "pick_elbos": out.pick_scores[i].tolist()}
        seed = rows[i * restarts + picks.get("picked_restart", 0)][1]
        results.append(FitResult(
            model=model, family=family, layout=layouts[i],
            params={name: value[i] for name, value in out.params.items()}, elbo=out.elbo[i],
            config=dict(out.config, seed=seed, diverged=bool(not np.isfinite(out.elbo[i]).all()), **picks),
            seconds=out.seconds / n, compile_seconds=out.compile_seconds / n, density=density,
            _timed=(timed, (out.seconds - out.compile_seconds) / n) if timed else (0, 0.0)))
    return results


def posterior_mean(density: ModelFunction, z: np.ndarray, data: Sequence[np.ndarray], var: str) -> np.ndarray:
    """The mean over the draws ``z`` (rows) of model variable ``var``, on ``data``.

    What :func:`~bnn_zoo.inference.posterior.evaluate_draws` would give for
    ``var``, averaged over the draws inside the compiled program, so that a
    large test set's per-draw values are never held at once.

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    z : numpy.ndarray
        ``(draws, dim)`` flat unconstrained values in ``density.layout``.
    data : sequence of numpy.ndarray
        One array per data container of the model.
    var : str
        A model variable (free or deterministic), e.g. ``"p"``.

    Returns
    -------
    numpy.ndarray
        The mean of ``var`` over the draws, float64, in ``var``'s shape.
    """
    S = len(z)
    block = max(b for b in range(1, min(S, 50) + 1) if S % b == 0)
    key = ("posterior_mean", var, block)
    if key not in density.jitted:
        select, unflatten = density.select((var,)), density.layout.unflatten

        def run(z, data):
            per_draw = jax.vmap(lambda zi: select(unflatten(zi), *data)[0])
            blocks = z.reshape(z.shape[0] // block, block, z.shape[1])
            shape = jax.eval_shape(per_draw, blocks[0])
            total, _ = jax.lax.scan(lambda total, zs: (total + per_draw(zs).sum(0), None),
                                    jnp.zeros(shape.shape[1:], shape.dtype), blocks)
            return total / z.shape[0]

        density.jitted[key] = jax.jit(run)
    mean = density.jitted[key](jnp.asarray(z, density.layout.slots[0][3]), tuple(jnp.asarray(d) for d in data))
    return np.asarray(mean, "float64")
