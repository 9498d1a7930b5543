"""Models written with ``pm.Minibatch``, fitted with the engine's own minibatches.

PyMC's minibatch ADVI puts the slicing into the model: ``pm.Minibatch(X, y, batch_size=50)``
returns tensors that a ``MinibatchOp`` draws afresh, with random rows, at every evaluation, and
the observed variable's ``total_size`` scales its log likelihood to the full data. The engine
compiles the model once to JAX and cuts its data containers on the device instead
(``fit(batch_size=..., minibatch=[...])``), so :func:`unwrap` rewrites such a model into that
form: the same model, with each array given to ``pm.Minibatch`` in a data container of the full
length, fitted with the same batch size. ``total_size`` stays as written, so the likelihood keeps
PyMC's scale; on the full data (predictions, PSIS-LOO) the scale is 1.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pymc as pm
import pytensor
from pymc.data import MinibatchOp
from pymc.model.fgraph import ModelNamed, fgraph_from_model, model_from_fgraph, model_named
from pymc.variational.minibatch_rv import MinibatchRandomVariable
from pytensor.graph import FunctionGraph
from pytensor.graph.basic import Constant
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors

__all__ = ["check_observed", "minibatch_nodes", "minibatch_plan", "unwrap"]


def minibatch_nodes(model: pm.Model) -> list:
    """The ``MinibatchOp`` nodes of a model's graph (``pm.Minibatch``'s), in graph order.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model.

    Returns
    -------
    list of pytensor.graph.basic.Apply
        One node per ``pm.Minibatch`` call; empty for a model without one.
    """
    outputs = [*model.basic_RVs, *model.deterministics, *model.potentials,
               *(model.rvs_to_values[rv] for rv in model.observed_RVs)]
    seen, nodes = set(), []
    for var in ancestors(outputs):
        node = var.owner
        if node is not None and isinstance(node.op, MinibatchOp) and node not in seen:
            seen.add(node)
            nodes.append(node)
    return nodes


def unwrap(model: pm.Model, batch_size: int | None,
           minibatch: Sequence[str] | None) -> tuple[pm.Model, int | None, Sequence[str] | None]:
    """A model written with ``pm.Minibatch`` as the same model over full data containers.

    Each array given to ``pm.Minibatch`` becomes a data container named ``minibatch_0``,
    ``minibatch_1``, ... in the order of the calls and their arguments (a ``pm.Data``
    container given to ``pm.Minibatch`` keeps its own name), and the minibatches are cut from
    them, ``batch_size`` rows at a time, by the engine. The variables keep their names, order,
    dims and initial values. A model without ``pm.Minibatch`` is returned as it is.

    Parameters
    ----------
    model : pymc.Model
        The model to fit.
    batch_size : int or None
        :func:`bnn_zoo.fit`'s ``batch_size``: None, or ``pm.Minibatch``'s own.
    minibatch : sequence of str or None
        :func:`bnn_zoo.fit`'s ``minibatch``: None with ``pm.Minibatch``.

    Returns
    -------
    model : pymc.Model
        The model to fit: ``model`` itself, or its rewrite over full data containers.
    batch_size : int or None
        The batch size to fit with (``pm.Minibatch``'s).
    minibatch : sequence of str or None
        The containers to cut into minibatches.

    Raises
    ------
    ValueError
        If ``batch_size`` or ``minibatch`` disagree with the model's ``pm.Minibatch``, its
        calls differ in batch size or in the length of their data, or it slices something
        other than data.
    """
    nodes = minibatch_nodes(model)
    if not nodes:
        return model, batch_size, minibatch
    sizes = {out.type.shape[0] for node in nodes for out in node.outputs[:-1]}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"the model's pm.Minibatch calls have batch sizes {sorted(map(str, sizes))}; "
                         "bnn_zoo.fit cuts every minibatch from one permutation of the rows, so give "
                         "them one batch_size (or one pm.Minibatch call with every array)")
    [size] = sizes
    if minibatch is not None or (batch_size is not None and batch_size != size):
        raise ValueError(f"the model cuts its minibatches with pm.Minibatch(..., batch_size={size}); "
                         f"leave fit's batch_size and minibatch out (got batch_size={batch_size!r}, "
                         f"minibatch={minibatch!r}), or build the model on pm.Data containers instead")
    # fgraph_from_model refuses initial values: take them off for the rewrite, put them back after.
    initvals = dict(model.rvs_to_initial_values)
    model.rvs_to_initial_values = {rv: None for rv in initvals}
    try:
        fgraph, _ = fgraph_from_model(model, inlined_views=True)
    finally:
        model.rvs_to_initial_values = initvals
    replacements, names, taken, identity = {}, [], set(model.named_vars), {}
    for node in (n for n in fgraph.toposort() if isinstance(n.op, MinibatchOp)):
        for data, batch in zip(node.inputs[:-1], node.outputs[:-1]):
            if data.owner is not None and isinstance(data.owner.op, ModelNamed):
                full = data  # a pm.Data container given to pm.Minibatch
                # kept as itself where the graph names it too: one container, not a copy of it
                identity[data] = data
            elif isinstance(data, Constant):
                name = next(f"minibatch_{k}" for k in range(len(taken) + 1) if f"minibatch_{k}" not in taken)
                taken.add(name)
                full = model_named(pytensor.shared(np.asarray(data.data), name=name), name)
            else:
                raise ValueError(f"pm.Minibatch slices {batch.name or 'a tensor'} computed in the graph; "
                                 "bnn_zoo.fit cuts data only: give pm.Minibatch arrays or pm.Data containers")
            replacements[batch] = full
            names.append(full.name)
    lengths = {name: np.shape(var.owner.inputs[0].get_value(borrow=True))[0]
               for name, var in zip(names, replacements.values())}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the arrays given to pm.Minibatch differ in length: {lengths}")
    # Rebuilt without the minibatches' static shapes, which would pin the data to the batch size.
    outputs = clone_replace(list(fgraph.outputs), {**replacements, **identity}, rebuild_strict=False)
    rewritten = FunctionGraph(outputs=outputs, clone=False)
    rewritten._coords, rewritten._dim_lengths = fgraph._coords, fgraph._dim_lengths
    new = model_from_fgraph(rewritten, mutate_fgraph=True)
    # The same variables in the same order as the model (the order of q's flat vector).
    for attr in ("free_RVs", "observed_RVs", "deterministics", "potentials"):
        order = {var.name: i for i, var in enumerate(getattr(model, attr))}
        getattr(new, attr).sort(key=lambda var: order.get(var.name, len(order)))
    for rv, value in initvals.items():
        if value is not None:
            new.set_initval(new[rv.name], value)
    return new, size, list(dict.fromkeys(names))


def minibatch_plan(model: pm.Model, minibatch, batch_size) -> tuple[tuple[bool, ...], int]:
    """Which data containers are cut into minibatches, and their length.

    Parameters
    ----------
    model : pymc.Model
        The model.
    minibatch : sequence of str or None
        ``fit``'s ``minibatch``: the containers to cut (``None``: all).
    batch_size : int or None
        ``fit``'s ``batch_size`` (``None``: no minibatches).

    Returns
    -------
    sliced : tuple of bool
        One flag per data container of the model: cut or not.
    n : int
        The cut containers' rows (0 without minibatches).

    Raises
    ------
    ValueError
        For names that are not containers of the model, containers of
        different lengths, a batch size out of range, or an observed
        variable on the cut rows whose observed values are not cut with them
        or that has no ``total_size`` (:func:`check_observed`).
    """
    containers = list(model.data_vars)
    names = [c.name for c in containers]
    if batch_size is None:
        if minibatch:
            raise ValueError("minibatch names containers to cut, but batch_size is None")
        return tuple(False for _ in containers), 0
    chosen = list(names if minibatch is None else minibatch)
    missing = [name for name in chosen if name not in names]
    if missing or not chosen or len(set(chosen)) < len(chosen):
        raise ValueError(f"minibatch must name distinct data containers of the model "
                         f"({', '.join(names) or 'none'}), got {list(chosen)}")
    scalars = [c.name for c in containers if c.name in chosen and np.ndim(c.get_value()) == 0]
    if scalars:
        raise ValueError(f"minibatch: data container {scalars[0]!r} is a scalar, with no rows to cut; name the "
                         f"containers to cut, minibatch=[...], without it")
    lengths = {c.name: c.get_value().shape[0] for c in containers if c.name in chosen}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"minibatch containers differ in length: {lengths}; name the ones to cut")
    n = next(iter(lengths.values()))
    if not (isinstance(batch_size, (int, np.integer)) and 1 <= batch_size <= n):
        raise ValueError(f"batch_size must be an integer in 1..{n}, got {batch_size!r}")
    check_observed(model, [c for c in containers if c.name in chosen], n)
    return tuple(c.name in chosen for c in containers), n


def check_observed(model: pm.Model, cut: list, n: int) -> None:
    """Refuse a minibatch fit whose likelihood would be silently wrong.

    An observed variable that depends on the cut containers ``cut`` (of
    ``n`` rows) needs its observed values cut with them, in a data container
    (a plain array keeps all ``n`` rows against a minibatch's), and
    ``total_size`` (without it the log likelihood stays at a minibatch's
    scale, ``n / batch_size`` times too weak against the prior, as in PyMC).

    Parameters
    ----------
    model : pymc.Model
        The model.
    cut : list
        The data containers a minibatch cuts.
    n : int
        Their rows.

    Raises
    ------
    ValueError
        Naming the observed variable and the way out.
    """
    cut = set(cut)
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        if not cut & set(ancestors([rv, value])):
            continue
        name = rv.name
        if not cut & set(ancestors([value])):
            raise ValueError(f"observed variable {name!r}: its values are not in a data container that the minibatch cuts, "
                             f"so each step would compare a minibatch of predictions with all {n} rows; put them in "
                             f"one, pm.Data('{name}_data', values), and cut it with the inputs "
                             f"(minibatch=[..., '{name}_data'])")
        if not isinstance(rv.owner.op, MinibatchRandomVariable):
            dist = type(rv.owner.op).__name__.removesuffix("RV")
            raise ValueError(f"observed variable {name!r}: its rows are cut into minibatches, but it has no total_size, so its "
                             f"log likelihood would stay at a minibatch's scale, too weak against the prior; write "
                             f"it with total_size={n} (pm.{dist}({name!r}, ..., observed=..., total_size={n})), as "
                             f"PyMC's minibatch ADVI does")
