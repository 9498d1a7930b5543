"""Predictive metrics from posterior class probabilities.

All functions take ``proba`` of shape ``(draws, n, classes)`` (one row of
class probabilities per posterior draw and point) or its posterior mean
``(n, classes)``, and integer labels ``y`` of shape ``(n,)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["accuracy", "all_metrics", "auroc", "brier", "ece", "log_predictive", "mutual_information", "nll",
           "per_input_uncertainty", "predictive_entropy", "predictive_interval", "reliability_table"]


def _mean(proba: np.ndarray) -> np.ndarray:
    proba = np.asarray(proba, dtype="float64")
    return proba.mean(axis=0) if proba.ndim == 3 else proba


def accuracy(proba, y) -> float:
    """Share of points whose most probable class (posterior mean) is ``y``.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).

    Returns
    -------
    float
        The share correct.
    """
    return float(np.mean(_mean(proba).argmax(axis=1) == np.asarray(y)))


def log_predictive(proba, y) -> np.ndarray:
    """Each point's log posterior predictive density, ``log mean_s p(y_i | w_s)``.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).

    Returns
    -------
    numpy.ndarray
        (n,) log densities.
    """
    p = _mean(proba)[np.arange(len(y)), np.asarray(y)]
    return np.log(np.clip(p, 1e-300, None))


def nll(proba, y) -> float:
    """Mean negative log posterior predictive density, ``-log mean_s p(y_i | w_s)``.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).

    Returns
    -------
    float
        The mean, in nats.
    """
    return float(-np.mean(log_predictive(proba, y)))


def brier(proba, y) -> float:
    """Mean over points of ``sum_k (p_k - 1[y = k])^2``.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).

    Returns
    -------
    float
        The Brier score.
    """
    p = _mean(proba)
    onehot = np.eye(p.shape[1])[np.asarray(y)]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def reliability_table(proba, y, n_bins: int = 10) -> dict[str, np.ndarray]:
    """Reliability-diagram table of the top-class confidence in equal-width bins.

    Returns arrays over bins: ``count``, ``confidence`` (mean top-class
    probability) and ``accuracy`` (share correct); empty bins hold NaN.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).
    n_bins : int, default 10
        Equal-width bins of the top-class confidence.

    Returns
    -------
    dict of str to numpy.ndarray
        ``count``, ``confidence`` and ``accuracy`` per bin.
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
    """Expected calibration error of the top-class confidence, equal-width bins.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).
    n_bins : int, default 10
        Equal-width bins of the top-class confidence.

    Returns
    -------
    float
        The bins' mean ``|accuracy - confidence|``, weighted by their counts.
    """
    table = reliability_table(proba, y, n_bins)
    used = table["count"] > 0
    weights = table["count"][used] / table["count"].sum()
    return float(np.sum(weights * np.abs(table["accuracy"][used] - table["confidence"][used])))


def per_input_uncertainty(proba: np.ndarray) -> dict[str, np.ndarray]:
    """Two uncertainty measures of each input, from draws (draws, n, classes).

    The measures of Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks".

    ``expected_error``: 1 - mean probability of the predicted class (the
    class with the highest mean probability). ``variance``: the variance of
    the predictive probabilities over the draws, summed over the classes.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities per draw, (draws, n, classes).

    Returns
    -------
    dict of str to numpy.ndarray
        ``predicted``, ``expected_error`` and ``variance``, each (n,).
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
    """accuracy, nll, brier and ece in one dict.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities, (draws, n, classes) or their posterior mean (n, classes).
    y : numpy.ndarray of int
        The labels, (n,).

    Returns
    -------
    dict of str to float
        ``accuracy``, ``nll``, ``brier`` and ``ece``.
    """
    return {f.__name__: f(proba, y) for f in (accuracy, nll, brier, ece)}


# --- uncertainty: out-of-distribution detection ---------------------------------


def predictive_entropy(proba: np.ndarray) -> np.ndarray:
    """Entropy of each point's posterior mean prediction (total uncertainty), nats; ``proba`` (draws, n, classes).

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities per draw, (draws, n, classes).

    Returns
    -------
    numpy.ndarray
        (n,) entropies.
    """
    p = np.clip(np.asarray(proba, "float64").mean(axis=0), 1e-12, 1)
    return -np.sum(p * np.log(p), axis=-1)


def mutual_information(proba: np.ndarray) -> np.ndarray:
    """The epistemic part of each point's entropy: entropy of the mean minus the mean entropy
    over the draws (the information the label would give about the weights), nats.

    Parameters
    ----------
    proba : numpy.ndarray
        Class probabilities per draw, (draws, n, classes).

    Returns
    -------
    numpy.ndarray
        (n,) mutual informations.
    """
    p = np.clip(np.asarray(proba, "float64"), 1e-12, 1)
    return predictive_entropy(proba) - np.mean(-np.sum(p * np.log(p), axis=-1), axis=0)


def auroc(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """Area under the ROC curve of telling ``out`` from ``in`` by a higher score (ties count half):
    the probability that an out-of-distribution input scores above an in-distribution one.

    Parameters
    ----------
    in_scores : numpy.ndarray
        Scores of in-distribution inputs.
    out_scores : numpy.ndarray
        Scores of out-of-distribution inputs.

    Returns
    -------
    float
        The AUROC, 0.5 for scores that cannot tell them apart.

    Raises
    ------
    ValueError
        If either set is empty.
    """
    from scipy.stats import rankdata

    scores = np.concatenate([np.asarray(in_scores, "float64"), np.asarray(out_scores, "float64")])
    ranks = rankdata(scores)
    n_in, n_out = len(in_scores), len(out_scores)
    if not (n_in and n_out):
        raise ValueError("need in- and out-of-distribution scores")
    return float((ranks[n_in:].sum() - n_out * (n_out + 1) / 2) / (n_in * n_out))


def predictive_interval(mu: np.ndarray, sigma: np.ndarray, eps: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Central ``level`` interval ``(2, n)`` of a regression's posterior predictive, noise included.

    ``mu`` (draws, n): the regression function per draw; ``sigma`` (draws,):
    the noise sd per draw; ``eps`` (replicas, draws): standard-normal noise
    replicas, shared by every input (common random numbers: each replica is
    a smooth curve, so the interval is smooth along a grid).

    Parameters
    ----------
    mu : numpy.ndarray
        The regression function per draw, (draws, n).
    sigma : numpy.ndarray
        The noise sd per draw, (draws,).
    eps : numpy.ndarray
        Standard-normal noise replicas, (replicas, draws).
    level : float, default 0.95
        The interval's probability.

    Returns
    -------
    numpy.ndarray
        (2, n): the lower and upper bounds.
    """
    y_rep = mu[None] + (sigma[None] * eps)[..., None]
    return np.quantile(y_rep.reshape(-1, mu.shape[1]), [(1 - level) / 2, (1 + level) / 2], axis=0)
