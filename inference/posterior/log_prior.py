"""The ``log_prior`` group of any DataTree's posterior draws, in one compiled JAX program.

:func:`add_log_prior` computes what ``pymc.stats.compute_log_prior`` does
(each free variable's log density at its drawn, constrained value,
elementwise, no Jacobian), with the draws as a vectorised axis rather
than one call per draw.
"""

from __future__ import annotations

import jax
import numpy as np
import pymc as pm
from pymc.model.transform.conditioning import remove_value_transforms
from xarray import DataTree

from bnn_zoo.inference.compile.graphs import jaxify, shared_as_constants

__all__ = ["add_log_prior"]


def add_log_prior(idata: DataTree, model: pm.Model) -> DataTree:
    """Add the ``log_prior`` group to ``idata``: each free variable's elementwise log density at each draw.

    The values are ``pymc.stats.compute_log_prior``'s to round-off; a model
    with a free variable whose log density is not elementwise (a
    multivariate distribution) goes to that function instead.

    Parameters
    ----------
    idata : xarray.DataTree
        Draws of every free variable of ``model`` in its ``posterior`` group.
    model : pymc.Model
        The model the draws are of.

    Returns
    -------
    xarray.DataTree
        ``idata``, with ``log_prior`` (the posterior's dims and coordinates).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from arviz_base import from_dict
    >>> from bnn_zoo.inference.posterior.log_prior import add_log_prior
    >>> with pm.Model() as model:
    ...     sigma = pm.HalfNormal("sigma", 1.0)
    ...     y = pm.Normal("y", 0.0, sigma, observed=np.array([0.5, -1.0]))
    >>> draws = np.abs(np.random.default_rng(0).normal(size=(2, 100)))   # any draws: 2 chains of 100
    >>> log_prior = add_log_prior(from_dict({"posterior": {"sigma": draws}}), model)["log_prior"]["sigma"]
    >>> log_prior.dims, bool(np.allclose(log_prior, pm.logp(pm.HalfNormal.dist(1.0), draws).eval()))
    (('chain', 'draw'), True)
    """
    umodel = remove_value_transforms(model)
    free = list(umodel.free_RVs)
    values = [umodel.rvs_to_values[rv] for rv in free]
    outputs = umodel.logp(vars=free, sum=False)
    posterior = idata["posterior"]
    if any(out.ndim != value.ndim for out, value in zip(outputs, values)):  # not elementwise: PyMC's way
        pm.stats.compute_log_prior(idata, model=model, progressbar=False)
        return idata
    fn = jaxify(values, shared_as_constants(outputs))  # data a prior reads: constants of the program
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    args = [np.asarray(posterior[rv.name].values, dtype=value.dtype).reshape(chains * draws, *posterior[rv.name].shape[2:])
            for rv, value in zip(free, values)]
    logp = jax.jit(jax.vmap(fn))(*args)
    group = posterior.to_dataset()[[rv.name for rv in free]].copy()
    for rv, lp in zip(free, logp):
        group[rv.name] = (posterior[rv.name].dims, np.asarray(lp, dtype="float64").reshape(posterior[rv.name].shape))
    idata["log_prior"] = DataTree(group)
    return idata
