"""Many fits of one model structure at once: one compiled program, ``jax.vmap`` over the fits.

A prior sweep fits the same network to many data sets of one size (seeds,
noise levels, data sets) and from many initial means (restarts). Their
models have the same structure, so they share one compiled log density
(:func:`~bnn_zoo.inference.compile.jaxmodel.compile_model`); the engine's loop runs
for all of them in one vmapped program over their stacked states, data and
random keys, so the per-fit costs of tracing, compiling and calling (which
dominate a small network's fit) are paid once.

:func:`fit_many` takes models and returns one :class:`FitResult` each,
and runs restarts: several fits of each model from other initial means, of
which the best runs on. :func:`run_stacked` is its core, for callers (the
sweep) that hold one model and many data sets and want the stacked
parameters.
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

from bnn_zoo.cache import use_compiled_programs
from bnn_zoo.inference import defaults, methods
from bnn_zoo.inference.advi import core, optim
from bnn_zoo.inference.support.renamed import refuse_renamed
from bnn_zoo.inference.support.seeds import check_seed, check_seeds
from bnn_zoo.inference.advi.engine import CHUNK, steps_per_epoch
from bnn_zoo.inference.compile.jaxmodel import Layout, ModelFunction, compile_model
from bnn_zoo.inference.compile.minibatch import minibatch_plan
from bnn_zoo.inference.advi.objective import ELBO, kl_schedule
from bnn_zoo.inference.advi.prepare import check_settings, compiled_steps, model_dtype, settings_record
from bnn_zoo.inference.advi.starts import given_initvals, initial_mean
from bnn_zoo.inference.posterior.result import FitResult, warn_unless_converged

__all__ = ["PICK_WINDOW", "Stacked", "draws_mean", "fit_many", "pick_rows", "pick_step", "posterior_mean", "run_stacked"]

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
        (:data:`~bnn_zoo.inference.advi.engine.CHUNK`), at least one chunk in and
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
                seeds: Sequence[int], *, method="advi", steps: int = defaults.STEPS,
                optimizer: optax.GradientTransformation | None = None, objective: ELBO | None = None,
                batch_size: int | None = None, minibatch: Sequence[str] | None = None,
                average: float = defaults.AVERAGE, restarts: int = defaults.RESTARTS,
                pick_at: float = defaults.PICK_AT) -> Stacked:
    """Fit ``density`` (``model``'s structure) ``len(seeds)`` times at once.

    The core of :func:`fit_many`, for callers (the sweep) that hold one
    model and many data sets, and want the stacked parameters rather than a
    :class:`~bnn_zoo.inference.posterior.result.FitResult` per fit.

    With ``restarts`` R above 1, consecutive groups of R rows are the
    restarts of one fit: after ``pick_at`` of the steps (:func:`pick_step`)
    each fit keeps the restart with the highest mean ELBO estimate over the
    :data:`PICK_WINDOW` steps just before (:func:`pick_rows`), and only the
    kept ones run on; with ``pick_at=0`` all run to the end and the pick is
    made there. Each kept row takes exactly the steps it would have taken had
    all run on. The result then has one row per fit, and says which restart
    each kept.

    Parameters
    ----------
    model : pymc.Model
        A model of the structure (its data containers, dtype and settings).
    density : ModelFunction
        ``model`` compiled (:func:`~bnn_zoo.inference.compile.jaxmodel.compile_model`).
    means : numpy.ndarray
        ``(rows, dim)``: each row's initial mean
        (:func:`~bnn_zoo.inference.advi.starts.initial_mean`).
    data : sequence of numpy.ndarray
        One array per data container of ``model``, with the rows on a
        leading axis.
    seeds : sequence of int
        ``seeds[i]`` seeds row ``i``'s noise and minibatches.
    method : {"advi", "lowrank_advi", "fullrank_advi"} or MeanField or LowRank or FullRank, default "advi"
        The variational family (no mean-field warm start here).
    steps : int, default bnn_zoo.inference.defaults.STEPS
        Optimisation steps.
    optimizer : optax.GradientTransformation, optional
        Default: :func:`bnn_zoo.inference.advi.optim.default`.
    objective : ELBO, optional
        The objective; default ``ELBO()``.
    batch_size : int, optional
        Minibatch size; ``None`` for the full data.
    minibatch : sequence of str, optional
        The data containers cut into minibatches (default: all).
    average : float, default bnn_zoo.inference.defaults.AVERAGE
        Share of the final steps whose iterates are averaged.
    restarts : int, default 1
        Restarts per fit: consecutive groups of this many rows; must divide
        the number of rows.
    pick_at : float, default bnn_zoo.inference.defaults.PICK_AT
        The share of the steps after which each fit keeps its best restart,
        in [0, 1); 0: at the end.

    Returns
    -------
    Stacked
        One row per fit (per kept restart with ``restarts``).

    Raises
    ------
    ValueError
        For bad arguments, as :func:`bnn_zoo.fit`, a ``restarts`` that does
        not divide the rows, or a ``pick_at`` outside [0, 1).
    """
    family, init_std = methods.resolve(method)
    objective = ELBO() if objective is None else objective
    average_from, optimizer = check_settings(family=family, steps=steps, objective=objective, average=average,
                                             optimizer=optimizer)
    if isinstance(restarts, bool) or not (isinstance(restarts, (int, np.integer)) and restarts >= 1
                                          and len(seeds) % restarts == 0):
        raise ValueError(f"restarts must be a positive integer dividing the {len(seeds)} rows, got {restarts!r}")
    if not (isinstance(pick_at, (int, float, np.number)) and 0 <= pick_at < 1):
        raise ValueError(f"pick_at must be a share of the steps in [0, 1), got {pick_at!r}")
    at = pick_step(pick_at, steps) if restarts > 1 else 0
    dtype = model_dtype(model)
    t0 = time.perf_counter()
    sliced, n = minibatch_plan(model, minibatch, batch_size)
    kl_weight, kl_key = kl_schedule(objective.kl_weighting, batch_size, steps_per_epoch(n, batch_size))
    init = [family.init(np.asarray(mu, dtype), np.float64(init_std)) for mu in means]
    state = jax.vmap(lambda params: core.init(params, optimizer, average=average > 0))(
        {k: jnp.asarray(np.stack([p[k] for p in init]), dtype) for k in init[0]})
    data = tuple(jnp.asarray(d) for d in data)
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    loop = compiled_steps(density, family, optimizer, objective, sliced=sliced, n=n, batch_size=batch_size,
                          dtype=dtype, kl_weight=kl_weight, kl_key=kl_key, average_from=average_from,
                          model=model, shapes=tuple((d.shape[1:], str(d.dtype)) for d in data),
                          params=init[0])["batched_loop"]
    traces, first_chunk, picked, scores = [], None, None, None

    def pick(state, keys, data):
        nonlocal picked, scores
        trace = np.concatenate(traces, axis=1)
        picked, scores = pick_rows(trace, restarts)
        keep = np.arange(len(picked)) * restarts + picked
        traces[:] = [trace[keep]]
        return jax.tree_util.tree_map(lambda a: a[keep], (state, keys)) + (tuple(d[keep] for d in data),)

    for start in range(0, steps, CHUNK):
        if at and start == at:
            state, keys, data = pick(state, keys, data)
        k = min(CHUNK, steps - start)
        state, trace = loop(state, keys, k, data)
        traces.append(np.asarray(trace[:, :k], dtype="float64"))
        if first_chunk is None:
            first_chunk = time.perf_counter()
    if restarts > 1 and picked is None:  # no early pick: the best at the end
        state, keys, data = pick(state, keys, data)
    description = optim.describe(optimizer)
    return Stacked(params={name: np.asarray(value) for name, value in state.fitted.items()},
                   elbo=np.concatenate(traces, axis=1), seconds=time.perf_counter() - t0,
                   compile_seconds=first_chunk - t0,
                   config=dict(settings_record(model, family, objective, batch_size=batch_size, sliced=sliced,
                                               kl_key=kl_key, dtype=dtype, average=average, init_std=init_std),
                               steps=steps, optimizer=description, resumed_at=0, history=[[0, description]],
                               batched_with=len(seeds), restarts=restarts, pick_at=pick_at, pick_step=at),
                   picked=picked, pick_scores=scores)


@refuse_renamed
def fit_many(models: Sequence[pm.Model], *, method="advi", steps: int = defaults.STEPS,
             optimizer: optax.GradientTransformation | None = None, objective: ELBO | None = None,
             batch_size: int | None = None, minibatch: Sequence[str] | None = None,
             average: float | None = None, random_seed: int | Sequence[int] = 0,
             restarts: int = defaults.RESTARTS, pick_at: float = defaults.PICK_AT) -> list[FitResult]:
    """Fit every model of ``models`` at once, in one compiled program, with restarts.

    The models must share their structure: the same builder and settings on
    data of one shape (a model may appear more than once, with other seeds).
    They share one compiled log density, and the engine runs all the fits in
    one ``jax.vmap``-ed program over their stacked states, data and keys, so
    tracing, compiling and calling are paid once. Each fit takes exactly the
    steps :func:`bnn_zoo.fit` would take alone with its seed (same initial
    means, noise and minibatches, to rounding). A fit whose ELBO becomes NaN
    or infinite comes back with that in its trace and ``config["diverged"]``;
    it does not stop the others.

    ``restarts`` R: model ``i`` is fitted from R seeds (initial means and
    noise, as :func:`bnn_zoo.fit` with those seeds); after ``pick_at`` of the
    steps, the restart with the highest mean ELBO estimate over the last
    :data:`PICK_WINDOW` steps runs on alone: a cheaper way to escape a poor
    local optimum than restarts run to the end (docs/reproductions.md).

    The parameters are :func:`bnn_zoo.fit`'s that apply to many fits at once,
    with the same defaults, and ``restarts`` and ``pick_at``.

    Parameters
    ----------
    models : sequence of pymc.Model
        Models of one structure.
    method : {"advi", "lowrank_advi", "fullrank_advi"} or MeanField or LowRank or FullRank, default "advi"
        The ADVI family (no mean-field warm start here: fit mean-field,
        then ``bnn_zoo.fit(model, method="fullrank_advi", init=...)``).
        The Laplace approximation is :func:`bnn_zoo.fit`'s alone.
    steps : int, default bnn_zoo.inference.defaults.STEPS
        Optimisation steps of each fit.
    optimizer : optax.GradientTransformation, optional
        Default: :func:`bnn_zoo.inference.advi.optim.default`.
    objective : ELBO, optional
        The objective; default ``ELBO()``.
    batch_size : int, optional
        Minibatch size; ``None`` for the full data.
    minibatch : sequence of str, optional
        The data containers cut into minibatches (default: all).
    average : float, optional
        Share of the final steps whose iterates are averaged; default
        :data:`~bnn_zoo.inference.defaults.AVERAGE` (as ``bnn_zoo.fit``'s).
    random_seed : int or sequence of int, default 0
        One seed per model, or an int ``s``: model ``i``'s restarts take
        seeds ``s + i * restarts`` onwards.
    restarts : int, default bnn_zoo.inference.defaults.RESTARTS
        Fits of each model from consecutive seeds.
    pick_at : float, default bnn_zoo.inference.defaults.PICK_AT
        The share of the steps after which each model keeps its best
        restart, in [0, 1) (0: all run to the end, then the best is kept).

    Returns
    -------
    list of FitResult
        One per model, in order. Each ``config`` has the fit's ``seed`` (of
        the kept restart), ``diverged``, ``batched_with`` and, with
        restarts, ``picked_restart`` and ``pick_elbos`` (every restart's
        mean at the pick). ``seconds`` are the whole run's shared equally.

    Raises
    ------
    ValueError
        For a seed count other than the model count, models of different
        structures, or bad settings as :func:`bnn_zoo.fit`.

    Warns
    -----
    ConvergenceWarning
        For each fit that did not pass its convergence test, as :func:`bnn_zoo.fit` warns.

    See Also
    --------
    bnn_zoo.fit : One fit, with checkpoints and ``init``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=100)
    >>> with pm.Model() as model:
    ...     b = pm.Normal("b", 0, 10)
    ...     y = pm.Normal("y", b * x, 1, observed=2 * x + rng.normal(size=100))
    >>> [result] = bnn_zoo.fit_many([model], steps=2_000, restarts=4, pick_at=0.2)
    >>> result.config["restarts"], len(result.config["pick_elbos"])
    (4, 4)
    >>> print(f"{result.mean['b']:.1f}")
    2.1
    """
    use_compiled_programs()
    if isinstance(models, pm.Model) or not isinstance(models, (list, tuple)):
        raise TypeError(f"fit_many takes a list of pymc.Model (of one structure), got {type(models).__name__}: "
                        f"for one model, fit_many([model]) or bnn_zoo.fit(model)")
    if not models:
        raise ValueError("fit_many needs at least one model, got an empty list")
    seeds = ([check_seed(random_seed) + i * restarts for i in range(len(models))]
             if isinstance(random_seed, (int, np.integer)) else check_seeds(random_seed))
    if len(models) != len(seeds) or not models:
        raise ValueError(f"need one random_seed per model, got {len(models)} models and {len(seeds)} seeds")
    if isinstance(restarts, bool) or not (isinstance(restarts, (int, np.integer)) and restarts >= 1):
        raise ValueError(f"restarts must be a positive integer, got {restarts!r}")
    if getattr(method, "centring", False):
        raise ValueError("fit_many does not fit learned centring (each fit's rewritten model has lambdas of its "
                         "own): fit each with bnn_zoo.fit(model, method=...(centring=True))")
    if methods.resolve(method)[0].name == "flow":
        raise ValueError("fit_many does not fit flows (each starts from a Gaussian fit of its own): fit each "
                         "with bnn_zoo.fit(model, method='flow'), or fit_many a Gaussian family")
    for m in models:
        model_dtype(m)  # a model without free variables, or with a discrete one, refused in one line
    points = [m.initial_point() for m in models]
    layouts = [Layout.of(m, p) for m, p in zip(models, points)]
    density = compile_model(models[0], layouts[0])
    for m, layout in zip(models, layouts):
        if compile_model(m, layout) is not density:
            raise ValueError("fit_many needs models of one structure (the same builder and settings "
                             "on data of one shape); what differs between fits goes in pm.Data containers: "
                             "observed values given as plain arrays are part of a model's structure")
    rows = [(i, seed + k) for i, seed in enumerate(seeds) for k in range(restarts)]  # (model, seed)
    means = np.stack([initial_mean(layouts[i], points[i], seed, given_initvals(models[i])) for i, seed in rows])
    data = [np.stack([np.asarray(models[i].data_vars[j].get_value()) for i, _ in rows])
            for j in range(len(models[0].data_vars))]
    out = run_stacked(models[0], density, means, data, [seed for _, seed in rows], method=method, steps=steps,
                      optimizer=optimizer, objective=objective, batch_size=batch_size, minibatch=minibatch,
                      average=defaults.AVERAGE if average is None else average, restarts=restarts, pick_at=pick_at)
    # one row of ``out`` per model: its only fit, or the restart it kept
    family, timed, n = methods.resolve(method)[0], steps - CHUNK if steps > CHUNK else 0, len(models)
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
            timed=(timed, (out.seconds - out.compile_seconds) / n) if timed else (0, 0.0)))
        warn_unless_converged(results[-1])  # as bnn_zoo.fit warns, fit by fit
    return results


def posterior_mean(density: ModelFunction, z: np.ndarray, data: Sequence[np.ndarray], var: str) -> np.ndarray:
    """The mean over the draws ``z`` (rows) of model variable ``var``, on ``data``.

    What :func:`~bnn_zoo.inference.posterior.draws.evaluate_draws` would give for
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
    key = ("posterior_mean", var, len(z))
    if key not in density.jitted:
        density.jitted[key] = jax.jit(draws_mean(density, var, len(z)))
    mean = density.jitted[key](jnp.asarray(z, density.layout.slots[0][3]), tuple(jnp.asarray(d) for d in data))
    return np.asarray(mean, "float64")


def draws_mean(density: ModelFunction, var: str, n_draws: int, block: int = 50):
    """The traceable ``f(z, data)``: the mean of ``var`` over ``n_draws`` draws ``z``, on ``data``.

    The draws are evaluated in a ``lax.scan`` over equal blocks of at most
    ``block``, so that a large test set's per-draw values are never held at once:
    :func:`posterior_mean` compiles it, and a sweep's device program maps it
    over fits.

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    var : str
        A model variable (free or deterministic), e.g. ``"p"``.
    n_draws : int
        The draws ``f`` takes.
    block : int, default 50
        The most draws evaluated together (the largest divisor of
        ``n_draws`` not above it).

    Returns
    -------
    callable
        ``f(z, data)``: ``z`` ``(n_draws, dim)`` in the layout's dtype,
        ``data`` a tuple of one array per data container.
    """
    block = max(b for b in range(1, min(n_draws, block) + 1) if n_draws % b == 0)
    select, unflatten = density.select((var,)), density.layout.unflatten

    def run(z, data):
        per_draw = jax.vmap(lambda zi: select(unflatten(zi), *data)[0])
        blocks = z.reshape(z.shape[0] // block, block, z.shape[1])
        shape = jax.eval_shape(per_draw, blocks[0])
        total, _ = jax.lax.scan(lambda total, zs: (total + per_draw(zs).sum(0), None),
                                jnp.zeros(shape.shape[1:], shape.dtype), blocks)
        return total / z.shape[0]

    return run
