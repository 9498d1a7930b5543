import numpy as np
import pytest

from evaluation.metrics import accuracy, all_metrics, brier, ece, nll

Y = np.array([0, 1, 1, 0])


def test_perfect_confident_predictions():
    p = np.eye(2)[Y]
    assert accuracy(p, Y) == 1.0
    assert brier(p, Y) == 0.0
    assert ece(p, Y) == 0.0
    assert nll(p, Y) == pytest.approx(0.0, abs=1e-12)


def test_uninformative_predictions():
    p = np.full((4, 2), 0.5)
    assert brier(p, Y) == pytest.approx(0.5)
    assert nll(p, Y) == pytest.approx(np.log(2))


def test_ece_of_overconfident_predictions():
    # Always 90% sure, right half the time: ECE = |0.5 - 0.9|.
    p = np.array([[0.9, 0.1], [0.9, 0.1], [0.1, 0.9], [0.1, 0.9]])
    y = np.array([0, 1, 0, 1])
    assert ece(p, y) == pytest.approx(0.4)
    assert accuracy(p, y) == 0.5


def test_draws_are_averaged_before_scoring():
    # Two confident draws that disagree average to 0.5: the NLL is log 2, not
    # the mean of per-draw NLLs (which would be infinite here).
    draws = np.stack([np.eye(2)[Y], np.eye(2)[1 - Y]])
    assert nll(draws, Y) == pytest.approx(np.log(2))
    assert set(all_metrics(draws, Y)) == {"accuracy", "nll", "brier", "ece"}
