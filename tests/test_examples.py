"""A smoke run of every experiment with tiny flags: each writes its run folders and an ArviZ DataTree."""

import json
import shutil

import arviz as az
import pytest

from bnn_zoo import cli
from bnn_zoo.data import mnist

MNIST = ["--epochs", "1", "--batch-size", "100", "--draws", "3", "--no-progress"]
TINY = {
    "moons": ["--steps", "200", "--draws", "30", "--n-train", "50", "--n-test", "20", "--restarts", "1"],
    "circles": ["--steps", "200", "--draws", "30", "--n-train", "50", "--n-test", "20", "--restarts", "1"],
    "toy": ["--steps", "200", "--draws", "30", "--n-train", "50", "--n-test", "20", "--restarts", "1", "--all-priors",
            "--priors", "normal", "--hyperpriors", "fixed,halfnormal", "--jobs", "1"],
    "regression": ["--steps", "200", "--draws", "40", "--beta", "1", "--restarts", "2"],
    "mnist-cnn": [*MNIST, "--channels", "2", "2", "--dense", "4"],
    "mnist-bbb": [*MNIST, "--prune"],
}
RUNS = {"moons": 1, "circles": 1, "toy": 4, "regression": 2, "mnist-cnn": 1, "mnist-bbb": 1}


def test_every_experiment_is_listed():
    # ``uci`` writes a table of records, not run folders: tests/test_uci.py runs it on the shipped yacht splits.
    assert set(TINY) | {"uci"} == set(cli.EXPERIMENTS)


@pytest.mark.parametrize("name", sorted(TINY))
def test_experiment_runs_and_writes_a_datatree(name, tmp_path, monkeypatch, mnist_tiny_dir,
                                               tiny_checksums, capsys):
    extra = []
    if name.startswith("mnist"):
        monkeypatch.setattr(mnist, "CHECKSUMS", tiny_checksums)
        shutil.copytree(mnist_tiny_dir, tmp_path / "mnist")
        extra = ["--data-dir", str(tmp_path / "mnist")]
    code = cli.main([name, *TINY[name], *extra, "--out", str(tmp_path / "out"),
                     "--figures", str(tmp_path / "fig")])
    assert code == 0, capsys.readouterr().err
    folders = sorted(p.parent for p in (tmp_path / "out").rglob("metrics.json"))
    assert len(folders) == RUNS[name]
    for folder in folders:
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["experiment"] == name
        idata = az.from_netcdf(folder / "idata.nc")
        assert {"fit", "fit_stats", "sample_stats"} <= set(idata.children)
        assert idata["fit_stats"]["elbo"].sizes["step"] == metrics["steps"]
    assert list((tmp_path / "fig").rglob("*.png"))
