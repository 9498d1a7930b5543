"""Where q starts: the model's initial point with noise on its weights, or another fit's q.

:func:`initial_mean` is q's first mean without ``init`` (the initial point,
N(0, 1/fan_in) noise on every weight matrix, a model's own ``initval=`` kept:
:func:`given_initvals`); :func:`from_fit` turns ``bnn_zoo.fit``'s ``init``
into a family's first parameters, after checking that it is a start.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from bnn_zoo.inference import families
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.compile.jaxmodel import Layout
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["from_fit", "given_initvals", "initial_mean"]


def _fan_in(shape: tuple) -> int:
    # Dense weights are (in, out) and conv kernels (kh, kw, in, out): the fan-in
    # is the product of all but the last axis.
    return int(np.prod(shape[:-1]))


def given_initvals(model: pm.Model) -> frozenset:
    """The value variables whose initial value the model sets (``initval=``), by name.

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    frozenset of str
        Their value variables' names (``sigma_log__`` for a transformed ``sigma``).
    """
    return frozenset(model.rvs_to_values[rv].name for rv, value in model.rvs_to_initial_values.items()
                     if value is not None and rv in model.free_RVs)


def initial_mean(layout: Layout, point: dict, seed: int, given: frozenset = frozenset()) -> np.ndarray:
    """q's initial mean: the model's initial point, plus N(0, 1/fan_in) noise on every weight matrix.

    Every value variable of two or more axes counts as a weight matrix
    (dense ``(in, out)``, convolution ``(kh, kw, in, out)``); its fan-in is
    the product of all but its last axis. Biases and scalars start at the
    initial point (biases at 0, scales at the hyperprior's initial value).
    The random weights break the symmetry between hidden units, which
    all-zero means would keep identical. A variable whose initial value the
    model gives (``initval=``, named in ``given``) starts exactly there.

    Parameters
    ----------
    layout : Layout
        The flat vector's layout (:meth:`Layout.of <bnn_zoo.inference.compile.jaxmodel.Layout.of>`).
    point : dict of str to numpy.ndarray
        The model's initial point, ``model.initial_point()``.
    seed : int
        Seeds the noise; :func:`fit` passes its own ``seed``.
    given : frozenset of str, default frozenset()
        Value variables whose initial value the model gives
        (:func:`given_initvals`): no noise on them.

    Returns
    -------
    numpy.ndarray
        The flat float64 mean, ``(layout.dim,)``.
    """
    rng = np.random.default_rng(seed)
    mu = layout.flatten(point)
    for name, slc, shape, _ in layout.slots:
        if len(shape) >= 2 and name not in given:
            mu[slc] += rng.normal(0.0, 1.0 / np.sqrt(_fan_in(shape)), size=shape).ravel()
    return mu


def from_fit(family: Family, init: FitResult, layout: Layout, dtype: str) -> dict:
    """``family``'s first parameters from another fit's q, after checking that it is a start.

    A dense q starts a dense q whole (its correlations are what a badly
    conditioned posterior needs), a flow is put on its start's whole factor
    or continues a flow of its own size, and any other family starts at the
    start's mean and marginal sds.

    Parameters
    ----------
    family : Family
        The family to fit.
    init : FitResult
        ``bnn_zoo.fit``'s ``init``.
    layout : Layout
        The model's flat layout.
    dtype : str
        The model's float dtype.

    Returns
    -------
    dict of str to numpy.ndarray
        The parameters.

    Raises
    ------
    ValueError
        For an ``init`` that is no fit of this model, a Laplace fit that did
        not pass its test of the mode, or a flow of another size.
    """
    if not isinstance(init, FitResult):
        raise ValueError(f"init must be a FitResult of this model (what bnn_zoo.fit returns), got {type(init).__name__}")
    if [(n, s) for n, _, s, _ in init.layout.slots] != [(n, s) for n, _, s, _ in layout.slots]:
        raise ValueError("init must be a fit of a model with the same variables and shapes")
    if init.method == "laplace" and not init.convergence.converged:
        raise ValueError("init is a Laplace fit that did not pass its test of the mode "
                         f"({init.convergence.describe()}): q's mean is not the posterior's mode, "
                         "so it is no start; fit without init, or fix what the test names first")
    if family.name == init.family.name == "flow":  # it continues, if it is of this size
        fresh = family.init(np.zeros(layout.dim), np.ones(layout.dim))
        if any(np.shape(fresh[k]) != np.shape(init.params[k]) for k in fresh if k != "A"):
            raise ValueError("init is a flow of other layers or hidden units: a flow continues a flow of its "
                             "own size, or starts from a Gaussian fit")
        return {k: np.asarray(v) for k, v in init.params.items()}
    mean, factor = init.family.mean_and_factor(init.params)
    if family.name == init.family.name == families.FULL_RANK.name:
        return family.from_factor(mean.astype(dtype), factor.astype(dtype))
    if family.name == "flow":
        return family.from_factor(mean.astype(dtype), factor)
    return family.init(mean.astype(dtype), gaussians.marginal_sd(factor))
