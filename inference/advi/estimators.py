"""Gradient estimators of the expected log likelihood for mean-field q: per-example noise in dense layers.

The plain estimator (``"weights"``) draws one set of weights per step, so all
the examples of a minibatch share its noise, and the gradient's variance does
not fall with the batch size. Two estimators give each example its own noise
at the cost of a second matrix product per dense layer, leaving the
expectation (and so the optimum) unchanged:

- ``"local_reparam"`` (Kingma, Salimans and Welling 2015): under mean-field
  q, the pre-activation ``h @ W`` of one example is Gaussian given ``h``,
  with mean ``h @ mu_W`` and variance ``h**2 @ sd_W**2``; it is drawn
  directly, one draw per example and unit.
- ``"flipout"`` (Wen et al. 2018): the shared perturbation ``W - mu_W`` is
  decorrelated across examples by random signs, ``h @ mu_W + ((h * s) @ (W -
  mu_W)) * r`` with ``s``, ``r`` of +-1 per example. Each example sees a
  weight matrix distributed as q.

The model stays a plain PyMC model. :func:`compile_likelihood` rewrites its
log-likelihood graph: every product ``h @ W`` (``pt.dot`` or ``@``, ``h`` a
matrix of examples, ``W`` a free variable without a transform, optionally
expanded or transposed) is replaced as above, where ``W`` is used nowhere
else in the likelihood. Each example's pre-activations then have the
distribution they have under weight sampling, layer after layer, so the
expected log likelihood is the same. The prior and entropy terms are
untouched: they still use the step's weight draw. Biases and other
variables keep their shared draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import io_toposort
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.math import Dot

from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.compile.graphs import jaxify, log_terms, memoized, with_data_inputs
from bnn_zoo.inference.compile.jaxmodel import Layout

__all__ = ["ESTIMATORS", "Likelihood", "compile_likelihood"]

#: The names ``bnn_zoo.fit``'s ``estimator`` takes.
ESTIMATORS = ("weights", "local_reparam", "flipout")
STREAM = 0x4C52  # the per-example noise's stream, apart from the weights' (offset 0 of the key words)


class PerExampleNoise(Op):
    """Noise shaped like its first input: N(0, 1) (``kind="normal"``) or signs (``"rademacher"``).

    ``noise(like, words, step)``: a pure function of the key words, the step
    and the ``site`` (which product and which factor), so a fit resumed from
    a checkpoint draws the same noise. JAX only (the engine's backend).
    """

    __props__ = ("kind", "site")

    def __init__(self, kind: str, site: int):
        self.kind, self.site = kind, site

    def make_node(self, like, words, step):
        like = pt.as_tensor_variable(like)
        words, step = pt.as_tensor_variable(words), pt.as_tensor_variable(step)
        return Apply(self, [like, words, step], [like.type()])

    def perform(self, node, inputs, outputs):
        raise NotImplementedError("per-example noise runs in the JAX engine only")

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def connection_pattern(self, node):
        return [[False], [False], [False]]

    def pullback(self, inputs, outputs, cotangents):
        return [disconnected_type() for _ in inputs]


@jax_funcify.register(PerExampleNoise)
def _jax_per_example_noise(op, **kwargs):
    draw = noise.normal if op.kind == "normal" else noise.rademacher

    def per_example_noise(like, words, step):
        return draw(noise.derive(words, op.site, 0), step, 0, like.shape, like.dtype)

    return per_example_noise


@dataclass(eq=False)
class Likelihood:
    """``fn(values, locs, scales, words, step, *data) -> log_lik``: the rewritten log likelihood.

    What :func:`compile_likelihood` returns and
    :class:`~bnn_zoo.inference.advi.objective.ELBOFunction` takes.

    Parameters
    ----------
    fn : callable
        ``fn(values, locs, scales, words, step, *data) -> log_lik``, in JAX:
        ``values`` one array per value variable (the step's draw); ``locs``
        and ``scales`` q's means and sds of the variables in ``sites``
        (``scales`` is unused by Flipout); ``words`` and ``step`` seed the
        per-example noise; ``data`` one array per data container.
    estimator : {"local_reparam", "flipout"}
        The estimator.
    sites : tuple of str
        The value variables whose products were rewritten, in
        ``model.value_vars`` order.
    """

    fn: Callable
    estimator: str
    sites: tuple[str, ...]  # the value variables whose products were rewritten


def _dense_products(model: pm.Model, nodes: list) -> dict:
    """``{W: [(node, path)]}``: the products ``h @ f(W)`` in ``nodes`` with ``W`` a value variable
    used only there; ``f`` (``path``) is a chain of DimShuffles (expansions, transposes). Only
    untransformed variables qualify: q's Gaussian is over their values themselves."""
    values = {model.rvs_to_values[rv] for rv in model.free_RVs if model.rvs_to_transforms.get(rv) is None}
    clients: dict = {}
    for node in nodes:
        for var in node.inputs:
            clients.setdefault(var, []).append(node)
    found: dict = {}
    for node in nodes:
        op = node.op.core_op if isinstance(node.op, Blockwise) else node.op
        if not isinstance(op, Dot) or len(node.inputs) != 2:
            continue
        h, w = node.inputs
        path = [w]
        while w.owner is not None and isinstance(w.owner.op, DimShuffle):
            w = w.owner.inputs[0]
            path.append(w)
        if w in values and h.ndim == 2 and node.outputs[0].ndim == 2:
            found.setdefault(w, []).append((node, path))
    usable = {}
    for w, uses in found.items():
        allowed = {node for node, _ in uses} | {p.owner for _, path in uses for p in path[:-1]}
        # W and each DimShuffle of it must feed only these products (and those DimShuffles).
        if all(set(clients.get(p, [])) <= allowed for _, path in uses for p in path):
            usable[w] = uses
    return usable


def compile_likelihood(model: pm.Model, layout: Layout, estimator: str) -> Likelihood:
    """The model's log likelihood with ``estimator``'s per-example noise in its dense products.

    See the module docstring for the rewrite. A model whose graph computes
    the same as one compiled recently gets that one's function.

    Parameters
    ----------
    model : pymc.Model
        The model.
    layout : Layout
        q's layout; the rewrite does not use it.
    estimator : {"local_reparam", "flipout"}
        The estimator.

    Returns
    -------
    Likelihood
        The rewritten log likelihood.

    Raises
    ------
    ValueError
        For an unknown estimator (``"weights"`` included: it needs no
        rewrite), or when the model has no product ``h @ W`` to rewrite
        (the estimator would change nothing).
    """
    if estimator not in ESTIMATORS[1:]:
        raise ValueError(f"unknown estimator {estimator!r}; valid: {', '.join(ESTIMATORS)}")
    log_lik = model.replace_rvs_by_values([log_terms(model)[1]])
    nodes = io_toposort([*model.value_vars, *model.data_vars], log_lik)
    products = _dense_products(model, nodes)
    if not products:
        raise ValueError(f"estimator={estimator!r} found no dense product h @ W in the model's likelihood "
                         "with W an untransformed free variable used nowhere else")
    order = {w: i for i, w in enumerate(model.value_vars)}
    sites = sorted(products, key=order.get)
    locs = [w.type(name=f"{w.name}_loc") for w in sites]
    scales = [w.type(name=f"{w.name}_scale") for w in sites]
    words = pt.tensor("noise_words", dtype="uint32", shape=(2,))
    step = pt.scalar("noise_step", dtype="uint32")

    # Rewrite the products in topological order, each on its already rewritten input.
    at = {node: (i, path) for i, w in enumerate(sites) for node, path in products[w]}
    done: dict = {}
    for node in (n for n in nodes if n in at):
        i, path = at[node]
        site = 2 * len(done)  # each product has two noise sites
        h = graph_replace(node.inputs[0], done, strict=False) if done else node.inputs[0]
        f_loc = graph_replace(path[0], {sites[i]: locs[i]}, strict=False)
        mean = pt.dot(h, f_loc)
        if estimator == "local_reparam":
            f_scale = graph_replace(path[0], {sites[i]: scales[i]}, strict=False)
            eps = PerExampleNoise("normal", site)(mean, words, step)
            new = mean + pt.sqrt(pt.dot(h**2, f_scale**2) + np.finfo(mean.dtype).tiny) * eps
        else:
            s = PerExampleNoise("rademacher", site)(h, words, step)
            r = PerExampleNoise("rademacher", site + 1)(mean, words, step)
            new = mean + pt.dot(h * s, path[0] - f_loc) * r
        done[node.outputs[0]] = new.astype(node.outputs[0].dtype)
    outputs = graph_replace(log_lik, done, strict=False)
    batch, outputs = with_data_inputs(model, outputs)
    extra = [*locs, *(scales if estimator == "local_reparam" else [])]
    inputs = [*model.value_vars, *extra, words, step, *batch]
    names = tuple(w.name for w in sites)

    def build():
        fn = jaxify(inputs, outputs)
        n = len(model.value_vars)
        local = estimator == "local_reparam"

        def log_likelihood(values, loc, scale, words, step, *data):
            return fn(*values[:n], *loc, *(scale if local else []), words, step, *data)[0]

        return Likelihood(fn=log_likelihood, estimator=estimator, sites=names)

    return memoized(inputs, outputs,
                     lambda known: (isinstance(known, Likelihood) and known.estimator == estimator
                                    and known.sites == names),
                     build)
