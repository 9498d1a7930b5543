r"""Learned centring: each hierarchical loc-scale variable between its centred and non-centred forms.

A variable ``x ~ Normal(loc, scale)`` whose ``loc`` or ``scale`` is itself
random can be written centred (``x`` itself a free variable) or non-centred
(``x = loc + scale * eps``, ``eps ~ Normal(0, 1)``); which form a Gaussian q
fits well depends on how much the data say about each group (the centred
form for data-rich groups, the non-centred one for weakly informed ones),
and a funnel in the wrong form defeats every Gaussian. The variationally
inferred parameterisation (Gorinova, Moore and Hoffman 2020, "Automatic
Reparameterisation of Probabilistic Programs") puts a ``lambda`` in [0, 1]
between the two, per element:

.. math::

    \tilde x \sim \mathrm{Normal}(\lambda\,\mathrm{loc},\ \mathrm{scale}^\lambda), \qquad
    x = \mathrm{loc} + \mathrm{scale}^{1 - \lambda}\,(\tilde x - \lambda\,\mathrm{loc}),

which is the centred form at ``lambda = 1`` and the non-centred one at 0, the
same model (the same posterior of ``x``) at every ``lambda``. :func:`reparametrise`
rewrites a model so (``x`` becomes a ``pm.Deterministic`` of the free variable
``x_vip``, and each ``lambda`` a data container ``x_centring``), and
``bnn_zoo.fit(model, method=bnn_zoo.FullRank(centring=True))`` (or any ADVI
family's ``centring=True``) learns the ``lambda``\ s with q, by the
ELBO's gradient (the ELBO is a bound on the same evidence for every
``lambda``, so maximising it over ``lambda`` picks the form q fits best).
The algebra holds for every location-scale family with its density
``f((x - loc) / scale) / scale``: :data:`LOC_SCALE` (Normal, StudentT,
Laplace, Cauchy, Logistic, Gumbel), written with the variable's own
distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
from pymc.model.fgraph import ModelFreeRV, fgraph_from_model, model_deterministic, model_free_rv, model_from_fgraph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random import basic as rv_ops

__all__ = ["LOC_SCALE", "SUFFIX", "Centring", "candidates", "reparametrise", "set_lambdas"]

#: The random-variable ops whose last two parameters are a location and a scale.
LOC_SCALE = (rv_ops.NormalRV, rv_ops.StudentTRV, rv_ops.LaplaceRV, rv_ops.CauchyRV, rv_ops.LogisticRV,
             rv_ops.GumbelRV)
#: The free variable that stands for ``x`` is ``x + "_vip"``; its ``lambda`` the data container
#: ``x + "_centring"``.
SUFFIX = ("_vip", "_centring")


@dataclass(frozen=True)
class Centring:
    """What :func:`reparametrise` rewrote: the variables, and their ``lambda`` containers' shapes.

    Parameters
    ----------
    names : tuple of str
        The variables, in the model's order.
    shapes : tuple of tuple of int
        Each one's shape (and its ``lambda``'s).
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @property
    def containers(self) -> tuple[str, ...]:
        """The ``lambda`` data containers' names."""
        return tuple(name + SUFFIX[1] for name in self.names)

    @property
    def size(self) -> int:
        """The ``lambda``\\ s, all elements together."""
        return int(sum(np.prod(s, dtype=int) for s in self.shapes))

    def split(self, flat) -> list:
        """A flat vector of :attr:`size` values as one array per variable, in their shapes."""
        cuts = np.cumsum([int(np.prod(s, dtype=int)) for s in self.shapes])[:-1]
        return [part.reshape(shape) for part, shape in zip(np.split(np.asarray(flat), cuts), self.shapes)]


def _loc_scale(rv, model: pm.Model) -> tuple | None:
    """The ``(loc, scale)`` of a free variable when its distribution is a location-scale one, untransformed."""
    if rv.owner is None or not isinstance(rv.owner.op, LOC_SCALE) or model.rvs_to_transforms.get(rv) is not None:
        return None
    return tuple(rv.owner.op.dist_params(rv.owner)[-2:])


def candidates(model: pm.Model) -> tuple[str, ...]:
    """The free variables learned centring applies to: location-scale ones whose loc or scale is random.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model.

    Returns
    -------
    tuple of str
        Their names, in the model's order (empty where there are none).

    Examples
    --------
    >>> import pymc as pm
    >>> from bnn_zoo.inference.families import centring
    >>> with pm.Model() as model:
    ...     tau = pm.HalfNormal("tau", 1)
    ...     theta = pm.Normal("theta", 0, tau, shape=8)
    ...     b = pm.Normal("b", 0, 1)
    >>> centring.candidates(model)
    ('theta',)
    """
    free = set(model.free_RVs)
    return tuple(rv.name for rv in model.free_RVs
                 if (pair := _loc_scale(rv, model)) is not None and any(a in free for a in ancestors(list(pair))))


def reparametrise(model: pm.Model, names=None, init: float = 0.5) -> tuple[pm.Model, Centring]:
    """``model`` with each of ``names`` written between its centred and non-centred forms.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model; it is not changed.
    names : sequence of str, optional
        Variables of :func:`candidates`; default all of them.
    init : float, default 0.5
        Every ``lambda``'s value in the new model.

    Returns
    -------
    model : pymc.Model
        The new model: ``x`` a ``pm.Deterministic`` (same name and dims) of
        the free variable ``x_vip``, whose distribution takes ``lambda``
        from the data container ``x_centring``.
    centring : Centring
        The variables rewritten and their shapes.

    Raises
    ------
    ValueError
        For a name that is not a candidate, naming the candidates.
    """
    found = candidates(model)
    names = found if names is None else tuple(names)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f"centring cannot rewrite {unknown[0]!r}: it applies to location-scale variables "
                         f"({', '.join(op.__name__[:-2] for op in LOC_SCALE)}) whose loc or scale is random; "
                         f"this model's are: {', '.join(found) or 'none'}")
    point = model.initial_point()
    given = {rv: value for rv, value in model.rvs_to_initial_values.items() if value is not None}
    try:  # PyMC's graph conversion refuses initial values: set them aside, and give them to the new model
        model.rvs_to_initial_values.update({rv: None for rv in given})
        fgraph, _ = fgraph_from_model(model, inlined_views=True)
    finally:
        model.rvs_to_initial_values.update(given)
    lambdas, shapes = [], []
    for node in list(fgraph.toposort()):
        if not (isinstance(node.op, ModelFreeRV) and node.op.name in names):
            continue
        name, rv = node.op.name, node.inputs[0]
        params = rv.owner.op.dist_params(rv.owner)
        loc, scale = params[-2], params[-1]
        shape = tuple(point[model.rvs_to_values[model[name]].name].shape)
        lam = pytensor.shared(np.full(shape, init, dtype=rv.dtype), name=name + SUFFIX[1])
        op = rv.owner.op
        tilde_rv = op.make_node(op.rng_param(rv.owner).type(), op.size_param(rv.owner),
                                *params[:-2], lam * loc, scale**lam).outputs[1]
        tilde = model_free_rv(tilde_rv, tilde_rv.type(name=name + SUFFIX[0]), None, name + SUFFIX[0],
                              *node.op.dims)
        x = model_deterministic(loc + scale ** (1 - lam) * (tilde - lam * loc), name, *node.op.dims)
        fgraph.replace(node.outputs[0], x, import_missing=True)
        lambdas.append((lam, node.op.dims))
        shapes.append(shape)
    new = model_from_fgraph(fgraph, mutate_fgraph=True)
    for lam, dims in lambdas:
        new.register_data_var(lam, dims=dims or None)
    for rv, value in given.items():
        if rv.name not in names:
            new.set_initval(new[rv.name], value)
    return new, Centring(names=names, shapes=tuple(shapes))


def set_lambdas(model: pm.Model, centring: Centring, values) -> dict:
    """Put ``lambda`` values into the rewritten model's containers, so that its draws use them.

    Parameters
    ----------
    model : pymc.Model
        The model :func:`reparametrise` made.
    centring : Centring
        What it rewrote.
    values : array_like
        Every ``lambda``, flat (:attr:`Centring.size` values), in the order of ``centring.names``.

    Returns
    -------
    dict of str to numpy.ndarray
        Each variable's ``lambda``, in its shape.
    """
    out = {}
    for name, container, value in zip(centring.names, centring.containers, centring.split(values)):
        model[container].set_value(np.asarray(value, dtype=model[container].dtype))
        out[name] = np.asarray(value, dtype="float64")
    return out
