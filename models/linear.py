"""Bayesian linear regression with a known noise sd: the conjugate model whose posterior is exact.

``y ~ N(X w, noise_sd^2)``, ``w ~ N(0, prior_sd^2 I)``: the posterior is
Gaussian with precision ``X'X / noise_sd^2 + I / prior_sd^2``. ADVI's answer
can be checked against it: full-rank q should be the posterior, and
mean-field q its mean with sds ``1 / sqrt(diag(precision))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor

__all__ = ["Gaussian", "correlated_design", "linear_posterior", "linear_regression"]


def linear_regression(X: np.ndarray, y: np.ndarray, *, prior_sd: float = 10.0,
                      noise_sd: float = 1.0) -> pm.Model:
    """The conjugate linear regression as a PyMC model.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
        The design matrix.
    y : numpy.ndarray, shape (n,)
        The targets.
    prior_sd : float, default 10.0
        The weights' prior sd.
    noise_sd : float, default 1.0
        The known noise sd.

    Returns
    -------
    pymc.Model
        With ``pm.Data`` containers ``X`` and ``y``, weights ``w`` (dims ``feature``) and the
        observed ``y_obs``.

    Raises
    ------
    ValueError
        If ``X`` is not (n, d) with n > 0, or ``y`` not (n,).
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (len(X),) or not len(X):
        raise ValueError(f"X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    floatX = pytensor.config.floatX
    with pm.Model(coords={"obs": np.arange(len(X)), "feature": np.arange(X.shape[1])}) as model:
        X_data = pm.Data("X", X.astype(floatX), dims=("obs", "feature"))
        y_data = pm.Data("y", y.astype(floatX), dims="obs")
        w = pm.Normal("w", 0.0, prior_sd, dims="feature")
        pm.Normal("y_obs", X_data @ w, noise_sd, observed=y_data, dims="obs", total_size=len(X))
    return model


@dataclass(frozen=True)
class Gaussian:
    """The exact posterior of ``w``: mean, covariance and precision.

    Parameters
    ----------
    mean : numpy.ndarray, shape (d,)
        The posterior mean.
    cov : numpy.ndarray, shape (d, d)
        The posterior covariance.
    precision : numpy.ndarray, shape (d, d)
        Its inverse.
    """

    mean: np.ndarray
    cov: np.ndarray
    precision: np.ndarray

    @property
    def sd(self) -> np.ndarray:
        """The marginal sds."""
        return np.sqrt(np.diag(self.cov))

    @property
    def corr(self) -> np.ndarray:
        """The correlation matrix."""
        return self.cov / np.outer(self.sd, self.sd)

    @property
    def mean_field_sd(self) -> np.ndarray:
        """The sds of the KL(q || p)-optimal diagonal Gaussian."""
        return 1 / np.sqrt(np.diag(self.precision))


def linear_posterior(X: np.ndarray, y: np.ndarray, *, prior_sd: float = 10.0,
                     noise_sd: float = 1.0) -> Gaussian:
    """The exact posterior of :func:`linear_regression`'s weights.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
        The design matrix.
    y : numpy.ndarray, shape (n,)
        The targets.
    prior_sd : float, default 10.0
        The weights' prior sd.
    noise_sd : float, default 1.0
        The known noise sd.

    Returns
    -------
    Gaussian
        The posterior of ``w``.
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    precision = X.T @ X / noise_sd**2 + np.eye(X.shape[1]) / prior_sd**2
    cov = np.linalg.inv(precision)
    return Gaussian(mean=cov @ X.T @ y / noise_sd**2, cov=cov, precision=precision)


def correlated_design(n: int = 200, d: int = 5, rho: float = 0.8, seed: int = 0):
    """A regression data set with correlated features, where mean-field q is visibly too narrow.

    Parameters
    ----------
    n : int, default 200
        Rows.
    d : int, default 5
        Features.
    rho : float, default 0.8
        The features' pairwise correlation.
    seed : int, default 0
        Seeds the features, the true weights (N(0, 1)) and the unit noise.

    Returns
    -------
    X : numpy.ndarray, shape (n, d)
        The features.
    y : numpy.ndarray, shape (n,)
        The targets.
    """
    rng = np.random.default_rng(seed)
    cov = np.full((d, d), rho) + (1 - rho) * np.eye(d)
    X = rng.multivariate_normal(np.zeros(d), cov, size=n)
    w = rng.normal(0, 1, d)
    return X, X @ w + rng.normal(size=n)
