"""Mean-field q (``"advi"``): ``mu`` and ``rho``, ``z = mu + softplus(rho) * eps``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pymc.variational as pmvi

from bnn_zoo.inference.families.base import Family, inverse_softplus, normal_log_density, softplus

__all__ = ["MEAN_FIELD"]


def _mean_field_draw(params, eps):
    sd = softplus(params["rho"])
    # The draw is made once, behind a barrier: otherwise XLA recomputes it inside
    # each of its consumers, and copies the donated ``mu`` so that the in-place
    # update cannot overwrite it too early.
    return jax.lax.optimization_barrier(params["mu"] + sd * eps), jnp.sum(jnp.log(sd))


def _mean_field_log_density(params, z):
    sd = softplus(params["rho"])
    return normal_log_density((z - params["mu"]) / sd, jnp.sum(jnp.log(sd)))


def _mean_field_init(mu, sd):
    return {"mu": mu, "rho": np.broadcast_to(inverse_softplus(sd), mu.shape).astype(mu.dtype)}


#: Mean-field q (``"advi"``): ``mu`` and ``rho``, with ``sd = softplus(rho)``.
MEAN_FIELD = Family(
    name="advi", pymc=pmvi.MeanField, init=_mean_field_init,
    draw=_mean_field_draw, log_density=_mean_field_log_density,
    factor=lambda params: (params["mu"], np.logaddexp(0.0, params["rho"])),
    from_factor=lambda mu, sd: _mean_field_init(mu, np.asarray(sd)),
)
