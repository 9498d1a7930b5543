"""The Gaussian families and methods of issue 45: low rank, the scaled full-rank factor, Laplace, Pareto k."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
import pytest
import scipy.stats

import bnn_zoo
from bnn_zoo.inference import families, laplace
from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.families import gaussians
from tests.test_advi import regression_model


def _random_params(family, d=6, seed=0):
    rng = np.random.default_rng(seed)
    params = family.init(rng.normal(size=d), np.exp(rng.normal(size=d) * 0.3))
    return {k: (v + 0.3 * rng.normal(size=v.shape) if k in ("W", "T_tril") else v) for k, v in params.items()}


@pytest.mark.parametrize("family", [families.MEAN_FIELD, families.low_rank(2), families.FULL_RANK])
def test_each_family_has_one_gaussian_in_jax_and_numpy(family):
    """draw, log_density (JAX) and factor, sample, log_q, covariance (NumPy) describe the same Gaussian."""
    params = _random_params(family)
    mu, factor = family.mean_and_factor(params)
    cov = gaussians.covariance(factor)
    z = np.random.default_rng(1).normal(size=(5, mu.size)) + mu
    exact = scipy.stats.multivariate_normal(mu, cov).logpdf(z)
    np.testing.assert_allclose(gaussians.log_q(mu, factor, z), exact, rtol=1e-8)
    jparams = {k: jnp.asarray(v) for k, v in params.items()}
    np.testing.assert_allclose([float(family.log_density(jparams, jnp.asarray(r))) for r in z], exact, rtol=1e-8)
    np.testing.assert_allclose(gaussians.marginal_sd(factor), np.sqrt(np.diag(cov)), rtol=1e-10)
    eps = np.random.default_rng(2).normal(size=(20_000, family.noise_size(params)))
    draws = np.asarray(jax.vmap(lambda e: family.draw(jparams, e)[0])(jnp.asarray(eps[:2000])))  # one draw per row
    _, log_det = family.draw(jparams, jnp.asarray(eps[0]))
    assert float(log_det) == pytest.approx(0.5 * np.linalg.slogdet(cov)[1], rel=1e-8)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.15 * np.abs(cov).max())
    back = family.from_factor(mu, factor)
    np.testing.assert_allclose(gaussians.covariance(family.mean_and_factor(back)[1]), cov, rtol=1e-8)


def test_full_rank_converts_to_pymc_and_back():
    model, mean, cov, _ = regression_model()
    fit = bnn_zoo.fit(model, method="fullrank_advi", steps=3000, progressbar=False)
    approx = fit.to_pymc()
    L_tril = approx.groups[0].params_dict["L_tril"].get_value()
    L = np.zeros((2, 2))
    L[np.tril_indices(2)] = L_tril
    L[np.diag_indices(2)] = np.logaddexp(0, np.diag(L))
    np.testing.assert_allclose(L @ L.T, fit.cov(), rtol=1e-6)


def test_low_rank_fit_recovers_the_correlated_posterior():
    model, mean, cov, _ = regression_model()
    fit = bnn_zoo.fit(model, method=bnn_zoo.LowRank(rank=1), progressbar=False)
    assert fit.method == "lowrank_advi"
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(fit.mean["w"] - mean), 0.1 * sd)
    np.testing.assert_allclose(fit.sd["w"], sd, rtol=0.1)
    q = fit.cov()
    assert q[0, 1] / np.sqrt(q[0, 0] * q[1, 1]) == pytest.approx(cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]), abs=0.05)
    with pytest.raises(ValueError, match="PyMC has no approximation"):
        fit.to_pymc()


def test_full_rank_at_its_defaults_ends_above_its_mean_field_start_in_hundreds_of_dimensions():
    """A random walk of 300 steps: the scaled factor and the rate in 1 / sqrt(dim) keep the ELBO up."""
    y = np.cumsum(np.random.default_rng(0).normal(0, 0.3, 300)) + np.random.default_rng(1).normal(0, 0.5, 300)
    with pm.Model() as model:
        walk = pm.GaussianRandomWalk("walk", sigma=0.3, init_dist=pm.Normal.dist(0, 5), shape=300)
        pm.Normal("y", walk, 0.5, observed=y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = bnn_zoo.fit(model, method="fullrank_advi", steps=6000, progressbar=False)
    assert full.elbo_final > full.config["warm_start_elbo_final"]
    assert full.convergence.converged or "rising" in full.convergence.describe()


def test_laplace_is_exact_on_a_gaussian_posterior():
    model, mean, cov, _ = regression_model()
    fit = bnn_zoo.fit(model, method="laplace", progressbar=False)
    assert fit.method == "laplace" and fit.config["curvature"] == "hessian"
    np.testing.assert_allclose(fit.mean["w"], mean, atol=1e-5)
    np.testing.assert_allclose(fit.cov(), cov, rtol=1e-5)
    idata = bnn_zoo.sample(fit, 1000)
    assert idata.attrs["q_pareto_k"] < qcheck.K_GOOD


def test_low_rank_laplace_keeps_the_largest_curvatures():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)) * np.array([5, 3, 1, 1, 1, 1, 1, 1])
    with pm.Model() as model:
        w = pm.Normal("w", 0, 1, shape=8)
        pm.Normal("y", X @ w, 1.0, observed=X @ np.ones(8) + rng.normal(size=200))
    exact = np.linalg.inv(X.T @ X + np.eye(8))
    fit = bnn_zoo.fit(model, method=bnn_zoo.Laplace(curvature="lowrank", rank=2), progressbar=False)
    np.testing.assert_allclose(fit.mean["w"], exact @ X.T @ (X @ np.ones(8) + 0), atol=1.0)  # the mode
    sd = fit.sd["w"]
    # the two stiff directions are exact; the rest share the mean of the remaining curvature
    np.testing.assert_allclose(sd[:2], np.sqrt(np.diag(exact))[:2], rtol=0.05)
    assert np.all(np.isfinite(sd)) and np.ptp(sd[2:]) < 0.3 * sd[2:].mean()


def test_refusals_are_one_line_before_any_work(monkeypatch):
    model, *_ = regression_model()
    with pytest.raises(ValueError, match="rank must be a positive integer"):
        bnn_zoo.LowRank(rank=0)
    with pytest.raises(ValueError, match=r"rank must be between 1 and 1 for this model of 2"):
        bnn_zoo.fit(model, method=bnn_zoo.LowRank(rank=2), progressbar=False)
    monkeypatch.setattr(laplace, "DENSE_MAX", 1)
    with pytest.raises(ValueError, match=r"needs a dense 2 x 2 Hessian .* use bnn_zoo.Laplace\(curvature='lowrank'\)"):
        bnn_zoo.fit(model, method=bnn_zoo.Laplace(curvature="hessian"), progressbar=False)
    with pytest.raises(ValueError, match="takes steps and random_seed only, not batch_size="):
        bnn_zoo.fit(model, method="laplace", batch_size=10)
    with pm.Model() as discrete:
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1.0, observed=[1.0, 2.0])
    with pytest.raises(ValueError, match="free variable 'k' is discrete: the Laplace approximation needs"):
        bnn_zoo.fit(discrete, method="laplace")
    with pytest.raises(ValueError, match="fit_many and the ADVI engine"):
        bnn_zoo.fit_many([model], method="laplace")


def test_pareto_k_flags_a_poor_q_and_reweights_a_good_one():
    model, mean, cov, _ = regression_model()
    good = bnn_zoo.fit(model, method="fullrank_advi", progressbar=False)
    idata = bnn_zoo.sample(good, 2000)
    assert idata.attrs["q_pareto_k"] < qcheck.K_GOOD
    summary = bnn_zoo.reweighted(idata)
    np.testing.assert_allclose(summary["w"].sel(stat="mean"), mean, atol=0.1 * np.sqrt(np.diag(cov)).max())
    np.testing.assert_allclose(summary["w"].sel(stat="sd"), np.sqrt(np.diag(cov)), rtol=0.1)
    # Mean-field on a posterior with correlation -0.999: far too narrow along the ridge.
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    X = np.column_stack([x, x + 0.05 * rng.normal(size=40)])
    with pm.Model() as ridge:
        w = pm.Normal("w", 0.0, 3.0, shape=2)
        pm.Normal("obs", X @ w, 1.0, observed=X @ [1.0, -0.5] + rng.normal(size=40))
    poor = bnn_zoo.fit(ridge, progressbar=False)
    with pytest.warns(qcheck.ApproximationWarning, match=r"the 'advi' fit is far from the posterior: .* try "
                                                          r"method='lowrank_advi'"):
        bad = bnn_zoo.sample(poor, 20_000)  # a few thousand draws underestimate k this far out
    assert bad.attrs["q_pareto_k"] > qcheck.K_WARN
    with pytest.raises(ValueError, match="not reliable either"):
        bnn_zoo.reweighted(bad)


# --- issue 52: the Laplace approximation's own test, its refusals, its wide and flat posteriors ------

def test_laplace_tests_its_mode_not_an_elbo():
    model, mean, cov, _ = regression_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", bnn_zoo.ConvergenceWarning)
        fit = bnn_zoo.fit(model, method="laplace")
    check = fit.convergence
    assert check.converged and check.mode_gap < 1e-6 and check.negative == check.flat == 0
    assert check.curvature_min == pytest.approx(np.linalg.eigvalsh(np.linalg.inv(cov)).min(), rel=1e-6)
    assert check.describe().startswith("L-BFGS reached the mode") and "ELBO" not in check.describe()
    assert check.record()["converged"] and "convergence_mode_gap" in check.record()
    assert np.isnan(fit.elbo_final)  # its trace is the log density along L-BFGS's path, not an ELBO
    # Stopped short of the mode: it says so, with what to try, and warns.
    with pytest.warns(bnn_zoo.ConvergenceWarning, match=r"the 'laplace' fit did not pass its convergence test: "
                      r"L-BFGS stopped [0-9.]+ nats below the mode .* \(its limit, steps\); try more steps"):
        short = bnn_zoo.fit(model, method="laplace", steps=1)
    assert not short.convergence.converged and short.convergence.mode_gap > 0.1


def _badly_scaled_regression(n=5000, scale=1000.0):
    """Flat-prior regression with an interaction, its predictor on a scale of 1,000 (kidiq's, times 10)."""
    rng = np.random.default_rng(0)
    hs, iq = rng.integers(0, 2, n).astype(float), rng.normal(scale, 0.15 * scale, n)
    X = np.column_stack([np.ones(n), hs, iq, hs * iq])
    y = X @ [-11.0, 51.0, 0.97, -0.48] + rng.normal(0, 18, n)
    with pm.Model() as model:
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        pm.Normal("y", pm.math.dot(X, beta), sigma, observed=y)
    return model, X, y


def test_laplace_searches_with_one_blas_thread_and_gives_the_threads_back(monkeypatch):
    """L-BFGS runs with one BLAS thread (threads wait on each other where the cores are busy); the
    process's own setting holds again after the fit."""
    import scipy.optimize
    import threadpoolctl

    minimize, seen = scipy.optimize.minimize, []

    def watched(*args, **kwargs):  # scipy's own minimize, and the BLAS threads it ran with
        if kwargs.get("method") == "L-BFGS-B":
            seen.append({i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"})
        return minimize(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "minimize", watched)
    model, mean, _, _ = regression_model()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        fit = bnn_zoo.fit(model, method="laplace", progressbar=False)
        after = {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}
    np.testing.assert_allclose(fit.mean["w"], mean, atol=1e-5)
    assert seen and all(threads == {1} for threads in seen)
    assert after == {2}


def test_laplace_takes_newton_steps_where_lbfgs_stops_short_of_the_mode(monkeypatch):
    """L-BFGS stops on a relative change of the log density, here 150 nats below the mode while scipy
    reports convergence; the mode check says so, and trust-region Newton steps then reach the mode."""
    model, X, y = _badly_scaled_regression()
    beta_hat = np.linalg.lstsq(X, y, rcond=None)[0]
    monkeypatch.setattr(laplace, "_short_of_mode", lambda *args: False)  # L-BFGS alone
    with pytest.warns(bnn_zoo.ConvergenceWarning, match="nats below the mode"):
        alone = bnn_zoo.fit(model, method="laplace")
    assert alone.convergence.mode_gap > 10 and "CONVERGENCE" in alone.convergence.stopped
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", bnn_zoo.ConvergenceWarning)
        fit = bnn_zoo.fit(model, method="laplace")
    assert fit.config["newton_steps"] > 0 and fit.convergence.converged and fit.convergence.mode_gap < 1e-8
    np.testing.assert_allclose(fit.mean["beta"], beta_hat, rtol=1e-6)  # the flat-prior mode is least squares
    assert fit.elbo[-1] > alone.elbo[-1] + 10  # the trace goes on through Newton's steps


def test_a_laplace_start_gets_full_rank_to_a_badly_conditioned_posterior():
    """From its default start, full rank ends 15 sds off on this posterior (as every family did on
    posteriordb's diamonds); from the Laplace fit's whole factor it stays at the posterior. A Laplace fit
    that did not reach its mode is refused as a start."""
    model, X, y = _badly_scaled_regression()
    start = bnn_zoo.fit(model, method="laplace")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnn_zoo.ConvergenceWarning)
        plain = bnn_zoo.fit(model, method="fullrank_advi", steps=5_000, progressbar=False)
    full = bnn_zoo.fit(model, method="fullrank_advi", init=start, steps=5_000, progressbar=False)
    error = lambda fit: np.max(np.abs(fit.mean["beta"] - start.mean["beta"]) / start.sd["beta"])
    assert error(plain) > 3 and error(full) < 0.1
    np.testing.assert_allclose(full.sd["beta"], start.sd["beta"], rtol=0.15)
    with pytest.warns(bnn_zoo.ConvergenceWarning):
        short = bnn_zoo.fit(model, method="laplace", steps=2)
    with pytest.raises(ValueError, match=r"^init is a Laplace fit that did not pass its test of the mode \(L-BFGS "
                                         r"stopped .*\): .* fit without init"):
        bnn_zoo.fit(model, method="fullrank_advi", init=short, progressbar=False)


def test_laplace_refuses_the_steps_advi_refuses():
    model, *_ = regression_model()
    for steps in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match=r"^steps must be an integer in 1\.\.100,000,000, got") as laplace_error:
            bnn_zoo.fit(model, method="laplace", steps=steps)
        with pytest.raises(ValueError) as advi_error:
            bnn_zoo.fit(model, steps=steps, progressbar=False)
        assert str(laplace_error.value) == str(advi_error.value)


def test_a_wide_posterior_keeps_finite_sds():
    # sd 800: softplus's inverse used to overflow above about 709 (inf sds, NaN draws).
    np.testing.assert_allclose(families.softplus(families.inverse_softplus(np.array([1e-8, 1.0, 800.0, 1e7]))),
                               [1e-8, 1.0, 800.0, 1e7], rtol=1e-7)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1e6)
        pm.Normal("y", mu, 800, observed=[3.0])
    fit = bnn_zoo.fit(model, method="laplace")
    assert fit.sd["mu"] == pytest.approx((800.0**-2 + 1e-12) ** -0.5, rel=1e-5)
    draws = bnn_zoo.sample(fit, 500)["posterior"]["mu"].values
    assert np.isfinite(draws).all() and np.std(draws) == pytest.approx(800, rel=0.15)


def test_laplace_names_the_flat_direction_of_an_improper_posterior():
    with pm.Model() as model:
        a, b = pm.Flat("a"), pm.Flat("b")
        c = pm.Normal("c", 0, 1)
        pm.Normal("y", a + b, 1.0, observed=[1.0, 2.0])
        pm.Normal("z", c, 1.0, observed=[0.5])
    with pytest.warns(bnn_zoo.ConvergenceWarning) as caught:
        fit = bnn_zoo.fit(model, method="laplace")
    message, = [str(w.message) for w in caught if issubclass(w.category, bnn_zoo.ConvergenceWarning)]
    assert "flat along 1 of 3 directions, spanned by a, b" in message and "improper there, or the model " \
        "unidentified" in message and "try proper priors on a, b" in message and "steps" not in message
    assert fit.convergence.flat == 1 and not fit.convergence.converged
    assert np.isfinite(fit.sd["a"]) and fit.sd["c"] == pytest.approx(0.5**0.5, rel=1e-6)


def test_laplace_finds_no_mode_in_a_funnel():
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        tau = pm.HalfNormal("tau", 1)
        theta = pm.Normal("theta", 0, tau, shape=8)
        pm.Normal("y", theta, 1, observed=rng.normal(size=8))
    with pytest.warns(bnn_zoo.ConvergenceWarning, match=r"no mode: it keeps rising, by [0-9.]+ nats per unit, "
                                                        r"along 1 of 9 directions, spanned by tau_log__"):
        fit = bnn_zoo.fit(model, method="laplace")
    assert not fit.convergence.converged  # L-BFGS itself reported success here


def test_two_ranks_on_one_model_compile_their_own_steps():
    """The compiled steps are kept per model; a second rank (or a flow of another size) has parameters of
    other shapes and gets steps of its own, not the first one's executable."""
    x = np.random.default_rng(0).normal(size=(40, 3))
    with pm.Model() as model:
        w = pm.Normal("w", 0, 1, shape=3)
        pm.Normal("y", pm.math.dot(x, w), 1.0, observed=x @ np.array([1.0, -1.0, 0.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = bnn_zoo.fit(model, method=bnn_zoo.LowRank(rank=1), steps=200, progressbar=False)
        two = bnn_zoo.fit(model, method=bnn_zoo.LowRank(rank=2), steps=200, progressbar=False)
    assert one.params["W"].shape == (3, 1) and two.params["W"].shape == (3, 2)
