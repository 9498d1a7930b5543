"""q's ELBO by fresh draws: what compares fits of one model (restarts).

:func:`fit_elbo` is a fit's ELBO by fresh draws of its final q, without the
KL weight ``beta``; :func:`q_elbo` the same for a q given as its mean and
factor on given data (a sweep's stacked fits). Restarts themselves are
:func:`bnn_zoo.fit_many`'s ``restarts``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.posterior.draws import evaluate_draws, model_data
from bnn_zoo.inference.compile.jaxmodel import ModelFunction
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["ELBO_DRAWS", "best", "draws_elbo", "fit_elbo", "q_elbo"]

#: Draws of q in its ELBO estimate, by default: what restarts are compared by.
ELBO_DRAWS = 1000


def best(elbos, xp=np):
    """The index of the highest ELBO: the restart to keep. A NaN one (a restart that diverged) is
    never picked unless all are.

    Parameters
    ----------
    elbos : array
        ``(restarts,)`` ELBO estimates (:func:`q_elbo`'s).
    xp : module, default numpy
        The array namespace (``jax.numpy`` in a compiled program).

    Returns
    -------
    int or array
        The index.

    Examples
    --------
    >>> int(best([-3.0, float("nan"), -1.0]))
    2
    """
    elbos = xp.asarray(elbos)
    return xp.argmax(xp.where(xp.isnan(elbos), -xp.inf, elbos))


def fit_elbo(result: FitResult, draws: int = ELBO_DRAWS, seed: int = 0) -> tuple[float, float]:
    """The ELBO of the fitted q, ``E_q[log p - log q]`` at full-data scale, by Monte Carlo.

    Unlike the trace's per-step estimates it is the final q's, with no
    optimiser noise, and without the KL weight ``beta``: the quantity to
    compare fits (restarts) of one model by.

    Parameters
    ----------
    result : FitResult
        The fit.
    draws : int, default 1000
        Draws of q in the estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    estimate : float
        The ELBO estimate.
    se : float
        Its Monte Carlo standard error.
    """
    z, log_q = result.family.sample(result.params, draws, np.random.default_rng(seed))
    return _elbo_of(result.density, z, log_q, model_data(result.model))


def q_elbo(density: ModelFunction, q: tuple[np.ndarray, np.ndarray], data: Sequence[np.ndarray],
           draws: int = ELBO_DRAWS, seed: int = 0) -> tuple[float, float]:
    """:func:`fit_elbo` of a q given as its mean and factor, on given data.

    For fits without a model of their own data (a sweep's stacked fits).

    Parameters
    ----------
    density : ModelFunction
        The compiled model.
    q : tuple of numpy.ndarray
        ``(mean, factor)`` (:meth:`~bnn_zoo.inference.families.Family.mean_and_factor`).
    data : sequence of numpy.ndarray
        One array per data container of the model.
    draws : int, default 1000
        Draws of q in the estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    estimate : float
        The ELBO estimate.
    se : float
        Its Monte Carlo standard error.
    """
    return _elbo_of(density, *gaussians.sample(*q, draws, np.random.default_rng(seed)), data)


def draws_elbo(log_p, log_q, xp=np):
    """q's ELBO, ``E_q[log p - log q]``, and its Monte Carlo standard error, from draws of q.

    The one estimate every ELBO of a fitted q is: :func:`fit_elbo`'s, the
    restart pick's, ``method="auto"``'s rungs' and the experiments' records.
    NaN, both, where a draw's ``log p`` or ``log q`` is not finite (a q
    that diverged: :func:`best` never picks it).

    Parameters
    ----------
    log_p, log_q : array
        ``(draws,)``: the model's log density and q's at each draw.
    xp : module, default numpy
        The array namespace (``jax.numpy`` in a compiled program).

    Returns
    -------
    estimate, se : float or array
        Floats with NumPy; 0-d arrays with ``xp=jax.numpy``.

    Examples
    --------
    >>> draws_elbo(np.array([-1.0, -2.0, -3.0]), np.array([0.0, 0.0, 0.0]))
    (-2.0, 0.5773502691896258)
    >>> draws_elbo(np.array([-1.0, -np.inf]), np.zeros(2))
    (nan, nan)
    """
    ratio = xp.asarray(log_p) - xp.asarray(log_q)
    finite = xp.all(xp.isfinite(ratio))
    estimate = xp.where(finite, xp.mean(ratio), xp.nan)
    se = xp.where(finite, xp.std(ratio, ddof=1) / xp.sqrt(ratio.shape[0]), xp.nan)
    return (float(estimate), float(se)) if xp is np else (estimate, se)


def _elbo_of(density, z, log_q, data) -> tuple[float, float]:
    return draws_elbo(evaluate_draws(density, z, data, ("logp",))["logp"].astype("float64"), log_q)
