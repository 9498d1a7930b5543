"""Everything a fit builds before its first step: the compiled model, q's initial state, the runner.

:func:`prepare` is what :func:`bnn_zoo.fit` and :func:`bnn_zoo.fit_many`
share before they take steps, and what the benchmarks time: the model's
dtype and layout (:func:`model_dtype`), q's initial mean
(:func:`~bnn_zoo.inference.advi.starts.initial_mean`), which data containers are cut into minibatches
(:func:`~bnn_zoo.inference.compile.minibatch.minibatch_plan`), the KL weighting
(:func:`~bnn_zoo.inference.advi.objective.kl_schedule`) and the
engine's compiled steps (:func:`compiled_steps`) and the settings a fit
records (:func:`settings_record`). :func:`precision` builds a model in float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pymc as pm
import pytensor

from bnn_zoo.inference.advi import checkpoint as ckpt
from bnn_zoo.inference import defaults, methods
from bnn_zoo.inference.advi import core, estimators, objective, optim
from bnn_zoo.inference.advi.engine import Runner, compile_steps, steps_per_epoch
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.compile.jaxmodel import Layout, ModelFunction, compile_model
from bnn_zoo.inference.compile.minibatch import minibatch_plan
from bnn_zoo.inference.advi.objective import ELBO, kl_schedule
from bnn_zoo.inference.posterior.result import FitResult
from bnn_zoo.inference.advi.starts import from_fit, given_initvals, initial_mean

__all__ = ["MAX_STEPS", "Setup", "check_settings", "check_steps", "compiled_steps", "model_dtype", "precision",
           "prepare", "settings_record"]

#: The most steps one fit takes: the ELBO trace is kept in memory, 8 bytes a step.
MAX_STEPS = 10**8


@contextlib.contextmanager
def precision(float32: bool):
    """Build a model inside this context to have it in float32 (or float64).

    Sets pytensor's ``floatX`` for the block, so that the variables and data
    containers built in it take that dtype. :func:`fit` fits a model in the
    dtype it was built in and refuses one whose float data and variables
    differ, so build the whole model inside the block.

    Parameters
    ----------
    float32 : bool
        ``True`` for float32, ``False`` for float64.

    Yields
    ------
    None

    Examples
    --------
    >>> import bnn_zoo
    >>> from bnn_zoo.data import toy
    >>> from bnn_zoo.models import mlp_classifier
    >>> split = toy.load("moons", n_train=256, n_test=10)
    >>> with bnn_zoo.precision(float32=True):
    ...     model = mlp_classifier(split.X_train, split.y_train, hidden=(5, 5))
    >>> result = bnn_zoo.fit(model, batch_size=128, steps=200, progressbar=False)
    >>> result.config["dtype"]   # fitted in float32
    'float32'
    """
    if not isinstance(float32, (bool, np.bool_)):
        raise ValueError(f"precision takes float32=True or False, got {float32!r}")
    with pytensor.config.change_flags(floatX="float32" if float32 else "float64"):
        yield


def model_dtype(model: pm.Model) -> str:
    """The float dtype of the model's value variables (all must share it).

    Parameters
    ----------
    model : pymc.Model
        The model to fit.

    Returns
    -------
    str
        ``"float32"`` or ``"float64"``.

    Raises
    ------
    ValueError
        For a model without free variables, with a discrete one, with value variables of
        several dtypes, or with float data of another dtype than its variables.
    """
    if not model.free_RVs:
        raise ValueError("the model has no free variables, so there is nothing to fit: "
                         "evaluate it with pm.draw or pm.sample_posterior_predictive instead")
    discrete = [rv for rv in model.free_RVs if not model.rvs_to_values[rv].dtype.startswith("float")]
    if discrete:
        rv = discrete[0]
        raise ValueError(f"free variable {rv.name!r} is discrete ({type(rv.owner.op).__name__.removesuffix('RV')}, "
                         f"{model.rvs_to_values[rv].dtype}); ADVI fits continuous variables only: marginalise it "
                         "out of the model (pymc-extras' marginalize), or sample the model with pm.sample")
    dtypes = {v.dtype for v in model.value_vars}
    if len(dtypes) != 1 or not dtypes <= {"float32", "float64"}:
        raise ValueError(f"ADVI needs continuous value variables of one float dtype, got {sorted(dtypes)}: "
                         "build the model under one floatX (bnn_zoo.precision)")
    data = {v.dtype for v in model.data_vars if v.dtype.startswith("float")}
    if data - dtypes:
        raise ValueError(f"model data is {sorted(data)} but its variables are {dtypes.pop()}: "
                         "build the whole model inside bnn_zoo.precision()")
    return dtypes.pop()


@dataclass
class Setup:
    """A fit before its first step: the compiled model, q's initial state and the engine's runner.

    What :func:`prepare` returns. ``setup.runner.advance(setup.state, 0, k)``
    takes the first ``k`` steps.

    Parameters
    ----------
    model : pymc.Model
        The model to fit.
    family : Family
        q's variational family.
    layout : Layout
        Where each value variable sits in q's flat vector.
    density : ModelFunction
        The model compiled to JAX.
    optimizer : optax.GradientTransformation
        The optimizer (the default one when none was given).
    state : ADVIState
        The state before the first step (:func:`bnn_zoo.inference.advi.core.init`).
    runner : Runner
        Runs the compiled steps on the fit's data (:class:`~bnn_zoo.inference.advi.engine.Runner`).
    settings : dict
        What defines the objective, as recorded in results; part of the fingerprint.
    fingerprint : str
        The fit's checkpoint fingerprint (:func:`~bnn_zoo.inference.advi.checkpoint.fingerprint`).
    dtype : str
        The model's float dtype.
    average_from : int or None
        The step from which the iterates are averaged (``None``: no averaging).
    """

    model: pm.Model
    family: Family
    layout: Layout
    density: ModelFunction
    optimizer: optax.GradientTransformation
    state: core.ADVIState
    runner: Runner
    settings: dict  # what defines the objective (recorded, and part of the fingerprint)
    fingerprint: str
    dtype: str
    average_from: int | None  # the step from which iterates are averaged (None: no averaging)


def prepare(model: pm.Model, *, method="advi", steps: int = defaults.STEPS,
            optimizer: optax.GradientTransformation | None = None, objective: ELBO | None = None,
            batch_size: int | None = None, minibatch: Sequence[str] | None = None,
            init: FitResult | None = None, average: float = defaults.AVERAGE, random_seed: int = 0,
            centring=None, until_converged: bool = False) -> Setup:
    """Everything :func:`bnn_zoo.fit` builds before its first step.

    ``setup.runner.advance(setup.state, 0, k)`` then takes ``k`` steps: what
    :func:`bnn_zoo.fit` loops over, and what the benchmarks time. The
    parameters are :func:`bnn_zoo.fit`'s, with the same defaults; unlike
    ``fit``, no mean-field warm start for full rank, no checkpoints and no
    progress bar.

    Parameters
    ----------
    model : pymc.Model
        The model to fit.
    method : {"advi", "fullrank_advi"} or MeanField or FullRank, default "advi"
        The variational family.
    steps : int, default bnn_zoo.inference.defaults.STEPS
        The steps the fit will take (for the default optimizer and the
        averaging's start).
    optimizer : optax.GradientTransformation, optional
        Default: :func:`bnn_zoo.inference.advi.optim.default`.
    objective : ELBO, optional
        The objective; default ``ELBO()``.
    batch_size : int, optional
        Minibatch size; ``None`` for the full data.
    minibatch : sequence of str, optional
        The data containers cut into minibatches (default: all).
    init : FitResult, optional
        Start at another fit's q (:func:`bnn_zoo.fit`'s ``init``).
    average : float, default bnn_zoo.inference.defaults.AVERAGE
        Share of the final steps whose iterates are averaged.
    random_seed : int, default 0
        Seeds the initial means, the noise and the minibatches.
    centring : Centring, optional
        What learned centring rewrote (:mod:`~bnn_zoo.inference.families.centring`):
        q's parameters gain its ``lambda`` logits, learned with q.
    until_converged : bool, default False
        The fit may stop once converged
        (:func:`~bnn_zoo.inference.advi.loop.fit_advi`'s): the running mean's
        start is then in the state (``state.average_from``, at ``steps``
        until the loop moves it), not in the compiled step.

    Returns
    -------
    Setup
        The compiled model, the initial state and the runner.

    Raises
    ------
    ValueError
        For bad arguments, as :func:`bnn_zoo.fit`.
    """
    family, init_std = methods.resolve(method)
    objective = ELBO() if objective is None else objective
    average_from, optimizer = check_settings(family=family, steps=steps, objective=objective, average=average,
                                             optimizer=optimizer)
    dtype = model_dtype(model)
    sliced, n = minibatch_plan(model, minibatch, batch_size)
    kl_weight, kl_key = kl_schedule(objective.kl_weighting, batch_size, steps_per_epoch(n, batch_size))
    with pytensor.config.change_flags(floatX=dtype):
        point = model.initial_point()
        layout = Layout.of(model, point)
        density = compile_model(model, layout)
        if init is None:
            mean = initial_mean(layout, point, random_seed, given_initvals(model))
            params = family.init(mean.astype(dtype), np.float64(init_std))
        else:
            params = from_fit(family, init, layout, dtype)
        if centring is not None:  # each lambda's logit, from init's where it learned them, else lambda = 0.5
            given = None if init is None else init.params.get("centring")
            params["centring"] = np.zeros(centring.size) if given is None else np.asarray(given)
        params = {k: jnp.asarray(v, dtype) for k, v in params.items()}
        if centring is not None:
            optimizer = optim.with_centring(optimizer, defaults.CENTRING_LEARNING_RATE)
        state = core.init(params, optimizer, average=average > 0)
        dynamic = until_converged and state.average is not None
        if dynamic:  # the mean follows the iterates until the loop begins it
            state = state._replace(average_from=jnp.asarray(steps, jnp.int32))
        # The keys are those of the results and checkpoints written before: they resume.
        settings = dict(settings_record(model, family, objective, batch_size=batch_size, sliced=sliced,
                                        kl_key=kl_key, dtype=dtype, average=average,
                                        init_std=init_std if init is None else "from another fit"),
                        seed=random_seed, **({} if centring is None else {"centring": list(centring.names)}),
                        **({"flow": methods.flow_settings(method)} if family.name == "flow" else {}))
        names = [v.name for v in model.data_vars]
        slots = () if centring is None else tuple(
            (names.index(c), shape) for c, shape in zip(centring.containers, centring.shapes))
        fingerprint = ckpt.fingerprint(model, layout, state, settings)
        data = tuple(jax.device_put(v.get_value()) for v in model.data_vars)
        steps_fns = compiled_steps(density, family, optimizer, objective, sliced=sliced, n=n,
                                   batch_size=batch_size, dtype=dtype, kl_weight=kl_weight, kl_key=kl_key,
                                   average_from="in the state" if dynamic else average_from, model=model,
                                   shapes=tuple((d.shape, str(d.dtype)) for d in data), centring=slots,
                                   params=params)
    return Setup(model=model, family=family, layout=layout, density=density, optimizer=optimizer,
                 state=state, runner=Runner(steps_fns, data, random_seed), settings=settings,
                 fingerprint=fingerprint, dtype=dtype, average_from=average_from)


def settings_record(model: pm.Model, family: Family, objective: ELBO, *, batch_size, sliced, kl_key, dtype,
                    average, init_std) -> dict:
    """The settings every fit records in ``config``, ``fit``'s and ``fit_many``'s alike.

    What defines the objective and q's start: the method, the minibatches
    (their size and the containers cut), the ELBO's settings, the dtype,
    q's initial sd and the iterate averaging. ``fit`` adds the seed (and
    its centring or flow settings), ``fit_many`` each fit's seed; both add
    the steps, the optimizer and its history.

    Parameters
    ----------
    model : pymc.Model
        The model fitted (its data containers name the minibatches).
    family : Family
        q's family.
    objective : ELBO
        The objective.
    batch_size : int or None
        The minibatch size.
    sliced : sequence of bool
        Which of the model's data containers are cut into minibatches.
    kl_key : str or callable
        The KL weighting (a custom schedule is recorded as ``"custom"``).
    dtype : str
        The fit's float dtype.
    average : float
        The share of the steps averaged.
    init_std : float or str
        q's initial sd, or what q started from.

    Returns
    -------
    dict
    """
    return dict(method=family.name, batch_size=batch_size,
                minibatch=sorted(name for name, cut in zip((v.name for v in model.data_vars), sliced) if cut),
                beta=objective.beta, kl_weighting=kl_key if isinstance(kl_key, str) else "custom",
                mc_samples=objective.mc_samples, estimator=objective.estimator,
                path_derivative=bool(objective.path_derivative), dtype=dtype, init_std=init_std, average=average)


def check_steps(steps) -> None:
    """Refuse, in one line, ``steps`` that are not an integer in ``1..MAX_STEPS`` (every method's check).

    Parameters
    ----------
    steps : int
        A fit's steps (ADVI's, or L-BFGS's most iterations for the Laplace approximation).

    Raises
    ------
    ValueError
        Naming ``steps`` and the range.
    """
    if isinstance(steps, bool) or not (isinstance(steps, (int, np.integer)) and 1 <= steps <= MAX_STEPS):
        raise ValueError(f"steps must be an integer in 1..{MAX_STEPS:,}, got {steps!r}")


def check_settings(*, family: Family, steps, objective: ELBO, average, optimizer):
    """``(average_from, optimizer)`` after checking a fit's settings.

    Parameters
    ----------
    family : Family
        q's family (a per-example-noise estimator needs mean-field q).
    steps : int
        The fit's steps, in ``1..MAX_STEPS``.
    objective : ELBO
        The objective.
    average : float
        The averaged share of the steps, in [0, 1).
    optimizer : optax.GradientTransformation or None
        ``None`` for :func:`bnn_zoo.inference.advi.optim.default`.

    Returns
    -------
    average_from : int or None
        The step from which the iterates are averaged (``None``: no averaging).
    optimizer : optax.GradientTransformation
        The optimizer.

    Raises
    ------
    ValueError
        Naming the setting out of range.
    """
    check_steps(steps)
    if not isinstance(objective, ELBO):
        raise ValueError(f"objective must be a bnn_zoo.ELBO(...), got {objective!r}")
    if objective.estimator != "weights" and family.name != "advi":
        raise ValueError(f"ELBO(estimator={objective.estimator!r}) needs mean-field q (method='advi'), "
                         f"got method={family.name!r}")
    if not (isinstance(average, (int, float, np.number)) and 0 <= average < 1):
        raise ValueError(f"average must be in [0, 1), got {average!r}")
    if optimizer is None:
        optimizer = optim.default(steps)
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(f"optimizer must be an optax GradientTransformation, got {optimizer!r}")
    return (steps - int(round(average * steps)) if average else None), optimizer


def compiled_steps(density: ModelFunction, family: Family, optimizer, elbo: ELBO, *, sliced: tuple, n: int,
                   batch_size: int | None, dtype: str, kl_weight: Callable, kl_key, average_from: int | None,
                   shapes: tuple, model: pm.Model, centring: tuple = (), params: dict | None = None) -> dict:
    """The engine's compiled runners for one objective, optimizer and data shape, built once.

    Kept in ``density.jitted``, so that a fit alone and
    :func:`~bnn_zoo.inference.advi.batch.fit_many` share them.

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    family : Family
        q's family.
    optimizer : optax.GradientTransformation
        The optimizer.
    elbo : ELBO
        The objective.
    sliced : tuple of bool
        Which data containers are cut into minibatches (:func:`minibatch_plan`).
    n : int
        Their rows.
    batch_size : int or None
        The batch size.
    dtype : str
        The model's float dtype.
    kl_weight : callable
        The KL weighting (:func:`kl_schedule`).
    kl_key : object
        What identifies it.
    average_from : int or None or "in the state"
        The step from which the iterates are averaged; ``"in the state"``:
        ``state.average_from`` holds it (:func:`prepare`'s ``until_converged``).
    shapes : tuple
        ``(shape, dtype)`` of each data container of one fit.
    model : pymc.Model
        The model (for a per-example-noise estimator's likelihood).
    centring : tuple, default ()
        Learned centring's ``(data index, shape)`` of each ``lambda`` container
        (:attr:`~bnn_zoo.inference.advi.objective.ELBOFunction.centring`).
    params : dict, optional
        One fit's parameters: their shapes tell apart families of one name
        and other sizes (a rank, a flow's layers).

    Returns
    -------
    dict
        :func:`~bnn_zoo.inference.advi.engine.compile_steps`' runners.
    """
    path_derivative = bool(elbo.path_derivative)
    key = ("fit", family.name, optim.key(optimizer), sliced, batch_size, elbo.beta, elbo.mc_samples, dtype,
           kl_key, path_derivative, average_from, shapes, elbo.estimator, centring,
           tuple((k, np.shape(v)) for k, v in sorted((params or {}).items())))
    if key not in density.jitted:
        likelihood = None if elbo.estimator == "weights" else estimators.compile_likelihood(
            model, density.layout, elbo.estimator)
        function = objective.ELBOFunction(density, family, beta=elbo.beta,
                                          scale=n / batch_size if batch_size else 1.0,
                                          path_derivative=path_derivative, likelihood=likelihood,
                                          centring=centring)
        density.jitted[key] = compile_steps(function, optimizer, sliced=sliced, n=n, batch_size=batch_size,
                                            mc_samples=elbo.mc_samples, kl_weight=kl_weight, dtype=dtype,
                                            average_from=average_from if isinstance(average_from, int) else 0)
    return density.jitted[key]

