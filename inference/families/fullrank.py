"""Full-rank q (``"fullrank_advi"``): ``z = mu + s * (eps + T eps)``, the Cholesky factor ``L = diag(s) (I + T)``.

``mu``, ``rho`` and ``T_tril``, the strictly lower triangle of ``T``. The
factor is scaled by ``s``, so that an optimiser's step on ``T`` (about its
learning rate in every entry, for Adam) changes each row's variance relative
to that row's own, whatever the dimension: an unscaled Cholesky factor gains
about ``dim * lr**2`` of variance in every row, enough to ruin a fit of a few
hundred dimensions (docs/user_guide/families.md). A fitted q converts to
PyMC's ``FullRank`` (``to_pymc``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pymc.variational as pmvi

from bnn_zoo.inference.families.base import Family, inverse_softplus, normal_log_density, softplus

__all__ = ["FULL_RANK"]


def _strict_lower(params):
    d = params["mu"].shape[0]
    rows, cols = np.tril_indices(d, -1)
    return jnp.zeros((d, d), params["mu"].dtype).at[rows, cols].set(params["T_tril"])


def _full_rank_draw(params, eps):
    s = softplus(params["rho"])
    return params["mu"] + s * (eps + _strict_lower(params) @ eps), jnp.sum(jnp.log(s))


def _full_rank_log_density(params, z):
    s = softplus(params["rho"])
    d = s.shape[0]
    unit = _strict_lower(params) + jnp.eye(d, dtype=s.dtype)
    eps = jax.scipy.linalg.solve_triangular(unit, (z - params["mu"]) / s, lower=True, unit_diagonal=True)
    return normal_log_density(eps, jnp.sum(jnp.log(s)))


def _full_rank_from_factor(mu, L):
    L = np.diag(np.broadcast_to(L, mu.shape)) if np.ndim(L) < 2 else np.asarray(L)
    s = np.diag(L)
    return {"mu": mu, "rho": inverse_softplus(s).astype(mu.dtype),
            "T_tril": (L / s[:, None])[np.tril_indices(mu.size, -1)].astype(mu.dtype)}


def _full_rank_factor(params):
    mu, s = params["mu"], np.logaddexp(0.0, params["rho"])
    d = mu.size
    L = np.eye(d)
    L[np.tril_indices(d, -1)] = params["T_tril"]
    return mu, L * s[:, None]


def _full_rank_to_pymc(params):
    mu, L = _full_rank_factor({k: np.asarray(v, "float64") for k, v in params.items()})
    L[np.diag_indices(mu.size)] = inverse_softplus(np.diag(L))
    return {"mu": params["mu"], "L_tril": L[np.tril_indices(mu.size)].astype(np.asarray(params["mu"]).dtype)}


#: Full-rank q (``"fullrank_advi"``): ``mu``, ``rho`` and ``T_tril``, the strictly lower triangle
#: of ``T`` packed row-major; ``z = mu + softplus(rho) * (eps + T eps)``.
FULL_RANK = Family(name="fullrank_advi", pymc=pmvi.FullRank,
                   init=lambda mu, sd: _full_rank_from_factor(mu, np.asarray(sd, dtype="float64")),
                   draw=_full_rank_draw, log_density=_full_rank_log_density,
                   factor=_full_rank_factor, from_factor=_full_rank_from_factor, to_pymc=_full_rank_to_pymc)
