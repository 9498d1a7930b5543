"""Coverage of predictive intervals, and conformal intervals and prediction sets.

A predictive distribution is *calibrated* when its central :math:`\\alpha` interval holds a
fraction :math:`\\alpha` of new targets. :func:`interval_coverage` measures that on held-out data
from predictive draws. :func:`conformal_intervals` and :func:`conformal_sets` turn any fit's
predictive into intervals or label sets that hold a new target with probability at least
:math:`\\alpha`, whatever the model gets wrong, given a calibration set exchangeable with the
test points (split conformal prediction; Vovk, Gammerman and Shafer, *Algorithmic Learning in a
Random World*). The quantile's rank is counted in integers (:func:`conformal_rank`): in floating
point ``(n + 1) * (1 - 0.9)`` falls just below a whole number, and a rank computed from it is one
too high at every ``n + 1`` divisible by 10 (intervals that cover 95% at ``n = 19``, not 90%).

The regression intervals are *normalised* by the model's own predictive sd,

.. math::

    C(x) = \\hat y(x) \\pm q_\\alpha\\, \\hat\\sigma(x), \\qquad
    q_\\alpha = \\text{the } \\lceil (n+1)\\alpha \\rceil\\text{-th smallest of }
    |y_i - \\hat y(x_i)| / \\hat\\sigma(x_i) \\text{ over the } n \\text{ calibration points},

so they stay wide where the posterior is uncertain and narrow where it is not. A calibration
set smaller than :func:`min_calibration_size` has no finite quantile at the level asked for, and
both functions refuse it rather than return infinite intervals.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> draws_cal, draws_test = rng.normal(size=(200, 500)), rng.normal(size=(200, 1000))
>>> y_cal, y_test = rng.normal(size=500), rng.normal(size=1000)
>>> round(interval_coverage(y_test, draws_test)[0.9]["coverage"], 2)
0.89
>>> lo, hi = conformal_intervals(y_cal, draws_cal, draws_test, level=0.9).T
>>> bool(0.85 < np.mean((lo <= y_test) & (y_test <= hi)) < 0.97)
True
>>> min_calibration_size(0.95)
19
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["CONFORMAL_FOLDS", "CONFORMAL_LEVELS", "LEVELS", "PROBA_ATOL", "conformal_intervals", "conformal_rank",
           "conformal_sets", "coverage_metrics", "interval_coverage", "min_calibration_size", "set_coverage"]

#: The central predictive intervals scored by default: 50%, 90% and 95%.
LEVELS = (0.5, 0.9, 0.95)
#: The conformal intervals' and sets' levels that :func:`coverage_metrics` scores.
CONFORMAL_LEVELS = (0.9, 0.95)
#: Folds of a labelled test set when its conformal coverage is measured (``conformal=True``): each
#: fold's intervals or sets are calibrated on the other folds' points (31 test points leave 27 or
#: 28 to calibrate on, enough for 95%).
CONFORMAL_FOLDS = 10
#: How far a row of class probabilities may sum from 1 (absolute): float32 softmax outputs sum to 1
#: within about 1e-6, so this admits them and refuses unnormalised scores.
PROBA_ATOL = 1e-3


def _level(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return float(level)


def _checked(name: str, value, kind: str, n: int | None = None, k: int | None = None) -> np.ndarray:
    """``value`` as an array, after checking it: the one place every input of this module is checked.

    ``kind`` is ``"targets"`` (floats, shape ``(n,)`` after flattening), ``"labels"`` (``n`` integers
    in ``0 .. k-1``), ``"draws"`` (``(..., n)``, returned as ``(draws, n)``: every leading dimension
    pooled) or ``"proba"`` (``(..., n, K)``, returned as the ``(n, K)`` mean over the leading
    dimensions). ``n``, where given, is the number of labels, or of points in the draws' last
    dimension.
    """
    if kind == "labels":
        y = np.asarray(value).ravel()
        if len(y) != n:
            raise ValueError(f"{name} has {len(y)} labels, the probabilities {n} points")
        bad = ~np.isin(y, np.arange(k))
        if bad.any():
            raise ValueError(f"{name} holds labels outside the {k} classes 0..{k - 1} (first: {y[bad][0]!r}); "
                             "encode the labels as integers 0..K-1 in the order of the probabilities' last axis")
        return y.astype(int)
    try:
        a = np.asarray(getattr(value, "values", value), float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} is not numeric (a {type(value).__name__}); pass an array of numbers") from None
    if a.size == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}); pass at least one point")
    if kind == "targets":
        a = a.ravel()
    elif kind == "draws":
        if a.ndim < 2 or a.size == a.shape[-1]:
            raise ValueError(f"{name} has shape {a.shape}: one draw at each point, of which no interval can be "
                             "made; pass the predictive draws, shape (..., draws, n)")
        a = a.reshape(-1, a.shape[-1])
        if n is not None and a.shape[1] != n:
            raise ValueError(f"{name} has {a.shape[1]} points in its last dimension, the targets {n}")
    elif a.ndim < 2:
        raise ValueError(f"{name} has shape {a.shape}, not (..., n, K); pass one probability per class in the "
                         "last axis (for a binary outcome's p, np.stack([1 - p, p], axis=-1))")
    bad = ~np.isfinite(a)
    if bad.any():
        way_out = "drop those points and their draws" if kind == "targets" else "drop those points or refit"
        raise ValueError(f"{name} holds non-finite values ({int(bad.sum())} of {a.size}); {way_out}")
    if kind == "proba":
        if a.min() < 0 or a.max() > 1:
            raise ValueError(f"{name} holds values outside [0, 1] (from {a.min():.3g} to {a.max():.3g}); "
                             "pass probabilities, not logits or scores (a softmax over the last axis)")
        sums = a.sum(-1)
        worst = sums.flat[np.argmax(np.abs(sums - 1))]
        if abs(worst - 1) > PROBA_ATOL:
            raise ValueError(f"{name}'s rows must sum to 1 within {PROBA_ATOL:g}, one sums to {worst:.4g}; "
                             "pass probabilities normalised over the last axis (the K classes)")
        a = a.reshape(-1, *a.shape[-2:]).mean(0)
    return a


def conformal_rank(n: int, level: float) -> int:
    """The rank of the conformal quantile among ``n`` calibration scores: :math:`\\lceil (n+1)\\alpha \\rceil`.

    Counted in integers, so that a product that is a whole number in exact arithmetic gives that
    number (in floating point ``20 * 0.9`` and ``20 * (1 - 0.9)`` miss it by one unit in the last place).

    Parameters
    ----------
    n : int
        Calibration points.
    level : float
        The coverage asked for, in (0, 1).

    Returns
    -------
    int
        The rank, from 1; above ``n`` where the calibration set is too small for ``level``.

    Examples
    --------
    >>> [conformal_rank(19, 0.9), conformal_rank(20, 0.9), conformal_rank(69, 0.9), conformal_rank(19, 0.95)]
    [18, 19, 63, 19]
    """
    exact = Fraction(_level(level)).limit_denominator(10**9)  # 0.9 as 9/10, as the user meant it
    return -(-(n + 1) * exact.numerator // exact.denominator)


def min_calibration_size(level: float) -> int:
    """The fewest calibration points that give a finite conformal quantile at ``level``.

    Parameters
    ----------
    level : float
        The coverage asked for, in (0, 1).

    Returns
    -------
    int
        The smallest ``n`` whose :func:`conformal_rank` is at most ``n`` (about
        :math:`\\alpha / (1-\\alpha)`: 9 at 90%, 19 at 95%).

    Examples
    --------
    >>> [min_calibration_size(a) for a in (0.5, 0.9, 0.95, 0.99)]
    [1, 9, 19, 99]
    """
    level = _level(level)
    n = max(1, math.floor(level / (1 - level)) - 1)
    while conformal_rank(n, level) > n:
        n += 1
    return n


def _quantile(scores: np.ndarray, level: float) -> float:
    """The :func:`conformal_rank`-th smallest of ``scores`` (their number checked by :func:`_check_size`)."""
    return float(np.sort(scores)[conformal_rank(len(scores), level) - 1])


def _check_size(n: int, level: float, what: str) -> None:
    need = min_calibration_size(level)
    if n < need:
        raise ValueError(f"{what}: level {level:g} needs at least {need} calibration points, "
                         f"y_cal has {n}; hold out more points or lower level")


def _folds(n: int, levels, what: str):
    """Each fold's (calibration, test) masks of ``n`` points, after checking the calibration size."""
    fold = np.arange(n) % CONFORMAL_FOLDS
    for level in levels:
        _check_size(int((fold != 0).sum()), _level(level), what)
    return [(fold != k, fold == k) for k in range(min(n, CONFORMAL_FOLDS))]


def interval_coverage(y, draws, levels=LEVELS, conformal: bool = False) -> dict[float, dict[str, float]]:
    """The coverage and mean width of predictive intervals on held-out targets.

    The raw interval at level :math:`\\alpha` runs between the draws' :math:`(1-\\alpha)/2` and
    :math:`(1+\\alpha)/2` quantiles at each point, so it includes the noise when the draws do
    (posterior-predictive draws of the observed variable). With ``conformal=True`` the intervals
    are :func:`conformal_intervals` instead, each of :data:`CONFORMAL_FOLDS` folds of the points
    calibrated on the other folds: the coverage a user gets by holding out data like ``y``.

    Parameters
    ----------
    y : array_like, shape (n,)
        The held-out targets.
    draws : array_like, shape (..., n)
        Predictive draws at the same points; leading dimensions (chain, draw) are pooled. An
        ArviZ/xarray ``DataArray`` works as well.
    levels : sequence of float, default :data:`LEVELS`
        The intervals' probabilities.
    conformal : bool, default False
        Score conformal intervals rather than the draws' quantiles.

    Returns
    -------
    dict
        ``{level: {"coverage": fraction of y inside, "width": mean width}}``.

    Raises
    ------
    ValueError
        For a level outside (0, 1), empty or non-finite targets or draws, draws whose last
        dimension is not ``len(y)``, or (with ``conformal``) folds too small for a level.
    """
    y = _checked("y", y, "targets")
    d = _checked("draws", draws, "draws", len(y))
    folds = _folds(len(y), levels, "interval_coverage") if conformal else None
    out = {}
    for level in levels:
        level = _level(level)
        if folds is None:
            lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2], axis=0)
        else:
            lo, hi = np.empty(len(y)), np.empty(len(y))
            for cal, test in folds:
                lo[test], hi[test] = conformal_intervals(y[cal], d[:, cal], d[:, test], level).T
        out[level] = {"coverage": float(np.mean((lo <= y) & (y <= hi))), "width": float(np.mean(hi - lo))}
    return out


def set_coverage(y, proba, levels=(0.9, 0.95), conformal: bool = False) -> dict[float, dict[str, float]]:
    """The coverage and mean size of a classifier's prediction sets on held-out labels.

    The raw set at level :math:`\\alpha` holds the most probable labels, in order, until their
    predictive probability reaches :math:`\\alpha`. With ``conformal=True`` the sets are
    :func:`conformal_sets`, each of :data:`CONFORMAL_FOLDS` folds calibrated on the others.

    Parameters
    ----------
    y : array_like of int, shape (n,)
        The held-out labels, in ``0 .. K-1``.
    proba : array_like, shape (..., n, K)
        Class probabilities, per draw or already averaged; each row sums to 1 (within
        :data:`PROBA_ATOL`).
    levels : sequence of float, default (0.9, 0.95)
        The sets' probabilities.
    conformal : bool, default False
        Score conformal sets rather than the predictive's own.

    Returns
    -------
    dict
        ``{level: {"coverage": fraction of labels in their set, "size": mean set size}}``.

    Raises
    ------
    ValueError
        As :func:`conformal_sets`: for labels outside the classes, probabilities that are not
        probabilities, or folds too small.
    """
    p = _checked("proba", proba, "proba")
    y = _checked("y", y, "labels", len(p), p.shape[-1])
    folds = _folds(len(y), levels, "set_coverage") if conformal else None
    out = {}
    for level in levels:
        level = _level(level)
        if folds is None:
            order = np.argsort(-p, axis=1)
            mass = np.cumsum(np.take_along_axis(p, order, axis=1), axis=1)
            keep = np.concatenate([np.ones((len(p), 1), bool), mass[:, :-1] < level - 1e-12], axis=1)
            sets = np.zeros_like(keep)
            np.put_along_axis(sets, order, keep, axis=1)
        else:
            sets = np.zeros(p.shape, bool)
            for cal, test in folds:
                sets[test] = conformal_sets(y[cal], p[cal], p[test], level)
        out[level] = {"coverage": float(np.mean(sets[np.arange(len(y)), y])), "size": float(sets.sum(1).mean())}
    return out


def conformal_intervals(y_cal, draws_cal, draws_test, level: float = 0.9) -> np.ndarray:
    """Split-conformal intervals, normalised by the predictive sd, with coverage at least ``level``.

    The point prediction is the draws' mean and the difficulty their sd, at each point; the
    half-width is the sd times the :func:`conformal_rank`-th smallest scaled residual of ``y_cal``. Under
    exchangeability of the calibration and test points, each interval holds its target with
    probability at least ``level`` (and at most ``level + 1/(n+1)`` for continuous scores).

    Parameters
    ----------
    y_cal : array_like, shape (n_cal,)
        Targets of a calibration set the fit did not see.
    draws_cal : array_like, shape (..., n_cal)
        Predictive draws, noise included, at the calibration inputs (for example
        ``bnn_zoo.predict(fit, {"X": X_cal}, var_names=["y"])["predictions"]["y"]``, as in the
        example below).
    draws_test : array_like, shape (..., n_test)
        Predictive draws at the inputs to cover.
    level : float, default 0.9
        The coverage guaranteed.

    Returns
    -------
    numpy.ndarray, shape (n_test, 2)
        Each interval's lower and upper bound.

    Raises
    ------
    ValueError
        For a calibration set smaller than :func:`min_calibration_size`, mismatched shapes,
        empty or non-finite targets or draws, or a predictive sd of zero.

    Examples
    --------
    A model whose Gaussian noise of sd 1 is too narrow for Student-t noise: its own 90% intervals
    cover about 81% of new targets, the conformal ones, calibrated on 500 held-out points, about
    90% (on average over calibration sets; 1,000 test points measure it within about a point).

    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-2, 2, size=300)
    >>> with pm.Model() as model:
    ...     X = pm.Data("X", x)
    ...     b = pm.Normal("b", 0, 10)
    ...     y = pm.Normal("y", b * X, 1, observed=2 * x + rng.standard_t(3, size=300), shape=X.shape)
    >>> fit = bnn_zoo.fit(model, steps=2_000, progressbar=False)
    >>> x_cal, x_test = rng.uniform(-2, 2, 500), rng.uniform(-2, 2, 1000)
    >>> y_cal, y_test = 2 * x_cal + rng.standard_t(3, 500), 2 * x_test + rng.standard_t(3, 1000)
    >>> draws_cal = bnn_zoo.predict(fit, {"X": x_cal}, var_names=["y"])["predictions"]["y"]
    >>> draws_test = bnn_zoo.predict(fit, {"X": x_test}, var_names=["y"])["predictions"]["y"]
    >>> draws_cal.shape                     # chain, draw, point
    (1, 500, 500)
    >>> round(interval_coverage(y_test, draws_test)[0.9]["coverage"], 2)
    0.81
    >>> lo, hi = conformal_intervals(y_cal, draws_cal, draws_test, level=0.9).T
    >>> round(float(np.mean((lo <= y_test) & (y_test <= hi))), 2)
    0.89
    """
    level = _level(level)
    y_cal = _checked("y_cal", y_cal, "targets")
    _check_size(len(y_cal), level, "conformal_intervals")
    cal, test = _checked("draws_cal", draws_cal, "draws", len(y_cal)), _checked("draws_test", draws_test, "draws")
    sd_cal, sd_test = cal.std(0), test.std(0)
    if (sd_cal <= 0).any() or (sd_test <= 0).any():
        raise ValueError("conformal_intervals: the draws' sd is zero at some points (one draw, or a "
                         "deterministic predictive); pass predictive draws that include the noise")
    q = _quantile(np.abs(y_cal - cal.mean(0)) / sd_cal, level)
    centre = test.mean(0)
    return np.column_stack([centre - q * sd_test, centre + q * sd_test])


def conformal_sets(y_cal, proba_cal, proba_test, level: float = 0.9) -> np.ndarray:
    """Split-conformal prediction sets of a classifier, holding the true label with probability ``level``.

    The non-conformity of a label is one minus its predictive probability (the mean over draws);
    a label enters a point's set when its non-conformity is at most the :func:`conformal_rank`-th
    smallest of the calibration labels' (the conservative sets: no randomisation at ties).

    Parameters
    ----------
    y_cal : array_like of int, shape (n_cal,)
        Labels of a calibration set the fit did not see, in ``0 .. K-1``.
    proba_cal : array_like, shape (..., n_cal, K)
        Class probabilities at the calibration inputs: per draw, or already averaged.
    proba_test : array_like, shape (..., n_test, K)
        Class probabilities at the inputs to classify.
    level : float, default 0.9
        The coverage guaranteed.

    Returns
    -------
    numpy.ndarray of bool, shape (n_test, K)
        ``True`` where a label is in a point's set.

    Raises
    ------
    ValueError
        For labels outside ``0 .. K-1``, a calibration set smaller than
        :func:`min_calibration_size`, mismatched shapes, or probabilities that are empty,
        non-finite, outside [0, 1], or in rows that do not sum to 1 (within
        :data:`PROBA_ATOL`).
    """
    level = _level(level)
    p_cal, p_test = _checked("proba_cal", proba_cal, "proba"), _checked("proba_test", proba_test, "proba")
    k = p_cal.shape[-1]
    if p_test.shape[-1] != k:
        raise ValueError(f"proba_cal has {k} classes, proba_test {p_test.shape[-1]}; pass the same classes, "
                         "in the same order, to both")
    y = _checked("y_cal", y_cal, "labels", len(p_cal), k)
    _check_size(len(y), level, "conformal_sets")
    return 1 - p_test <= _quantile(1 - p_cal[np.arange(len(y)), y], level)


def coverage_metrics(y, draws=None, *, proba=None, suffix: str = "") -> dict[str, float]:
    """The coverage columns of an experiment's metrics: raw and conformal, regression or classification.

    Parameters
    ----------
    y : array_like, shape (n,)
        The held-out targets or labels.
    draws : array_like, shape (..., n), optional
        Predictive draws of a regression (:func:`interval_coverage`).
    proba : array_like, shape (..., n, K), optional
        Class probabilities of a classifier (:func:`set_coverage`); give ``draws`` or ``proba``.
    suffix : str, default ""
        Appended to every name (``"_in"``: inside a data range).

    Returns
    -------
    dict
        For a regression, ``coverage<L>`` and ``width<L>`` at each of :data:`LEVELS` (``L`` in
        percent) and ``conf_coverage<L>`` and ``conf_width<L>`` at each of
        :data:`CONFORMAL_LEVELS`; for a classifier, ``set_coverage<L>`` and ``set_size<L>``, and
        ``conf_set_coverage<L>`` and ``conf_set_size<L>``, at each of :data:`CONFORMAL_LEVELS`.
        A conformal level whose folds would hold fewer calibration points than
        :func:`min_calibration_size` is NaN (at 95%, fewer than 22 points).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> m = coverage_metrics(rng.normal(size=200), rng.normal(size=(100, 200)))
    >>> sorted(m)[:4]
    ['conf_coverage90', 'conf_coverage95', 'conf_width90', 'conf_width95']
    """
    if (draws is None) == (proba is None):
        raise ValueError("coverage_metrics: give draws (a regression) or proba (a classifier), exactly one")
    if draws is not None:  # checked before the first score; the scores' own checks then pass
        score, levels, names = interval_coverage, LEVELS, ("coverage", "width")
        y = _checked("y", y, "targets")
        data = _checked("draws", draws, "draws", len(y))
    else:
        score, levels, names = set_coverage, CONFORMAL_LEVELS, ("set_coverage", "set_size")
        data = _checked("proba", proba, "proba")
        y = _checked("y", y, "labels", len(data), data.shape[-1])
    n = len(y)
    calibrated = n - math.ceil(n / CONFORMAL_FOLDS)  # the fewest calibration points of a fold
    out = {}
    for prefix, these, conformal in (("", levels, False), ("conf_", CONFORMAL_LEVELS, True)):
        for level in these:
            scored = not conformal or calibrated >= min_calibration_size(level)
            v = score(y, data, [level], conformal=conformal)[level] if scored else dict.fromkeys(names, math.nan)
            for name, value in zip(names, v.values()):
                out[f"{prefix}{name}{round(100 * level)}{suffix}"] = value
    return out
