"""The variational families: Gaussians over the model's unconstrained values, flattened.

- mean-field (``"advi"``): ``mu`` and ``rho``, ``z = mu + softplus(rho) * eps``;
- low-rank (``"lowrank_advi"``): ``mu``, ``rho`` and ``W`` ``(dim, rank)``,
  ``z = mu + s * (eps + W eta)``, covariance ``diag(s) (I + W W^T) diag(s)``;
- full-rank (``"fullrank_advi"``): ``mu``, ``rho`` and ``T_tril``, the
  strictly lower triangle of ``T``, ``z = mu + s * (eps + T eps)``: the
  Cholesky factor ``L = diag(s) (I + T)``.

The low-rank and full-rank factors are scaled by ``s``, so that an
optimiser's step on ``W`` or ``T`` (about its learning rate in every entry,
for Adam) changes each row's variance relative to that row's own, whatever
the dimension: an unscaled Cholesky factor gains about ``dim * lr**2`` of
variance in every row, enough to ruin a fit of a few hundred dimensions
(docs/user_guide/families.md). A fitted full-rank q converts to PyMC's
``FullRank`` (``to_pymc``) and a mean-field one to ``MeanField``.

A :class:`Family` gives everything the engine, the posterior code and the
checkpoints need: initial parameters, the reparameterised draw with
``log |det A|`` (JAX, for the objective), and the mean and factor in NumPy
(:mod:`~bnn_zoo.inference.gaussians`, for draws, ``log q`` and conversions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pymc.variational as pmvi

from bnn_zoo.inference import gaussians

__all__ = ["FAMILIES", "FULL_RANK", "LOW_RANK", "LOW_RANK_EIGEN", "MEAN_FIELD", "Family",
           "check_rank_setting", "default_rank", "entropy", "get", "inverse_softplus", "low_rank", "resolve_rank",
           "softplus"]

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
        ``log(expm1(y))``, computed as ``y + log(-expm1(-y))`` so that an
        sd above about 709 (where ``expm1(y)`` overflows) stays finite.
    """
    y = np.asarray(y)
    return y + np.log(-np.expm1(-y))


@dataclass(frozen=True)
class Family:
    """One variational family: how its parameters make a draw, and what they mean.

    The families are :data:`MEAN_FIELD`, :data:`FULL_RANK` and
    :func:`low_rank` (:func:`get` by name); each is a Gaussian ``z = mu + A
    eps`` over the model's unconstrained values, stored as a dict of arrays.

    Parameters
    ----------
    name : str
        ``"advi"``, ``"fullrank_advi"`` or ``"lowrank_advi"``, as
        ``bnn_zoo.fit``'s ``method``.
    pymc : type or None
        The ``pymc.variational`` approximation of the same q (``MeanField``
        or ``FullRank``; ``None``: PyMC has none).
    init : callable
        ``init(mean, sd) -> params``: the parameters of a Gaussian with
        this mean vector and these sds (a scalar or one per coordinate), in
        NumPy.
    draw : callable
        ``draw(params, eps) -> (z, log_det)``: the reparameterised draw
        ``z = mu + A eps`` of one standard-normal row ``eps`` (of
        ``noise_size(params)`` values) and ``log |det A|``, the log square
        root of the determinant of q's covariance, in JAX.
    log_density : callable
        ``log_density(params, z) -> log q(z)``, in JAX.
    factor : callable
        ``factor(params) -> (mu, factor)``: the mean and the factor of
        :mod:`~bnn_zoo.inference.gaussians` (sd vector, Cholesky factor or
        :class:`~bnn_zoo.inference.gaussians.LowRank`), in NumPy.
    from_factor : callable
        ``from_factor(mu, factor) -> params``: the inverse of ``factor``,
        for a factor of this family's form.
    noise_size : callable
        ``noise_size(params) -> int``: the standard-normal values one draw
        takes (the dimension, plus the rank for the low-rank family).
    to_pymc : callable
        ``to_pymc(params) -> dict``: the parameters of the ``pymc``
        approximation.
    """

    name: str
    pymc: type | None
    init: Callable[[np.ndarray, np.ndarray], dict]
    draw: Callable
    log_density: Callable
    factor: Callable[[dict], tuple]
    from_factor: Callable[[np.ndarray, object], dict]
    noise_size: Callable[[dict], int] = lambda params: params["mu"].shape[0]
    to_pymc: Callable[[dict], dict] = lambda params: dict(params)

    def mean_and_factor(self, params: dict) -> tuple:
        """q's mean and factor in float64 NumPy.

        Parameters
        ----------
        params : dict of str to array_like
            The family's parameters.

        Returns
        -------
        mu : numpy.ndarray
            The mean, ``(dim,)``.
        factor : numpy.ndarray or bnn_zoo.inference.gaussians.LowRank
            The sd vector ``(dim,)`` (mean-field), the lower-triangular
            Cholesky factor ``L`` ``(dim, dim)`` (full-rank), or a
            :class:`~bnn_zoo.inference.gaussians.LowRank` (low-rank).
        """
        return self.factor({k: np.asarray(v, dtype="float64") for k, v in params.items()})


def _normal_log_density(eps, log_det):
    return -0.5 * jnp.sum(eps**2) - log_det - 0.5 * eps.shape[-1] * np.log(2 * np.pi)


# --- mean-field: z = mu + softplus(rho) * eps -----------------------------------


def _mean_field_draw(params, eps):
    sd = softplus(params["rho"])
    # The draw is made once, behind a barrier: otherwise XLA recomputes it inside
    # each of its consumers, and copies the donated ``mu`` so that the in-place
    # update cannot overwrite it too early.
    return jax.lax.optimization_barrier(params["mu"] + sd * eps), jnp.sum(jnp.log(sd))


def _mean_field_log_density(params, z):
    sd = softplus(params["rho"])
    return _normal_log_density((z - params["mu"]) / sd, jnp.sum(jnp.log(sd)))


def _mean_field_init(mu, sd):
    return {"mu": mu, "rho": np.broadcast_to(inverse_softplus(sd), mu.shape).astype(mu.dtype)}


# --- full rank: z = mu + s * (eps + T eps), T strictly lower-triangular ----------


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
    return _normal_log_density(eps, jnp.sum(jnp.log(s)))


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


# --- low rank: z = mu + s * (eps_d + W eps_k) -------------------------------------


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


def check_rank_setting(rank, owner: str) -> None:
    """Raise ``ValueError`` unless ``rank`` is ``None`` or a positive integer.

    Parameters
    ----------
    rank : object
        A ``rank`` setting.
    owner : str
        The setting's owner, named in the message (``"LowRank"``).
    """
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1):
        raise ValueError(f"{owner}'s rank must be a positive integer (or None for sqrt(dim)), got {rank!r}")


def resolve_rank(rank: int | None, dim: int, owner: str, instead: str) -> int:
    """``rank`` (default :func:`default_rank`), after checking that it lies between 1 and ``dim - 1``.

    Parameters
    ----------
    rank : int or None
        The rank asked for.
    dim : int
        The number of unconstrained values.
    owner : str
        The setting's owner, named in the message (``"LowRank"``).
    instead : str
        What to use for all of the values, named in the message.

    Returns
    -------
    int
        The rank.
    """
    k = default_rank(dim) if rank is None else rank
    if not 1 <= k < max(dim, 2):
        raise ValueError(f"{owner}(rank={k}): the rank must be between 1 and {dim - 1} for this model of "
                         f"{dim} unconstrained values (use {instead})")
    return k


def default_rank(dim: int) -> int:
    """The low-rank family's default rank: ``round(sqrt(dim))``, at least 1 (NumPyro's and pymc-extras').

    Parameters
    ----------
    dim : int
        The number of unconstrained values.

    Returns
    -------
    int
        The rank.
    """
    return max(1, int(round(np.sqrt(dim))))


def low_rank(rank: int | None = None) -> Family:
    """The low-rank-plus-diagonal family of rank ``rank``: ``cov = diag(s) (I + W W^T) diag(s)``.

    Parameters
    ----------
    rank : int, optional
        The columns of ``W``, in ``1..dim - 1``; default :func:`default_rank`.

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


# --- low rank in eigen form, the low-rank Laplace approximation's -----------------


def _eigen_draw(params, eps):
    s, U, m = params["scale"], params["U"], params["m"]
    z = params["mu"] + s * (eps + U @ ((jnp.sqrt(1 + m) - 1) * (U.T @ eps)))
    return z, jnp.sum(jnp.log(s)) + 0.5 * jnp.sum(jnp.log1p(m))


def _eigen_log_density(params, z):
    s, U, m = params["scale"], params["U"], params["m"]
    u = (z - params["mu"]) / s
    eps = u + U @ ((1 / jnp.sqrt(1 + m) - 1) * (U.T @ u))
    return _normal_log_density(eps, jnp.sum(jnp.log(s)) + 0.5 * jnp.sum(jnp.log1p(m)))


def _eigen_from_factor(mu, factor):
    s, U, m = factor
    return {"mu": mu, "scale": np.asarray(s, mu.dtype), "U": np.asarray(U, mu.dtype), "m": np.asarray(m, mu.dtype)}


#: Mean-field q (``"advi"``): ``mu`` and ``rho``, with ``sd = softplus(rho)``.
MEAN_FIELD = Family(
    name="advi", pymc=pmvi.MeanField, init=_mean_field_init,
    draw=_mean_field_draw, log_density=_mean_field_log_density,
    factor=lambda params: (params["mu"], np.logaddexp(0.0, params["rho"])),
    from_factor=lambda mu, sd: _mean_field_init(mu, np.asarray(sd)),
)
#: Full-rank q (``"fullrank_advi"``): ``mu``, ``rho`` and ``T_tril``, the strictly lower triangle
#: of ``T`` packed row-major; ``z = mu + softplus(rho) * (eps + T eps)``.
FULL_RANK = Family(name="fullrank_advi", pymc=pmvi.FullRank,
                   init=lambda mu, sd: _full_rank_from_factor(mu, np.asarray(sd, dtype="float64")),
                   draw=_full_rank_draw, log_density=_full_rank_log_density,
                   factor=_full_rank_factor, from_factor=_full_rank_from_factor, to_pymc=_full_rank_to_pymc)
#: Low-rank q (``"lowrank_advi"``) at the default rank: ``mu``, ``rho`` and ``W``, ``(dim, rank)``.
LOW_RANK = low_rank()


def _eigen_init(mu, sd):
    raise ValueError("the Laplace approximation's low-rank family is not fitted by ADVI: "
                     "use method='lowrank_advi'")


#: A :class:`~bnn_zoo.inference.gaussians.LowRank` q as it is, ``mu``, ``scale``, ``U`` and ``m``:
#: the low-rank Laplace approximation's (:mod:`~bnn_zoo.inference.laplace`); not fitted by ADVI.
LOW_RANK_EIGEN = Family(name="lowrank_eigen", pymc=None, init=_eigen_init, draw=_eigen_draw,
                        log_density=_eigen_log_density,
                        factor=lambda p: (p["mu"], gaussians.LowRank(p["scale"], p["U"], p["m"])),
                        from_factor=_eigen_from_factor, to_pymc=_no_pymc)
#: The families ADVI fits, by the name ``bnn_zoo.fit``'s ``method`` takes for each.
FAMILIES = {f.name: f for f in (MEAN_FIELD, LOW_RANK, FULL_RANK)}


def get(method: str) -> Family:
    """The variational family of a method name.

    Parameters
    ----------
    method : {"advi", "lowrank_advi", "fullrank_advi"}
        The name, as ``bnn_zoo.fit``'s ``method``.

    Returns
    -------
    Family
        :data:`MEAN_FIELD`, :data:`LOW_RANK` or :data:`FULL_RANK`.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if method not in FAMILIES:
        raise ValueError(f"unknown ADVI family {method!r}; valid: {', '.join(FAMILIES)}")
    return FAMILIES[method]


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
