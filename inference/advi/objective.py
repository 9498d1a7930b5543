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

With a ``likelihood`` from :mod:`~bnn_zoo.inference.advi.estimators`, the
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

from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.advi.estimators import STREAM, Likelihood
from bnn_zoo.inference.families import Family, entropy, softplus
from bnn_zoo.inference.compile.jaxmodel import ModelFunction

__all__ = ["ELBO", "KL_WEIGHTINGS", "ELBOFunction", "blundell", "constant", "kl_schedule", "with_lambdas"]

#: The names :class:`ELBO`'s ``kl_weighting`` takes (besides a function of the step).
KL_WEIGHTINGS = ("constant", "blundell")


@dataclass(frozen=True)
class ELBO:
    r"""The objective of a fit, as a value: ``bnn_zoo.fit(model, objective=bnn_zoo.ELBO(beta=0.1))``.

    .. math::

        \mathrm{ELBO}_\beta(q) = \mathbb{E}_q[\log p(D \mid z)]
            + \beta\,(\mathbb{E}_q[\log p(z)] + H[q])

    estimated with reparameterised draws :math:`z = \mu + L\varepsilon` (PyMC's
    ``KLqp``; :math:`\beta = 1` is the ELBO itself).

    Parameters
    ----------
    beta : float, default 1.0
        The KL weight :math:`\beta`, positive and finite.
    kl_weighting : {"constant", "blundell"} or callable, default "constant"
        How the KL part is spread over an epoch's minibatches: a function of
        the step ``t`` that scales it in the loss (not in the reported ELBO).
        ``"constant"``: equally; ``"blundell"``: Blundell et al.'s (2015)
        :math:`2^{M-i} / (2^M - 1)` (:func:`blundell`; needs ``batch_size``).
    mc_samples : int, default 1
        Monte Carlo draws of q per gradient step.
    estimator : {"weights", "local_reparam", "flipout"}, default "weights"
        How the expected log likelihood's gradient is estimated
        (:mod:`~bnn_zoo.inference.advi.estimators`): from the step's weight draw,
        or with each example's own noise in the dense layers (local
        reparameterisation, Kingma et al. 2015; Flipout, Wen et al. 2018).
        Mean-field q only.
    path_derivative : bool, optional
        The "sticking the landing" gradient of the entropy (Roeder et al.
        2017): zero variance where q is the posterior. Default: on for the
        full-rank phase after a mean-field start, off otherwise.

    Raises
    ------
    ValueError
        For a value out of range, naming the setting.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.ELBO(beta=0.1, mc_samples=4)
    ELBO(beta=0.1, kl_weighting='constant', mc_samples=4, estimator='weights', path_derivative=None)
    >>> bnn_zoo.ELBO(beta=-1)
    Traceback (most recent call last):
    ...
    ValueError: ELBO's beta must be positive and finite, got -1
    """

    beta: float = 1.0
    kl_weighting: str | Callable = "constant"
    mc_samples: int = 1
    estimator: str = "weights"
    path_derivative: bool | None = None

    def __post_init__(self):
        from bnn_zoo.inference.advi.estimators import ESTIMATORS

        if not (isinstance(self.beta, (int, float, np.number)) and self.beta > 0 and np.isfinite(self.beta)):
            raise ValueError(f"ELBO's beta must be positive and finite, got {self.beta!r}")
        if not (isinstance(self.mc_samples, (int, np.integer)) and self.mc_samples >= 1):
            raise ValueError(f"ELBO's mc_samples must be an integer >= 1, got {self.mc_samples!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"ELBO's estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        if not (callable(self.kl_weighting) or self.kl_weighting in KL_WEIGHTINGS):
            raise ValueError(f"ELBO's kl_weighting must be one of {', '.join(KL_WEIGHTINGS)} or a function "
                             f"of the step, got {self.kl_weighting!r}")
        if self.path_derivative not in (None, True, False):
            raise ValueError(f"ELBO's path_derivative must be True, False or None, got {self.path_derivative!r}")


@dataclass(frozen=True)
class ELBOFunction:
    """The objective of one fit, compiled: ``loss, elbo = objective(params, eps, batch, kl_weight)``.

    ``ELBO = E_q[log p(D | z)] + beta * (E_q[log p(z)] + H[q])``, estimated
    from the draws ``z = mu + L eps`` (see the module docstring). ``loss``
    is what the optimizer minimises (differentiate it with respect to
    ``params``); ``elbo`` the estimate reported in the trace.

    Parameters
    ----------
    density : ModelFunction
        The model compiled to JAX (:func:`~bnn_zoo.inference.compile.jaxmodel.compile_model`).
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
        (:func:`~bnn_zoo.inference.advi.estimators.compile_likelihood`; mean-field
        q only); ``None`` evaluates the likelihood at the shared draw.
    centring : tuple, default ()
        Learned centring: ``(data index, shape)`` of each ``lambda``
        container, whose values come from ``sigmoid(params["centring"])``
        (:func:`with_lambdas`).

    See Also
    --------
    bnn_zoo.inference.advi.core.step : One optimisation step on this objective.
    """

    density: ModelFunction
    family: Family
    beta: float = 1.0
    scale: float = 1.0  # N / batch_size: the likelihood is at full-data scale
    path_derivative: bool = False
    likelihood: Likelihood | None = None  # a per-example-noise estimator's (mean-field q only)
    centring: tuple = ()

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
        if self.centring:
            batch = with_lambdas(batch, params["centring"], self.centring)
        layout = self.density.layout
        if self.likelihood is not None:
            index = {name: i for i, name in enumerate(layout.names)}
            at = [index[name] for name in self.likelihood.sites]
            loc = layout.unflatten(params["mu"])
            scale = layout.unflatten(softplus(params["rho"]))
            loc, scale = [loc[i] for i in at], [scale[i] for i in at]
        log_dets = 0.0
        for m, e in enumerate(eps):
            z, log_det = self.family.draw(params, e)
            log_dets = log_dets + log_det
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
        # A Gaussian's entropy is exact from any draw's log_det; a flow's is each draw's -log q, averaged.
        h = entropy(log_det if self.family.exact_entropy else log_dets / n, params["mu"].shape[0])
        # The gradient's entropy term: exact, or the path derivative (same value in expectation).
        h_grad = jax.lax.stop_gradient(h) + (neg_log_q / n - jax.lax.stop_gradient(neg_log_q / n)) \
            if self.path_derivative else h
        loss = -(log_lik + kl_weight * self.beta * (log_prior + h_grad)) / self.scale
        return loss, log_lik + self.beta * (log_prior + h)


def with_lambdas(batch: tuple, logits, slots: tuple) -> tuple:
    """``batch`` with each learned-centring container replaced by its ``lambda = sigmoid(logit)``.

    Parameters
    ----------
    batch : tuple of jax.Array
        One array per data container.
    logits : jax.Array
        Every ``lambda``'s logit, flat, in the order of ``slots``.
    slots : tuple
        ``(data index, shape)`` of each ``lambda`` container.

    Returns
    -------
    tuple of jax.Array
        The batch, the containers replaced.
    """
    batch, lam, offset = list(batch), jax.nn.sigmoid(logits), 0
    for index, shape in slots:
        size = int(np.prod(shape, dtype=int))
        batch[index] = lam[offset : offset + size].reshape(shape).astype(batch[index].dtype)
        offset += size
    return tuple(batch)


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


def kl_schedule(kl_weighting, batch_size, per_epoch) -> tuple[Callable, object]:
    """The KL weighting of an :class:`ELBO` as a function of the step.

    Parameters
    ----------
    kl_weighting : {"constant", "blundell"} or callable
        ``ELBO``'s ``kl_weighting``.
    batch_size : int or None
        The fit's batch size (``"blundell"`` needs one).
    per_epoch : int
        Steps per epoch.

    Returns
    -------
    kl_weight : callable
        ``kl_weight(t)``, the factor on the KL part at step ``t``.
    key : object
        What identifies it in the compiled programs' cache and the records.

    Raises
    ------
    ValueError
        For an unknown name, or ``"blundell"`` without minibatches.
    """
    if callable(kl_weighting):
        return kl_weighting, kl_weighting
    if kl_weighting not in KL_WEIGHTINGS:
        raise ValueError(f"unknown kl_weighting {kl_weighting!r}; valid: "
                         f"{', '.join(KL_WEIGHTINGS)} or a function of the step")
    if kl_weighting == "constant":
        return constant(), "constant"
    if batch_size is None:
        raise ValueError("kl_weighting='blundell' needs minibatches (batch_size)")
    return blundell(per_epoch), f"blundell({per_epoch})"
