import jax
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.stats as st
from pymc.initial_point import make_initial_point_fn
from pytensor.tensor.random.op import RandomVariable
from scipy.special import softmax

from bnn_zoo.inference.compile.jaxmodel import Layout, compile_model
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS, get_hyperprior, get_weight_prior, weight_prior
from bnn_zoo.models.layers import select
from bnn_zoo.models.mlp import mlp_classifier
from bnn_zoo.models.priors import defaults

POINTS = np.array([-3.0, -0.4, 0.0, 0.25, 2.5])
POSITIVE = np.array([0.05, 0.4, 1.0, 2.5, 7.0])
# PyMC's normalising constants (log 2, log pi, ...) carry single-precision
# round-off of 2e-9 to 2e-8; a wrong formula or scale convention is off by far more.
TOL = dict(rtol=0, atol=1e-7)


def _logp(rv, values):
    return np.array([pm.logp(rv, v).eval() for v in values])


@pytest.mark.parametrize(
    "name, scipy_dist",
    [
        ("normal", lambda s: st.norm(0, s)),
        ("laplace", lambda s: st.laplace(0, s)),
        ("cauchy", lambda s: st.cauchy(0, s)),
    ],
)
@pytest.mark.parametrize("scale", [0.3, 1.0, 2.0])
def test_weight_prior_log_density_matches_scipy(name, scipy_dist, scale):
    with pm.Model():
        rv = get_weight_prior(name)("w", scale, None)
    np.testing.assert_allclose(_logp(rv, POINTS), scipy_dist(scale).logpdf(POINTS), **TOL)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_scale_mixture_is_blundells_prior(scale):
    assert defaults("scale_mixture") == {"pi": 0.5, "sigma1": 1.0, "sigma2": np.exp(-6)}
    with pm.Model():
        rv = get_weight_prior("scale_mixture")("w", scale, None)
    s1, s2 = scale * 1.0, scale * np.exp(-6)
    points = np.append(POINTS, [1e-3, -4e-3])  # inside the spike too
    expected = np.log(0.5 * st.norm(0, s1).pdf(points) + 0.5 * st.norm(0, s2).pdf(points))
    np.testing.assert_allclose(_logp(rv, points), expected, rtol=1e-7)
    with pm.Model():
        rv = get_weight_prior("scale_mixture", pi=0.25, sigma2=0.1)("w", 1.0, None)
    expected = np.log(0.25 * st.norm(0, 1).pdf(POINTS) + 0.75 * st.norm(0, 0.1).pdf(POINTS))
    np.testing.assert_allclose(_logp(rv, POINTS), expected, rtol=1e-7)
    with pm.Model(), pytest.raises(ValueError, match="0 < pi < 1"):
        get_weight_prior("scale_mixture", pi=1.0)("w", 1.0, None)


def test_scale_mixture_draws_and_starts_like_pymcs_normal_mixture(monkeypatch):
    with pm.Model(coords={"i": range(40_000)}) as model:
        rv = get_weight_prior("scale_mixture")("w", 1.0, "i")
    draws = pm.draw(rv, random_seed=1)
    # half the draws from the spike (sd e^-6 = 0.0025), half from N(0, 1)
    assert abs(np.mean(np.abs(draws) < 0.01) - 0.5) < 0.015
    assert abs(draws.std() - np.sqrt(0.5 * (1 + np.exp(-12)))) < 0.01

    with pm.Model(coords={"i": range(20_000), "j": range(2)}):  # a scale per column
        rv = get_weight_prior("scale_mixture")("w", np.array([1.0, 100.0]), ("i", "j"))
    np.testing.assert_allclose(pm.draw(rv, random_seed=2).std(axis=0),
                               np.sqrt(0.5) * np.array([1.0, 100.0]), rtol=0.03)

    def no_draws(*args, **kwargs):
        raise AssertionError("the initial point drew a random variable")

    # The start is the mixture's mean, 0, worked out without a draw: a draw picks a
    # component per weight (about 28 s for a 2x1200 MLP's 2.4 M weights).
    monkeypatch.setattr(RandomVariable, "perform", no_draws)
    np.testing.assert_array_equal(model.initial_point()["w"], np.zeros(40_000))


@pytest.mark.parametrize("floatX", ["float64", "float32"])
def test_scale_mixture_gradient_under_jax_is_finite_and_exact(floatX):
    # JAX differentiates the jaxified log density (the engine does). The density's
    # log1p(exp(.)) is pytensor's Softplus, whose own JAX version had a NaN gradient
    # for every weight more than a few spike widths from zero (inference.jax_fixes).
    with pytensor.config.change_flags(floatX=floatX), pm.Model(coords={"i": range(6)}) as model:
        get_weight_prior("scale_mixture")("w", pt.constant(np.asarray(1.0, floatX)), "i")
        density = compile_model(model, Layout.of(model, model.initial_point()))
    w = np.array([-60.0, -3.0, -0.02, 1e-3, 0.0, 40.0])
    grad = np.asarray(jax.grad(lambda v: density.log_density([v])[0])(w.astype(floatX)), dtype=float)
    s1, s2 = 1.0, np.exp(-6)
    # d/dw log p(w) = -sum_k r_k(w) w / s_k^2, with the components' responsibilities r_k
    r = softmax([st.norm(0, s1).logpdf(w), st.norm(0, s2).logpdf(w)], axis=0)
    expected = -(r[0] * w / s1**2 + r[1] * w / s2**2)
    np.testing.assert_allclose(grad, expected, rtol=1e-5 if floatX == "float32" else 1e-10)


def test_flat_prior_is_constant():
    with pm.Model():
        rv = get_weight_prior("flat")("w", None, None)
    np.testing.assert_array_equal(_logp(rv, POINTS), np.zeros_like(POINTS))


@pytest.mark.parametrize(
    "name, params, scipy_dist",
    [
        ("halfnormal", {}, st.halfnorm(scale=1.0)),
        ("halfnormal", {"sigma": 0.5}, st.halfnorm(scale=0.5)),
        ("halfcauchy", {}, st.halfcauchy(scale=1.0)),
        ("halfcauchy", {"beta": 3.0}, st.halfcauchy(scale=3.0)),
        ("inversegamma", {}, st.invgamma(3.0, scale=4.0)),
        ("inversegamma", {"alpha": 1.5, "beta": 0.5}, st.invgamma(1.5, scale=0.5)),
    ],
)
def test_hyperprior_log_density_matches_scipy(name, params, scipy_dist):
    with pm.Model():
        rv = get_hyperprior(name, **params)("s")
    np.testing.assert_allclose(_logp(rv, POSITIVE), scipy_dist.logpdf(POSITIVE), **TOL)


def test_fixed_hyperprior_is_the_given_constant():
    assert float(get_hyperprior("fixed")("s").eval()) == 1.0
    assert float(get_hyperprior("fixed", value=0.3)("s").eval()) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="positive"):
        get_hyperprior("fixed", value=-1.0)("s")


def test_registry_has_the_sixteen_combinations():
    assert set(WEIGHT_PRIORS) >= {"normal", "laplace", "cauchy", "flat"}
    assert set(HYPERPRIORS) >= {"fixed", "halfnormal", "halfcauchy", "inversegamma"}
    assert defaults("inversegamma") == {"alpha": 3.0, "beta": 4.0}


def test_unknown_names_list_valid_ones():
    with pytest.raises(ValueError, match="unknown prior 'gauss'; valid: cauchy, flat, laplace"):
        get_weight_prior("gauss")
    with pytest.raises(ValueError, match="valid: fixed, halfcauchy, halfnormal, inversegamma"):
        get_hyperprior("gamma")
    with pytest.raises(ValueError, match="has no parameter mu; valid: sigma"):
        get_hyperprior("halfnormal", mu=1.0)


def test_a_new_prior_is_one_registry_entry():
    @weight_prior("student_t")
    def student_t(name, scale, dims, *, nu=3.0):
        return pm.StudentT(name, nu=nu, mu=0.0, sigma=scale, dims=dims)

    try:
        X = np.random.default_rng(0).normal(size=(20, 2))
        model = mlp_classifier(X, (X[:, 0] > 0).astype(int), prior="student_t",
                               prior_params={"nu": 5.0})
        assert isinstance(model["W_0"].owner.op, type(pm.StudentT.dist(nu=1).owner.op))
    finally:
        WEIGHT_PRIORS.pop("student_t")


PAIRS = [(p, h) for p in sorted(WEIGHT_PRIORS) for h in sorted(HYPERPRIORS)]


@pytest.mark.parametrize("structure", ["scales", "fixed"])
def test_a_choice_of_priors_is_each_pairs_model_when_its_index_selects_it(structure):
    """The model built with a choice of priors, its index at i, has the log density and the initial
    point of the model built with the i-th pair alone (float64, at random points): one compiled
    model (its index as data, as the sweep runs it) for every pair."""
    from bnn_zoo.models import priors as registry

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.integers(0, 2, 30)
    params = {"inversegamma": {"alpha": 3.0, "beta": 4.0}, "halfnormal": {"sigma": 2.0}}
    if structure == "scales":
        priors = sorted(p for p in WEIGHT_PRIORS if p not in registry.SCALE_FREE)
        hyperpriors = sorted(h for h in HYPERPRIORS if h != "fixed")
        kwargs = dict(hyperprior=hyperpriors, hyperprior_params=params)
    else:
        priors, hyperpriors = sorted(WEIGHT_PRIORS), ["fixed"]
        kwargs = dict(hyperprior="fixed")
    choice = mlp_classifier(X, y, hidden=(), prior=priors, **kwargs)  # one layer: W_0, b_0 (scale_0)
    point = choice.initial_point()
    start_of_choice = make_initial_point_fn(model=choice, return_transformed=True)
    density = compile_model(choice, Layout.of(choice, point))
    data = [np.asarray(v.get_value()) for v in choice.data_vars]
    names = [v.name for v in choice.data_vars]
    for i, prior in enumerate(priors):
        for j, hyperprior in enumerate(hyperpriors):
            alone = mlp_classifier(X, y, hidden=(), prior=prior, hyperprior=hyperprior,
                                   hyperprior_params=params.get(hyperprior))
            index = {"prior_index": i, **({"hyperprior_index": j} if len(hyperpriors) > 1 else {})}
            select(choice, index)
            start = alone.initial_point()
            assert {k: v.tolist() for k, v in start_of_choice(0).items()} == \
                {k: v.tolist() for k, v in start.items()}, (prior, hyperprior)
            alone_logp = alone.compile_logp(mode="FAST_COMPILE")
            chosen = [np.asarray(index.get(n, d)) for n, d in zip(names, data)]
            for _ in range(3):
                values = {k: rng.normal(size=np.shape(v)) for k, v in start.items()}
                got = density.fn([values[v.name] for v in choice.value_vars], *chosen)
                np.testing.assert_allclose(float(got[0] + got[1]), alone_logp(values), rtol=1e-12,
                                           err_msg=f"{prior}-{hyperprior}")


def test_a_choice_of_models_of_other_variables_is_refused():
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match="mixes models with a scale variable and models without one"):
        mlp_classifier(X, y, prior=["normal", "flat"], hyperprior="halfnormal")
    with pytest.raises(ValueError, match="needs at least two names of random scales"):
        mlp_classifier(X, y, prior="normal", hyperprior=["fixed", "halfnormal"])
    with pytest.raises(ValueError, match="unknown prior 'studentt'"):
        mlp_classifier(X, y, prior=["normal", "studentt"])
