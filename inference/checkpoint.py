"""Checkpoints of an ADVI fit: everything its step function updates, as netCDF.

A checkpoint holds the variational parameters, the optimizer's state (Adam's
moments and step count) of either engine, the ELBO trace and the wall time so far, plus a
signature of the fit: every variable's name and shape, the data's shapes, the
family, each state array's shape and the optimisation settings (engine, optimizer,
learning rate and its decays, batch size, KL weight, Monte Carlo draws, seed).
Decays at steps the checkpoint has not reached may differ. Resuming
restores the arrays and checks the signature, so a checkpoint of another
architecture or other settings is refused instead of half-loaded.
Random generators are not stored: the JAX engine derives each step's noise
from ``(seed, step)`` anyway, and :func:`inference.fit` re-seeds the PyMC
engine from ``(seed, step)`` (under pytensor's JAX backend the compiled
function keeps its own copy of the generators, so they must be seeded before
compiling).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import xarray as xr

from inference.io import atomic_write

FORMAT = "bnn-zoo-advi-checkpoint/2"  # 2: either engine's state


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or from a different model."""


@dataclass
class FitState:
    """Everything a fit's steps update (parameters and optimizer state), as a list of arrays."""

    get: Callable[[], list[np.ndarray]]
    set: Callable[[list[np.ndarray]], None]
    signature: str

    @classmethod
    def of(cls, get, set, group, model, settings: dict) -> "FitState":
        """``get``/``set`` read and replace the state arrays; the signature comes from the rest."""
        arrays = [np.asarray(a) for a in get()]
        signature = {
            "family": type(group).__name__,
            "variables": [[name, list(shape)] for name, _, shape, _ in group.ordering.values()],
            "data": [[v.name, list(v.get_value().shape)] for v in model.data_vars],
            "state": [[list(a.shape), str(a.dtype)] for a in arrays],
            "settings": settings,
        }
        return cls(get, set, json.dumps(signature, sort_keys=True))

    def save(self, path, elbo: np.ndarray, seconds: float) -> Path:
        """Write the current state atomically (a reader never sees half a file)."""
        data = {
            f"state_{i}": (tuple(f"state_{i}_{j}" for j in range(np.ndim(a))), np.asarray(a))
            for i, a in enumerate(self.get())
        }
        data["elbo"] = ("step", np.asarray(elbo, dtype="float64"))
        attrs = {"format": FORMAT, "signature": self.signature, "steps_done": len(elbo), "seconds": seconds}
        ds = xr.Dataset(data, attrs=attrs)
        return atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="netcdf4"))

    def restore(self, ds: xr.Dataset, path, *, steps: int) -> tuple[np.ndarray, float]:
        """Load a checkpoint from :func:`load`; returns (ELBO so far, seconds so far)."""
        done = int(ds.attrs["steps_done"])
        saved, current = _taken(ds.attrs["signature"], done), _taken(self.signature, done)
        if saved != current:
            raise CheckpointError(
                f"checkpoint {path} was written for a different model or settings "
                f"({_difference(saved, current)})"
            )
        if done > steps:
            raise CheckpointError(f"checkpoint {path} has {done} steps, more than the {steps} asked for")
        self.set([ds[f"state_{i}"].values for i in range(len(json.loads(self.signature)["state"]))])
        return ds["elbo"].values, float(ds.attrs["seconds"])


def load(path) -> xr.Dataset:
    """Read a checkpoint written by :meth:`FitState.save` (checks it is one)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint to resume from at {path}")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except (OSError, ValueError) as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err}") from err
    if ds.attrs.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a bnn-zoo ADVI checkpoint")
    return ds


def _taken(signature: str, done: int) -> str:
    """The signature as far as the first ``done`` steps used it.

    A learning-rate decay at a step not yet taken (``settings["lr_decay"]``,
    ``[step, factor]`` pairs) does not matter to them: a resumed fit may add
    or change it.
    """
    sig = json.loads(signature)
    settings = sig.get("settings", {})
    decay = [pair for pair in settings.pop("lr_decay", []) if pair[0] < done]
    if decay:
        settings["lr_decay"] = decay
    return json.dumps(sig, sort_keys=True)


def _difference(saved: str, current: str) -> str:
    """The first difference between two signatures, in words."""
    saved, current = json.loads(saved), json.loads(current)
    if saved.get("family") != current["family"]:
        return f"family {saved.get('family')} vs {current['family']}"
    for key in ("variables", "data"):
        a = {name: tuple(shape) for name, shape in saved.get(key, [])}
        b = {name: tuple(shape) for name, shape in current[key]}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                return f"{name}: {a.get(name, 'absent')} in the checkpoint, {b.get(name, 'absent')} here"
    a, b = saved.get("settings", {}), current["settings"]
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            return f"{name}: {a.get(name)} in the checkpoint, {b.get(name)} here"
    return "optimizer state differs"
