"""ADVI for the zoo's PyMC models: the one place where models are fitted.

:func:`fit` wraps ``pm.ADVI`` / ``pm.FullRankADVI`` with what a BNN needs and
PyMC does not default to: random initial means (all-zero means keep hidden
units identical), a small initial posterior std, a KL weight ``beta``,
optional minibatches, a choice of pytensor backend and precision, and a loss
check that stops on the first non-finite value instead of returning garbage.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pymc.variational as pmvi
import pytensor
from pymc.variational import updates

METHODS = ("advi", "fullrank_advi")
BACKENDS = ("numba", "c", "jax")
OPTIMIZERS = {
    "adam": updates.adam,
    "adamax": updates.adamax,
    "adagrad_window": updates.adagrad_window,
    "rmsprop": updates.rmsprop,
    "sgd": updates.sgd,
    "momentum": updates.momentum,
}


class NonFiniteLossError(FloatingPointError):
    """The ELBO became NaN or infinite during the fit."""


@dataclass
class FitResult:
    """A fitted approximation and how it got there."""

    approx: pmvi.Approximation
    model: pm.Model
    elbo: np.ndarray  # per-step ELBO estimate (with the KL weight beta)
    method: str
    backend: str
    seconds: float  # whole fit, compilation included
    compile_seconds: float  # compilation and the first step
    config: dict = field(default_factory=dict)

    @property
    def ms_per_step(self) -> float:
        """Mean wall time of the steps after the first, in milliseconds."""
        steps = len(self.elbo) - 1
        return 1e3 * (self.seconds - self.compile_seconds) / steps if steps else float("nan")

    @property
    def elbo_final(self) -> float:
        """Mean ELBO over the last 10% of steps (at most 1000)."""
        tail = max(1, min(1000, len(self.elbo) // 10))
        return float(np.mean(self.elbo[-tail:]))


@contextlib.contextmanager
def precision(float32: bool):
    """Build *and* fit a model inside this context to run it in float32."""
    with pytensor.config.change_flags(floatX="float32" if float32 else "float64"):
        yield


def _fan_in(shape: tuple) -> int:
    # Dense weights are (in, out) and conv kernels (kh, kw, in, out): the fan-in
    # is the product of all but the last axis.
    return int(np.prod(shape[:-1]))


def _initial_means(group, model: pm.Model, rng: np.random.Generator) -> np.ndarray:
    """Model's initial point, plus N(0, 1/fan_in) noise on every weight matrix.

    Biases and scalars start at the initial point (biases at 0, scales at the
    hyperprior's support point). The random weights break the symmetry
    between hidden units.
    """
    start = model.initial_point()
    mu = np.zeros(group.ddim)
    for name, slc, shape, _ in group.ordering.values():
        value = np.asarray(start[name], dtype="float64").reshape(shape)
        if len(shape) >= 2:
            value = value + rng.normal(0.0, 1.0 / np.sqrt(_fan_in(shape)), size=shape)
        mu[slc] = value.ravel()
    return mu


@contextlib.contextmanager
def _quiet_pymc_log(quiet: bool):
    """Silence PyMC's 'Finished [100%]' log lines along with the progress bar."""
    log = logging.getLogger("pymc")
    level = log.level
    if quiet:
        log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)


def _stop_on_nonfinite(approx, losses, step):
    if losses is not None and not np.isfinite(losses[-1]):
        raise NonFiniteLossError(f"ELBO is {-losses[-1]} at step {step}")


def fit(
    model: pm.Model,
    *,
    method: str = "advi",
    steps: int = 10_000,
    optimizer: str = "adam",
    learning_rate: float = 1e-2,
    batch_size: int | None = None,
    data: tuple[str, ...] = ("X", "y"),
    init_std: float = 0.01,
    beta: float = 1.0,
    mc_samples: int = 1,
    backend: str = "numba",
    float32: bool = False,
    seed: int = 0,
    progressbar: bool = True,
) -> FitResult:
    """Fit a mean-field or full-rank Gaussian approximation by ADVI.

    Parameters
    ----------
    model : pm.Model
        Built under :func:`precision` with the same ``float32``.
    method : {"advi", "fullrank_advi"}
        Mean-field (diagonal) or full-rank Gaussian in the unconstrained space.
    steps : int
        Optimisation steps.
    optimizer : str
        One of :data:`OPTIMIZERS`, with ``learning_rate``.
    batch_size : int, optional
        Minibatch size; ``None`` uses the full data each step. The model's
        observed variables must carry ``total_size`` (the builders set it).
    data : tuple of str
        Names of the ``pm.Data`` containers sliced into minibatches together.
    init_std : float
        Initial posterior std of every unconstrained variable. PyMC's default
        (~0.7) makes wide nets diverge, and on the toy BNN 0.1 let the
        hierarchical scales collapse to a near-linear fit where 0.01 did not.
    beta : float
        KL weight: maximises ``E_q[log p(D|w)] - beta * KL(q || prior)``.
    mc_samples : int
        Monte Carlo draws of q per gradient step (more: less noisy, slower).
    backend : {"numba", "c", "jax"}
        pytensor backend that compiles the step function.
    float32 : bool
        Fit in single precision.
    seed : int
        Seeds the initial means, the Monte Carlo noise and the minibatches.
    progressbar : bool
        Show PyMC's progress bar with the running loss.

    Returns
    -------
    FitResult

    Raises
    ------
    NonFiniteLossError
        When the ELBO becomes NaN or infinite; the message names the step.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if steps < 1 or mc_samples < 1:
        raise ValueError(f"steps and mc_samples must be >= 1, got {steps} and {mc_samples}")
    if not (init_std > 0 and learning_rate > 0 and beta > 0):
        raise ValueError("init_std, learning_rate and beta must be positive")

    with precision(float32):
        dtype = pytensor.config.floatX
        built_as = {v.dtype for v in model.data_vars if v.dtype.startswith("float")}
        if built_as and built_as != {dtype}:
            raise ValueError(
                f"model data is {built_as.pop()} but fit runs in {dtype}: "
                f"build the model inside inference.precision(float32={float32})"
            )
        family = pmvi.MeanField if method == "advi" else pmvi.FullRank
        inference = pmvi.KLqp(family(model=model, random_seed=seed), beta=beta)
        group = inference.approx.groups[0]
        rng = np.random.default_rng(seed)
        params = group.params_dict
        params["mu"].set_value(_initial_means(group, model, rng).astype(dtype))
        rho = np.log(np.expm1(init_std))  # PyMC stores std = softplus(rho)
        if method == "advi":
            params["rho"].set_value(np.full(group.ddim, rho, dtype=dtype))
        else:  # L's diagonal is stored as rho too (softplus'ed in FullRankGroup.L)
            L = rho * np.eye(group.ddim)
            params["L_tril"].set_value(L[np.tril_indices(group.ddim)].astype(dtype))

        replacements = {}
        if batch_size is not None:
            n = model[data[0]].get_value().shape[0]
            if not 1 <= batch_size <= n:
                raise ValueError(f"batch_size must be in 1..{n}, got {batch_size}")
            containers = [model[name] for name in data]
            batches = pm.Minibatch(*containers, batch_size=batch_size)
            if len(containers) == 1:
                batches = [batches]
            replacements = dict(zip(containers, batches))

        t0 = time.perf_counter()
        first_step_done = []

        def stamp_first_step(approx, losses, step):
            if not first_step_done:
                first_step_done.append(time.perf_counter())

        try:
            with _quiet_pymc_log(not progressbar):
                inference.fit(
                    steps,
                    backend=backend,
                    obj_optimizer=OPTIMIZERS[optimizer](learning_rate=learning_rate),
                    obj_n_mc=mc_samples,
                    callbacks=[_stop_on_nonfinite, stamp_first_step],
                    progressbar=progressbar,
                    more_replacements=replacements,
                )
        except NonFiniteLossError:
            raise
        except FloatingPointError as err:  # PyMC's own NaN check
            raise NonFiniteLossError(f"ELBO is nan at step {len(inference.hist) + 1}") from err
        seconds = time.perf_counter() - t0

    for p in inference.approx.params:  # the JAX backend can leave device arrays behind
        p.set_value(np.asarray(p.get_value()))
    config = dict(
        method=method, steps=steps, optimizer=optimizer, learning_rate=learning_rate,
        batch_size=batch_size, init_std=init_std, beta=beta, mc_samples=mc_samples, backend=backend,
        float32=float32, seed=seed,
    )
    return FitResult(
        approx=inference.approx, model=model, elbo=-np.asarray(inference.hist, dtype="float64"),
        method=method, backend=backend, seconds=seconds,
        compile_seconds=first_step_done[0] - t0, config=config,
    )
