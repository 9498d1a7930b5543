"""ADVI for the zoo's PyMC models: the one place where models are fitted.

:func:`fit` maximises PyMC's ``KLqp`` objective for a ``MeanField`` or
``FullRank`` approximation with two engines behind one interface:
``"jax"`` (:mod:`inference.engine`: the model's log density compiled to JAX
once and the whole optimisation run there) and ``"pymc"`` (the reference:
PyMC's own compiled step, on a pytensor backend, called once per step). Both
add what a BNN needs and PyMC does not default to: random initial means
(all-zero means keep hidden units identical), a small initial posterior std,
a KL weight ``beta``, optional minibatches, checkpoints and resume, and a
loss check that stops on the first non-finite value instead of returning
garbage. :func:`build_step` is the PyMC engine's set-up and compiled step.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pymc.variational as pmvi
import pytensor
from pymc.pytensorf import resolve_backend_compile_kwargs
from pymc.variational import updates
from rich.progress import MofNCompleteColumn, Progress, TextColumn

from inference import jax_fixes  # noqa: F401  (float32 stays float32 on the JAX backend)
from inference import checkpoint as ckpt
from inference import engine as engine_mod
from inference.checkpoint import FitState

METHODS = ("advi", "fullrank_advi")
ENGINES = ("jax", "pymc")
BACKENDS = ("numba", "c", "jax")
OPTIMIZERS = {
    "adam": updates.adam,
    "adamax": updates.adamax,
    "adagrad_window": updates.adagrad_window,
    "rmsprop": updates.rmsprop,
    "sgd": updates.sgd,
    "momentum": updates.momentum,
}


# Settings a resumed fit must share with its checkpoint (the backend may change).
# Of lr_decay only the part that the steps already done used must agree.
CHECKPOINT_SETTINGS = ("engine", "optimizer", "learning_rate", "lr_decay", "batch_size", "beta",
                       "kl_weighting", "mc_samples", "seed")


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
    seconds: float  # whole fit, compilation included (and earlier runs, when resumed)
    compile_seconds: float  # compilation and the first step of this run
    config: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict, repr=False)  # compiled posterior functions
    _timed: tuple[int, float] = (0, 0.0)  # this run's steps after the first, and their seconds

    @property
    def ms_per_step(self) -> float:
        """Mean wall time of this run's steps after the first, in milliseconds."""
        steps, seconds = self._timed
        return 1e3 * seconds / steps if steps else float("nan")

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


def _initial_means(group, rng: np.random.Generator) -> np.ndarray:
    """Model's initial point, plus N(0, 1/fan_in) noise on every weight matrix.

    Biases and scalars start at the initial point (biases at 0, scales at the
    hyperprior's support point). The random weights break the symmetry
    between hidden units. The initial point is the one PyMC put in the
    group's ``mu`` (``model.initial_point()`` in q's flat layout).
    """
    mu = np.asarray(group.params_dict["mu"].get_value(), dtype="float64").copy()
    for name, slc, shape, _ in group.ordering.values():
        if len(shape) >= 2:
            mu[slc] += rng.normal(0.0, 1.0 / np.sqrt(_fan_in(shape)), size=shape).ravel()
    return mu


def _family(method: str):
    return pmvi.MeanField if method == "advi" else pmvi.FullRank


def initial_params(group, method: str, init_std: float, seed: int) -> dict:
    """Initial variational parameters in PyMC's layout, in ``floatX``.

    Random means (:func:`_initial_means`) and the same std ``init_std`` for
    every coordinate: ``rho`` with std = softplus(rho) for mean-field; for
    full-rank, ``L_tril`` (L packed row-major) diagonal, whose diagonal PyMC
    also stores as rho (softplus'ed in ``FullRankGroup.L``).
    """
    dtype = pytensor.config.floatX
    mu = _initial_means(group, np.random.default_rng(seed)).astype(dtype)
    rho = np.log(np.expm1(init_std))
    if method == "advi":
        return {"mu": mu, "rho": np.full(group.ddim, rho, dtype=dtype)}
    L = rho * np.eye(group.ddim)
    return {"mu": mu, "L_tril": L[np.tril_indices(group.ddim)].astype(dtype)}


@contextlib.contextmanager
def _inputs_on_device(step_fn, backend: str):
    """Under JAX, give the step function device arrays for its read-only inputs (the data).

    Otherwise every call copies them to the device: the whole training set,
    as ``pm.Minibatch`` slices inside the compiled step. Measured on the
    MNIST CNN (50,000 images, batch 128, 2 CPU cores): 192 -> 95 ms/step.
    The NumPy arrays are put back afterwards.
    """
    held = []
    if backend == "jax":
        import jax

        for inp in step_fn.maker.inputs:
            container = inp.variable.container
            if inp.update is None and isinstance(container.storage[0], np.ndarray):
                held.append((container, container.storage[0]))
    try:
        for container, value in held:
            container.storage[0] = jax.device_put(value)
        yield
    finally:
        for container, value in held:
            container.storage[0] = value


def _progress(show: bool) -> Progress:
    return Progress(
        *Progress.get_default_columns(), MofNCompleteColumn(), TextColumn("{task.fields[elbo]}"),
        disable=not show,
    )


def build_step(
    model: pm.Model,
    *,
    method: str = "advi",
    optimizer: str = "adam",
    learning_rate: float = 1e-2,
    batch_size: int | None = None,
    data: tuple[str, ...] = ("X", "y"),
    init_std: float = 0.01,
    beta: float = 1.0,
    mc_samples: int = 1,
    backend: str = "numba",
    seed: int = 0,
    stream: int | None = None,
):
    """Set up q and compile one ADVI step; the building block of :func:`fit`.

    Arguments as in :func:`fit` (``stream`` seeds the Monte Carlo noise and
    minibatches, default ``seed``). Call it under the :func:`precision` the
    model was built in. Returns ``(inference, step_fn)``: the ``pmvi.KLqp``
    object and a compiled function that takes one optimisation step and
    returns the loss (the negative ELBO estimate).
    """
    inference = pmvi.KLqp(_family(method)(model=model, random_seed=seed if stream is None else stream),
                          beta=beta)
    group = inference.approx.groups[0]
    for name, value in initial_params(group, method, init_std, seed).items():
        group.params_dict[name].set_value(value)

    replacements = {}
    if batch_size is not None:
        _check_batches(model, data, batch_size)
        containers = [model[name] for name in data]
        batches = pm.Minibatch(*containers, batch_size=batch_size)
        if len(containers) == 1:
            batches = [batches]
        replacements = dict(zip(containers, batches))

    with warnings.catch_warnings():
        # Expected under JAX, and printed on every compile: the step function
        # keeps its own copy of the random generators, and drops pm.Minibatch's
        # shape assertion (the containers' lengths are checked above).
        warnings.filterwarnings("ignore", message="The RandomType SharedVariables")
        warnings.filterwarnings("ignore", message="Skipping Assert")
        step_fn = inference.objective.step_function(
            score=True,
            obj_n_mc=mc_samples,
            obj_optimizer=OPTIMIZERS[optimizer](learning_rate=learning_rate),
            more_replacements=replacements,
            compile_kwargs=resolve_backend_compile_kwargs(backend, None),
        )
    return inference, step_fn


class _PymcSteps:
    """The reference engine: PyMC's compiled KLqp step, called once per step from Python."""

    chunk = 10  # steps between progress updates

    def __init__(self, model, *, seed, stream, backend, batch_size, **settings):
        self.inference, self.step_fn = build_step(
            model, seed=seed, stream=stream, backend=backend, batch_size=batch_size, **settings)
        self.group = self.inference.approx.groups[0]
        self.backend = backend
        self.shared = [i.variable for i in self.step_fn.maker.inputs
                       if i.update is not None and isinstance(i.variable.get_value(), np.ndarray)]
        # PyMC divides the loss by N / batch_size; the ELBO is reported at full-data scale.
        self.scale = 1.0
        if batch_size is not None:
            self.scale = model[settings["data"][0]].get_value().shape[0] / batch_size

    def device(self):
        return _inputs_on_device(self.step_fn, self.backend)

    def advance(self, start: int, n: int) -> np.ndarray:
        return np.array([-float(self.step_fn()) * self.scale for _ in range(n)])

    def arrays(self) -> list[np.ndarray]:
        return [v.get_value() for v in self.shared]

    def load(self, arrays) -> None:
        for v, a in zip(self.shared, arrays):
            v.set_value(np.asarray(a).astype(v.get_value().dtype))

    def cache(self) -> dict:
        return {}

    def finish(self) -> pmvi.Approximation:
        for p in self.inference.approx.params:  # the JAX backend can leave device arrays behind
            p.set_value(np.asarray(p.get_value()))
        return self.inference.approx


class _JaxSteps:
    """The fast engine (:mod:`inference.engine`): many steps per call, all in JAX."""

    chunk = engine_mod.CHUNK

    def __init__(self, model, *, method, init_std, seed, **settings):
        self.approx = _family(method)(model=model, random_seed=seed)
        self.group = self.approx.groups[0]
        init = initial_params(self.group, method, init_std, seed)
        self.fit = engine_mod.JaxFit(model, self.group, init, method=method, seed=seed,
                                 dtype=pytensor.config.floatX, **settings)
        self.advance, self.arrays, self.load = self.fit.advance, self.fit.arrays, self.fit.load

    def device(self):
        return contextlib.nullcontext()

    def finish(self) -> pmvi.Approximation:
        self.fit.write_back(self.group)
        return self.approx

    def cache(self) -> dict:
        """What the posterior functions reuse: the model as compiled for the fit."""
        return {"model": self.fit.problem.density}


def fit(
    model: pm.Model,
    *,
    method: str = "advi",
    steps: int = 10_000,
    optimizer: str = "adam",
    learning_rate: float = 1e-2,
    lr_decay: Mapping[int, float] | None = None,
    batch_size: int | None = None,
    data: tuple[str, ...] = ("X", "y"),
    init_std: float = 0.01,
    beta: float = 1.0,
    kl_weighting: str = "constant",
    mc_samples: int = 1,
    engine: str = "jax",
    backend: str = "numba",
    float32: bool = False,
    seed: int = 0,
    progressbar: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 500,
    resume: str | os.PathLike | None = None,
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
    lr_decay : dict of int to float, optional
        Step decay of the learning rate (``"jax"`` engine): ``{step: factor}``
        multiplies the rate by ``factor`` from that 0-based step on, like
        optax's ``piecewise_constant_schedule`` (``{8000: 0.1}``: 10x smaller
        from step 8000). A fit resumed from a checkpoint may add or change
        the decays at steps it has not yet taken.
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
    kl_weighting : {"constant", "blundell"}
        How the KL part is spread over the minibatches of an epoch:
        ``"constant"``, equally (PyMC's ``1 / M``); ``"blundell"``, minibatch
        ``i`` of ``M`` gets ``2^(M-i) / (2^M - 1)`` (Blundell et al. 2015;
        needs ``batch_size`` and the ``"jax"`` engine). The reported ELBO is
        the same either way.
    mc_samples : int
        Monte Carlo draws of q per gradient step (more: less noisy, slower).
    engine : {"jax", "pymc"}
        ``"jax"``: :mod:`inference.engine`, the whole loop compiled to JAX
        (fast; minibatches are epochs of a random permutation).
        ``"pymc"``: the reference, PyMC's own ``KLqp`` step compiled by
        pytensor's ``backend`` and called once per step (minibatches drawn
        with replacement by ``pm.Minibatch``). Both optimise the same
        objective from the same initial parameters.
    backend : {"numba", "c", "jax"}
        pytensor backend of the ``"pymc"`` engine (the ``"jax"`` engine
        always runs in JAX).
    float32 : bool
        Fit in single precision.
    seed : int
        Seeds the initial means, the Monte Carlo noise and the minibatches.
    progressbar : bool
        Show a progress bar with the running ELBO (mean of the last 100 steps).
    checkpoint : path, optional
        Write the fit's state (variational parameters, optimizer state, ELBO
        so far) to this netCDF file every ``checkpoint_every`` steps and at
        the end, atomically.
    resume : path, optional
        Continue from a checkpoint written by a fit of the same model (and
        data shapes), engine, method and optimisation settings; the
        ``"pymc"`` engine's backend may differ. ``steps`` is the total, so
        the fit runs the remaining ones. The ``"jax"`` engine continues
        exactly as an uninterrupted fit would; the ``"pymc"`` engine restarts
        its Monte Carlo and minibatch streams from ``(seed, step)``
        (reproducible, not bit-identical).

    Returns
    -------
    FitResult
        Its ELBO trace is at the full-data scale for both engines.

    Raises
    ------
    NonFiniteLossError
        When the ELBO becomes NaN or infinite; the message names the step.
    CheckpointError
        When ``resume`` is not a checkpoint of this model, method and settings.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    valid = OPTIMIZERS if engine == "pymc" else engine_mod.OPTIMIZERS
    if optimizer not in valid:
        raise ValueError(f"unknown optimizer {optimizer!r} for engine {engine!r}; "
                         f"valid: {', '.join(valid)}")
    if steps < 1 or mc_samples < 1:
        raise ValueError(f"steps and mc_samples must be >= 1, got {steps} and {mc_samples}")
    if not (init_std > 0 and learning_rate > 0 and beta > 0):
        raise ValueError("init_std, learning_rate and beta must be positive")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    if kl_weighting not in engine_mod.KL_WEIGHTINGS:
        raise ValueError(f"unknown kl_weighting {kl_weighting!r}; "
                         f"valid: {', '.join(engine_mod.KL_WEIGHTINGS)}")
    if kl_weighting != "constant" and (engine != "jax" or batch_size is None):
        raise ValueError(f"kl_weighting={kl_weighting!r} needs minibatches (batch_size) and "
                         "the 'jax' engine")
    lr_decay = _check_lr_decay(lr_decay, engine)
    if batch_size is not None:
        _check_batches(model, data, batch_size)

    with precision(float32):
        dtype = pytensor.config.floatX
        built_as = {v.dtype for v in model.data_vars if v.dtype.startswith("float")}
        if built_as and built_as != {dtype}:
            raise ValueError(
                f"model data is {built_as.pop()} but fit runs in {dtype}: "
                f"build the model inside inference.precision(float32={float32})"
            )
        saved = ckpt.load(resume) if resume else None
        done = int(saved.attrs["steps_done"]) if saved is not None else 0
        config = dict(
            engine=engine, method=method, steps=steps, optimizer=optimizer,
            learning_rate=learning_rate, lr_decay=[list(d) for d in lr_decay],
            batch_size=batch_size, init_std=init_std, beta=beta, kl_weighting=kl_weighting,
            mc_samples=mc_samples, backend=backend if engine == "pymc" else "jax",
            float32=float32, seed=seed, resumed_at=done,
        )
        settings = dict(method=method, optimizer=optimizer, learning_rate=learning_rate,
                        batch_size=batch_size, data=data, init_std=init_std, beta=beta,
                        mc_samples=mc_samples, seed=seed)
        t0 = time.perf_counter()
        if engine == "pymc":
            # A resumed fit draws fresh Monte Carlo noise and minibatches, seeded by (seed, step).
            stream = seed if not done else int(np.random.default_rng([seed, done]).integers(2**30))
            run = _PymcSteps(model, stream=stream, backend=backend, **settings)
        else:
            run = _JaxSteps(model, kl_weighting=kl_weighting, lr_decay=lr_decay, **settings)
        state = FitState.of(run.arrays, run.load, run.group, model,
                            {k: config[k] for k in CHECKPOINT_SETTINGS})
        hist, seconds_before = np.empty(0), 0.0
        if saved is not None:
            hist, seconds_before = state.restore(saved, resume, steps=steps)
        elbo = np.full(steps, np.nan)
        elbo[:done] = hist
        first_step, i = None, done
        with _progress(progressbar) as progress, run.device():
            task = progress.add_task("ADVI", total=steps, completed=done, elbo="")
            while i < steps:
                n = 1 if first_step is None else min(run.chunk, steps - i)
                if checkpoint is not None:  # stop at every checkpoint boundary
                    n = min(n, checkpoint_every - i % checkpoint_every)
                trace = run.advance(i, n)
                bad = np.flatnonzero(~np.isfinite(trace))
                if bad.size:
                    raise NonFiniteLossError(f"ELBO is {trace[bad[0]]} at step {i + bad[0] + 1}")
                elbo[i : i + n] = trace
                i += n
                if first_step is None:
                    first_step, first_done = time.perf_counter(), i
                if checkpoint is not None and (i % checkpoint_every == 0 or i == steps):
                    state.save(checkpoint, elbo[:i], seconds_before + time.perf_counter() - t0)
                recent = elbo[max(0, i - 100) : i]
                progress.update(task, completed=i, elbo=f"ELBO {recent.mean():,.5g}")
        end = time.perf_counter()
        approx = run.finish()

    ran = steps - done
    return FitResult(
        approx=approx, model=model, elbo=elbo, method=method, backend=config["backend"],
        seconds=seconds_before + end - t0,
        compile_seconds=(first_step if ran else end) - t0, config=config, cache=run.cache(),
        _timed=(steps - first_done, end - first_step) if ran else (0, 0.0),
    )


def _check_lr_decay(lr_decay, engine: str) -> tuple[tuple[int, float], ...]:
    """``lr_decay`` as ``(step, factor)`` pairs sorted by step, checked."""
    if not lr_decay:
        return ()
    if engine != "jax":
        raise ValueError("lr_decay needs the 'jax' engine")
    for step, factor in lr_decay.items():
        if not (isinstance(step, (int, np.integer)) and step >= 1 and factor > 0
                and np.isfinite(factor)):
            raise ValueError(f"lr_decay needs integer steps >= 1 and positive factors, "
                             f"got {step!r}: {factor!r}")
    return tuple(sorted((int(step), float(factor)) for step, factor in lr_decay.items()))


def _check_batches(model: pm.Model, data: tuple[str, ...], batch_size: int) -> None:
    """The minibatched containers exist, share their length, and hold at least one batch."""
    missing = [name for name in data if name not in model.named_vars]
    if missing:
        raise ValueError(f"no data container {', '.join(missing)} in the model")
    lengths = {name: model[name].get_value().shape[0] for name in data}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"minibatch containers differ in length: {lengths}")
    n = lengths[data[0]]
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..{n}, got {batch_size}")
