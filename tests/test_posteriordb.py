"""The vendored posteriordb posteriors: their files, their PyMC translations and the log density of
each translation against the Stan program's model block written out in SciPy (no sampling)."""

import numpy as np
import pytensor.tensor as pt
import pytest
import scipy.stats as st
from scipy.special import logsumexp

from benchmarks import posteriordb as pdb
from benchmarks.posteriordb import validate

NAMES = list(pdb.POSTERIORS)


@pytest.fixture(scope="module", params=NAMES)
def built(request):
    return request.param, pdb.POSTERIORS[request.param]()


def test_each_model_has_the_references_variables_with_their_shapes_and_dims(built):
    name, model = built
    ref = pdb.reference(name)
    assert ref.sizes["chain"] == 10 and ref.sizes["draw"] == 100
    scored = {rv.name for rv in model.free_RVs} | {d.name for d in model.deterministics}
    for var in ref.data_vars:
        assert var in scored, f"{name}: the model lacks {var}"
        assert tuple(model[var].shape.eval()) == ref[var].shape[2:], f"{name}: {var}'s shape"
        assert tuple(model.named_vars_to_dims.get(var, ())) == ref[var].dims[2:], f"{name}: {var}'s dims"
    assert all(rv.type.dtype.startswith("float") for rv in model.free_RVs), "a free variable is discrete"


def test_each_file_has_finite_moments_that_the_thinned_draws_agree_with(built):
    name, _ = built
    ref = pdb.reference(name)
    for var, (mean, sd) in pdb.reference_moments(name).items():
        assert np.all(np.isfinite(mean)) and np.all(sd > 0), f"{name}: {var}"
        assert mean.shape == ref[var].shape[2:]
        thinned = ref[var].mean(("chain", "draw")).values
        assert np.all(np.abs(thinned - mean) < 0.15 * sd), f"{name}: {var}'s thinned draws stray from its mean"
    assert "posteriordb" in pdb.load(name)["source"]


def test_each_model_has_a_finite_log_density_and_gradient_at_its_initial_point(built):
    _, model = built
    point = model.initial_point()
    assert np.isfinite(model.compile_logp()(point))
    assert np.all(np.isfinite(model.compile_dlogp()(point)))


# --- the Stan model blocks, in SciPy, on the constrained scale (no Jacobian) -------------------------

def _eight_schools(d, p):
    theta = p["theta_trans"] * p["tau"] + p["mu"]
    return (st.norm.logpdf(p["theta_trans"]).sum() + st.norm.logpdf(d["y"], theta, d["sigma"]).sum()
            + st.norm.logpdf(p["mu"], 0, 5) + st.cauchy.logpdf(p["tau"], 0, 5))


def _ark(d, p):
    K, y = int(d["K"]), d["y"]
    lp = st.norm.logpdf(p["alpha"], 0, 10) + st.norm.logpdf(p["beta"], 0, 10).sum() + st.cauchy.logpdf(p["sigma"], 0, 2.5)
    for t in range(K, int(d["T"])):
        mu = p["alpha"] + sum(p["beta"][k] * y[t - k - 1] for k in range(K))
        lp += st.norm.logpdf(y[t], mu, p["sigma"])
    return lp


def _diamonds(d, p):
    Xc = d["X"][:, 1:] - d["X"][:, 1:].mean(0)
    return (st.norm.logpdf(p["b"], 0, 1).sum() + st.t.logpdf(p["Intercept"], 3, 8, 10)
            + st.t.logpdf(p["sigma"], 3, 0, 10) + st.norm.logpdf(d["Y"], p["Intercept"] + Xc @ p["b"], p["sigma"]).sum())


def _gp_cholesky(d, p):
    x = d["x"].astype(float)
    cov = p["alpha"] ** 2 * np.exp(-0.5 * (x[:, None] - x[None]) ** 2 / p["rho"] ** 2) + 1e-10 * np.eye(len(x))
    return np.linalg.cholesky(cov)


def _gp_pois_regr(d, p):
    f = _gp_cholesky(d, p) @ p["f_tilde"]
    return (st.gamma.logpdf(p["rho"], 25, scale=1 / 4) + st.norm.logpdf(p["alpha"], 0, 2)
            + st.norm.logpdf(p["f_tilde"]).sum() + st.poisson.logpmf(d["k"], np.exp(f)).sum())


def _kidscore(d, p):
    b, hs, iq = p["beta"], d["mom_hs"], d["mom_iq"]
    mean = b[0] + b[1] * hs + b[2] * iq + b[3] * hs * iq
    return st.cauchy.logpdf(p["sigma"], 0, 2.5) + st.norm.logpdf(d["kid_score"], mean, p["sigma"]).sum()


def _gauss_mix(d, p):
    mu, sigma, theta, y = p["mu"], p["sigma"], p["theta"], d["y"]
    mix = logsumexp([np.log(theta) + st.norm.logpdf(y, mu[0], sigma[0]),
                     np.log1p(-theta) + st.norm.logpdf(y, mu[1], sigma[1])], axis=0)
    return (st.norm.logpdf(sigma, 0, 2).sum() + st.norm.logpdf(mu, 0, 2).sum() + st.beta.logpdf(theta, 5, 5)
            + mix.sum())


STAN = {"eight_schools-eight_schools_noncentered": _eight_schools, "arK-arK": _ark, "diamonds-diamonds": _diamonds,
        "gp_pois_regr-gp_pois_regr": _gp_pois_regr, "kidiq-kidscore_interaction": _kidscore,
        "low_dim_gauss_mix-low_dim_gauss_mix": _gauss_mix}


def _free_values(name, d, draw):
    """The free variables' constrained values at one reference draw (non-centred ones solved for)."""
    p = dict(draw)
    if name.startswith("eight_schools"):
        p["theta_trans"] = (p.pop("theta") - p["mu"]) / p["tau"]
    if name.startswith("gp_pois_regr"):
        p["f_tilde"] = np.linalg.solve(_gp_cholesky(d, p), p.pop("f"))
    return p


def _value_point(model, values):
    """The model's value-variable point (transformed where the model transforms) of constrained values."""
    point = {}
    for rv in model.free_RVs:
        value, transform = np.asarray(values[rv.name], float), model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(pt.as_tensor(value), *rv.owner.inputs).eval()
        point[model.rvs_to_values[rv].name] = value
    return point


def test_each_models_log_density_is_the_stan_programs_up_to_a_constant(built):
    """At five reference draws, PyMC's log density (no Jacobian) minus the Stan model block's is
    one constant, log 2 per scalar of a half distribution (Stan's truncated priors leave out the
    factor 2 of their normalisation)."""
    name, model = built
    d, ref = pdb.stan_data(name), pdb.reference(name)
    logp = model.compile_logp(jacobian=False)
    gaps, scale = [], 1.0
    for chain, draw in [(0, 0), (2, 17), (4, 33), (7, 61), (9, 99)]:
        values = _free_values(name, d, {v: ref[v].values[chain, draw] for v in ref.data_vars})
        stan = STAN[name](d, values)
        gaps.append(logp(_value_point(model, values)) - stan)
        scale = max(scale, abs(stan))
    assert np.ptp(gaps) < 1e-8 * scale, f"{name}: log density gaps {gaps}"
    start = model.initial_point()
    halves = sum(np.size(start[model.rvs_to_values[rv].name]) for rv in model.free_RVs
                 if rv.owner.op.name.startswith("half"))
    assert abs(np.mean(gaps) - halves * np.log(2)) < 1e-5, f"{name}: log density gaps {gaps}"


def test_validation_scores_mean_errors_in_reference_sds():
    rng = np.random.default_rng(0)
    draws = {"a": rng.normal(1.0, 2.0, (4, 4000)), "b": rng.normal(0.0, 1.0, (4, 4000, 3))}
    moments = {"a": (np.array(0.0), np.array(2.0)), "b": (np.zeros(3), np.array([1.0, 1.0, 2.0]))}
    out = validate.compare(draws, moments)
    assert out["worst"] == "a" and abs(out["max_mean_error"] - 0.5) < 0.05 and not out["passed"]
    assert abs(out["sd_ratio_min"] - 0.5) < 0.03
    draws["a"] -= 1.0
    out = validate.compare(draws, {**moments, "b": (np.zeros(3), np.ones(3))})
    assert out["passed"]


def test_validation_refuses_an_unknown_posterior_with_exit_code_2(capsys):
    assert validate.main(["--posteriors", "eight_schools-eight_schools_noncentered,nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err
