"""The UCI regression benchmark: its data (checked against the shipped checksums), its model, its
scores, and ``bnn-zoo uci`` as a user runs it, resumed, on Dask, and refusing bad input."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bnn_zoo.data import uci
from bnn_zoo.experiments.uci import command as job
from bnn_zoo.experiments.uci import fits as uci_fits, table as uci_table
from tests.conftest import ROOT, command_env

#: A copy of the benchmark's yacht folder (tests/data/uci/README.md).
DATA = ROOT / "tests" / "data" / "uci"


def bnn_zoo_uci(*args, timeout=900):
    return subprocess.run(["bnn-zoo", "uci", *args], capture_output=True, text=True, env=command_env(),
                          timeout=timeout)


# --- the data ------------------------------------------------------------------------------------


def test_the_shipped_checksums_cover_every_file_of_each_data_set():
    sums = uci.checksums()
    for name, folder in uci.DATASETS.items():
        files = {p.split("/", 1)[1] for p in sums if p.startswith(folder + "/")}
        splits = 5 if name == "protein" else 20
        expected = {"data.txt", "index_features.txt", "index_target.txt", "n_splits.txt", "n_hidden.txt",
                    "n_epochs.txt", *(f"index_{part}_{k}.txt" for part in ("train", "test") for k in range(splits))}
        assert expected <= files, name
    # the copy under tests/ is the benchmark's own
    for path in (DATA / "yacht").iterdir():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[f"yacht/{path.name}"]


def test_a_split_is_standardised_on_its_training_part_and_keeps_the_published_rows():
    s = uci.load("yacht", 3, DATA)
    rows = np.loadtxt(DATA / "yacht" / "data.txt")
    train = np.loadtxt(DATA / "yacht" / "index_train_3.txt", dtype=int)
    test = np.loadtxt(DATA / "yacht" / "index_test_3.txt", dtype=int)
    assert len(s.y_train) == len(train) and len(s.y_test) == len(test) and not set(train) & set(test)
    np.testing.assert_allclose(s.X_train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(s.X_train.std(0), 1, atol=1e-12)
    assert abs(s.y_train.mean()) < 1e-12 and abs(s.y_train.std() - 1) < 1e-12
    np.testing.assert_allclose(s.y_test_original, rows[test, 6])  # yacht's target is column 6
    assert s.hidden == 50 and s.X_train.shape[1] == 6


@pytest.mark.parametrize("name, split, message", [
    ("yachts", 0, "unknown UCI data set 'yachts'; valid: boston, concrete"),
    ("yacht", 20, "yacht has splits 0..19, not 20"),
    ("yacht", -1, "yacht has splits 0..19, not -1"),
])
def test_load_refuses_an_unknown_data_set_or_split(name, split, message):
    with pytest.raises(uci.UCIError, match=message):
        uci.load(name, split, DATA)


def test_a_damaged_or_missing_file_is_refused_before_it_is_parsed(tmp_path):
    shutil.copytree(DATA / "yacht", tmp_path / "yacht")
    path = tmp_path / "yacht" / "index_test_1.txt"
    text = path.read_text()
    path.write_text(text.replace("1", "2", 1))
    uci.load("yacht", 0, tmp_path)  # split 0 does not read the damaged file
    with pytest.raises(uci.UCIError, match=r"index_test_1.txt: sha256 is [0-9a-f]{64}, expected"):
        uci.load("yacht", 1, tmp_path)
    with pytest.raises(uci.UCIError, match="is damaged"):
        uci.verify("yacht", tmp_path)
    path.unlink()
    with pytest.raises(uci.UCIError, match="index_test_1.txt is missing; pass --data-dir or set UCI_DIR"):
        uci.verify("yacht", tmp_path)
    with pytest.raises(uci.UCIError, match="downloads are off"):
        uci.fetch("yacht", tmp_path, mirror=None)


def test_a_missing_file_is_downloaded_and_checked(tmp_path):
    """From a local HTTP server laid out as the papers' repository: a good copy is kept, a bad one is not."""
    import functools
    import http.server
    import threading

    site = tmp_path / "site"
    shutil.copytree(DATA / "yacht", site / "yacht" / "data")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mirror = f"http://127.0.0.1:{server.server_address[1]}/"
        uci.fetch("yacht", tmp_path / "a", mirror=mirror)
        uci.verify("yacht", tmp_path / "a")
        (site / "yacht" / "data" / "n_hidden.txt").write_text("51\n")
        with pytest.raises(uci.UCIError, match="download's sha256 does not match"):
            uci.fetch("yacht", tmp_path / "b", mirror=mirror)
        assert not (tmp_path / "b" / "yacht" / "n_hidden.txt").exists()
        assert not [p for p in (tmp_path / "b" / "yacht").iterdir() if p.name.startswith(".")]
    finally:
        server.shutdown()


# --- the model and the scores ----------------------------------------------------------------------


def test_the_gamma_noise_model_has_a_free_precision_and_sigma_as_its_deterministic():
    from bnn_zoo.models.mlp import mlp_regressor

    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.random.default_rng(1).normal(size=20)
    m = mlp_regressor(X, y, hidden=(4,), noise="gamma", noise_params={"alpha": 2.0, "beta": 3.0})
    assert "tau" in m.named_vars and "tau" in [v.name for v in m.free_RVs]
    assert "sigma" in [v.name for v in m.deterministics]
    import pytensor

    point = {**m.initial_point(), "tau_log__": np.log(4.0)}
    sigma_graph, = m.replace_rvs_by_values([m["sigma"]])
    sigma = pytensor.function([m.rvs_to_values[m["tau"]]], sigma_graph)(np.log(4.0))
    assert np.isclose(sigma, 0.5)
    logp = m.compile_logp(vars=[m["tau"]], jacobian=False)(point)
    assert np.isclose(logp, stats.gamma(a=2.0, scale=1 / 3.0).logpdf(4.0))
    with pytest.raises(ValueError, match="noise_params must give positive alpha and beta"):
        mlp_regressor(X, y, noise="gamma", noise_params={"alpha": -1.0})


def test_scores_are_the_mixture_log_density_in_the_targets_units():
    s = uci.load("yacht", 0, DATA)
    rng = np.random.default_rng(0)
    mu, sigma = rng.normal(size=(3, len(s.y_test))) * 0.1, np.array([0.2, 0.3, 0.5])
    got = uci_fits.scores(mu, sigma, s)
    y, m, sd = s.y_test_original, s.y_mean + s.y_sd * mu, s.y_sd * sigma[:, None]
    mixture = np.log(stats.norm(m, sd).pdf(y).mean(0))
    assert np.isclose(got["ll"], mixture.mean())
    assert np.isclose(got["rmse"], np.sqrt(np.mean((m.mean(0) - y) ** 2)))
    assert np.isclose(got["sigma"], s.y_sd * sigma.mean())


def test_the_table_sets_standard_errors_and_the_targets_against_the_published_columns():
    fits = pd.DataFrame({"uci": ["yacht"] * 3, "method": ["advi"] * 3, "split": [0, 1, 2],
                         "rmse": [0.9, 1.0, 1.1], "ll": [-1.2, -1.6, -1.7], "fit_seconds": [1.0, 2.0, 3.0]})
    row = uci_table.table(fits).iloc[0]
    assert row["splits"] == 3 and np.isclose(row["rmse"], 1.0) and np.isclose(row["rmse_se"], 0.1 / np.sqrt(3))
    assert np.isclose(row["ll"], -1.5) and (row["vi_rmse"], row["pbp_ll"]) == (6.89, -1.63)
    assert row["beats_vi"] and row["matches_pbp"]  # RMSE 1.00 < 1.02; LL -1.50 > -1.63
    fits["ll"] -= 0.4  # -1.9 ± 0.15: below PBP's -1.63 by more than a standard error
    assert not uci_table.table(fits).iloc[0]["matches_pbp"]


# --- the command ---------------------------------------------------------------------------------


FAST = ["--datasets", "yacht", "--data-dir", str(DATA), "--steps", "500", "--members", "2", "--draws", "100",
        "--no-progress"]


def test_uci_on_yacht_writes_every_record_and_the_table_then_resumes(tmp_path, capsys):
    done = bnn_zoo_uci(*FAST, "--splits", "2", "--workers", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "12 fits in the job, 0 already" in done.stderr
    store = tmp_path / "uci"
    fits = pd.read_parquet(store / "fits.parquet")
    assert sorted(zip(fits["method"], fits["split"])) == sorted((m, k) for m in uci_fits.METHODS for k in (0, 1))
    # every method predicts the test targets far better than their mean, with a finite log-likelihood
    y_sd = np.std(np.loadtxt(DATA / "yacht" / "data.txt")[:, 6])
    assert (fits["rmse"] < 0.3 * y_sd).all() and np.isfinite(fits["ll"]).all()
    table = pd.read_csv(store / "table.csv")
    assert list(table["method"]) == list(uci_fits.METHODS) and (table["splits"] == 2).all()
    assert {"pbp_rmse", "vi_ll", "dropout_ll", "beats_vi", "matches_pbp"} <= set(table.columns)
    assert "| yacht | advi | 2 |" in (store / "table.md").read_text()
    assert len(pd.read_csv(store / "fits.csv")) == 12
    assert "| yacht | advi | 2 |" in done.stdout
    # every record carries the intervals' coverage and width, raw and conformal, and the table their means
    assert fits[list(uci_fits.COVERAGE)].apply(lambda c: c.between(0, 1)).all().all()
    assert (fits["width50"] < fits["width90"]).all() and (fits["width90"] < fits["width95"]).all()
    assert (table["coverage_splits"] == 2).all() and "conformal 95%" in (store / "table.md").read_text()

    # The reruns in this process (the command's main, as the user's run above reached it): a
    # second start of the command would only load the engine again.
    def rerun(*args):
        capsys.readouterr()
        code = job.main([*FAST, *args, "--workers", "1", "--out", str(tmp_path)])
        return code, capsys.readouterr().err

    # a rerun fits nothing; a record lost (a killed run) or damaged is fitted again, alone
    code, err = rerun("--splits", "2")
    assert code == 0 and "12 already in" in err and "0 to fit" in err
    # the records changed below are the ensemble's two (its fits are the cheapest to make again here)
    records = [p for p in sorted((store / "records").glob("*.parquet"))
               if pd.read_parquet(p)["method"].item() == "ensemble"]
    records[0].unlink()
    records[1].write_bytes(records[1].read_bytes()[:40])
    code, err = rerun("--splits", "2")
    assert code == 0, err
    assert "is damaged" in err and "10 already in" in err and "2 to fit" in err
    assert len(pd.read_parquet(store / "fits.parquet")) == 12

    # a record written before coverage was scored is fitted again, and only that one
    old = pd.read_parquet(records[0])
    old.drop(columns=[c for c in old if "coverage" in c or "width" in c]).to_parquet(records[0], index=False)
    code, err = rerun("--splits", "2")
    assert code == 0, err
    assert "11 already in" in err and "1 to fit (1 of them recorded without interval coverage)" in err
    assert pd.read_parquet(records[0])["conf_coverage90"].notna().all()

    # --table-only fits nothing: the table of what the store holds of a larger job
    code, err = rerun("--splits", "3", "--table-only")
    assert code == 0, err
    assert "12 already in" in err and "6 left out (--table-only)" in err
    assert len(list((store / "records").glob("*.parquet"))) == 12
    assert (pd.read_csv(store / "table.csv")["splits"] == 2).all()


def test_a_damaged_record_is_set_aside_and_fitted_again(tmp_path, capsys):
    """A record copied over another, cut short or duplicated is set aside in damaged/ and fitted
    again; the table is the untouched job's, one row per split."""
    from tests.test_sweep import damage

    argv = ["--datasets", "yacht", "--data-dir", str(DATA), "--splits", "4", "--method", "advi", "--steps", "300",
            "--draws", "50", "--workers", "1", "--splits-per-task", "1", "--no-progress", "--out", str(tmp_path)]
    store = tmp_path / "uci"

    def tables():
        fits = pd.read_parquet(store / "fits.parquet").drop(columns="fit_seconds").set_index("key").sort_index()
        return fits, pd.read_csv(store / "table.csv").drop(columns="fit_seconds")

    assert job.main(argv) == 0
    fits, table = tables()
    damaged = damage(store / "records")
    capsys.readouterr()
    assert job.main(argv) == 0
    err = capsys.readouterr().err
    for name in damaged:
        assert f"record {name} is damaged" in err
    assert "4 fits in the job, 1 already in" in err and "3 to fit; 4 damaged records set aside" in err
    assert sorted(p.stem for p in (store / "damaged").iterdir()) == damaged
    again, again_table = tables()
    assert again.index.is_unique and sorted(again["split"]) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(again, fits, check_exact=False, rtol=1e-9)
    pd.testing.assert_frame_equal(again_table, table, check_exact=False, rtol=1e-9)


def test_uci_on_a_dask_cluster_makes_the_same_fits(tiny_store, tmp_path):
    """The tiny job on a LocalCluster of two workers (a task of advi's splits, one of dropout's)
    makes the fits the same job made by the command on one process (``tiny_store``, --workers 1)."""
    assert job.main([*TINY, "--workers", "2", "--out", str(tmp_path)]) == 0
    a, b = (pd.read_parquet(store / "fits.parquet").sort_values("key").reset_index()
            for store in (tiny_store, tmp_path / "uci"))
    assert list(a["key"]) == list(b["key"]) and sorted(a["split"]) == [1, 1, 2, 2]
    np.testing.assert_allclose(a["rmse"], b["rmse"], rtol=1e-5)
    np.testing.assert_allclose(a["ll"], b["ll"], rtol=1e-5)


def _damaged(tmp_path):
    shutil.copytree(DATA / "yacht", tmp_path / "data" / "yacht")
    path = tmp_path / "data" / "yacht" / "data.txt"
    path.write_bytes(path.read_bytes()[:-10])
    return ["--data-dir", str(tmp_path / "data")]


@pytest.mark.parametrize("args, message", [
    (["--datasets", "yachts"], "argument --datasets: unknown data set yachts; valid: boston"),
    (["--splits", "21"], "yacht has 20 splits (0..19); --splits 21 is out of range"),
    (["--splits", "18-20"], "yacht has 20 splits (0..19); --splits 18-20 is out of range"),
    (["--splits", "0"], "argument --splits: must be a count N (the first N splits) or a range I-J"),
    (["--method", "nuts"], "argument --method: unknown method nuts; valid: advi"),
    (["--noise-prior", "1"], "argument --noise-prior: must be two positive numbers ALPHA,BETA"),
    (["--restarts", "3"], "--restarts is not a setting of bnn-zoo uci"),
    (["--figures", "f"], "--figures is not a setting of bnn-zoo uci"),
    (["--estimator", "local_reparam"], "(the local-reparameterisation estimator is --method local_reparam)"),
    (_damaged, "data.txt: sha256 is"),
    (["--table-only"], "--table-only: "),
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler tcp://127.0.0.1:1: no Dask scheduler answers there"),
    (["--scheduler", "udp://host:1"], "--scheduler must be a Dask address"),
])
def test_bad_input_is_one_line_exit_2_before_any_fit(tmp_path, capsys, args, message):
    if callable(args):
        args = args(tmp_path)
    else:
        args = ["--data-dir", str(DATA), *args]
    code = job.main(["--datasets", "yacht", *args, "--out", str(tmp_path / "out"), "--workers", "1"]
                    if "--datasets" not in args else [*args, "--out", str(tmp_path / "out"), "--workers", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_uci_without_a_data_folder_says_where_to_put_one(tmp_path):
    """No --data-dir, no UCI_DIR, and no network (an unreachable mirror): one line, exit 2."""
    code = f"""
import sys
from bnn_zoo.data import uci
uci.MIRROR = "http://127.0.0.1:9/"
from bnn_zoo.experiments.uci.command import main
sys.exit(main(["--datasets", "yacht", "--out", {str(tmp_path / 'out')!r}, "--workers", "1"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=command_env(XDG_CACHE_HOME=str(tmp_path / "cache")), timeout=300)
    assert done.returncode == 2
    assert "could not be downloaded" in done.stderr and "pass --data-dir or set UCI_DIR" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


# --- the records: the method that ran, and whole records only ---------------------------------------


TINY = ["--datasets", "yacht", "--data-dir", str(DATA), "--splits", "1-2", "--method", "advi,dropout", "--steps", "200",
        "--draws", "50", "--workers", "1", "--no-progress"]


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    """A store of four tiny fits (advi and dropout on yacht's splits 1 and 2), made by ``bnn-zoo uci``
    in a process of its own, as a Dask worker makes them (the XLA flags of a process whose JAX starts
    in the command); copy it before changing it."""
    out = tmp_path_factory.mktemp("tiny")
    done = bnn_zoo_uci(*TINY, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out / "uci"


def _copy(store, tmp_path):
    shutil.copytree(store, tmp_path / "uci")
    return tmp_path / "uci"


def test_each_record_names_the_method_that_ran_in_one_method_column(tiny_store):
    fits = pd.read_parquet(tiny_store / "fits.parquet")
    assert sorted(fits["method"]) == ["advi", "advi", "dropout", "dropout"]
    assert "approach" not in fits and "approach" not in pd.read_csv(tiny_store / "fits.csv")
    assert sorted(pd.read_csv(tiny_store / "fits.csv")["method"]) == sorted(fits["method"])
    assert list(pd.read_csv(tiny_store / "table.csv")["method"]) == ["advi", "dropout"]
    # each record has its method's columns: the dropout fits, made without ADVI, have no ELBO
    for path in (tiny_store / "records").glob("*.parquet"):
        record = pd.read_parquet(path).iloc[0].to_dict()
        assert set(record) == set(uci_fits.columns(record["method"])), record["method"]
        assert uci_fits.record_fault(record) is None
    assert fits.loc[fits["method"] == "dropout", "elbo_final"].isna().all()
    assert fits.loc[fits["method"] == "advi", "elbo_final"].notna().all()
    # a method the fits do not know is refused, not fitted as mean-field ADVI under its name
    with pytest.raises(ValueError, match="approach must be one of advi, local_reparam"):
        uci_fits.UCIConfig(approach="nuts")


def test_a_store_written_before_method_named_the_method_is_kept_with_method_from_approach(tiny_store, tmp_path,
                                                                                          capsys):
    store = _copy(tiny_store, tmp_path)
    for path in (store / "records").glob("*.parquet"):  # as they were written: method advi, the method in approach
        old = pd.read_parquet(path)
        old.insert(list(old.columns).index("split") + 1, "approach", old["method"])
        old.assign(method="advi").to_parquet(path, index=False)
    capsys.readouterr()
    assert job.main([*TINY, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "4 records written before `method` named the method" in err
    assert "4 fits in the job, 4 already in" in err and "0 to fit" in err and "damaged" not in err
    fits = pd.read_parquet(store / "fits.parquet")
    assert sorted(fits["method"]) == ["advi", "advi", "dropout", "dropout"] and "approach" not in fits
    for path in (store / "records").glob("*.parquet"):
        assert "approach" not in pd.read_parquet(path)
    assert list(pd.read_csv(store / "table.csv")["method"]) == ["advi", "dropout"]


def test_the_committed_records_read_back_as_a_store_resume_and_make_the_committed_table(tmp_path, capsys):
    """benchmarks/results/uci/fits.csv's yacht rows, one record each: the job finds them all, fits
    none, and writes the committed table's yacht rows (RMSE and log-likelihood over 20 splits, or 5
    for full rank; coverage over the splits that carry it)."""
    from bnn_zoo.experiments.harness.store import Store

    results = ROOT / "benchmarks" / "results" / "uci"
    committed = pd.read_csv(results / "fits.csv")
    assert sorted(set(committed["method"])) == sorted(uci_fits.METHODS) and "approach" not in committed
    yacht = committed[committed["uci"] == "yacht"]
    store = Store(tmp_path / "uci")
    store.open()
    for record in yacht.to_dict("records"):
        store.write(record)
    args = ["--datasets", "yacht", "--data-dir", str(DATA), "--workers", "1", "--no-progress", "--out", str(tmp_path)]
    capsys.readouterr()
    assert job.main([*args, "--table-only"]) == 0
    err = capsys.readouterr().err
    assert f"120 fits in the job, {len(yacht)} already in" in err and "damaged" not in err
    table = pd.read_csv(tmp_path / "uci" / "table.csv")
    expected = pd.read_csv(results / "table.csv").query("dataset == 'yacht'").reset_index(drop=True)
    pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=2e-3, check_dtype=False)
    lines = lambda path: [line for line in path.read_text().splitlines() if line.startswith("| yacht |")]
    assert lines(tmp_path / "uci" / "table.md") == lines(results / "table.md")
    # split 0 of every method carries the coverage: a full run finds all six and fits none
    assert job.main([*args, "--splits", "1"]) == 0
    err = capsys.readouterr().err
    assert "6 fits in the job, 6 already in" in err and "0 to fit" in err


def test_a_record_with_some_interval_columns_is_set_aside_and_fitted_again(tiny_store, tmp_path, capsys):
    store = _copy(tiny_store, tmp_path)
    a, b = sorted((store / "records").glob("*.parquet"))[:2]
    pd.read_parquet(a).drop(columns="conf_coverage95").to_parquet(a, index=False)
    pd.read_parquet(b).assign(coverage90=np.nan).to_parquet(b, index=False)
    capsys.readouterr()
    assert job.main([*TINY, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"record {a.stem} is damaged (it lacks conf_coverage95)" in err
    assert f"record {b.stem} is damaged (its coverage90 is not finite)" in err
    assert "4 fits in the job, 2 already in" in err and "2 to fit; 2 damaged records set aside" in err
    assert sorted(p.stem for p in (store / "damaged").iterdir()) == sorted([a.stem, b.stem])
    fits = pd.read_parquet(store / "fits.parquet")
    assert len(fits) == 4 and uci_table.scored(fits).all()
    assert (pd.read_csv(store / "table.csv")["coverage_splits"] == 2).all()


def test_a_record_is_whole_with_every_column_of_its_method_and_finite_scores():
    whole = dict.fromkeys(uci_fits.columns("advi"), 0.5) | {"method": "advi", "key": "k"}
    assert uci_fits.record_fault(whole) is None
    assert uci_fits.record_fault({k: v for k, v in whole.items() if k != "rmse"}) == "it lacks rmse"
    assert uci_fits.record_fault({k: v for k, v in whole.items() if k != "n_params"}) == "it lacks n_params"
    assert uci_fits.record_fault(whole | {"ll": -np.inf, "sigma": None}) == "its ll, sigma are not finite"
    assert uci_fits.record_fault(whole | {"method": "nuts"}).startswith("its method is 'nuts', not one of advi")
    assert uci_fits.record_fault(whole | {"approach": "dropout"}) == "it holds approach 'dropout' beside method 'advi'"
    # dropout's record has no ELBO; one written before the intervals were scored has none of their columns
    dropout = {k: v for k, v in whole.items() if k not in uci_fits.ADVI_MEASURES}
    assert uci_fits.record_fault(dropout | {"method": "dropout", "dropout_rate": 0.05}) is None
    unscored = {k: v for k, v in whole.items() if k not in uci_fits.INTERVALS}
    assert uci_fits.record_fault(unscored) is None
    assert uci_fits.record_fault(unscored | dict.fromkeys(uci_fits.INTERVALS, np.nan)) is None
    frame = pd.DataFrame([whole, unscored, whole | {"width95": np.nan}])
    assert list(uci_table.scored(frame)) == [True, False, False]
