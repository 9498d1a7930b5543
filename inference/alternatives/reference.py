"""The reference: PyMC's own ADVI step, for the tests and benchmarks that check the engine.

:func:`pymc_fit` runs PyMC's compiled ``KLqp`` step (what ``pm.fit`` iterates)
from the same initial parameters as :func:`bnn_zoo.fit`, once per Python
call, on a pytensor backend, and returns the same :class:`FitResult`. It
maximises the same objective: on the toy BNN both reach the same ELBO, and
the closed-form tests pass on both. Minibatches are drawn with replacement by
``pm.Minibatch``; there are no checkpoints.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import numpy as np
import pymc as pm
import pymc.variational as pmvi
import pytensor
from pymc.pytensorf import resolve_backend_compile_kwargs
from pymc.variational import updates

from bnn_zoo.inference import families
from bnn_zoo.inference.advi.prepare import model_dtype
from bnn_zoo.inference.advi.starts import initial_mean
from bnn_zoo.inference.posterior.result import FitResult, NonFiniteLossError
from bnn_zoo.inference.compile.jaxmodel import Layout, compile_model

__all__ = ["BACKENDS", "OPTIMIZERS", "build_step", "pymc_fit"]

#: The pytensor backends PyMC's step can be compiled for.
BACKENDS = ("numba", "c", "jax")
#: PyMC's optimizers, by name.
OPTIMIZERS = {
    "adam": updates.adam,
    "adamax": updates.adamax,
    "adagrad_window": updates.adagrad_window,
    "rmsprop": updates.rmsprop,
    "sgd": updates.sgd,
    "momentum": updates.momentum,
}


def build_step(model: pm.Model, *, method: str = "advi", optimizer: str = "adam",
               learning_rate: float = 1e-2, batch_size: int | None = None,
               minibatch: Sequence[str] = ("X", "y"), init_std: float = 0.01, beta: float = 1.0,
               mc_samples: int = 1, backend: str = "numba", seed: int = 0):
    """PyMC's ``KLqp`` on ``MeanField``/``FullRank``, started where :func:`bnn_zoo.fit` starts.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    method : {"advi", "fullrank_advi"}, default "advi"
        The variational family.
    optimizer : str, default "adam"
        One of :data:`OPTIMIZERS`.
    learning_rate : float, default 0.01
        The optimizer's learning rate.
    batch_size : int, optional
        Minibatch size (``pm.Minibatch``, drawn with replacement); ``None``
        for the full data.
    minibatch : sequence of str, default ("X", "y")
        The data containers cut into minibatches.
    init_std : float, default 0.01
        Initial posterior sd of every unconstrained variable.
    beta : float, default 1.0
        KL weight.
    mc_samples : int, default 1
        Monte Carlo draws per step.
    backend : {"numba", "c", "jax"}, default "numba"
        The pytensor backend of the compiled step.
    seed : int, default 0
        Seeds the initial means (as :func:`bnn_zoo.fit`) and PyMC's noise.

    Returns
    -------
    inference : pymc.variational.KLqp
        The inference object; its ``approx`` holds q's parameters.
    step_fn : callable
        Takes one step and returns the loss: the negative ELBO, divided by
        ``N / batch_size`` with minibatches.
    layout : Layout
        q's layout.

    Raises
    ------
    ValueError
        For an unknown method, backend or optimizer, or a model whose
        variables PyMC orders differently from the engine.
    """
    family = families.get(method)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    dtype = model_dtype(model)
    with pytensor.config.change_flags(floatX=dtype):
        inference = pmvi.KLqp(family.pymc(model=model, random_seed=seed), beta=beta)
        group = inference.approx.groups[0]
        point = model.initial_point()
        layout = Layout.of(model, point)
        if [group.ordering[name][1] for name in layout.names] != [s for _, s, _, _ in layout.slots]:
            raise ValueError("PyMC orders this model's variables differently from the engine")
        params = family.to_pymc(family.init(initial_mean(layout, point, seed).astype(dtype), init_std))
        for name, value in params.items():
            group.params_dict[name].set_value(np.asarray(value, dtype=dtype))
        replacements = {}
        if batch_size is not None:
            containers = [model[name] for name in minibatch]
            batches = pm.Minibatch(*containers, batch_size=batch_size)
            replacements = dict(zip(containers, [batches] if len(containers) == 1 else batches))
        with warnings.catch_warnings():
            # Expected under JAX, and printed on every compile: the step keeps its own
            # copy of the random generators, and drops pm.Minibatch's shape assertion.
            warnings.filterwarnings("ignore", message="The RandomType SharedVariables")
            warnings.filterwarnings("ignore", message="Skipping Assert")
            step_fn = inference.objective.step_function(
                score=True, obj_n_mc=mc_samples,
                obj_optimizer=OPTIMIZERS[optimizer](learning_rate=learning_rate),
                more_replacements=replacements,
                compile_kwargs=resolve_backend_compile_kwargs(backend, None))
    return inference, step_fn, layout


def _from_pymc(params: dict, method: str) -> dict:
    """PyMC's parameters of q (``mu``, ``rho`` or ``L_tril``) as the family's."""
    if "L_tril" not in params:
        return params
    mu = params["mu"]
    L = np.zeros((mu.size, mu.size))
    L[np.tril_indices(mu.size)] = params["L_tril"]
    L[np.diag_indices(mu.size)] = np.logaddexp(0.0, np.diag(L))
    return families.get(method).from_factor(mu, L)


def pymc_fit(model: pm.Model, *, method: str = "advi", steps: int = 10_000, optimizer: str = "adam",
        learning_rate: float = 1e-2, batch_size: int | None = None,
        minibatch: Sequence[str] = ("X", "y"), init_std: float = 0.01, beta: float = 1.0,
        mc_samples: int = 1, backend: str = "numba", seed: int = 0) -> FitResult:
    """ADVI by PyMC's own step: the same objective and start as :func:`bnn_zoo.fit`.

    One Python call per step; no checkpoints, averaging or warm start.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    method : {"advi", "fullrank_advi"}, default "advi"
        The variational family.
    steps : int, default 10000
        Optimisation steps.
    optimizer : str, default "adam"
        One of :data:`OPTIMIZERS`.
    learning_rate : float, default 0.01
        The optimizer's learning rate.
    batch_size : int, optional
        Minibatch size; ``None`` for the full data.
    minibatch : sequence of str, default ("X", "y")
        The data containers cut into minibatches.
    init_std : float, default 0.01
        Initial posterior sd.
    beta : float, default 1.0
        KL weight.
    mc_samples : int, default 1
        Monte Carlo draws per step.
    backend : {"numba", "c", "jax"}, default "numba"
        The pytensor backend.
    seed : int, default 0
        Seeds the initial means and PyMC's noise.

    Returns
    -------
    FitResult
        As :func:`bnn_zoo.fit` returns, with ``config["engine"]`` naming the
        backend.

    Raises
    ------
    ValueError
        As :func:`build_step`.
    NonFiniteLossError
        When the ELBO becomes NaN or infinite; the message names the step.
    """
    t0 = time.perf_counter()
    inference, step_fn, layout = build_step(
        model, method=method, optimizer=optimizer, learning_rate=learning_rate,
        batch_size=batch_size, minibatch=minibatch, init_std=init_std, beta=beta,
        mc_samples=mc_samples, backend=backend, seed=seed)
    scale = model[minibatch[0]].get_value().shape[0] / batch_size if batch_size else 1.0
    elbo = np.empty(steps)
    first = None
    for i in range(steps):
        elbo[i] = -float(step_fn()) * scale
        if not np.isfinite(elbo[i]):
            raise NonFiniteLossError(f"ELBO is {elbo[i]} at step {i + 1}")
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    group = inference.approx.groups[0]
    params = _from_pymc({name: np.asarray(p.get_value()) for name, p in group.params_dict.items()}, method)
    config = dict(method=method, steps=steps, optimizer=f"pymc {optimizer}(lr={learning_rate:g})",
                  batch_size=batch_size, beta=beta, mc_samples=mc_samples, seed=seed,
                  init_std=init_std, engine=f"pymc ({backend})")
    return FitResult(model=model, family=families.get(method), layout=layout, params=params,
                     elbo=elbo, config=config, seconds=end - t0, compile_seconds=first - t0,
                     density=compile_model(model, layout), timed=(steps - 1, end - first))
