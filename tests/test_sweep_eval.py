"""A sweep task's device program: batched over fits, it gives what the library gives one fit at a time
(q's ELBO per restart, draws, ArviZ's PSIS-LOO, the test metrics), and compiles once per shape."""

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from bnn_zoo.evaluation.metrics import all_metrics, log_predictive
from bnn_zoo.experiments.sweep import command as sweep, fits as sweep_fits, spec as sweep_spec
from bnn_zoo.experiments.sweep import evaluation as sweep_eval
from bnn_zoo.experiments.toy import priors as toy
from bnn_zoo.inference.diagnostics import psis
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.advi.batch import posterior_mean
from bnn_zoo.inference.posterior.draws import evaluate_draws
from bnn_zoo.inference.posterior.restarts import q_elbo


def _arviz_loo(log_lik, log_p, log_q):
    tree = xr.DataTree.from_dict({
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik[None])}),
        "sample_stats": xr.Dataset({"log_p": (("chain", "draw"), log_p[None]),
                                    "log_q": (("chain", "draw"), log_q[None])})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k warnings
        return az.loo_approximate_posterior(tree, log_p=log_p, log_q=log_q, var_name="y")


def test_psis_mapped_over_fits_is_arviz_on_each_fit():
    """psis.pointwise vmapped over 3 fits of 400 draws (light to heavy tails): ArviZ's numbers per fit."""
    rng = np.random.default_rng(5)
    S = 400
    log_lik = np.stack([np.column_stack([rng.normal(-1, 0.3 * (f + 1), S), -np.abs(rng.standard_t(1.5, S)),
                                         -rng.exponential(2 + 3 * f, S)]) for f in range(3)])
    log_q = rng.normal(0, 1, (3, S))
    log_p = log_q + rng.normal(0, 0.2, (3, S))
    elpd_i, k, p_loo_i, flat = jax.jit(jax.vmap(psis.pointwise))(log_lik, log_p, log_q)
    assert not np.any(flat)
    ks = []
    for f in range(3):
        ref = _arviz_loo(log_lik[f], log_p[f], log_q[f])
        np.testing.assert_allclose(k[f], ref.pareto_k.values, rtol=1e-10)
        np.testing.assert_allclose(elpd_i[f], ref.elpd_i.values, rtol=1e-10)
        assert float(np.sum(p_loo_i[f])) == pytest.approx(ref.p, rel=1e-10)
        ks.append(ref.pareto_k.values)
    assert np.max(ks) > 0.7 and np.min(ks) < 0.5  # the tails differ enough to matter


@pytest.mark.parametrize("factor", ["diagonal", "cholesky", "lowrank"])
def test_draws_in_jax_are_numpys(factor):
    """gaussians.transform with jax.numpy, vmapped over stacked q's, gives gaussians.sample's draws."""
    rng = np.random.default_rng(1)
    dim, fits = 6, 3
    mu = rng.normal(size=(fits, dim))
    if factor == "diagonal":
        factors = np.exp(rng.normal(size=(fits, dim)))
    elif factor == "cholesky":
        factors = np.tril(rng.normal(size=(fits, dim, dim))) + 3 * np.eye(dim)
    else:
        each = [gaussians.LowRank.from_factor(np.exp(rng.normal(size=dim)), rng.normal(size=(dim, 2)))
                for _ in range(fits)]
        factors = gaussians.LowRank(*(np.stack(parts) for parts in zip(*each)))
    eps = sweep_eval.noise([3, 4, 5], 50, dim)
    z, log_q = jax.vmap(lambda m, f, e: gaussians.transform(m, f, e, jnp))(mu, factors, eps)
    for f, seed in enumerate([3, 4, 5]):
        one = jax.tree_util.tree_map(lambda a: a[f], factors)
        z_ref, log_q_ref = gaussians.sample(mu[f], one, 50, np.random.default_rng(seed))
        np.testing.assert_allclose(z[f], z_ref, rtol=1e-12)
        np.testing.assert_allclose(log_q[f], log_q_ref, rtol=1e-12)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Two fits (two seeds) of 2 restarts each, run to the end: the restarts are picked by q's ELBO."""
    args = sweep.build_parser().parse_args(
        ["--out", str(tmp_path_factory.mktemp("unused")), "--steps", "200", "--n-test", "300", "--draws", "60",
         "--restarts", "2", "--pick-at", "0", "--seeds", "2", "--priors", "laplace", "--noise", "0.3"])
    cfgs = sweep_spec.specs(args)
    splits = [toy.data(c) for c in cfgs]
    return cfgs, splits, sweep_fits.Batch(cfgs, [(s.X_train, s.y_train) for s in splits])


def test_a_tasks_scores_are_the_one_at_a_time_pipelines(batch):
    """Every fit's record fields from the one device program equal the library's one fit at a time:
    q_elbo per restart, the picked q's draws, evaluate_draws, ArviZ's PSIS-LOO, posterior_mean and
    all_metrics."""
    cfgs, splits, b = batch
    assert b.late_pick
    observed = b.model.observed_RVs[0].name
    rows = [b.candidates(i) for i in range(len(cfgs))]
    timing = sweep_eval.Timing()
    out = sweep_eval.score(b.density, observed, b.qs(rows), tuple(np.stack(p) for p in zip(*b.trains)),
                           tuple(np.stack(p) for p in zip(*[b.data(s.X_test, s.y_test, c) for s, c in zip(splits, cfgs)])),
                           np.stack([s.y_test for s in splits]), [c.seed for c in cfgs], cfgs[0].draws, True, timing)
    assert timing.compile > 0 and timing.run > 0
    for i, (cfg, split) in enumerate(zip(cfgs, splits)):
        qs = [b.family.mean_and_factor(b.params(r)) for r in rows[i]]
        elbos = [q_elbo(b.density, q, b.trains[i], seed=cfg.seed)[0] for q in qs]
        np.testing.assert_allclose(out["elbos"][i], elbos, rtol=1e-10)
        k = int(np.argmax(elbos))
        assert out["picked"][i] == k
        z, log_q = gaussians.sample(*qs[k], cfg.draws, np.random.default_rng(cfg.seed))
        values = evaluate_draws(b.density, z, b.trains[i], ("logp", f"loglik:{observed}"))
        ref = _arviz_loo(values[f"loglik:{observed}"], values["logp"], log_q)
        proba = posterior_mean(b.density, z, b.data(split.X_test, split.y_test, cfg), "p")
        lppd = log_predictive(proba, split.y_test)
        got = sweep_fits.scores({name: v[i] for name, v in out.items()})
        expected = {**all_metrics(proba, split.y_test), "elpd_test": lppd.sum(),
                    "elpd_loo": ref.elpd, "elpd_loo_se": ref.se, "p_loo": ref.p,
                    "pareto_k_max": ref.pareto_k.values.max(), "pareto_k_bad_share": np.mean(ref.pareto_k.values > 0.7),
                    "elbo_q": np.mean(values["logp"] - log_q)}
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-9, atol=1e-12, err_msg=name)


def test_a_program_compiles_once_per_shape(batch):
    """A second task of the same shape reuses the compiled program."""
    cfgs, splits, b = batch
    one = [b.candidates(0)]
    args = (b.density, b.model.observed_RVs[0].name, b.qs(one), tuple(np.stack([a]) for a in b.trains[0]),
            tuple(np.stack([a]) for a in b.data(splits[0].X_test, splits[0].y_test, cfgs[0])), splits[0].y_test[None],
            [cfgs[0].seed], cfgs[0].draws, True)
    first, again = sweep_eval.Timing(), sweep_eval.Timing()
    a = sweep_eval.score(*args, first)
    c = sweep_eval.score(*args, again)
    assert first.compile > 0 and again.compile == 0
    np.testing.assert_array_equal(a["elpd_i"], c["elpd_i"])


def test_a_fit_whose_predictions_are_not_finite_has_no_test_metrics():
    """NaN probabilities (a q that diverged) give None, not a plausible-looking accuracy."""
    S, n = 30, 4
    out = {"log_p": np.zeros(S), "log_q": np.zeros(S), "flat": False, "elpd_i": np.full(n, -0.5),
           "p_loo_i": np.zeros(n), "pareto_k": np.zeros(n), "lppd_i": np.array([-0.1, np.nan, -0.2]),
           "accuracy": 0.5, "nll": np.nan, "brier": np.nan, "ece": np.nan}
    record = sweep_fits.scores(out)
    assert all(record[k] is None for k in ("accuracy", "nll", "brier", "ece", "elpd_test", "elpd_test_se"))
    assert record["elpd_loo"] == pytest.approx(-2.0) and record["elbo_q"] == 0.0


def test_score_refuses_too_few_draws_before_compiling(batch):
    cfgs, splits, b = batch
    with pytest.raises(ValueError, match="at least 25 draws, got 24"):
        sweep_eval.score(b.density, "y", b.qs([b.candidates(0)]), (), (), np.zeros((1, 3)), [0], 24, True)
