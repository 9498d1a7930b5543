"""PyTensor graphs as JAX functions: the model's log terms, its data as inputs, and a cache.

:func:`jaxify` turns a graph into a JAX function through PyTensor's JAX
dispatch; :func:`with_data_inputs` makes the model's data containers inputs
of any length; :func:`log_terms` builds the model's log-prior and
log-likelihood graphs; :func:`memoized` keeps recently compiled graphs, so
that models of one structure share one compiled function.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Callable

import pymc as pm
import pytensor.tensor as pt
from pytensor.compile.mode import JAX
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph import FunctionGraph
from pytensor.graph.basic import equal_computations
from pytensor.graph.replace import clone_replace, graph_replace
from pytensor.graph.traversal import graph_inputs
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.tensor.math import variadic_add

from bnn_zoo.inference.compile import jax_fixes

__all__ = ["MEMO_SIZE", "clear_memo", "jaxify", "log_terms", "memoized", "shared_as_constants", "with_data_inputs"]


def jaxify(inputs: list, outputs: list) -> Callable:
    """A JAX function of ``inputs`` computing ``outputs`` (a pytensor graph), rewritten for JAX.

    Like ``pymc.sampling.jax.get_jaxified_graph``, plus PyMC's
    ``local_remove_check_parameter`` rewrite (what ``pm.Model(check_bounds=False)``
    does): the parameter checks of every log density go. They cannot fail
    here, since q lives in the unconstrained space where every value is in
    its variable's support.

    Parameters
    ----------
    inputs : list of pytensor.tensor.TensorVariable
        The graph's inputs, in the function's argument order.
    outputs : list of pytensor.tensor.TensorVariable
        The graph's outputs.

    Returns
    -------
    callable
        ``f(*inputs) -> list`` of JAX arrays, one per output.
    """
    fgraph = FunctionGraph(inputs=inputs, outputs=outputs, clone=True)
    JAX.including("local_remove_check_parameter").optimizer.rewrite(fgraph)
    missing = [node.op for node in fgraph.toposort() if not _has_jax(node.op)]
    if missing:
        op = missing[0]
        raise NotImplementedError(
            f"the model uses the Op {op} ({type(op).__module__}.{type(op).__name__}), which has no JAX "
            "implementation: register one with pytensor.link.jax.dispatch.jax_funcify, or write that "
            "part of the model with pytensor's own operations")
    with warnings.catch_warnings():  # shape assertions, which JAX's tracing checks itself
        warnings.filterwarnings("ignore", message="Skipping Assert")
        return jax_funcify(fgraph)


def _has_jax(op) -> bool:
    """Whether pytensor's JAX dispatcher has an implementation of ``op``'s type (or of a parent)."""
    return jax_funcify.dispatch(type(op)) is not jax_funcify.dispatch(object)


def with_data_inputs(model: pm.Model, outputs: list) -> tuple[list, list]:
    """The graphs ``outputs`` with the model's data containers as inputs of any length.

    Parameters
    ----------
    model : pymc.Model
        The model whose data containers ``outputs`` read.
    outputs : list of pytensor.graph.basic.Variable
        Graphs of the model.

    Returns
    -------
    placeholders : list of pytensor.tensor.TensorVariable
        One input per data container, any number of rows.
    outputs : list of pytensor.graph.basic.Variable
        ``outputs`` with the containers replaced by the placeholders, and every
        other shared variable (the lengths of the model's dims) by a constant.
    """
    containers = list(model.data_vars)
    batch = [pt.tensor(name=f"{c.name}_batch", dtype=c.dtype, shape=(None, *c.type.shape[1:]) if c.type.ndim else ())
             for c in containers]  # a scalar container (a scalar's learned-centring lambda) has no rows
    outputs = graph_replace(outputs, dict(zip(containers, batch)), strict=False)
    return batch, shared_as_constants(outputs)


def shared_as_constants(outputs: list) -> list:
    """The graphs ``outputs`` with every shared variable they read replaced by a constant of its value.

    As pymc.sampling.jax's helper does; importing that module would rewrite the user's
    XLA_FLAGS (it forces 100 host devices).

    Parameters
    ----------
    outputs : list of pytensor.graph.basic.Variable
        Graphs.

    Returns
    -------
    list of pytensor.graph.basic.Variable
        ``outputs`` itself when they read no shared variable, else new graphs.
    """
    shared = [v for v in graph_inputs(outputs) if isinstance(v, SharedVariable)]
    if not shared:
        return outputs
    return clone_replace(outputs, {v: pt.constant(v.get_value(borrow=True)) for v in shared})


#: Compiled models kept for reuse by :func:`memoized`.
MEMO_SIZE = 8
_compiled: OrderedDict = OrderedDict()  # id -> (inputs, outputs, compiled), newest last


def memoized(inputs: list, outputs: list, same: Callable, build: Callable):
    """The compiled function of a graph computing what a recent one computed, else ``build()``.

    Two graphs compute the same thing when pytensor's ``equal_computations``
    says so (the same operations and constants; only the data may differ)
    and ``same(known)`` holds. The :data:`MEMO_SIZE` most recent are kept.

    Parameters
    ----------
    inputs : list of pytensor.graph.basic.Variable
        The graph's inputs.
    outputs : list of pytensor.graph.basic.Variable
        The graph's outputs.
    same : callable
        ``same(known) -> bool``: whether a kept compiled function also fits
        (its layout, say).
    build : callable
        ``build() -> compiled``: compiles the graph when none fits.

    Returns
    -------
    object
        The kept compiled function, or the one ``build`` made (now kept).
    """
    for key, (ins, outs, known) in reversed(_compiled.items()):
        if (same(known) and len(ins) == len(inputs) and len(outs) == len(outputs)
                and equal_computations(outputs, outs, inputs, ins)):
            _compiled.move_to_end(key)
            return known
    built = build()
    _compiled[id(built)] = (inputs, outputs, built)
    while len(_compiled) > MEMO_SIZE:
        _compiled.popitem(last=False)
    return built


def log_terms(model: pm.Model) -> tuple:
    """The model's log-density graphs, from one ``model.logp`` call.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    log_prior : pytensor.tensor.TensorVariable
        The free variables' terms, with the transforms' Jacobians.
    log_lik : pytensor.tensor.TensorVariable
        The rest: observed variables and potentials.
    pointwise : list of pytensor.tensor.TensorVariable
        Each observed variable's elementwise term.
    """
    terms = model.logp(jacobian=True, sum=False)
    n_free, n_obs = len(model.free_RVs), len(model.observed_RVs)
    return (variadic_add(*(t.sum() for t in terms[:n_free])), variadic_add(*(t.sum() for t in terms[n_free:])),
            terms[n_free:n_free + n_obs])


def clear_memo() -> None:
    """Forget every compiled function :func:`memoized` keeps: the next model compiles afresh."""
    _compiled.clear()
