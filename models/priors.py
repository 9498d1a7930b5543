"""Registry of weight priors and of hyperpriors on their scales.

A *weight prior* is a function ``(name, scale, dims, **params) -> RV`` that
creates the prior of one layer's weights (or biases) given the layer's scale.
A *hyperprior* is a function ``(name, **params) -> scale`` that creates that
scale: a fixed number, or a positive random variable (a hierarchical model).

Default parameters are the keyword defaults of each function; override them
with :func:`get_weight_prior` / :func:`get_hyperprior`. Adding a prior is one
decorated function::

    @weight_prior("student_t")
    def student_t(name, scale, dims, *, nu=3.0):
        return pm.StudentT(name, nu=nu, mu=0.0, sigma=scale, dims=dims)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.shape_utils import rv_size_is_none

__all__ = ["HYPERPRIORS", "SCALE_FREE", "WEIGHT_PRIORS", "cauchy", "defaults", "fixed", "flat",
           "get_hyperprior", "get_weight_prior", "halfcauchy", "halfnormal", "hyperprior", "hyperprior_choice",
           "inversegamma", "laplace", "normal", "scale_mixture", "weight_prior", "weight_prior_choice"]

#: The weight priors by name: ``normal``, ``laplace``, ``cauchy``, ``scale_mixture`` and ``flat``
#: (filled by :func:`weight_prior`).
WEIGHT_PRIORS: dict[str, Callable] = {}
#: The hyperpriors on a layer's scale by name: ``fixed``, ``halfnormal``, ``halfcauchy`` and
#: ``inversegamma`` (filled by :func:`hyperprior`).
HYPERPRIORS: dict[str, Callable] = {}
#: Weight priors whose density does not depend on the layer scale: a model built with them
#: creates no scale variable, whatever the hyperprior.
SCALE_FREE: set[str] = set()


def weight_prior(name: str, *, uses_scale: bool = True):
    """Register ``fn(name, scale, dims, **params)`` as the weight prior ``name`` (a decorator).

    Parameters
    ----------
    name : str
        The prior's name in :data:`WEIGHT_PRIORS` (and on the command line).
    uses_scale : bool, default True
        False for a prior whose density ignores the layer's scale (added to
        :data:`SCALE_FREE`).

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.
    """

    def register(fn):
        WEIGHT_PRIORS[name] = fn
        if not uses_scale:
            SCALE_FREE.add(name)
        return fn

    return register


def hyperprior(name: str):
    """Register ``fn(name, **params)`` as the hyperprior ``name`` (a decorator).

    Parameters
    ----------
    name : str
        The hyperprior's name in :data:`HYPERPRIORS` (and on the command line).

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.
    """

    def register(fn):
        HYPERPRIORS[name] = fn
        return fn

    return register


# --- weight priors ---------------------------------------------------------


@weight_prior("normal")
def normal(name, scale, dims):
    """Normal(0, scale): weight decay (L2).

    Parameters
    ----------
    name : str
        The variable's name.
    scale : float or TensorVariable
        The layer's scale (the hyperprior's).
    dims : str or tuple of str
        The variable's dims.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.Normal(name, mu=0.0, sigma=scale, dims=dims)


@weight_prior("laplace")
def laplace(name, scale, dims):
    """Laplace(0, b=scale): L1, concentrates weights at zero.

    Parameters
    ----------
    name : str
        The variable's name.
    scale : float or TensorVariable
        The layer's scale (the hyperprior's).
    dims : str or tuple of str
        The variable's dims.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.Laplace(name, mu=0.0, b=scale, dims=dims)


@weight_prior("cauchy")
def cauchy(name, scale, dims):
    """Cauchy(0, beta=scale): heavy tails, few large weights cost little.

    Parameters
    ----------
    name : str
        The variable's name.
    scale : float or TensorVariable
        The layer's scale (the hyperprior's).
    dims : str or tuple of str
        The variable's dims.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.Cauchy(name, alpha=0.0, beta=scale, dims=dims)


@weight_prior("scale_mixture")
def scale_mixture(name, scale, dims, *, pi=0.5, sigma1=1.0, sigma2=float(np.exp(-6))):
    """Blundell et al.'s (2015) scale mixture ``pi N(0, s1^2) + (1 - pi) N(0, s2^2)``.

    ``s1 = scale * sigma1`` and ``s2 = scale * sigma2``: with the ``fixed``
    hyperprior (scale 1) this is the paper's prior, a broad component and a
    spike near zero; a hyperprior scales both components together.

    Draws come from PyMC's ``NormalMixture``; the log density is the same
    mixture written elementwise (:func:`_scale_mixture_logp`), which JAX
    fuses into one pass over the weights, where ``NormalMixture``'s stacked
    log-sum-exp costs as much as the rest of a 2x1200 MLP's step.

    Parameters
    ----------
    name : str
        The variable's name.
    scale : float or TensorVariable
        The layer's scale (the hyperprior's).
    dims : str or tuple of str
        The variable's dims.
    pi : float, default 0.5
        The broad component's weight.
    sigma1 : float, default 1.0
        The broad component's sd, as a multiple of ``scale``.
    sigma2 : float, default exp(-6)
        The spike's sd, as a multiple of ``scale``.

    Returns
    -------
    TensorVariable
        The random variable (a ``pm.CustomDist``).

    Raises
    ------
    ValueError
        Unless 0 < ``pi`` < 1 and both sigmas are positive.
    """
    if not (0 < pi < 1 and sigma1 > 0 and sigma2 > 0):
        raise ValueError(f"scale_mixture needs 0 < pi < 1 and positive sigmas, got pi={pi}, "
                         f"sigma1={sigma1}, sigma2={sigma2}")
    floatX = pytensor.config.floatX
    pi, sigma1, sigma2 = (np.asarray(v, dtype=floatX) for v in (pi, sigma1, sigma2))
    return pm.CustomDist(name, pi, sigma1 * scale, sigma2 * scale, dist=_scale_mixture_dist,
                         logp=_scale_mixture_logp, support_point=_zeros, class_name="ScaleMixture",
                         dims=dims)


def _scale_mixture_dist(pi, s1, s2, size):
    # Components on the last axis, as NormalMixture wants (a non-scalar scale broadcasts).
    sigma = pt.stack(pt.broadcast_arrays(s1, s2), axis=-1)
    w = pt.stack(pt.broadcast_arrays(pi, 1 - pi), axis=-1)
    return pm.NormalMixture.dist(w=w, mu=pt.zeros_like(sigma), sigma=sigma, size=size)


def _zeros(rv, size, pi, s1, s2):
    """The mixture's mean (NormalMixture's support point), from ``size``: not from
    ``rv``'s shape, which PyMC would get by drawing ``rv`` (a categorical per weight)."""
    if rv_size_is_none(size):
        return pt.zeros_like(pi * s1 * s2, dtype=rv.dtype)
    return pt.zeros(size, dtype=rv.dtype)


def _scale_mixture_logp(value, pi, s1, s2):
    """log(pi N(value; 0, s1^2) + (1 - pi) N(value; 0, s2^2)), elementwise and stable.

    ``max(a, b) + log1p(exp(-|a - b|))`` with the branch written out, so that
    the gradient is right at a tie too. ``log1p(exp(.))`` becomes pytensor's
    ``Softplus``, whose JAX gradient is finite only with
    :mod:`inference.jax_fixes` (imported by every fit and prediction).
    """
    a = pt.log(pi) + pm.logp(pm.Normal.dist(0.0, s1), value)
    b = pt.log1p(-pi) + pm.logp(pm.Normal.dist(0.0, s2), value)
    d = a - b
    return pt.switch(d > 0, a, b) + pt.log1p(pt.exp(pt.switch(d > 0, -d, d)))


@weight_prior("flat", uses_scale=False)
def flat(name, scale, dims):
    """Improper flat prior: maximum-likelihood-like; has no scale.

    Parameters
    ----------
    name : str
        The variable's name.
    scale : float or TensorVariable
        Ignored.
    dims : str or tuple of str
        The variable's dims.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.Flat(name, dims=dims)


# --- hyperpriors on a layer's prior scale ----------------------------------


@hyperprior("fixed")
def fixed(name, *, value=1.0):
    """A delta hyperprior: the scale is the constant ``value``.

    Parameters
    ----------
    name : str
        Unused (no variable is created).
    value : float, default 1.0
        The scale.

    Returns
    -------
    TensorVariable
        A constant in ``floatX``.

    Raises
    ------
    ValueError
        If ``value`` is not positive.
    """
    if not value > 0:
        raise ValueError(f"fixed scale must be positive, got {value}")
    return pt.constant(np.asarray(value, dtype="float64")).astype(pytensor.config.floatX)


@hyperprior("halfnormal")
def halfnormal(name, *, sigma=1.0):
    """HalfNormal(sigma) on the layer's scale.

    Parameters
    ----------
    name : str
        The variable's name.
    sigma : float, default 1.0
        Its sigma.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.HalfNormal(name, sigma=sigma)


@hyperprior("halfcauchy")
def halfcauchy(name, *, beta=1.0):
    """HalfCauchy(beta) on the layer's scale.

    Parameters
    ----------
    name : str
        The variable's name.
    beta : float, default 1.0
        Its beta.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.HalfCauchy(name, beta=beta)


@hyperprior("inversegamma")
def inversegamma(name, *, alpha=3.0, beta=4.0):
    """InverseGamma(alpha, beta) on the layer's scale; the defaults give mean 2 and mode 1.

    InverseGamma(3, 4) is the toy experiments' choice (docs/reproductions.md, "How the toy
    defaults were chosen"); the Bayesian CNN on MNIST keeps InverseGamma(3, 2).

    Parameters
    ----------
    name : str
        The variable's name.
    alpha : float, default 3.0
        Its shape.
    beta : float, default 4.0
        Its scale.

    Returns
    -------
    TensorVariable
        The random variable.
    """
    return pm.InverseGamma(name, alpha=alpha, beta=beta)


# --- lookup ----------------------------------------------------------------


def _resolve(registry: dict, kind: str, name: str, params: dict) -> Callable:
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(registry))}")
    fn = registry[name]
    allowed = [
        p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY
    ]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"{kind} {name!r} has no parameter {', '.join(unknown)}; "
            f"valid: {', '.join(allowed) or 'none'}"
        )
    return functools.partial(fn, **params)


def get_weight_prior(name: str, **params) -> Callable:
    """The weight prior ``name`` with default parameters overridden by ``params``.

    Parameters
    ----------
    name : str
        A name of :data:`WEIGHT_PRIORS`.
    **params
        Its keyword parameters (``pi=0.25`` for ``scale_mixture``, say).

    Returns
    -------
    callable
        ``fn(name, scale, dims)``.

    Raises
    ------
    ValueError
        For an unknown prior or parameter, listing the valid ones.
    """
    return _resolve(WEIGHT_PRIORS, "prior", name, params)


def get_hyperprior(name: str, **params) -> Callable:
    """The hyperprior ``name`` with default parameters overridden by ``params``.

    Parameters
    ----------
    name : str
        A name of :data:`HYPERPRIORS`.
    **params
        Its keyword parameters (``alpha=3, beta=4`` for ``inversegamma``, say).

    Returns
    -------
    callable
        ``fn(name)``.

    Raises
    ------
    ValueError
        For an unknown hyperprior or parameter, listing the valid ones.
    """
    return _resolve(HYPERPRIORS, "hyperprior", name, params)


def defaults(name: str) -> dict:
    """Default parameters of a registered prior or hyperprior.

    Parameters
    ----------
    name : str
        A name of :data:`WEIGHT_PRIORS` or :data:`HYPERPRIORS`.

    Returns
    -------
    dict
        Its keyword parameters and their defaults.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    fn = WEIGHT_PRIORS.get(name) or HYPERPRIORS.get(name)
    if fn is None:
        raise ValueError(f"unknown prior or hyperprior {name!r}")
    return {
        p.name: p.default
        for p in inspect.signature(fn).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }


# --- a choice of priors, selected by data ----------------------------------
# One compiled model serves several priors when the prior is an input: the log density of each
# candidate, the one selected by an integer index (a ``pm.Data`` container) kept. Each candidate's
# log density is PyMC's for the registered prior itself, so the model with the index at ``i`` has
# the log density of the model built with candidate ``i`` alone.


def _candidate(make, floatX: str, *args):
    """The random variable ``make(*args)`` creates, in a model of its own (not the caller's), under
    the ``floatX`` the choice was made under (PyMC builds a variable's log density when the model's
    is asked for, which may be under another precision)."""
    with pm.Model(model=None), pytensor.config.change_flags(floatX=floatX):
        return make(*args)


def _select(index, terms):
    """``terms[index]``, elementwise: the candidates' values, the one at ``index`` kept."""
    out = terms[-1]
    for i in range(len(terms) - 2, -1, -1):
        out = pt.switch(pt.eq(index, i), terms[i], out)
    return out


def weight_prior_choice(names, index, prior_params: dict | None = None) -> Callable:
    """A weight prior that is one of ``names``, the one at ``index``.

    The variable's log density is that of the prior ``names[index]`` (each
    one's PyMC density, evaluated and the selected one kept), so a model
    built with the choice and its index at ``i`` has the log density of the
    model built with ``names[i]``; its initial value is the selected prior's.
    A compiled model then serves every candidate: the index is data.

    Parameters
    ----------
    names : sequence of str
        Names of :data:`WEIGHT_PRIORS`.
    index : TensorVariable
        An integer scalar (a ``pm.Data`` container) selecting the prior.
    prior_params : dict, optional
        Each candidate's parameters by name (its defaults otherwise).

    Returns
    -------
    callable
        ``fn(name, scale, dims)``, as :func:`get_weight_prior`'s; its
        variable has a log density and an initial value, no random draws.

    Raises
    ------
    ValueError
        For an unknown prior or parameter, or fewer than two names.
    """
    names = list(names)
    if len(names) < 2:
        raise ValueError(f"a choice of weight priors needs at least two names, got {names!r}")
    makers = [get_weight_prior(n, **(prior_params or {}).get(n, {})) for n in names]
    floatX = pytensor.config.floatX

    def logp(value, scale, index):
        return _select(index, [pm.logp(_candidate(m, floatX, "w", scale, None), value) for m in makers])

    def support_point(rv, size, scale, index):
        from pymc.distributions.distribution import support_point as point_of

        point = _select(index, [point_of(_candidate(m, floatX, "w", scale, None)) for m in makers])
        return (pt.zeros_like(scale) if rv_size_is_none(size) else pt.zeros(size)).astype(rv.dtype) + point

    def prior(name, scale, dims):
        scale = pt.as_tensor(1.0 if scale is None else scale, dtype=pytensor.config.floatX)
        return pm.CustomDist(name, scale, index, logp=logp, support_point=support_point,
                             class_name="WeightPriorChoice", dims=dims)

    return prior


def hyperprior_choice(names, index, hyperprior_params: dict | None = None) -> Callable:
    """A hyperprior that is one of ``names``, the one at ``index``.

    As :func:`weight_prior_choice`: the scale's log density is the selected
    hyperprior's, its transform the one they share, its initial value the
    selected one's.

    Parameters
    ----------
    names : sequence of str
        Names of :data:`HYPERPRIORS` of random scales (not ``fixed``).
    index : TensorVariable
        An integer scalar (a ``pm.Data`` container) selecting the hyperprior.
    hyperprior_params : dict, optional
        Each candidate's parameters by name (its defaults otherwise).

    Returns
    -------
    callable
        ``fn(name)``, as :func:`get_hyperprior`'s.

    Raises
    ------
    ValueError
        For an unknown hyperprior or parameter, fewer than two names, a
        fixed scale among them, or candidates whose scales PyMC transforms
        differently.
    """
    from pymc.distributions.distribution import support_point as point_of
    from pymc.distributions.transforms import _default_transform

    names = list(names)
    if len(names) < 2 or "fixed" in names:
        raise ValueError(f"a choice of hyperpriors needs at least two names of random scales, got {names!r}")
    makers = [get_hyperprior(n, **(hyperprior_params or {}).get(n, {})) for n in names]
    floatX = pytensor.config.floatX
    transforms = [_default_transform(rv.owner.op, rv) for rv in (_candidate(m, floatX, "s") for m in makers)]
    if len({type(t) for t in transforms}) != 1:
        raise ValueError(f"the hyperpriors {names!r} have scales PyMC transforms differently; choose among ones alike")
    transform = transforms[0]

    def logp(value, index):
        return _select(index, [pm.logp(_candidate(m, floatX, "s"), value) for m in makers])

    def support_point(rv, size, index):
        return _select(index, [point_of(_candidate(m, floatX, "s")) for m in makers]).astype(rv.dtype)

    def scale(name):
        return pm.CustomDist(name, index, logp=logp, support_point=support_point, transform=transform,
                             class_name="HyperpriorChoice", dtype=floatX)

    return scale
