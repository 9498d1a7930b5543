import numpy as np
import pytest

from bnn_zoo.evaluation.metrics import (
    accuracy, all_metrics, brier, ece, nll, per_input_uncertainty, reliability_table,
)

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


def test_per_input_uncertainty_by_hand():
    # Two draws for two inputs over two classes.
    proba = np.array([[[1.0, 0.0], [0.9, 0.1]],
                      [[0.0, 1.0], [0.7, 0.3]]])
    unc = per_input_uncertainty(proba)
    np.testing.assert_array_equal(unc["predicted"], [0, 0])  # mean (0.5, 0.5) ties to class 0
    np.testing.assert_allclose(unc["expected_error"], [0.5, 0.2])
    # Var over draws of p per class, summed: input 0: 0.25 + 0.25; input 1: 0.01 + 0.01.
    np.testing.assert_allclose(unc["variance"], [0.5, 0.02])
    with pytest.raises(ValueError, match="draws"):
        per_input_uncertainty(proba[0])


def test_reliability_table_by_hand():
    proba = np.array([[0.95, 0.05], [0.92, 0.08], [0.35, 0.65], [0.6, 0.4]])
    y = np.array([0, 1, 1, 1])
    table = reliability_table(proba, y, n_bins=4)  # bins of width 0.25
    np.testing.assert_array_equal(table["count"], [0, 0, 2, 2])
    np.testing.assert_allclose(table["confidence"][2:], [0.625, 0.935])
    np.testing.assert_allclose(table["accuracy"][2:], [0.5, 0.5])
    assert np.isnan(table["confidence"][:2]).all() and np.isnan(table["accuracy"][:2]).all()
    # ECE is the count-weighted gap of the same table.
    assert ece(proba, y, n_bins=4) == pytest.approx(0.5 * 0.125 + 0.5 * 0.435)


def test_a_probability_of_zero_scores_finite_in_float32_under_jax_as_under_numpy():
    """1e-300, the clip of a probability of 0, is 0 in float32: a sweep's float32 device program
    scored such a point's NLL inf where NumPy scored it finite."""
    import jax.numpy as jnp

    from bnn_zoo.evaluation.metrics import scores

    p, y = np.array([[1.0, 0.0], [0.3, 0.7]], np.float32), np.array([1, 1])
    on_device = float(scores(jnp.asarray(p), jnp.asarray(y), jnp)["nll"])
    assert np.isfinite(on_device)
    assert on_device == pytest.approx((-np.log(np.finfo(np.float32).tiny) - np.log(0.7)) / 2, rel=1e-5)
    assert np.isfinite(float(scores(p, y)["nll"]))
