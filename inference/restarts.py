"""q's ELBO by fresh draws: what compares fits of one model (restarts).

:func:`fit_elbo` is a fit's ELBO by fresh draws of its final q, without the
KL weight ``beta``; :func:`q_elbo` the same for a q given as its mean and
factor on given data (a sweep's stacked fits). Restarts themselves are
:func:`bnn_zoo.fit_many`'s ``restarts``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bnn_zoo.inference import gaussians
from bnn_zoo.inference.draws import evaluate_draws, model_data
from bnn_zoo.inference.jaxmodel import ModelFunction
from bnn_zoo.inference.result import FitResult

__all__ = ["ELBO_DRAWS", "best", "fit_elbo", "q_elbo"]

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


def _elbo_of(density, z, log_q, data) -> tuple[float, float]:
    ratio = evaluate_draws(density, z, data, ("logp",))["logp"].astype("float64") - log_q
    return float(ratio.mean()), float(ratio.std(ddof=1) / np.sqrt(len(ratio)))
