"""Low-rank q (``"lowrank_advi"``): ``z = mu + s * (eps + W eta)``, covariance ``diag(s) (I + W W^T) diag(s)``.

``mu``, ``rho`` and ``W`` ``(dim, rank)``; ``W`` is scaled by ``s`` (as the
full-rank factor is, :mod:`~bnn_zoo.inference.families.fullrank`). Also the
same q in eigen form, :data:`LOW_RANK_EIGEN`: the low-rank Laplace
approximation's, not fitted by ADVI.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.families.base import Family, inverse_softplus, normal_log_density, resolve_rank, softplus

__all__ = ["LOW_RANK", "LOW_RANK_EIGEN", "low_rank"]


def _low_rank_parts(params):
    s, W = softplus(params["rho"]), params["W"]
    k = W.shape[1]
    chol = jnp.linalg.cholesky(jnp.eye(k, dtype=W.dtype) + W.T @ W)
    return s, W, chol, jnp.sum(jnp.log(s)) + jnp.sum(jnp.log(jnp.diagonal(chol)))


def _low_rank_draw(params, eps):
    s, W, _, log_det = _low_rank_parts(params)
    d = s.shape[0]
    return params["mu"] + s * (eps[:d] + W @ eps[d:]), log_det


def _low_rank_log_density(params, z):
    s, W, chol, log_det = _low_rank_parts(params)
    u = (z - params["mu"]) / s
    # Woodbury: u^T (I + W W^T)^{-1} u = u^T u - |C^{-1} W^T u|^2, with C C^T = I + W^T W.
    v = jax.scipy.linalg.solve_triangular(chol, W.T @ u, lower=True)
    quad = jnp.sum(u**2) - jnp.sum(v**2)
    return -0.5 * quad - log_det - 0.5 * u.shape[0] * np.log(2 * np.pi)


def _low_rank_factor(params):
    return params["mu"], gaussians.LowRank.from_factor(np.logaddexp(0.0, params["rho"]), params["W"])


def _low_rank_from_factor(mu, factor):
    if not isinstance(factor, gaussians.LowRank) or np.any(factor.weights < 0):
        raise ValueError("a low-rank q's factor adds variance to a diagonal one: LowRank with weights >= 0")
    s, U, m = factor
    return {"mu": mu, "rho": inverse_softplus(s).astype(mu.dtype), "W": (U * np.sqrt(m)).astype(mu.dtype)}


def low_rank(rank: int | None = None) -> Family:
    """The low-rank-plus-diagonal family of rank ``rank``: ``cov = diag(s) (I + W W^T) diag(s)``.

    Parameters
    ----------
    rank : int, optional
        The columns of ``W``, in ``1..dim - 1``; default :func:`~bnn_zoo.inference.families.base.default_rank`.

    Returns
    -------
    Family
        Named ``"lowrank_advi"``; its ``init`` raises a ``ValueError`` for a
        rank out of range of the model's dimension.
    """
    def init(mu, sd):
        k = resolve_rank(rank, mu.size, "LowRank", "method='fullrank_advi' for a dense covariance")
        s = np.broadcast_to(np.asarray(sd, dtype="float64"), mu.shape)
        return {"mu": mu, "rho": inverse_softplus(s).astype(mu.dtype), "W": np.zeros((mu.size, k), mu.dtype)}

    return Family(name="lowrank_advi", pymc=None, init=init, draw=_low_rank_draw,
                  log_density=_low_rank_log_density, factor=_low_rank_factor,
                  from_factor=_low_rank_from_factor,
                  noise_size=lambda params: params["mu"].shape[0] + params["W"].shape[1],
                  to_pymc=_no_pymc)


def _no_pymc(params):
    raise ValueError("PyMC has no low-rank approximation: use bnn_zoo.sample(result) for draws")


def _eigen_draw(params, eps):
    s, U, m = params["scale"], params["U"], params["m"]
    z = params["mu"] + s * (eps + U @ ((jnp.sqrt(1 + m) - 1) * (U.T @ eps)))
    return z, jnp.sum(jnp.log(s)) + 0.5 * jnp.sum(jnp.log1p(m))


def _eigen_log_density(params, z):
    s, U, m = params["scale"], params["U"], params["m"]
    u = (z - params["mu"]) / s
    eps = u + U @ ((1 / jnp.sqrt(1 + m) - 1) * (U.T @ u))
    return normal_log_density(eps, jnp.sum(jnp.log(s)) + 0.5 * jnp.sum(jnp.log1p(m)))


def _eigen_from_factor(mu, factor):
    s, U, m = factor
    return {"mu": mu, "scale": np.asarray(s, mu.dtype), "U": np.asarray(U, mu.dtype), "m": np.asarray(m, mu.dtype)}


#: Low-rank q (``"lowrank_advi"``) at the default rank: ``mu``, ``rho`` and ``W``, ``(dim, rank)``.
LOW_RANK = low_rank()


def _eigen_init(mu, sd):
    raise ValueError("the Laplace approximation's low-rank family is not fitted by ADVI: "
                     "use method='lowrank_advi'")


#: A :class:`~bnn_zoo.inference.families.gaussians.LowRank` q as it is, ``mu``, ``scale``, ``U`` and ``m``:
#: the low-rank Laplace approximation's (:mod:`~bnn_zoo.inference.laplace`); not fitted by ADVI.
LOW_RANK_EIGEN = Family(name="lowrank_eigen", pymc=None, init=_eigen_init, draw=_eigen_draw,
                        log_density=_eigen_log_density,
                        factor=lambda p: (p["mu"], gaussians.LowRank(p["scale"], p["U"], p["m"])),
                        from_factor=_eigen_from_factor, to_pymc=_no_pymc)
