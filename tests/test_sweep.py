"""bnn-zoo sweep: its records are the toy experiment's metrics, on one process or a Dask cluster,
and a kill -9 loses and duplicates nothing."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bnn_zoo.experiments.harness import runner
from bnn_zoo.experiments.sweep import command as sweep, fits as sweep_fits, report, spec as sweep_spec
from bnn_zoo.experiments.toy import priors as toy
from tests.conftest import command_env

SMALL = ["--steps", "300", "--n-test", "400", "--draws", "30", "--restarts", "2", "--no-progress"]
TIMES = ("fit_seconds", "fit_compile_seconds", "evaluate_seconds", "evaluate_compile_seconds", "task_seconds",
         "xla_programs", "batched_with")


def _args(tmp_path, *extra, out="sweep"):
    return sweep.build_parser().parse_args(["--out", str(tmp_path / out), *SMALL, *extra])


def _table(path):
    """The records without their timings, restarts' ELBOs as numbers (JSON text in the store)."""
    table = pd.read_parquet(path).drop(columns=list(TIMES)).set_index("key").sort_index()
    restarts = pd.DataFrame(table.pop("elbo_restarts").map(lambda v: json.loads(v) if v else []).tolist(),
                            index=table.index)
    return table.join(restarts.add_prefix("elbo_restart_"))


def test_a_record_is_what_the_toy_experiment_writes(tmp_path):
    """The vectorised fit and its evaluation give the toy run's metrics for the same settings."""
    args = _args(tmp_path, "--priors", "normal,laplace", "--hyperpriors", "inversegamma", "--seeds", "2",
                 "--noise", "0.3", "--workers", "1")
    path, fitted = sweep.run_sweep(args, report=lambda line: None)
    table = pd.read_parquet(path)
    # one task of both pairs (one structure): 2 pairs x 2 seeds x 2 restarts
    assert fitted == 4 and len(table) == 4 and set(table["batched_with"]) == {8}
    cfg = next(c for c in sweep_spec.specs(args) if c.prior == "laplace" and c.seed == 1)
    record = runner.run(toy.experiment("moons"), dataclasses.replace(
        cfg, out=tmp_path / "run", figures=tmp_path / "fig")).metrics
    row = table.set_index("key").loc[sweep_spec.fit_key(cfg)]
    for name in ("accuracy", "nll", "brier", "ece", "elpd_loo", "elpd_loo_se", "p_loo", "pareto_k_max",
                 "pareto_k_bad_share", "elbo_q", "elbo_final", "bayes_accuracy", "bayes_nll",
                 "convergence_elbo_change", "picked_restart"):
        np.testing.assert_allclose(row[name], record[name], rtol=1e-9, atol=1e-9, err_msg=name)
    assert bool(row["converged"]) == record["converged"]
    np.testing.assert_allclose(json.loads(row["elbo_restarts"]), record["elbo_restarts"], rtol=1e-9)
    # the held-out ELPD is the NLL's sum, and the gaps are to the Bayes-optimal classifier
    np.testing.assert_allclose(row["elpd_test"], -row["nll"] * cfg.n_test, rtol=1e-9)
    np.testing.assert_allclose(row["gap_accuracy"], row["bayes_accuracy"] - row["accuracy"])


def test_the_sixteen_prior_pairs_make_two_structures_and_two_programs(tmp_path):
    """The prior study's 16 pairs share two models, priors as data: nine pairs with a scale variable
    per layer, seven without (the fixed scale, and the flat prior under any hyperprior)."""
    cfgs = sweep_spec.specs(_args(tmp_path, "--all-priors", "--seeds", "1", "--datasets", "moons"))
    assert len({(c.prior, c.hyperprior) for c in cfgs}) == 16
    by_structure = {}
    for c in cfgs:
        by_structure.setdefault(sweep_spec.structure(c), []).append(c)
    assert sorted(len(group) for group in by_structure.values()) == [7, 9]
    choice, models = sweep_spec.choices(cfgs), []
    for key, group in by_structure.items():  # one model each, each pair's model its own index in it
        models.append(len({tuple(sweep_spec.indices(c, choice[key]).items()) for c in group}))
    assert sorted(models) == [4, 9]  # the flat prior's four pairs are one model
    # a sweep of one pair a structure builds that pair's own model
    one = sweep_spec.specs(_args(tmp_path, "--priors", "normal", "--hyperpriors", "fixed,inversegamma"))
    assert list(sweep_spec.choices(one).values()) == [None, None]
    assert len(sweep_spec.tasks(cfgs, 300)) == 2


def test_a_float32_sweep_computes_its_log_density_in_float32(tmp_path):
    """The structure's model is compiled under the sweep's precision: a float32 sweep's log density
    (the choice's candidates included) is float32, as ``bnn-zoo moons --float32``'s."""
    cfgs = sweep_spec.specs(_args(tmp_path, "--priors", "normal,laplace", "--hyperpriors", "inversegamma",
                                  "--float32", "--steps", "100"))
    choice = sweep_spec.choices(cfgs)[sweep_spec.structure(cfgs[0])]
    assert choice == (["laplace", "normal"], ["inversegamma"])
    b = sweep_fits.Batch(cfgs, [(s.X_train, s.y_train) for s in map(toy.data, cfgs)], choice=choice)
    z = np.zeros(b.layout.dim, "float32")
    (logp,) = b.density.select(("logp",))(b.layout.unflatten(z), *b.trains[0])
    assert logp.dtype == np.float32 and np.isfinite(logp)


def test_a_dask_cluster_gives_the_in_process_results(tmp_path):
    """A LocalCluster of 2 workers, tasks of one fit and of two: the same records as in-process.
    (One structure, two seeds: in-process one task of both fits, on the cluster a task of one each.)"""
    common = ["--priors", "normal", "--hyperpriors", "halfnormal", "--seeds", "2", "--keep-draws"]
    alone, _ = sweep.run_sweep(_args(tmp_path, *common, "--workers", "1", out="alone"), report=lambda l: None)
    cluster, _ = sweep.run_sweep(_args(tmp_path, *common, "--workers", "2", "--fits-per-task", "2",
                                       out="cluster"), report=lambda l: None)
    a, b = _table(alone), _table(cluster)
    assert len(a) == 2 and list(a.index) == list(b.index)
    # tasks of two fits (x 2 restarts) in-process, of one on the cluster
    assert set(pd.read_parquet(alone)["batched_with"]) == {4} and set(pd.read_parquet(cluster)["batched_with"]) == {2}
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)
    for key in a.index:  # the posterior draws too, written by the client only
        trees = [xr.open_datatree(tmp_path / d / "draws" / f"{key}.nc") for d in ("alone", "cluster")]
        assert {"posterior", "log_likelihood", "sample_stats"} <= set(trees[0].children)
        np.testing.assert_allclose(trees[0]["posterior"]["W_0"].values, trees[1]["posterior"]["W_0"].values)


def _threads_cores() -> set:
    """The cores each thread of this process may run on (threads that end meanwhile left out)."""
    cores = set()
    for thread in os.listdir("/proc/self/task"):
        try:
            cores.add(frozenset(os.sched_getaffinity(int(thread))))
        except OSError:
            pass
    return cores


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two workers pinned to a core each need two cores")
def test_a_local_clusters_workers_run_on_a_core_each():
    """The sweep's LocalCluster pins each single-threaded worker, every thread of it, to a core of its own."""
    import argparse

    from bnn_zoo.experiments.harness.resources import cluster

    client, close = cluster(argparse.Namespace(scheduler=None, workers=2))
    try:
        seen = list(client.run(_threads_cores).values())
        profiling = client.run(_profiling)
    finally:
        close()
    assert len(seen) == 2 and all(len(cores) == 1 and len(next(iter(cores))) == 1 for cores in seen)
    assert seen[0] != seen[1]  # each worker's threads all on one core, the two workers on two
    assert list(profiling.values()) == [False, False]  # no profiler sampling the fits' core


def _profiling(dask_worker) -> bool:
    """Whether a worker runs Dask's statistical profiler (its periodic callback, and the setting)."""
    import dask

    return "profile" in dask_worker.periodic_callbacks or dask.config.get("distributed.worker.profile.enabled")


def test_the_toy_inverse_gamma_is_its_own_and_part_of_a_records_key(monkeypatch):
    """The toy experiments' hierarchical scales are InverseGamma(3, 4) (mode 1, docs/reproductions.md),
    written to metrics.json; a sweep keeps no record fitted under other parameters."""
    import pymc as pm
    import scipy.stats as st

    from bnn_zoo.data import toy as toy_data

    split = toy_data.load("moons", n_train=20, n_test=5, seed=0)
    ig, fixed = toy.ToyConfig(dataset="moons"), toy.ToyConfig(dataset="moons", hyperprior="halfnormal")
    model = toy.model(ig, split)
    for value in (0.3, 1.0, 2.5):
        np.testing.assert_allclose(pm.logp(model["scale_0"], value).eval(), st.invgamma(3.0, scale=4.0).logpdf(value))
    assert ig.record()["hyperprior_params"] == {"alpha": 3.0, "beta": 4.0}
    assert fixed.record()["hyperprior_params"] == {}
    keys = (sweep_spec.fit_key(ig), sweep_spec.fit_key(fixed))
    monkeypatch.setitem(toy.HYPERPRIOR_PARAMS, "inversegamma", {"alpha": 3.0, "beta": 2.0})
    assert sweep_spec.fit_key(ig) != keys[0] and sweep_spec.fit_key(fixed) == keys[1]


def test_kill_9_then_rerun_loses_and_duplicates_nothing(tmp_path, capsys):
    """SIGKILL a sweep after its first records, rerun the same command: the finished fits are
    kept as they were, the rest are fitted once, and the table equals an uninterrupted sweep's."""
    flags = ["--priors", "normal", "--hyperpriors", "fixed", "--seeds", "6", "--restarts", "1",
             "--fits-per-task", "1", "--workers", "1", "--steps", "200", "--n-test", "300", "--draws", "30",
             "--no-progress"]
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "bnn_zoo.experiments.sweep", "--out", str(out), *flags]
    proc = subprocess.Popen(command, env=command_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / "records"
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline and \
            len([p for p in records.glob("*.parquet") if not p.name.startswith(".")]) < 2:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in records.glob("*.parquet")
              if not p.name.startswith(".")}
    assert 2 <= len(before) < 6 and not (out / "fits.parquet").exists()
    # The rerun in this process (the command's main, as the killed command reached it): a second
    # start of the command would only load the engine again.
    capsys.readouterr()
    assert sweep.main(["--out", str(out), *flags]) == 0
    assert f"6 fits in the sweep, {len(before)} already in" in capsys.readouterr().err
    after = sorted(p.name for p in records.iterdir())
    assert len(after) == 6 and not any(name.startswith(".") for name in after)  # no half-written file
    for name, (mtime, content) in before.items():  # not fitted twice
        assert (records / name).stat().st_mtime_ns == mtime and (records / name).read_bytes() == content
    # the uninterrupted reference in this process: the command's main, with the same flags
    assert sweep.main(["--out", str(tmp_path / "whole"), *flags]) == 0
    killed, uninterrupted = _table(out / "fits.parquet"), _table(tmp_path / "whole" / "fits.parquet")
    assert killed.index.is_unique and len(killed) == 6
    pd.testing.assert_frame_equal(killed, uninterrupted, check_exact=False, rtol=1e-9)


def damage(records) -> list[str]:
    """Damage a store's records as a careless copy or a full disk does: one record copied over another,
    one cut short, one holding its row twice, and a copy of one under a name of its own. Returns the
    names of the damaged files (without ``.parquet``)."""
    import shutil

    a, b, c, d = sorted(p for p in records.glob("*.parquet"))[:4]
    shutil.copyfile(a, b)  # b's name, a's record: the store would count b done and hold a twice
    c.write_bytes(c.read_bytes()[: c.stat().st_size // 2])
    row = pd.read_parquet(d)
    pd.concat([row, row]).to_parquet(d, index=False)
    shutil.copyfile(a, records / "copy.parquet")
    return sorted([b.stem, c.stem, d.stem, "copy"])


def test_a_damaged_record_is_set_aside_and_fitted_again(tmp_path, capsys):
    """A record copied over another, cut short or duplicated is set aside in damaged/ and fitted
    again; the others are kept, and the table is the untouched sweep's, one row per fit."""
    flags = ["--out", str(tmp_path / "sweep"), *SMALL, "--priors", "normal,laplace", "--hyperpriors", "fixed",
             "--seeds", "2", "--workers", "1"]
    assert sweep.main(flags) == 0
    whole = _table(tmp_path / "sweep" / "fits.parquet")
    records = tmp_path / "sweep" / "records"
    damaged = damage(records)
    kept = {p.name: p.read_bytes() for p in records.glob("*.parquet") if p.stem not in damaged}
    capsys.readouterr()
    assert sweep.main(flags) == 0
    err = capsys.readouterr().err
    for name in damaged:
        assert f"record {name} is damaged" in err
    assert "4 fits in the sweep, 1 already in" in err and "3 to fit; 4 damaged records set aside" in err
    assert sorted(p.stem for p in (tmp_path / "sweep" / "damaged").iterdir()) == damaged
    assert {p.name: p.read_bytes() for p in records.glob("*.parquet") if p.name in kept} == kept  # not refitted
    table = _table(tmp_path / "sweep" / "fits.parquet")
    assert table.index.is_unique and list(table.index) == list(whole.index)
    pd.testing.assert_frame_equal(table, whole, check_exact=False, rtol=1e-9)
    assert report.main([str(tmp_path / "sweep")]) == 0


def test_a_changed_spec_adds_only_the_missing_fits(tmp_path):
    lines = []
    sweep.run_sweep(_args(tmp_path, "--seeds", "1", "--workers", "1"), report=lines.append)
    path, fitted = sweep.run_sweep(_args(tmp_path, "--seeds", "2", "--workers", "1"), report=lines.append)
    counts, times = lines[-2:]
    assert fitted == 1 and counts.startswith("2 fits in the sweep, 1 already in")
    table = pd.read_parquet(path)
    assert sorted(table["seed"]) == [0, 1]
    made = table[table["seed"] == 1].iloc[0]  # the time split is this run's fit's alone
    assert times.startswith("1 fit made; their tasks' time, summed: ")
    for label, field in [("fit programs", "fit_seconds"), ("evaluation programs", "evaluate_seconds"),
                         ("the tasks", "task_seconds")]:
        assert f"{label} {made[field]:,.1f} s" in times
    assert f"{made['xla_programs']:,.0f} XLA programs built" in times


@pytest.mark.parametrize("extra, message", [
    (["--draws", "10"], "--draws must be at least 25"),
    (["--priors", "normal,normal"], "repeated prior"),
    (["--noise", "0.1,inf"], "must be positive and finite"),
    (["--noise", "0"], "must be positive and finite"),
    (["--datasets", "spirals"], "unknown data set spirals"),
    (["--steps", "1000000000000"], "more than 100,000,000"),
    (["--restarts", "40"], "--restarts 40 is more than --draws 30"),
    (["--scheduler", "localhost:8786"], "must be a Dask address"),
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler tcp://127.0.0.1:1: no Dask scheduler answers there"),
    (["--pick-at", "0.2,1"], "argument --pick-at: must be in [0, 1)"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, capsys, extra, message):
    out = tmp_path / "sweep"
    assert sweep.main(["--out", str(out), *SMALL, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_out_must_be_a_writable_folder(tmp_path, capsys):
    afile = tmp_path / "file"
    afile.write_text("")
    assert sweep.main(["--out", str(afile), *SMALL]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_a_prior_without_a_scale_is_fitted_once_for_all_its_hyperpriors(tmp_path):
    """The flat prior ignores its hyperprior, so its pairs are one fit: made once and recorded under
    each pair's key (``fit_of`` the fitted record's key, no time of its own), with the numbers of that
    pair fitted alone. A rerun that adds a pair records it from the store's fit, draws included."""
    common = ["--priors", "flat", "--seeds", "1", "--noise", "0.3", "--workers", "1", "--keep-draws"]
    lines = []
    path, written = sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "fixed,halfnormal"),
                                    report=lines.append)
    assert written == 2 and "2 to fit (1 of them recorded from another pair's same fit" in lines[0]
    assert lines[-1].startswith("1 fit made")  # the time split counts the fit once
    table = pd.read_parquet(path).set_index("hyperprior")
    own, shared = table.loc["fixed"], table.loc["halfnormal"]
    assert own["fit_of"] == own["key"] != shared["key"] and shared["fit_of"] == own["key"]
    assert own["fit_seconds"] > 0 and shared[list(TIMES[:5])].eq(0).all() and shared["xla_programs"] == 0
    alone, _ = sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "halfnormal", out="alone"),
                               report=lambda line: None)
    row = pd.read_parquet(alone).iloc[0]
    assert row["key"] == shared["key"] and row["fit_of"] == row["key"]
    for name in ("accuracy", "nll", "elpd_test", "elpd_loo", "p_loo", "pareto_k_max", "elbo_q", "elbo_final",
                 "gap_accuracy", "convergence_elbo_change"):
        np.testing.assert_allclose(shared[name], row[name], rtol=1e-9, err_msg=name)
    assert shared["picked_restart"] == row["picked_restart"]

    path, written = sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "fixed,halfnormal,inversegamma"),
                                    report=lines.append)
    assert written == 1 and "1 to fit (1 of them recorded" in lines[-1]  # nothing fitted: no time split
    third = pd.read_parquet(path).set_index("hyperprior").loc["inversegamma"]
    assert third["fit_of"] == own["key"] and third["elpd_test"] == own["elpd_test"]
    draws = tmp_path / "sweep" / "draws"
    assert (draws / f"{third['key']}.nc").read_bytes() == (draws / f"{own['key']}.nc").read_bytes()

    # the fitted record damaged: fitted again (its time recorded), not recorded from one of its copies
    (tmp_path / "sweep" / "records" / f"{own['key']}.parquet").write_bytes(b"not a record")
    path, written = sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "fixed,halfnormal,inversegamma"),
                                    report=lines.append)
    again = pd.read_parquet(path).set_index("hyperprior").loc["fixed"]
    assert written == 1 and again["fit_of"] == again["key"] and again["fit_seconds"] > 0
    assert again["elpd_test"] == own["elpd_test"]


def test_a_record_without_draws_is_no_source_for_a_sweep_that_keeps_them(tmp_path):
    common = ["--priors", "flat", "--seeds", "1", "--noise", "0.3", "--workers", "1"]
    sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "fixed"), report=lambda line: None)
    lines = []
    path, written = sweep.run_sweep(_args(tmp_path, *common, "--hyperpriors", "fixed,halfnormal", "--keep-draws"),
                                    report=lines.append)
    assert written == 1 and "recorded from" not in lines[0]
    row = pd.read_parquet(path).set_index("hyperprior").loc["halfnormal"]
    assert row["fit_of"] == row["key"] and (tmp_path / "sweep" / "draws" / f"{row['key']}.nc").exists()


def test_the_gpu_kit_reads_the_studys_last_line(tmp_path, capsys):
    """``bnn-zoo sweep``'s last line counts records (fitted and recorded from a fit), as the GPU kit's
    ``sweep_study`` step reads it; the kit's time split reads the same store."""
    from benchmarks.gpu import steps

    assert sweep.main(["--out", str(tmp_path / "study"), *SMALL, "--priors", "flat", "--hyperpriors",
                       "fixed,halfnormal", "--seeds", "1", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    result = steps.parse("sweep_study", tmp_path, out)
    assert out.startswith("2 records in ") and result["records"] == 2 and result["records_per_second"] > 0
    table = pd.read_parquet(tmp_path / "study" / "fits.parquet")
    assert (table["task_seconds"] > 0).sum() == 1  # the fit's time, in its own record only
    assert result["sums_seconds"]["task_seconds"] == round(table["task_seconds"].sum(), 1)


def test_report_writes_figures_and_a_verdict_from_paired_differences(tmp_path):

    args = _args(tmp_path, "--priors", "normal,laplace", "--hyperpriors", "fixed,inversegamma", "--seeds", "2",
                 "--noise", "0.2,0.4", "--restarts", "1", "--workers", "1")
    sweep.run_sweep(args, report=lambda line: None)
    assert report.main([str(tmp_path / "sweep")]) == 0
    out = tmp_path / "sweep" / "report"
    for name in ("gap_vs_noise.png", "elpd_differences.png", "hyperprior_effect.png", "loo_vs_test.png"):
        assert (out / name).stat().st_size > 10_000
    summary = (out / "summary.md").read_text()
    assert "## Verdict on Zharikov et al." in summary and "16 fits" in summary and "2 seeds each" in summary
    # the hyperprior effect is the paired difference, per seed, averaged over the weight priors
    table = pd.read_parquet(tmp_path / "sweep" / "fits.parquet")
    cell = table[table["noise"] == 0.4].set_index(["prior", "hyperprior", "seed"])["elpd_test"] / 400
    gains = [1000 * np.mean([cell[(p, "inversegamma", s)] - cell[(p, "fixed", s)] for p in ("normal", "laplace")])
             for s in (0, 1)]
    effects = pd.read_csv(out / "hyperprior_effects.csv")
    row = effects[(effects["noise"] == 0.4) & (effects["hyperprior"] == "inversegamma")].iloc[0]
    np.testing.assert_allclose(row["elpd_gain"], np.mean(gains), rtol=1e-5)


@pytest.mark.parametrize("pairs, noise, drawn, unanswered", [
    (["--priors", "normal", "--hyperpriors", "fixed"], "0.2", False, ["hyperpriors beat", "rank correlation"]),
    (["--priors", "normal", "--hyperpriors", "fixed,inversegamma"], "0.2", True, ["grow with the noise"]),
])
def test_report_works_on_any_subset_a_sweep_makes(tmp_path, pairs, noise, drawn, unanswered):
    sweep_dir = tmp_path / "sweep"
    assert sweep.main(["--out", str(sweep_dir), *SMALL, *pairs, "--noise", noise, "--datasets", "moons",
                       "--seeds", "2", "--restarts", "1", "--workers", "1"]) == 0
    assert report.main([str(sweep_dir)]) == 0
    summary = (sweep_dir / "report" / "summary.md").read_text()
    for question in unanswered:
        line = next(line for line in summary.splitlines() if question in line)
        assert "Not answered" in line
    assert (sweep_dir / "report" / "hyperprior_effect.png").exists() == drawn
    assert ("![hyperprior effect]" in summary) == drawn
    verdict = summary.split("## Verdict")[1].split("\n## ")[0]
    assert "nan" not in verdict  # every answer is a number or says why there is none
    assert (sweep_dir / "report" / "gap_vs_noise.png").stat().st_size > 0


def test_report_needs_a_sweep_folder(tmp_path, capsys):

    assert report.main([str(tmp_path)]) == 2
    assert "has no fits.parquet" in capsys.readouterr().err and not (tmp_path / "report").exists()
    (tmp_path / "fits.parquet").write_text("garbage")  # a damaged table: one line, the way out
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot be read as Parquet" in err and "bnn-zoo sweep --out" in err and len(err.strip().splitlines()) == 1
    pd.DataFrame({c: [] for c in ("prior", "hyperprior", "noise", "seed", "elpd_test", "gap_accuracy")}).to_parquet(
        tmp_path / "fits.parquet")
    assert report.main([str(tmp_path)]) == 2
    assert "has no seed (no records)" in capsys.readouterr().err and not (tmp_path / "report").exists()


def test_kfold_refits_each_fold_and_gives_elpd_data_that_az_compare_takes(tmp_path):
    """--kfold 2: each held-out point's value is log mean_s p(y_i | z_s) under a fit of the other
    fold (checked against bnn_zoo.fit on that fold), and the records go into az.compare."""
    import arviz as az

    import bnn_zoo
    from bnn_zoo.data.toy import Split
    from bnn_zoo.inference.families import gaussians

    args = _args(tmp_path, "--priors", "normal,laplace", "--hyperpriors", "fixed", "--seeds", "1",
                 "--restarts", "1", "--n-train", "100", "--kfold", "2", "--workers", "1")
    path, _ = sweep.run_sweep(args, report=lambda line: None)
    table = pd.read_parquet(path).set_index("prior")
    row = table.loc["laplace"]
    elpd_i = np.asarray(json.loads(row["elpd_kfold_i"]))
    assert row["kfold"] == 2 and len(elpd_i) == 100 and np.isclose(elpd_i.sum(), row["elpd_kfold"])
    cfg = next(c for c in sweep_spec.specs(args) if c.prior == "laplace")
    split = toy.data(cfg)
    held = sweep_fits.folds(100, 2, cfg.seed)[1]
    keep = np.setdiff1d(np.arange(100), held)
    model = toy.model(cfg, Split(split.X_train[keep], split.y_train[keep], split.X_test, split.y_test))
    fit = bnn_zoo.fit(model, random_seed=cfg.seed, steps=cfg.steps, method=bnn_zoo.MeanField(init_std=cfg.init_std),
                      average=cfg.average,
                      optimizer=runner.make_optimizer(cfg, cfg.lr, cfg.steps), progressbar=False)
    z, _ = gaussians.sample(*fit.family.mean_and_factor(fit.params), cfg.draws, np.random.default_rng(cfg.seed))
    proba = bnn_zoo.inference.advi.batch.posterior_mean(fit.density, z, [split.X_train[held], split.y_train[held]], "p")
    np.testing.assert_allclose(elpd_i[held], np.log(proba[np.arange(len(held)), split.y_train[held]]), rtol=1e-8)
    ranked = az.compare({prior: sweep_fits.kfold_elpd(table.loc[prior]) for prior in ("normal", "laplace")})
    assert list(ranked.index) == sorted(("normal", "laplace"), key=lambda p: -table.loc[p, "elpd_kfold"])


def test_bnn_zoo_runs_the_sweep_and_the_report(tmp_path):
    """The console command reaches both (a one-line error and exit 2 for a folder with no sweep)."""
    from bnn_zoo import cli

    assert set(cli.TOOLS) == {"sweep", "report", "alternatives"} and not set(cli.TOOLS) & set(cli.EXPERIMENTS)
    assert cli.main(["report", str(tmp_path)]) == 2
    assert cli.main(["sweep", "--out", str(tmp_path / "s"), "--draws", "3"]) == 2 and not (tmp_path / "s").exists()


def test_the_picks_benchmarks_warm_restart_decays_twice():
    """benchmarks.studies.toy_picks --restart-peak: the defaults' rate until the pick's step, decayed to
    the final rate there, then restarted at the peak and decayed to the same rate by the end."""
    from benchmarks.studies.toy_picks import warm_restart

    cfg = toy.ToyConfig(steps=10_000, lr=0.05, lr_final=0.01)
    rate, _ = warm_restart(cfg, 0.02)
    at = 2000  # the default pick's step, 0.2 of 10,000
    np.testing.assert_allclose([float(rate(t)) for t in (0, at - 1, at, cfg.steps)],
                               [0.05, 5e-4, 0.02, 5e-4], rtol=1e-3)
    assert all(float(rate(t)) >= float(rate(t + 1)) for t in range(0, cfg.steps, 97) if t + 1 != at)
