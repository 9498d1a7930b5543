"""The command lines, run as a user runs them."""

import json
import subprocess
import sys

import arviz as az
import pandas as pd
import pytest

from tests.conftest import ROOT

REQUIRED = {"dataset", "prior", "hyperprior", "method", "backend", "seed", "steps", "noise",
            "accuracy", "nll", "brier", "ece", "elbo_final", "fit_seconds"}


def run(dataset, *args, cwd):
    return subprocess.run(
        [sys.executable, "-m", f"experiments.{dataset}", *args], cwd=cwd, capture_output=True,
        text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
        timeout=900,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prior", "gauss"], "argument --prior: invalid choice: 'gauss'"),
        (["--hyperprior", "gamma"], "argument --hyperprior: invalid choice"),
        (["--method", "svgd"], "argument --method: invalid choice"),
        (["--backend", "cuda"], "argument --backend: invalid choice"),
        (["--noise", "-0.1"], "argument --noise: must be >= 0"),
        (["--steps", "0"], "argument --steps: must be a positive integer"),
        (["--steps", "-5"], "argument --steps: must be a positive integer"),
        (["--n-train", "1"], "argument --n-train: must be >= 2"),
        (["--lr", "abc"], "argument --lr: invalid"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    proc = run("moons", *args, "--out", str(out), "--figures", str(tmp_path / "fig"), cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "fig").exists()


def test_help_lists_the_flags(tmp_path):
    proc = run("circles", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    for flag in ("--prior", "--hyperprior", "--all-priors", "--noise", "--n-train", "--n-test",
                 "--steps", "--lr", "--beta", "--method", "--backend", "--seed", "--out",
                 "--figures"):
        assert flag in proc.stdout


def test_a_run_writes_the_output_contract(tmp_path):
    proc = run("moons", "--steps", "1500", "--draws", "100", "--prior", "laplace",
               "--hyperprior", "halfcauchy", "--seed", "3", "--out", "res", "--figures", "fig",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path / "res" / "moons" / "laplace-halfcauchy-s3"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert REQUIRED <= set(metrics)
    assert (metrics["prior"], metrics["hyperprior"], metrics["seed"], metrics["steps"]) == (
        "laplace", "halfcauchy", 3, 1500)
    assert 0.8 <= metrics["accuracy"] <= 1.0
    idata = az.from_netcdf(folder / "idata.nc")
    assert idata["posterior"]["W_2"].shape == (1, 100, 5, 2)
    assert idata["posterior_predictive"]["p"].shape == (1, 100, 300, 2)
    summary = pd.read_csv(folder / "summary.csv", index_col=0)
    assert "W_0[x1, 0]" in summary.index and "mean" in summary.columns
    assert (tmp_path / "fig" / "moons" / "uncertainty_laplace-halfcauchy.png").stat().st_size > 0
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_all_priors_compares_sixteen_models(tmp_path):
    proc = run("circles", "--all-priors", "--steps", "300", "--draws", "60", "--n-train", "200",
               "--n-test", "100", "--out", "res", "--figures", "fig", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(tmp_path / "res" / "circles" / "comparison.csv", index_col=0)
    assert len(table) == 16 and table["rank"].tolist() == sorted(table["rank"])
    assert {"accuracy", "nll", "ece", "elpd_loo"} <= set(table.columns)
    assert "cauchy-inversegamma" in table.index
    assert len(list((tmp_path / "res" / "circles").glob("*-s0/metrics.json"))) == 16
    for name in ("compare", "forest_scales", "weights_last_layer", "prior_grid"):
        assert (tmp_path / "fig" / "circles" / f"{name}.png").stat().st_size > 0
    assert "16 fits in" in proc.stdout
