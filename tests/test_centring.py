"""Learned centring (issue 54, 2): the rewrite is the same model at every lambda, and the fit learns it."""

import warnings

import numpy as np
import pymc as pm
import pytest

import bnn_zoo
from bnn_zoo.inference.families import centring
from tests.test_auto import _eight_schools_centred

SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _eight_schools_noncentred():
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        eps = pm.Normal("eps", 0, 1, shape=8)
        pm.Normal("y", mu + tau * eps, SIGMA, observed=y)
    return model


def test_the_rewrite_is_the_centred_model_at_1_and_the_non_centred_one_at_0():
    model = _eight_schools_centred()
    new, c = centring.reparametrise(model)
    assert c.names == ("theta",) and c.shapes == ((8,),) and c.containers == ("theta_centring",)
    assert [rv.name for rv in new.free_RVs] == ["mu", "tau", "theta_vip"] and new["theta"] in new.deterministics
    assert [rv.name for rv in model.free_RVs] == ["mu", "tau", "theta"]  # the model given is not changed
    rng = np.random.default_rng(0)
    point = {"mu": 1.3, "tau_log__": 0.7, "theta_vip": rng.normal(size=8)}
    centring.set_lambdas(new, c, np.ones(8))
    centred = model.compile_logp()({"mu": 1.3, "tau_log__": 0.7, "theta": point["theta_vip"]})
    assert new.compile_logp()(point) == pytest.approx(centred, rel=1e-12)
    centring.set_lambdas(new, c, np.zeros(8))
    non_centred = _eight_schools_noncentred().compile_logp()({"mu": 1.3, "tau_log__": 0.7, "eps": point["theta_vip"]})
    assert new.compile_logp()(point) == pytest.approx(non_centred, rel=1e-12)
    # Between the two it is the same model: theta = mu + tau^(1-lam) (theta_vip - lam mu), and the density of
    # theta_vip is theta's, times the Jacobian tau^(1-lam).
    centring.set_lambdas(new, c, np.full(8, 0.3))
    theta = 1.3 + np.exp(0.7) ** 0.7 * (point["theta_vip"] - 0.3 * 1.3)
    theta_of = new.compile_fn(new.replace_rvs_by_values([new["theta"]])[0], inputs=new.value_vars)
    np.testing.assert_allclose(theta_of(point), theta, rtol=1e-12)
    expected = model.compile_logp()({"mu": 1.3, "tau_log__": 0.7, "theta": theta}) + 8 * 0.7 * 0.7
    assert new.compile_logp()(point) == pytest.approx(expected, rel=1e-12)


def test_candidates_are_location_scale_variables_with_a_random_loc_or_scale():
    with pm.Model() as model:
        s = pm.HalfNormal("s", 1)
        m = pm.Normal("m", 0, 1)
        pm.StudentT("t", nu=4, mu=m, sigma=1, shape=3)
        pm.Laplace("l", 0, s)
        pm.Normal("fixed", 0, 2)
        pm.LogNormal("ln", m, 1)  # not location-scale in its own space
    assert centring.candidates(model) == ("t", "l")
    with pytest.raises(ValueError, match=r"^centring cannot rewrite 'fixed': .* this model's are: t, l$"):
        centring.reparametrise(model, ["fixed"])


def test_fit_learns_the_non_centred_form_of_eight_schools():
    model = _eight_schools_centred()
    with warnings.catch_warnings():
        warnings.simplefilter("error", bnn_zoo.ConvergenceWarning)
        result = bnn_zoo.fit(model, method=bnn_zoo.MeanField(centring=True), progressbar=False)
    lam = np.asarray(result.config["centring"]["theta"])
    assert lam.shape == (8,) and lam.max() < 0.3  # weakly informed groups: nearly non-centred
    assert result.config["centring"] and "centring logits adam" in result.config["optimizer"]
    np.testing.assert_allclose(result.model["theta_centring"].get_value(), lam, rtol=1e-6)
    idata = bnn_zoo.sample(result, 8000)
    tau = idata["posterior"]["tau"].values
    assert idata.attrs["q_pareto_k"] < 0.7 and abs(tau.mean() - 3.64) < 0.2 * 3.26  # NUTS: 3.64, sd 3.26
    assert abs(float(bnn_zoo.reweighted(idata)["tau"].sel(stat="mean")) - 3.64) < 0.1 * 3.26
    plain = bnn_zoo.fit(model, progressbar=False)
    assert result.elbo_final > plain.elbo_final + 0.5  # the form q fits better, by the bound itself


def test_centring_refuses_what_it_cannot_do():
    model = _eight_schools_centred()
    for method, kwargs, message in (
            (bnn_zoo.MeanField(centring=True), dict(batch_size=4), "centring learns each lambda on the full data"),
            (bnn_zoo.FullRank(centring=("mu",)), {}, "centring cannot rewrite 'mu'"),
    ):
        with pytest.raises(ValueError, match=message):
            bnn_zoo.fit(model, method=method, **kwargs)
    with pytest.raises(ValueError, match=r"the model has no location-scale variable whose loc or scale is "
                                         r"random \(a hierarchy written non-centred has none"):
        bnn_zoo.fit(_eight_schools_noncentred(), method=bnn_zoo.MeanField(centring=True))
    with pytest.raises(ValueError, match="fit_many does not fit learned centring"):
        bnn_zoo.fit_many([model], method=bnn_zoo.LowRank(centring=True))
    with pytest.raises(ValueError, match="MeanField's centring must be True, False or variable names, got 'theta'"):
        bnn_zoo.MeanField(centring="theta")


def test_a_model_with_initial_values_is_rewritten_and_keeps_them():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1, initval=0.5)
        tau = pm.HalfNormal("tau", 1)
        pm.Normal("x", mu, tau, shape=3, initval=np.zeros(3))
    assert centring.candidates(model) == ("x",)
    new, c = centring.reparametrise(model)
    assert c.names == ("x",) and float(new.rvs_to_initial_values[new["mu"]]) == 0.5
    assert float(model.rvs_to_initial_values[model["mu"]]) == 0.5  # the model given keeps its own
    assert new.initial_point()["mu"] == 0.5


def test_a_scalar_variable_gets_a_scalar_lambda_and_a_scalar_container_is_never_cut():
    """b ~ Normal(a**2, 0.5) is a scalar candidate: its lambda lives in a scalar data container, which compiles,
    and which a minibatch cannot cut."""
    with pm.Model() as model:
        a = pm.Normal("a", 0, 1)
        pm.Normal("b", a**2, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bnn_zoo.fit(model, method=bnn_zoo.FullRank(centring=True), steps=2_000, progressbar=False)
    assert np.ndim(result.config["centring"]["b"]) == 0 or len(result.config["centring"]["b"]) == 1
    with pm.Model() as scalar:
        x = pm.Data("x", np.arange(10.0))
        scale = pm.Data("scale", 2.0)
        pm.Normal("y", pm.Normal("m", 0, 1) * x, scale, observed=np.arange(10.0), shape=x.shape)
    with pytest.raises(ValueError, match="data container 'scale' is a scalar, with no rows to cut"):
        bnn_zoo.fit(scalar, batch_size=5, steps=10, progressbar=False)
