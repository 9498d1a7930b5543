r"""The Laplace approximation: a Gaussian at the posterior's mode, from the curvature there.

:func:`fit_laplace` finds the mode of the log density in the unconstrained
space (L-BFGS, from the same random initial means as :func:`bnn_zoo.fit`;
then, with the dense curvature, trust-region Newton steps on the exact
Hessian wherever L-BFGS stopped short of a curved mode, as it does on a
badly scaled regression, where its relative-change stop can leave it
nats below) and returns q = N(mode, H^{-1}), ``H`` the negative Hessian of the log
density at the mode, as a :class:`~bnn_zoo.inference.posterior.result.FitResult`, so
that :func:`bnn_zoo.sample`, :func:`bnn_zoo.predict` and :func:`bnn_zoo.loo`
take it unchanged. Two curvatures (:class:`Laplace`):

- ``"hessian"``: the dense Hessian, ``dim`` Hessian-vector products and a
  ``dim x dim`` matrix, up to :data:`DENSE_MAX` values;
- ``"lowrank"``: the ``rank`` largest eigenpairs of ``H`` by Lanczos
  (Hessian-vector products only), the rest of the spectrum replaced by its
  mean, estimated by Hutchinson's trace estimator: covariance
  ``c^{-1} I + U (Lambda^{-1} - c^{-1}) U^T``, ``O(dim rank)`` memory.

The fit tests whether L-BFGS reached the mode (a
:class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`, ``FitResult.convergence``):
the gradient there small on the posterior's own scale, the Hessian positive
definite (:mod:`~bnn_zoo.inference.diagnostics.convergence`), and warns with a
:class:`LaplaceWarning` (a ``ConvergenceWarning``) when it did not. Where the
point is not a strict maximum (a network's saddle, an optimiser stopped
early) the Hessian has negative eigenvalues, and q takes their absolute
values (the saddle-free Newton of Dauphin et al. 2014); along a flat
direction (an improper posterior, an unidentified model) q's sd is set by
round-off, and the warning names the variables that span it.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
import pytensor
import scipy.optimize
import scipy.sparse.linalg
import threadpoolctl

from bnn_zoo.inference import families
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.diagnostics.modecheck import MODE_NATS, ModeCheck, flat_tolerance, mode_check
from bnn_zoo.inference.compile.jaxmodel import Layout, compile_model
from bnn_zoo.inference.methods import Laplace
from bnn_zoo.inference.compile.minibatch import unwrap as unwrap_minibatch
from bnn_zoo.inference.advi.prepare import check_steps, model_dtype
from bnn_zoo.inference.advi.starts import given_initvals, initial_mean
from bnn_zoo.inference.posterior.result import ConvergenceWarning, FitResult, NonFiniteLossError, warn_unless_converged

__all__ = ["DENSE_MAX", "DISTINCT", "HUTCHINSON_PROBES", "JITTER", "LBFGS_BLAS_THREADS", "NEWTON_STEPS",
           "LaplaceWarning", "fit_laplace"]

#: The most unconstrained values for the dense Hessian (a 4,000 x 4,000 float64 matrix is 128 MB).
DENSE_MAX = 4000
#: The most trust-region Newton steps after L-BFGS, where it stopped short of a curved mode (dense curvature).
NEWTON_STEPS = 50
#: BLAS threads of the L-BFGS search (``None``: the process's own): one, since its arithmetic is too
#: small for threads to gain and they wait on each other where the cores are busy (:func:`_lbfgs`).
LBFGS_BLAS_THREADS = 1
#: Rademacher probes of Hutchinson's estimate of the Hessian's trace (the low-rank curvature).
HUTCHINSON_PROBES = 64
#: The further starts of the search for other modes: ``uniform(-JITTER, JITTER)`` added to every
#: unconstrained value of the initial point (Stan's and Pathfinder's initial points are drawn so).
JITTER = 2.0
#: Two modes are one where each lies within this many of the other's posterior sds (in its curvature's metric).
DISTINCT = 4.0


class LaplaceWarning(ConvergenceWarning):
    """The Laplace approximation did not pass its test: L-BFGS stopped short of a mode, at a saddle or flat.

    A :class:`~bnn_zoo.inference.posterior.result.ConvergenceWarning`, so that one
    filter silences every method's; the message says what the test
    (:class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`) found.
    """


def _check(spec: Laplace, dim: int) -> tuple[str, int]:
    curvature = spec.curvature if spec.curvature != "auto" else ("hessian" if dim <= DENSE_MAX else "lowrank")
    if curvature == "hessian" and dim > DENSE_MAX:
        raise ValueError(f"Laplace(curvature='hessian') needs a dense {dim} x {dim} Hessian "
                         f"({8 * dim * dim / 2**30:.1f} GiB), above DENSE_MAX = {DENSE_MAX} values: use "
                         "bnn_zoo.Laplace(curvature='lowrank') or method='lowrank_advi'")
    if curvature == "hessian":
        return curvature, families.default_rank(dim) if spec.rank is None else spec.rank
    return curvature, families.resolve_rank(spec.rank, dim, "Laplace", "curvature='hessian' for all of them")


def fit_laplace(model: pm.Model, spec: Laplace = Laplace(), *, steps: int = 20_000,
                random_seed: int = 0) -> FitResult:
    """The Laplace approximation of ``model``'s posterior in the unconstrained space.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables (a ``pm.Minibatch``
        model is taken at its full data).
    spec : Laplace, default Laplace()
        The curvature and rank.
    steps : int, default 20000
        L-BFGS's most iterations to the mode, in ``1..MAX_STEPS`` (ADVI's
        check, :func:`~bnn_zoo.inference.advi.prepare.check_steps`).
    random_seed : int, default 0
        Seeds the initial point (as :func:`bnn_zoo.fit`'s initial means)
        and the trace estimator's probes.

    Returns
    -------
    FitResult
        ``method`` ``"laplace"``; a full-rank q (dense Hessian) or a
        low-rank one. Its ``elbo`` holds the log density at the start and
        at each L-BFGS iteration (not an ELBO: its ``elbo_final`` is NaN),
        its ``convergence`` the test of the mode
        (:class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`).

    Raises
    ------
    ValueError
        For ``steps`` out of range, a discrete free variable, a curvature
        too large for the model, or a rank out of range, before any work.
    NonFiniteLossError
        When the log density is not finite where L-BFGS stopped.

    Warns
    -----
    LaplaceWarning
        A ``ConvergenceWarning``, when the fit did not pass its test.
    """
    check_steps(steps)
    model = unwrap_minibatch(model, None, None)[0]
    discrete = [rv.name for rv in model.free_RVs if not model.rvs_to_values[rv].dtype.startswith("float")]
    if discrete:
        raise ValueError(f"free variable {discrete[0]!r} is discrete: the Laplace approximation needs a "
                         "continuous posterior (marginalise it out, or use pm.sample)")
    dtype = model_dtype(model)
    t0 = time.perf_counter()
    with pytensor.config.change_flags(floatX=dtype):
        point = model.initial_point()
        layout = Layout.of(model, point)
        curvature, rank = _check(spec, layout.dim)
        density = compile_model(model, layout)
        data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)

        log_p = density.flat_log_p(data, dtype)
        # The data as arguments, and the programs kept with the compiled model: a model of the same
        # structure on other data (a second fit in the process) traces and compiles nothing again.
        value_and_grad, hessian_on = _programs(density, dtype)

        def objective(z):
            value, grad = value_and_grad(jnp.asarray(z, dtype), data)
            return float(value), np.asarray(grad, dtype="float64")

        start = initial_mean(layout, point, random_seed, given_initvals(model)).astype("float64")
        trace = [-objective(start)[0]]  # the log density at the start and at each iteration

        def record(intermediate_result):  # scipy passes each iteration's result by this name
            trace.append(-float(intermediate_result.fun))

        newton_steps, modes = 0, None
        if curvature == "hessian":
            def hessian(z):
                return hessian_on(z, data)

            found, lam, V, newton_steps = _climb(objective, hessian, start, steps, dtype, record)
            if spec.starts > 1:
                modes = _modes(objective, hessian, start, (found, lam, V), spec.starts, steps, dtype, random_seed)
                if modes and modes[0]["log_p"] > -found.fun + MODE_NATS:  # a higher mode than the first start's
                    found, lam, V = modes[0]["found"], modes[0]["lam"], modes[0]["V"]
            rest = None
            family, factor = families.FULL_RANK, _dense_factor(lam, V)
        else:
            found = _lbfgs(objective, start, steps, record)
            lam, V, rest = _low_rank(lambda z: -log_p(z), found.x, rank, random_seed, dtype)
            family, factor = families.LOW_RANK_EIGEN, _low_rank_factor(lam, V, rest)
        check = _mode_check(-np.asarray(found.jac, dtype="float64"), lam, V, rest, layout, dtype, found)
    params = family.from_factor(found.x.astype(dtype), factor)
    config = dict(method="laplace", curvature=curvature, rank=rank if curvature == "lowrank" else None,
                  steps=int(found.nit), newton_steps=newton_steps, seed=random_seed, dtype=dtype)
    if modes is not None:
        config["modes"] = [{key: m[key] for key in ("z", "log_p", "log_mass", "starts")} for m in modes]
    end = time.perf_counter()
    result = FitResult(model=model, family=family, layout=layout, params=params, elbo=np.asarray(trace),
                       config=config, seconds=end - t0, compile_seconds=0.0, density=density, mode_check=check)
    warn_unless_converged(result, LaplaceWarning)
    return result


def _lbfgs(objective, start: np.ndarray, steps: int, record=None):
    """scipy's L-BFGS-B from ``start``; :class:`NonFiniteLossError` where it ends at a non-finite density.

    It runs with :data:`LBFGS_BLAS_THREADS` BLAS threads (one): its own arithmetic is vectors of the
    model's size and a few small matrices, where threads gain nothing, and where the cores are busy
    (fits side by side, a sweep's workers) OpenBLAS's threads wait on each other. ``python -m
    benchmarks.laplace_threads`` on two cores: the Laplace fit 2.1-2.6x as fast with one thread
    beside one busy process, the same alone.
    """
    with threadpoolctl.threadpool_limits(limits=LBFGS_BLAS_THREADS, user_api="blas"):
        found = scipy.optimize.minimize(objective, start, jac=True, method="L-BFGS-B", callback=record,
                                        options=dict(maxiter=steps, maxfun=2 * steps, maxcor=20))
    if not np.isfinite(found.fun):
        raise NonFiniteLossError(f"the log density is {-found.fun} at the end of the search for the mode")
    return found


def _climb(objective, hessian, start: np.ndarray, steps: int, dtype: str, record=None) -> tuple:
    """L-BFGS from ``start``, then Newton where it stopped short of a curved mode: scipy's result, the
    Hessian's eigenvalues and eigenvectors there, and the Newton steps taken."""
    found = _lbfgs(objective, start, steps, record)
    lam, V = _dense(hessian, found.x, dtype)
    newton_steps = 0
    if found.status != 1 and _short_of_mode(-np.asarray(found.jac, dtype="float64"), lam, V, dtype):
        found, newton_steps = _newton(objective, hessian, found, dtype, record)
        lam, V = _dense(hessian, found.x, dtype)
    return found, lam, V, newton_steps


def _modes(objective, hessian, start: np.ndarray, first: tuple, starts: int, steps: int, dtype: str,
           seed: int) -> list[dict]:
    """The distinct strict modes that L-BFGS reaches from ``start`` (``first``: where it ended) and from
    ``starts - 1`` others, highest first (:class:`Laplace`'s ``starts``): by turns Stan's and Pathfinder's
    ``uniform(-JITTER, JITTER)`` of every unconstrained value, and ``start`` jittered by as much (PyMC's
    initial point can sit in one mode's basin, such as a mixture's mean near its heavier component)."""
    rng = np.random.default_rng([seed, starts])
    ends = [first]
    for i in range(starts - 1):
        jitter = rng.uniform(-JITTER, JITTER, start.size)
        try:
            found, lam, V, _ = _climb(objective, hessian, jitter if i % 2 == 0 else start + jitter, steps, dtype)
        except NonFiniteLossError:  # a start from which the density runs off: no mode there
            continue
        ends.append((found, lam, V))
    modes = []
    for found, lam, V in ends:
        gradient = -np.asarray(found.jac, dtype="float64")
        if not (np.isfinite(gradient).all() and np.isfinite(lam).all()
                and lam.min() > flat_tolerance(np.abs(lam).max(), dtype)) or _short_of_mode(gradient, lam, V, dtype):
            continue  # not a strict mode: a saddle, a flat direction, or short of one
        same = next((m for m in modes if _within(found.x, m, DISTINCT)), None)
        if same is not None:
            same["starts"] += 1
            continue
        modes.append(dict(z=found.x.tolist(), log_p=-float(found.fun), log_mass=-float(found.fun)
                          - 0.5 * float(np.sum(np.log(lam))), starts=1, found=found, lam=lam, V=V))
    return sorted(modes, key=lambda m: -m["log_p"])


def _within(z: np.ndarray, mode: dict, sds: float) -> bool:
    """Whether ``z`` lies within ``sds`` posterior sds of ``mode`` in its curvature's metric."""
    proj = mode["V"].T @ (z - np.asarray(mode["z"]))
    return float(np.sqrt(np.sum(proj**2 * mode["lam"]))) < sds


def _short_of_mode(gradient: np.ndarray, lam: np.ndarray, V: np.ndarray, dtype: str) -> bool:
    """Whether the point L-BFGS stopped at is short of a curved mode: a finite gradient, the Hessian
    positive definite and not flat, and the quadratic model's mode above it by more than ``MODE_NATS``."""
    if not (np.isfinite(gradient).all() and np.isfinite(lam).all()):
        return False
    if lam.min() <= flat_tolerance(np.abs(lam).max(), dtype):
        return False  # a saddle or a flat direction: Newton's step is not a step to a mode
    proj = V.T @ gradient
    return 0.5 * float(np.sum(proj**2 / lam)) > MODE_NATS


def _newton(objective, hessian, found, dtype: str, record) -> tuple:
    """Trust-region Newton steps (the exact Hessian) from where L-BFGS stopped, to the mode it fell short of.

    L-BFGS stops on a relative change of the log density (``factr``), which on a badly conditioned
    posterior (predictors on scales 100 apart) can leave it nats below the mode. From there, with the
    Hessian positive definite, Newton converges in a few steps. Returns scipy's result, with ``nit``
    the L-BFGS iterations (Newton's are the second value) and ``jac`` the gradient at the new point.
    """
    newton = scipy.optimize.minimize(
        objective, found.x, jac=True, method="trust-exact", callback=record,
        hess=lambda z: np.asarray(hessian(jnp.asarray(z, dtype)), dtype="float64"),
        options=dict(maxiter=NEWTON_STEPS, gtol=1e-8))
    if not (np.isfinite(newton.fun) and newton.fun <= found.fun):
        return found, 0
    found = scipy.optimize.OptimizeResult(dict(found, x=newton.x, fun=newton.fun, jac=newton.jac,
                                               message=f"{found.message}; then {newton.nit} Newton steps"))
    return found, int(newton.nit)


def _positive(eigenvalues: np.ndarray) -> np.ndarray:
    """The curvatures q takes: their absolute values, at least round-off above zero."""
    floor = np.finfo("float64").eps * np.abs(eigenvalues).max()
    return np.maximum(np.abs(eigenvalues), floor)


def _dense(hessian, mode: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues and eigenvectors of the (symmetrised) Hessian of the negative log density at the mode."""
    H = np.asarray(hessian(jnp.asarray(mode, dtype)), dtype="float64")
    return np.linalg.eigh(0.5 * (H + H.T))


def _dense_factor(lam: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The Cholesky factor of ``V diag(1 / |lam|) V'``, by a QR of its square root (no Cholesky of a near-singular
    matrix: a flat direction's variance is ~1e16 times the others')."""
    R = np.linalg.qr((V / np.sqrt(_positive(lam))).T, mode="r")
    L = R.T
    return L * np.where(np.diag(L) < 0, -1.0, 1.0)  # a positive diagonal


def _mode_check(gradient: np.ndarray, lam: np.ndarray, V: np.ndarray, rest: float | None, layout: Layout,
                dtype: str, found) -> ModeCheck:
    """The test of the point L-BFGS stopped at (:class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`), from the
    log density's gradient there and the curvatures ``lam`` (eigenvectors ``V``; with ``rest``, the mean of
    the eigenvalues outside them)."""
    tested = lam if rest is None else np.append(lam, rest)
    finite = bool(np.isfinite(gradient).all() and np.isfinite(tested).all())
    tol = flat_tolerance(np.abs(tested).max(), dtype) if finite else float("nan")
    flat = np.abs(lam) <= tol
    proj = V.T @ gradient
    gap = 0.5 * float(np.sum(proj[~flat] ** 2 / np.abs(lam[~flat])))
    if rest is not None and abs(rest) > tol:  # the gradient outside V, at the rest's mean curvature
        gap += 0.5 * max(float(gradient @ gradient - proj @ proj), 0.0) / abs(rest)
    n_flat = int(flat.sum()) + int(rest is not None and abs(rest) <= tol)
    return mode_check(finite=finite, mode_gap=float(gap) if finite else float("nan"),
                      gradient_max=float(np.abs(gradient).max()), curvature_min=float(tested.min()),
                      curvature_max=float(tested.max()), negative=int(np.sum(tested < -tol)), flat=n_flat,
                      flat_tolerance=tol, flat_variables=_spanning(V[:, flat], layout),
                      flat_slope=float(np.linalg.norm(proj[flat])), tested=int(tested.size), dim=layout.dim,
                      iterations=int(found.nit), hit_limit=bool(found.status == 1), stopped=str(found.message))


def _spanning(directions: np.ndarray, layout: Layout, most: int = 6) -> str:
    """The value variables that span ``directions`` (orthonormal columns), largest share first: those
    with 5% of it or more (else the largest three), at most ``most`` named."""
    if not directions.shape[1]:
        return ""
    share = np.sum(directions**2, axis=1) / directions.shape[1]
    shares = sorted(((float(share[slot].sum()), name) for name, slot, _, _ in layout.slots), key=lambda s: -s[0])
    names = [name for value, name in shares if value >= 0.05] or [name for _, name in shares[:3]]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _programs(density, dtype: str) -> tuple:
    """``-log p``'s value and gradient, and its Hessian, at ``(z, data)``: compiled once per model structure."""
    key = ("laplace", dtype)
    if key not in density.jitted:
        def neg_log_p(z, data):
            return -density.flat_log_p(data, dtype)(z)

        density.jitted[key] = (jax.jit(jax.value_and_grad(neg_log_p)), jax.jit(jax.hessian(neg_log_p)))
    return density.jitted[key]


def _low_rank(neg_log_p, mode: np.ndarray, rank: int, seed: int, dtype: str) -> tuple:
    """The ``rank`` largest eigenpairs of the Hessian ``H`` of ``neg_log_p`` at ``mode`` (by
    Hessian-vector products), and the mean of the rest of its spectrum (by Hutchinson's estimate of its trace)."""
    dim = mode.size
    hvp = jax.jit(lambda v: jax.jvp(jax.grad(neg_log_p), (jnp.asarray(mode, dtype),), (v.astype(dtype),))[1])
    op = scipy.sparse.linalg.LinearOperator(
        (dim, dim), matvec=lambda v: np.asarray(hvp(jnp.asarray(np.ravel(v))), dtype="float64"), dtype="float64")
    lam, U = scipy.sparse.linalg.eigsh(op, k=rank, which="LA")
    probes = np.random.default_rng(seed).choice([-1.0, 1.0], size=(HUTCHINSON_PROBES, dim))
    trace = float(np.mean([p @ op.matvec(p) for p in probes]))
    return lam, U, (trace - lam.sum()) / (dim - rank)


def _low_rank_factor(lam: np.ndarray, U: np.ndarray, rest: float) -> gaussians.LowRank:
    """q's low-rank factor: the curvatures ``lam`` along ``U`` (their absolute values), ``rest`` elsewhere (or,
    when that is not positive, the smallest of ``|lam|``)."""
    lam = _positive(lam)
    c = rest if rest > 0 else lam.min()
    return gaussians.LowRank(np.full(U.shape[0], c**-0.5), U, c / lam - 1.0)
