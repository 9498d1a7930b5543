"""The 2-D toy classification data sets of seed 004: moons and circles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import make_circles, make_moons

DATASETS = ("moons", "circles")


@dataclass(frozen=True)
class Split:
    """Train/test arrays of a 2-D binary classification problem."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def grid(self, n: int = 100, margin: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """An ``n x n`` grid covering all points plus ``margin``: (xx, yy, points)."""
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
        scikit-learn's ``make_moons`` or ``make_circles`` (``factor=0.5``).
    n_train, n_test : int
        Sizes of the two splits (seed 004: 700 / 300).
    noise : float
        Std of the Gaussian noise added to the points; >= 0.
    seed : int
        Seeds the sampling and the split.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if n_train < 2 or n_test < 1:
        raise ValueError(f"need n_train >= 2 and n_test >= 1, got {n_train} and {n_test}")
    n = n_train + n_test
    if name == "moons":
        X, y = make_moons(n, noise=noise, random_state=seed)
    else:
        X, y = make_circles(n, noise=noise, factor=0.5, random_state=seed)
    order = np.random.default_rng(seed).permutation(n)
    X, y = X[order], y[order].astype("int64")
    return Split(X[:n_train], y[:n_train], X[n_train:], y[n_train:])
