"""The inference module against closed-form posteriors."""

import numpy as np
import pymc as pm
import pymc.variational as pmvi
import pytensor.tensor as pt
import pytest

from inference import NonFiniteLossError, draw, fit, precision
from inference.advi import _initial_means
from models import mlp_classifier

SIGMA, PRIOR_SD, N = 2.0, 10.0, 50


def conjugate_model(n=N, seed=0):
    """y_i ~ N(mu, SIGMA) with known SIGMA and mu ~ N(0, PRIOR_SD)."""
    y = np.random.default_rng(seed).normal(1.5, SIGMA, n)
    with pm.Model() as model:
        data = pm.Data("y", y)
        mu = pm.Normal("mu", 0.0, PRIOR_SD)
        pm.Normal("obs", mu, SIGMA, observed=data, total_size=n)
    return model, y


def analytic_posterior(y, beta=1.0):
    # Maximising E_q[log lik] - beta KL(q || prior) gives the posterior with the
    # likelihood raised to 1/beta.
    precision_ = 1 / PRIOR_SD**2 + len(y) / (beta * SIGMA**2)
    return (y.sum() / (beta * SIGMA**2)) / precision_, precision_**-0.5


def q_mean_sd(result):
    d = draw(result, 4000, seed=1).posterior["mu"]
    return d.mean(), d.std()


# Settings under which the final iterate is precise (measured: mean within
# 0.06 sd, sd within 3% over seeds 0-2).
PRECISE = dict(steps=5000, learning_rate=0.005, mc_samples=8, progressbar=False)


ENGINES = pytest.mark.parametrize("engine", ["jax", "pymc"])


@ENGINES
@pytest.mark.parametrize("method", ["advi", "fullrank_advi"])
def test_recovers_conjugate_posterior(method, engine):
    model, y = conjugate_model()
    mean, sd = analytic_posterior(y)
    q_mean, q_sd = q_mean_sd(fit(model, method=method, engine=engine, seed=0, **PRECISE))
    assert abs(q_mean - mean) < 0.1 * sd
    assert abs(q_sd - sd) < 0.05 * sd


def regression_model(seed=0):
    """y ~ N(X w, 1), w ~ N(0, 3 I), with strongly correlated columns of X."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=40)
    X = np.column_stack([x1, x1 + 0.4 * rng.normal(size=40)])
    y = X @ np.array([1.0, -0.5]) + rng.normal(size=40)
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 3.0, shape=2)
        pm.Normal("obs", X @ w, 1.0, observed=y)
    precision_ = X.T @ X + np.eye(2) / 9.0
    cov = np.linalg.inv(precision_)
    return model, cov @ X.T @ y, cov, precision_


@ENGINES
def test_full_rank_recovers_posterior_correlation(engine):
    model, mean, cov, _ = regression_model()
    corr = cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1])
    assert corr < -0.8  # a posterior mean-field cannot represent
    result = fit(model, method="fullrank_advi", engine=engine, **PRECISE)
    w = draw(result, 6000, seed=1).posterior["w"]
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(w.mean(0) - mean), 0.1 * sd)
    np.testing.assert_allclose(w.std(0), sd, rtol=0.07)
    assert np.corrcoef(w.T)[0, 1] == pytest.approx(corr, abs=0.05)


@ENGINES
def test_mean_field_gives_the_known_underdispersed_marginals(engine):
    model, mean, _, precision_ = regression_model()
    w = draw(fit(model, method="advi", engine=engine, **PRECISE), 6000, seed=1).posterior["w"]
    # The KL(q||p)-optimal diagonal Gaussian has sd 1/sqrt(diag(precision)).
    np.testing.assert_allclose(w.std(0), 1 / np.sqrt(np.diag(precision_)), rtol=0.07)
    assert abs(np.corrcoef(w.T)[0, 1]) < 0.05


@ENGINES
def test_kl_weight_beta_gives_the_tempered_posterior(engine):
    model, y = conjugate_model()
    mean, sd = analytic_posterior(y, beta=4.0)
    assert sd > 1.9 * analytic_posterior(y)[1]  # beta visibly changes the answer
    q_mean, q_sd = q_mean_sd(fit(model, beta=4.0, engine=engine, **PRECISE))
    assert abs(q_mean - mean) < 0.1 * sd
    assert abs(q_sd - sd) < 0.05 * sd


@ENGINES
def test_minibatches_are_scaled_to_the_full_data(engine):
    model, y = conjugate_model(n=400)
    mean, sd = analytic_posterior(y)
    q_mean, q_sd = q_mean_sd(fit(model, batch_size=40, data=("y",), engine=engine, **PRECISE))
    # Without total_size scaling the sd would be sqrt(10) times too large.
    assert abs(q_mean - mean) < 0.2 * sd
    assert abs(q_sd - sd) < 0.1 * sd


def test_blundell_kl_weighting_reaches_the_same_posterior():
    # The per-minibatch KL weights sum to one over an epoch, so the fixed point is
    # the posterior; only the path there changes.
    model, y = conjugate_model(n=400)
    mean, sd = analytic_posterior(y)
    settings = dict(batch_size=40, data=("y",), **PRECISE)
    blundell = fit(model, kl_weighting="blundell", **settings)
    q_mean, q_sd = q_mean_sd(blundell)
    assert abs(q_mean - mean) < 0.2 * sd
    assert abs(q_sd - sd) < 0.1 * sd
    constant = fit(model, **settings)
    # Same q and noise at the first step: the reported ELBO does not depend on the
    # weighting, the gradient does.
    assert blundell.elbo[0] == constant.elbo[0]
    assert not np.array_equal(blundell.elbo[1:50], constant.elbo[1:50])
    assert blundell.config["kl_weighting"] == "blundell"


def test_blundell_weights_halve_and_sum_to_one_per_epoch():
    import jax.numpy as jnp

    from inference.engine import kl_weights

    for M, dtype in [(10, "float64"), (390, "float32")]:  # 390: MNIST's 50,000 / 128
        scale = kl_weights("blundell", M, dtype)
        w = np.array([float(scale(jnp.asarray(i))) for i in range(M)]) / M  # pi_i
        assert np.isfinite(w).all() and w.sum() == pytest.approx(1.0, rel=1e-6)
        assert w[0] == pytest.approx(2.0 ** (M - 1) / (2.0**M - 1), rel=1e-6)
        np.testing.assert_allclose(w[1:10] / w[:9], 0.5, rtol=1e-6)
    assert float(kl_weights("constant", 10)(jnp.asarray(3))) == 1.0
    with pytest.raises(ValueError, match="unknown kl_weighting 'linear'"):
        kl_weights("linear", 10)


@ENGINES
def test_fit_is_reproducible_given_the_seed(engine):
    model, _ = conjugate_model()
    a = fit(model, steps=200, seed=3, engine=engine, progressbar=False).elbo
    b = fit(model, steps=200, seed=3, engine=engine, progressbar=False).elbo
    c = fit(model, steps=200, seed=4, engine=engine, progressbar=False).elbo
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@ENGINES
def test_nan_loss_stops_with_the_step(engine):
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("bad", pt.log(x - 0.5 + 0.1 * x**2))  # NaN wherever q puts its mass
    with pytest.raises(NonFiniteLossError, match=r"ELBO is nan at step \d+"):
        fit(model, steps=500, engine=engine, progressbar=False)


@ENGINES
def test_infinite_loss_stops_with_the_step(engine):
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("bad", pt.switch(x > 0.5, -np.inf, 0.0))
    with pytest.raises(NonFiniteLossError, match=r"ELBO is -inf at step \d+"):
        fit(model, steps=500, engine=engine, progressbar=False)


def test_bad_arguments_are_named():
    model, _ = conjugate_model()
    with pytest.raises(ValueError, match="unknown method 'svgd'; valid: advi, fullrank_advi"):
        fit(model, method="svgd")
    with pytest.raises(ValueError, match="unknown backend 'cuda'; valid: numba, c, jax"):
        fit(model, backend="cuda")
    with pytest.raises(ValueError, match="unknown engine 'stan'; valid: jax, pymc"):
        fit(model, engine="stan")
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad_window' for engine 'jax'"):
        fit(model, optimizer="adagrad_window")
    with pytest.raises(ValueError, match="no data container X in the model"):
        fit(model, steps=1, batch_size=5)
    with pytest.raises(ValueError, match="steps and mc_samples must be >= 1, got 0"):
        fit(model, steps=0)
    with pytest.raises(ValueError, match="steps and mc_samples must be >= 1, got 1 and 0"):
        fit(model, steps=1, mc_samples=0)
    with pytest.raises(ValueError, match="batch_size must be in 1..50"):
        fit(model, steps=1, batch_size=51, data=("y",))
    with pytest.raises(ValueError, match="unknown kl_weighting 'linear'; valid: constant, blundell"):
        fit(model, steps=1, kl_weighting="linear")
    with pytest.raises(ValueError, match="'blundell' needs minibatches"):
        fit(model, steps=1, kl_weighting="blundell")
    with pytest.raises(ValueError, match="'blundell' needs minibatches"):
        fit(model, steps=1, batch_size=5, data=("y",), kl_weighting="blundell", engine="pymc")


def toy_model(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 2))
    return mlp_classifier(X, (X[:, 0] * X[:, 1] > 0).astype(int))


def test_initial_means_break_hidden_unit_symmetry():
    model = toy_model()
    group = pmvi.MeanField(model=model).groups[0]
    mu = _initial_means(group, np.random.default_rng(0))
    start = model.initial_point()
    for name, slc, shape, _ in group.ordering.values():
        if name.startswith("W_"):
            W = mu[slc].reshape(shape)
            assert np.all(W != 0)
            assert len(np.unique(W.round(12))) == W.size  # no two units start alike
        else:  # biases and scales: the model's initial point
            np.testing.assert_array_equal(mu[slc], np.ravel(start[name]))
    result = fit(model, steps=1, progressbar=False)
    # ...and the fitted means are those plus one step, not PyMC's all-zero start.
    W0 = result.approx.groups[0].params_dict["mu"].get_value()[group.ordering["W_0"][1]]
    assert np.abs(W0).min() > 0 and np.std(W0) > 0.1


def test_initial_std_is_small():
    result = fit(toy_model(), steps=1, learning_rate=1e-6, init_std=0.01, progressbar=False)
    rho = result.approx.groups[0].params_dict["rho"].get_value()
    np.testing.assert_allclose(np.logaddexp(0, rho), 0.01, rtol=1e-3)


def test_float32_fit_and_precision_mismatch():
    with precision(True):
        model = toy_model()
        result = fit(model, steps=50, float32=True, progressbar=False)
    assert result.approx.groups[0].params_dict["mu"].get_value().dtype == np.float32
    assert np.isfinite(result.elbo).all()
    with pytest.raises(ValueError, match="build the model inside inference.precision"):
        fit(toy_model(), steps=1, float32=True)


def test_c_backend_follows_the_numba_path():
    model = toy_model()
    ref = fit(model, steps=300, seed=2, engine="pymc", backend="numba", progressbar=False)
    other = fit(model, steps=300, seed=2, engine="pymc", backend="c", progressbar=False)
    # Same seed, same graph, same random streams: the same path up to round-off.
    np.testing.assert_allclose(other.elbo, ref.elbo, rtol=1e-6)


@pytest.mark.parametrize("batch_size", [None, 40])
def test_engines_and_backends_reach_the_same_elbo(batch_size):
    # Each draws its own random numbers, so only the converged ELBO can agree;
    # with minibatches, both engines report it at the full-data scale.
    model, _ = conjugate_model(n=400)
    tails = []
    for engine, backend in (("pymc", "numba"), ("pymc", "jax"), ("jax", "numba")):
        elbo = fit(model, engine=engine, backend=backend, batch_size=batch_size, data=("y",),
                   **PRECISE).elbo[-2000:]
        tails.append((elbo.mean(), elbo.std() / np.sqrt(len(elbo))))
    (a, se_a) = tails[0]
    for b, se_b in tails[1:]:
        assert abs(a - b) < 4 * np.hypot(se_a, se_b) + 1e-3, tails


@ENGINES
def test_fit_reports_compile_time_and_step_time(engine):
    model, _ = conjugate_model()
    result = fit(model, steps=400, engine=engine, progressbar=False)
    assert 0 < result.compile_seconds < result.seconds
    assert result.ms_per_step == pytest.approx(
        1e3 * (result.seconds - result.compile_seconds) / 399)
    assert len(result.elbo) == 400
