"""Draws, log q / log p, the DataTree, predictions on new data, and PSIS-LOO."""

import warnings

import arviz as az
import jax
import numpy as np
import optax
import pymc as pm
import pytest
import scipy.stats as st
import xarray as xr

import bnn_zoo
from bnn_zoo import loo, predict, sample
from bnn_zoo.cache import count_programs
from bnn_zoo.data import toy
from bnn_zoo.evaluation.metrics import accuracy
from bnn_zoo.inference.compile import cost
from bnn_zoo.inference.diagnostics import psis
from bnn_zoo.inference.posterior.draws import draw_z, evaluate_z
from bnn_zoo.inference.posterior.sampling import draws_posterior, point_posterior
from bnn_zoo.models import mlp_classifier, mlp_regressor
from bnn_zoo.models.linear import correlated_design, linear_regression


@pytest.fixture(scope="module")
def fitted():
    split = toy.load("moons", n_train=200, n_test=100, noise=0.2, seed=1)
    model = mlp_classifier(split.X_train, split.y_train, prior="laplace", hyperprior="halfnormal")
    result = bnn_zoo.fit(model, steps=1500, optimizer=optax.adam(0.05), method=bnn_zoo.MeanField(init_std=0.01),
                         progressbar=False)
    return split, result, sample(result, 200, random_seed=0)


def test_log_q_is_the_density_of_q(fitted):
    _, result, _ = fitted
    z, log_q = draw_z(result, 200, seed=0)
    expected = st.norm(result.params["mu"], np.logaddexp(0, result.params["rho"])).logpdf(z).sum(axis=1)
    np.testing.assert_allclose(log_q, expected, rtol=1e-9)
    idata = fitted[2]
    np.testing.assert_array_equal(idata["sample_stats"]["log_q"].values[0], log_q)


def test_log_p_is_the_model_joint_density(fitted):
    _, result, idata = fitted
    logp = result.model.compile_logp(jacobian=True)
    z, _ = draw_z(result, 200, seed=0)
    for i in (0, 17, 199):
        point = result.layout.split(z[i])
        assert idata["sample_stats"]["log_p"].values[0, i] == pytest.approx(float(logp(point)), rel=1e-9)


def test_pointwise_log_likelihood_is_the_observed_variables_density(fitted):
    split, result, idata = fitted
    log_lik = idata["log_likelihood"]["y_obs"].values[0]
    assert log_lik.shape == (200, len(split.y_train)) and (log_lik < 0).all()
    p = evaluate_z(result, draw_z(result, 200, seed=0)[0][:3], ["p"])["p"]
    np.testing.assert_allclose(log_lik[:3], np.log(np.take_along_axis(
        p, split.y_train[None, :, None], axis=2)[..., 0]), rtol=1e-9)


def test_sample_without_log_likelihood_gives_the_same_draws(fitted):
    _, result, idata = fitted
    lean = sample(result, 200, random_seed=0, log_likelihood=False)
    assert np.isnan(lean["sample_stats"]["log_p"]).all() and "log_likelihood" not in lean.children
    free = [rv.name for rv in result.model.free_RVs]
    xr.testing.assert_equal(lean["posterior"].to_dataset()[free], idata["posterior"].to_dataset()[free])
    # the deterministics come from another compiled program (without the log densities): the same
    # values up to XLA's order of operations
    xr.testing.assert_allclose(lean["posterior"].to_dataset(), idata["posterior"].to_dataset(), rtol=1e-12)
    with pytest.raises(ValueError, match="log_likelihood group"):
        loo(lean)


def test_mixture_of_one_fit_is_its_draws(fitted):
    _, result, idata = fitted
    one = sample([result], 200, random_seed=0)
    xr.testing.assert_equal(one["posterior"].to_dataset(), idata["posterior"].to_dataset())
    xr.testing.assert_equal(one["sample_stats"].to_dataset(), idata["sample_stats"].to_dataset())


def test_mixture_draws_and_density(fitted):
    _, result, _ = fitted
    other = bnn_zoo.fit(result.model, method="fullrank_advi", init=result, steps=300, optimizer=optax.adam(0.01),
                        random_seed=1, progressbar=False)
    z, log_q = draw_z([result, other], 7, seed=3)
    # 4 draws of the first q, then 3 of the second, from one stream.
    rng = np.random.default_rng(3)
    mu1, sd1 = result.family.mean_and_factor(result.params)
    np.testing.assert_allclose(z[:4], mu1 + rng.standard_normal((4, mu1.size)) * sd1)
    mu2, L2 = other.family.mean_and_factor(other.params)
    np.testing.assert_allclose(z[4:], mu2 + rng.standard_normal((3, mu2.size)) @ L2.T)
    q1 = st.norm(mu1, sd1).logpdf(z).sum(axis=1)
    q2 = st.multivariate_normal(mu2, L2 @ L2.T).logpdf(z)
    # log q: the density of the mixture the draws come from (weights 4/7 and 3/7).
    np.testing.assert_allclose(log_q, np.logaddexp(q1 + np.log(4 / 7), q2 + np.log(3 / 7)), rtol=1e-9)
    mixed = sample([result, other], 7, random_seed=3)
    logp = result.model.compile_logp(jacobian=True)
    assert mixed["sample_stats"]["log_p"].values[0, 5] == pytest.approx(
        float(logp(result.layout.split(z[5]))), rel=1e-9)
    assert mixed["fit"]["W_0"].dims == ("component", "param", "feature", "unit_0")
    elbo = mixed["fit_stats"]["elbo"].values
    assert elbo.shape == (2, 1500) and np.isnan(elbo[1, 300:]).all()
    np.testing.assert_array_equal(elbo[1, :300], other.elbo)


def test_mixture_needs_fits_of_one_model(fitted):
    split, result, _ = fitted
    small = mlp_classifier(split.X_train, split.y_train, hidden=(3,))
    other = bnn_zoo.fit(small, steps=2, progressbar=False)
    with pytest.raises(ValueError, match="fits of one model"):
        sample([result, other], 10)
    with pytest.raises(ValueError, match="at least one fit"):
        sample([], 10)
    with pytest.raises(ValueError, match=r"number of draws >= the number of fits \(2\), got 1"):
        sample([result, result], 1)


def test_constrained_scales_are_positive(fitted):
    _, _, idata = fitted
    for layer in range(3):
        assert (idata["posterior"][f"scale_{layer}"] > 0).all()


def test_datatree_groups_dims_and_netcdf_roundtrip(fitted, tmp_path):
    split, result, idata = fitted
    for group in ("posterior", "log_likelihood", "sample_stats", "observed_data", "constant_data",
                  "fit", "fit_stats"):
        assert group in idata.children
    assert idata["posterior"]["W_0"].dims == ("chain", "draw", "feature", "unit_0")
    assert list(idata["posterior"]["W_0"].coords["feature"].values) == ["x1", "x2"]
    np.testing.assert_array_equal(idata["observed_data"]["y_obs"], split.y_train)
    np.testing.assert_array_equal(idata["constant_data"]["X"], split.X_train)
    # q's parameters by variable, in the unconstrained space, and the ELBO trace.
    np.testing.assert_allclose(idata["fit"]["W_0"].sel(param="mean"), result.mean["W_0"])
    np.testing.assert_allclose(idata["fit"]["scale_0_log__"].sel(param="sd"), result.sd["scale_0_log__"])
    np.testing.assert_array_equal(idata["fit_stats"]["elbo"], result.elbo)
    idata.to_netcdf(tmp_path / "idata.nc")
    back = az.from_netcdf(tmp_path / "idata.nc")
    np.testing.assert_array_equal(back["posterior"]["W_2"].values, idata["posterior"]["W_2"].values)
    assert back.attrs["fit_method"] == "advi" and back.attrs["inference_library"] == "pymc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        elpd = loo(back)
    assert np.isfinite(elpd.elpd) and elpd.elpd < 0


def test_loo_is_arviz_loo_approximate_posterior(fitted):
    _, _, idata = fitted
    stats = idata["sample_stats"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k warnings, from both
        ref = az.loo_approximate_posterior(idata, log_p=stats["log_p"].values.ravel(),
                                           log_q=stats["log_q"].values.ravel(), var_name="y_obs")
        ours = loo(idata)
    for key in ("elpd", "se", "p"):
        assert getattr(ours, key) == pytest.approx(getattr(ref, key), rel=1e-10)
    for key in ("elpd_i", "pareto_k"):
        assert getattr(ours, key).dims == getattr(ref, key).dims == ("obs",)
        np.testing.assert_allclose(getattr(ours, key).values, getattr(ref, key).values, rtol=1e-10)
    assert (ours.n_samples, ours.n_data_points, ours.good_k, ours.warning, ours.approx_posterior) == (
        ref.n_samples, ref.n_data_points, ref.good_k, ref.warning, True)


# --- predict -------------------------------------------------------------------------


def test_predict_classifies_new_points_and_leaves_the_model_alone(fitted):
    split, result, idata = fitted
    X_before = result.model["X"].get_value().copy()
    pred = predict(result, {"X": split.X_test}, idata=idata, var_names=["p", "y_obs"], random_seed=5)
    np.testing.assert_array_equal(result.model["X"].get_value(), X_before)
    p, y = pred["predictions"]["p"], pred["predictions"]["y_obs"]
    assert p.dims == ("chain", "draw", "obs", "class") and p.shape == (1, 200, len(split.X_test), 2)
    np.testing.assert_allclose(p.sum("class"), 1.0, rtol=1e-9)
    assert accuracy(p.values[0], split.y_test) > 0.8
    np.testing.assert_array_equal(pred["predictions_constant_data"]["X"], split.X_test)
    # y_obs is drawn from Categorical(p) of each draw: its frequency of class 1 is p's mean.
    freq, mean = y.values[0].mean(0), p.values[0, :, :, 1].mean(0)
    assert np.abs(freq - mean).max() < 5 * np.sqrt(0.25 / 200)
    assert np.abs(np.mean(freq - mean)) < 5 * np.sqrt(0.25 / 200 / len(freq))
    again = predict(result, {"X": split.X_test}, idata=idata, var_names=["y_obs"], random_seed=5)
    np.testing.assert_array_equal(again["predictions"]["y_obs"], y)  # seeded


def test_predict_in_chunks_equals_at_once(fitted):
    split, result, idata = fitted
    whole = predict(result, {"X": split.X_test}, idata=idata, var_names=["p"])
    chunked = predict(result, {"X": split.X_test}, idata=idata, var_names=["p"], chunk=37)
    np.testing.assert_allclose(chunked["predictions"]["p"], whole["predictions"]["p"], rtol=1e-12)


def test_predict_a_users_regression_model():
    # Conjugate linear regression with its own container names: the posterior
    # predictive of y at new x is N(x w, sigma^2) under q.
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    with pm.Model(coords={"row": np.arange(100)}) as model:
        inputs = pm.Data("inputs", x, dims="row")
        targets = pm.Data("targets", 2 * x + rng.normal(size=100), dims="row")
        w = pm.Normal("w", 0, 10)
        pm.Normal("y", w * inputs, 1.0, observed=targets, dims="row")
    result = bnn_zoo.fit(model, steps=3000, optimizer=optax.adam(optax.cosine_decay_schedule(0.05, 3000, 0.01)),
                         progressbar=False)
    new = np.array([-1.0, 0.0, 3.0])
    pred = predict(result, {"inputs": new}, draws=4000, random_seed=1, coords={"row": ["a", "b", "c"]})
    y = pred["predictions"]["y"]
    assert y.dims == ("chain", "draw", "row") and list(y.coords["row"].values) == ["a", "b", "c"]
    w_mean, w_sd = float(result.mean["w"]), float(result.sd["w"])
    np.testing.assert_allclose(y.mean(("chain", "draw")), w_mean * new, atol=0.1)
    np.testing.assert_allclose(y.std(("chain", "draw")), np.sqrt(1 + (w_sd * new) ** 2), rtol=0.06)
    # A model and any posterior (here q's draws as a DataTree, as from pm.sample).
    idata = sample(result, 500, log_likelihood=False)
    from_model = predict(model, {"inputs": new}, idata=idata, var_names=["y"], random_seed=1)
    assert from_model["predictions"]["y"].shape == (1, 500, 3)


def test_predict_refuses_bad_input(fitted):
    split, result, idata = fitted
    with pytest.raises(ValueError, match="no variable 'W_9'"):
        predict(result, {"X": split.X_test}, idata=idata, var_names=["W_9"])
    with pytest.raises(ValueError, match=r"no data container 'Z'; its containers: X \(200, 2\); y \(200,\)"):
        predict(result, {"Z": split.X_test}, idata=idata)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        predict(result, {"X": split.X_test[:, :1]}, idata=idata)
    with pytest.raises(ValueError, match="must be finite"):
        predict(result, {"X": np.full((3, 2), np.nan)}, idata=idata)
    with pytest.raises(ValueError, match="chunk must be an integer >= 1 with new_data"):
        predict(result, idata=idata, chunk=10)
    with pytest.raises(ValueError, match="needs idata"):
        predict(result.model, {"X": split.X_test})


def test_point_posterior_is_the_network_at_those_values(fitted):
    split, result, _ = fitted
    mu = result.family.mean_and_factor(result.params)[0]
    at_mean = point_posterior(result, np.stack([mu, mu]))
    np.testing.assert_allclose(at_mean["posterior"]["W_0"].values[0, 1], result.mean["W_0"])
    np.testing.assert_allclose(at_mean["posterior"]["scale_1"].values[0, 0],
                               np.exp(result.mean["scale_1_log__"]))


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


def test_psis_matches_arviz_where_single_precision_merges_the_cut():
    # The tail is ranked in single precision first. 40 draws of the second observation have log
    # ratios 1e-9 apart at the tail's cut, one number in single precision: they must be ranked, and
    # the tail cut among them, as double precision does it.
    rng = np.random.default_rng(3)
    log_q = rng.normal(0, 1, 400)
    log_p = log_q + rng.normal(0, 0.5, 400)
    ratios = np.concatenate([-1.9 + rng.exponential(0.5, 40), -2 - 1e-9 * rng.permutation(40), rng.uniform(-9, -4, 320)])
    log_lik = np.column_stack([rng.normal(-1, 0.3, 400), log_p - log_q - ratios])
    ref, ours = _both(log_lik, log_p, log_q)
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


def test_psis_needs_25_draws():
    with pytest.raises(ValueError, match="at least 25 draws, got 24"):
        psis.loo_approximate_posterior(np.zeros((24, 3)), np.zeros(24), np.zeros(24))


@pytest.mark.parametrize("map_bytes", [2**22, 2**24])  # blocks of 16 and 64 draws, the last one padded
def test_draws_evaluated_in_blocks_equal_draws_one_at_a_time(fitted, monkeypatch, map_bytes):
    split, result, _ = fitted
    z, _ = draw_z(result, 37, seed=0)  # 37: prime
    key = ("evaluate", ("p",))
    monkeypatch.setattr("bnn_zoo.inference.posterior.draws.MAP_BYTES", map_bytes)
    result.density.jitted.pop(key, None)
    blocked = evaluate_z(result, z, ["p"])["p"]
    draw_map = result.density.jitted[key]
    [block] = draw_map.block_draws.values()  # a power of two: this network's draws (~250 KB each) in map_bytes
    assert block & (block - 1) == 0 and 37 % block
    with count_programs() as built:
        more = evaluate_z(result, np.concatenate([z, z[:13]]), ["p"])["p"]
    np.testing.assert_allclose(more, np.concatenate([blocked, blocked[:13]]), rtol=1e-12)
    assert draw_map.block._cache_size() == 1  # 37 and 50 draws: one compiled program, of one block
    assert built == [0]  # the draws sliced, padded and joined on the host: no program of their own
    data = tuple(np.asarray(v.get_value()) for v in result.model.data_vars)
    jaxpr = str(jax.make_jaxpr(draw_map.block)(z[:block], data))
    one = str(jax.make_jaxpr(draw_map.fn)(z[0], data))
    # A block of draws vectorised: the network once, no loop.
    assert "scan[" not in jaxpr and jaxpr.count("tanh") == one.count("tanh") > 0
    monkeypatch.setattr("bnn_zoo.inference.posterior.draws.MAP_BYTES", 1)  # one draw per block
    result.density.jitted.pop(key)
    np.testing.assert_allclose(evaluate_z(result, z, ["p"])["p"], blocked, rtol=1e-12)
    # Expensive draws (by XLA's cost analysis) go one compiled call each: the same values.
    monkeypatch.setattr(cost, "LOOP_BELOW_FLOPS", 0.0)
    result.density.jitted.pop(key)
    np.testing.assert_allclose(evaluate_z(result, z, ["p"])["p"], blocked, rtol=1e-12)
    assert list(result.density.jitted[key].block_draws.values()) == [None]


def test_draws_of_values_alone_are_evaluated_in_one_loop():
    """The free variables at many draws (what SGLD, SWAG and ensembles return) have no flops for
    XLA to count: cheap, so one compiled loop, not one call per draw and a stack of thousands."""
    X, y = correlated_design()
    model = linear_regression(X, y)
    result = bnn_zoo.fit(model, steps=200, progressbar=False)
    z, _ = draw_z(result, 3000, seed=0)
    assert cost.cheap(jax.jit(lambda a: a[:3]).lower(z[0]))
    assert not cost.cheap(jax.jit(lambda a: a @ a.T).lower(np.ones((300, 300))))
    tree = draws_posterior(model, result.density, z)
    names = tuple(rv.name for rv in model.free_RVs)
    blocks = result.density.jitted[("evaluate", names)].block_draws
    assert len(blocks) == 1 and None not in blocks.values()
    np.testing.assert_array_equal(tree["posterior"]["w"].values[0], z)  # w's transform is the identity


def test_a_small_models_draws_share_one_program_at_every_count_auto_and_sample_use():
    """A small model's draws fit MAP_BYTES by the hundred thousand; blocks of MAX_BLOCK_DRAWS make
    auto's test (8,000), sample's pool (16,000) and the draws it keeps (a few thousand) one program."""
    from bnn_zoo.inference.posterior.draws import MAX_BLOCK_DRAWS

    X, y = correlated_design()
    result = bnn_zoo.fit(linear_regression(X, y), steps=200, progressbar=False)
    z, _ = draw_z(result, 16_000, seed=0)
    whole = evaluate_z(result, z, ("logp",))["logp"]
    draw_map = result.density.jitted[("evaluate", ("logp",))]
    assert list(draw_map.block_draws.values()) == [MAX_BLOCK_DRAWS]
    for n in (8000, 3000):
        np.testing.assert_allclose(evaluate_z(result, z[:n], ("logp",))["logp"], whole[:n], rtol=1e-12)
    assert draw_map.block._cache_size() == 1


def test_draws_with_zero_posterior_density_give_an_infinite_q_pareto_k_and_say_so():
    """A Uniform(0, theta) likelihood after pm.set_data puts a point above some draws' theta: those
    draws have log p = -inf. q_pareto_k is inf (not NaN, silently), the warning gives their share,
    and loo says why it cannot weigh them (not that a flag already on is missing)."""
    from bnn_zoo.inference.diagnostics import psis, qcheck

    rng = np.random.default_rng(0)
    with pm.Model() as model:  # the bound does not bind on the data fitted (theta > 1 > y)
        y = pm.Data("y", rng.uniform(0, 0.5, size=50))
        t = pm.HalfNormal("t", 1)
        pm.Uniform("obs", 0, 1 + t, observed=y, shape=y.shape)
    result = bnn_zoo.fit(model, steps=3000, progressbar=False)
    new = np.asarray(y.get_value()).copy()
    new[0] = 1 + float(np.exp(result.mean["t_log__"]))  # at q's median: about half the draws exclude it
    pm.set_data({"y": new}, model=model)
    with pytest.warns(qcheck.ApproximationWarning, match=r"puts mass where the posterior has none: \d+ of 4000 "
                      r"draws have log p = -inf or NaN \(q_pareto_k inf\)"):  # judged on 4,000
        idata = bnn_zoo.sample(result, 1000, random_seed=0)
    assert idata.attrs["q_pareto_k"] == np.inf
    impossible = int(np.isneginf(idata["sample_stats"]["log_p"]).sum())
    assert 100 < impossible < 900
    with pytest.raises(ValueError, match=rf"{impossible} of 1000 draws have log p = -inf: q puts mass where"):
        psis.loo(idata)


def test_the_next_method_after_full_rank_is_the_other_parameterisation():
    from bnn_zoo.inference.diagnostics import qcheck

    with pytest.warns(qcheck.ApproximationWarning, match="the model's other parameterisation"):
        qcheck.warn_if_poor(1.3, "fullrank_advi")
    assert "reparameterised (non-centred) model" not in qcheck.NEXT["fullrank_advi"]


def test_an_unknown_method_lists_every_method_fit_takes():
    x = np.random.default_rng(0).normal(size=20)
    with pm.Model() as model:
        pm.Normal("y", pm.Normal("b", 0, 1), 1, observed=x)
    with pytest.raises(ValueError, match=r"valid: advi, lowrank_advi, fullrank_advi, laplace, flow, auto, .*bnn_zoo.Flow"
                                         r"\(\.\.\.\), bnn_zoo.Laplace\(\.\.\.\) or bnn_zoo\.Auto\(\.\.\.\)"):
        bnn_zoo.fit(model, method="nope")
    assert bnn_zoo.METHODS == ("advi", "lowrank_advi", "fullrank_advi", "laplace", "flow", "auto")
    with pytest.raises(ValueError, match=r"valid: advi, lowrank_advi, fullrank_advi, bnn_zoo.MeanField\(\.\.\.\), "
                       r"bnn_zoo.LowRank\(\.\.\.\) or bnn_zoo.FullRank\(\.\.\.\) "):
        bnn_zoo.fit_many([model], method="nope")  # fit_many takes no Laplace, and does not list it


def test_the_log_prior_group_is_pymcs_in_one_program(fitted):
    """add_log_prior gives pm.stats.compute_log_prior's group (the network's Laplace weights and HalfNormal
    scales), and a model with a multivariate prior gets PyMC's own."""
    from bnn_zoo.inference.posterior.log_prior import add_log_prior

    _, result, idata = fitted
    ours = add_log_prior(idata.copy(), result.model)["log_prior"]
    pymc = pm.stats.compute_log_prior(idata.copy(), model=result.model, progressbar=False,
                                      extend_inferencedata=False)
    assert sorted(ours.data_vars) == sorted(pymc.data_vars) and len(ours.data_vars) == 9  # W, b, scale x 3
    for name in pymc.data_vars:
        assert ours[name].dims == pymc[name].dims
        np.testing.assert_allclose(ours[name].values, pymc[name].values, rtol=1e-12, atol=1e-12)
    with pm.Model() as mv:
        x = pm.MvNormal("x", np.zeros(2), np.eye(2))
        pm.Normal("y", x.sum(), 1.0, observed=0.3)
    draws = az.from_dict({"posterior": {"x": np.random.default_rng(0).normal(size=(1, 20, 2))}})
    logp = add_log_prior(draws, mv)["log_prior"]["x"]
    np.testing.assert_allclose(logp.values[0], st.multivariate_normal(np.zeros(2), np.eye(2)).logpdf(
        draws["posterior"]["x"].values[0]), rtol=1e-12)


def test_predict_draws_an_observed_variable_at_its_datas_shape_as_pymc_does():
    """A mean shared by every row (a scalar, or (1, 3) under (15, 3)) is drawn once per row and column,
    as pm.sample_posterior_predictive draws it; along an axis the parameters span (the rows of a
    container), new data of another length give as many draws."""
    rng = np.random.default_rng(0)
    with pm.Model() as shared:
        mu, s = pm.Normal("mu", 0, 10), pm.HalfNormal("s", 2)
        pm.Normal("y", mu, s, observed=rng.normal(3, 1, size=20))
    result = bnn_zoo.fit(shared, steps=1000, progressbar=False)
    idata = sample(result, 200)
    ours = predict(result, idata=idata)["predictions"]["y"]
    with shared, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = pm.sample_posterior_predictive(idata, progressbar=False)["posterior_predictive"]["y"]
    assert ours.shape == theirs.shape == (1, 200, 20)
    assert abs(float(ours.std()) - float(theirs.std())) < 0.1 * float(theirs.std())
    with pm.Model() as columns:
        x = pm.Data("x", rng.normal(size=(15, 1)), shape=(None, 1))
        pm.Normal("y", pm.Normal("b", 0, 1) * x + pm.Normal("c", 0, 1, shape=3), 1, observed=rng.normal(size=(15, 3)))
    result = bnn_zoo.fit(columns, steps=500, progressbar=False)
    assert predict(result, draws=20)["predictions"]["y"].shape == (1, 20, 15, 3)
    assert predict(result, {"x": np.ones((7, 1))}, draws=20)["predictions"]["y"].shape == (1, 20, 7, 3)


def test_predict_in_chunks_gives_each_chunk_its_own_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    with pm.Model() as model:
        X = pm.Data("x", x)
        pm.Normal("y", pm.Normal("b", 0, 5) * X, 1.0, observed=2 * x + rng.normal(size=40), shape=X.shape)
    result = bnn_zoo.fit(model, steps=1000, progressbar=False)
    whole, chunked = (predict(result, {"x": np.zeros(6)}, draws=2000, chunk=c)["predictions"]["y"].values.reshape(-1, 6)
                      for c in (None, 2))
    np.testing.assert_array_equal(chunked[:, :2], whole[:, :2])  # the first chunk is the whole's first rows
    corr = np.corrcoef(chunked.T)[np.triu_indices(6, 1)]
    assert np.abs(corr).max() < 0.1  # rows of other chunks do not share their noise (they did: 1.0)
    assert chunked.sum(1).std() == pytest.approx(whole.sum(1).std(), rel=0.1)


def test_predict_in_chunks_refuses_a_variable_that_does_not_run_over_the_rows():
    """A group effect of length 3 under chunk=3 looked like a variable over the rows (its first axis
    had the chunk's length), and came back cut and stitched as if it were one."""
    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, size=30)
    with pm.Model() as model:
        G = pm.Data("g", g)
        a = pm.Normal("a", 0, 1, shape=3)
        pm.Deterministic("effect", 2 * a)
        pm.Normal("y", a[G], 1.0, observed=rng.normal(size=30), shape=G.shape)
    result = bnn_zoo.fit(model, steps=2000, progressbar=False)
    new = {"g": np.arange(7) % 3}
    with pytest.raises(ValueError, match=r"'effect' does not: predict it without chunk"):
        predict(result, new, var_names=["y", "effect"], draws=10, chunk=3)
    chunked = predict(result, new, var_names=["y"], draws=10, chunk=3)["predictions"]["y"]
    assert chunked.shape == (1, 10, 7)


def test_predict_refuses_to_zero_an_input_the_predictions_are_computed_from():
    """Left out of new data, a container of the changed rows is zeros of the new length: right for
    observed values, which a prediction replaces, and refused for an input (it made mu wrong, silently)."""
    rng = np.random.default_rng(0)
    x1, x2 = rng.normal(size=40), rng.normal(5, 1, size=40)
    with pm.Model(coords={"obs": range(40)}) as model:
        X1, X2 = pm.Data("x1", x1, dims="obs"), pm.Data("x2", x2, dims="obs")
        observed = pm.Data("y_data", x1 + x2 + rng.normal(size=40) * 0.3, dims="obs")
        mu = pm.Deterministic("mu", pm.Normal("a", 0, 5) * X1 + pm.Normal("b", 0, 5) * X2, dims="obs")
        pm.Normal("y", mu, 0.3, observed=observed, dims="obs")
    result = bnn_zoo.fit(model, steps=1500, progressbar=False)
    with pytest.raises(ValueError, match=r"new data must give 'x2' too: it runs over the rows that 'x1' changes"):
        predict(result, {"x1": np.array([0.0, 1.0, 2.0])}, var_names=["mu"])
    both = predict(result, {"x1": np.array([0.0, 1.0, 2.0]), "x2": np.ones(3)}, var_names=["mu", "y"], draws=20)
    assert both["predictions"]["y"].shape == (1, 20, 3)
    np.testing.assert_array_equal(both["predictions_constant_data"]["y_data"], np.zeros(3))


def test_a_mixture_of_fits_on_other_data_and_a_prediction_from_observed_values_are_refused():
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)

    def regression(slope):
        with pm.Model() as model:
            X = pm.Data("x", x)
            b = pm.Normal("b", 0, 5)
            y = pm.Normal("y", b * X, 1, observed=slope * x + rng.normal(size=30), shape=X.shape)
            pm.Deterministic("resid", y - b * X)
        return model

    first, other = (bnn_zoo.fit(regression(s), steps=300, progressbar=False) for s in (2.0, -3.0))
    with pytest.raises(ValueError, match="fits of one model on the same data: fit 1's"):
        sample([first, other], 100)
    again = bnn_zoo.fit(first.model, steps=300, random_seed=1, progressbar=False)
    assert sample([first, again], 100).attrs["draws_from"] == "2 fit(s)"
    with pytest.raises(ValueError, match="'resid' is computed from the observed values of 'y'"):
        predict(first, {"x": np.zeros(3)}, var_names=["resid"])
