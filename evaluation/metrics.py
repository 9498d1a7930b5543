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


def nll(proba, y) -> float:
    """Mean negative log posterior predictive density, ``-log mean_s p(y_i | w_s)``."""
    p = _mean(proba)[np.arange(len(y)), np.asarray(y)]
    return float(-np.mean(np.log(np.clip(p, 1e-300, None))))


def brier(proba, y) -> float:
    """Mean over points of ``sum_k (p_k - 1[y = k])^2``."""
    p = _mean(proba)
    onehot = np.eye(p.shape[1])[np.asarray(y)]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def ece(proba, y, n_bins: int = 10) -> float:
    """Expected calibration error of the top-class confidence, equal-width bins."""
    p = _mean(proba)
    confidence = p.max(axis=1)
    correct = p.argmax(axis=1) == np.asarray(y)
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            total += in_bin.mean() * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return float(total)


def all_metrics(proba, y) -> dict[str, float]:
    """accuracy, nll, brier and ece in one dict."""
    return {f.__name__: f(proba, y) for f in (accuracy, nll, brier, ece)}
