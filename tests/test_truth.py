"""A pass that means what it says (issue 60): each case a hostile user's pass found silently wrong or
unclear in ``auto``, ``q_pareto_k``, ``sample``, ``nuts`` and ``path_table``, as reproduced there."""

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pymc as pm
import pytest

import bnn_zoo
from bnn_zoo.inference.alternatives import handoff
from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.support import calls
from tests.conftest import command_env
from tests.test_auto import _eight_schools_centred as eight_schools_centred


def _mixture(mu: float) -> pm.Model:
    with pm.Model() as model:
        pm.NormalMixture("x", w=[0.5, 0.5], mu=[-mu, mu], sigma=1)
        pm.Normal("y", 0, 1)
    return model


@pytest.mark.parametrize("mu", [4, 8])
def test_a_q_that_holds_one_of_two_modes_does_not_pass(mu):
    """1. The posterior of x is 0 +- sqrt(1 + mu^2); every q here holds one mode, and k cannot see the other:
    the search from several starts finds it, every rung misses it, and auto says so."""
    with pytest.warns(qcheck.ApproximationWarning, match=r"the posterior has at least 2 separated modes .* no "
                                                         r"rung's q reaches them all"):
        result = bnn_zoo.fit(_mixture(mu), method="auto", progressbar=False)
    auto = result.config["auto"]
    assert not auto["passed"] and not result.config["importance_resampled"]
    assert len(auto["modes"]) == 2 and all(e["missed_modes"] == 1 for e in auto["path"] if "method" in e)
    with pytest.warns(qcheck.ApproximationWarning, match=r"what method='auto' returned when no rung passed: its "
                                                         r"q misses 1 of the 2 \(at least\) modes"):
        assert "importance_resampled" not in bnn_zoo.sample(result, 4000).attrs  # q's own, and said so
    other = bnn_zoo.fit(_mixture(mu), method="fullrank_advi", random_seed=1, progressbar=False)
    with pytest.warns(qcheck.ApproximationWarning, match="misses 1 of the 2"):  # in a mixture of fits too
        bnn_zoo.sample([result, other], 4000)


def test_a_minor_mode_away_from_the_initial_point_is_found():
    """1. Weights 0.1 and 0.9 at -5 and 5 (mean 4): PyMC's initial point sits in the heavy mode's basin, and
    starts jittered around it alone all end there (the Gaussian then passed, resampled, at 4.99). Starts
    from Stan's uniform(-2, 2) find the other; every rung misses it."""
    with pm.Model() as model:
        pm.Mixture("x", w=[0.1, 0.9], comp_dists=[pm.Normal.dist(-5, 1), pm.Normal.dist(5, 1)])
    with pytest.warns(qcheck.ApproximationWarning, match="separated modes"):
        result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("laplace", "gaussian")), steps=1500,
                             progressbar=False)
    modes = result.config["auto"]["modes"]
    assert len(modes) == 2 and not result.config["auto"]["passed"]
    share = np.exp(np.array([m["log_mass"] for m in modes]) - np.logaddexp.reduce([m["log_mass"] for m in modes]))
    np.testing.assert_allclose(sorted(share), [0.1, 0.9], atol=0.01)  # the Laplace masses of the two


def test_the_centring_rung_does_not_pass_over_modes_it_cannot_see():
    """1. rungs=("centring",) on a bimodal hierarchy: its q lives in the rewritten space, where the found
    modes are not placed; with two of them it cannot pass."""
    with pm.Model() as model:
        mu = pm.Mixture("mu", w=[0.5, 0.5], comp_dists=[pm.Normal.dist(-8, 1), pm.Normal.dist(8, 1)])
        pm.Normal("th", mu, 3)
    with pytest.warns(qcheck.ApproximationWarning, match="separated modes"):
        result = bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("centring",)), steps=3000, progressbar=False)
    assert not result.config["auto"]["passed"] and result.config["auto"]["path"][-1]["missed_modes"] == 1


def _neal_funnel() -> pm.Model:
    with pm.Model() as model:
        v = pm.Normal("v", 0, 3)
        pm.Normal("x", 0, pm.math.exp(v / 2), shape=9)
    return model


def test_a_funnel_at_few_steps_passes_only_with_accurate_draws():
    """2. After 3,000 steps full rank's k on 8,000 draws sat at 0.65-0.68 and passed with v -2.69 +- 0.69
    (the posterior: 0 +- 3). Near 0.7 the test looks at more draws."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qcheck.ApproximationWarning)
        result = bnn_zoo.fit(_neal_funnel(), method="auto", steps=3000, progressbar=False)
        idata = bnn_zoo.sample(result, 4000)
    gaussian = next(e for e in result.config["auto"]["path"] if e["rung"] == "gaussian")
    assert gaussian["q_pareto_k_more"] is not None or gaussian["q_pareto_k"] > qcheck.K_WARN
    if result.config["auto"]["passed"]:
        v = idata["posterior"]["v"].values
        assert abs(v.mean()) < 0.5 and v.std() == pytest.approx(3, rel=0.2)


def _flat_sum() -> pm.Model:
    with pm.Model() as model:
        a, b = pm.Flat("a"), pm.Flat("b")
        pm.Normal("y", a + b, 1, observed=[1.0, 2.0, 1.5])
    return model


def _cauchy() -> pm.Model:
    with pm.Model() as model:
        pm.Cauchy("c", 0, 1)
    return model


def test_laplace_does_not_pass_a_cauchy():
    """3. Laplace's N(0, 1/2) for a Cauchy(0, 1): its ratios' tail is heavy, and on 8,000 draws k sits near
    0.7 (halves 0.69, 0.68 passed), while the next sample said 0.74. Over seeds, the rung never passes."""
    passed = []
    for seed in range(5):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", qcheck.ApproximationWarning)
            result = bnn_zoo.fit(_cauchy(), method=bnn_zoo.Auto(rungs=("laplace",)), random_seed=seed)
        passed.append(result.config["auto"]["passed"])
    assert not any(passed)


@pytest.mark.parametrize("build", [_flat_sum, _cauchy])
def test_a_pass_is_not_contradicted_by_the_next_sample(build):
    """3. An improper posterior and a Cauchy: no pass of auto's is followed by a sample whose k fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = bnn_zoo.fit(build(), method="auto", progressbar=False)
        idata = bnn_zoo.sample(result, 4000)
    if result.config["auto"]["passed"]:
        assert idata.attrs["q_pareto_k"] <= qcheck.K_WARN and "importance_resampled" in idata.attrs
    else:
        assert any("no rung passed its test" in str(w.message) for w in caught)
        assert "importance_resampled" not in idata.attrs


def test_a_verdict_rests_on_enough_draws():
    """4. A full-rank fit of the funnel (auto rejects it): 500 draws kept, k judged on 4,000, the warning
    given, and neither summary nor reweighted calls the draws reliable."""
    result = bnn_zoo.fit(_neal_funnel(), method="fullrank_advi", steps=3000, progressbar=False)
    with pytest.warns(qcheck.ApproximationWarning, match=r"q_pareto_k [0-9.]+ > 0\.7"):
        idata = bnn_zoo.sample(result)
    assert idata["posterior"]["v"].shape == (1, 500) and idata.attrs["q_pareto_k_draws"] == qcheck.VERDICT_DRAWS
    assert "passes" not in result.summary(idata)
    with pytest.raises(ValueError, match=r"^q fails \(q_pareto_k [0-9.]+ > 0\.7\): the reweighted estimates are "
                                         r"not reliable either"):
        bnn_zoo.reweighted(idata)
    # a DataTree whose k came from fewer draws says so, and reweighted refuses it
    few = idata.copy()
    few.attrs.update(q_pareto_k=0.52, q_pareto_k_draws=500)
    assert "too few draws to judge (q_pareto_k 0.52 from 500 draws; a verdict needs 4,000)" in result.summary(few)
    with pytest.raises(ValueError, match=r"too few draws to judge .* bnn_zoo\.sample\(result, 4000\)$"):
        bnn_zoo.reweighted(few)


def test_the_kept_draws_weights_sum_to_one_when_q_is_exact():
    """4. k judged on 4,000 draws, 500 kept: where q is the posterior to round-off (Laplace on a Gaussian
    posterior, k = -inf) the kept draws' equal weights still sum to one, and reweighted is their mean."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    with pm.Model() as model:
        b = pm.Normal("b", 0, 10)
        pm.Normal("y", b * x, 1, observed=2 * x + rng.normal(size=50))
    idata = bnn_zoo.sample(bnn_zoo.fit(model, method="laplace"), 500)
    assert idata.attrs["q_pareto_k"] == -np.inf and idata.attrs["q_pareto_k_draws"] == 4000
    assert np.exp(idata["sample_stats"]["psis_log_weight"].values).sum() == pytest.approx(1.0)
    drawn = idata["posterior"]["b"].values
    assert float(bnn_zoo.reweighted(idata)["b"].sel(stat="mean")) == pytest.approx(drawn.mean())


def test_nan_log_p_counts_as_zero_density():
    """5. y ~ N(0, a - 1.5): draws with a < 1.5 have log p NaN, not -inf; k was NaN without a word."""
    with pm.Model() as model:
        a = pm.Normal("a", 3, 1)
        pm.Normal("y", 0, a - 1.5, observed=[0.3, -0.2, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnn_zoo.ConvergenceWarning)
        result = bnn_zoo.fit(model, method=bnn_zoo.MeanField(init_std=3.0), steps=1, progressbar=False)
    with pytest.warns(qcheck.ApproximationWarning, match=r"puts mass where the posterior has none: \d+ of 4000 "
                                                         r"draws have log p = -inf or NaN"):
        idata = bnn_zoo.sample(result, 2000)
    log_p = idata["sample_stats"]["log_p"].values
    assert idata.attrs["q_pareto_k"] == np.inf and np.isnan(log_p).sum() > 0
    assert qcheck.zero_density(log_p) == np.isnan(log_p).sum() + np.isneginf(log_p).sum()


def test_sample_returns_the_draws_asked_for_when_the_pool_fails():
    """6. A fit marked importance-resampled whose pool's k fails (its data moved after the fit): n draws of
    q's own, not 4n."""
    with pm.Model() as model:
        y = pm.Data("y", np.zeros(20))
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("obs", mu, 1, observed=y, shape=y.shape)
    result = bnn_zoo.fit(model, method="laplace")
    pm.set_data({"y": np.full(20, 1.5)}, model=model)  # the posterior moves 6.7 of q's sds
    marked = dataclasses.replace(result, config=dict(result.config, importance_resampled=True))
    with pytest.warns(qcheck.ApproximationWarning):
        idata = bnn_zoo.sample(marked, 1000)
    assert idata["posterior"]["mu"].shape == (1, 1000) and "importance_resampled" not in idata.attrs
    assert idata["sample_stats"]["psis_log_weight"].shape == (1, 1000)


def _eight_schools_centred() -> pm.Model:
    """test_auto's centred eight schools, with a deterministic beside it."""
    model = eight_schools_centred()
    with model:
        pm.Deterministic("effect", model["theta"] - model["mu"], dims="school")
    return model


def test_nuts_returns_what_sample_returns():
    """7. After a learned-centring fit: the variables as written (theta beside theta_vip), the
    deterministics, log_likelihood, and loo on the draws as the posterior's."""
    fit = bnn_zoo.fit(_eight_schools_centred(), method=bnn_zoo.FullRank(centring=True), progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", handoff.SamplingWarning)
        idata = bnn_zoo.nuts(fit, 200, tune=100, chains=2)
    sampled = bnn_zoo.sample(fit, 200)
    assert set(sampled["posterior"].data_vars) == set(idata["posterior"].data_vars) >= {"theta", "theta_vip", "effect"}
    assert idata["posterior"]["theta"].shape == (2, 200, 8) and "log_likelihood" in idata.children
    theta, mu = idata["posterior"]["theta"].values, idata["posterior"]["mu"].values
    np.testing.assert_allclose(idata["posterior"]["effect"].values, theta - mu[..., None], rtol=1e-6, atol=1e-6)
    elpd = bnn_zoo.loo(idata)
    assert np.isfinite(elpd.elpd) and not elpd.approx_posterior


def test_nuts_says_when_its_draws_are_in_question():
    """8. Neal's funnel from a mean-field q, a short warm-up and a low target: divergences, in one line."""
    fit = bnn_zoo.fit(_neal_funnel(), steps=2000, progressbar=False)
    with pytest.warns(handoff.SamplingWarning, match=r"^bnn_zoo\.nuts: [1-9]\d* of 400 transitions after the "
                                                     r"warm-up diverged \(try target_accept"):
        idata = bnn_zoo.nuts(fit, 200, tune=50, chains=2, target_accept=0.6)
    assert idata.attrs["divergences"] == int(idata["sample_stats"]["diverging"].sum()) > 0
    with pytest.warns(handoff.SamplingWarning, match=r"^bnn_zoo\.nuts: r-hat was not computed, so nothing checks "
                                                     r"that the chains agree \(it needs chains=2 or more"):
        one = bnn_zoo.nuts(bnn_zoo.fit(_mixture(4), method="laplace"), 50, tune=50, chains=1)
    assert np.isnan(one.attrs["rhat_max"])


def test_a_ctrl_c_that_a_callback_swallows_still_ends_the_call():
    """9. An interrupt that arrives while a garbage-collector callback runs (as JAX's ``_xla_gc_callback``
    does) would be raised there and dropped ("Exception ignored in ..."): it is noted instead, and ends
    the call at the engine's next check, in one KeyboardInterrupt."""
    import gc

    ran_on, fired = [], []

    def callback(phase, info):  # a collector callback that is running when the signal comes
        if phase == "start" and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs between these bytecodes, inside the callback
                pass

    @calls.interruptible
    def fitting():
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        ran_on.append(True)
        calls.interrupted()  # the engine's check between chunks
        ran_on.append(False)  # never reached

    with pytest.raises(KeyboardInterrupt):
        fitting()
    assert fired and ran_on == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    calls.interrupted()  # the next call starts clean


def test_a_ctrl_c_ends_a_library_fit_in_one_keyboard_interrupt(tmp_path):
    """9. A user's script, no guard of its own: SIGINT while it fits ends it with one KeyboardInterrupt."""
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, pymc as pm, bnn_zoo
        with pm.Model() as model:
            w = pm.Normal("w", 0, 1, shape=50)
            pm.Normal("y", w.sum(), 1, observed=np.zeros(20))
        print("fitting", flush=True)
        bnn_zoo.fit(model, method="fullrank_advi", steps=200_000, progressbar=False)
        print("finished", flush=True)
    """))
    for delay in (0.2, 1.0, 3.0):  # in the engine's import, its compilation, the fit
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=command_env(), cwd=tmp_path)
        assert proc.stdout.readline().strip() == "fitting"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode != 0 and "finished" not in out, (delay, err)
        assert err.splitlines().count("KeyboardInterrupt") == 1 and "Exception ignored" not in err, err


def test_the_advice_names_what_was_not_done():
    """10. After FullRank(centring=True), not centring again; on a model without a hierarchy, no centring."""
    fit = bnn_zoo.fit(_neal_funnel(), method=bnn_zoo.FullRank(centring=True), steps=300, progressbar=False)
    with pytest.warns(qcheck.ApproximationWarning) as caught:
        bnn_zoo.sample(fit, 4000)
    assert "centring" not in str(caught[-1].message) and "method='flow'" in str(caught[-1].message)
    with pm.Model() as flat:
        pm.Normal("w", 0, 1, shape=2)
        pm.StudentT("t", nu=1.5, mu=0, sigma=1)
    plain = bnn_zoo.fit(flat, method="fullrank_advi", steps=2000, progressbar=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bnn_zoo.sample(plain, 4000)
    assert not any("centring" in str(w.message) for w in caught)
    assert qcheck.next_step("fullrank_advi", hierarchy=True).startswith("method=bnn_zoo.FullRank(centring=True)")


def test_path_table_shows_the_k_the_rule_reads():
    """12. One k per rung: the table's column, the warning's ranking and the returned rung agree."""
    with pytest.warns(qcheck.ApproximationWarning) as caught:
        result = bnn_zoo.fit(_neal_funnel(), method=bnn_zoo.Auto(rungs=("laplace", "gaussian")), steps=3000,
                             progressbar=False)
    path, auto = result.config["auto"]["path"], result.config["auto"]
    rows = bnn_zoo.path_table(result).splitlines()
    assert rows[0].split()[2] == "q_pareto_k"
    for entry, row in zip(path, rows[1:]):
        assert row.split()[2] == f"{entry['q_pareto_k']:.2f}"
        assert entry["q_pareto_k"] >= max(entry["q_pareto_k_halves"] + [entry["q_pareto_k_first"]])
        assert f"q_pareto_k {entry['q_pareto_k']:.2f}" in str(caught[0].message)
    assert auto["returned"] == int(np.argmin([e["q_pareto_k"] for e in path])) and "<-" in rows[1 + auto["returned"]]
    # the fit's verdict travels with its draws: sample says it, whatever k its own draws give (a banana
    # whose auto failed at 0.78 had a sample at 0.61, silent)
    returned = path[auto["returned"]]
    with pytest.warns(qcheck.ApproximationWarning) as said:
        bnn_zoo.sample(result, 4000)
    assert any(f"no rung passed: its q failed its test (q_pareto_k {returned['q_pareto_k']:.2f} on "
               f"{returned['draws']:,} draws)" in str(w.message) for w in said)


def test_the_words_list_every_method():
    """13. fit's docstring knows the flow and auto's rungs; the progress bar names the method."""
    for word in ('"flow"', "Flow(layers=...)", "learned centring, a flow"):
        assert word in " ".join(bnn_zoo.fit.__doc__.split())
    from rich.progress import Progress

    from bnn_zoo.inference.advi.loop import fit_advi

    labels = []
    original = Progress.add_task

    def spy(self, description, *args, **kwargs):
        labels.append(description)
        return original(self, description, *args, **kwargs)

    Progress.add_task = spy
    try:
        model = _mixture(4)
        fit_advi(model, method="flow", steps=20, progressbar=True)
    finally:
        Progress.add_task = original
    assert labels == ["advi", "fullrank_advi", "flow"]  # full rank's mean-field start, full rank, the flow


def test_refusals_are_one_line():
    """14. Each a one-line refusal naming the way out, never an AttributeError or an empty message."""
    model = _mixture(4)
    with pytest.raises(ValueError, match=r"^Auto\(rungs=\('centring',\)\): the model has no location-scale "
                                         r"variable .* add 'gaussian' or 'flow'$"):
        bnn_zoo.fit(model, method=bnn_zoo.Auto(rungs=("centring",)))
    with pytest.raises(ValueError, match=r"^steps must be an integer in 1\.\.[0-9,]+, got -5$"):
        bnn_zoo.fit(model, method="flow", steps=-5)
    with pytest.raises(TypeError, match=r"^nuts takes a fit \(what bnn_zoo\.fit returns\), got str$"):
        bnn_zoo.nuts("not a result")
    with pytest.raises(TypeError, match=r"^fit takes a pymc\.Model, got NoneType$"):
        bnn_zoo.fit(None)
    with pytest.raises(TypeError, match=r"^takes a fit \(what bnn_zoo\.fit returns\) or a list of fits of one "
                                        r"model, got str$"):
        bnn_zoo.sample("not a result")
    with pytest.raises(ValueError, match=r"^path_table takes what bnn_zoo\.fit\(model, method='auto'\) "
                                         r"returned, got NoneType$"):
        bnn_zoo.path_table(None)
    with pytest.raises(ValueError, match="budget must be a positive number of seconds or None, got True"):
        bnn_zoo.Auto(budget=True)
    spec = bnn_zoo.Auto(rungs=["laplace", "gaussian"])
    assert spec.rungs == ("laplace", "gaussian") and hash(spec) == hash(bnn_zoo.Auto(rungs=("laplace", "gaussian")))
    fit = bnn_zoo.fit(model, method="laplace")
    with pytest.raises(ValueError, match="need an integer number of draws"):
        bnn_zoo.sample(fit, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", handoff.SamplingWarning)  # one chain: no r-hat, said
        idata = bnn_zoo.nuts(fit, 20, tune=20, chains=1, target_accept=np.float32(0.8))  # a NumPy float
    assert idata["posterior"]["x"].shape == (1, 20)


@pytest.mark.parametrize("method", ["advi", "fullrank_advi", "flow"])
def test_a_convergence_warning_points_at_the_callers_line(method):
    """15. Not at the keyword-renaming wrapper (where full rank's mean-field start put it), nor anywhere else
    inside the library."""
    with pm.Model() as model:
        w = pm.Normal("w", 0, 1, shape=50)
        pm.Normal("y", w.sum(), 1, observed=np.zeros(20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bnn_zoo.fit(model, method=method, steps=300, progressbar=False)  # the ELBO still rising
    mine = [w for w in caught if issubclass(w.category, bnn_zoo.ConvergenceWarning)]
    assert mine and all(w.filename == __file__ for w in mine)
