"""The variational families: Gaussians over the model's unconstrained values, flattened.

Both store their parameters in PyMC's own layout, so that a fitted q converts
to a ``pymc.variational`` approximation and back without reshaping:

- mean-field (``"advi"``): ``mu`` and ``rho``, with ``sd = softplus(rho)``;
- full-rank (``"fullrank_advi"``): ``mu`` and ``L_tril``, the Cholesky
  factor packed row-major, with ``softplus`` applied to its diagonal.

A :class:`Family` gives everything the engine, the posterior code and the
checkpoints need: initial parameters, the reparameterised draw ``z = mu +
L eps`` with ``log |det L|`` (JAX, for the objective), and the mean and
factor as NumPy arrays (for draws, ``log q`` and conversions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pymc.variational as pmvi
import scipy.linalg

from bnn_zoo.inference import defaults

__all__ = ["FAMILIES", "FULL_RANK", "MEAN_FIELD", "METHODS", "Family", "FullRank", "MeanField", "covariance",
           "entropy", "get", "inverse_softplus", "log_q", "resolve", "sample", "softplus"]

@jax.custom_jvp
def softplus(x):
    """``log(1 + exp(x))``, cheaper than ``jax.nn.softplus`` with its gradient on CPU.

    XLA's CPU ``log1p`` is slow, so ``log1p(u)`` is computed as
    ``log(1 + u) * u / ((1 + u) - 1)`` (exact to a few ulps; Goldberg 1991),
    and the gradient ``sigmoid(x)`` reuses ``exp(-|x|)``
    (docs/user_guide/engine.md).

    Parameters
    ----------
    x : jax.Array
        Any float array.

    Returns
    -------
    jax.Array
        ``softplus(x)``, elementwise, in ``x``'s dtype.
    """
    return _softplus_and_sigmoid(x)[0]


def _softplus_and_sigmoid(x):
    e = jnp.exp(-jnp.abs(x))  # in (0, 1]
    one_e = 1.0 + e
    log1p_e = jnp.where(one_e == 1.0, e, jnp.log(one_e) * e / (one_e - 1.0))
    return jnp.maximum(x, 0.0) + log1p_e, jnp.where(x >= 0, 1.0, e) / one_e


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    value, slope = _softplus_and_sigmoid(primals[0])
    return value, slope * tangents[0]


def inverse_softplus(y):
    """``rho`` with ``softplus(rho) = y``, in NumPy: a mean-field sd as its parameter ``rho``.

    Parameters
    ----------
    y : array_like
        Positive values.

    Returns
    -------
    numpy.ndarray
        ``log(expm1(y))``.
    """
    return np.log(np.expm1(y))


@dataclass(frozen=True)
class Family:
    """One variational family: how its parameters make a draw, and what they mean.

    The two families are :data:`MEAN_FIELD` and :data:`FULL_RANK`
    (:func:`get` by name). Their parameters are a dict of arrays in PyMC's
    own layout: ``mu`` and ``rho`` (``sd = softplus(rho)``), or ``mu`` and
    ``L_tril`` (the Cholesky factor's lower triangle, row-major, with
    ``softplus`` applied to its diagonal).

    Parameters
    ----------
    name : str
        ``"advi"`` or ``"fullrank_advi"``, as ``bnn_zoo.fit``'s ``method``.
    pymc : type
        The ``pymc.variational`` approximation with the same parameters
        (``MeanField`` or ``FullRank``).
    init : callable
        ``init(mean, sd) -> params``: the parameters of a Gaussian with
        this mean vector and these sds (a scalar or one per coordinate), in
        NumPy.
    draw : callable
        ``draw(params, eps) -> (z, log_det)``: the reparameterised draw
        ``z = mu + L eps`` of one standard-normal row ``eps`` and
        ``log |det L|``, in JAX.
    log_density : callable
        ``log_density(params, z) -> log q(z)``, in JAX.
    factor : callable
        ``factor(params) -> (mu, factor)``: the mean and the sd vector
        (mean-field) or the Cholesky factor ``L`` (full-rank), in NumPy.
    """

    name: str
    pymc: type  # the pymc.variational approximation with the same parameters
    init: Callable[[np.ndarray, np.ndarray], dict]  # (initial mean, initial sds) -> parameters
    draw: Callable  # (params, eps) -> (z, log|det L|), in JAX
    log_density: Callable  # (params, z) -> log q(z), in JAX
    factor: Callable[[dict], tuple[np.ndarray, np.ndarray]]  # params -> (mu, sd vector or L)

    def mean_and_factor(self, params: dict) -> tuple[np.ndarray, np.ndarray]:
        """q's mean and factor in float64 NumPy.

        Parameters
        ----------
        params : dict of str to array_like
            The family's parameters.

        Returns
        -------
        mu : numpy.ndarray
            The mean, ``(dim,)``.
        factor : numpy.ndarray
            The sd vector ``(dim,)`` (mean-field) or the lower-triangular
            Cholesky factor ``L``, ``(dim, dim)`` (full-rank).
        """
        return self.factor({k: np.asarray(v, dtype="float64") for k, v in params.items()})


def _mean_field_draw(params, eps):
    sd = softplus(params["rho"])
    # The draw is made once, behind a barrier: otherwise XLA recomputes it inside
    # each of its consumers, and copies the donated ``mu`` so that the in-place
    # update cannot overwrite it too early.
    return jax.lax.optimization_barrier(params["mu"] + sd * eps), jnp.sum(jnp.log(sd))


def _mean_field_log_density(params, z):
    sd = softplus(params["rho"])
    return _normal_log_density((z - params["mu"]) / sd, jnp.sum(jnp.log(sd)))


def _cholesky(params):
    d = params["mu"].shape[0]
    rows, cols = np.tril_indices(d)
    L = jnp.zeros((d, d), params["mu"].dtype).at[rows, cols].set(params["L_tril"])
    diag = softplus(jnp.diagonal(L))
    return L.at[np.arange(d), np.arange(d)].set(diag), jnp.sum(jnp.log(diag))


def _full_rank_draw(params, eps):
    L, log_det = _cholesky(params)
    return params["mu"] + L @ eps, log_det


def _full_rank_log_density(params, z):
    L, log_det = _cholesky(params)
    return _normal_log_density(jax.scipy.linalg.solve_triangular(L, z - params["mu"], lower=True),
                               log_det)


def _normal_log_density(eps, log_det):
    return -0.5 * jnp.sum(eps**2) - log_det - 0.5 * eps.shape[-1] * np.log(2 * np.pi)


def _full_rank_init(mu, sd):
    d = mu.size
    L = np.diag(np.broadcast_to(inverse_softplus(sd), (d,)))
    return {"mu": mu, "L_tril": L[np.tril_indices(d)].astype(mu.dtype)}


def _full_rank_factor(params):
    mu = params["mu"]
    d = mu.size
    L = np.zeros((d, d))
    L[np.tril_indices(d)] = params["L_tril"]
    L[np.diag_indices(d)] = np.logaddexp(0.0, np.diag(L))
    return mu, L


#: Mean-field q (``"advi"``): ``mu`` and ``rho``, with ``sd = softplus(rho)``.
MEAN_FIELD = Family(
    name="advi", pymc=pmvi.MeanField,
    init=lambda mu, sd: {"mu": mu, "rho": np.broadcast_to(inverse_softplus(sd), mu.shape).astype(mu.dtype)},
    draw=_mean_field_draw, log_density=_mean_field_log_density,
    factor=lambda params: (params["mu"], np.logaddexp(0.0, params["rho"])),
)
#: Full-rank q (``"fullrank_advi"``): ``mu`` and ``L_tril``, the Cholesky factor packed row-major.
FULL_RANK = Family(name="fullrank_advi", pymc=pmvi.FullRank, init=_full_rank_init,
                   draw=_full_rank_draw, log_density=_full_rank_log_density,
                   factor=_full_rank_factor)
#: The families by name.
FAMILIES = {f.name: f for f in (MEAN_FIELD, FULL_RANK)}
#: The names ``bnn_zoo.fit``'s ``method`` takes: ``("advi", "fullrank_advi")``.
METHODS = tuple(FAMILIES)


def get(method: str) -> Family:
    """The variational family of a method name.

    Parameters
    ----------
    method : {"advi", "fullrank_advi"}
        The name, as ``bnn_zoo.fit``'s ``method``.

    Returns
    -------
    Family
        :data:`MEAN_FIELD` or :data:`FULL_RANK`.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if method not in FAMILIES:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    return FAMILIES[method]


@dataclass(frozen=True)
class MeanField:
    """Mean-field Gaussian q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"advi"``).

    q is a Gaussian with a diagonal covariance over the model's unconstrained
    values: ``z = mu + softplus(rho) * eps``.

    Parameters
    ----------
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd of every unconstrained value. PyMC's default (about
        0.7) makes wide networks produce NaN (docs/user_guide/engine.md).

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.MeanField(init_std=0.1)
    MeanField(init_std=0.1)
    """

    init_std: float = defaults.INIT_STD
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "advi"

    def __post_init__(self):
        _check_init_std(self)


@dataclass(frozen=True)
class FullRank:
    """Full-rank Gaussian q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"fullrank_advi"``).

    q is a Gaussian with a dense covariance ``L L^T`` over the model's
    unconstrained values: ``z = mu + L eps``, ``d (d + 3) / 2`` parameters.
    Without ``init``, ``fit`` starts it from a mean-field fit of the first
    :data:`~bnn_zoo.inference.defaults.WARM_START` of the steps.

    Parameters
    ----------
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd of every unconstrained value (of the mean-field phase).

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.FullRank()
    FullRank(init_std=0.01)
    """

    init_std: float = defaults.INIT_STD
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "fullrank_advi"

    def __post_init__(self):
        _check_init_std(self)


def _check_init_std(spec) -> None:
    value = spec.init_std
    if not (isinstance(value, (int, float, np.number)) and value > 0 and np.isfinite(value)):
        raise ValueError(f"{type(spec).__name__}'s init_std must be positive and finite, got {value!r}")


def resolve(method) -> tuple[Family, float]:
    """The family and initial sd that ``bnn_zoo.fit``'s ``method`` names.

    Parameters
    ----------
    method : {"advi", "fullrank_advi"} or MeanField or FullRank
        A method's name (at the default ``init_std``) or a family value.

    Returns
    -------
    family : Family
        :data:`MEAN_FIELD` or :data:`FULL_RANK`.
    init_std : float
        q's initial sd.

    Raises
    ------
    ValueError
        For anything else, naming what ``method`` takes.
    """
    if isinstance(method, (MeanField, FullRank)):
        return FAMILIES[method.name], float(method.init_std)
    if isinstance(method, str) and method in FAMILIES:
        return FAMILIES[method], float(defaults.INIT_STD)
    raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}, bnn_zoo.MeanField(...) "
                     "or bnn_zoo.FullRank(...)")


def entropy(log_det, dim: int):
    """Entropy of a ``dim``-dimensional Gaussian whose factor has ``log |det L| = log_det``.

    Parameters
    ----------
    log_det : float or jax.Array
        ``log |det L|``, the sum of the log sds (mean-field) or of the log
        diagonal of the Cholesky factor (full-rank).
    dim : int
        The dimension.

    Returns
    -------
    float or jax.Array
        ``log_det + dim / 2 * (1 + log(2 pi))``.
    """
    return log_det + 0.5 * dim * (1.0 + np.log(2 * np.pi))


# --- NumPy: draws and densities of a fitted q --------------------------------


def sample(mu: np.ndarray, factor: np.ndarray, n: int, rng: np.random.Generator):
    """``n`` draws of q, and their ``log q``, in NumPy.

    Parameters
    ----------
    mu : numpy.ndarray
        q's mean, ``(dim,)``.
    factor : numpy.ndarray
        The sd vector ``(dim,)`` or the Cholesky factor ``(dim, dim)``
        (:meth:`Family.mean_and_factor`).
    n : int
        The number of draws.
    rng : numpy.random.Generator
        The source of the standard-normal noise.

    Returns
    -------
    z : numpy.ndarray
        ``(n, dim)``, one draw per row.
    log_q : numpy.ndarray
        ``(n,)``, q's log density at each draw.
    """
    eps = rng.standard_normal((n, mu.size))
    z = mu + eps * factor if factor.ndim == 1 else mu + eps @ factor.T
    return z, _log_q_of_eps(eps, factor)


def log_q(mu: np.ndarray, factor: np.ndarray, z: np.ndarray) -> np.ndarray:
    """q's log density at each row of ``z``, in NumPy.

    Parameters
    ----------
    mu : numpy.ndarray
        q's mean, ``(dim,)``.
    factor : numpy.ndarray
        The sd vector ``(dim,)`` or the Cholesky factor ``(dim, dim)``.
    z : numpy.ndarray
        ``(n, dim)`` points.

    Returns
    -------
    numpy.ndarray
        ``(n,)``, ``log q(z)`` of each row.
    """
    if factor.ndim == 1:
        eps = (z - mu) / factor
    else:
        eps = scipy.linalg.solve_triangular(factor, (z - mu).T, lower=True).T
    return _log_q_of_eps(eps, factor)


def _log_q_of_eps(eps: np.ndarray, factor: np.ndarray) -> np.ndarray:
    diag = factor if factor.ndim == 1 else np.diag(factor)
    d = eps.shape[1]
    return -0.5 * np.sum(eps**2, axis=1) - np.sum(np.log(np.abs(diag))) - 0.5 * d * np.log(2 * np.pi)


def covariance(factor: np.ndarray) -> np.ndarray:
    """q's covariance matrix from its factor.

    Parameters
    ----------
    factor : numpy.ndarray
        The sd vector ``(dim,)`` or the Cholesky factor ``L``, ``(dim, dim)``.

    Returns
    -------
    numpy.ndarray
        ``(dim, dim)``: ``diag(sd**2)`` or ``L @ L.T``.
    """
    return np.diag(factor**2) if factor.ndim == 1 else factor @ factor.T
