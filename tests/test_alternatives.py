"""The alternatives to ADVI: each method against an exact posterior, and the benchmark command."""

import shutil

import numpy as np
import pandas as pd
import pytest

import bnn_zoo
from bnn_zoo.data import mnist as mnist_data
from bnn_zoo.data import regression, shift, toy
from bnn_zoo.evaluation import metrics
from bnn_zoo.experiments.alternatives import command as bench
from bnn_zoo.experiments.alternatives import cases as alternatives_cases
from bnn_zoo.experiments.harness import resources
from bnn_zoo.inference.alternatives import baselines as alt
from bnn_zoo.inference.alternatives import iterates
from bnn_zoo.inference.alternatives import dropout
from bnn_zoo.models.linear import correlated_design, linear_posterior, linear_regression


@pytest.fixture(scope="module")
def conjugate():
    X, y = correlated_design()
    return linear_regression(X, y), linear_posterior(X, y)


def _w(tree):
    return tree["posterior"]["w"].values.reshape(-1, 5)


def test_map_and_ensemble_members_are_the_exact_posterior_mode(conjugate):
    model, exact = conjugate
    tree = alt.ensemble(model, 3, steps=3000, lr=0.05)
    w = _w(tree)
    assert w.shape == (3, 5) and tree.attrs["method"] == "ensemble"
    # A Gaussian posterior's mode is its mean; every member finds it.
    np.testing.assert_allclose(w, np.broadcast_to(exact.mean, w.shape), atol=1e-3 * exact.sd.min())


def test_sgld_samples_the_conjugate_posterior(conjugate):
    model, exact = conjugate
    w = _w(alt.sgld(model, steps=200_000, lr=0.1, thin=20))
    assert len(w) == 5000
    # Seeds 0-2 gave mean errors up to 0.07 sd, sds within 4%, correlations within 0.07.
    assert np.all(np.abs(w.mean(0) - exact.mean) < 0.2 * exact.sd)
    np.testing.assert_allclose(w.std(0), exact.sd, rtol=0.1)
    corr = np.corrcoef(w.T)
    assert np.abs(corr - exact.corr).max() < 0.1


def test_cyclical_sgld_keeps_draws_only_in_sampling_stages():
    keep = iterates.sampling_steps(1000, burn_in=0, thin=10, cycles=4, explore=0.5)
    position = ((keep - 1) % 250) / 250
    assert len(keep) == 4 * 13 and np.all(position >= 0.5)  # after steps 130, 140, .., 250 of each cycle
    schedule = iterates.cyclical_schedule(0.2, 1000, 4, 0.5)
    lr, noisy = schedule(np.int32(250))  # a cycle's first step: the largest step, no noise
    assert float(lr) == pytest.approx(0.2) and not bool(noisy)
    assert bool(schedule(np.int32(200))[1]) and float(schedule(np.int32(249))[0]) < 1e-4


def test_swag_moments_and_draws_follow_maddox_et_al():
    rng = np.random.default_rng(0)
    iterates_z = rng.normal(size=(30, 4)) * [1.0, 2.0, 0.5, 1.0] + [1, 2, 3, 4]
    m = iterates.swag_init(4)
    for z in iterates_z:
        m = iterates.swag_collect(m, z, rank=10)
    np.testing.assert_allclose(m.mean, iterates_z.mean(0))
    np.testing.assert_allclose(m.sq_mean - m.mean**2, iterates_z.var(0))
    assert m.deviations.shape == (10, 4) and m.count == 30
    draws = iterates.swag_draws(m, 200_000, seed=1)
    expected = 0.5 * np.diag(iterates_z.var(0)) + 0.5 * m.deviations.T @ m.deviations / 9
    np.testing.assert_allclose(np.cov(draws.T), expected, atol=0.03)
    np.testing.assert_allclose(draws.mean(0), m.mean, atol=0.02)


def test_swag_is_centred_at_the_map_and_spreads_with_minibatch_noise(conjugate):
    model, exact = conjugate
    tree = alt.swag(model, map_steps=3000, map_lr=0.05, steps=4000, lr=0.05, batch_size=20, collect_every=20,
                    draws=2000)
    w = _w(tree)
    assert np.all(np.abs(w.mean(0) - exact.mean) < 0.5 * exact.sd)
    assert np.all(w.std(0) > 0)


def test_nuts_matches_the_conjugate_posterior_and_reports_its_diagnostics(conjugate):
    model, exact = conjugate
    tree = alt.pymc_nuts(model, draws=300, tune=300, chains=2)
    w = _w(tree)
    assert np.all(np.abs(w.mean(0) - exact.mean) < 0.25 * exact.sd)
    np.testing.assert_allclose(w.std(0), exact.sd, rtol=0.2)
    assert tree.attrs["divergences"] == 0 and "diverging" in tree["sample_stats"]


def test_every_posterior_predicts_through_bnn_zoo_predict(conjugate):
    model, exact = conjugate
    X_new = np.eye(5)
    tree = alt.map_point(model, steps=3000, lr=0.05)
    mu = bnn_zoo.predict(model, {"X": X_new}, idata=tree, var_names=["y_obs"])["predictions"]["y_obs"]
    assert mu.shape == (1, 1, 5)


def test_mc_dropout_shares_one_mask_per_draw_and_fits_moons():
    split = toy.load("moons", n_train=300, n_test=300, noise=0.2, seed=0)
    net = dropout.fit_dropout(split.X_train, split.y_train, kind="classifier", hidden=(5, 5), steps=3000, lr=0.02)
    same = np.repeat(split.X_test[:1], 3, axis=0)
    p = dropout.predict_dropout(net, same, draws=50)["predictions"]["p"].values[0]
    assert p.shape == (50, 3, 2)
    np.testing.assert_array_equal(p[:, 0], p[:, 1])  # one network per draw
    assert p[:, 0, 1].std() > 0  # the masks differ between draws
    proba = dropout.predict_dropout(net, split.X_test, draws=100)["predictions"]["p"].values[0]
    assert metrics.accuracy(proba, split.y_test) > 0.9
    with pytest.raises(ValueError, match="rate"):
        dropout.fit_dropout(split.X_train, split.y_train, kind="classifier", rate=1.0)


def test_ood_metrics():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(0.7, 1, size=200)
    b[:20] = a[:20]  # ties
    expected = roc_auc_score(np.r_[np.zeros(300), np.ones(200)], np.r_[a, b])
    assert metrics.auroc(a, b) == pytest.approx(expected)
    same = np.tile(rng.dirichlet(np.ones(4), size=10)[None], (5, 1, 1))
    np.testing.assert_allclose(metrics.mutual_information(same), 0, atol=1e-12)
    spread = np.stack([np.eye(4)[[0] * 10], np.eye(4)[[1] * 10]])  # two confident draws that disagree
    np.testing.assert_allclose(metrics.mutual_information(spread), np.log(2), atol=1e-6)
    np.testing.assert_allclose(metrics.predictive_entropy(np.full((2, 3, 4), 0.25)), np.log(4))


def test_rotations_and_ood_images():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(3, 28, 28)).astype("float32")
    np.testing.assert_array_equal(shift.rotate(x, 0), x)
    np.testing.assert_allclose(shift.rotate(shift.rotate(x, 90), 270), x, atol=1e-6)
    assert not np.allclose(shift.rotate(x, 45), x)
    sets = shift.ood_sets(x, rng, n_noise=7)
    assert sets["permuted"].shape == x.shape and sets["uniform"].shape == (7, 28, 28)
    np.testing.assert_allclose(np.sort(sets["permuted"].ravel()), np.sort(x.ravel()))
    assert sets["gaussian"].min() >= x.min() and sets["gaussian"].max() <= x.max()


def test_regression_gap_has_no_data_and_is_masked():
    task = regression.load("sine", gap=regression.GAP)
    assert not np.any((task.x_train > -1) & (task.x_train < 1))
    assert not np.any((task.x_test > -1) & (task.x_test < 1))
    assert task.in_gap.any() and not np.any(task.in_gap & task.in_range)
    np.testing.assert_array_equal(regression.load("sine").x_train, regression.load("sine", gap=None).x_train)
    with pytest.raises(ValueError, match="gap"):
        regression.load("sine", gap=(2.0, 4.0))


# --- the command --------------------------------------------------------------------


def test_toy_benchmark_compares_every_method_with_nuts(tmp_path, capsys):
    out, fig = tmp_path / "out", tmp_path / "fig"
    argv = ["toy", "--quick", "--processes", "0", "--out", str(out), "--figures", str(fig)]
    assert bench.main(argv) == 0
    table = pd.read_csv(out / "toy-moons-s0-quick.csv", index_col="method")
    assert list(table.index) == list(alternatives_cases.METHODS)
    assert table.loc["nuts", "dp_grid_mean"] == 0 and table.loc["nuts", "sd_ratio_grid"] == 1
    assert (table.drop("nuts")["dp_grid_mean"] > 0).all()
    assert table["accuracy"].between(0.5, 1).all()
    # memory at three points of each method's run, each a running peak: in order, and the fit's own
    assert (table["rss_before_mb"] > 0).all()
    assert (table["rss_before_mb"] <= table["fit_peak_rss_mb"]).all()
    assert (table["fit_peak_rss_mb"] <= table["peak_rss_mb"]).all()
    assert {"rhat_pred_max", "divergences", "seconds"} <= set(table.columns)
    assert (fig / "toy" / "toy-moons-s0-quick_maps.png").stat().st_size > 10_000
    stored = pd.read_parquet(out / "records" / "toy-moons-s0-quick-sgld.parquet")
    assert stored["method"].item() == "sgld"
    capsys.readouterr()
    assert bench.main([*argv, "--methods", "advi,sgld"]) == 0  # resumes: nothing refitted
    assert "sgld: done before" in capsys.readouterr().out
    # a record copied over another is set aside and its method fitted again
    records = out / "records"
    shutil.copyfile(records / "toy-moons-s0-quick-advi.parquet", records / "toy-moons-s0-quick-sgld.parquet")
    assert bench.main([*argv, "--methods", "advi,sgld"]) == 0
    printed = capsys.readouterr()
    assert "record toy-moons-s0-quick-sgld is damaged (it holds the record of toy-moons-s0-quick-advi)" in printed.err
    assert "advi: done before" in printed.out and "sgld: done before" not in printed.out
    assert pd.read_parquet(records / "toy-moons-s0-quick-sgld.parquet")["method"].item() == "sgld"


def test_a_spawned_method_reports_its_own_peak_memory_not_its_parents():
    """Each method runs in a spawned process for memory of its own: Linux's ru_maxrss would carry
    this process's peak (400 MB and more here) into it; the benchmark's reading does not."""
    import multiprocessing

    big = np.ones(50_000_000)  # 400 MB, touched
    del big
    parent = resources.peak_rss_mb()
    assert parent > 400
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        child = pool.apply(resources.peak_rss_mb)
    assert 0 < child < 200


def test_regression_benchmark_measures_the_gap(tmp_path):
    out = tmp_path / "out"
    assert bench.main(["regression", "--cases", "gap", "--quick", "--processes", "0", "--methods",
                       "nuts,advi,mc_dropout", "--out", str(out), "--figures", str(tmp_path / "fig")]) == 0
    table = pd.read_csv(out / "regression-gap-s0-quick.csv", index_col="method")
    assert {"sd_gap", "sd_ratio_gap", "coverage95_in", "rmse_in"} <= set(table.columns)
    assert table.loc["nuts", "sd_ratio_gap"] == pytest.approx(1)
    assert table["coverage95_in"].between(0, 1).all()


def test_mnist_benchmark_rotations_and_ood(monkeypatch, mnist_tiny_dir, tiny_checksums, tmp_path):
    monkeypatch.setattr(mnist_data, "CHECKSUMS", tiny_checksums)
    shutil.copytree(mnist_tiny_dir, tmp_path / "mnist")
    out = tmp_path / "out"
    assert bench.main(["mnist", "--quick", "--processes", "0", "--epochs", "1", "--data-dir", str(tmp_path / "mnist"),
                       "--methods", "advi,ensemble,mc_dropout,swag,csgld", "--out", str(out),
                       "--figures", str(tmp_path / "fig")]) == 0
    table = pd.read_csv(out / "mnist-mlp2x400-s0-quick.csv", index_col="method")
    aurocs = table.filter(like="auroc_")
    assert aurocs.shape == (5, 6) and ((aurocs >= 0) & (aurocs <= 1)).all().all()
    curves = pd.read_csv(out / "mnist-mlp2x400-s0-quick_shift.csv")
    assert sorted(set(curves["angle"])) == list(range(0, 181, 15)) and curves["ece"].notna().all()
    assert len(curves) == 5 * 13
    assert (tmp_path / "fig" / "mnist" / "mnist-mlp2x400-s0-quick_shift.png").is_file()


@pytest.mark.parametrize("argv, message", [
    (["toy", "--cases", "spirals"], "--cases: unknown spirals"),
    (["mnist", "--methods", "nuts"], "nuts do not run on mnist"),
    (["toy", "--noise", "-1"], "--noise"),
    (["spirals"], "argument benchmark: invalid choice: 'spirals'"),
    (["toy", "--methods", "hmc"], "argument --methods: unknown method hmc"),
    (["toy", "--processes", "2"], "argument --processes: invalid choice: 2"),
    (["toy", "--seed", "-1"], "argument --seed"),
    (["toy", "--noise", "high"], "argument --noise: invalid float value: 'high'"),
    (["toy", "--epochs", "3"], "--epochs sets the mnist benchmark, not toy"),
    (["regression", "--limit-train", "100"], "--limit-train sets the mnist benchmark, not regression"),
    (["mnist", "--cases", "mlp"], "--cases mlp: bnn-zoo alternatives mnist has one case"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, message):
    assert bench.main([*argv, "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "fig")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_unwritable_out_exits_2(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert bench.main(["toy", "--out", str(tmp_path / "file" / "x")]) == 2
    assert "--out" in capsys.readouterr().err
