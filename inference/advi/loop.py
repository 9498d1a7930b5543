"""``fit_advi``: the loop that fits the three Gaussians and the flow, for any PyMC model.

:func:`~bnn_zoo.inference.dispatch.fit` hands an ADVI method here, and
``method="auto"``'s rungs and a flow's start call :func:`fit_advi` directly.
It compiles the model to JAX (:mod:`~bnn_zoo.inference.compile.jaxmodel`),
builds the objective (:mod:`~bnn_zoo.inference.advi.objective`) and runs the
functional core's steps (:mod:`~bnn_zoo.inference.advi.core`) on the engine
(:mod:`~bnn_zoo.inference.advi.engine`), with what a BNN needs and PyMC does
not default to: random initial means (all-zero means keep hidden units
identical), a small initial posterior sd, minibatches from named data
containers, checkpoints and resume, and a stop on the first non-finite ELBO
instead of returning garbage. :func:`~bnn_zoo.inference.advi.prepare.prepare`
builds what it needs before the first step.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import jax.numpy as jnp
import numpy as np
import pymc as pm
import pytensor
from rich.progress import MofNCompleteColumn, Progress, TextColumn

from bnn_zoo.inference import defaults, methods
from bnn_zoo.inference.advi import checkpoint as ckpt
from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.advi.checkpoint import Checkpoint
from bnn_zoo.inference.advi.engine import CHUNK
from bnn_zoo.inference.compile.minibatch import unwrap as unwrap_minibatch
from bnn_zoo.inference.diagnostics.convergence import convergence
from bnn_zoo.inference.advi.objective import ELBO
from bnn_zoo.inference.advi.prepare import check_steps, prepare
from bnn_zoo.inference.advi.starts import from_fit
from bnn_zoo.inference.posterior.paired import paired
from bnn_zoo.inference.posterior.result import ConvergenceWarning, FitResult, NonFiniteLossError, warn_unless_converged

__all__ = ["fit_advi"]


def _progress(show: bool) -> Progress:
    return Progress(
        *Progress.get_default_columns(), MofNCompleteColumn(), TextColumn("{task.fields[elbo]}"),
        disable=not show,
    )


def fit_advi(model: pm.Model, *, method="advi", steps: int = defaults.STEPS, optimizer=None, objective=None,
             batch_size=None, minibatch=None, init=None, average=None, random_seed: int = 0, checkpoint=None,
             progressbar: bool = True, until_converged: bool = False) -> FitResult:
    """ADVI: :func:`~bnn_zoo.inference.dispatch.fit` of the three Gaussians and the flow, its arguments checked.

    The stage ``fit`` hands these methods to, and what ``method="auto"``'s
    rungs and a flow's start call: a mean-field warm start for full rank
    without ``init``, learned centring, the flow's Gaussian start, then the
    steps on the engine.

    Parameters
    ----------
    model : pymc.Model
        The model (``fit``'s).
    method : str or MeanField or LowRank or FullRank or Flow, default "advi"
        An ADVI method: one of the three Gaussians or the flow.
    steps, optimizer, objective, batch_size, minibatch, init, average, random_seed, checkpoint, progressbar
        As :func:`~bnn_zoo.inference.dispatch.fit` takes them.
    until_converged : bool, default False
        Stop once converged (``method="auto"``'s rungs): every
        :data:`~bnn_zoo.inference.defaults.CONVERGED_CHECK_EVERY` steps the
        ELBO trace so far takes the convergence test
        (:func:`~bnn_zoo.inference.diagnostics.convergence.convergence`); at
        the first pass, at step ``i``, the iterates are averaged from there
        for as many steps again as make ``average``'s share of the whole
        (``i`` more at 0.5; none without averaging), and the fit ends.
        ``steps`` is then the most it takes; ``config["converged_at"]`` records ``i``.
        Not with a checkpoint.

    Returns
    -------
    FitResult
        The fit, as ``fit`` returns it.

    Raises
    ------
    ValueError
        For bad arguments, as ``fit``.
    NonFiniteLossError
        At the first non-finite ELBO estimate.
    """
    model, batch_size, minibatch = unwrap_minibatch(model, batch_size, minibatch)
    family, _ = methods.resolve(method, laplace=True)
    objective = ELBO() if objective is None else objective
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise ValueError(f"checkpoint must be a bnn_zoo.Checkpoint(path, every=..., resume=...), "
                         f"got {checkpoint!r}")
    if not isinstance(objective, ELBO):
        raise ValueError(f"objective must be a bnn_zoo.ELBO(...), got {objective!r}")
    if objective.estimator != "weights" and family.name != "advi":
        raise ValueError(f"ELBO(estimator={objective.estimator!r}) needs mean-field q (method='advi'), "
                         f"got method={family.name!r}")
    centring = getattr(method, "centring", False)
    if centring is not False:
        model, centring = _centred(model, centring, batch_size, init)
    if average is None:
        average = defaults.FLOW_AVERAGE if family.name == "flow" else defaults.AVERAGE
    if until_converged and checkpoint is not None:
        raise ValueError("until_converged stops at a step decided as it runs, which a checkpoint's resume "
                         "cannot know: fit with until_converged=False to checkpoint")
    settings = dict(batch_size=batch_size, minibatch=minibatch, average=average, random_seed=random_seed,
                    progressbar=progressbar, centring=centring or None, until_converged=until_converged)
    if family.name == "flow":
        if centring is not False or batch_size is not None:
            raise ValueError("method='flow' fits on the full data, without centring: fit without batch_size")
        if init is None and checkpoint is not None:
            raise ValueError("a flow without init starts from a Gaussian fit and cannot checkpoint: fit the "
                             "Gaussian first and pass it as init=")
        return _flow(model, method, steps=steps, optimizer=optimizer, objective=objective, init=init,
                     checkpoint=checkpoint, **settings)
    if family.name in methods.WARM_STARTED and init is None:
        if checkpoint is not None:
            raise ValueError("a full-rank fit without init starts from a mean-field fit and cannot "
                             "checkpoint: fit mean-field first and pass it as init=")
        return _warm_started(model, method, steps=steps, optimizer=optimizer, objective=objective, **settings)
    if family.name == "fullrank_advi" and objective.path_derivative is None:
        objective = dataclasses.replace(objective, path_derivative=True)
    result = _run(model, method, steps=steps, optimizer=optimizer, objective=objective, init=init,
                  checkpoint=checkpoint, **settings)
    if family.name in methods.WARM_STARTED and init is not None and init.method == "advi":
        return _after_warm_start(result, init)  # the warm start made by hand: recorded as fit's own
    return result


def _centred(model, centring, batch_size, init) -> tuple:
    """The model rewritten for learned centring, and what was rewritten; refusals in one line."""
    from bnn_zoo.inference.families import centring as vip

    if batch_size is not None:
        raise ValueError("centring learns each lambda on the full data: fit without batch_size (or without "
                         "centring)")
    if init is not None and "centring" not in init.params:
        raise ValueError("init is a fit without centring, of the model as written: with centring, start "
                         "from a fit that had it, or without init")
    names = None if centring is True else list(centring)
    if names is None and not vip.candidates(model):
        raise ValueError("centring: the model has no location-scale variable whose loc or scale is random "
                         "(a hierarchy written non-centred has none: write it centred, x ~ Normal(mu, tau), "
                         "and centring learns the form)")
    return vip.reparametrise(model, names)


def _warm_started(model, method, *, steps, optimizer, objective, **settings) -> FitResult:
    """A full-rank fit started from a mean-field fit of the first ``WARM_START`` of the steps.

    From a narrow start full-rank ADVI is slow and unstable; from the
    mean-field optimum, with the path-derivative gradient, it reaches the
    exact posterior of the conjugate regression (docs/user_guide/engine.md).
    Its ELBO trace is the full-rank phase's; ``config`` records the
    mean-field phase's steps and final ELBO.
    """
    n_warm = max(1, int(round(defaults.WARM_START * steps)))
    if n_warm >= steps:
        raise ValueError(f"steps={steps} leave no full-rank steps after a mean-field start of {n_warm}")
    init_std = methods.resolve(method)[1]
    with warnings.catch_warnings():  # the mean-field phase is not the result
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm = _run(model, methods.MeanField(init_std=init_std), steps=n_warm, optimizer=optimizer,
                    objective=dataclasses.replace(objective, path_derivative=False), init=None,
                    checkpoint=None, **settings)
    if optimizer is None:
        rate = defaults.fullrank_learning_rate(warm.layout.dim)
        optimizer = optim.make(defaults.OPTIMIZER, rate, steps - n_warm)
    if objective.path_derivative is None:
        objective = dataclasses.replace(objective, path_derivative=True)
    full = _run(model, "fullrank_advi", steps=steps - n_warm, optimizer=optimizer, objective=objective,
                init=warm, checkpoint=None, **settings)
    full.seconds += warm.seconds  # fit made both phases
    full.config["init_std"] = init_std
    return _after_warm_start(full, warm)


def _after_warm_start(full: FitResult, warm: FitResult) -> FitResult:
    """``full``, the full-rank phase, with its mean-field phase ``warm`` recorded in ``config``:
    ``warm_start`` (the mean-field steps) and ``warm_start_elbo_final``; whether ``fit`` made the
    warm start or was handed it as ``init``."""
    full.config = dict(full.config, warm_start=len(warm.elbo), warm_start_elbo_final=warm.elbo_final)
    return full


def _flow(model, method, *, steps, optimizer, objective, init, checkpoint, **settings) -> FitResult:
    """A flow on ``init``'s Gaussian, or on one fitted first in ``FLOW_START`` of the steps.

    The Gaussian is :func:`~bnn_zoo.inference.methods.gaussian_for`'s; the
    flow's coupling layers start at the identity, so the flow
    starts as that Gaussian (with ``df``, its factor on the Student-t base).
    Trained, it is compared with its start on the
    same draws (:func:`~bnn_zoo.inference.posterior.paired.paired`): where
    it is worse (a lower ELBO beyond the noise, or a higher ``q_pareto_k``),
    the flow returned is its start, its layers at the identity. Its ELBO
    trace is the training's; ``config`` records the start's method, steps
    and final ELBO, and ``versus_start`` the comparison and which was kept.
    """
    check_steps(steps)  # refused as every method refuses them, before the start is fitted
    start_steps = 0
    if init is None:
        start_steps = max(2, int(round(defaults.FLOW_START * steps)))
        if start_steps >= steps:
            raise ValueError(f"steps={steps} leave no flow steps after its Gaussian start of {start_steps}")
        gaussian = methods.gaussian_for(model, "flow")
        with warnings.catch_warnings():  # the start is not the result
            warnings.simplefilter("ignore", ConvergenceWarning)
            init = fit_advi(model, method=gaussian, steps=start_steps, objective=dataclasses.replace(
                objective, path_derivative=None), random_seed=settings["random_seed"],
                progressbar=settings["progressbar"])
    if optimizer is None:
        optimizer = optim.make(defaults.OPTIMIZER, defaults.FLOW_LEARNING_RATE, steps - start_steps)
    if objective.path_derivative is None:
        objective = dataclasses.replace(objective, path_derivative=True)
    result = _run(model, method, steps=steps - start_steps, optimizer=optimizer, objective=objective, init=init,
                  checkpoint=checkpoint, **settings)
    t0 = time.perf_counter()
    dtype = np.asarray(result.params["mu"]).dtype.name
    start = dataclasses.replace(result, params=from_fit(result.family, init, result.layout, dtype))
    versus = paired(result, start, seed=settings["random_seed"])
    if versus["a_worse"]:  # training moved it away from a better start: the start, as a flow (its identity)
        result.params = start.params
    result.seconds += time.perf_counter() - t0 + (init.seconds if start_steps else 0.0)
    result.config = dict(result.config, start=init.method, start_steps=start_steps,
                         start_elbo_final=init.elbo_final,
                         versus_start=dict(versus, kept="start" if versus["a_worse"] else "flow"))
    return result


def _non_finite_data(model) -> str:
    """Where the model's data hold NaN or infinity, in words (empty when they do not)."""
    for v in model.data_vars:
        value = np.asarray(v.get_value())
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
            where = np.argwhere(~np.isfinite(value))
            return (f": data {v.name!r} holds {len(where)} non-finite value(s) ({value[tuple(where[0])]} "
                    f"at index {tuple(int(i) for i in where[0])}); drop or impute them")
    return _non_finite_terms(model)


def _non_finite_terms(model) -> str:
    """The model's terms whose log density is not finite at its initial point, in words (empty when
    none is: then q's draws, not the model, left the support)."""
    try:
        logps = model.point_logps()
    except Exception:  # a model PyMC cannot evaluate alone says nothing more here
        return ""
    bad = {name: value for name, value in logps.items() if not np.isfinite(value)}
    if not bad:
        return ""
    said = ", ".join(f"{name!r}: {value}" for name, value in bad.items())
    free = [name for name in bad if name in {rv.name for rv in model.free_RVs}]
    way = (f"the start value of {free[0]!r} (its initval) or a parameter of its distribution lies outside "
           f"its support" if free else f"the observed values of {next(iter(bad))!r} lie outside its "
           f"distribution's support")
    return f": at the model's initial point log p is not finite ({said}): {way}"


def _run(model, method, *, steps, optimizer, objective, batch_size, minibatch, init, average, random_seed,
         checkpoint, progressbar, centring=None, until_converged=False) -> FitResult:
    """One fit's loop: prepare, resume, step in chunks, checkpoint, test convergence (and with
    ``until_converged``, stop at the first pass, after averaging: :func:`fit_advi`)."""
    t0 = time.perf_counter()
    source = checkpoint.source if checkpoint is not None else None
    saved = ckpt.load(source) if source is not None else None
    done = saved.steps_done if saved is not None else 0
    setup = prepare(model, method=method, steps=steps, optimizer=optimizer, objective=objective,
                    batch_size=batch_size, minibatch=minibatch, init=init, average=average,
                    random_seed=random_seed, centring=centring, until_converged=until_converged)
    if done > steps:
        raise ckpt.CheckpointError(f"checkpoint {source} has {done} steps, more than the {steps} asked for")
    path, every = (checkpoint.path, checkpoint.every) if checkpoint is not None else (None, None)
    state, runner, description = setup.state, setup.runner, optim.describe(setup.optimizer)
    with pytensor.config.change_flags(floatX=setup.dtype):
        history = [[0, description]]
        seconds_before, elbo = 0.0, np.full(steps, np.nan)
        if saved is not None:
            state = saved.restore(state, setup.fingerprint)
            began = [f for f in (saved.average_from, setup.average_from) if f is not None and f < done]
            if len(began) == 2 and began[0] != began[1]:
                raise ckpt.CheckpointError(
                    f"checkpoint {source} averages its iterates from step {saved.average_from}, "
                    f"these settings from step {setup.average_from}: a running mean cannot change "
                    "its start once begun (keep the total steps, or set average=0)")
            if done == steps and saved.history[-1][1] != description:
                raise ckpt.CheckpointError(
                    f"checkpoint {source} holds all {steps} steps, made with {saved.history[-1][1]}: "
                    f"{description} would make none of them; ask for more steps to continue with it, "
                    f"or resume with the same optimizer")
            history = saved.history + ([[done, description]]
                                       if done < steps and saved.history[-1][1] != description else [])
            elbo[:done], seconds_before = saved.elbo, saved.seconds
        first_step, first_done, i = None, done, done
        end, converged_at, check = steps, None, 2 * defaults.CONVERGED_CHECK_EVERY
        with _progress(progressbar) as progress:
            task = progress.add_task(setup.family.name, total=steps, completed=done, elbo="")
            while i < end:
                if until_converged and converged_at is None and i >= check:
                    check = i + defaults.CONVERGED_CHECK_EVERY
                    if convergence(elbo[:i]).converged:
                        converged_at = i
                        end = min(steps, i + (int(round(i * average / (1 - average))) if average else 0))
                        if state.average_from is not None:  # the running mean begins here (prepare)
                            state = state._replace(average_from=jnp.asarray(i, jnp.int32))
                        if i >= end:
                            break
                k = 1 if first_step is None else min(CHUNK, end - i)
                if until_converged and converged_at is None:  # stop at the next test
                    k = min(k, check - i)
                if path is not None:  # stop at every checkpoint boundary
                    k = min(k, every - i % every)
                state, trace = runner.advance(state, i, k)
                bad = np.flatnonzero(~np.isfinite(trace))
                if bad.size:
                    raise NonFiniteLossError(f"ELBO is {trace[bad[0]]} at step {i + bad[0] + 1}"
                                             + _non_finite_data(model))
                elbo[i : i + k] = trace
                i += k
                if first_step is None:
                    first_step, first_done = time.perf_counter(), i
                if path is not None and (i % every == 0 or i == steps):
                    ckpt.save(path, state, elbo=elbo[:i], seconds=seconds_before + time.perf_counter() - t0,
                              fingerprint_=setup.fingerprint, history=history, average_from=setup.average_from)
                recent = elbo[max(0, i - 100) : i]
                progress.update(task, completed=i, elbo=f"ELBO {recent.mean():,.5g}")
        finish = time.perf_counter()

    if end < steps:  # stopped once converged: the trace of the steps taken
        elbo = elbo[:end]
    config = dict(setup.settings, steps=end, optimizer=description, history=history, resumed_at=done)
    if until_converged:
        config.update(max_steps=steps, converged_at=converged_at)
    if init is not None and init.config.get("beta") == objective.beta:  # the same objective: a level to keep
        config["init_elbo_final"] = init.elbo_final
    ran = end - done
    if centring is not None:  # the learned lambdas go into the model's containers: its draws use them
        from bnn_zoo.inference.families.centring import set_lambdas

        lambdas = set_lambdas(model, centring, 1 / (1 + np.exp(-np.asarray(state.fitted["centring"], "float64"))))
        config["centring"] = {name: value.tolist() for name, value in lambdas.items()}
    result = FitResult(
        model=model, family=setup.family, layout=setup.layout,
        params={k: np.asarray(v) for k, v in state.fitted.items()},
        elbo=elbo, config=config,
        seconds=seconds_before + finish - t0, compile_seconds=(first_step if ran else finish) - t0,
        density=setup.density, timed=(end - first_done, finish - first_step) if ran else (0, 0.0),
    )
    warn_unless_converged(result)
    return result
