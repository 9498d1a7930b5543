"""Checkpoints of a fit: the state's leaves, its fingerprint and its history, as netCDF.

A checkpoint holds the leaves of the :class:`~bnn_zoo.inference.advi.core.ADVIState`
(q's parameters, the optimizer's state, the step counter), the ELBO trace and
the wall time so far, the optimizers used and from which step, and the fit's
*fingerprint*: everything that defines the objective (the model's graph with
its constants, such as prior parameters; each data container's shape and a
hash of its values; the family, KL weight and weighting, batch size, Monte
Carlo draws, gradient estimator, seed) and the state's structure. Resuming
checks the fingerprint, so a checkpoint of another model, other data or
other settings is refused instead of continued. The optimizer may change
between runs (a smaller learning rate after a divergence, a later decay);
each change is recorded. The random streams need no storing: the engine
derives each step's noise and each epoch's permutation from the seed.

:func:`bnn_zoo.fit` writes and reads checkpoints as its :class:`Checkpoint`
setting says (``checkpoint=bnn_zoo.Checkpoint(path, every=500, resume=True)``);
:func:`load` reads one for inspection, as a :class:`Saved`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import pymc as pm
import xarray as xr
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import io_toposort
from pytensor.tensor.sharedvar import SharedVariable

from bnn_zoo.inference import defaults
from bnn_zoo.inference.support.io import atomic_write

__all__ = ["FORMAT", "Checkpoint", "CheckpointError", "Saved", "data_digest", "fingerprint", "load",
           "model_digest", "save"]

#: The format tag a checkpoint records and :func:`load` requires: the state's leaves, with the
#: fingerprint of the model and its data.
FORMAT = "bnn-zoo-advi-checkpoint/3"


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or from a different fit.

    A ``ValueError``. Its message names the file and, for a checkpoint of
    another fit, the first difference (a variable's shape, a data
    container's values, a setting, the model's priors or architecture).

    Parameters
    ----------
    *args
        The message, as for any exception.
    **kwargs
        None are accepted, as for any built-in exception.
    """


def model_digest(model: pm.Model) -> str:
    """A hash of the model's log-density graph: its operations, constants and variable names.

    Two models built by the same code with the same settings have the same
    digest; changing a prior's parameter or the architecture changes it.
    The data containers enter by name, shape and dtype only (see
    :func:`data_digest`); other shared variables (the lengths of the model's
    dims) by value.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    str
        A SHA-256 hex digest.
    """
    outputs = model.logp(sum=False)
    containers = set(model.data_vars)
    ids, h = {}, hashlib.sha256()

    def ref(v) -> str:
        if v not in ids:
            if isinstance(v, Constant):
                data = np.asarray(v.data)
                ids[v] = f"c:{data.dtype}:{data.shape}:{hashlib.sha256(data.tobytes()).hexdigest()}"
            elif isinstance(v, SharedVariable):  # a data container, or a dim's length
                value = np.asarray(v.get_value(borrow=True))
                digest = "" if v in containers else hashlib.sha256(value.tobytes()).hexdigest()
                ids[v] = f"s:{v.name}:{value.dtype}:{value.shape}:{digest}"
            else:
                ids[v] = f"v{len(ids)}:{v.name}:{v.type}"
        return ids[v]

    for node in io_toposort([], outputs):
        props = node.op._props_dict() if hasattr(node.op, "_props_dict") else {}
        h.update(f"{type(node.op).__name__}{sorted((k, str(p)) for k, p in props.items())}"
                 f"({','.join(ref(i) for i in node.inputs)})->"
                 f"{','.join(ref(o) for o in node.outputs)};".encode())
    h.update(",".join(ref(o) for o in outputs).encode())
    return h.hexdigest()


def data_digest(model: pm.Model) -> list:
    """The name, shape and a hash of the values of each data container.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    list
        ``[name, shape, "dtype:sha256"]`` per container of ``model.data_vars``.
    """
    out = []
    for v in model.data_vars:
        value = np.ascontiguousarray(v.get_value(borrow=True))
        out.append([v.name, list(value.shape), f"{value.dtype}:{hashlib.sha256(value.tobytes()).hexdigest()}"])
    return out


def fingerprint(model: pm.Model, layout, state, settings: dict) -> str:
    """The fit's fingerprint as canonical JSON (see the module docstring).

    Parameters
    ----------
    model : pymc.Model
        The model fitted.
    layout : Layout
        q's layout (variables and shapes).
    state : ADVIState
        The fit's state (its structure, shapes and dtypes enter; not its values).
    settings : dict
        What defines the objective (JSON-serialisable).

    Returns
    -------
    str
        JSON with sorted keys: ``model``, ``variables``, ``data``, ``state``,
        ``treedef`` and ``settings``.
    """
    leaves, treedef = jax.tree_util.tree_flatten(state)
    return json.dumps({
        "model": model_digest(model),
        "variables": [[name, list(shape)] for name, _, shape, _ in layout.slots],
        "data": data_digest(model),
        "state": [[list(np.shape(a)), str(np.asarray(a).dtype)] for a in leaves],
        "treedef": str(treedef),
        "settings": settings,
    }, sort_keys=True)


@dataclass(frozen=True)
class Checkpoint:
    """Where and how often a fit writes its state, and whether it continues from a saved one.

    ``bnn_zoo.fit(model, checkpoint=bnn_zoo.Checkpoint("fit.nc"))`` writes
    the fit's state to ``fit.nc`` every ``every`` steps and at the end,
    atomically. With ``resume`` the fit first continues from a saved state
    of this model, data and settings (any optimizer of the same state
    structure: the change is recorded in ``config["history"]``); with the
    same optimizer it continues exactly as an uninterrupted fit would.

    Parameters
    ----------
    path : str or os.PathLike
        The netCDF file the fit writes.
    every : int, default bnn_zoo.inference.defaults.CHECKPOINT_EVERY
        Steps between two writes, at least 1.
    resume : bool or str or os.PathLike, default False
        ``True``: continue from ``path``; a path: continue from that file
        (a finished run's saved state, say) and write to ``path``.

    Raises
    ------
    ValueError
        For ``every`` below 1.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Checkpoint("fit.nc", every=1000, resume=True).source
    PosixPath('fit.nc')
    """

    path: str | os.PathLike
    every: int = defaults.CHECKPOINT_EVERY
    resume: bool | str | os.PathLike = False

    def __post_init__(self):
        if not (isinstance(self.every, (int, np.integer)) and self.every >= 1):
            raise ValueError(f"Checkpoint's every must be an integer >= 1, got {self.every!r}")
        path = Path(self.path)
        if path.is_dir():
            raise ValueError(f"Checkpoint's path {str(path)!r} is a folder; name a file in it "
                             f"(bnn_zoo.Checkpoint({str(path / 'fit.nc')!r}))")
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise ValueError(f"Checkpoint's path {str(path)!r} lies under {str(above)!r}, which is a file, not a folder")

    @property
    def source(self) -> Path | None:
        """The file the fit continues from, or ``None`` (no ``resume``)."""
        if self.resume is False or self.resume is None:
            return None
        return Path(self.path if self.resume is True else self.resume)


@dataclass
class Saved:
    """What :func:`load` read: the state's leaves and everything recorded beside them.

    Parameters
    ----------
    path : pathlib.Path
        The file read.
    leaves : list of numpy.ndarray
        The state's leaves, in ``jax.tree_util`` order.
    elbo : numpy.ndarray
        The ELBO trace of the steps done.
    seconds : float
        The fit's wall time so far.
    fingerprint : str
        The fingerprint of the fit that wrote it (:func:`fingerprint`).
    history : list
        ``[step, optimizer description]`` where each run began.
    average_from : int, optional
        The step from which the iterates' running mean began (``None``: no
        averaging).

    Attributes
    ----------
    steps_done : int
        The steps the checkpoint holds (the ELBO trace's length).
    """

    path: Path
    leaves: list[np.ndarray]
    elbo: np.ndarray
    seconds: float
    fingerprint: str
    history: list  # [step, optimizer description] where each run began
    average_from: int | None = None  # where the running mean of the iterates began (if any)

    @property
    def steps_done(self) -> int:
        """The steps the checkpoint holds (the ELBO trace's length)."""
        return len(self.elbo)

    def restore(self, template, fingerprint_now: str):
        """The saved state in the structure of ``template``, after checking the fingerprints.

        Parameters
        ----------
        template : ADVIState
            A state of the resuming fit (its structure and dtypes).
        fingerprint_now : str
            The resuming fit's fingerprint.

        Returns
        -------
        ADVIState
            The saved state, its leaves cast to ``template``'s dtypes.

        Raises
        ------
        CheckpointError
            If the fingerprints differ; the message names the first difference.
        """
        if self.fingerprint != fingerprint_now:
            raise CheckpointError(f"checkpoint {self.path} was written by a different fit "
                                  f"({_difference(self.fingerprint, fingerprint_now)})")
        current, treedef = jax.tree_util.tree_flatten(template)
        leaves = [np.asarray(a, dtype=np.asarray(c).dtype) for a, c in zip(self.leaves, current)]
        return jax.tree_util.tree_unflatten(treedef, leaves)


def save(path, state, *, elbo: np.ndarray, seconds: float, fingerprint_: str, history: list,
         average_from: int | None = None) -> Path:
    """Write the state's leaves and records atomically (a reader never sees half a file).

    Parameters
    ----------
    path : str or os.PathLike
        The netCDF file to write (replaced if it exists).
    state : ADVIState
        The fit's state.
    elbo : numpy.ndarray
        The ELBO trace so far.
    seconds : float
        The fit's wall time so far.
    fingerprint_ : str
        The fit's :func:`fingerprint`.
    history : list
        ``[step, optimizer description]`` where each run began.
    average_from : int, optional
        The step from which the iterates are averaged (``None``: no averaging).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(state)]
    data = {f"leaf_{i}": (tuple(f"leaf_{i}_{j}" for j in range(a.ndim)), a)
            for i, a in enumerate(leaves)}
    data["elbo"] = ("step", np.asarray(elbo, dtype="float64"))
    attrs = {"format": FORMAT, "fingerprint": fingerprint_, "seconds": seconds,
             "average_from": -1 if average_from is None else average_from,
             "history": json.dumps(history), "leaves": len(leaves)}
    ds = xr.Dataset(data, attrs=attrs)
    return atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="netcdf4"))


def load(path) -> Saved:
    """Read a checkpoint written by :func:`save`.

    Parameters
    ----------
    path : str or os.PathLike
        The netCDF file.

    Returns
    -------
    Saved
        The state's leaves and the records.

    Raises
    ------
    CheckpointError
        If the file is missing, unreadable, or not a checkpoint of this
        :data:`FORMAT`.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint to resume from at {path}")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except (OSError, ValueError) as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err}") from err
    if ds.attrs.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a bnn-zoo checkpoint of this version")
    leaves = [ds[f"leaf_{i}"].values for i in range(int(ds.attrs["leaves"]))]
    return Saved(path=path, leaves=leaves, elbo=ds["elbo"].values,
                      seconds=float(ds.attrs["seconds"]), fingerprint=ds.attrs["fingerprint"],
                      history=json.loads(ds.attrs["history"]),
                      average_from=None if int(ds.attrs["average_from"]) < 0 else int(ds.attrs["average_from"]))


def _difference(saved: str, current: str) -> str:
    """The first difference between two fingerprints, in words."""
    saved, current = json.loads(saved), json.loads(current)
    for key in ("variables", "data"):
        a = {entry[0]: entry[1:] for entry in saved[key]}
        b = {entry[0]: entry[1:] for entry in current[key]}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                if key == "data" and name in a and name in b and a[name][0] == b[name][0]:
                    return f"the values of data {name!r} differ (other data or normalisation)"
                return f"{name}: {a.get(name, 'absent')} in the checkpoint, {b.get(name, 'absent')} here"
    a, b = saved["settings"], current["settings"]
    # The method first: another family changes the settings that follow from it (init_std, say).
    for name in sorted(set(a) | set(b), key=lambda name: (name != "method", name)):
        if a.get(name) != b.get(name):
            return f"{name}: {a.get(name)} in the checkpoint, {b.get(name)} here"
    if saved["model"] != current["model"]:
        return "the model differs: its architecture, priors or their parameters"
    return "the optimizer's state has another structure"
