"""Bayes by Backprop on MNIST MLPs: pruning helpers and the experiment script on the MNIST fixture."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bnn_zoo.data import mnist as mnist_data
from bnn_zoo.evaluation.pruning import FRACTIONS, cutoff, keep_mask, prune_table, pruning_masks
from bnn_zoo.experiments.mnist import bbb as mnist_bbb
from tests.conftest import MNIST_TINY, command_env, mnist_tiny_sums

QUICK = ["--epochs", "2", "--batch-size", "50", "--draws", "3", "--no-progress"]


def test_keep_mask_removes_the_lowest_scores_exactly():
    score = np.array([5.0, 1.0, 3.0, 1.0, 4.0, 0.5, 2.0, 6.0])
    np.testing.assert_array_equal(keep_mask(score, 0.0), np.ones(8, bool))
    np.testing.assert_array_equal(keep_mask(score, 0.5), score > 2.0)
    keep = keep_mask(score, 0.25)  # two removed: 0.5 and the first of the tied 1.0s
    np.testing.assert_array_equal(np.flatnonzero(~keep), [1, 5])
    assert cutoff(score, 0.5) == pytest.approx(np.median(score))
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\)"):
        keep_mask(score, 1.0)


def test_prune_table_ranks_by_signal_to_noise_or_magnitude():
    # Weight 0 is large but uncertain, weight 1 small but certain: the two
    # methods disagree about which to drop first.
    mu, sd = np.array([3.0, 0.5, 2.0, 1.0]), np.array([10.0, 0.01, 1.0, 1.0])
    removed = []

    def test_error(w):
        removed.append(np.flatnonzero(w == 0).tolist())
        return float(np.sum(w == 0)) / 4

    table = prune_table(mu, pruning_masks(mu, sd, fractions=(0.0, 0.25, 0.5)), test_error)
    assert list(table.columns) == ["fraction", "method", "n_weights_kept", "test_error"]
    assert table["n_weights_kept"].tolist() == [4, 3, 2, 4, 3, 2]
    assert table["test_error"].tolist() == [0.0, 0.25, 0.5] * 2
    assert removed == [[], [0], [0, 3], [], [1], [1, 3]]  # snr first, then naive
    with pytest.raises(ValueError, match="unknown pruning method random"):
        pruning_masks(mu, sd, methods=("random",))


@pytest.fixture
def data_copy(monkeypatch, mnist_tiny_dir, tiny_checksums, tmp_path):
    monkeypatch.setattr(mnist_data, "CHECKSUMS", tiny_checksums)
    shutil.copytree(mnist_tiny_dir, tmp_path / "mnist")
    return tmp_path / "mnist"


def run(tmp_path, *extra):
    argv = ["--data-dir", str(tmp_path / "mnist"), *QUICK, "--out", str(tmp_path / "out"),
            "--figures", str(tmp_path / "fig"), *extra]
    return mnist_bbb.main(argv)


def test_script_writes_metrics_pruning_table_and_figures(data_copy, tmp_path, capsys):
    assert run(tmp_path, "--prior", "scale_mixture", "--prune") == 0
    target = tmp_path / "out" / "mnist_bbb_2x400" / "scale_mixture-fixed-s0"
    m = json.loads((target / "metrics.json").read_text())
    for key in ("test_error", "test_error_mean_weights", "val_error", "nll", "ece", "brier",
                "epochs", "fit_seconds", "ms_per_step", "kl_weighting", "normalize"):
        assert key in m, key
    assert m["n_train"] == 500 and m["steps"] == 2 * (500 // 50) and m["epochs"] == 2
    assert m["n_params"] == 784 * 400 + 400 + 400 * 400 + 400 + 400 * 10 + 10
    assert m["kl_weighting"] == "blundell" and m["normalize"] == "126"

    table = pd.read_csv(target / "pruning.csv")
    assert list(table.columns) == ["fraction", "method", "n_weights_kept", "test_error"]
    assert sorted(set(table["method"])) == ["naive", "signal_to_noise"]
    assert table["fraction"].tolist() == list(FRACTIONS) * 2
    kept = table[table.method == "signal_to_noise"]["n_weights_kept"].to_numpy()
    np.testing.assert_array_equal(kept, [m["n_params"] - round(f * m["n_params"]) for f in FRACTIONS])
    # Nothing pruned: the posterior-mean network.
    assert (table[table.fraction == 0]["test_error"] == m["test_error_mean_weights"]).all()
    assert set(m["snr_cutoffs_db"]) == {"0.25", "0.5", "0.75", "0.95", "0.98"}
    figures = sorted(p.name for p in (tmp_path / "fig" / "mnist_bbb_2x400").iterdir())
    assert figures == [f"{f}_scale_mixture-fixed.png" for f in
                       ("elbo", "pruned_weights", "reliability", "snr")]
    assert (target / "variational.nc").is_file() and (target / "reliability.csv").is_file()
    assert "test error" in capsys.readouterr().out


def test_gaussian_prior_scale_and_constant_weighting(data_copy, tmp_path):
    assert run(tmp_path, "--kl-weighting", "constant", "--prior-scale", "0.5",
               "--normalize", "255", "--limit-train", "200", "--lr-decay-epochs", "1") == 0
    target = tmp_path / "out" / "mnist_bbb_2x400" / "gaussian-fixed-s0"
    m = json.loads((target / "metrics.json").read_text())
    assert m["prior_scale"] == 0.5 and m["kl_weighting"] == "constant" and m["n_train"] == 200
    assert m["lr_decay_epochs"] == [1] and m["lr_decay_factor"] == 0.1
    with xr.open_dataset(target / "variational.nc") as ds:  # the fit got it: 4 steps an epoch
        assert json.loads(ds.attrs["history"]) == [[0, "adam(lr=constant(0.001) x 0.1 from step 4)"]]
    assert not (tmp_path / "out" / "mnist_bbb_2x400" / "gaussian-fixed-s0" / "pruning.csv").exists()


@pytest.mark.parametrize("extra, message", [
    (["--hidden", "500"], "--hidden: invalid choice: 500"),
    (["--kl-weighting", "linear"], "--kl-weighting: invalid choice: 'linear'"),
    (["--normalize", "100"], "--normalize: invalid choice: '100'"),
    (["--prior", "gamma"], "--prior: invalid choice: 'gamma'"),
    (["--beta", "0"], "--beta: must be positive"),
    (["--lr", "inf"], "--lr: must be positive and finite"),
    (["--batch-size", "501"], "larger than the training set (500 rows)"),
    (["--hyperprior", "halfnormal", "--prior-scale", "2"], "--prior-scale needs --hyperprior fixed"),
    (["--prior", "flat", "--prior-scale", "3"], "--prior-scale 3: --prior flat has no scale"),
    (["--resume"], "no checkpoint to resume from"),
    (["--lr-decay-epochs", "0"], "--lr-decay-epochs: epochs must be >= 1"),
    (["--lr-decay-epochs", "80,x"], "--lr-decay-epochs: must be comma-separated epochs"),
    (["--lr-decay-factor", "0"], "--lr-decay-factor: must be positive"),
    (["--lr-decay-epochs", "2"], "--lr-decay-epochs 2 is not before --epochs 2"),
    (["--epochs", "1000000000000"], "--epochs 1,000,000,000,000 is more than 100,000,000 steps"),
    (["--seed", "-1"], "--seed: must be an integer in [0, 2**31), got -1"),
])
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(data_copy, tmp_path, capsys, extra,
                                                              message):
    try:
        code = run(tmp_path, *extra)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "fig").exists()


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """One epoch of QUICK's fit (Gaussian prior, fixed scale: 10 steps, 500 training images in batches
    of 50), made once for the tests below. Use :func:`finished`'s copy."""
    folder = tmp_path_factory.mktemp("bbb")
    shutil.copytree(MNIST_TINY, folder / "mnist")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mnist_data, "CHECKSUMS", mnist_tiny_sums())
        assert run(folder, "--epochs", "1") == 0
    return folder


@pytest.fixture
def finished(data_copy, one_epoch, tmp_path):
    """A copy of :func:`one_epoch`'s run folder and figures in ``tmp_path`` (beside ``data_copy``)."""
    for name in ("out", "fig"):
        shutil.copytree(one_epoch / name, tmp_path / name)
    return tmp_path / "out" / "mnist_bbb_2x400" / "gaussian-fixed-s0"


def test_resume_refuses_a_checkpoint_fitted_under_other_settings(finished, tmp_path, capsys):
    # The objective's settings are in the checkpoint's fingerprint: the prior's scale (a
    # constant of the model's graph) and the data as normalised (a hash of the values).
    target = finished  # one epoch of QUICK's fit
    before = (target / "metrics.json").read_bytes()
    capsys.readouterr()
    for extra, message in ((["--prior-scale", "2"], "the model differs"),
                           (["--normalize", "255"], "the values of data 'X' differ")):
        assert run(tmp_path, "--epochs", "1", "--resume", *extra) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    assert (target / "metrics.json").read_bytes() == before


def test_a_diverged_fit_can_be_resumed_with_a_smaller_learning_rate(finished, tmp_path, capsys):
    target = finished  # --epochs 1: 10 steps, 500 training images in batches of 50
    capsys.readouterr()
    assert run(tmp_path, "--epochs", "3", "--resume", "--lr", "1000") == 1
    err = capsys.readouterr().err
    assert "ELBO is" in err and "--resume continues from the last checkpoint" in err
    assert json.loads((target / "metrics.json").read_text())["steps"] == 10  # untouched
    assert run(tmp_path, "--epochs", "3", "--resume", "--lr", "0.0005") == 0
    m = json.loads((target / "metrics.json").read_text())
    assert m["resumed_at_step"] == 10 and m["steps"] == 30
    assert m["optimizer_history"] == [[0, "adam(lr=constant(0.001))"], [10, "adam(lr=constant(0.0005))"]]


def test_a_run_killed_and_resumed_ends_where_an_uninterrupted_one_does(data_copy, tmp_path, tiny_checksums):
    """kill -9 mid-fit, then --resume: the same final state as a fit never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # 100 steps, a checkpoint every 10: killed at the first, 90 steps and the evaluation before the end
    args = ["--data-dir", str(data_copy), "--epochs", "10", "--batch-size", "50", "--draws", "3",
            "--checkpoint-every", "10", "--no-progress", "--figures", str(tmp_path / "fig")]
    script = ("import sys; from bnn_zoo.data import mnist; mnist.CHECKSUMS.update(%r); "
              "from bnn_zoo.experiments.mnist import bbb; sys.exit(bbb.main(sys.argv[1:]))"
              % tiny_checksums)
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", script, *args, "--out", str(killed)],
                            env=command_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = killed / "mnist_bbb_2x400" / "gaussian-fixed-s0.checkpoint.nc"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert checkpoint.exists() and not (killed / "mnist_bbb_2x400" / "gaussian-fixed-s0").exists()
    assert mnist_bbb.main([*args, "--out", str(killed), "--resume"]) == 0
    assert mnist_bbb.main([*args, "--out", str(tmp_path / "whole")]) == 0
    finals = [xr.open_dataset(d / "mnist_bbb_2x400" / "gaussian-fixed-s0" / "variational.nc").load()
              for d in (killed, tmp_path / "whole")]
    assert int(json.loads(finals[0].attrs["history"])[0][0]) == 0 and finals[0]["elbo"].size == 100
    for name in finals[1].data_vars:
        np.testing.assert_array_equal(finals[0][name].values, finals[1][name].values)
