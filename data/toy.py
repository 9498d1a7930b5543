"""The 2-D toy classification data sets (moons, circles) and their Bayes-optimal classifier.

They are the data of Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks".

Both come from scikit-learn's generators: half the points on each of two
curves, evenly spaced along them, plus isotropic Gaussian noise of sd
``noise``. A class's density is therefore a mixture, over its curve, of
isotropic Gaussians, and the best possible classifier (:func:`bayes_proba`)
follows from them: the yardstick every toy fit is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, i0e, logsumexp

__all__ = ["CIRCLES_FACTOR", "DATASETS", "Split", "bayes_metrics", "bayes_proba", "load", "log_density",
           "quadrature_points"]

#: The toy data sets' names: what :func:`load`, :func:`bayes_proba` and
#: :func:`bayes_metrics` accept as ``name``.
DATASETS = ("moons", "circles")


@dataclass(frozen=True)
class Split:
    """Train/test arrays of a 2-D binary classification problem.

    Parameters
    ----------
    X_train : numpy.ndarray, shape (n_train, 2)
        Training inputs.
    y_train : numpy.ndarray, shape (n_train,)
        Training labels, 0 or 1.
    X_test : numpy.ndarray, shape (n_test, 2)
        Test inputs.
    y_test : numpy.ndarray, shape (n_test,)
        Test labels.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def grid(self, n: int = 100, margin: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """An ``n x n`` grid covering all points plus ``margin``, for uncertainty maps.

        Parameters
        ----------
        n : int, default 100
            Points per axis.
        margin : float, default 0.5
            Space around the points.

        Returns
        -------
        xx, yy : numpy.ndarray, shape (n, n)
            The grid's coordinates (``np.meshgrid``).
        points : numpy.ndarray, shape (n * n, 2)
            The grid as model inputs.
        """
        X = np.vstack([self.X_train, self.X_test])
        lo, hi = X.min(0) - margin, X.max(0) + margin
        xx, yy = np.meshgrid(np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n))
        return xx, yy, np.column_stack([xx.ravel(), yy.ravel()])


def load(name: str, *, n_train: int = 700, n_test: int = 300, noise: float = 0.2,
         seed: int = 0) -> Split:
    """Sample ``n_train + n_test`` points of ``name`` and split them at random.

    Parameters
    ----------
    name : {"moons", "circles"}
        scikit-learn's ``make_moons`` or ``make_circles`` (``factor=0.5``,
        :data:`CIRCLES_FACTOR`).
    n_train : int, default 700
        Size of the training split (Zharikov et al.: 700); at least 2.
    n_test : int, default 300
        Size of the test split (Zharikov et al.: 300); at least 1.
    noise : float, default 0.2
        Std of the Gaussian noise added to the points; >= 0.
    seed : int, default 0
        Seeds the sampling and the split.

    Returns
    -------
    Split
        The first ``n_train`` points of a random permutation for training,
        the rest for testing; labels as ``int64``.

    Raises
    ------
    ValueError
        For an unknown data set, a negative ``noise``, ``n_train < 2`` or
        ``n_test < 1``.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if n_train < 2 or n_test < 1:
        raise ValueError(f"need n_train >= 2 and n_test >= 1, got {n_train} and {n_test}")
    n = n_train + n_test
    from sklearn.datasets import make_circles, make_moons  # with scipy.stats: most of a second, when data are made

    if name == "moons":
        X, y = make_moons(n, noise=noise, random_state=seed)
    else:
        X, y = make_circles(n, noise=noise, factor=0.5, random_state=seed)
    order = np.random.default_rng(seed).permutation(n)
    X, y = X[order], y[order].astype("int64")
    return Split(X[:n_train], y[:n_train], X[n_train:], y[n_train:])


#: The inner circle's radius relative to the outer one (scikit-learn's ``factor``), used by
#: the circles' class density behind :func:`bayes_proba`.
CIRCLES_FACTOR = 0.5


def quadrature_points(noise: float) -> int:
    """Midpoints along a moon for its density: a spacing of noise / 16 (``|error in P| < 1e-3``).

    The count is ``ceil(16 pi / noise)``, clipped to ``[256, 8192]``;
    :func:`bayes_proba` integrates each moon's density over that many
    midpoints.

    Parameters
    ----------
    noise : float
        The data's noise sd.

    Returns
    -------
    int
        The number of quadrature points along each half-circle.
    """
    return int(np.clip(np.ceil(16 * np.pi / noise), 256, 8192))


def log_density(name: str, X: np.ndarray, noise: float, label: int) -> np.ndarray:
    """``log p(x | class)`` of each row of ``X`` under the generator (up to a shared constant).

    Exact for circles (a Bessel function); for moons by the midpoint rule
    along the curve (:func:`quadrature_points`).

    Parameters
    ----------
    name : str
        ``"moons"`` or ``"circles"``.
    X : numpy.ndarray, shape (n, 2)
        The points, float64.
    noise : float
        The generator's noise sd, positive.
    label : int
        The class, 0 or 1.

    Returns
    -------
    numpy.ndarray, shape (n,)
        The log density of each point, up to a constant shared by both classes.
    """
    if name == "circles":
        # The angle integral of N(x; r (cos t, sin t), s^2 I) is a Bessel function:
        # exp(-(|x|^2 + r^2) / 2s^2) I0(|x| r / s^2) / (2 pi s^2).
        r = 1.0 if label == 0 else CIRCLES_FACTOR
        z = np.linalg.norm(X, axis=1) * r / noise**2
        return -(np.sum(X**2, axis=1) + r**2) / (2 * noise**2) + np.log(i0e(z)) + z
    k = quadrature_points(noise)
    t = (np.arange(k) + 0.5) * np.pi / k  # midpoints along the curve
    curve = (np.column_stack([np.cos(t), np.sin(t)]) if label == 0
             else np.column_stack([1 - np.cos(t), 0.5 - np.sin(t)]))
    out = np.empty(len(X))
    for start in range(0, len(X), 4096):  # squared distances as one product: |x|^2 - 2 x.c + |c|^2
        block = X[start:start + 4096]
        d2 = np.sum(block**2, axis=1)[:, None] - 2 * block @ curve.T + np.sum(curve**2, axis=1)[None]
        out[start:start + 4096] = logsumexp(-d2 / (2 * noise**2), axis=1)
    return out - np.log(k)


def bayes_proba(name: str, X: np.ndarray, noise: float) -> np.ndarray:
    """The Bayes-optimal ``P(class 1 | x)`` of each row of ``X`` for the generator ``name``.

    The classes are equally likely; their densities are integrated over
    their curves (exactly for circles, by the midpoint rule for moons:
    :func:`quadrature_points`). Needs ``noise > 0``.

    Parameters
    ----------
    name : str
        ``"moons"`` or ``"circles"``.
    X : numpy.ndarray, shape (n, 2)
        The points.
    noise : float
        The generator's noise sd, positive.

    Returns
    -------
    numpy.ndarray, shape (n,)
        ``P(class 1 | x)`` of each point.

    Raises
    ------
    ValueError
        For an unknown data set, or unless ``noise > 0``.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    if not noise > 0:
        raise ValueError(f"the Bayes classifier needs noise > 0, got {noise}")
    X = np.asarray(X, dtype="float64")
    return expit(log_density(name, X, noise, 1) - log_density(name, X, noise, 0))


def bayes_metrics(name: str, X: np.ndarray, y: np.ndarray, noise: float) -> dict[str, float]:
    """The Bayes-optimal classifier's accuracy and mean negative log-likelihood on ``(X, y)``.

    Parameters
    ----------
    name : str
        ``"moons"`` or ``"circles"``.
    X : numpy.ndarray, shape (n, 2)
        The points.
    y : numpy.ndarray, shape (n,)
        Their labels.
    noise : float
        The generator's noise sd, positive.

    Returns
    -------
    dict of str to float
        ``bayes_accuracy`` (predicting class 1 where ``P(class 1 | x) > 0.5``)
        and ``bayes_nll`` (the mean negative log-likelihood, nats).

    Raises
    ------
    ValueError
        For an unknown data set, or unless ``noise > 0`` (from
        :func:`bayes_proba`).
    """
    p1 = np.clip(bayes_proba(name, X, noise), 1e-300, 1 - 1e-16)
    y = np.asarray(y)
    return {"bayes_accuracy": float(np.mean((p1 > 0.5) == (y == 1))),
            "bayes_nll": float(-np.mean(np.where(y == 1, np.log(p1), np.log1p(-p1))))}
