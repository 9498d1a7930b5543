"""method="auto" (issue 54): the rungs, the test each passes, the path it records, importance-resampled
draws, and the hand-off to NUTS."""

import dataclasses
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy.special import gammaln

import bnn_zoo
from bnn_zoo.inference import auto
from bnn_zoo.inference.diagnostics import qcheck


def _skewed_poisson():
    """log p(a) = sum(y) a - n exp(a) - a^2 / 200: a log rate from four small counts, skewed to the left.
    Returns the model and the exact posterior mean and sd of ``a`` (by quadrature)."""
    y = np.array([0, 1, 0, 2])
    with pm.Model() as model:
        a = pm.Normal("a", 0, 10)
        pm.Poisson("y", pm.math.exp(a), observed=y)
    grid = np.linspace(-8, 4, 200_001)
    log_p = y.sum() * grid - y.size * np.exp(grid) - grid**2 / 200
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    mean = float(np.sum(w * grid))
    return model, mean, float(np.sqrt(np.sum(w * (grid - mean) ** 2)))


def _exact_rate():
    """E[exp(a) | y] of :func:`_skewed_poisson`: the posterior predictive mean of a count."""
    y = np.array([0, 1, 0, 2])
    grid = np.linspace(-8, 4, 200_001)
    log_p = y.sum() * grid - y.size * np.exp(grid) - grid**2 / 200
    w = np.exp(log_p - log_p.max())
    return float(np.sum(w * np.exp(grid)) / w.sum())


def test_auto_stops_at_laplace_where_it_passes_and_its_draws_are_importance_resampled():
    model, mean, sd = _skewed_poisson()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no rung warns when the first passes
        result = bnn_zoo.fit(model, method="auto")
    path = result.config["auto"]["path"]
    assert result.method == "laplace" and [e["rung"] for e in path] == ["laplace"] and path[0]["passed"]
    assert all(k <= qcheck.K_WARN for k in path[0]["q_pareto_k_halves"]) and result.config["importance_resampled"]
    assert result.config["auto"]["returned"] == 0 and path[0]["seconds"] > 0 and np.isfinite(path[0]["elbo"])
    idata = bnn_zoo.sample(result, 4000)
    assert idata.attrs["importance_resampled"] == "4000 of 16000 draws of q, by their PSIS weights"
    drawn = idata["posterior"]["a"].values.ravel()
    mode = float(result.mean["a"])  # q's own mean
    assert abs(mode - mean) > 0.15 * sd  # the skew Laplace misses...
    assert abs(drawn.mean() - mean) < 0.05 * sd and drawn.std() == pytest.approx(sd, rel=0.05)  # ...resampled
    np.testing.assert_allclose(idata["sample_stats"]["psis_log_weight"].values, -np.log(4000))
    # each kept draw carries its own pointwise log likelihood and log p (the pool is judged by log p alone,
    # the kept draws evaluated again), a draw resampled twice the same values twice
    y, a = np.array([0, 1, 0, 2]), drawn[:, None]
    np.testing.assert_allclose(idata["log_likelihood"]["y"].values[0], y * a - np.exp(a) - gammaln(y + 1),
                               rtol=1e-12)
    np.testing.assert_allclose(idata["sample_stats"]["log_p"].values[0],
                               (y * a - np.exp(a) - gammaln(y + 1)).sum(1) - a[:, 0] ** 2 / 200
                               - np.log(10 * np.sqrt(2 * np.pi)), atol=1e-6)  # PyMC's constants: 3e-8
    assert len(np.unique(drawn)) < drawn.size  # resampled with replacement
    pred = bnn_zoo.predict(result, var_names=["y"], draws=4000)  # predict takes the same corrected draws
    rate = pred["predictions"]["y"].values.mean()
    raw = dataclasses.replace(result, config=dict(result.config, importance_resampled=False))  # q's own draws
    raw_rate = bnn_zoo.predict(raw, var_names=["y"], draws=4000)
    exact = _exact_rate()
    assert abs(rate - exact) < 0.5 * abs(raw_rate["predictions"]["y"].values.mean() - exact)
    assert "laplace" in bnn_zoo.path_table(result).splitlines()[1] and "<-" in bnn_zoo.path_table(result)
    # PSIS-LOO takes resampled draws as the posterior's, and q's own with the p / q correction: one answer.
    resampled, own = bnn_zoo.loo(idata), bnn_zoo.loo(bnn_zoo.sample(raw, 4000))
    assert not resampled.approx_posterior and own.approx_posterior
    assert resampled.elpd == pytest.approx(own.elpd, abs=0.1)


def _funnel(n=8, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        tau = pm.HalfNormal("tau", 1)
        theta = pm.Normal("theta", 0, tau, shape=n)
        pm.Normal("y", theta, 1, observed=rng.normal(size=n))
    return model


def test_auto_climbs_past_a_laplace_fit_with_no_mode_and_says_when_no_rung_passes():
    model = _funnel()
    with pytest.warns(qcheck.ApproximationWarning, match=r"^method='auto': no rung passed its test: laplace "
                      r"\(laplace\) q_pareto_k [0-9.]+ > 0\.7, gaussian \(fullrank_advi\) q_pareto_k [0-9.]+ > 0\.7; "
                      r"returning [a-z_]+ \(the lowest q_pareto_k\), not resampled; for the posterior itself hand "
                      r"off to NUTS: "
                      r"bnn_zoo\.nuts\(result\)"):
        result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("laplace", "gaussian")), steps=3_000,
                             progressbar=False)
    path = result.config["auto"]["path"]
    assert [e["rung"] for e in path] == ["laplace", "gaussian"] and not any(e["passed"] for e in path)
    assert not path[0]["converged"]  # the funnel has no mode: full rank did not start from it
    assert not result.config["importance_resampled"] and result.config["auto"]["returned"] in (0, 1)
    with pytest.warns(qcheck.ApproximationWarning):
        assert "importance_resampled" not in bnn_zoo.sample(result, 4000).attrs


def test_the_flow_starts_from_the_gaussian_fitted_for_all_its_steps(monkeypatch):
    """The Gaussian rung stops once converged; where the climb goes on to the flow, the flow starts from
    that Gaussian fitted again for all its steps (the flow's k is sensitive to its start)."""
    from bnn_zoo.inference import auto

    calls, real = [], auto.fit_advi

    def spy(model, **kwargs):  # the real fit, its calls recorded
        result = real(model, **kwargs)
        calls.append((kwargs, result))
        return result

    monkeypatch.setattr(auto, "fit_advi", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qcheck.ApproximationWarning)
        result = bnn_zoo.fit(_funnel(), method=bnn_zoo.Auto(rungs=("laplace", "gaussian", "flow")), steps=6_000,
                             progressbar=False)
    (stopped, first), (again, full), (flow, _) = calls
    assert stopped["until_converged"] and first.config["converged_at"] is not None
    assert not again["until_converged"] and again["steps"] == 6_000 and "converged_at" not in full.config
    assert len(full.elbo) + full.config.get("warm_start", 0) == 6_000  # all its steps (a mean-field start's too)
    assert len(first.elbo) + first.config.get("warm_start", 0) < 6_000
    assert flow["method"] == "flow" and flow["init"] is full
    assert [e["rung"] for e in result.config["auto"]["path"]] == ["laplace", "gaussian", "flow"]


def _eight_schools_centred():
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with pm.Model(coords={"school": np.arange(8)}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta = pm.Normal("theta", mu, tau, dims="school")
        pm.Normal("y", theta, sigma, observed=y, dims="school")
    return model


def test_auto_learns_the_centring_of_eight_schools_and_passes():
    """Centred eight schools is a funnel for every Gaussian; the centring rung learns lambdas near 0 (the
    non-centred form), where full rank fits, and passes."""
    result = bnn_zoo.fit(_eight_schools_centred(), method="auto", progressbar=False)
    path = result.config["auto"]["path"]
    assert [e["rung"] for e in path] == ["laplace", "gaussian", "centring"] and path[-1]["passed"] and result.config["auto"]["passed"]
    assert not path[1]["passed"] and max(path[-1]["centring"]["theta"]) < 0.3
    # the centring rung stopped once converged, having averaged as many steps again
    at = result.config["converged_at"]
    assert at is not None and result.config["steps"] == len(result.elbo) <= 20_000 and at <= result.config["steps"]
    assert "theta_vip" in [rv.name for rv in result.model.free_RVs]
    idata = bnn_zoo.sample(result, 2000)
    assert idata["posterior"]["theta"].shape == (1, 2000, 8) and "importance_resampled" in idata.attrs
    tau = idata["posterior"]["tau"].values
    assert 2.5 < tau.mean() < 4.5  # NUTS on the non-centred form: 3.6 (sd 3.2)


def test_the_budget_stops_the_climb_and_says_so():
    with pytest.warns(qcheck.ApproximationWarning, match=r"no rung passed its test \(the budget stopped it\)"):
        result = bnn_zoo.fit(_funnel(), method=bnn_zoo.Auto(budget=1e-6))
    assert len(result.config["auto"]["path"]) == 1 and result.method == "laplace"


@pytest.mark.parametrize("bad, message", [
    (dict(budget=0), "budget must be a positive number of seconds or None, got 0"),
    (dict(draws=1000), "draws must be an integer of at least 4400"),
    (dict(draws=True), "draws must be an integer of at least 4400"),
    (dict(rungs=("gaussian", "laplace")), "rungs must be some of laplace, gaussian, centring, flow, in that order"),
    (dict(rungs=("nuts",)), "rungs must be some of"),
])
def test_auto_refuses_bad_settings(bad, message):
    with pytest.raises(ValueError, match=message):
        bnn_zoo.Auto(**bad)


def test_auto_refuses_the_settings_it_chooses_itself():
    model, *_ = _skewed_poisson()
    with pytest.raises(ValueError, match=r"^method='auto' takes steps, random_seed and progressbar only, not "
                                         r"batch_size=: it chooses"):
        bnn_zoo.fit(model, method="auto", batch_size=2)
    with pytest.raises(ValueError, match="method='auto' is bnn_zoo.fit's alone"):
        bnn_zoo.fit_many([model], method="auto")
    plain = bnn_zoo.fit(model, method="laplace")
    with pytest.raises(ValueError, match="this is a 'laplace' fit, not one of method='auto'"):
        bnn_zoo.path_table(plain)


def test_nuts_preconditioned_by_q_samples_the_posterior():
    model, mean, sd = _skewed_poisson()
    q = bnn_zoo.fit(model, method="laplace")
    idata = bnn_zoo.nuts(q, 1000, tune=200, chains=2)
    a = idata["posterior"]["a"].values
    assert a.shape == (2, 1000) and idata.attrs["rhat_max"] < 1.01
    assert int(idata["sample_stats"]["diverging"].sum()) == 0
    assert a.mean() == pytest.approx(mean, abs=0.1 * sd) and a.std() == pytest.approx(sd, rel=0.1)
    for bad, message in ((dict(draws=0), "draws must be an integer of at least 1"),
                         (dict(target_accept=1.5), "target_accept must be a number in")):
        with pytest.raises(ValueError, match=message):
            bnn_zoo.nuts(q, **bad)


def test_a_rung_that_fails_is_a_step_of_the_path(monkeypatch):
    """Laplace raising NonFiniteLossError: the path records it, and auto goes on to the Gaussian rung and
    returns that, never the failed rung."""
    from bnn_zoo.inference import auto

    def fail(*args, **kwargs):
        raise bnn_zoo.NonFiniteLossError("the log density is -inf at the end of the search for the mode")

    monkeypatch.setattr(auto, "fit_laplace", fail)  # the Laplace fit auto's rungs call
    model, mean, sd = _skewed_poisson()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qcheck.ApproximationWarning)
        result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("laplace", "gaussian")), steps=3_000,
                             progressbar=False)
    path = result.config["auto"]["path"]
    assert path[0]["rung"] == "laplace" and "log density is -inf" in path[0]["error"] and not path[0]["passed"]
    assert result.method == "fullrank_advi" and result.config["auto"]["returned"] == 1
    assert "failed" in bnn_zoo.path_table(result).splitlines()[1]
