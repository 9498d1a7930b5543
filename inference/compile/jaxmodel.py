"""A PyMC model as JAX functions: its log densities, its variables, and its forward samples.

:func:`compile_model` turns the model into one function of the unconstrained
values (what the fit optimises and what the posterior draws are evaluated
with); :func:`compile_predictive` into one of the constrained free variables
(what predictions on new data are made from, whatever made the posterior
draws). In both, every ``pm.Data`` container becomes an argument of any
length, so the same compiled function serves minibatches, the training set
and new inputs, and models of the same structure on other data share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.variational.minibatch_rv import MinibatchRandomVariable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomGeneratorType

from bnn_zoo.inference.compile import jax_fixes
from bnn_zoo.inference.compile.graphs import jaxify, log_terms, memoized, with_data_inputs

__all__ = ["Layout", "ModelFunction", "Predictive", "compile_model", "compile_predictive", "predicted_from"]


@dataclass(frozen=True)
class Layout:
    """Where each value variable sits in q's flat vector: ``(name, slice, shape, dtype)`` each.

    Value variables in ``model.value_vars`` order, as in PyMC's
    approximations. Make one with :meth:`of`.

    Parameters
    ----------
    slots : tuple
        ``(name, slice, shape, dtype)`` of each value variable, in order.

    Attributes
    ----------
    dim : int
        The flat vector's length.
    names : tuple of str
        The value variables' names, in order.
    """

    slots: tuple

    @classmethod
    def of(cls, model: pm.Model, point: dict) -> "Layout":
        """The layout of a model's value variables.

        Parameters
        ----------
        model : pymc.Model
            The model.
        point : dict of str to numpy.ndarray
            A value of each value variable, which gives its shape (e.g.
            ``model.initial_point()``).

        Returns
        -------
        Layout
            In ``model.value_vars`` order.
        """
        slots, start = [], 0
        for v in model.value_vars:
            shape = tuple(np.shape(point[v.name]))
            size = int(np.prod(shape, dtype=np.int64))
            slots.append((v.name, slice(start, start + size), shape, v.dtype))
            start += size
        return cls(tuple(slots))

    @property
    def dim(self) -> int:
        """The flat vector's length."""
        return self.slots[-1][1].stop if self.slots else 0

    @property
    def names(self) -> tuple[str, ...]:
        """The value variables' names, in order."""
        return tuple(name for name, _, _, _ in self.slots)

    def flatten(self, point: dict) -> np.ndarray:
        """A point as one flat float64 vector.

        Parameters
        ----------
        point : dict of str to array_like
            An array per value variable name.

        Returns
        -------
        numpy.ndarray
            ``(dim,)``, float64.
        """
        return np.concatenate([np.asarray(point[name], dtype="float64").ravel()
                               for name, _, _, _ in self.slots])

    def split(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """The last axis of ``z`` as one array per value variable, in NumPy.

        Parameters
        ----------
        z : numpy.ndarray
            ``(..., dim)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Each variable's ``(..., *shape)`` array, by name.
        """
        return {name: z[..., slc].reshape(z.shape[:-1] + shape) for name, slc, shape, _ in self.slots}

    def unflatten(self, z) -> list:
        """The flat vector ``z`` as one array per value variable, in JAX.

        Its gradient concatenates the pieces' gradients as plain copies, each
        made by its own loop, which keeps XLA from fusing them into one slow
        loop.

        Parameters
        ----------
        z : jax.Array
            ``(dim,)``.

        Returns
        -------
        list of jax.Array
            Each variable's array in its shape and dtype, in order.
        """
        cuts = tuple(slc.stop for _, slc, _, _ in self.slots[:-1])
        return [part.reshape(shape).astype(dtype)
                for part, (_, _, shape, dtype) in zip(_split(cuts, z), self.slots)]


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _split(cuts: tuple, z) -> list:
    """``jnp.split(z, cuts)``, whose gradient concatenates the pieces' gradients as plain copies.

    ``jnp.split`` rather than slices: its gradient is one concatenation, where
    the slices' would be a padded full-length vector per variable. Left to
    itself, XLA fuses that concatenation with everything that makes the
    gradients (the draw, the prior's gradient, the likelihood's) into one
    loop that finds each element's variable and position per element; behind
    optimisation barriers each variable's gradient is made by its own
    vectorised loop, and the concatenation is a copy.
    """
    return jnp.split(z, cuts)


def _split_fwd(cuts, z):
    return jnp.split(z, cuts), None


def _split_bwd(cuts, _, grads):
    pieces = jax.lax.optimization_barrier(list(grads))
    return (jax.lax.optimization_barrier(jnp.concatenate(pieces)),)


_split.defvjp(_split_fwd, _split_bwd)


@dataclass(eq=False)
class ModelFunction:
    """A model's log densities and variables as one JAX function of its unconstrained values.

    Made by :func:`compile_model`.
    ``fn(values, *data) -> [log_prior, log_lik, *pointwise, *variables]``:
    ``values`` is a list of arrays, one per value variable in ``layout``
    order (``log_prior`` includes the Jacobians); ``data`` one array per
    container of ``model.data_vars``, of any length; ``log_lik`` is the sum
    of the observed variables' and potentials' terms, scaled to the full data
    by the observed variables' ``total_size``; ``pointwise`` the elementwise
    log density of each observed variable (``observed``), times ``total_size``
    over the data's rows where it has one (1 on the data it was built with);
    ``variables`` the free variables (constrained) and deterministics
    (``names``). The fit and the posterior all trace this one function; JAX
    drops the outputs a caller does not use.

    Models of the same structure share one instance (:func:`compile_model`),
    and with it ``jitted``, the jitted functions built on it (the fit's
    runners, the posterior's evaluators), so JAX traces them once.

    Parameters
    ----------
    fn : callable
        ``fn(values, *data) -> list of jax.Array``, as above.
    layout : Layout
        The value variables' layout.
    names : tuple of str
        The free variables and deterministics among ``fn``'s outputs, in order.
    observed : tuple of str
        The observed variables whose pointwise log densities ``fn`` returns.
    jitted : dict, optional
        The jitted functions built on this one, by key; empty when made.
    """

    fn: Callable
    layout: Layout
    names: tuple[str, ...]
    observed: tuple[str, ...]
    jitted: dict = field(default_factory=dict, repr=False)

    def log_density(self, values, *data):
        """The log prior (Jacobians included) and the log likelihood at full-data scale.

        Parameters
        ----------
        values : list of jax.Array
            One array per value variable, in ``layout`` order.
        *data : jax.Array
            One array per data container.

        Returns
        -------
        log_prior : jax.Array
            The free variables' terms, Jacobians included.
        log_lik : jax.Array
            The observed variables' and potentials' terms.
        """
        out = self.fn(values, *data)
        return out[0], out[1]

    def flat_log_p(self, data: tuple, dtype: str) -> Callable:
        """``log p(z)``, prior and likelihood, of one flat vector ``z`` of unconstrained values on ``data``.

        What the Laplace approximation climbs and NUTS samples.

        Parameters
        ----------
        data : tuple of jax.Array
            One array per data container.
        dtype : str
            The model's float dtype; ``z`` is cast to it.

        Returns
        -------
        callable
            ``log_p(z) -> jax.Array``, a scalar in ``dtype``.
        """
        unflatten = self.layout.unflatten

        def log_p(z):
            prior, lik = self.log_density(unflatten(z.astype(dtype)), *data)
            return prior + lik

        return log_p

    def select(self, outputs: tuple[str, ...]) -> Callable:
        """A function of the values and data that returns the named ``outputs``.

        Parameters
        ----------
        outputs : tuple of str
            Model variables (free, deterministic), ``"logp"`` (the joint log
            density) or ``"loglik:<observed>"`` (an observed variable's
            pointwise log density).

        Returns
        -------
        callable
            ``f(values, *data) -> list``, one array per output.

        Raises
        ------
        ValueError
            For a name the model does not have.
        """
        index = {f"loglik:{name}": 2 + i for i, name in enumerate(self.observed)}
        index.update({name: 2 + len(self.observed) + i for i, name in enumerate(self.names)})
        unknown = [name for name in outputs if name != "logp" and name not in index]
        if unknown:
            raise ValueError(f"model has no variable {', '.join(map(repr, unknown))}")

        def f(values, *data):
            out = self.fn(values, *data)
            return [out[0] + out[1] if name == "logp" else out[index[name]] for name in outputs]

        return f


def compile_model(model: pm.Model, layout: Layout) -> ModelFunction:
    """``model`` as a :class:`ModelFunction` of its unconstrained values and its data.

    The log densities come from one ``model.logp`` call: the free variables'
    terms make the log prior, the rest the log likelihood. A model whose
    graph computes the same thing as one compiled recently (the same builder
    with the same settings, on other data of any size) gets that one's
    instance, without a second rewrite or trace.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    layout : Layout
        Its value variables' layout (:meth:`Layout.of`).

    Returns
    -------
    ModelFunction
        The compiled model, shared with models of the same structure.
    """
    log_prior, log_lik, pointwise = log_terms(model)
    named = [*model.free_RVs, *model.deterministics]
    outputs = model.replace_rvs_by_values([log_prior, log_lik, *pointwise, *named])
    batch, outputs = with_data_inputs(model, outputs)
    inputs = [*model.value_vars, *batch]
    names = tuple(v.name for v in named)
    observed = tuple(v.name for v in model.observed_RVs)

    def build():
        fn = jaxify(inputs, outputs)
        n = len(model.value_vars)
        return ModelFunction(fn=lambda values, *data: fn(*values[:n], *data), layout=layout,
                             names=names, observed=observed)

    return memoized(inputs, outputs,
                     lambda known: (isinstance(known, ModelFunction) and known.layout == layout
                                    and known.names == names and known.observed == observed),
                     build)


@dataclass(eq=False)
class Predictive:
    """``fn(free, data, keys) -> list``: model variables from the constrained free variables.

    ``free``: one array per free variable (``model.free_RVs`` order); ``data``
    one per container of ``model.data_vars``; ``keys`` one raw JAX key per
    observed variable asked for, which is drawn afresh from its distribution
    (a posterior predictive draw). ``names`` are the outputs.

    Made by :func:`compile_predictive`.

    Parameters
    ----------
    fn : callable
        ``fn(free, data, keys) -> list of jax.Array``, as above.
    names : tuple of str
        The outputs, in order.
    n_random : int
        The observed variables among them (keys needed).
    jitted : dict, optional
        The jitted functions built on this one, by key; empty when made.
    """

    fn: Callable
    names: tuple[str, ...]
    n_random: int
    jitted: dict = field(default_factory=dict, repr=False)


def predicted_from(model: pm.Model, name: str) -> list:
    """What a prediction of variable ``name`` computes it from: the variable itself (free or
    deterministic), or an observed variable's distribution parameters (not its observed values).

    Parameters
    ----------
    model : pymc.Model
        The model.
    name : str
        One of its free, deterministic or observed variables.

    Returns
    -------
    list of pytensor.graph.basic.Variable
        The graph's outputs whose ancestors are the prediction's inputs.
    """
    if model[name] not in model.observed_RVs:
        return [model[name]]
    node = _distribution(model[name])
    return list(node.op.dist_params(node)) if isinstance(node.op, RandomVariable) else [model[name]]


def _distribution(rv):
    """The node that draws an observed variable ``rv``, under ``total_size``'s wrappers."""
    node = rv.owner
    while isinstance(node.op, MinibatchRandomVariable):
        node = node.inputs[0].owner
    return node


def _redrawn(node, rng):
    """An observed variable's distribution (``node``, a ``RandomVariable``'s) drawn afresh with ``rng``.

    Along an axis its parameters span, the draw's length is theirs, so that new inputs of any length
    give as many draws; along an axis they do not (a mean shared by every row, ``mu`` of shape
    ``(n, 1)`` under data ``(n, 3)``), it is the observed variable's own length, as PyMC's
    ``sample_posterior_predictive`` draws it (a size set by the model's dims alone would keep the
    training length everywhere).
    """
    params, size = node.op.dist_params(node), node.op.size_param(node)
    batch = node.outputs[1].ndim - node.op.ndim_supp
    if batch == 0 or size is None or size.type.__class__.__name__ == "NoneTypeT":
        return node.op(*params, rng=rng)
    if node.op.ndim_supp:  # a multivariate variable: its size where its parameters fall short of it
        rv = node.op(*params, rng=rng)
        return rv if rv.ndim >= node.outputs[1].ndim else node.op(*params, size=size, rng=rng)
    padded = [(1,) * (batch - p.type.ndim) + tuple(p.type.shape) for p in params]
    spanned = [any(shape[axis] != 1 for shape in padded) for axis in range(batch)]
    if all(spanned):
        return node.op(*params, rng=rng)
    lengths = pt.broadcast_shape(*params, arrays_are_shapes=False)
    lengths = (1,) * (batch - len(lengths)) + tuple(lengths)
    return node.op(*params, size=pt.stack([lengths[axis] if spanned[axis] else size[axis]
                                           for axis in range(batch)]), rng=rng)


def compile_predictive(model: pm.Model, var_names: tuple[str, ...]) -> Predictive:
    """:class:`Predictive` of ``var_names`` (deterministics, free or observed variables).

    An observed variable is redrawn from its distribution given the free
    variables and the data: along an axis its parameters span, as long as
    they are (new inputs of any length give as many draws); along one they
    do not, as long as its observed values (:func:`_redrawn`).

    Parameters
    ----------
    model : pymc.Model
        The model.
    var_names : tuple of str
        The variables to compute.

    Returns
    -------
    Predictive
        Shared with models of the same structure asking for the same names.

    Raises
    ------
    ValueError
        For a name the model does not have, or a variable computed from
        an observed variable's values.
    NotImplementedError
        For an observed variable that is not a plain random variable.
    """
    observed = {v.name: v for v in model.observed_RVs}
    known = {v.name for v in (*model.free_RVs, *model.deterministics)} | set(observed)
    unknown = [name for name in var_names if name not in known]
    if unknown:
        raise ValueError(f"model has no variable {', '.join(map(repr, unknown))}")
    rngs, outputs = [], []
    for name in var_names:
        uses = [v.name for v in ancestors(predicted_from(model, name)) if v in set(observed.values())
                and v.name != name]
        if uses:
            raise ValueError(f"{name!r} is computed from the observed values of {uses[0]!r}, which a prediction "
                             f"replaces by draws; predict {uses[0]!r}, and compute {name!r} from its draws")
        if name not in observed:
            outputs.append(model[name])
            continue
        node = _distribution(observed[name])
        if not isinstance(node.op, RandomVariable):
            raise NotImplementedError(
                f"cannot redraw observed variable {name!r} ({type(node.op).__name__}); "
                "ask for the deterministics it depends on instead")
        rng = RandomGeneratorType()(f"{name}_rng")
        rngs.append(rng)
        outputs.append(_redrawn(node, rng))
    placeholders = [pt.tensor(name=f"{rv.name}_value", dtype=rv.dtype, shape=rv.type.shape)
                    for rv in model.free_RVs]
    outputs = graph_replace(outputs, dict(zip(model.free_RVs, placeholders)), strict=False)
    batch, outputs = with_data_inputs(model, outputs)
    inputs = [*placeholders, *batch, *rngs]

    def build():
        fn = jaxify(inputs, outputs)
        return Predictive(fn=lambda free, data, keys: fn(*free, *data,
                                                        *({"jax_state": k} for k in keys)),
                          names=tuple(var_names), n_random=len(rngs))

    return memoized(inputs, outputs,
                     lambda known: isinstance(known, Predictive) and known.names == tuple(var_names),
                     build)
