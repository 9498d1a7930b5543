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

__all__ = ["ELBO", "blundell", "constant"]

@dataclass(frozen=True)
class ELBO:
    """The objective of one fit: ``loss, elbo = objective(params, eps, batch, kl_weight)``.

    ``ELBO = E_q[log p(D | z)] + beta * (E_q[log p(z)] + H[q])``, estimated
    from the draws ``z = mu + L eps`` (see the module docstring). ``loss``
    is what the optimizer minimises (differentiate it with respect to
    ``params``); ``elbo`` the estimate reported in the trace.

    Parameters
    ----------
    density : ModelFunction
        The model compiled to JAX (:func:`~bnn_zoo.inference.jaxmodel.compile_model`).
    family : Family
        q's variational family.
    beta : float, default 1.0
        The KL weight.
    scale : float, default 1.0
        ``N / batch_size`` with minibatches: the loss is divided by it, as in
        PyMC (the likelihood itself stays at full-data scale through the
        observed variables' ``total_size``).
    path_derivative : bool, default False
        Take the entropy's gradient as the path derivative of ``-log q(z)``
        ("sticking the landing", Roeder et al. 2017).
    likelihood : Likelihood, optional
        A per-example-noise estimator's log likelihood
        (:func:`~bnn_zoo.inference.estimators.compile_likelihood`; mean-field
        q only); ``None`` evaluates the likelihood at the shared draw.

    See Also
    --------
    bnn_zoo.inference.core.step : One optimisation step on this objective.
    """

    density: ModelFunction
    family: Family
    beta: float = 1.0
    scale: float = 1.0  # N / batch_size: the likelihood is at full-data scale
    path_derivative: bool = False
    likelihood: Likelihood | None = None  # a per-example-noise estimator's (mean-field q only)

    def __call__(self, params, eps, batch, kl_weight=1.0, words=None, step=0):
        """The loss and the ELBO estimate at ``params``, in JAX.

        Parameters
        ----------
        params : dict of str to jax.Array
            q's parameters.
        eps : jax.Array
            ``(mc_samples, dim)``: one standard-normal row per Monte Carlo draw.
        batch : tuple of jax.Array
            One array per data container (a minibatch of the ones cut into
            minibatches).
        kl_weight : float or jax.Array, default 1.0
            The KL weighting's value at this step.
        words : jax.Array, optional
            The noise stream's key words, which seed ``likelihood``'s
            per-example noise (needed with a ``likelihood``).
        step : int or jax.Array, default 0
            The step, which also seeds that noise.

        Returns
        -------
        loss : jax.Array
            ``-(log_lik + kl_weight * beta * (log_prior + H)) / scale``.
        elbo : jax.Array
            ``log_lik + beta * (log_prior + H)``, at full-data scale.
        """
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
    """The constant KL weighting: every minibatch carries its equal share of the KL part.

    PyMC's ``1 / M`` of an epoch's ``M`` minibatches, returned as the factor
    1 on that share.

    Returns
    -------
    callable
        ``weight(t) -> 1.0`` for every step ``t``.
    """
    return lambda t: 1.0


def blundell(steps_per_epoch: int) -> Callable:
    """Blundell et al.'s (2015, eq. 9) weights: minibatch ``i`` of ``M`` gets ``2^(M-i) / (2^M - 1)``.

    Most of the KL in an epoch's first minibatches, the data later. The
    weights still sum to one over an epoch, so an epoch's expected objective
    is unchanged. Returned as the factor on PyMC's ``1 / M`` share: ``M pi_i``.

    Parameters
    ----------
    steps_per_epoch : int
        ``M``, the minibatches of one epoch (``N // batch_size``).

    Returns
    -------
    callable
        ``weight(t)`` of a JAX integer step ``t``: ``M pi_i`` with
        ``i = t mod M + 1``.

    Raises
    ------
    ValueError
        If ``steps_per_epoch`` is below 1.
    """
    M = int(steps_per_epoch)
    if M < 1:
        raise ValueError(f"steps_per_epoch must be >= 1, got {M}")
    norm = M / -np.expm1(-M * np.log(2.0))  # M / (1 - 2^-M), written so nothing overflows

    def weight(t):
        return norm * jnp.exp2(-((t % M) + 1).astype("float32"))

    return weight
