"""The command lines, run as a user runs them; the runner's shared pieces."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest

from bnn_zoo.experiments.harness import resources, runner, runtime
from bnn_zoo.experiments.toy.priors import experiment, main
from tests.conftest import command_env, without_figures

REQUIRED = {"dataset", "prior", "hyperprior", "method", "seed", "steps", "noise", "accuracy", "nll",
            "brier", "ece", "elbo_final", "fit_seconds", "elpd_loo", "optimizer_description",
            "bayes_accuracy", "bayes_nll", "converged", "convergence_elbo_change", "elbo_q"}


def bnn_zoo(*args, cwd, timeout=900):
    return subprocess.run(["bnn-zoo", *args], cwd=cwd, capture_output=True, text=True,
                          env=command_env(), timeout=timeout)


def main_without_figures(argv, dataset="moons"):
    """``bnn-zoo <dataset>`` without its figures (``tests.conftest.without_figures``)."""
    return runner.main(without_figures(experiment(dataset)), argv)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--priors", "normal,gauss"], "argument --priors: unknown prior gauss; valid: cauchy"),
        (["--all-priors", "--priors", "normal,normal"], "argument --priors: repeated prior in 'normal,normal'"),
        (["--prior", "gauss"], "argument --prior: invalid choice: 'gauss'"),
        (["--hyperprior", "gamma"], "argument --hyperprior: invalid choice"),
        (["--method", "svgd"], "argument --method: invalid choice"),
        (["--noise", "-0.1"], "argument --noise: must be >= 0 and finite"),
        (["--noise", "inf"], "argument --noise: must be >= 0 and finite"),
        (["--steps", "0"], "argument --steps: must be a positive integer"),
        (["--steps", "-5"], "argument --steps: must be a positive integer"),
        (["--seed", "-1"], "argument --seed: must be an integer in [0, 2**31), got -1"),
        (["--seed", "4294967296"], "argument --seed: must be an integer in [0, 2**31), got 4294967296"),
        (["--n-train", "1"], "argument --n-train: must be >= 2"),
        (["--lr", "abc"], "argument --lr: invalid float value: 'abc'"),
        (["--lr-final", "0"], "argument --lr-final: must be in (0, 1]"),
        (["--draws", "24"], "--draws 24: PSIS-LOO needs at least 25 draws"),
        (["--restarts", "30", "--draws", "25"], "--draws 25 is fewer than --restarts 30"),
        (["--pick-at", "1.5"], "argument --pick-at: must be in [0, 1)"),
        (["--fullrank-lr", "0.1"], "--fullrank-lr 0.1 sets the full-rank phase, which --method advi does not run"),
        (["--pick", "mixture", "--pick-at", "0.5"], "--pick-at 0.5 picks the best restart early, which --pick mixture"),
        (["--steps", "1000000000000"], "--steps 1,000,000,000,000 is more than 100,000,000 steps"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, message):
    out, fig = tmp_path / "out", tmp_path / "fig"
    try:
        code = main([*args, "--out", str(out), "--figures", str(fig)], dataset="moons")
    except SystemExit as exit_:  # argparse's own checks
        code = exit_.code
    assert code == 2
    stderr = capsys.readouterr().err
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists() and not fig.exists()


def test_unwritable_output_is_refused_before_fitting(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for flag in ("--out", "--figures"):
        code = main(["--steps", "5", flag, str(tmp_path / "file" / "sub")], dataset="moons")
        assert code == 2
        assert capsys.readouterr().err.strip().endswith("is not a writable folder")


def test_an_output_folder_that_cannot_be_created_is_refused_in_one_line(tmp_path, capsys):
    # /proc passes the permission bits for root, but refuses every new folder
    for flag in ("--out", "--figures"):
        code = main(["--steps", "5", flag, "/proc/bnn-zoo-out"], dataset="moons")
        assert code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{flag} /proc/bnn-zoo-out: " in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flags, message", [
    (["--prior", "cauchy", "--priors", "normal,laplace"],
     "--prior cauchy picks the pair whose sensitivity plot --all-priors draws, and --priors has only normal,laplace"),
    (["--hyperprior", "halfcauchy", "--hyperpriors", "fixed"],
     "--hyperprior halfcauchy picks the pair whose sensitivity plot --all-priors draws, and --hyperpriors has only fixed"),
])
def test_a_sensitivity_pair_outside_the_compared_pairs_is_refused(tmp_path, capsys, flags, message):
    """It drew no sensitivity plot, without a word."""
    code = main(["--steps", "5", "--all-priors", *flags, "--out", str(tmp_path / "out")], dataset="moons")
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags", [["--priors", "normal,laplace"], ["--hyperpriors", "fixed"]])
def test_grid_flags_without_all_priors_are_refused(tmp_path, capsys, flags):
    code = main(["--steps", "5", *flags, "--out", str(tmp_path / "out")], dataset="moons")
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{flags[0]} select the pairs of --all-priors: add --all-priors" in err
    assert not (tmp_path / "out").exists()


def test_bad_input_exit_status_of_the_real_command(tmp_path):
    proc = bnn_zoo("circles", "--steps", "0", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "bnn-zoo circles: error: argument --steps: must be a positive integer, got 0"
    assert not (tmp_path / "out").exists()
    proc = bnn_zoo("spirals", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("bnn-zoo: error: unknown command 'spirals'")


def test_help_lists_the_flags(tmp_path):
    proc = bnn_zoo("circles", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    for flag in ("--prior", "--hyperprior", "--all-priors", "--noise", "--n-train", "--n-test",
                 "--steps", "--lr", "--lr-schedule", "--beta", "--method", "--restarts", "--seed",
                 "--out", "--figures"):
        assert flag in proc.stdout
    assert "usage: bnn-zoo {moons,circles,toy,regression,mnist-cnn,mnist-bbb,uci,sweep,report,alternatives}" in \
        bnn_zoo("--help", cwd=tmp_path).stdout


def test_a_run_writes_the_output_contract(tmp_path, capsys):
    # In this process: its subject is the files; the tests of the real command's exit status and messages run it.
    code = main(["--steps", "1500", "--draws", "50", "--prior", "laplace", "--hyperprior", "halfcauchy",
                 "--seed", "3", "--out", str(tmp_path / "res"), "--figures", str(tmp_path / "fig")],
                dataset="moons")
    assert code == 0, capsys.readouterr().err[-2000:]
    folder = tmp_path / "res" / "moons" / "laplace-halfcauchy-s3"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert REQUIRED <= set(metrics)
    assert (metrics["prior"], metrics["hyperprior"], metrics["seed"], metrics["steps"]) == (
        "laplace", "halfcauchy", 3, 1500)
    # The defaults: 6 restarts, of which the best by ELBO after a fifth of the steps runs on.
    assert metrics["restarts"] == 6 and metrics["pick"] == "best" and metrics["pick_at"] == 0.2
    assert len(metrics["elbo_restarts"]) == 6
    assert metrics["picked_restart"] == int(np.argmax(metrics["elbo_restarts"]))
    assert metrics["lr_schedule"] == "cosine" and metrics["converged"] in (True, False)
    assert 0.5 < metrics["bayes_accuracy"] <= 1 and metrics["elbo_q"] < 0
    assert 0.8 <= metrics["accuracy"] <= 1.0
    idata = az.from_netcdf(folder / "idata.nc")
    assert idata["posterior"]["W_2"].shape == (1, 50, 5, 2)
    assert idata["predictions"]["p"].shape == (1, 50, 300, 2)
    assert idata["log_likelihood"]["y_obs"].shape == (1, 50, 700)
    assert idata["fit_stats"]["elbo"].shape == (1500,)
    summary = pd.read_csv(folder / "summary.csv", index_col=0)
    assert "W_0[x1, 0]" in summary.index and "mean" in summary.columns
    for figure in ("uncertainty", "loo_pit", "reliability", "psense"):
        assert (tmp_path / "fig" / "moons" / f"{figure}_laplace-halfcauchy.png").stat().st_size > 0
    # the prediction sets' coverage, raw and conformal (300 test points: 10 folds of 270 to calibrate on)
    for level in (90, 95):
        assert 0 <= metrics[f"set_coverage{level}"] <= 1 and 1 <= metrics[f"set_size{level}"] <= 2
        assert abs(metrics[f"conf_set_coverage{level}"] - level / 100) < 0.05
    # power-scaling sensitivity per variable, the layer scales among them
    psense = pd.read_csv(folder / "psense.csv", index_col=0)
    assert {"W_0", "scale_0", "scale_2"} <= set(psense.index) and (psense["prior_median"] >= 0).all()
    assert 0 <= metrics["psense_prior_share"] <= 1 and metrics["psense_likelihood_median"] > 0
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_fullrank_continues_from_the_restart_picked_early(tmp_path):
    """--method fullrank_advi with early-picked restarts: the full-rank phase starts from the
    mean-field restart with the highest ELBO at the pick, and the record says which."""
    out = tmp_path / "out"
    code = main_without_figures(["--method", "fullrank_advi", "--steps", "1000", "--restarts", "3", "--pick-at",
                                 "0.5", "--draws", "30", "--n-train", "200", "--n-test", "100", "--no-progress",
                                 "--out", str(out), "--figures", str(tmp_path / "fig")])
    assert code == 0
    metrics = json.loads(next(out.glob("moons/*/metrics.json")).read_text())
    assert metrics["method"] == "fullrank_advi" and metrics["warm_start_steps"] == 1000
    assert len(metrics["elbo_restarts"]) == 3
    assert metrics["picked_restart"] == int(np.argmax(metrics["elbo_restarts"]))
    assert np.isfinite(metrics["elbo_q"]) and 0.5 < metrics["accuracy"] <= 1


def test_all_priors_compares_the_grid_on_each_data_set(tmp_path):
    # A 2 x 2 grid keeps CI short; the 16 pairs are fitted in test_models.py.
    grid = ["--all-priors", "--priors", "laplace,cauchy", "--hyperpriors", "fixed,inversegamma",
            "--steps", "300", "--draws", "60", "--n-train", "200", "--n-test", "100", "--restarts", "1"]
    proc = bnn_zoo("toy", *grid, "--out", "res", "--figures", "fig", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for dataset in ("moons", "circles"):
        table = pd.read_csv(tmp_path / "res" / dataset / "comparison.csv", index_col=0)
        assert sorted(table.index) == ["cauchy-fixed", "cauchy-inversegamma", "laplace-fixed",
                                       "laplace-inversegamma"]
        assert table["rank"].tolist() == [0, 1, 2, 3]
        assert (table["elpd_loo"].diff().dropna() <= 1e-9).all()  # ranked by ELPD
        assert {"accuracy", "nll", "ece", "elpd_loo", "pareto_k_max"} <= set(table.columns)
        assert len(list((tmp_path / "res" / dataset).glob("*-s0/metrics.json"))) == 4
        assert {"psense_prior_median", "psense_likelihood_median"} <= set(table.columns)
        for name in ("compare", "psense", "forest_scales", "weights_last_layer", "prior_grid"):
            assert (tmp_path / "fig" / dataset / f"{name}.png").stat().st_size > 0
        # --prior's default, normal, is not compared: the first compared pair's plot is drawn (none was)
        assert [p.name for p in (tmp_path / "fig" / dataset).glob("psense_*.png")] == ["psense_laplace-inversegamma.png"]
    assert "8 runs in" in proc.stdout and "circles cauchy-inversegamma" in proc.stdout

    # One data set's command writes what the two-data-set command wrote for it, to the last bit: both
    # are commands (a run in this process would compile under the test process's XLA flags).
    proc = bnn_zoo("circles", *grid, "--priors", "cauchy", "--hyperpriors", "inversegamma",
                   "--out", "alone", "--figures", "fig_alone", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    both, alone = (json.loads((tmp_path / d / "circles" / "cauchy-inversegamma-s0" /
                               "metrics.json").read_text()) for d in ("res", "alone"))
    for key in ("elbo_final", "elpd_loo", "accuracy", "nll"):
        assert both[key] == alone[key]


def test_comparing_many_equally_good_priors_says_the_ranking_may_be_chance():
    """ArviZ's selection-bias check (more than 11 models) becomes a flag, not a stray warning."""
    import warnings

    from bnn_zoo.experiments.toy.comparison import compare_pairs

    rng = np.random.default_rng(0)
    base = rng.normal(-1.0, 0.3, size=(1, 200, 80))  # chains, draws, points

    def tree(loglik):
        return az.from_dict({"posterior": {"a": rng.normal(size=(1, 200))},
                             "log_likelihood": {"y": loglik}, "observed_data": {"y": np.zeros(80)}})

    same = {f"m{i}": tree(base + rng.normal(0, 0.01, size=base.shape)) for i in range(12)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the check's warning is caught, not passed on
        table, chance = compare_pairs(same)
    assert chance and len(table) == 12
    better = dict(same, m0=tree(base + 0.5))  # 40 nats ahead of the rest
    table, chance = compare_pairs(better)
    assert not chance and table.index[0] == "m0"


def test_toy_command_checks_its_data_sets(tmp_path):
    proc = bnn_zoo("toy", "--datasets", "moons,spirals", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("bnn-zoo toy: error: argument --datasets: unknown data set "
                                   "spirals; valid: circles, moons")
    assert not (tmp_path / "out").exists()


def test_compilation_cache_folder(monkeypatch, tmp_path):
    import jax

    from bnn_zoo.cache import use_compiled_programs

    saved = {k: getattr(jax.config, k) for k in ("jax_compilation_cache_dir", "jax_compilation_cache_max_size",
                                                  "jax_persistent_cache_min_compile_time_secs")}
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_compilation_cache_max_size", -1)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        monkeypatch.setenv("BNN_ZOO_JAX_CACHE", "off")  # the user's opt-out: JAX's settings as they are
        assert not use_compiled_programs() and jax.config.jax_compilation_cache_dir is None
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0
        monkeypatch.delenv("BNN_ZOO_JAX_CACHE")
        assert use_compiled_programs()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "bnn-zoo" / "jax")
        assert jax.config.jax_compilation_cache_max_size == -1  # no listing of the folder at every write
        assert (tmp_path / "bnn-zoo" / "jax" / ".trimmed").is_file()  # trimmed here instead, once a day
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))  # the user's choice
        assert use_compiled_programs()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)


def test_the_least_recently_used_programs_go_first_and_once_a_day(tmp_path):
    from bnn_zoo.cache import trim_compiled_programs

    now = time.time()
    for age, name in enumerate(["newest", "used", "middle", "oldest"]):
        (tmp_path / f"{name}-cache").write_bytes(b"x" * 100)
        os.utime(tmp_path / f"{name}-cache", (now - 60 - 3600 * age, now - 60 - 3600 * age))
    (tmp_path / "oldest-atime").write_bytes(b"12345678")  # JAX's own bookkeeping for a program goes with it
    os.utime(tmp_path / "used-cache", (now, now - 9000))  # read a moment ago: its access time counts
    assert trim_compiled_programs(tmp_path, max_bytes=250) == [tmp_path / "oldest-cache", tmp_path / "middle-cache"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".trimmed", "newest-cache", "used-cache"]
    assert trim_compiled_programs(tmp_path, max_bytes=50) == []  # trimmed less than a day ago: not listed
    assert trim_compiled_programs(tmp_path, max_bytes=150, every=0) == [tmp_path / "newest-cache"]


def test_xla_flags_keep_the_users(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    runtime.add_xla_flag("--xla_cpu_experimental_ynn_fusion_type=")
    runtime.add_xla_flag("--xla_cpu_multi_thread_eigen=false")
    assert os.environ["XLA_FLAGS"].split() == ["--xla_cpu_experimental_ynn_fusion_type=",
                                               "--xla_cpu_multi_thread_eigen=false"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true --xla_dump_to=x")
    runtime.add_xla_flag("--xla_cpu_multi_thread_eigen=false")  # the user's own setting stays
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=true --xla_dump_to=x"
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/xla_cpu_multi_thread_eigen")  # only a value
    runtime.add_xla_flag("--xla_cpu_multi_thread_eigen=false")
    assert os.environ["XLA_FLAGS"].split()[-1] == "--xla_cpu_multi_thread_eigen=false"


def test_main_puts_xla_flags_back(monkeypatch, tmp_path):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
    code = main_without_figures(["--steps", "5", "--draws", "30", "--n-train", "20", "--n-test", "10", "--restarts",
                                 "1", "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "fig"),
                                 "--no-progress"])
    assert code == 0
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=true"


def test_a_second_run_into_the_same_folder_at_once_is_refused(tmp_path):
    cfg_dir = (tmp_path / "out" / "moons" / "normal-inversegamma-s0")
    with resources.run_lock(cfg_dir):  # as a run in progress holds it
        proc = bnn_zoo("moons", "--steps", "50", "--draws", "30", "--restarts", "1", "--out", "out", "--figures", "fig",
                       cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"bnn-zoo moons: error: another run is writing {Path('out/moons/normal-inversegamma-s0')} right now"
    assert not (tmp_path / "out").exists()


def test_an_unconverged_fit_says_so(tmp_path, capsys):
    # 2,000 steps at a tenth of a useful rate: the ELBO is still climbing steadily (on 200 points,
    # +77 nats over the last 1,000 steps, se 1.8). In this process: the command's lines are the runner's.
    code = main_without_figures(["--steps", "2000", "--lr", "0.001", "--lr-schedule", "constant", "--restarts", "1",
                                 "--draws", "30", "--n-train", "200", "--n-test", "100", "--out",
                                 str(tmp_path / "out"), "--figures", str(tmp_path / "fig")])
    proc = capsys.readouterr()
    assert code == 0, proc.err[-2000:]
    warning = [line for line in proc.err.splitlines() if "warning" in line]
    unconverged = [line for line in warning if "did not pass its convergence test" in line]
    assert len(unconverged) == 1 and "the fit did not pass its convergence test: the ELBO is still rising" in unconverged[0]
    m = json.loads((tmp_path / "out" / "moons" / "normal-inversegamma-s0" / "metrics.json").read_text())
    assert m["converged"] is False and m["convergence_elbo_change"] > 3 * m["convergence_elbo_change_se"]
    # q's Pareto k, as recorded, is a note (expected for a network), not a warning
    assert len(warning) == 1
    notes = [line for line in proc.err.splitlines() if ": note: " in line]
    assert (m["q_pareto_k"] > 0.7) == bool(notes) and len(notes) <= 1
    assert all(f"q_pareto_k {m['q_pareto_k']:.2f} > 0.7, as for every Gaussian q of a network" in line
               for line in notes)
    assert "(optimiser not settled)" in proc.out


@pytest.mark.parametrize("method", ["advi", "lowrank_advi", "fullrank_advi", "laplace"])
def test_every_method_is_fitted_and_recorded_as_the_fit_reports(tmp_path, method):
    """The toy commands hand --method to the library's fit: the run's record, its DataTree and its
    folder name all say the method that ran (once, --method lowrank_advi fitted full rank)."""
    import bnn_zoo

    assert method in bnn_zoo.METHODS
    out = tmp_path / "out"
    code = main_without_figures(["--method", method, "--steps", "300", "--restarts", "2", "--draws", "30",
                                 "--n-train", "200", "--n-test", "100", "--no-progress", "--out", str(out),
                                 "--figures", str(tmp_path / "fig")])
    assert code == 0
    folder, = out.glob("moons/*")
    metrics = json.loads((folder / "metrics.json").read_text())
    idata = az.from_netcdf(folder / "idata.nc")
    assert metrics["method"] == idata.attrs["fit_method"] == method
    assert len(metrics["elbo_restarts"]) == 2 and 0.5 < metrics["accuracy"] <= 1


@pytest.mark.parametrize("flags, message", [
    (["--beta", "0.5"], "--method laplace takes no KL weight"),
    (["--mc-samples", "4"], "--mc-samples 4: --method laplace finds the mode by L-BFGS and takes no ADVI setting"),
    (["--lr", "0.2"], "--lr 0.2: --method laplace finds the mode by L-BFGS"),
])
def test_laplace_refuses_what_it_does_not_take(tmp_path, capsys, flags, message):
    code = main(["--method", "laplace", *flags, "--out", str(tmp_path / "out")], dataset="moons")
    assert code == 2
    assert message in capsys.readouterr().err and not (tmp_path / "out").exists()
