"""What every variational family is: :class:`Family`, and the pieces the families share.

A :class:`Family` gives everything the engine, the posterior code and the
checkpoints need: initial parameters, the reparameterised draw with
``log |det A|`` (JAX, for the objective), and the mean and factor in NumPy
(:mod:`~bnn_zoo.inference.families.gaussians`, for draws, ``log q`` and conversions).
The scales are ``softplus(rho)`` (:func:`softplus`, :func:`inverse_softplus`),
the entropy a Gaussian's (:func:`entropy`), and a rank setting is checked
here (:func:`check_rank_setting`, :func:`resolve_rank`, :func:`default_rank`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bnn_zoo.inference.families import gaussians

__all__ = ["Family", "check_rank_setting", "default_rank", "entropy", "inverse_softplus", "normal_log_density",
           "resolve_rank", "softplus"]


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

    The families are :data:`~bnn_zoo.inference.families.MEAN_FIELD`,
    :data:`~bnn_zoo.inference.families.FULL_RANK` and
    :func:`~bnn_zoo.inference.families.low_rank` (:func:`~bnn_zoo.inference.families.get`
    by name); each is a Gaussian ``z = mu + A eps`` over the model's
    unconstrained values, stored as a dict of arrays.

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
        :mod:`~bnn_zoo.inference.families.gaussians` (sd vector, Cholesky factor or
        :class:`~bnn_zoo.inference.families.gaussians.LowRank`), in NumPy.
    from_factor : callable
        ``from_factor(mu, factor) -> params``: the inverse of ``factor``,
        for a factor of this family's form.
    noise_size : callable
        ``noise_size(params) -> int``: the standard-normal values one draw
        takes (the dimension, plus the rank for the low-rank family).
    to_pymc : callable
        ``to_pymc(params) -> dict``: the parameters of the ``pymc``
        approximation.
    sampler : callable, optional
        ``sampler(params, n, rng) -> (z, log_q)`` in NumPy, for a family
        that is not a Gaussian (default: a Gaussian's, from ``factor``).
    log_q_fn : callable, optional
        ``log_q_fn(params, z) -> log q(z)`` in NumPy, likewise.
    exact_entropy : bool, default True
        Whether ``draw``'s ``log_det`` gives q's entropy exactly (a
        Gaussian's); ``False``: each draw's ``log_det`` makes that draw's
        ``-log q(z)``, and the objective averages them.
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
    sampler: Callable | None = None
    log_q_fn: Callable | None = None
    exact_entropy: bool = True

    def sample(self, params: dict, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` draws of q in float64 NumPy, with ``log q`` at each.

        Parameters
        ----------
        params : dict of str to array_like
            The family's parameters.
        n : int
            The number of draws.
        rng : numpy.random.Generator
            Seeds the draws.

        Returns
        -------
        z : numpy.ndarray
            ``(n, dim)``.
        log_q : numpy.ndarray
            ``(n,)``.
        """
        if self.sampler is not None:
            return self.sampler(params, n, rng)
        return gaussians.sample(*self.mean_and_factor(params), n, rng)

    def log_q(self, params: dict, z: np.ndarray) -> np.ndarray:
        """``log q(z)`` of each row of ``z``, in float64 NumPy.

        Parameters
        ----------
        params : dict of str to array_like
            The family's parameters.
        z : numpy.ndarray
            ``(n, dim)`` unconstrained values.

        Returns
        -------
        numpy.ndarray
            ``(n,)``.
        """
        if self.log_q_fn is not None:
            return self.log_q_fn(params, z)
        return gaussians.log_q(*self.mean_and_factor(params), z)

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
        factor : numpy.ndarray or bnn_zoo.inference.families.gaussians.LowRank
            The sd vector ``(dim,)`` (mean-field), the lower-triangular
            Cholesky factor ``L`` ``(dim, dim)`` (full-rank), or a
            :class:`~bnn_zoo.inference.families.gaussians.LowRank` (low-rank).
        """
        return self.factor({k: np.asarray(v, dtype="float64") for k, v in params.items()})


def normal_log_density(eps, log_det):
    """``log N(eps; 0, I) - log_det``: a Gaussian's log density at ``z = mu + A eps``, ``log |det A| = log_det``.

    Parameters
    ----------
    eps : jax.Array
        The standardised point, ``(dim,)``.
    log_det : jax.Array
        ``log |det A|``.

    Returns
    -------
    jax.Array
        The log density.
    """
    return -0.5 * jnp.sum(eps**2) - log_det - 0.5 * eps.shape[-1] * np.log(2 * np.pi)


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
