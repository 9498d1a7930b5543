"""The convergence test of an ELBO trace, on traces whose answer is known."""

import numpy as np
import pytest

from bnn_zoo.inference.diagnostics import convergence


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
