"""Predictive metrics from posterior class probabilities.

All functions take ``proba`` of shape ``(draws, n, classes)`` (one row of
class probabilities per posterior draw and point) or its posterior mean
``(n, classes)``, and integer labels ``y`` of shape ``(n,)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["accuracy", "all_metrics", "auroc", "brier", "ece", "log_predictive", "mutual_information", "nll",
           "per_input_uncertainty", "predictive_entropy", "predictive_interval", "reliability_table", "scores"]


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
    return float(_accuracy(_mean(proba), np.asarray(y), np))


def _accuracy(p, y, xp):
    return xp.mean((p.argmax(axis=1) == y).astype(p.dtype))


def log_predictive(proba, y, xp=np):
    """Each point's log posterior predictive density, ``log mean_s p(y_i | w_s)``.

    Parameters
    ----------
    proba : array
        Class probabilities, (draws, n, classes) or their posterior mean
        (n, classes); with an ``xp`` other than NumPy, the mean.
    y : array of int
        The labels, (n,).
    xp : module, default numpy
        The array namespace (``jax.numpy`` in a compiled program).

    Returns
    -------
    array
        (n,) log densities.
    """
    if xp is np:
        return _log_predictive(_mean(proba), np.asarray(y), np)
    return _log_predictive(proba, y, xp)


def _log_predictive(p, y, xp):
    # a probability of 0 is clipped to 1e-300, or in float32 (where 1e-300 is 0) to its smallest normal number
    return xp.log(xp.clip(p[xp.arange(len(y)), y], max(1e-300, float(xp.finfo(p.dtype).tiny)), None))


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
    return float(_nll(_mean(proba), np.asarray(y), np))


def _nll(p, y, xp):
    return -xp.mean(_log_predictive(p, y, xp))


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
    return float(_brier(_mean(proba), np.asarray(y), np))


def _brier(p, y, xp):
    return xp.mean(xp.sum((p - xp.eye(p.shape[1])[y]) ** 2, axis=1))


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
    return _reliability(_mean(proba), np.asarray(y), n_bins, np)


def _reliability(p, y, n_bins, xp):
    confidence = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(p.dtype)
    bins = xp.minimum((confidence * n_bins).astype(int), n_bins - 1)
    count = _bincount(xp, bins, None, n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = _bincount(xp, bins, confidence, n_bins) / count
        acc = _bincount(xp, bins, correct, n_bins) / count
    return {"count": count, "confidence": conf, "accuracy": acc}


def _bincount(xp, x, weights, n):
    return xp.bincount(x, weights, minlength=n) if xp is np else xp.bincount(x, weights, length=n)


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
    return float(_ece(_mean(proba), np.asarray(y), n_bins, np))


def _ece(p, y, n_bins, xp):
    table = _reliability(p, y, n_bins, xp)
    used = table["count"] > 0
    weights = table["count"] / table["count"].sum()
    return xp.sum(xp.where(used, weights * xp.abs(table["accuracy"] - table["confidence"]), 0.0))


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
    return {name: float(v) for name, v in scores(_mean(proba), np.asarray(y)).items()}


def scores(p, y, xp=np, n_bins: int = 10) -> dict:
    """:func:`all_metrics` of a posterior mean ``p``, as arrays of the namespace ``xp``.

    The one place the four metrics are computed: :func:`all_metrics` calls it
    with NumPy, a sweep's device program with ``jax.numpy`` (traced, and
    vmapped over fits).

    Parameters
    ----------
    p : array
        The posterior mean class probabilities, (n, classes).
    y : array of int
        The labels, (n,).
    xp : module, default numpy
        The array namespace.
    n_bins : int, default 10
        The ECE's bins.

    Returns
    -------
    dict of str to array
        ``accuracy``, ``nll``, ``brier`` and ``ece``, 0-d each.
    """
    return {"accuracy": _accuracy(p, y, xp), "nll": _nll(p, y, xp),
            "brier": _brier(p, y, xp), "ece": _ece(p, y, n_bins, xp)}


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
