"""q's ELBO, and the choice among fits of one model (restarts) by it.

:func:`fit_elbo` is a fit's ELBO by fresh draws of its final q, without the
KL weight ``beta``; :func:`q_elbo` the same for a q given as its mean and
factor on given data (a sweep's stacked fits); :func:`best` the fit of
highest ELBO among restarts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bnn_zoo.inference import families
from bnn_zoo.inference.draws import evaluate_draws, fit_list, model_data
from bnn_zoo.inference.jaxmodel import ModelFunction
from bnn_zoo.inference.result import FitResult

__all__ = ["best", "fit_elbo", "q_elbo"]


def fit_elbo(result: FitResult, draws: int = 1000, seed: int = 0) -> tuple[float, float]:
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
    return q_elbo(result.density, result.family.mean_and_factor(result.params), model_data(result.model),
                  draws, seed)


def q_elbo(density: ModelFunction, q: tuple[np.ndarray, np.ndarray], data: Sequence[np.ndarray],
           draws: int = 1000, seed: int = 0) -> tuple[float, float]:
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
    z, log_q = families.sample(*q, draws, np.random.default_rng(seed))
    ratio = evaluate_draws(density, z, data, ("logp",))["logp"].astype("float64") - log_q
    return float(ratio.mean()), float(ratio.std(ddof=1) / np.sqrt(len(ratio)))


def best(fits, draws: int = 1000, seed: int = 0) -> FitResult:
    """The fit whose q has the highest :func:`fit_elbo`.

    Of restarts that found different optima, the one closest to the
    posterior in KL(q || p).

    Parameters
    ----------
    fits : sequence of FitResult
        Fits of one model.
    draws : int, default 1000
        Draws of each q in its ELBO estimate.
    seed : int, default 0
        Seeds the draws.

    Returns
    -------
    FitResult
        The best of ``fits``.

    Raises
    ------
    ValueError
        For no fits, or fits of different models.
    """
    fits = fit_list(fits)
    return max(fits, key=lambda f: fit_elbo(f, draws, seed)[0])
