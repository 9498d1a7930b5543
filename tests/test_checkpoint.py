"""Checkpoints: the state round-trips, a resumed fit continues, a foreign one is refused."""

import numpy as np
import pytest
import xarray as xr

from data import toy
from inference import CheckpointError, fit
from models import mlp_classifier

FAST = dict(learning_rate=0.05, progressbar=False, seed=3)


@pytest.fixture(scope="module")
def split():
    return toy.load("moons", n_train=200, n_test=10, seed=0)


def model(split, hidden=(5, 5)):
    return mlp_classifier(split.X_train, split.y_train, hidden=hidden)


def params(result):
    return {k: np.asarray(v.get_value()) for k, v in result.approx.groups[0].params_dict.items()}


def test_checkpoint_round_trips_the_whole_state(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    first = fit(model(split), steps=60, checkpoint=ckpt, checkpoint_every=25, **FAST)
    assert ckpt.is_file() and not list(tmp_path.glob(".*"))  # no temporary left behind
    with xr.open_dataset(ckpt) as ds:
        # mu and rho, plus Adam's two moments of each and its step counter.
        state = [v for v in ds.data_vars if v.startswith("state_")]
        assert len(state) == 7 and ds.attrs["steps_done"] == 60 and ds["elbo"].size == 60
        d = params(first)["mu"].size
        assert sorted(ds[v].size for v in state) == [1] + [d] * 6
    # A fit asked for the same 60 steps resumes at step 60, runs none, and holds
    # exactly the final state.
    again = fit(model(split), steps=60, resume=ckpt, **FAST)
    assert again.config["resumed_at"] == 60
    for name, value in params(first).items():
        np.testing.assert_array_equal(params(again)[name], value)
    np.testing.assert_array_equal(again.elbo, first.elbo)


def test_resumed_fit_continues_from_the_checkpoint(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    full = fit(model(split), steps=400, **FAST)
    fit(model(split), steps=200, checkpoint=ckpt, **FAST)
    with xr.open_dataset(ckpt) as ds:
        adam_t = [v for v in ds.data_vars if ds[v].size == 1]
        assert len(adam_t) == 1 and float(ds[adam_t[0]]) == 200
    resumed = fit(model(split), steps=400, resume=ckpt, checkpoint=ckpt, **FAST)
    assert resumed.config["resumed_at"] == 200 and len(resumed.elbo) == 400
    with xr.open_dataset(ckpt) as ds:  # Adam's step counter carried on from 200
        assert float(ds[adam_t[0]]) == 400 and ds.attrs["steps_done"] == 400
    np.testing.assert_array_equal(resumed.elbo[:200], full.elbo[:200])  # same first half
    # Adam's moments came back with the parameters: the second half carries on at
    # the level where the first stopped instead of restarting (a reset Adam or
    # parameters would jump back towards the initial ELBO around -140).
    assert abs(resumed.elbo[200:220].mean() - full.elbo[180:200].mean()) < 0.15 * abs(full.elbo[180:200].mean())
    assert abs(resumed.elbo_final - full.elbo_final) < 0.1 * abs(full.elbo_final)
    assert resumed.elbo[200:].mean() > resumed.elbo[:20].mean()


def test_checkpoint_of_another_architecture_is_refused(split, tmp_path):
    ckpt = tmp_path / "fit.nc"
    fit(model(split), steps=10, checkpoint=ckpt, **FAST)
    with pytest.raises(CheckpointError, match=r"different model.*W_0"):
        fit(model(split, hidden=(6, 5)), steps=20, resume=ckpt, **FAST)
    with pytest.raises(CheckpointError, match="family"):
        fit(model(split), method="fullrank_advi", steps=20, resume=ckpt, **FAST)
    with pytest.raises(CheckpointError, match="more than"):
        fit(model(split), steps=5, resume=ckpt, **FAST)
    with pytest.raises(CheckpointError, match=r"learning_rate: 0.05 in the checkpoint, 0.01 here"):
        fit(model(split), steps=20, resume=ckpt, **{**FAST, "learning_rate": 0.01})
    fewer = toy.load("moons", n_train=150, n_test=10, seed=0)
    with pytest.raises(CheckpointError, match=r"X: \(200, 2\) in the checkpoint, \(150, 2\) here"):
        fit(model(fewer), steps=20, resume=ckpt, **FAST)


def test_missing_or_foreign_checkpoint_is_refused(split, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        fit(model(split), steps=10, resume=tmp_path / "absent.nc", **FAST)
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a netCDF file")
    with pytest.raises(CheckpointError, match="cannot read"):
        fit(model(split), steps=10, resume=junk, **FAST)
