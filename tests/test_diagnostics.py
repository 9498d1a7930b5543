"""The optimiser's tests: of an ELBO trace, on traces whose answer is known, and of a Laplace fit's mode."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import bnn_zoo
from bnn_zoo.inference.diagnostics.convergence import convergence, recorded
from bnn_zoo.inference.diagnostics.modecheck import MODE_NATS, RISING, ModeCheck, mode_check


def ar1(n, rho, sd, rng):
    """Stationary autocorrelated noise (Adam's iterates make the ELBO trace so)."""
    e = rng.normal(0, sd * np.sqrt(1 - rho**2), n)
    out = np.empty(n)
    out[0] = rng.normal(0, sd)
    for t in range(1, n):
        out[t] = rho * out[t - 1] + e[t]
    return out


def test_a_flat_noisy_trace_has_converged():
    # Even autocorrelated: false alarms stay rare (batch means carry the autocorrelation).
    rng = np.random.default_rng(0)
    flagged = [not convergence(-150 + ar1(10_000, 0.9, 5.0, rng)).converged for _ in range(200)]
    assert np.mean(flagged) < 0.05


def test_a_rising_trace_has_not():
    rng = np.random.default_rng(1)
    steps = np.arange(10_000)
    trace = -150 + 40 * steps / 10_000 + rng.normal(0, 5, 10_000)  # +4 nats over the last 1,000
    c = convergence(trace)
    assert not c.converged and c.finite and c.window == 1000
    assert c.elbo_change == pytest.approx(4.0, abs=4 * c.elbo_change_se)
    assert convergence(trace[:3000]).window == 1000 and convergence(trace[:400]).window == 400
    assert "still rising" in c.describe()
    falling = convergence(-trace - 300)
    assert not falling.converged and "still falling" in falling.describe()


def test_a_trend_too_small_to_matter_passes():
    # Real but small trends: 30 nats over the window on an ELBO of -60,000 (5e-4 of it), and
    # 0.8 nats on one of -150; both far beyond their noise.
    steps = np.arange(10_000)
    rng = np.random.default_rng(2)
    for size, rise in ((-60_000, 300.0), (-150, 8.0)):
        c = convergence(size + rise * steps / 10_000 + rng.normal(0, 1e-3, 10_000))
        assert abs(c.elbo_change) > 3 * c.elbo_change_se and c.converged
    c = convergence(-150 + 12.0 * steps / 10_000 + rng.normal(0, 1e-3, 10_000))  # 1.2 nats: not
    assert not c.converged


def test_non_finite_and_short_traces():
    assert not convergence(np.array([1.0, np.nan, 2.0])).converged
    assert "non-finite" in convergence(np.array([1.0, np.inf])).describe()
    short = convergence(np.array([-3.0, -2.0, -1.0]))  # too short for a trend: finite is enough
    assert short.converged and np.isnan(short.elbo_change)


def test_a_fit_that_fell_below_where_it_had_been_has_not_converged():
    # A full-rank fit at too large a rate (issue 19's regression): thousands of nats below its
    # start at once, then a slow climb to a flat last window, still hundreds short.
    rng = np.random.default_rng(3)
    steps = np.arange(50_000)
    trace = 770 - 3000 * np.exp(-steps / 4000) + rng.normal(0, 5, 50_000)
    flat_end = convergence(trace)
    assert flat_end.converged  # its own trace ends at its best
    c = convergence(trace, start=1168.0)  # the mean-field fit it started from
    assert not c.converged and c.fell and c.elbo_shortfall == pytest.approx(398, abs=5)
    assert "fell" in c.describe() and "smaller learning rate" in c.hint()
    assert convergence(trace, start=760.0).converged  # a start below the end is no shortfall
    # A fit that diverges: its last window far below an earlier one, with a trend lost in noise.
    wild = np.concatenate([1100 + rng.normal(0, 5, 5_000), -3e5 + rng.normal(0, 1e5, 45_000)])
    assert not convergence(wild).converged and convergence(wild).fell


def test_the_shortfall_test_keeps_false_alarms_rare():
    rng = np.random.default_rng(4)
    checks = [convergence(-150 + ar1(20_000, 0.9, 5.0, rng), start=-150.0) for _ in range(300)]
    assert np.mean([c.fell for c in checks]) < 0.02
    # A diverged fit's noise is as large as its fall; nearly all of it is still below its start.
    exploding = -np.exp(rng.uniform(20, 160, 3_000))
    c = convergence(exploding, start=-150.0)
    assert c.elbo_change_se > abs(c.elbo_change) and c.fell and not c.converged


# --- issue 52: one vocabulary: each finding says what it tested, passed or not ---------------------

def test_a_passed_test_reads_as_passed():
    rng = np.random.default_rng(0)
    c = convergence(-150 + rng.normal(0, 5, 20_000))
    assert c.converged
    assert c.describe().startswith("the ELBO stopped moving: ") and " ± " in c.describe()
    assert c.describe().endswith("nats over the last 2,000 steps") and "still" not in c.describe()
    steps = np.arange(10_000)  # a real trend, too small to matter, says so
    small = convergence(-60_000 + 300 * steps / 10_000 + rng.normal(0, 1e-3, 10_000))
    assert small.converged and small.describe().startswith("the ELBO moves too little to matter: +28.5 nats over")
    assert small.describe().endswith("under the 59.7 that count")
    assert "too few to test for a trend" in convergence(np.array([-3.0, -2.0, -1.0])).describe()


def _found(**changes):
    """A Laplace finding at a mode of a 3-dimensional model, with ``changes``."""
    found = dict(finite=True, mode_gap=1e-9, gradient_max=1e-6, curvature_min=0.5, curvature_max=4.0, negative=0,
                 flat=0, flat_tolerance=1e-12, flat_variables="", flat_slope=0.0, tested=3, dim=3, iterations=12,
                 hit_limit=False, stopped="CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")
    return mode_check(**{**found, **changes})


def test_the_laplace_finding_says_what_it_tested():
    at_mode = _found()
    assert at_mode.converged and at_mode.hint() == ""
    assert at_mode.describe().startswith("L-BFGS reached the mode: 1e-09 nats below it by the gradient")
    assert "all 3 curvatures are positive (smallest 0.5)" in at_mode.describe() and "ELBO" not in at_mode.describe()
    short = _found(mode_gap=2.36, gradient_max=0.12, iterations=20, hit_limit=True)
    assert not short.converged and short.hint() == "try more steps"
    assert short.describe() == ("L-BFGS stopped 2.36 nats below the mode by the gradient (max |gradient| 0.12) "
                                "after 20 iterations (its limit, steps)")
    stuck = _found(mode_gap=2 * MODE_NATS, stopped="ABNORMAL_TERMINATION_IN_LNSRCH")
    assert not stuck.converged and "more steps will not help" in stuck.hint()
    saddle = _found(negative=2, curvature_min=-0.3)
    assert not saddle.converged and "2 of the 3 curvatures tested are negative (smallest -0.3)" in saddle.describe()
    improper = _found(flat=1, curvature_min=0.0, flat_variables="a, b", flat_slope=RISING / 10)
    assert not improper.converged and "flat along 1 of 3 directions, spanned by a, b" in improper.describe()
    assert "the posterior is improper there, or the model unidentified" in improper.describe()
    assert "proper priors on a, b" in improper.hint() and "steps" not in improper.hint()
    funnel = _found(flat=1, flat_variables="tau_log__", flat_slope=7.0)
    assert "no mode: it keeps rising, by 7 nats per unit, along 1 of 3 directions, spanned by tau_log__" \
        in funnel.describe() and "non-centred" in funnel.hint()


def test_a_record_reads_back_as_its_finding():
    rng = np.random.default_rng(1)
    c = convergence(-150 + np.linspace(0, 40, 10_000) + rng.normal(0, 5, 10_000))
    for finding in (c, _found(flat=1, flat_variables="a, b"), _found()):
        back = recorded(finding.record())
        assert back == finding and back.describe() == finding.describe()
    assert isinstance(recorded(_found().record()), ModeCheck) and "converged" in _found().record()
    older = {k: v for k, v in c.record().items() if k not in ("convergence_fell", "convergence_moving")}
    assert recorded(older).fell is False  # a field written after the record takes its default


def test_the_summary_shows_the_optimiser_next_to_the_accuracy_verdict():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1, observed=[0.5, 1.5])
    fit = bnn_zoo.fit(model, method="laplace")
    assert repr(fit) == fit.summary() and fit.summary().startswith(
        "FitResult('laplace', 1 values): optimiser converged: L-BFGS reached the mode")
    assert "q's accuracy not measured" in fit.summary()
    far = xr.DataTree(dataset=xr.Dataset(attrs={"q_pareto_k": 0.93, "fit_method": "laplace"}))
    line = fit.summary(far)
    assert "optimiser converged" in line and line.endswith(
        "q is far from the posterior (q_pareto_k 0.93 > 0.7): its means and sds may be off")
    close = xr.DataTree(dataset=xr.Dataset(attrs={"q_pareto_k": 0.2, "fit_method": "laplace"}))
    assert "q passes its accuracy check (q_pareto_k 0.20 <= 0.7)" in fit.summary(close)
    other = xr.DataTree(dataset=xr.Dataset(attrs={"q_pareto_k": 0.2, "fit_method": "advi"}))
    with pytest.raises(ValueError, match="idata holds draws of a 'advi' fit, this is a 'laplace' one"):
        fit.summary(other)
