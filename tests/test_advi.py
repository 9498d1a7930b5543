"""bnn_zoo.fit against closed-form posteriors; the reference engine (PyMC's own step) beside it."""

import numpy as np
import optax
import pymc as pm
import pytensor.tensor as pt
import pytest

import bnn_zoo
from bnn_zoo import NonFiniteLossError, precision
from bnn_zoo.inference.alternatives import reference
from bnn_zoo import ConvergenceWarning
from bnn_zoo.inference.advi.starts import initial_mean
from bnn_zoo.inference.compile.jaxmodel import Layout
from bnn_zoo.inference.posterior.draws import draw_z
from bnn_zoo.models import linear_regression, mlp_classifier

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
    return float(result.mean["mu"]), float(result.sd["mu"])


# Settings under which the final iterate of constant-rate Adam is precise (measured:
# mean within 0.06 sd, sd within 3% over seeds 0-2).
STEPS, LR, MC = 5000, 0.005, 8


def fit(engine, model, *, learning_rate=LR, **kw):
    """One fit by the engine (``"jax"``: bnn_zoo.fit) or by PyMC's own step (``"pymc"``)."""
    kw.setdefault("steps", STEPS)
    kw.setdefault("mc_samples", MC)
    if engine == "pymc":
        return reference.pymc_fit(model, learning_rate=learning_rate, **kw)
    # bnn_zoo.fit's spelling: the objective as a value, the seed as random_seed
    objective = {k: kw.pop(k) for k in ("mc_samples", "beta", "kl_weighting") if k in kw}
    if "seed" in kw:
        kw["random_seed"] = kw.pop("seed")
    return bnn_zoo.fit(model, optimizer=optax.adam(learning_rate), objective=bnn_zoo.ELBO(**objective),
                       progressbar=False, **kw)


ENGINES = pytest.mark.parametrize("engine", ["jax", "pymc"])


@ENGINES
@pytest.mark.parametrize("method", ["advi", "fullrank_advi"])
def test_recovers_conjugate_posterior(method, engine):
    model, y = conjugate_model()
    mean, sd = analytic_posterior(y)
    q_mean, q_sd = q_mean_sd(fit(engine, model, method=method, seed=0))
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
    result = fit(engine, model, method="fullrank_advi")
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(result.mean["w"] - mean), 0.1 * sd)
    np.testing.assert_allclose(result.sd["w"], sd, rtol=0.07)
    q_cov = result.cov()
    assert q_cov[0, 1] / np.sqrt(q_cov[0, 0] * q_cov[1, 1]) == pytest.approx(corr, abs=0.05)
    # The draws follow q's moments.
    z, _ = draw_z(result, 20_000, seed=1)
    np.testing.assert_allclose(np.cov(z.T), q_cov, rtol=0.05, atol=1e-4)


@ENGINES
def test_mean_field_gives_the_known_underdispersed_marginals(engine):
    model, mean, _, precision_ = regression_model()
    result = fit(engine, model, method="advi")
    # The KL(q||p)-optimal diagonal Gaussian has sd 1/sqrt(diag(precision)).
    np.testing.assert_allclose(result.sd["w"], 1 / np.sqrt(np.diag(precision_)), rtol=0.07)
    np.testing.assert_array_equal(result.cov()[0, 1], 0.0)


@ENGINES
def test_kl_weight_beta_gives_the_tempered_posterior(engine):
    model, y = conjugate_model()
    mean, sd = analytic_posterior(y, beta=4.0)
    assert sd > 1.9 * analytic_posterior(y)[1]  # beta visibly changes the answer
    q_mean, q_sd = q_mean_sd(fit(engine, model, beta=4.0))
    assert abs(q_mean - mean) < 0.1 * sd
    assert abs(q_sd - sd) < 0.05 * sd


@ENGINES
def test_minibatches_are_scaled_to_the_full_data(engine):
    model, y = conjugate_model(n=400)
    mean, sd = analytic_posterior(y)
    q_mean, q_sd = q_mean_sd(fit(engine, model, batch_size=40, minibatch=("y",)))
    # Without total_size scaling the sd would be sqrt(10) times too large.
    assert abs(q_mean - mean) < 0.2 * sd
    assert abs(q_sd - sd) < 0.1 * sd


def test_blundell_kl_weighting_reaches_the_same_posterior():
    # The per-minibatch KL weights sum to one over an epoch, so the fixed point is
    # the posterior; only the path there changes.
    model, y = conjugate_model(n=400)
    mean, sd = analytic_posterior(y)
    blundell = fit("jax", model, batch_size=40, kl_weighting="blundell")
    q_mean, q_sd = q_mean_sd(blundell)
    assert abs(q_mean - mean) < 0.2 * sd
    assert abs(q_sd - sd) < 0.1 * sd
    constant = fit("jax", model, batch_size=40)
    # Same q and noise at the first step: the reported ELBO does not depend on the
    # weighting, the gradient does.
    assert blundell.elbo[0] == constant.elbo[0]
    assert not np.array_equal(blundell.elbo[1:50], constant.elbo[1:50])
    assert blundell.config["kl_weighting"] == "blundell(10)"


def test_blundell_weights_halve_and_sum_to_one_per_epoch():
    import jax.numpy as jnp

    from bnn_zoo.inference.advi import objective

    for M in (10, 390):  # 390: MNIST's 50,000 / 128
        weight = objective.blundell(M)
        w = np.array([float(weight(jnp.asarray(t))) for t in range(2 * M)]) / M  # pi_i, two epochs
        assert np.isfinite(w).all() and w[:M].sum() == pytest.approx(1.0, rel=1e-6)
        assert w[0] == pytest.approx(2.0 ** (M - 1) / (2.0**M - 1), rel=1e-6)
        np.testing.assert_allclose(w[1:10] / w[:9], 0.5, rtol=1e-6)
        np.testing.assert_array_equal(w[M:], w[:M])  # the next epoch starts over
    assert objective.constant()(jnp.asarray(3)) == 1.0


def test_kl_weighting_may_be_any_function_of_the_step():
    # KL annealing, a user's own weighting: the KL part is off for the first steps.
    model, y = conjugate_model()
    annealed = bnn_zoo.fit(model, steps=300, progressbar=False,
                           objective=bnn_zoo.ELBO(kl_weighting=lambda t: (t >= 100).astype("float64")))
    plain = bnn_zoo.fit(model, steps=300, progressbar=False)
    assert annealed.elbo[0] == plain.elbo[0]
    assert not np.array_equal(annealed.elbo[1:100], plain.elbo[1:100])


def test_optax_optimizers_and_schedules():
    model, y = conjugate_model()
    mean, sd = analytic_posterior(y)
    # A decaying learning rate ends at the optimum without averaging.
    schedule = optax.cosine_decay_schedule(0.05, 3000, alpha=0.001)
    result = bnn_zoo.fit(model, steps=3000, optimizer=optax.adam(schedule), objective=bnn_zoo.ELBO(mc_samples=4),
                         progressbar=False)
    q_mean, q_sd = q_mean_sd(result)
    assert abs(q_mean - mean) < 0.05 * sd and abs(q_sd - sd) < 0.03 * sd
    sgd = bnn_zoo.fit(model, steps=3000, optimizer=optax.sgd(1e-3), progressbar=False)
    assert abs(q_mean_sd(sgd)[0] - mean) < 0.2 * sd
    assert result.config["optimizer"] == "optax transformation"


@pytest.mark.parametrize("average", [0.5, 0.0])
def test_a_fit_until_converged_stops_at_its_first_pass_after_averaging(average):
    """until_converged (auto's ADVI rungs): the convergence test every CONVERGED_CHECK_EVERY steps from
    twice that; at the first pass, step i, the iterates are averaged over i steps more (average 0.5) or
    none (0), and the fit ends there: its trace is the steps taken, and the averaged q the conjugate
    posterior."""
    from bnn_zoo.inference import defaults
    from bnn_zoo.inference.advi.loop import fit_advi
    from bnn_zoo.inference.diagnostics.convergence import convergence

    every = defaults.CONVERGED_CHECK_EVERY
    model, y = conjugate_model()
    result = fit_advi(model, steps=20_000, average=average, random_seed=0, progressbar=False,
                      until_converged=True)
    at = result.config["converged_at"]
    assert at % every == 0 and 2 * every <= at < 10_000 and result.config["max_steps"] == 20_000
    assert len(result.elbo) == result.config["steps"] == (2 * at if average else at)
    assert convergence(result.elbo[:at]).converged
    assert not any(convergence(result.elbo[:j]).converged for j in range(2 * every, at, every))
    assert result.convergence.converged
    if average:  # the mean of the iterates from there (the last iterate alone, at Adam's 0.01, is 0.2 sd off)
        mean, sd = analytic_posterior(y)
        q_mean, q_sd = q_mean_sd(result)
        assert abs(q_mean - mean) < 0.1 * sd and abs(q_sd / sd - 1) < 0.1


def test_until_converged_refuses_a_checkpoint(tmp_path):
    from bnn_zoo.inference.advi.loop import fit_advi

    model, _ = conjugate_model()
    with pytest.raises(ValueError, match="until_converged stops at a step decided as it runs"):
        fit_advi(model, steps=3000, until_converged=True, checkpoint=bnn_zoo.Checkpoint(tmp_path / "c"),
                 progressbar=False)


@ENGINES
def test_fit_is_reproducible_given_the_seed(engine):
    model, _ = conjugate_model()
    a = fit(engine, model, steps=200, seed=3).elbo
    b = fit(engine, model, steps=200, seed=3).elbo
    c = fit(engine, model, steps=200, seed=4).elbo
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@ENGINES
def test_nan_loss_stops_with_the_step(engine):
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("bad", pt.log(x - 0.5 + 0.1 * x**2))  # NaN wherever q puts its mass
    with pytest.raises(NonFiniteLossError, match=r"ELBO is nan at step \d+"):
        fit(engine, model, steps=500, mc_samples=1, learning_rate=0.01)


@ENGINES
def test_infinite_loss_stops_with_the_step(engine):
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("bad", pt.switch(x > 0.5, -np.inf, 0.0))
    with pytest.raises(NonFiniteLossError, match=r"ELBO is -inf at step \d+"):
        fit(engine, model, steps=500, mc_samples=1, learning_rate=0.01)


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="svgd"), "unknown method 'svgd'; valid: advi, lowrank_advi, fullrank_advi"),
    (dict(optimizer="adam"), "optimizer must be an optax GradientTransformation"),
    (dict(batch_size=5, minibatch=("X",)), r"minibatch must name distinct data containers of the model \(y\)"),
    (dict(steps=0), "steps must be an integer in 1..100,000,000, got 0"),
    (dict(average=1.0), r"average must be in \[0, 1\)"),
    (dict(method="fullrank_advi", checkpoint=bnn_zoo.Checkpoint("x.nc")), "starts from a mean-field fit and cannot "
                                                                           "checkpoint"),
    (dict(checkpoint="x.nc"), r"checkpoint must be a bnn_zoo.Checkpoint\(path"),
    (dict(objective=0.5), r"objective must be a bnn_zoo.ELBO\(...\)"),
    (dict(steps=-10), "steps must be an integer in 1..100,000,000, got -10"),
    (dict(batch_size=51), r"batch_size must be an integer in 1..50, got 51"),
    (dict(minibatch=("y",)), "minibatch names containers to cut, but batch_size is None"),
    (dict(objective=bnn_zoo.ELBO(kl_weighting="blundell")), "'blundell' needs minibatches"),
    (dict(method="fullrank_advi", objective=bnn_zoo.ELBO(estimator="flipout")), "needs mean-field q"),
])
def test_bad_arguments_are_named(kwargs, message):
    model, _ = conjugate_model()
    with pytest.raises(ValueError, match=message):
        bnn_zoo.fit(model, **{"steps": 1, "progressbar": False, **kwargs})


@pytest.mark.parametrize("make, message", [
    (lambda: bnn_zoo.ELBO(mc_samples=0), "ELBO's mc_samples must be an integer >= 1, got 0"),
    (lambda: bnn_zoo.ELBO(kl_weighting="linear"), "ELBO's kl_weighting must be one of constant, blundell"),
    (lambda: bnn_zoo.ELBO(beta=float("inf")), "ELBO's beta must be positive and finite"),
    (lambda: bnn_zoo.ELBO(estimator="dropout"), "ELBO's estimator must be one of weights, local_reparam"),
    (lambda: bnn_zoo.MeanField(init_std=0.0), "MeanField's init_std must be positive and finite"),
    (lambda: bnn_zoo.Checkpoint("x.nc", every=0), "Checkpoint's every must be an integer >= 1"),
])
def test_setting_values_refuse_bad_values(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("old, new", [
    ("seed", "random_seed="), ("beta", r"objective=bnn_zoo.ELBO\(beta=...\)"),
    ("warm_start", "init="), ("resume", r"checkpoint=bnn_zoo.Checkpoint\(path, resume=True\)"),
    ("init_std", r"method=bnn_zoo.MeanField\(init_std=...\)"),
])
def test_old_keywords_are_refused_with_the_new_spelling(old, new):
    model, _ = conjugate_model()
    with pytest.raises(TypeError, match=rf"fit\(\) no longer takes {old}=: use {new}"):
        bnn_zoo.fit(model, **{old: 1})
    with pytest.raises(TypeError, match=rf"fit_many\(\) no longer takes {old}="):
        bnn_zoo.fit_many([model], **{old: 1})


def test_fit_has_at_most_twelve_parameters_and_fit_many_shares_them():
    import inspect

    fit_params = list(inspect.signature(bnn_zoo.fit).parameters)
    many_params = list(inspect.signature(bnn_zoo.fit_many).parameters)
    assert len(fit_params) <= 12
    shared = set(fit_params) - {"model", "init", "checkpoint", "progressbar"}
    assert shared <= set(many_params), shared - set(many_params)
    for name in shared:  # one set of defaults
        assert (inspect.signature(bnn_zoo.fit).parameters[name].default
                == inspect.signature(bnn_zoo.fit_many).parameters[name].default), name


def test_a_transformed_variable_asked_by_its_model_name_names_its_key():
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Deterministic("twice", 2 * sigma)
        pm.Normal("y", 0.0, sigma, observed=np.array([0.5, -1.0, 0.3]))
    result = bnn_zoo.fit(model, steps=200, progressbar=False)
    with pytest.raises(KeyError, match="'twice' is not a free variable"):
        result.mean["twice"]
    with pytest.raises(KeyError, match=r"'sigma' is transformed: .*'sigma_log__'"):
        result.mean["sigma"]
    with pytest.raises(KeyError, match="not a variable of the model; keys: "):
        result.sd["nope"]


def test_reference_refuses_bad_arguments():
    model, _ = conjugate_model()
    with pytest.raises(ValueError, match="unknown backend 'cuda'; valid: numba, c, jax"):
        reference.pymc_fit(model, backend="cuda")
    with pytest.raises(ValueError, match="unknown optimizer 'lion'"):
        reference.pymc_fit(model, optimizer="lion")


def toy_model(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 2))
    return mlp_classifier(X, (X[:, 0] * X[:, 1] > 0).astype(int))


def test_initial_means_break_hidden_unit_symmetry():
    model = toy_model()
    start = model.initial_point()
    layout = Layout.of(model, start)
    mu = initial_mean(layout, start, seed=0)
    for name, slc, shape, _ in layout.slots:
        if name.startswith("W_"):
            W = mu[slc].reshape(shape)
            assert np.all(W != 0)
            assert len(np.unique(W.round(12))) == W.size  # no two units start alike
        else:  # biases and scales: the model's initial point
            np.testing.assert_array_equal(mu[slc], np.ravel(start[name]))
    result = bnn_zoo.fit(model, steps=1, progressbar=False)
    # ...and the fitted means are those plus one step, not PyMC's all-zero start.
    W0 = result.mean["W_0"]
    assert np.abs(W0).min() > 0 and np.std(W0) > 0.1


def test_initial_std_is_small():
    result = bnn_zoo.fit(toy_model(), steps=1, optimizer=optax.adam(1e-9), method=bnn_zoo.MeanField(init_std=0.01),
                         progressbar=False)
    for sd in result.sd.values():
        np.testing.assert_allclose(sd, 0.01, rtol=1e-3)


def test_float32_model_fits_in_float32():
    with precision(True):
        model = toy_model()
    result = bnn_zoo.fit(model, steps=50, progressbar=False)
    assert {v.dtype for v in result.params.values()} == {np.dtype("float32")}
    assert np.isfinite(result.elbo).all()
    with pm.Model() as mixed:  # float32 data, float64 variables
        with precision(True):
            data = pm.Data("X", np.zeros(4))
        pm.Normal("v", pm.Normal("w", 0, 1), 1, observed=data)
    with pytest.raises(ValueError, match="build the whole model inside bnn_zoo.precision"):
        bnn_zoo.fit(mixed, steps=1)
    with pm.Model() as mixed:  # float64 and float32 variables
        pm.Normal("v", 0, 1)
        with precision(True):
            pm.Normal("w", 0, 1)
    with pytest.raises(ValueError, match="continuous value variables of one float dtype"):
        bnn_zoo.fit(mixed, steps=1)


def test_result_converts_to_pymc_and_back():
    model, _, _, _ = regression_model()
    for method in ("advi", "fullrank_advi"):
        result = bnn_zoo.fit(model, method=method, steps=500, progressbar=False)
        approx = result.to_pymc()
        assert type(approx).__name__ == {"advi": "MeanField", "fullrank_advi": "FullRank"}[method]
        np.testing.assert_allclose(approx.mean.eval(), result.mean["w"])
        np.testing.assert_allclose(approx.std.eval(), result.sd["w"], rtol=1e-6)


def test_c_backend_follows_the_numba_path():
    model = toy_model()
    ref = reference.pymc_fit(model, steps=300, seed=2, backend="numba")
    other = reference.pymc_fit(model, steps=300, seed=2, backend="c")
    # Same seed, same graph, same random streams: the same path up to round-off.
    np.testing.assert_allclose(other.elbo, ref.elbo, rtol=1e-6)


@pytest.mark.parametrize("batch_size", [None, 40])
def test_engine_and_pymc_backends_reach_the_same_elbo(batch_size):
    # Each draws its own random numbers, so only the converged ELBO can agree;
    # with minibatches, both report it at the full-data scale. Every fit's ELBO is flat from
    # step 1,000 (means over 500 steps, measured): the last 2,000 of 3,000 steps are converged.
    model, _ = conjugate_model(n=400)
    tails = []
    for backend in ("numba", "jax", None):
        kw = dict(batch_size=batch_size, minibatch=("y",) if batch_size else None, steps=3000)
        result = (fit("jax", model, **kw) if backend is None
                  else fit("pymc", model, backend=backend, **{**kw, "minibatch": ("y",)}))
        elbo = result.elbo[-2000:]
        tails.append((elbo.mean(), elbo.std() / np.sqrt(len(elbo))))
    (a, se_a) = tails[0]
    for b, se_b in tails[1:]:
        assert abs(a - b) < 4 * np.hypot(se_a, se_b) + 1e-3, tails


def test_path_derivative_gradient_is_unbiased_and_steadier_near_the_optimum():
    """Sticking the landing: the same expected gradient, less variance where q is the posterior."""
    import jax
    import jax.numpy as jnp

    from bnn_zoo.inference import families
    from bnn_zoo.inference.advi import objective
    from bnn_zoo.inference.compile.jaxmodel import compile_model

    model, mean, cov, _ = regression_model()
    start = model.initial_point()
    layout = Layout.of(model, start)
    density = compile_model(model, layout)
    L = np.linalg.cholesky(cov)
    # Full-rank q at the exact posterior (a Gaussian): STL's gradient is exactly zero.
    params = {k: jnp.asarray(v) for k, v in families.FULL_RANK.from_factor(mean, L).items()}
    data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)
    eps = jax.random.normal(jax.random.key(0), (4000, 1, 2))

    def grads(stl, p):
        elbo = objective.ELBOFunction(density, families.FULL_RANK, path_derivative=stl)
        g = jax.vmap(lambda e: jax.grad(lambda q: elbo(q, e, data)[0])(p))(eps)
        return np.concatenate([np.asarray(g[k]).reshape(len(eps), -1) for k in ("mu", "rho", "T_tril")], axis=1)

    plain, stl = grads(False, params), grads(True, params)
    assert np.abs(stl).max() < 1e-9
    assert plain.std(0).max() > 0.1
    # Away from the optimum both estimate the same gradient.
    moved = {"mu": params["mu"] + 0.3, "rho": params["rho"] - 0.2, "T_tril": params["T_tril"] * 0.8}
    a, b = grads(False, moved), grads(True, moved)
    se = np.hypot(a.std(0), b.std(0)) / np.sqrt(len(a))
    np.testing.assert_array_less(np.abs(a.mean(0) - b.mean(0)), 4 * se + 1e-9)


def test_path_derivative_fit_recovers_the_posterior():
    model, mean, cov, _ = regression_model()
    result = bnn_zoo.fit(model, method="fullrank_advi", steps=STEPS, objective=bnn_zoo.ELBO(path_derivative=True),
                         optimizer=optax.adam(LR), progressbar=False)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(result.mean["w"] - mean), 0.1 * sd)
    np.testing.assert_allclose(result.sd["w"], sd, rtol=0.05)
    assert result.config["path_derivative"] is True


@pytest.mark.parametrize("method", ["advi", "fullrank_advi"])
def test_the_defaults_reach_the_exact_posterior(method):
    """Issue 19's targets, with fit's defaults: means within 0.05 posterior sd, mean-field sds
    within 3% of 1/sqrt(diag(precision)), full-rank sds and correlations within 3% / 0.03."""
    from bnn_zoo.models.linear import correlated_design, linear_posterior, linear_regression

    X, y = correlated_design()
    post, model = linear_posterior(X, y), linear_regression(X, y)
    for seed in (0, 1):
        result = bnn_zoo.fit(model, method=method, random_seed=seed, progressbar=False)
        assert result.convergence.converged
        np.testing.assert_array_less(np.abs(result.mean["w"] - post.mean), 0.05 * post.sd)
        if method == "advi":
            np.testing.assert_allclose(result.sd["w"], post.mean_field_sd, rtol=0.03)
        else:
            assert result.config["warm_start"] == 6000 and result.config["path_derivative"] is True
            assert len(result.elbo) == 14_000  # the full-rank phase's trace
            np.testing.assert_allclose(result.sd["w"], post.sd, rtol=0.03)
            cov = result.cov()
            np.testing.assert_allclose(cov / np.sqrt(np.outer(np.diag(cov), np.diag(cov))), post.corr,
                                       atol=0.03)


def test_full_rank_starts_from_a_mean_field_fit():
    model, _, _, _ = regression_model()
    mf = bnn_zoo.fit(model, steps=2000, progressbar=False)
    fr = bnn_zoo.fit(model, method="fullrank_advi", init=mf, steps=1, optimizer=optax.adam(1e-9),
                     average=0, progressbar=False)
    np.testing.assert_allclose(fr.mean["w"], mf.mean["w"], rtol=1e-6)
    np.testing.assert_allclose(fr.sd["w"], mf.sd["w"], rtol=1e-6)
    assert fr.config["init_std"] == "from another fit"
    small = mlp_classifier(np.zeros((4, 2)), np.array([0, 1, 0, 1]), hidden=(2,))
    with pytest.raises(ValueError, match="same variables and shapes"):
        bnn_zoo.fit(small, init=mf, steps=1, progressbar=False)


def test_a_full_rank_fit_that_ends_below_its_mean_field_start_has_not_converged():
    # Its family contains the mean-field start, so ending below it is the optimiser's failure
    # (issue 19's regression: at too large a rate it drops at once and climbs back flat).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    model = linear_regression(X, X @ np.ones(5) + rng.normal(size=200))
    warm = bnn_zoo.fit(model, steps=3000, optimizer=optax.adam(0.05), progressbar=False)
    with pytest.warns(ConvergenceWarning, match="smaller learning rate"):
        bad = bnn_zoo.fit(model, method="fullrank_advi", init=warm, steps=2000, optimizer=optax.adam(1.0),
                          progressbar=False)
    assert bad.config["init_elbo_final"] == warm.elbo_final
    assert not bad.convergence.converged and bad.convergence.elbo_shortfall > 100
    good = bnn_zoo.fit(model, method="fullrank_advi", init=warm, steps=2000, optimizer=optax.adam(0.01),
                       progressbar=False)
    assert good.convergence.converged and good.elbo_final > warm.elbo_final - 1


def test_a_non_finite_elbo_names_the_data_that_caused_it():
    x = np.linspace(-1, 1, 20)
    y = 2 * x
    x[7] = np.inf
    with pm.Model() as model:
        xd = pm.Data("x", x)
        b = pm.Normal("b", 0, 1)
        pm.Normal("y", b * xd, 1, observed=y)
    with pytest.raises(NonFiniteLossError, match=r"at step 1: data 'x' holds 1 non-finite value\(s\) \(inf at "
                                                 r"index \(7,\)\); drop or impute them"):
        bnn_zoo.fit(model, steps=10, progressbar=False)
