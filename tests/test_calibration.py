"""Coverage, conformal intervals and sets, calibration plots and prior sensitivity (issue 46)."""

import numpy as np
import pytest

import bnn_zoo
from bnn_zoo.evaluation import calibration, calibration_plots, sensitivity


def _misspecified(n, seed):
    """Heteroscedastic targets under a predictive whose sd is right in shape but half as wide."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    sd = 0.2 + 0.5 * np.abs(x)
    y = np.sin(x) + sd * rng.standard_normal(n)
    draws = np.sin(x) + 0.5 * sd * rng.standard_normal((400, n))
    return y, draws


def test_raw_intervals_of_a_too_narrow_predictive_undercover_and_conformal_ones_recover():
    y, draws = _misspecified(4000, 0)
    raw = calibration.interval_coverage(y, draws)
    assert raw[0.9]["coverage"] < 0.7 and raw[0.5]["coverage"] < 0.35
    cal = np.arange(4000) < 1000
    lo, hi = calibration.conformal_intervals(y[cal], draws[:, cal], draws[:, ~cal], level=0.9).T
    inside = (lo <= y[~cal]) & (y[~cal] <= hi)
    assert 0.88 <= inside.mean() <= 0.93  # the guarantee: at least 0.9, at most 0.9 + 1/1001, give or take 0.5 points
    # normalised by the predictive sd: wider where the draws spread wider
    width, spread = hi - lo, draws[:, ~cal].std(0)
    assert np.corrcoef(width, spread)[0, 1] > 0.99
    folded = calibration.interval_coverage(y, draws, levels=(0.9, 0.95), conformal=True)
    assert abs(folded[0.9]["coverage"] - 0.9) < 0.015 and abs(folded[0.95]["coverage"] - 0.95) < 0.01


def test_conformal_sets_hold_their_level_and_raw_sets_follow_the_probabilities():
    rng = np.random.default_rng(1)
    n, k = 3000, 4
    logits = rng.normal(size=(n, k)) * 2
    truth = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=p) for p in truth])
    overconfident = np.exp(3 * logits) / np.exp(3 * logits).sum(1, keepdims=True)
    raw = calibration.set_coverage(y, overconfident)
    assert raw[0.9]["coverage"] < 0.85  # the model's own 90% sets miss
    conf = calibration.set_coverage(y, overconfident, conformal=True)
    assert abs(conf[0.9]["coverage"] - 0.9) < 0.02 and conf[0.9]["size"] > raw[0.9]["size"]
    # a calibrated model's raw sets cover as often as the probability they hold (at least 0.9);
    # the sets of a sure model are single labels
    mass = np.sort(truth, 1)[:, ::-1].cumsum(1)
    held = mass[np.arange(n), (mass < 0.9).sum(1)].mean()
    assert held >= 0.9 and abs(calibration.set_coverage(y, truth)[0.9]["coverage"] - held) < 0.02
    onehot = np.eye(k)[y]
    assert calibration.set_coverage(y, onehot)[0.95] == {"coverage": 1.0, "size": 1.0}
    sets = calibration.conformal_sets(y[:1000], overconfident[:1000], overconfident[1000:], level=0.9)
    assert sets.shape == (n - 1000, k) and sets.dtype == bool


@pytest.mark.parametrize("call, message", [
    (lambda: calibration.conformal_intervals(np.zeros(18), np.ones((5, 18)), np.ones((5, 3)), level=0.95),
     "conformal_intervals: level 0.95 needs at least 19 calibration points, y_cal has 18; hold out more points "
     "or lower level"),
    (lambda: calibration.conformal_sets([0, 1, 2] * 5, np.full((15, 2), 0.5), np.full((3, 2), 0.5)),
     "y_cal holds labels outside the 2 classes 0..1 (first: np.int64(2))"),
    (lambda: calibration.conformal_sets(["a"] * 15, np.full((15, 2), 0.5), np.full((3, 2), 0.5)),
     "y_cal holds labels outside the 2 classes 0..1 (first: np.str_('a'))"),
    (lambda: calibration.conformal_intervals(np.zeros(20), np.ones((5, 21)), np.ones((5, 3))),
     "draws_cal has 21 points in its last dimension, the targets 20"),
    (lambda: calibration.conformal_intervals(np.zeros(20), np.ones((5, 20)), np.ones((5, 3))),
     "the draws' sd is zero at some points"),
    (lambda: calibration.interval_coverage(np.zeros(3), np.ones((5, 3)), levels=(1.0,)),
     "level must lie strictly between 0 and 1, got 1.0"),
    (lambda: calibration.interval_coverage(np.zeros(20), np.ones((5, 20)), levels=(0.95,), conformal=True),
     "interval_coverage: level 0.95 needs at least 19 calibration points, y_cal has 18"),
])
def test_a_calibration_set_too_small_or_bad_labels_are_one_clear_line(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_min_calibration_size_is_where_the_rank_first_fits():
    for level in (0.5, 0.8, 0.9, 0.95, 0.99):
        n = calibration.min_calibration_size(level)
        assert calibration.conformal_rank(n - 1, level) > n - 1 >= 0 or n == 1
        assert calibration.conformal_rank(n, level) <= n
        # the exact rank, ceil((n + 1) level), from the level as a fraction of integers
        num, den = {0.5: (1, 2), 0.8: (4, 5), 0.9: (9, 10), 0.95: (19, 20), 0.99: (99, 100)}[level]
        assert calibration.conformal_rank(n, level) == -(-(n + 1) * num // den)


@pytest.mark.parametrize("n", [19, 29, 69])
def test_conformal_intervals_and_sets_cover_their_level_where_n_plus_1_is_a_multiple_of_10(n):
    """At these sizes a rank from floating point took the next score up: 90% intervals covered
    0.951 at n = 19 and 0.934 at n = 29 (the exact rank gives 18/20 and 27/30)."""
    rng = np.random.default_rng(n)
    reps = 4000
    y_cal, y_test = rng.normal(size=(reps, n)), rng.normal(size=reps)
    draws = rng.normal(size=(400, 1))
    draws = (draws - draws.mean()) / draws.std()  # mean 0, sd 1: the half-width is a score itself
    k = calibration.conformal_rank(n, 0.9)
    hits = sets_hits = 0
    for y, t in zip(y_cal, y_test):
        lo, hi = calibration.conformal_intervals(y, np.repeat(draws, n, 1), draws, level=0.9)[0]
        assert hi == pytest.approx(np.sort(np.abs(y))[k - 1])  # the k-th smallest score, exactly
        hits += lo <= t <= hi
        p_cal = np.column_stack([1 / (1 + np.exp(-y)), 1 - 1 / (1 + np.exp(-y))])  # label 0's p from y
        p_test = np.array([[1 / (1 + np.exp(-t)), 1 - 1 / (1 + np.exp(-t))]])
        sets_hits += calibration.conformal_sets(np.zeros(n, int), p_cal, p_test, level=0.9)[0, 0]
    exact = k / (n + 1)
    for coverage in (hits / reps, sets_hits / reps):  # the exact coverage k / (n + 1), within 3 se
        assert abs(coverage - exact) < 3 * np.sqrt(exact * (1 - exact) / reps)


def test_coverage_metrics_leave_a_level_the_folds_cannot_calibrate_blank():
    m = calibration.coverage_metrics(np.zeros(20, int), proba=np.full((20, 2), 0.5))
    assert m["conf_set_coverage90"] == 1.0 and np.isnan(m["conf_set_coverage95"])
    with pytest.raises(ValueError, match="give draws .* or proba"):
        calibration.coverage_metrics(np.zeros(3))


@pytest.fixture(scope="module")
def toy_fit():
    from bnn_zoo.data import toy
    from bnn_zoo.models import mlp_classifier

    split = toy.load("moons", n_train=150, n_test=60, seed=0)
    fits = {}
    for prior, hyper in (("normal", "halfnormal"), ("flat", "fixed")):
        model = mlp_classifier(split.X_train, split.y_train, hidden=(4,), prior=prior, hyperprior=hyper)
        fit = bnn_zoo.fit(model, steps=800, progressbar=False)
        fits[prior] = fit, bnn_zoo.sample(fit, 300)
    return split, fits


def test_psense_finds_the_scales_prior_sensitive_and_a_flat_prior_insensitive(toy_fit):
    _, fits = toy_fit
    fit, idata = fits["normal"]
    table = sensitivity.prior_sensitivity(idata.copy(), fit.model, var_names=["scale_0", "W_0"])
    assert list(dict.fromkeys(table["variable"])) == ["scale_0", "W_0"] and len(table) == 1 + 2 * 4
    assert (table[["prior", "likelihood"]] >= 0).all().all() and table.loc["scale_0", "prior"] > 0
    per = sensitivity.by_variable(table)
    assert per.loc["W_0", "size"] == 8 and 0 <= per.loc["W_0", "prior_share"] <= 1
    flat_fit, flat = fits["flat"]
    flat_table = sensitivity.prior_sensitivity(flat.copy(), flat_fit.model, var_names=["W_0"])
    assert (flat_table["prior"] == 0).all() and (flat_table["likelihood"] > 0).all()
    with pytest.raises(ValueError, match="pass the model"):
        sensitivity.prior_sensitivity(idata.copy())


def test_the_calibration_plots_draw_through_arviz_plots(toy_fit, tmp_path):
    from matplotlib.figure import Figure

    split, fits = toy_fit
    fit, idata = fits["normal"]
    figures = [calibration_plots.pit(calibration_plots.with_predictive(fit, idata.copy()), title="LOO-PIT"),
               calibration_plots.reliability(calibration_plots.heldout(split.y_test, np.tile(split.y_test, (5, 1)))),
               calibration_plots.pit(calibration_plots.heldout(*np.split(np.random.default_rng(0).normal(
                   size=(51, 30)), [1]))),
               sensitivity.plot(idata.copy(), ["scale_0"], fit.model)]
    assert all(isinstance(f, Figure) and f.axes for f in figures)
    assert figures[0].axes[0].get_title() == "LOO-PIT" and "LOO-PIT" in figures[0].axes[0].get_xlabel()
    with pytest.raises(ValueError, match="draws has 4 points in its last dimension, y 3"):
        calibration_plots.heldout(np.zeros(3), np.zeros((2, 4)))


_P = np.full((30, 4), 0.25)  # 30 points, 4 classes, rows summing to 1
_Y = np.zeros(30, int)


@pytest.mark.parametrize("call, message", [
    # a NaN or inf target is refused, not counted as a miss
    (lambda: calibration.interval_coverage([0.0, np.nan, 1.0], np.ones((5, 3))),
     "y holds non-finite values (1 of 3); drop those points and their draws"),
    (lambda: calibration.coverage_metrics(np.r_[np.inf, np.zeros(29)], np.random.default_rng(0).normal(size=(5, 30))),
     "y holds non-finite values (1 of 30)"),
    (lambda: calibration.conformal_intervals(np.r_[np.nan, np.zeros(19)], np.ones((5, 20)), np.ones((5, 3))),
     "y_cal holds non-finite values (1 of 20)"),
    # class probabilities: non-finite, outside [0, 1], rows summing to 3 (each value inside [0, 1])
    (lambda: calibration.set_coverage(_Y, np.where(np.eye(30, 4, dtype=bool), np.nan, _P)),
     "proba holds non-finite values"),
    (lambda: calibration.set_coverage(_Y, np.where(np.eye(30, 4, dtype=bool), np.inf, _P)),
     "proba holds non-finite values"),
    (lambda: calibration.set_coverage(_Y, _P - 0.5), "proba holds values outside [0, 1] (from -0.25 to -0.25); "
     "pass probabilities, not logits"),
    (lambda: calibration.set_coverage(_Y, _P * 3), "proba's rows must sum to 1 within 0.001, one sums to 3; "
     "pass probabilities normalised over the last axis"),
    (lambda: calibration.coverage_metrics(_Y, proba=_P * 3), "proba's rows must sum to 1 within 0.001"),
    (lambda: calibration.conformal_sets(_Y, _P, _P * 3), "proba_test's rows must sum to 1 within 0.001"),
    (lambda: calibration.conformal_sets(_Y, -_P, _P), "proba_cal holds values outside [0, 1]"),
    # empty input, and 1-D probabilities
    (lambda: calibration.interval_coverage([], np.empty((5, 0))), "y is empty (shape (0,)); pass at least one point"),
    (lambda: calibration.conformal_intervals(np.zeros(20), np.ones((5, 20)), np.empty((5, 0))),
     "draws_test is empty (shape (5, 0))"),
    (lambda: calibration.set_coverage([], np.empty((0, 2))), "proba is empty (shape (0, 2))"),
    (lambda: calibration.set_coverage([0, 1], np.array([0.3, 0.7])),
     "proba has shape (2,), not (..., n, K); pass one probability per class in the last axis"),
    (lambda: calibration.set_coverage([0, 1, 1], np.full((5, 2, 2), 0.5)),
     "y has 3 labels, the probabilities 2 points"),
    (lambda: calibration.interval_coverage(["a", "b"], np.ones((5, 2))), "y is not numeric (a list); pass an array"),
])
def test_every_input_is_checked_and_refused_in_one_line_naming_it(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_float32_probabilities_pass_the_row_sum_check():
    proba = np.random.default_rng(0).dirichlet(np.ones(10), size=(50, 40)).astype("float32")
    assert np.abs(proba.sum(-1) - 1).max() > 0  # rounded: the rows are not exactly 1
    out = calibration.set_coverage(np.zeros(40, int), proba * np.float32(1 + 5e-4))  # within the 1e-3
    assert 0 <= out[0.9]["coverage"] <= 1 and 1 <= out[0.9]["size"] <= 10


def test_psense_warns_on_the_draws_of_a_poor_q_and_points_a_pm_sample_user_to_compute_log_likelihood(toy_fit):
    import warnings

    import pymc as pm

    from bnn_zoo.inference.diagnostics.qcheck import K_WARN, NEXT, ApproximationWarning

    _, fits = toy_fit
    fit, idata = fits["normal"]
    poor = idata.copy()
    poor.attrs = {k: v for k, v in poor.attrs.items() if k != "pareto_k"} | {"q_pareto_k": K_WARN + 0.2}
    with pytest.warns(ApproximationWarning) as caught:
        sensitivity.prior_sensitivity(poor, fit.model, var_names=["scale_0"])
    message = str(caught[0].message)
    assert caught[0].filename == __file__ and "\n" not in message
    assert "Pareto k is 0.90 > 0.7" in message and "unreliable" in message
    assert f"refit with {NEXT['advi']}, or draw with pm.sample" in message
    # the key bnn_zoo.sample wrote before the rename, and draws with no k (pm.sample's): no warning there
    old = idata.copy()
    old.attrs = {k: v for k, v in old.attrs.items() if k != "q_pareto_k"} | {"pareto_k": 1.3}
    with pytest.warns(ApproximationWarning, match="Pareto k is 1.30"):
        sensitivity.plot(old, ["scale_0"], fit.model)
    nuts_like = idata.copy()
    nuts_like.attrs = {k: v for k, v in nuts_like.attrs.items() if k not in ("pareto_k", "q_pareto_k", "fit_method")}
    del nuts_like["log_likelihood"]
    with pytest.raises(ValueError) as err:
        sensitivity.prior_sensitivity(nuts_like, fit.model)
    assert "add it with pm.compute_log_likelihood(idata, model=model)" in str(err.value)
    pm.compute_log_likelihood(nuts_like, model=fit.model, progressbar=False)  # the advice works
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)
        table = sensitivity.prior_sensitivity(nuts_like, fit.model, var_names=["scale_0"])
    assert table.loc["scale_0", "prior"] > 0


def test_one_draw_per_point_is_refused_not_scored_as_no_coverage():
    """1-D draws (a point prediction) gave coverage 0 and width 0 at every level, without a word."""
    rng = np.random.default_rng(0)
    y, draws = rng.normal(size=40), rng.normal(size=(100, 40))
    for one in (draws[0], draws[:1]):
        with pytest.raises(ValueError, match=r"draws has shape \(.*\): one draw at each point"):
            calibration.interval_coverage(y, one)
