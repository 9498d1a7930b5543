r"""The Laplace approximation: a Gaussian at the posterior's mode, from the curvature there.

:func:`fit_laplace` finds the mode of the log density in the unconstrained
space (L-BFGS, from the same random initial means as :func:`bnn_zoo.fit`)
and returns q = N(mode, H^{-1}), ``H`` the negative Hessian of the log
density at the mode, as a :class:`~bnn_zoo.inference.result.FitResult`, so
that :func:`bnn_zoo.sample`, :func:`bnn_zoo.predict` and :func:`bnn_zoo.loo`
take it unchanged. Two curvatures (:class:`Laplace`):

- ``"hessian"``: the dense Hessian, ``dim`` Hessian-vector products and a
  ``dim x dim`` matrix, up to :data:`DENSE_MAX` values;
- ``"lowrank"``: the ``rank`` largest eigenpairs of ``H`` by Lanczos
  (Hessian-vector products only), the rest of the spectrum replaced by its
  mean, estimated by Hutchinson's trace estimator: covariance
  ``c^{-1} I + U (Lambda^{-1} - c^{-1}) U^T``, ``O(dim rank)`` memory.

Where the mode is not a strict maximum (a network's saddle, an optimiser
stopped early) the Hessian has non-positive eigenvalues; they are replaced
by their absolute values (the saddle-free Newton of Dauphin et al. 2014),
with a warning.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
import pytensor
import scipy.optimize
import scipy.sparse.linalg

from bnn_zoo.inference import families, gaussians
from bnn_zoo.inference.jaxmodel import Layout, compile_model
from bnn_zoo.inference.minibatch import unwrap as unwrap_minibatch
from bnn_zoo.inference.prepare import given_initvals, initial_mean, model_dtype
from bnn_zoo.inference.result import FitResult, NonFiniteLossError

__all__ = ["CURVATURES", "DENSE_MAX", "HUTCHINSON_PROBES", "Laplace", "LaplaceWarning", "fit_laplace"]

#: The most unconstrained values for the dense Hessian (a 4,000 x 4,000 float64 matrix is 128 MB).
DENSE_MAX = 4000
#: Rademacher probes of Hutchinson's estimate of the Hessian's trace (the low-rank curvature).
HUTCHINSON_PROBES = 64
#: The curvatures :class:`Laplace` takes.
CURVATURES = ("auto", "hessian", "lowrank")


class LaplaceWarning(UserWarning):
    """The mode is not a strict maximum: some curvatures were not positive."""


@dataclass(frozen=True)
class Laplace:
    """The Laplace approximation, as ``bnn_zoo.fit``'s ``method`` (the same as ``"laplace"``).

    Parameters
    ----------
    curvature : {"auto", "hessian", "lowrank"}, default "auto"
        The dense Hessian, or its ``rank`` largest eigenpairs plus the mean
        of the rest; ``"auto"`` takes the dense one up to
        :data:`DENSE_MAX` values.
    rank : int, optional
        The low-rank curvature's eigenpairs; default ``round(sqrt(dim))``.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Laplace(curvature="lowrank", rank=20)
    Laplace(curvature='lowrank', rank=20)
    """

    curvature: str = "auto"
    rank: int | None = None
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "laplace"

    def __post_init__(self):
        if self.curvature not in CURVATURES:
            raise ValueError(f"Laplace's curvature must be one of {', '.join(CURVATURES)}, got {self.curvature!r}")
        families.check_rank_setting(self.rank, "Laplace")


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
        L-BFGS's most iterations to the mode.
    random_seed : int, default 0
        Seeds the initial point (as :func:`bnn_zoo.fit`'s initial means)
        and the trace estimator's probes.

    Returns
    -------
    FitResult
        ``method`` ``"laplace"``; a full-rank q (dense Hessian) or a
        low-rank one. Its ``elbo`` holds the log density at each L-BFGS
        iteration.

    Raises
    ------
    ValueError
        For a discrete free variable, a curvature too large for the model,
        or a rank out of range, before any work.
    """
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

        def log_p(z):
            prior, lik = density.log_density(layout.unflatten(z.astype(dtype)), *data)
            return (prior + lik).astype("float64") if dtype == "float64" else prior + lik

        value_and_grad = jax.jit(jax.value_and_grad(lambda z: -log_p(z)))
        trace = []

        def objective(z):
            value, grad = value_and_grad(jnp.asarray(z, dtype))
            trace.append(-float(value))
            return float(value), np.asarray(grad, dtype="float64")

        start = initial_mean(layout, point, random_seed, given_initvals(model)).astype("float64")
        found = scipy.optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                        options=dict(maxiter=steps, maxcor=20))
        mode = found.x
        if not np.isfinite(found.fun):
            raise NonFiniteLossError(f"the log density is {-found.fun} at the end of the search for the mode")
        if curvature == "hessian":
            family, factor = families.FULL_RANK, _dense(jax.jit(jax.hessian(lambda z: -log_p(z))), mode, dtype)
        else:
            family, factor = families.LOW_RANK_EIGEN, _low_rank(lambda z: -log_p(z), mode, rank, random_seed, dtype)
    params = family.from_factor(mode.astype(dtype), factor)
    config = dict(method="laplace", curvature=curvature, rank=rank if curvature == "lowrank" else None,
                  steps=int(found.nit), converged=bool(found.success), seed=random_seed, dtype=dtype)
    end = time.perf_counter()
    return FitResult(model=model, family=family, layout=layout, params=params, elbo=np.asarray(trace),
                     config=config, seconds=end - t0, compile_seconds=0.0, density=density)


def _positive(eigenvalues: np.ndarray) -> np.ndarray:
    bad = eigenvalues <= 0
    if bad.any():
        warnings.warn(f"the Laplace approximation's mode is not a strict maximum: {int(bad.sum())} of "
                      f"{eigenvalues.size} curvatures are not positive and are replaced by their absolute values "
                      "(more steps, or method='lowrank_advi')", LaplaceWarning, stacklevel=3)
    floor = np.finfo("float64").eps * np.abs(eigenvalues).max()
    return np.maximum(np.abs(eigenvalues), floor)


def _dense(hessian, mode: np.ndarray, dtype: str) -> np.ndarray:
    """The Cholesky factor of the inverse of the (positive) negative Hessian at the mode."""
    H = np.asarray(hessian(jnp.asarray(mode, dtype)), dtype="float64")
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    cov = (V / _positive(lam)) @ V.T
    return np.linalg.cholesky(0.5 * (cov + cov.T))


def _low_rank(neg_log_p, mode: np.ndarray, rank: int, seed: int, dtype: str) -> gaussians.LowRank:
    """The ``rank`` largest eigenpairs of the Hessian ``H`` of ``neg_log_p`` at ``mode`` (by
    Hessian-vector products), the rest of its spectrum at its mean."""
    dim = mode.size
    hvp = jax.jit(lambda v: jax.jvp(jax.grad(neg_log_p), (jnp.asarray(mode, dtype),), (v.astype(dtype),))[1])
    op = scipy.sparse.linalg.LinearOperator(
        (dim, dim), matvec=lambda v: np.asarray(hvp(jnp.asarray(np.ravel(v))), dtype="float64"), dtype="float64")
    lam, U = scipy.sparse.linalg.eigsh(op, k=rank, which="LA")
    lam = _positive(lam)
    probes = np.random.default_rng(seed).choice([-1.0, 1.0], size=(HUTCHINSON_PROBES, dim))
    trace = float(np.mean([p @ op.matvec(p) for p in probes]))
    rest = (trace - lam.sum()) / (dim - rank)
    c = rest if rest > 0 else lam.min()
    return gaussians.LowRank(np.full(dim, c**-0.5), U, c / lam - 1.0)
