"""PyMC's idioms, each as a PyMC user writes it, fitted by bnn_zoo.fit: deterministics, potentials,
bounded priors, missing values, CustomDist, integer data, coords and dims, and initial values."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

import bnn_zoo
from bnn_zoo.inference.advi.prepare import prepare
from bnn_zoo.inference.posterior.draws import evaluate_z

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 2))
Y = X @ [1.0, -1.0] + 0.5 * RNG.normal(size=40)
COORDS = {"obs": np.arange(40), "feature": ["a", "b"]}


@pytest.fixture(scope="module")
def regression():
    """A regression with a pm.Deterministic, a pm.Potential and dims on every variable."""
    with pm.Model(coords=COORDS) as model:
        x = pm.Data("x", X, dims=("obs", "feature"))
        w = pm.Normal("w", 0, 1, dims="feature")
        mu = pm.Deterministic("mu", x @ w, dims="obs")
        sigma = pm.HalfNormal("sigma", 1)
        pm.Potential("shrink", -0.5 * (w ** 2).sum())
        pm.Normal("y", mu, sigma, observed=Y, dims="obs")
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    return model, result, bnn_zoo.sample(result, 200)


def test_deterministics_are_in_the_draws_with_their_dims(regression):
    model, result, tree = regression
    posterior = tree["posterior"]
    assert posterior["mu"].dims == ("chain", "draw", "obs")
    np.testing.assert_allclose(posterior["mu"].values, np.einsum("cdf,of->cdo", posterior["w"].values, X),
                               rtol=1e-10)
    assert "mu" not in bnn_zoo.sample(result, 50, var_names=())["posterior"]


def test_coords_and_dims_reach_every_group(regression):
    model, result, tree = regression
    assert tree["posterior"]["w"].dims == ("chain", "draw", "feature")
    assert list(tree["posterior"]["feature"].values) == ["a", "b"]
    assert tree["log_likelihood"]["y"].dims == ("chain", "draw", "obs")
    assert tree["observed_data"]["y"].dims == ("obs",)
    assert tree["constant_data"]["x"].dims == ("obs", "feature")
    pred = bnn_zoo.predict(result, {"x": X[:5]}, idata=tree, var_names=["mu"])
    assert pred["predictions"]["mu"].dims[:2] == ("chain", "draw") and pred["predictions"]["mu"].shape[-1] == 5


def test_a_potential_enters_the_log_density_of_the_draws(regression):
    model, result, tree = regression
    logp = model.compile_logp(jacobian=True)
    for k in range(3):
        point = {"w": tree["posterior"]["w"].values[0, k],
                 "sigma_log__": np.log(tree["posterior"]["sigma"].values[0, k])}
        np.testing.assert_allclose(tree["sample_stats"]["log_p"].values[0, k], logp(point), rtol=1e-8)
    with pm.Model() as without:  # the same model without the potential has another log density
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Normal("y", pt.as_tensor(X) @ w, pm.HalfNormal("sigma", 1), observed=Y)
    assert abs(without.compile_logp(jacobian=True)(point) - logp(point)) > 1e-3


def test_bounded_priors_are_drawn_in_their_support_from_q_in_the_unconstrained_space():
    with pm.Model() as model:
        p = pm.Beta("p", 2, 2)
        lam = pm.Uniform("lam", 1, 5)
        t = pm.TruncatedNormal("t", 0, 1, lower=0.5, upper=2)
        pm.Binomial("k", 10, p, observed=[3, 4, 5])
        pm.Poisson("c", lam, observed=[2, 3])
        pm.Normal("z", t, 1, observed=[1.0])
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    assert set(result.layout.names) == {"p_logodds__", "lam_interval__", "t_interval__"}
    posterior = bnn_zoo.sample(result, 2000)["posterior"]
    for name, low, high in (("p", 0, 1), ("lam", 1, 5), ("t", 0.5, 2)):
        values = posterior[name].values
        assert low < values.min() and values.max() < high
    # p's exact posterior is Beta(2 + 12, 2 + 18): mean-field in logit space gets its mean close
    assert abs(posterior["p"].values.mean() - 14 / 34) < 0.02


def test_missing_observations_are_imputed_by_the_fit():
    y = Y.copy()
    y[[3, 7]] = np.nan
    with pm.Model() as model:
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Normal("y", pt.as_tensor(X) @ w, 0.5, observed=y)
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    posterior = bnn_zoo.sample(result, 500)["posterior"]
    imputed = posterior["y_unobserved"].values[0]
    assert imputed.shape == (500, 2)
    expected = X[[3, 7]] @ posterior["w"].values[0].mean(0)
    np.testing.assert_allclose(imputed.mean(0), expected, atol=0.15)
    np.testing.assert_allclose(imputed.std(0), 0.5, rtol=0.25)  # the noise, plus w's small uncertainty


def test_customdist_with_a_logp_fits_as_its_distribution():
    data = np.array([1.0, 2.0, 3.0])

    def logp(value, mu):
        return pm.logp(pm.Normal.dist(mu, 1), value)

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        pm.CustomDist("obs", mu, logp=logp, observed=data)
    draws = bnn_zoo.sample(bnn_zoo.fit(model, steps=3000, progressbar=False), 4000)["posterior"]["mu"].values
    precision = 1 / 100 + len(data)  # conjugate: N(0, 10^2) prior, unit noise
    np.testing.assert_allclose(draws.mean(), data.sum() / precision, atol=0.05)
    np.testing.assert_allclose(draws.std(), precision ** -0.5, rtol=0.1)


def test_integer_data_index_the_model_and_take_new_values():
    groups = np.array([0, 1, 1, 0, 2, 2, 2])
    y = np.array([0.0, 1.0, 1.2, -0.1, 2.0, 2.1, 1.9])
    with pm.Model() as model:
        g = pm.Data("g", groups)
        a = pm.Normal("a", 0, 1, shape=3)
        pm.Normal("y", a[g], 0.3, observed=y)
    assert model["g"].dtype.startswith("int")
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    pred = bnn_zoo.predict(result, {"g": np.array([2, 2, 0])}, var_names=["y"], draws=1000)
    means = pred["predictions"]["y"].values.mean((0, 1))
    np.testing.assert_allclose(means, [1.9, 1.9, 0.0], atol=0.25)


def test_initial_values_given_with_initval_are_where_q_starts():
    start = RNG.normal(size=(2, 3))
    with pm.Model() as model:
        pm.Normal("w", 0, 1, shape=(2, 3), initval=start)  # a matrix: no symmetry-breaking noise
        pm.HalfNormal("s", 1, initval=2.0)
        pm.Normal("v", 0, 1, shape=(2, 3))  # no initval: the initial point plus N(0, 1/fan_in)
    setup = prepare(model, steps=10)
    mean = setup.layout.split(np.asarray(setup.state.params["mu"], dtype="float64"))
    np.testing.assert_allclose(mean["w"], start)
    np.testing.assert_allclose(mean["s_log__"], np.log(2.0))
    assert np.abs(mean["v"]).max() > 0.05  # v starts away from its zero initial point


def test_minibatch_over_data_containers_fits_as_pm_fit_does():
    """pm.Minibatch(pm.Data, pm.Data): the containers keep their names, once each."""
    rng = np.random.default_rng(0)
    n = 500
    X = rng.normal(size=n)
    Y = 1 + 2 * X + rng.normal(size=n)
    with pm.Model() as model:
        xd, yd = pm.Data("xd", X), pm.Data("yd", Y)
        xb, yb = pm.Minibatch(xd, yd, batch_size=50)
        a, b, s = pm.Normal("a", 0, 10), pm.Normal("b", 0, 10), pm.HalfNormal("sigma", 1)
        pm.Normal("y_obs", a + b * xb, s, observed=yb, total_size=n)
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    assert sorted(v.name for v in result.model.data_vars) == ["xd", "yd"]
    assert abs(result.mean["b"] - 2.0) < 0.15 and abs(result.mean["a"] - 1.0) < 0.15
    pred = bnn_zoo.predict(result, {"xd": np.array([0.0, 1.0])}, var_names=["y_obs"], draws=200)
    assert pred["predictions"]["y_obs"].shape[-1] == 2


def test_a_minibatch_model_names_its_generated_containers_when_asked_for_another():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(300, 2)), rng.normal(size=300)
    with pm.Model() as model:
        xb, yb = pm.Minibatch(X, Y, batch_size=30)
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Normal("y_obs", xb @ w, 1, observed=yb, total_size=300)
    result = bnn_zoo.fit(model, steps=50, progressbar=False)
    with pytest.raises(ValueError, match=r"no data container 'X'; its containers: minibatch_0 \(300, 2\): the 1st "
                                         r"array given to pm.Minibatch; minibatch_1 \(300,\): the 2nd array given "
                                         r"to pm.Minibatch, observed by y_obs \(leave it out to predict\)"):
        bnn_zoo.predict(result, {"X": X[:3]})
    assert bnn_zoo.predict(result, {"minibatch_0": X[:3]}, var_names=["y_obs"], draws=5)[
        "predictions"]["y_obs"].shape[-1] == 3


def test_transforms_that_change_a_length_keep_sample_working_with_dims():
    """A simplex (Dirichlet) has one unconstrained coordinate fewer than its variable: the
    variable's dims stay on the variable's draws, not on q's value."""
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.normal(-2, 1, 100), rng.normal(3, 1, 100)])
    with pm.Model(coords={"component": [0, 1], "group": ["a", "b", "c"]}) as model:
        w = pm.Dirichlet("w", a=np.ones(2), dims="component")
        mu = pm.Normal("mu", 0, 5, dims="component", transform=pm.distributions.transforms.ordered,
                       initval=[-1.0, 1.0])
        sd = pm.HalfNormal("sd", 2, dims="component")
        pm.ZeroSumNormal("offsets", sigma=1.0, dims="group")
        pm.NormalMixture("y", w=w, mu=mu, sigma=sd, observed=y)
    result = bnn_zoo.fit(model, steps=2000, progressbar=False)
    idata = bnn_zoo.sample(result, 100)
    post = idata["posterior"]
    assert post["w"].dims[-1] == "component" and post["offsets"].dims[-1] == "group"
    assert post["mu"].mean(("chain", "draw")).values[0] < 0 < post["mu"].mean(("chain", "draw")).values[1]
    assert idata["fit"]["w_simplex__"].shape[-1] == 1
