"""The ADVI objective: PyMC's ``KLqp`` ELBO, tempered by ``beta``, with its KL weighting.

``ELBO = E_q[log p(D | z)] + beta * (E_q[log p(z)] + H[q])``, estimated with
reparameterised draws ``z = mu + L eps``. The entropy ``H[q]`` is exact; its
gradient equals the gradient of PyMC's Monte Carlo ``-log q(z)`` in
expectation, so the optimisation is PyMC's and the reported ELBO less noisy.
With ``path_derivative`` the entropy's gradient is instead that of
``-log q(z)`` with q's parameters held fixed, the "sticking the landing"
estimator (Roeder et al. 2017): its score-function part, zero in
expectation, is dropped, so the gradient's variance vanishes when q is the
posterior. As in PyMC, the loss is the negative ELBO divided by the
minibatch scaling ``N / batch_size``.

A *KL weighting* is a function of the step ``t`` that scales the KL part of
the loss (not of the reported ELBO): :func:`constant`, or :func:`blundell`
for Blundell et al.'s (2015) per-minibatch weights.

With a ``likelihood`` from :mod:`~bnn_zoo.inference.estimators`, the
expected log likelihood is estimated with per-example noise in the dense
layers (local reparameterisation or Flipout); the prior and entropy terms
are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bnn_zoo.inference import noise
from bnn_zoo.inference.estimators import STREAM, Likelihood
from bnn_zoo.inference.families import Family, entropy, softplus
from bnn_zoo.inference.jaxmodel import ModelFunction


@dataclass(frozen=True)
class ELBO:
    """The objective of one fit: ``loss, elbo = objective(params, eps, batch, kl_weight)``.

    ``eps`` holds one standard-normal row per Monte Carlo draw; ``batch`` one
    array per data container (a minibatch of the sliced ones); ``kl_weight``
    the KL weighting's value at this step.
    """

    density: ModelFunction
    family: Family
    beta: float = 1.0
    scale: float = 1.0  # N / batch_size: the likelihood is at full-data scale
    path_derivative: bool = False
    likelihood: Likelihood | None = None  # a per-example-noise estimator's (mean-field q only)

    def __call__(self, params, eps, batch, kl_weight=1.0, words=None, step=0):
        """``words`` and ``step`` seed the per-example noise of ``likelihood`` (the engine's key)."""
        log_lik = log_prior = neg_log_q = 0.0
        frozen = jax.lax.stop_gradient(params)
        layout = self.density.layout
        if self.likelihood is not None:
            index = {name: i for i, name in enumerate(layout.names)}
            at = [index[name] for name in self.likelihood.sites]
            loc = layout.unflatten(params["mu"])
            scale = layout.unflatten(softplus(params["rho"]))
            loc, scale = [loc[i] for i in at], [scale[i] for i in at]
        for m, e in enumerate(eps):
            z, log_det = self.family.draw(params, e)
            values = layout.unflatten(z)
            prior, lik = self.density.log_density(values, *batch)
            if self.likelihood is not None:  # the prior from the draw, the likelihood per example
                lik = self.likelihood.fn(values, loc, scale, noise.derive(words, STREAM, m),
                                         jnp.asarray(step, jnp.uint32), *batch)
            log_lik, log_prior = log_lik + lik, log_prior + prior
            if self.path_derivative:
                neg_log_q = neg_log_q - self.family.log_density(frozen, z)
        n = len(eps)
        log_lik, log_prior = log_lik / n, log_prior / n
        h = entropy(log_det, eps.shape[-1])
        # The gradient's entropy term: exact, or the path derivative (same value in expectation).
        h_grad = jax.lax.stop_gradient(h) + (neg_log_q / n - jax.lax.stop_gradient(neg_log_q / n)) \
            if self.path_derivative else h
        loss = -(log_lik + kl_weight * self.beta * (log_prior + h_grad)) / self.scale
        return loss, log_lik + self.beta * (log_prior + h)


# --- KL weightings: functions of the step ------------------------------------


def constant() -> Callable:
    """Every minibatch carries its equal share of the KL part (PyMC's ``1 / M``)."""
    return lambda t: 1.0


def blundell(steps_per_epoch: int) -> Callable:
    """Blundell et al.'s (2015, eq. 9) weights: minibatch ``i`` of ``M`` gets ``2^(M-i) / (2^M - 1)``.

    Most of the KL in an epoch's first minibatches, the data later. The
    weights still sum to one over an epoch, so an epoch's expected objective
    is unchanged. Returned as the factor on PyMC's ``1 / M`` share: ``M pi_i``.
    """
    M = int(steps_per_epoch)
    if M < 1:
        raise ValueError(f"steps_per_epoch must be >= 1, got {M}")
    norm = M / -np.expm1(-M * np.log(2.0))  # M / (1 - 2^-M), written so nothing overflows

    def weight(t):
        return norm * jnp.exp2(-((t % M) + 1).astype("float32"))

    return weight
