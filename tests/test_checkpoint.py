"""Checkpoints: the state round-trips, a resumed fit continues, a foreign one is refused."""

import numpy as np
import pytest
import xarray as xr

import bnn_zoo
from bnn_zoo import CheckpointError
from bnn_zoo.data import toy
from bnn_zoo.inference.advi import optim
from bnn_zoo.models import mlp_classifier

FAST = dict(optimizer=optim.make("adam", 0.05, 400), progressbar=False, random_seed=3)


@pytest.fixture(scope="module")
def split():
    return toy.load("moons", n_train=200, n_test=10, seed=0)


def model(split, hidden=(5, 5), **kw):
    return mlp_classifier(split.X_train, split.y_train, hidden=hidden, **kw)


def resume(path):
    return bnn_zoo.Checkpoint(path, resume=True)


def fit(m, **kw):
    return bnn_zoo.fit(m, **{**FAST, **kw})


def test_checkpoint_round_trips_the_whole_state(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    first = fit(model(split), steps=60, checkpoint=bnn_zoo.Checkpoint(ckpt, every=25))
    assert ckpt.is_file() and not list(tmp_path.glob(".*"))  # no temporary left behind
    with xr.open_dataset(ckpt) as ds:
        # The state's leaves: mu and rho; Adam's counter and two moments of each; the
        # schedule's counter; the step counter; the running mean of mu and rho (averaging).
        leaves = [v for v in ds.data_vars if v.startswith("leaf_")]
        assert len(leaves) == 11 and ds["elbo"].size == 60
        d = first.params["mu"].size
        assert sorted(ds[v].size for v in leaves) == [1, 1, 1] + [d] * 8
    # A fit asked for the same 60 steps resumes at step 60, runs none, and holds
    # exactly the final state.
    again = fit(model(split), steps=60, checkpoint=resume(ckpt))
    assert again.config["resumed_at"] == 60
    for name, value in first.params.items():
        np.testing.assert_array_equal(again.params[name], value)
    np.testing.assert_array_equal(again.elbo, first.elbo)


def test_resumed_fit_continues_from_the_checkpoint(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    full = fit(model(split), steps=400)
    fit(model(split), steps=200, checkpoint=bnn_zoo.Checkpoint(ckpt))
    resumed = fit(model(split), steps=400, checkpoint=bnn_zoo.Checkpoint(ckpt, resume=True))
    assert resumed.config["resumed_at"] == 200 and len(resumed.elbo) == 400
    with xr.open_dataset(ckpt) as ds:  # the step counter (before the running means) went on from 200
        assert ds["elbo"].size == 400 and int(ds["leaf_8"]) == 400
    # The optimizer's moments came back with the parameters: the same path as the
    # uninterrupted fit, step for step, and the same average of its last half.
    np.testing.assert_array_equal(resumed.elbo, full.elbo)
    for name, value in full.params.items():
        np.testing.assert_allclose(resumed.params[name], value, rtol=1e-12)


def test_checkpoint_of_another_fit_is_refused(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    first_fit = fit(model(split), steps=10, checkpoint=bnn_zoo.Checkpoint(ckpt))
    with pytest.raises(CheckpointError, match=r"different fit \(W_0: \[\[2, 5\]\] in the checkpoint, "
                                              r"\[\[2, 6\]\] here"):
        fit(model(split, hidden=(6, 5)), steps=20, checkpoint=resume(ckpt))
    with pytest.raises(CheckpointError, match="model differs: its architecture, priors or their parameters"):
        fit(model(split, hyperprior_params={"alpha": 4.0}), steps=20, checkpoint=resume(ckpt))
    with pytest.raises(CheckpointError, match="init_std: 0.01 in the checkpoint, from another fit here"):
        fit(model(split), init=first_fit, steps=20, checkpoint=resume(ckpt))
    # Another method is named as the difference, before the settings that follow from it (issue 52).
    for method in ("fullrank_advi", "lowrank_advi"):
        with pytest.raises(CheckpointError, match=f"different fit \\(method: advi in the checkpoint, {method} here\\)"):
            fit(model(split), method=method, init=first_fit, steps=20, checkpoint=resume(ckpt))
    with pytest.raises(CheckpointError, match="beta: 1.0 in the checkpoint, 0.5 here"):
        fit(model(split), objective=bnn_zoo.ELBO(beta=0.5), steps=20, checkpoint=resume(ckpt))
    with pytest.raises(CheckpointError, match="more than"):
        fit(model(split), steps=5, checkpoint=resume(ckpt))
    fewer = toy.load("moons", n_train=150, n_test=10, seed=0)
    with pytest.raises(CheckpointError, match=r"X: \[\[200, 2\].*in the checkpoint, \[\[150, 2\]"):
        fit(model(fewer), steps=20, checkpoint=resume(ckpt))
    other = toy.load("moons", n_train=200, n_test=10, seed=1)  # same shapes, other values
    with pytest.raises(CheckpointError, match="the values of data 'X' differ"):
        fit(model(other), steps=20, checkpoint=resume(ckpt))


def test_a_resume_may_change_the_optimizer_and_says_so(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    fit(model(split), steps=100, checkpoint=bnn_zoo.Checkpoint(ckpt))
    slower = optim.make("adam", 0.005, 200)
    resumed = fit(model(split), steps=200, checkpoint=resume(ckpt), optimizer=slower)
    assert resumed.config["history"] == [[0, "adam(lr=constant(0.05))"],
                                         [100, "adam(lr=constant(0.005))"]]
    with pytest.raises(CheckpointError, match="optimizer's state has another structure"):
        fit(model(split), steps=200, checkpoint=resume(ckpt), optimizer=optim.make("sgd", 0.005, 200))
    # A finished fit resumed for no more steps: another optimizer would make none of them, and the
    # result would name it all the same.
    with pytest.raises(CheckpointError, match=r"holds all 200 steps, made with adam\(lr=constant\(0.005\)\): "
                                              r"adam\(lr=constant\(0.01\)\) would make none"):
        fit(model(split), steps=200, checkpoint=resume(ckpt), optimizer=optim.make("adam", 0.01, 200))


def test_missing_or_foreign_checkpoint_is_refused(split, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        fit(model(split), steps=10, checkpoint=resume(tmp_path / "absent.nc"))
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a netCDF file")
    with pytest.raises(CheckpointError, match="cannot read"):
        fit(model(split), steps=10, checkpoint=resume(junk))


def test_a_running_mean_resumes_only_with_the_same_window(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    fit(model(split), steps=100, checkpoint=bnn_zoo.Checkpoint(ckpt), average=0.5)  # averages from step 50
    # 200 steps average from step 100, after the checkpoint's 100: the mean starts afresh there.
    later = fit(model(split), steps=200, checkpoint=bnn_zoo.Checkpoint(tmp_path / "later.nc", resume=ckpt),
                average=0.5)  # continues from ckpt, writes elsewhere
    whole = fit(model(split), steps=200, average=0.5)
    for name, value in whole.params.items():
        np.testing.assert_allclose(later.params[name], value, rtol=1e-12)
    # 150 steps would average from step 75, inside the checkpoint's window: refused.
    with pytest.raises(CheckpointError, match="averages its iterates from step 50, these settings from step 75"):
        fit(model(split), steps=150, checkpoint=resume(ckpt), average=0.5)
