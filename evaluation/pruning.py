"""Weight pruning by signal-to-noise ratio (Blundell et al. 2015, section 5.1) or by magnitude.

Under a mean-field posterior every weight ``w_i ~ N(mu_i, sigma_i^2)``. Blundell
et al. rank weights by their signal-to-noise ratio ``|mu_i| / sigma_i`` and
remove the lowest; the naive baseline (Singh, "Bayesian Neural
Networks", a reproduction of Bayes by Backprop) ranks by ``|mu_i|`` alone.
A removed weight is set to exactly zero.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["FRACTIONS", "SCORES", "cutoff", "keep_mask", "prune_table", "pruning_masks"]

#: The shares of the weights removed in the pruning table (Blundell et al.'s, from 0 to 98%).
FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.95, 0.98)
#: The pruning scores by name: ``signal_to_noise``, ``|mu| / sd`` (Blundell et al.), and ``naive``, ``|mu|``
#: (Singh's reproduction of Bayes by Backprop).
SCORES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "signal_to_noise": lambda mu, sd: np.abs(mu) / sd,
    "naive": lambda mu, sd: np.abs(mu),
}


def keep_mask(score: np.ndarray, fraction: float) -> np.ndarray:
    """Boolean mask keeping all but the ``round(fraction * n)`` lowest-scoring entries.

    Ties are broken by position (a stable sort), so the count removed is exact.

    Parameters
    ----------
    score : numpy.ndarray
        Each entry's score; the lowest go first.
    fraction : float
        The share to remove, in [0, 1).

    Returns
    -------
    numpy.ndarray of bool
        (n,): True for the entries kept.

    Raises
    ------
    ValueError
        If ``fraction`` is outside [0, 1).
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction}")
    score = np.asarray(score)
    removed = int(round(fraction * score.size))
    keep = np.ones(score.size, dtype=bool)
    keep[np.argsort(score, kind="stable")[:removed]] = False
    return keep


def cutoff(score: np.ndarray, fraction: float) -> float:
    """The score below which ``fraction`` of the entries lie (the pruning threshold).

    Parameters
    ----------
    score : numpy.ndarray
        Each entry's score; the lowest go first.
    fraction : float
        The share to remove, in [0, 1).

    Returns
    -------
    float
        The threshold (the smallest score at fraction 0).
    """
    return float(np.quantile(np.asarray(score), fraction)) if fraction > 0 else float(np.min(score))


def pruning_masks(mu: np.ndarray, sd: np.ndarray, fractions=FRACTIONS,
                  methods=tuple(SCORES)) -> dict[str, dict[float, np.ndarray]]:
    """``{method: {fraction: keep mask}}``: which weights each method keeps at each fraction.

    Parameters
    ----------
    mu, sd : arrays (n,)
        Posterior means and standard deviations of the prunable weights.
    fractions : sequence of float
        Shares of the weights to remove, each in [0, 1).
    methods : sequence of str
        Keys of :data:`SCORES`.
    """
    mu, sd = np.asarray(mu), np.asarray(sd)
    if mu.shape != sd.shape or mu.ndim != 1:
        raise ValueError(f"mu and sd must be vectors of one length, got {mu.shape} and {sd.shape}")
    unknown = [m for m in methods if m not in SCORES]
    if unknown:
        raise ValueError(f"unknown pruning method {', '.join(unknown)}; valid: {', '.join(SCORES)}")
    return {method: {fraction: keep_mask(SCORES[method](mu, sd), fraction) for fraction in fractions}
            for method in methods}


def prune_table(mu: np.ndarray, masks: dict, test_error: Callable[[np.ndarray], float]) -> pd.DataFrame:
    """Test error of the network with each fraction of its weights removed, by each method.

    ``masks`` comes from :func:`pruning_masks`; ``test_error(w)`` scores the
    weights ``w`` (n,), the pruned ones set to zero. Returns a DataFrame with
    columns ``fraction, method, n_weights_kept, test_error``, one row per pair.

    Parameters
    ----------
    mu : numpy.ndarray
        (n,) posterior means of the prunable weights.
    masks : dict
        :func:`pruning_masks`' masks.
    test_error : callable
        ``test_error(w) -> float`` for weights ``w`` (n,).

    Returns
    -------
    pandas.DataFrame
        One row per method and fraction.
    """
    return pd.DataFrame([
        {"fraction": fraction, "method": method, "n_weights_kept": int(keep.sum()),
         "test_error": float(test_error(np.where(keep, mu, 0.0)))}
        for method, by_fraction in masks.items() for fraction, keep in by_fraction.items()
    ])
