"""The toy generators' Bayes-optimal classifier: exact where it can be checked, calibrated, and best."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bnn_zoo.data import toy


def test_circles_density_is_the_angle_integral():
    X = np.random.default_rng(0).normal(size=(50, 2))
    t = np.linspace(0, 2 * np.pi, 20_000, endpoint=False)
    for label, r in ((0, 1.0), (1, toy.CIRCLES_FACTOR)):
        curve = np.column_stack([r * np.cos(t), r * np.sin(t)])
        numeric = logsumexp(-((X[:, None] - curve[None]) ** 2).sum(2) / (2 * 0.3**2), axis=1) - np.log(len(t))
        np.testing.assert_allclose(toy.log_density("circles", X, 0.3, label), numeric, atol=1e-8)


@pytest.mark.parametrize("noise", [0.1, 0.4])
def test_moons_quadrature_has_converged(noise, monkeypatch):
    X = toy.load("moons", n_train=10, n_test=2000, noise=noise, seed=1).X_test
    p = toy.bayes_proba("moons", X, noise)
    monkeypatch.setattr(toy, "quadrature_points", lambda noise: 16_384)
    assert np.abs(toy.bayes_proba("moons", X, noise) - p).max() < 1e-3


@pytest.mark.parametrize("name, noise", [("moons", 0.3), ("circles", 0.2)])
def test_the_bayes_probabilities_are_calibrated_and_best(name, noise):
    split = toy.load(name, n_train=1000, n_test=40_000, noise=noise, seed=3)
    p = toy.bayes_proba(name, split.X_test, noise)
    bins = np.minimum((p * 10).astype(int), 9)
    for b in range(10):
        inside = bins == b
        if inside.sum() > 500:  # the share of class 1 in each bin is the predicted one
            freq, mean = split.y_test[inside].mean(), p[inside].mean()
            assert abs(freq - mean) < 4 * np.sqrt(mean * (1 - mean) / inside.sum()) + 0.01
    # No classifier does better on fresh points: here, a k-nearest-neighbour vote on 1,000.
    from sklearn.neighbors import KNeighborsClassifier

    knn = KNeighborsClassifier(25).fit(split.X_train, split.y_train)
    bayes = toy.bayes_metrics(name, split.X_test, split.y_test, noise)
    assert bayes["bayes_accuracy"] >= knn.score(split.X_test, split.y_test)
    knn_nll = -np.mean(np.log(np.clip(knn.predict_proba(split.X_test)[np.arange(len(p)), split.y_test],
                                      1e-12, None)))
    assert bayes["bayes_nll"] < knn_nll


def test_bayes_needs_noise_and_a_known_data_set():
    with pytest.raises(ValueError, match="needs noise > 0"):
        toy.bayes_proba("moons", np.zeros((2, 2)), 0.0)
    with pytest.raises(ValueError, match="unknown dataset 'spirals'"):
        toy.bayes_proba("spirals", np.zeros((2, 2)), 0.2)
