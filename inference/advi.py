"""``fit``: ADVI for any PyMC model, and its result.

:func:`fit` compiles the model to JAX (:mod:`~bnn_zoo.inference.jaxmodel`),
builds the objective (:mod:`~bnn_zoo.inference.objective`) and runs the
functional core's steps (:mod:`~bnn_zoo.inference.core`) on the engine
(:mod:`~bnn_zoo.inference.engine`), with what a BNN needs and PyMC does not
default to: random initial means (all-zero means keep hidden units
identical), a small initial posterior std, a KL weight ``beta``, minibatches
from named data containers, checkpoints and resume, and a stop on the first
non-finite ELBO instead of returning garbage.

:func:`prepare` builds everything :func:`fit` builds before its first step,
for callers that drive the steps themselves (the benchmarks);
:func:`fullrank_from` starts a full-rank fit from a mean-field one.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pymc as pm
import pytensor
from rich.progress import MofNCompleteColumn, Progress, TextColumn

from bnn_zoo.inference import checkpoint as ckpt
from bnn_zoo.inference import core, estimators, families, objective, optim
from bnn_zoo.inference.diagnostics import Convergence, convergence
from bnn_zoo.inference.engine import CHUNK, Runner, compile_steps, steps_per_epoch
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.jaxmodel import Layout, ModelFunction, compile_model
from bnn_zoo.inference.minibatch import unwrap as unwrap_minibatch

__all__ = ["KL_WEIGHTINGS", "MAX_STEPS", "ConvergenceWarning", "FitResult", "NonFiniteLossError", "Setup",
           "fit", "fullrank_from", "given_initvals", "initial_mean", "precision", "prepare"]

#: The names :func:`fit`'s ``kl_weighting`` takes (besides a function of the step).
KL_WEIGHTINGS = ("constant", "blundell")
#: The most steps one fit takes: the ELBO trace is kept in memory, 8 bytes a step.
MAX_STEPS = 10**8


class NonFiniteLossError(FloatingPointError):
    """The ELBO became NaN or infinite during a fit.

    :func:`fit` raises it at the first non-finite ELBO estimate, and its
    message names the step (``"ELBO is nan at step 1234"``). A fit with
    ``checkpoint`` can be resumed from its last checkpoint, for example with
    a smaller learning rate.

    Parameters
    ----------
    *args
        The message, as for any exception.
    **kwargs
        None are accepted, as for any built-in exception.
    """


class ConvergenceWarning(UserWarning):
    """A fit ended with its ELBO still moving, or below where it had been.

    :func:`fit` warns with it when :attr:`FitResult.convergence` finds that
    the fit has not converged (:mod:`~bnn_zoo.inference.diagnostics`); the
    message says what the test found and what to try.

    Parameters
    ----------
    *args
        The message, as for any warning.
    **kwargs
        None are accepted, as for any built-in warning.
    """


@dataclass
class FitResult:
    """A fitted q, the model it approximates, and how the fit went.

    What :func:`fit` returns. q is a Gaussian over the model's
    unconstrained values, flattened as ``layout`` says; ``params`` are its
    parameters in PyMC's own layout (:mod:`~bnn_zoo.inference.families`).
    :attr:`mean`, :attr:`sd` and :meth:`cov` read them by variable,
    :meth:`to_pymc` makes a ``pymc.variational`` approximation of them,
    :func:`bnn_zoo.sample` draws from q, and :func:`bnn_zoo.predict` makes
    predictions on new data.

    Parameters
    ----------
    model : pymc.Model
        The model q approximates.
    family : Family
        q's variational family, mean-field or full-rank
        (:mod:`~bnn_zoo.inference.families`).
    layout : Layout
        Where each value variable sits in q's flat vector.
    params : dict of str to numpy.ndarray
        q's parameters: ``mu`` and ``rho`` (mean-field, ``sd =
        softplus(rho)``) or ``mu`` and ``L_tril`` (full-rank). With iterate
        averaging, their average over the averaged steps.
    elbo : numpy.ndarray
        The ELBO estimate of every step (with the KL weight ``beta``), at
        full-data scale.
    config : dict
        The fit's settings as recorded in results (method, steps, optimizer,
        batch size, ``beta``, seed, dtype, ...), and ``history``: the
        optimizer of each run, by the step it began at.
    seconds : float
        Wall time of the whole fit in seconds, compilation included, with
        the runs before a resume.
    compile_seconds : float
        Wall time of this run's compilation and first step, in seconds.
    density : ModelFunction
        The model compiled to JAX (:func:`~bnn_zoo.inference.jaxmodel.compile_model`),
        which the posterior code evaluates draws with.
    _timed : tuple of (int, float), default (0, 0.0)
        This run's steps after the first, and their wall time in seconds,
        for :attr:`ms_per_step`. Set by the fit.

    Attributes
    ----------
    method : str
        ``"advi"`` (mean-field) or ``"fullrank_advi"``.
    mean : dict of str to numpy.ndarray
        q's mean of each value variable.
    sd : dict of str to numpy.ndarray
        q's marginal standard deviation of each value variable.
    convergence : Convergence
        The convergence test of the ELBO trace.
    ms_per_step : float
        Mean wall time of this run's steps after the first, in milliseconds.
    elbo_final : float
        Mean ELBO estimate over the last 10% of the steps (at most 1000).

    See Also
    --------
    fit : What makes a ``FitResult``.
    bnn_zoo.sample : Posterior draws of q as an ArviZ DataTree.

    Examples
    --------
    >>> result = bnn_zoo.fit(model)
    >>> result.mean["W_0"]          # q's mean of a weight matrix
    >>> result.sd["scale_0_log__"]  # a positive variable's value lives on the log scale
    >>> result.convergence.converged
    >>> approx = result.to_pymc()   # a pymc.variational.MeanField
    """

    model: pm.Model
    family: Family
    layout: Layout
    params: dict[str, np.ndarray]
    elbo: np.ndarray  # per-step ELBO estimate (with the KL weight beta), full-data scale
    config: dict  # the settings, as recorded in results
    seconds: float  # whole fit, compilation included (with the runs before a resume)
    compile_seconds: float  # compilation and the first step of this run
    density: ModelFunction = field(repr=False)
    _timed: tuple[int, float] = (0, 0.0)  # this run's steps after the first, and their seconds

    @property
    def method(self) -> str:
        """The variational family's name: ``"advi"`` (mean-field) or ``"fullrank_advi"``."""
        return self.family.name

    @property
    def mean(self) -> dict[str, np.ndarray]:
        """q's mean of each value variable, by name, in the unconstrained space.

        Value variables are PyMC's: a positive variable ``s`` appears as
        ``s_log__``, on the log scale. float64 arrays of each variable's shape.
        """
        return self.layout.split(self.family.mean_and_factor(self.params)[0])

    @property
    def sd(self) -> dict[str, np.ndarray]:
        """q's marginal standard deviation of each value variable, by name (see :attr:`mean`)."""
        return self.layout.split(np.sqrt(np.diag(self.cov())) if self.method == "fullrank_advi"
                                 else self.family.mean_and_factor(self.params)[1])

    def cov(self) -> np.ndarray:
        """q's covariance matrix over the flat vector of unconstrained values.

        Returns
        -------
        numpy.ndarray
            ``(dim, dim)``, float64, diagonal for a mean-field fit. ``layout``
            says which coordinates belong to which variable
            (``layout.slots``: name, slice, shape, dtype).
        """
        return families.covariance(self.family.mean_and_factor(self.params)[1])

    def to_pymc(self):
        """q as a ``pymc.variational`` approximation with these parameters.

        Returns
        -------
        pymc.variational.approximations.MeanField or pymc.variational.approximations.FullRank
            A new approximation of ``model`` whose parameters are q's, so that
            PyMC's own tools (``approx.sample(1000)``, ...) work on the fit.

        Raises
        ------
        ValueError
            If PyMC orders the model's variables differently from ``layout``.
        """
        approx = self.family.pymc(model=self.model)
        group = approx.groups[0]
        if [(name, group.ordering[name][1]) for name in self.layout.names] != \
                [(name, slc) for name, slc, _, _ in self.layout.slots]:
            raise ValueError("PyMC orders this model's variables differently from the fit")
        for name, value in self.params.items():
            group.params_dict[name].set_value(np.asarray(value, dtype=group.params_dict[name].dtype))
        return approx

    @property
    def convergence(self) -> Convergence:
        """The convergence test of the ELBO trace (:func:`~bnn_zoo.inference.diagnostics.convergence`).

        A fit started from another (``init=``) at the same ``beta`` is also
        tested against that fit's final ELBO, which it should not end below.
        """
        return convergence(self.elbo, start=self.config.get("init_elbo_final"))

    @property
    def ms_per_step(self) -> float:
        """Mean wall time of this run's steps after the first, in milliseconds (NaN without any)."""
        steps, seconds = self._timed
        return 1e3 * seconds / steps if steps else float("nan")

    @property
    def elbo_final(self) -> float:
        """Mean ELBO estimate over the last 10% of the steps (at most 1000 steps)."""
        tail = max(1, min(1000, len(self.elbo) // 10))
        return float(np.mean(self.elbo[-tail:]))


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
    >>> from bnn_zoo.models import mlp_classifier
    >>> with bnn_zoo.precision(float32=True):
    ...     model = mlp_classifier(X, y, hidden=(400, 400))
    >>> result = bnn_zoo.fit(model, batch_size=128)   # fitted in float32
    """
    with pytensor.config.change_flags(floatX="float32" if float32 else "float64"):
        yield


def model_dtype(model: pm.Model) -> str:
    """The float dtype of the model's value variables (all must share it)."""
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


def _fan_in(shape: tuple) -> int:
    # Dense weights are (in, out) and conv kernels (kh, kw, in, out): the fan-in
    # is the product of all but the last axis.
    return int(np.prod(shape[:-1]))


def given_initvals(model: pm.Model) -> frozenset:
    """The value variables whose initial value the model sets (``initval=``), by name.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    frozenset of str
        Their value variables' names (``sigma_log__`` for a transformed ``sigma``).
    """
    return frozenset(model.rvs_to_values[rv].name for rv, value in model.rvs_to_initial_values.items()
                     if value is not None and rv in model.free_RVs)


def initial_mean(layout: Layout, point: dict, seed: int, given: frozenset = frozenset()) -> np.ndarray:
    """q's initial mean: the model's initial point, plus N(0, 1/fan_in) noise on every weight matrix.

    Every value variable of two or more axes counts as a weight matrix
    (dense ``(in, out)``, convolution ``(kh, kw, in, out)``); its fan-in is
    the product of all but its last axis. Biases and scalars start at the
    initial point (biases at 0, scales at the hyperprior's initial value).
    The random weights break the symmetry between hidden units, which
    all-zero means would keep identical. A variable whose initial value the
    model gives (``initval=``, named in ``given``) starts exactly there.

    Parameters
    ----------
    layout : Layout
        The flat vector's layout (:meth:`Layout.of <bnn_zoo.inference.jaxmodel.Layout.of>`).
    point : dict of str to numpy.ndarray
        The model's initial point, ``model.initial_point()``.
    seed : int
        Seeds the noise; :func:`fit` passes its own ``seed``.
    given : frozenset of str, default frozenset()
        Value variables whose initial value the model gives
        (:func:`given_initvals`): no noise on them.

    Returns
    -------
    numpy.ndarray
        The flat float64 mean, ``(layout.dim,)``.
    """
    rng = np.random.default_rng(seed)
    mu = layout.flatten(point)
    for name, slc, shape, _ in layout.slots:
        if len(shape) >= 2 and name not in given:
            mu[slc] += rng.normal(0.0, 1.0 / np.sqrt(_fan_in(shape)), size=shape).ravel()
    return mu


def _progress(show: bool) -> Progress:
    return Progress(
        *Progress.get_default_columns(), MofNCompleteColumn(), TextColumn("{task.fields[elbo]}"),
        disable=not show,
    )


def fit(
    model: pm.Model,
    *,
    method: str = "advi",
    steps: int = 20_000,
    optimizer: optax.GradientTransformation | None = None,
    batch_size: int | None = None,
    minibatch: Sequence[str] | None = None,
    init_std: float = 0.01,
    init: FitResult | None = None,
    beta: float = 1.0,
    kl_weighting: str | Callable = "constant",
    mc_samples: int = 1,
    estimator: str = "weights",
    path_derivative: bool | None = None,
    average: float = 0.5,
    warm_start: float = 0.3,
    seed: int = 0,
    progressbar: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 500,
    resume: str | os.PathLike | None = None,
) -> FitResult:
    """Fit a mean-field or full-rank Gaussian approximation to ``model``'s posterior by ADVI.

    q is a Gaussian over the model's unconstrained values (the space of
    PyMC's value variables), fitted by maximising the ELBO with
    reparameterised gradients: PyMC's ``KLqp`` objective, compiled with the
    model and the whole optimisation to JAX. The fit stops at the first
    non-finite ELBO estimate, can write checkpoints and resume from them,
    and tests its ELBO trace for convergence at the end.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables of one float dtype. It
        is fitted in the dtype it was built in (build it inside
        :func:`precision` for float32).
    method : {"advi", "fullrank_advi"}, default "advi"
        Mean-field (diagonal) or full-rank Gaussian q.
    steps : int, default 20000
        Optimisation steps, at most :data:`MAX_STEPS` (the total, when
        resuming).
    optimizer : optax.GradientTransformation, optional
        Any optax optimizer; learning-rate schedules are optax schedules
        (``optax.adam(optax.cosine_decay_schedule(0.01, steps))``). Default:
        Adam at a constant 0.01, with ``average``.
    batch_size : int, optional
        Minibatch size; ``None`` (default) uses the full data every step.
        Each epoch of ``N // batch_size`` steps walks a fresh random
        permutation of the rows (the remainder is skipped). The observed
        variables must carry ``total_size`` for the likelihood to stay at
        full-data scale (the zoo's builders set it). A model written with
        ``pm.Minibatch`` needs neither this nor ``minibatch``: it is fitted
        with its own batch size, the arrays given to ``pm.Minibatch`` in data
        containers ``minibatch_0``, ``minibatch_1``, ...
        (:func:`~bnn_zoo.inference.minibatch.unwrap`), and the result's
        ``model`` is that model, for predictions on new data.
    minibatch : sequence of str, optional
        The ``pm.Data`` containers cut into minibatches, rows taken together;
        default every container of the model. They must have the same
        number of rows. Only with ``batch_size``.
    init_std : float, default 0.01
        Initial posterior sd of every unconstrained variable. PyMC's default
        (about 0.7) makes wide nets diverge (docs/user_guide/engine.md).
    init : FitResult, optional
        Start at another fit's q instead: its means and marginal sds (a
        full-rank fit started from a mean-field one begins with a diagonal
        factor). The model must have the same variables and shapes.
    beta : float, default 1.0
        KL weight: maximises ``E_q[log p(D|w)] - beta * KL(q || prior)``.
    kl_weighting : {"constant", "blundell"} or callable, default "constant"
        How the KL part is spread over an epoch's minibatches: a function of
        the step ``t`` that scales it in the loss (not in the reported ELBO).
        ``"constant"``: equally; ``"blundell"``: Blundell et al.'s (2015)
        ``2^(M-i) / (2^M - 1)`` (:func:`~bnn_zoo.inference.objective.blundell`;
        needs ``batch_size``).
    mc_samples : int, default 1
        Monte Carlo draws of q per gradient step.
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        How the expected log likelihood's gradient is estimated
        (:mod:`~bnn_zoo.inference.estimators`): from the step's weight draw,
        shared by the minibatch, or with each example's own noise in the
        dense layers (local reparameterisation, Kingma et al. 2015; Flipout,
        Wen et al. 2018). Same objective and less gradient noise, at the
        cost of a second matrix product per dense layer. Mean-field only.
    path_derivative : bool, optional
        The "sticking the landing" gradient of the entropy term (Roeder et
        al. 2017): the same expectation, zero variance where q is the
        posterior, far more where q is much narrower than it. Default: on for
        a full-rank fit from a mean-field warm start, off otherwise.
    average : float, default 0.5
        Share of the final steps whose iterates are averaged into the result
        (Polyak-Ruppert): 0.5 returns q's parameters averaged over the last
        half of the steps, whose noise shrinks with the number averaged. Use
        0 with a learning-rate schedule that decays to near zero. In [0, 1).
    warm_start : float, default 0.3
        For ``method="fullrank_advi"``: the share of the steps spent on a
        mean-field fit first, where the full-rank fit then starts, with the
        path-derivative gradient (0: full-rank from ``init_std``). Each phase
        starts the optimizer afresh; the default one is Adam at 0.01 for the
        mean-field phase and at 0.001 for the full-rank one. Not with
        ``checkpoint``, ``resume`` or ``init``. In [0, 1).
    seed : int, default 0
        Seeds the initial means, the Monte Carlo noise and the minibatches.
    progressbar : bool, default True
        Show a progress bar with the running ELBO (mean of the last 100 steps).
    checkpoint : str or os.PathLike, optional
        Write the fit's state to this netCDF file every ``checkpoint_every``
        steps and at the end, atomically (:mod:`~bnn_zoo.inference.checkpoint`).
    checkpoint_every : int, default 500
        Steps between checkpoints.
    resume : str or os.PathLike, optional
        Continue from a checkpoint of this model, data and settings (any
        optimizer of the same state structure: the change is recorded in
        ``config["history"]``). With the same optimizer the fit continues
        exactly as an uninterrupted one would.

    Returns
    -------
    FitResult
        q's parameters, the ELBO trace, the settings and the timings. Its
        :attr:`~FitResult.convergence` tests the ELBO trace.

    Raises
    ------
    ValueError
        For bad arguments, naming the argument; for a model without
        continuous value variables of one float dtype, or whose float data
        has another dtype than its variables.
    NonFiniteLossError
        When the ELBO becomes NaN or infinite; the message names the step.
    CheckpointError
        When ``resume`` is missing, unreadable, not a checkpoint of this fit
        (model, data or settings), or has more steps than ``steps``.

    Warns
    -----
    ConvergenceWarning
        When the fit has not converged (:attr:`FitResult.convergence`): its
        ELBO still moves across the final window, or ended below where it
        had been. The message says what to try.

    See Also
    --------
    bnn_zoo.sample : Posterior draws of the fitted q, as an ArviZ DataTree.
    bnn_zoo.predict : The posterior predictive on new data.
    bnn_zoo.inference.batch.fit_many : Many fits of one model structure at once.

    Examples
    --------
    >>> import bnn_zoo
    >>> from bnn_zoo.data import toy
    >>> from bnn_zoo.models import mlp_classifier
    >>> data = toy.load("moons", noise=0.2, seed=0)
    >>> model = mlp_classifier(data.X_train, data.y_train, hidden=(5, 5))
    >>> result = bnn_zoo.fit(model, steps=10_000)
    >>> result.mean["W_0"].shape
    (2, 5)

    Full-rank q, an optax schedule, or minibatches with Blundell et al.'s KL
    weighting:

    >>> import optax
    >>> result = bnn_zoo.fit(model, method="fullrank_advi")
    >>> result = bnn_zoo.fit(model, optimizer=optax.adam(optax.cosine_decay_schedule(0.05, 10_000)),
    ...                      steps=10_000, average=0)
    >>> result = bnn_zoo.fit(model, batch_size=100, kl_weighting="blundell")
    """
    model, batch_size, minibatch = unwrap_minibatch(model, batch_size, minibatch)
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    if not 0 <= warm_start < 1:
        raise ValueError(f"warm_start must be in [0, 1), got {warm_start!r}")
    if method == "fullrank_advi" and warm_start > 0 and init is None:
        if checkpoint is not None or resume is not None:
            raise ValueError("a full-rank fit with a warm start cannot checkpoint or resume: "
                             "fit mean-field first and pass it as init=, or warm_start=0")
        return _warm_started(model, steps=steps, warm_start=warm_start, optimizer=optimizer,
                             path_derivative=path_derivative, seed=seed, progressbar=progressbar,
                             batch_size=batch_size, minibatch=minibatch, init_std=init_std, beta=beta,
                             kl_weighting=kl_weighting, mc_samples=mc_samples, average=average,
                             estimator=estimator)
    path_derivative = bool(path_derivative)
    t0 = time.perf_counter()
    saved = ckpt.load(resume) if resume else None
    done = saved.steps_done if saved is not None else 0
    if done > steps:
        raise ckpt.CheckpointError(f"checkpoint {resume} has {done} steps, more than the "
                                   f"{steps} asked for")
    setup = prepare(model, method=method, steps=steps, optimizer=optimizer, batch_size=batch_size,
                    minibatch=minibatch, init_std=init_std, init=init, beta=beta,
                    kl_weighting=kl_weighting, mc_samples=mc_samples, estimator=estimator,
                    path_derivative=path_derivative, average=average, seed=seed)
    state, runner, description = setup.state, setup.runner, optim.describe(setup.optimizer)
    with pytensor.config.change_flags(floatX=setup.dtype):
        history = [[0, description]]
        seconds_before, elbo = 0.0, np.full(steps, np.nan)
        if saved is not None:
            state = saved.restore(state, setup.fingerprint)
            began = [f for f in (saved.average_from, setup.average_from) if f is not None and f < done]
            if len(began) == 2 and began[0] != began[1]:
                raise ckpt.CheckpointError(
                    f"checkpoint {resume} averages its iterates from step {saved.average_from}, "
                    f"these settings from step {setup.average_from}: a running mean cannot change "
                    "its start once begun (keep the total steps, or set average=0)")
            history = saved.history + ([[done, description]]
                                       if done < steps and saved.history[-1][1] != description else [])
            elbo[:done], seconds_before = saved.elbo, saved.seconds
        first_step, first_done, i = None, done, done
        with _progress(progressbar) as progress:
            task = progress.add_task("ADVI", total=steps, completed=done, elbo="")
            while i < steps:
                k = 1 if first_step is None else min(CHUNK, steps - i)
                if checkpoint is not None:  # stop at every checkpoint boundary
                    k = min(k, checkpoint_every - i % checkpoint_every)
                state, trace = runner.advance(state, i, k)
                bad = np.flatnonzero(~np.isfinite(trace))
                if bad.size:
                    raise NonFiniteLossError(f"ELBO is {trace[bad[0]]} at step {i + bad[0] + 1}")
                elbo[i : i + k] = trace
                i += k
                if first_step is None:
                    first_step, first_done = time.perf_counter(), i
                if checkpoint is not None and (i % checkpoint_every == 0 or i == steps):
                    ckpt.save(checkpoint, state, elbo=elbo[:i],
                              seconds=seconds_before + time.perf_counter() - t0,
                              fingerprint_=setup.fingerprint, history=history,
                              average_from=setup.average_from)
                recent = elbo[max(0, i - 100) : i]
                progress.update(task, completed=i, elbo=f"ELBO {recent.mean():,.5g}")
        end = time.perf_counter()

    config = dict(setup.settings, steps=steps, optimizer=description, history=history, resumed_at=done)
    if init is not None and init.config.get("beta") == beta:  # the same objective: a level to keep
        config["init_elbo_final"] = init.elbo_final
    ran = steps - done
    result = FitResult(
        model=model, family=setup.family, layout=setup.layout,
        params={k: np.asarray(v) for k, v in state.fitted.items()},
        elbo=elbo, config=config,
        seconds=seconds_before + end - t0, compile_seconds=(first_step if ran else end) - t0,
        density=setup.density, _timed=(steps - first_done, end - first_step) if ran else (0, 0.0),
    )
    check = result.convergence
    if not check.converged:
        warnings.warn(f"the fit did not converge: {check.describe()}; {check.hint()}",
                      ConvergenceWarning, stacklevel=2)
    return result


def _warm_started(model, *, steps, warm_start, path_derivative, **settings) -> FitResult:
    """A full-rank fit started from a mean-field fit of the first ``warm_start`` of the steps.

    From a narrow start full-rank ADVI is slow and unstable; from the
    mean-field optimum, with the path-derivative gradient, it reaches the
    exact posterior of the conjugate regression (docs/user_guide/engine.md).
    Its ELBO trace is the full-rank phase's; ``config`` records the
    mean-field phase's steps and final ELBO.
    """
    n_warm = max(1, int(round(warm_start * steps)))
    if n_warm >= steps:
        raise ValueError(f"steps={steps} leave no full-rank steps after a warm start of {n_warm}")
    with warnings.catch_warnings():  # the mean-field phase is not the result
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm = fit(model, method="advi", steps=n_warm, path_derivative=False, warm_start=0, **settings)
    if settings["optimizer"] is None:  # the full-rank phase's default: ten times smaller steps
        settings = dict(settings, optimizer=optim.make("adam", 1e-3, steps - n_warm))
    full = fullrank_from(model, warm, steps=steps - n_warm,
                         path_derivative=True if path_derivative is None else path_derivative, **settings)
    full.config = dict(full.config, init_std=settings["init_std"])
    return full


def fullrank_from(model: pm.Model, warm: FitResult, **settings) -> FitResult:
    """A full-rank fit started at the mean-field fit ``warm``.

    What :func:`fit` does after its mean-field warm start, for a caller
    that already has the mean-field fit (and may use it on its own too).

    Parameters
    ----------
    model : pymc.Model
        The model ``warm`` was fitted to (the same variables and shapes).
    warm : FitResult
        The fit whose means and marginal sds the full-rank q starts from.
    **settings
        Further arguments of :func:`fit` (``steps``, ``optimizer``,
        ``path_derivative``, ...), except ``method``, ``init`` and
        ``warm_start``.

    Returns
    -------
    FitResult
        The full-rank fit. Its ``seconds`` include ``warm``'s, and its
        ``config`` records ``warm``'s steps (``warm_start``) and final ELBO
        (``warm_start_elbo_final``).

    Raises
    ------
    ValueError, NonFiniteLossError
        As :func:`fit`.
    """
    full = fit(model, method="fullrank_advi", init=warm, warm_start=0, **settings)
    full.seconds += warm.seconds
    full.config = dict(full.config, warm_start=len(warm.elbo), warm_start_elbo_final=warm.elbo_final)
    return full


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
        The state before the first step (:func:`bnn_zoo.inference.core.init`).
    runner : Runner
        Runs the compiled steps on the fit's data (:class:`~bnn_zoo.inference.engine.Runner`).
    settings : dict
        What defines the objective, as recorded in results; part of the fingerprint.
    fingerprint : str
        The fit's checkpoint fingerprint (:func:`~bnn_zoo.inference.checkpoint.fingerprint`).
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


def prepare(model: pm.Model, *, method: str = "advi", steps: int = 10_000,
            optimizer: optax.GradientTransformation | None = None, batch_size: int | None = None,
            minibatch: Sequence[str] | None = None, init_std: float = 0.01,
            init: FitResult | None = None, beta: float = 1.0,
            kl_weighting: str | Callable = "constant", mc_samples: int = 1, estimator: str = "weights",
            path_derivative: bool = False, average: float = 0.0, seed: int = 0) -> Setup:
    """Everything :func:`fit` builds before its first step.

    ``setup.runner.advance(setup.state, 0, k)`` then takes ``k`` steps: what
    :func:`fit` loops over, and what the benchmarks time. Unlike :func:`fit`,
    no warm start, checkpoints or progress bar, and the defaults of
    ``steps``, ``path_derivative`` and ``average`` differ.

    Parameters
    ----------
    model : pymc.Model
        The model to fit.
    method : {"advi", "fullrank_advi"}, default "advi"
        The variational family.
    steps : int, default 10000
        The steps the fit will take (for the default optimizer and the
        averaging's start).
    optimizer : optax.GradientTransformation, optional
        Default: Adam at a constant 0.01.
    batch_size : int, optional
        Minibatch size; ``None`` for the full data.
    minibatch : sequence of str, optional
        The data containers cut into minibatches (default: all).
    init_std : float, default 0.01
        Initial posterior sd of every unconstrained variable.
    init : FitResult, optional
        Start at another fit's means and marginal sds.
    beta : float, default 1.0
        KL weight.
    kl_weighting : {"constant", "blundell"} or callable, default "constant"
        The KL part's weight as a function of the step.
    mc_samples : int, default 1
        Monte Carlo draws per step.
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        The likelihood's gradient estimator.
    path_derivative : bool, default False
        The "sticking the landing" entropy gradient.
    average : float, default 0.0
        Share of the final steps whose iterates are averaged.
    seed : int, default 0
        Seeds the initial means, the noise and the minibatches.

    Returns
    -------
    Setup
        The compiled model, the initial state and the runner.

    Raises
    ------
    ValueError
        For bad arguments, as :func:`fit`.

    See Also
    --------
    fit : The same arguments, in detail.
    """
    family = families.get(method)
    check_estimator(estimator, method)
    average_from, optimizer = checked_settings(steps=steps, mc_samples=mc_samples, init_std=init_std,
                                               beta=beta, average=average, optimizer=optimizer)
    dtype = model_dtype(model)
    sliced, n = _minibatch(model, minibatch, batch_size)
    kl_weight, kl_key = _kl_weighting(kl_weighting, batch_size, steps_per_epoch(n, batch_size))
    with pytensor.config.change_flags(floatX=dtype):
        point = model.initial_point()
        layout = Layout.of(model, point)
        density = compile_model(model, layout)
        if init is None:
            mean, sd = initial_mean(layout, point, seed, given_initvals(model)), np.float64(init_std)
        else:
            if [(n, s) for n, _, s, _ in init.layout.slots] != [(n, s) for n, _, s, _ in layout.slots]:
                raise ValueError("init must be a fit of a model with the same variables and shapes")
            mean, sd = init.family.mean_and_factor(init.params)[0], np.sqrt(np.diag(init.cov()))
        params = {k: jnp.asarray(v, dtype) for k, v in family.init(mean.astype(dtype), sd).items()}
        state = core.init(params, optimizer, average=average > 0)
        settings = dict(method=method, batch_size=batch_size, minibatch=sorted(
            name for name, cut in zip((v.name for v in model.data_vars), sliced) if cut),
            beta=beta, kl_weighting=kl_key if isinstance(kl_key, str) else "custom",
            mc_samples=mc_samples, estimator=estimator, path_derivative=path_derivative, seed=seed, dtype=dtype,
            init_std=init_std if init is None else "from another fit", average=average)
        fingerprint = ckpt.fingerprint(model, layout, state, settings)
        data = tuple(jax.device_put(v.get_value()) for v in model.data_vars)
        steps_fns = compiled_steps(density, family, optimizer, sliced=sliced, n=n, batch_size=batch_size,
                                   beta=beta, mc_samples=mc_samples, dtype=dtype, kl_weight=kl_weight,
                                   kl_key=kl_key, path_derivative=path_derivative, average_from=average_from,
                                   estimator=estimator, model=model, shapes=tuple((d.shape, str(d.dtype)) for d in data))
    return Setup(model=model, family=family, layout=layout, density=density, optimizer=optimizer,
                 state=state, runner=Runner(steps_fns, data, seed), settings=settings,
                 fingerprint=fingerprint, dtype=dtype, average_from=average_from)


def check_estimator(estimator: str, method: str) -> None:
    """Raise a ``ValueError`` unless ``estimator`` is known and fits ``method``."""
    if estimator not in estimators.ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; valid: {', '.join(estimators.ESTIMATORS)}")
    if estimator != "weights" and method != "advi":
        raise ValueError(f"estimator={estimator!r} needs mean-field q (method='advi'), got method={method!r}")


def checked_settings(*, steps, mc_samples, init_std, beta, average, optimizer):
    """``(average_from, optimizer)`` after checking the fit's settings: the step from which the
    iterates are averaged (``None``: no averaging), and the optimizer (Adam 0.01 by default)."""
    if not (isinstance(steps, (int, np.integer)) and 1 <= steps <= MAX_STEPS):
        raise ValueError(f"steps must be an integer in 1..{MAX_STEPS:,}, got {steps!r}")
    if not (isinstance(mc_samples, (int, np.integer)) and mc_samples >= 1):
        raise ValueError(f"mc_samples must be an integer >= 1, got {mc_samples!r}")
    for name, value in (("init_std", init_std), ("beta", beta)):
        if not (value > 0 and np.isfinite(value)):
            raise ValueError(f"{name} must be positive and finite, got {value!r}")
    if not 0 <= average < 1:
        raise ValueError(f"average must be in [0, 1), got {average!r}")
    if optimizer is None:
        optimizer = optim.make("adam", 1e-2, steps)
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(f"optimizer must be an optax GradientTransformation, got {optimizer!r}")
    return (steps - int(round(average * steps)) if average else None), optimizer


def compiled_steps(density: ModelFunction, family: Family, optimizer, *, sliced: tuple, n: int,
                   batch_size: int | None, beta: float, mc_samples: int, dtype: str, kl_weight: Callable,
                   kl_key, path_derivative: bool, average_from: int | None, shapes: tuple,
                   estimator: str = "weights", model: pm.Model | None = None) -> dict:
    """:func:`~bnn_zoo.inference.engine.compile_steps`' runners for this objective, optimizer and
    one fit's data ``shapes``, built once and kept in ``density.jitted`` (a fit alone and
    :func:`~bnn_zoo.inference.batch.fit_many` share them)."""
    key = ("fit", family.name, _key(optimizer), sliced, batch_size, beta, mc_samples, dtype, kl_key,
           path_derivative, average_from, shapes, estimator)
    if key not in density.jitted:
        likelihood = None if estimator == "weights" else estimators.compile_likelihood(
            model, density.layout, estimator)
        elbo = objective.ELBO(density, family, beta=beta, scale=n / batch_size if batch_size else 1.0,
                              path_derivative=path_derivative, likelihood=likelihood)
        density.jitted[key] = compile_steps(elbo, optimizer, sliced=sliced, n=n, batch_size=batch_size,
                                            mc_samples=mc_samples, kl_weight=kl_weight, dtype=dtype,
                                            average_from=average_from or 0)
    return density.jitted[key]


def _key(optimizer) -> object:
    """What identifies the optimizer's computation: its description, or the object itself."""
    return optimizer.description if isinstance(optimizer, optim.Described) else optimizer


def _kl_weighting(kl_weighting, batch_size, per_epoch) -> tuple[Callable, object]:
    """``(kl_weight(t), key)`` from ``fit``'s ``kl_weighting``."""
    if callable(kl_weighting):
        return kl_weighting, kl_weighting
    if kl_weighting not in KL_WEIGHTINGS:
        raise ValueError(f"unknown kl_weighting {kl_weighting!r}; valid: "
                         f"{', '.join(KL_WEIGHTINGS)} or a function of the step")
    if kl_weighting == "constant":
        return objective.constant(), "constant"
    if batch_size is None:
        raise ValueError("kl_weighting='blundell' needs minibatches (batch_size)")
    return objective.blundell(per_epoch), f"blundell({per_epoch})"


def _minibatch(model: pm.Model, minibatch, batch_size) -> tuple[tuple[bool, ...], int]:
    """Which data containers are cut into minibatches, and their length (0 without minibatches)."""
    containers = list(model.data_vars)
    names = [c.name for c in containers]
    if batch_size is None:
        if minibatch:
            raise ValueError("minibatch names containers to cut, but batch_size is None")
        return tuple(False for _ in containers), 0
    chosen = list(names if minibatch is None else minibatch)
    missing = [name for name in chosen if name not in names]
    if missing or not chosen or len(set(chosen)) < len(chosen):
        raise ValueError(f"minibatch must name distinct data containers of the model "
                         f"({', '.join(names) or 'none'}), got {list(chosen)}")
    lengths = {c.name: c.get_value().shape[0] for c in containers if c.name in chosen}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"minibatch containers differ in length: {lengths}; name the ones to cut")
    n = next(iter(lengths.values()))
    if not (isinstance(batch_size, (int, np.integer)) and 1 <= batch_size <= n):
        raise ValueError(f"batch_size must be an integer in 1..{n}, got {batch_size!r}")
    return tuple(c.name in chosen for c in containers), n
