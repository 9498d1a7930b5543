"""Predictive metrics from posterior class probabilities.

All functions take ``proba`` of shape ``(draws, n, classes)`` (one row of
class probabilities per posterior draw and point) or its posterior mean
``(n, classes)``, and integer labels ``y`` of shape ``(n,)``.
"""

from __future__ import annotations

import numpy as np


def _mean(proba: np.ndarray) -> np.ndarray:
    proba = np.asarray(proba, dtype="float64")
    return proba.mean(axis=0) if proba.ndim == 3 else proba


def accuracy(proba, y) -> float:
    """Share of points whose most probable class (posterior mean) is ``y``."""
    return float(np.mean(_mean(proba).argmax(axis=1) == np.asarray(y)))


def log_predictive(proba, y) -> np.ndarray:
    """Each point's log posterior predictive density, ``log mean_s p(y_i | w_s)``."""
    p = _mean(proba)[np.arange(len(y)), np.asarray(y)]
    return np.log(np.clip(p, 1e-300, None))


def nll(proba, y) -> float:
    """Mean negative log posterior predictive density, ``-log mean_s p(y_i | w_s)``."""
    return float(-np.mean(log_predictive(proba, y)))


def brier(proba, y) -> float:
    """Mean over points of ``sum_k (p_k - 1[y = k])^2``."""
    p = _mean(proba)
    onehot = np.eye(p.shape[1])[np.asarray(y)]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def reliability_table(proba, y, n_bins: int = 10) -> dict[str, np.ndarray]:
    """Reliability-diagram table of the top-class confidence in equal-width bins.

    Returns arrays over bins: ``count``, ``confidence`` (mean top-class
    probability) and ``accuracy`` (share correct); empty bins hold NaN.
    """
    p = _mean(proba)
    confidence = p.max(axis=1)
    correct = p.argmax(axis=1) == np.asarray(y)
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(bins, confidence, minlength=n_bins) / count
        acc = np.bincount(bins, correct, minlength=n_bins) / count
    return {"count": count, "confidence": conf, "accuracy": acc}


def ece(proba, y, n_bins: int = 10) -> float:
    """Expected calibration error of the top-class confidence, equal-width bins."""
    table = reliability_table(proba, y, n_bins)
    used = table["count"] > 0
    weights = table["count"][used] / table["count"].sum()
    return float(np.sum(weights * np.abs(table["accuracy"][used] - table["confidence"][used])))


def per_input_uncertainty(proba: np.ndarray) -> dict[str, np.ndarray]:
    """Seed 004's two uncertainty measures of each input, from draws (draws, n, classes).

    ``expected_error``: 1 - mean probability of the predicted class (the
    class with the highest mean probability). ``variance``: the variance of
    the predictive probabilities over the draws, summed over the classes.
    """
    proba = np.asarray(proba)
    if proba.ndim != 3:
        raise ValueError(f"need draws of shape (draws, n, classes), got {proba.shape}")
    mean = proba.mean(axis=0)
    predicted = mean.argmax(axis=1)
    return {
        "predicted": predicted,
        "expected_error": 1.0 - mean[np.arange(len(mean)), predicted],
        "variance": proba.var(axis=0).sum(axis=1),
    }


def all_metrics(proba, y) -> dict[str, float]:
    """accuracy, nll, brier and ece in one dict."""
    return {f.__name__: f(proba, y) for f in (accuracy, nll, brier, ece)}
