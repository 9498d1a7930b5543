"""The Bayesian CNN: model structure, forward pass, and the experiment script on the MNIST fixture."""

import contextlib
import io
import json
import shutil

import jax
import numpy as np
import pandas as pd
import pytest
from jax import lax

import optax

import bnn_zoo
from bnn_zoo.data import mnist as mnist_data
from bnn_zoo.experiments.mnist import cnn as mnist_cnn
from bnn_zoo.inference.compile.jaxmodel import Layout, compile_model
from bnn_zoo.models.cnn import cnn_classifier
from tests.conftest import MNIST_TINY, mnist_tiny_sums

# A small network: CI fits a few steps of it, never the full-size one on full MNIST.
SMALL = ["--channels", "3", "4", "--dense", "8", "--batch-size", "50", "--draws", "5",
         "--no-progress"]


@pytest.fixture
def tiny(monkeypatch, mnist_tiny_dir, tiny_checksums):
    """The experiment reads the fixture, verified against the fixture's own hashes."""
    monkeypatch.setattr(mnist_data, "CHECKSUMS", tiny_checksums)
    return mnist_tiny_dir


def images(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 1, 28, 28)), rng.integers(0, 10, n)


def test_seed_004_architecture():
    X, y = images()
    model = cnn_classifier(X, y)
    shapes = {rv.name: tuple(model[rv.name].shape.eval()) for rv in model.free_RVs}
    assert shapes == {
        "scale_0": (), "W_0": (5, 5, 1, 32), "b_0": (32,),
        "scale_1": (), "W_1": (5, 5, 32, 32), "b_1": (32,),
        "scale_2": (), "W_2": (512, 64), "b_2": (64,),  # 32 channels x 4 x 4 after two conv+pool
        "scale_3": (), "W_3": (64, 10), "b_3": (10,),
    }
    assert model.named_vars_to_dims["W_1"] == ("kernel_row", "kernel_col", "conv_0", "conv_1")
    assert model.named_vars_to_dims["p"] == ("obs", "class")
    flat = cnn_classifier(X, y, prior="flat")
    assert not [rv for rv in flat.free_RVs if rv.name.startswith("scale")]


def test_forward_pass_matches_a_jax_cnn():
    rng = np.random.default_rng(2)  # two channels, so a wrong NCHW -> NHWC transpose shows
    X, y = rng.random((6, 2, 16, 16)), rng.integers(0, 10, 6)
    model = cnn_classifier(X, y, channels=(3, 4), dense=(5,))
    rng = np.random.default_rng(1)
    point = {v.name: rng.normal(size=tuple(model[v.name.removesuffix("_log__")].shape.eval()))
             for v in model.value_vars}
    density = compile_model(model, Layout.of(model, point))  # what the fit and the draws evaluate
    p = density.select(("p",))([point[v.name] for v in model.value_vars],
                               *[v.get_value() for v in model.data_vars])[0]

    def conv_tanh_pool(h, W, b):  # NHWC; features flattened over (row, col, channel)
        h = lax.conv_general_dilated(h, W, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return lax.reduce_window(np.tanh(h + b), -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    h = conv_tanh_pool(X.transpose(0, 2, 3, 1), point["W_0"], point["b_0"])
    h = np.asarray(conv_tanh_pool(h, point["W_1"], point["b_1"])).reshape(len(X), -1)
    h = np.tanh(h @ point["W_2"] + point["b_2"]) @ point["W_3"] + point["b_3"]
    np.testing.assert_allclose(p, jax.nn.softmax(h, axis=-1), rtol=1e-10, atol=1e-12)


def test_bad_model_inputs_raise():
    X, y = images()
    with pytest.raises(ValueError, match=r"\(n, c, h, w\)"):
        cnn_classifier(X[:, 0], y)
    with pytest.raises(ValueError, match="too small"):
        cnn_classifier(X[:, :, :10, :10], y)
    with pytest.raises(ValueError, match="labels"):
        cnn_classifier(X, y + 10)


def test_float32_minibatch_fit_on_jax_learns_and_stays_float32(tiny):
    mn = mnist_data.load(tiny)
    with bnn_zoo.precision(True):
        model = cnn_classifier(mn.X_train, mn.y_train, channels=(4, 4), dense=(16,))
    result = bnn_zoo.fit(model, steps=150, batch_size=50, optimizer=optax.adam(5e-3),
                         method=bnn_zoo.MeanField(init_std=1e-3), progressbar=False)
    assert all(p.dtype == np.float32 for p in result.params.values())
    assert result.elbo[-20:].mean() > result.elbo[:20].mean()


def run(tmp_path, *extra, out="out"):
    argv = ["--data-dir", str(tmp_path / "mnist"), "--epochs", "1", *SMALL,
            "--out", str(tmp_path / out), "--figures", str(tmp_path / "fig"), *extra]
    return mnist_cnn.main(argv)


@pytest.fixture
def data_copy(tiny, tmp_path):
    shutil.copytree(tiny, tmp_path / "mnist")
    return tmp_path / "mnist"


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """One epoch of the small network on the fixture (10 steps of 50 images, a checkpoint every 3
    steps), made once for the tests below, and what it printed. Use :func:`finished`'s copy."""
    folder = tmp_path_factory.mktemp("cnn")
    shutil.copytree(MNIST_TINY, folder / "mnist")
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setattr(mnist_data, "CHECKSUMS", mnist_tiny_sums())
        assert run(folder, "--checkpoint-every", "3") == 0
    return folder, printed.getvalue()


@pytest.fixture
def finished(tiny, one_epoch, tmp_path):
    """A copy of :func:`one_epoch`'s data, run folder and figures in ``tmp_path``, and what the run printed."""
    folder, printed = one_epoch
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    return printed


def test_script_writes_the_output_contract_and_resumes(finished, tmp_path):
    # the run: one epoch, --checkpoint-every 3 (one_epoch)
    target = tmp_path / "out" / "mnist_cnn" / "normal-inversegamma-s0"
    metrics = json.loads((target / "metrics.json").read_text())
    for key in ("accuracy", "test_error", "nll", "brier", "ece", "epochs", "draws",
                "fit_seconds", "predict_seconds"):
        assert key in metrics
    assert metrics["test_error"] == pytest.approx(1 - metrics["accuracy"])
    assert metrics["n_train"] == 500 and metrics["n_test"] == 200 and metrics["steps"] == 10
    per_image = pd.read_csv(target / "per_image.csv")
    assert len(per_image) == 200 and (per_image["label"] == mnist_data.load(tmp_path / "mnist").y_test).all()
    accuracy = (per_image["label"] == per_image["predicted"]).mean()
    assert accuracy == pytest.approx(metrics["accuracy"])
    table = pd.read_csv(target / "reliability.csv")
    assert table["count"].sum() == 200
    assert (table["count"] * table["accuracy"]).sum() == pytest.approx(accuracy * 200)
    assert (target / "variational.nc").is_file()
    assert not list(target.parent.glob("*.checkpoint.nc"))  # moved into the run folder
    figures = sorted(p.name for p in (tmp_path / "fig" / "mnist_cnn").iterdir())
    assert figures == [f"{f}_normal-inversegamma.png" for f in
                       ("confident_mistakes", "elbo", "least_confident", "reliability", "variance_vs_error")]
    assert "test error" in finished

    # --resume on a finished run re-evaluates its saved state without refitting.
    assert run(tmp_path, "--resume") == 0
    again = json.loads((target / "metrics.json").read_text())
    assert again["resumed_at_step"] == 10 and again["accuracy"] == metrics["accuracy"]


def test_resume_continues_an_interrupted_fit(finished, tmp_path):
    target = tmp_path / "out" / "mnist_cnn" / "normal-inversegamma-s0"  # one epoch: 10 steps of 50
    # Pretend the two-epoch fit below was interrupted after its first epoch.
    shutil.move(target / "variational.nc", target.parent / f"{target.name}.checkpoint.nc")
    shutil.rmtree(target)
    assert run(tmp_path, "--epochs", "2", "--resume") == 0
    metrics = json.loads((target / "metrics.json").read_text())
    assert metrics["resumed_at_step"] == 10 and metrics["steps"] == 20


@pytest.mark.parametrize("extra, message", [
    (["--epochs", "0"], "--epochs: must be a positive integer"),
    (["--batch-size", "0"], "--batch-size: must be a positive integer"),
    (["--batch-size", "501"], "larger than the training set (500 rows)"),
    (["--prior", "gamma"], "invalid choice: 'gamma'"),
    (["--resume"], "no checkpoint to resume from"),
    (["--epochs", "1", "--lr-decay-epochs", "1"], "--lr-decay-epochs 1 is not before --epochs 1"),
    (["--channels", "8", "8", "8", "8"], "--channels: 4 conv layers leave no pixels"),
    (["--seed", "-1"], "--seed: must be an integer in [0, 2**31), got -1"),
])
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(data_copy, tmp_path, capsys, extra, message):
    argv = ["--data-dir", str(data_copy), *SMALL, "--out", str(tmp_path / "out"),
            "--figures", str(tmp_path / "fig")]
    try:
        code = mnist_cnn.main(argv + extra)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "fig").exists()


def test_corrupt_or_missing_data_exit_2(data_copy, tmp_path, capsys, tiny_checksums):
    import gzip

    path = data_copy / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[-1] ^= 1
    path.write_bytes(gzip.compress(bytes(raw)))
    assert run(tmp_path) == 2
    err = capsys.readouterr().err
    assert "t10k-labels-idx1-ubyte" in err and tiny_checksums["t10k-labels-idx1-ubyte"] in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()

    path.unlink()
    argv = ["--data-dir", str(data_copy), *SMALL, "--out", str(tmp_path / "out"),
            "--figures", str(tmp_path / "fig")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mnist_data, "MIRRORS", ("http://127.0.0.1:9/",))  # offline
        assert mnist_cnn.main(argv) == 2
    assert "put the four IDX files there" in capsys.readouterr().err


def test_resume_from_another_architecture_exits_2(finished, tmp_path, capsys):
    target = tmp_path / "out" / "mnist_cnn" / "normal-inversegamma-s0"  # one epoch of channels 3, 4
    before = (target / "metrics.json").read_bytes()
    assert run(tmp_path, "--channels", "3", "5", "--resume") == 2
    err = capsys.readouterr().err
    assert "different fit" in err and "W_1" in err and len(err.strip().splitlines()) == 1
    assert (target / "metrics.json").read_bytes() == before  # the finished run is untouched


def test_unwritable_output_is_refused_before_fitting(data_copy, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert run(tmp_path, out="afile/sub") == 2
    err = capsys.readouterr().err
    assert "--out" in err and "not a writable folder" in err and len(err.strip().splitlines()) == 1
