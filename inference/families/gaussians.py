"""A fitted q: draws, log densities, covariances and marginal sds of its Gaussian.

A Gaussian over the flat unconstrained vector is its mean and one of three
factors, as :meth:`~bnn_zoo.inference.families.Family.mean_and_factor` gives
them:

- a vector of sds ``(dim,)`` (mean-field);
- a lower-triangular Cholesky factor ``L`` ``(dim, dim)``, covariance
  ``L L^T`` (full rank, and the Laplace approximation's dense form);
- a :class:`LowRank`: covariance ``diag(s) (I + U diag(m) U^T) diag(s)``
  with orthonormal ``U`` ``(dim, rank)`` and ``m > -1`` (the low-rank
  family, and the low-rank Laplace approximation), in ``O(dim rank)``
  memory.

:func:`transform` turns standard-normal noise into draws in NumPy or, in a
compiled program, ``jax.numpy``: :func:`sample` and a sweep's device
program make their draws with it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg

__all__ = ["LowRank", "covariance", "log_q", "marginal_sd", "sample", "transform"]


class LowRank(NamedTuple):
    """A low-rank-plus-diagonal covariance ``diag(s) (I + U diag(m) U^T) diag(s)``.

    Parameters
    ----------
    scale : numpy.ndarray
        ``s``, ``(dim,)``, positive.
    directions : numpy.ndarray
        ``U``, ``(dim, rank)``, orthonormal columns.
    weights : numpy.ndarray
        ``m``, ``(rank,)``, each above -1: the variance added (``m > 0``) or
        removed (``m < 0``) along each direction, relative to ``s``.
    """

    scale: np.ndarray
    directions: np.ndarray
    weights: np.ndarray

    @classmethod
    def from_factor(cls, scale: np.ndarray, W: np.ndarray) -> "LowRank":
        """The covariance ``diag(s) (I + W W^T) diag(s)`` of any ``W`` ``(dim, rank)``.

        Parameters
        ----------
        scale : numpy.ndarray
            ``s``, ``(dim,)``.
        W : numpy.ndarray
            ``(dim, rank)``.

        Returns
        -------
        LowRank
            With ``U`` from the thin QR decomposition of ``W`` rotated to
            the eigenvectors of ``R R^T``, ``m`` its eigenvalues.
        """
        Q, R = np.linalg.qr(W)
        m, V = np.linalg.eigh(R @ R.T)
        return cls(scale, Q @ V, np.maximum(m, 0.0))


def _log_det(factor, xp=np):
    """``log |det A|`` of the factor's square root ``A`` (sd vector, Cholesky factor or LowRank)."""
    if isinstance(factor, LowRank):
        return xp.sum(xp.log(factor.scale)) + 0.5 * xp.sum(xp.log1p(factor.weights))
    return xp.sum(xp.log(factor if factor.ndim == 1 else xp.abs(xp.diagonal(factor))))


def _standardise(mu, factor, z):
    """``eps`` with ``z = mu + A eps`` for the factor's square root ``A``."""
    if isinstance(factor, LowRank):
        s, U, m = factor
        u = (z - mu) / s
        return u + ((u @ U) * (1 / np.sqrt(1 + m) - 1)) @ U.T
    if factor.ndim == 1:
        return (z - mu) / factor
    return scipy.linalg.solve_triangular(factor, (z - mu).T, lower=True).T


def sample(mu: np.ndarray, factor, n: int, rng: np.random.Generator):
    """``n`` draws of q, and their ``log q``.

    Parameters
    ----------
    mu : numpy.ndarray
        q's mean, ``(dim,)``.
    factor : numpy.ndarray or LowRank
        The sd vector ``(dim,)``, the Cholesky factor ``(dim, dim)`` or a
        :class:`LowRank`.
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

    Examples
    --------
    >>> import numpy as np
    >>> from bnn_zoo.inference.families import gaussians
    >>> q = gaussians.LowRank.from_factor(np.ones(3), np.array([[1.0], [1.0], [0.0]]))
    >>> z, _ = gaussians.sample(np.zeros(3), q, 100_000, np.random.default_rng(0))
    >>> np.round(np.cov(z.T), 1) + 0.0  # + 0.0: no -0.0
    array([[2., 1., 0.],
           [1., 2., 0.],
           [0., 0., 1.]])
    """
    return transform(mu, factor, rng.standard_normal((n, mu.size)))


def transform(mu, factor, eps, xp=np):
    """Draws ``z = mu + A eps`` of q from standard-normal ``eps``, and their ``log q``.

    What :func:`sample` does with its noise, in any array namespace ``xp``
    with NumPy's names (``jax.numpy`` in a compiled program, where it is
    vmapped over fits): the one place q's draws are made.

    Parameters
    ----------
    mu : array
        q's mean, ``(dim,)``.
    factor : array or LowRank
        As in :func:`sample`.
    eps : array
        ``(n, dim)`` standard-normal noise.
    xp : module, default numpy
        The array namespace.

    Returns
    -------
    z : array
        ``(n, dim)``.
    log_q : array
        ``(n,)``.
    """
    if isinstance(factor, LowRank):
        s, U, m = factor
        z = mu + s * (eps + ((eps @ U) * (xp.sqrt(1 + m) - 1)) @ U.T)
    else:
        z = mu + (eps * factor if factor.ndim == 1 else eps @ factor.T)
    return z, _log_q_of_eps(eps, _log_det(factor, xp), xp)


def log_q(mu: np.ndarray, factor, z: np.ndarray) -> np.ndarray:
    """q's log density at each row of ``z``.

    Parameters
    ----------
    mu : numpy.ndarray
        q's mean, ``(dim,)``.
    factor : numpy.ndarray or LowRank
        As in :func:`sample`.
    z : numpy.ndarray
        ``(n, dim)`` points.

    Returns
    -------
    numpy.ndarray
        ``(n,)``, ``log q(z)`` of each row.
    """
    return _log_q_of_eps(_standardise(mu, factor, z), _log_det(factor))


def _log_q_of_eps(eps, log_det, xp=np):
    d = eps.shape[1]
    return -0.5 * xp.sum(eps**2, axis=1) - log_det - 0.5 * d * np.log(2 * np.pi)


def covariance(factor) -> np.ndarray:
    """q's covariance matrix from its factor.

    Parameters
    ----------
    factor : numpy.ndarray or LowRank
        As in :func:`sample`.

    Returns
    -------
    numpy.ndarray
        ``(dim, dim)``.
    """
    if isinstance(factor, LowRank):
        s, U, m = factor
        return s[:, None] * (np.eye(s.size) + (U * m) @ U.T) * s[None, :]
    return np.diag(factor**2) if factor.ndim == 1 else factor @ factor.T


def marginal_sd(factor) -> np.ndarray:
    """q's marginal sd of each coordinate, without forming the covariance.

    Parameters
    ----------
    factor : numpy.ndarray or LowRank
        As in :func:`sample`.

    Returns
    -------
    numpy.ndarray
        ``(dim,)``.
    """
    if isinstance(factor, LowRank):
        s, U, m = factor
        return s * np.sqrt(1 + (U**2) @ m)
    return np.abs(factor) if factor.ndim == 1 else np.sqrt(np.sum(factor**2, axis=1))
