"""Draws, log q / log p, predictions and the DataTree."""

import warnings

import arviz as az
import jax
import numpy as np
import pytest
import scipy.stats as st
import xarray as xr

from data import toy
from evaluation.metrics import accuracy
from inference import draw, draw_mixture, fit, loo, predict_proba, psis, to_datatree
from inference.posterior import predict as posterior_predict
from models import mlp_classifier


@pytest.fixture(scope="module")
def fitted():
    split = toy.load("moons", n_train=200, n_test=100, noise=0.2, seed=1)
    model = mlp_classifier(split.X_train, split.y_train, prior="laplace", hyperprior="halfnormal")
    result = fit(model, steps=1500, learning_rate=0.05, init_std=0.01, progressbar=False)
    return split, result, draw(result, 200, seed=0)


def test_log_q_is_the_density_of_q(fitted):
    _, result, draws = fitted
    params = result.approx.groups[0].params_dict
    mu = params["mu"].get_value()
    sd = np.logaddexp(0, params["rho"].get_value())
    expected = st.norm(mu, sd).logpdf(draws.z).sum(axis=1)
    np.testing.assert_allclose(draws.log_q, expected, rtol=1e-9)


def test_log_p_is_the_model_joint_density(fitted):
    _, result, draws = fitted
    model = result.model
    logp = model.compile_logp(jacobian=True)
    ordering = result.approx.groups[0].ordering
    for i in (0, 17, 199):
        point = {name: draws.z[i][slc].reshape(shape) for name, slc, shape, _ in ordering.values()}
        assert draws.log_p[i] == pytest.approx(float(logp(point)), rel=1e-9)


def test_draws_without_log_p_are_the_same_draws(fitted):
    _, result, draws = fitted
    lean = draw(result, 200, seed=0, log_p=False)
    assert np.isnan(lean.log_p).all()
    np.testing.assert_array_equal(lean.z, draws.z)
    np.testing.assert_array_equal(lean.log_q, draws.log_q)
    for name, values in draws.posterior.items():
        np.testing.assert_array_equal(lean.posterior[name], values)


def test_mixture_of_one_fit_is_its_draws(fitted):
    _, result, draws = fitted
    one = draw_mixture([result], 200, seed=0)
    for field in ("z", "log_q", "log_p"):
        np.testing.assert_array_equal(getattr(one, field), getattr(draws, field))


def test_mixture_draws_and_density(fitted):
    _, result, _ = fitted
    other = fit(result.model, method="fullrank_advi", steps=300, learning_rate=0.01, init_std=0.05,
                seed=1, progressbar=False)
    mixed = draw_mixture([result, other], 7, seed=3)
    # 4 draws of the first q, then 3 of the second, from one stream.
    rng = np.random.default_rng(3)
    params = result.approx.groups[0].params_dict
    mu1, sd1 = params["mu"].get_value(), np.logaddexp(0, params["rho"].get_value())
    np.testing.assert_allclose(mixed.z[:4], mu1 + rng.standard_normal((4, mu1.size)) * sd1)
    p2 = other.approx.groups[0].params_dict
    mu2, d = p2["mu"].get_value(), mu1.size
    L2 = np.zeros((d, d))
    L2[np.tril_indices(d)] = p2["L_tril"].get_value()
    L2[np.diag_indices(d)] = np.logaddexp(0, np.diag(L2))
    np.testing.assert_allclose(mixed.z[4:], mu2 + rng.standard_normal((3, d)) @ L2.T)
    q1 = st.norm(mu1, sd1).logpdf(mixed.z).sum(axis=1)
    q2 = st.multivariate_normal(mu2, L2 @ L2.T).logpdf(mixed.z)
    # log q: the density of the mixture the draws come from (weights 4/7 and 3/7).
    np.testing.assert_allclose(mixed.log_q, np.logaddexp(q1 + np.log(4 / 7), q2 + np.log(3 / 7)),
                               rtol=1e-9)
    logp = result.model.compile_logp(jacobian=True)
    ordering = result.approx.groups[0].ordering
    point = {name: mixed.z[5][slc].reshape(shape) for name, slc, shape, _ in ordering.values()}
    assert mixed.log_p[5] == pytest.approx(float(logp(point)), rel=1e-9)


def test_mixture_needs_fits_of_one_model(fitted):
    split, result, _ = fitted
    small = mlp_classifier(split.X_train, split.y_train, hidden=(3,))
    other = fit(small, steps=2, progressbar=False)
    with pytest.raises(ValueError, match="fits of one model"):
        draw_mixture([result, other], 10)
    with pytest.raises(ValueError, match="at least one fit"):
        draw_mixture([], 10)
    with pytest.raises(ValueError, match="one draw per fit: n=1 for 2 fits"):
        draw_mixture([result, result], 1)


def test_constrained_scales_are_positive(fitted):
    _, _, draws = fitted
    for layer in range(3):
        assert (draws.posterior[f"scale_{layer}"] > 0).all()


def test_predict_restores_training_inputs_and_classifies(fitted):
    split, result, draws = fitted
    X_before = result.model["X"].get_value().copy()
    proba = predict_proba(result, draws, split.X_test, chunk=37)  # chunking must not matter
    np.testing.assert_array_equal(result.model["X"].get_value(), X_before)
    assert proba.shape == (200, len(split.X_test), 2)
    np.testing.assert_allclose(proba.sum(-1), 1.0, rtol=1e-9)
    assert accuracy(proba, split.y_test) > 0.8


def test_datatree_groups_dims_and_netcdf_roundtrip(fitted, tmp_path):
    split, result, draws = fitted
    idata = to_datatree(result, draws, X_train=split.X_train, y_train=split.y_train,
                        X_test=split.X_test, y_test=split.y_test)
    for group in ("posterior", "log_likelihood", "posterior_predictive", "sample_stats",
                  "observed_data", "constant_data"):
        assert group in idata.children
    assert idata["posterior"]["W_0"].dims == ("chain", "draw", "feature", "unit_0")
    assert list(idata["posterior"]["W_0"].coords["feature"].values) == ["x1", "x2"]
    assert idata["posterior_predictive"]["p"].dims == ("chain", "draw", "test_obs", "class")
    assert idata["log_likelihood"]["y"].shape == (1, 200, len(split.y_train))
    assert (idata["log_likelihood"]["y"].values < 0).all()
    idata.to_netcdf(tmp_path / "idata.nc")
    back = az.from_netcdf(tmp_path / "idata.nc")
    np.testing.assert_array_equal(back["posterior"]["W_2"].values,
                                  idata["posterior"]["W_2"].values)
    assert back.attrs["fit_method"] == "advi" and back.attrs["fit_steps"] == "1500"
    assert back.attrs["inference_library"] == "pymc"
    elpd = loo(back)
    assert np.isfinite(elpd.elpd) and elpd.elpd < 0


def test_loo_is_arviz_loo_approximate_posterior(fitted):
    split, result, draws = fitted
    idata = to_datatree(result, draws, X_train=split.X_train, y_train=split.y_train,
                        X_test=split.X_test, y_test=split.y_test)
    stats = idata["sample_stats"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k warnings, from both
        ref = az.loo_approximate_posterior(idata, log_p=stats["log_p"].values.ravel(),
                                           log_q=stats["log_q"].values.ravel(), var_name="y")
        ours = loo(idata)
    for key in ("elpd", "se", "p"):
        assert getattr(ours, key) == pytest.approx(getattr(ref, key), rel=1e-10)
    for key in ("elpd_i", "pareto_k"):
        assert getattr(ours, key).dims == getattr(ref, key).dims == ("obs",)
        np.testing.assert_allclose(getattr(ours, key).values, getattr(ref, key).values, rtol=1e-10)
    assert (ours.n_samples, ours.n_data_points, ours.good_k, ours.warning, ours.approx_posterior) == (
        ref.n_samples, ref.n_data_points, ref.good_k, ref.warning, True)


def _tree(log_lik, log_p, log_q):
    return xr.DataTree.from_dict({
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik[None])}),
        "sample_stats": xr.Dataset({"log_p": (("chain", "draw"), log_p[None]),
                                    "log_q": (("chain", "draw"), log_q[None])}),
    })


def _both(log_lik, log_p, log_q):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k warnings, from both
        tree = _tree(log_lik, log_p, log_q)
        return az.loo_approximate_posterior(tree, log_p=log_p, log_q=log_q, var_name="y"), loo(tree)


@pytest.mark.parametrize("draws", [30, 400, 2000])
def test_psis_matches_arviz_on_heavy_tails(draws, monkeypatch):
    # Light and heavy tails: Pareto k from below 0.7 to above 1.
    rng = np.random.default_rng(draws)
    log_lik = np.column_stack([rng.normal(-1, 0.3, draws), -np.abs(rng.standard_t(1.5, draws)),
                               np.round(rng.normal(-2, 1, draws)), rng.normal(-1, 3, draws),
                               -rng.exponential(5, draws)])
    log_q = rng.normal(0, 1, draws)
    log_p = log_q + rng.normal(0, 0.1, draws)
    ref, ours = _both(log_lik, log_p, log_q)
    assert np.nanmax(ref.pareto_k.values) > 1 and np.nanmin(ref.pareto_k.values) < 0.7
    np.testing.assert_allclose(ours.pareto_k.values, ref.pareto_k.values, rtol=1e-10)
    np.testing.assert_allclose(ours.elpd_i.values, ref.elpd_i.values, rtol=1e-10)
    assert ours.p == pytest.approx(ref.p, rel=1e-10)
    whole = psis.loo_approximate_posterior(log_lik, log_p, log_q)
    monkeypatch.setattr(psis, "BLOCK", 2)  # observations in blocks of 2, 2, 1
    for blocked, at_once in zip(psis.loo_approximate_posterior(log_lik, log_p, log_q), whole):
        np.testing.assert_allclose(blocked, at_once, rtol=1e-14)  # SIMD sums: last bit


@pytest.mark.parametrize("draws", [30, 400])
def test_psis_matches_arviz_on_ties(draws):
    # q equal to p (no correction) and whole-number log likelihoods: ties in the tail,
    # whose first quartile is its minimum, so k is NaN (no smoothing) as in ArviZ.
    rng = np.random.default_rng(draws)
    log_lik = np.column_stack([np.round(rng.normal(-2, 1, draws)), rng.normal(-1, 0.3, draws)])
    log_q = rng.normal(0, 1, draws)
    ref, ours = _both(log_lik, log_q, log_q)
    assert np.isnan(ref.pareto_k.values[0]) and np.isfinite(ref.pareto_k.values[1])
    np.testing.assert_allclose(ours.pareto_k.values, ref.pareto_k.values, rtol=1e-10)
    np.testing.assert_allclose(ours.elpd_i.values, ref.elpd_i.values, rtol=1e-10)


def test_psis_all_tail_values_equal_is_an_error_as_in_arviz():
    log_lik = np.full((400, 1), -2.0)
    log_lik[:3] = -1.0  # the tail (the largest -log_lik) is one value
    log_q = np.random.default_rng(0).normal(0, 1, 400)
    for compute in (lambda: az.loo_approximate_posterior(_tree(log_lik, log_q, log_q), log_p=log_q,
                                                        log_q=log_q, var_name="y"),
                    lambda: loo(_tree(log_lik, log_q, log_q))):
        with pytest.raises(ValueError, match="All tail values are the same"):
            compute()


def test_loo_needs_log_p(fitted):
    split, result, _ = fitted
    lean = draw(result, 50, seed=0, log_p=False)
    idata = to_datatree(result, lean, X_train=split.X_train, y_train=split.y_train,
                        X_test=split.X_test, y_test=split.y_test)
    with pytest.raises(ValueError, match="finite log p and log q"):
        loo(idata)


def test_psis_needs_25_draws():
    with pytest.raises(ValueError, match="at least 25 draws, got 24"):
        psis.loo_approximate_posterior(np.zeros((24, 3)), np.zeros(24), np.zeros(24))


@pytest.mark.parametrize("map_bytes", [2**22, 2**24])  # blocks of 2 and 10 draws, padded
def test_draws_evaluated_in_blocks_equal_draws_one_at_a_time(fitted, monkeypatch, map_bytes):
    from inference import posterior

    split, result, draws = fitted
    some = posterior.Draws(z=draws.z[:37], log_q=draws.log_q[:37], log_p=draws.log_p[:37],
                           posterior={k: v[:37] for k, v in draws.posterior.items()})  # 37: prime
    key = ("evaluator", ("p",))
    monkeypatch.setattr(posterior, "MAP_BYTES", map_bytes)
    posterior.compiled_model(result).jitted.pop(key, None)
    blocked = predict_proba(result, some, split.X_test)
    data = posterior._data(result.model, X=np.zeros((2048, 2)))
    functions = posterior.compiled_model(result)
    jaxpr = str(functions.jitted[key].trace(some.z, *data).jaxpr)
    one = str(jax.make_jaxpr(lambda z, *d: functions.select(("p",))(functions.layout.unflatten(z), *d))(
        some.z[0], *data))
    # Blocks of draws in one scan, and the network once: no second copy for a remainder.
    assert jaxpr.count("scan[") == 1 and jaxpr.count("tanh") == one.count("tanh") > 0
    monkeypatch.setattr(posterior, "MAP_BYTES", 1)  # one draw per block
    posterior.compiled_model(result).jitted.pop(key)
    np.testing.assert_allclose(predict_proba(result, some, split.X_test), blocked, rtol=1e-12)
    np.testing.assert_allclose(blocked, predict_proba(result, draws, split.X_test)[:37], rtol=1e-12)


def test_predict_names_an_unknown_variable(fitted):
    split, result, draws = fitted
    with pytest.raises(ValueError, match="no variable 'W_9'"):
        posterior_predict(result, draws, split.X_test, var="W_9")
