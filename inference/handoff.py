"""The hand-off from VI to NUTS: NUTS preconditioned by a fitted q, started from q's draws.

Where no Gaussian passes its test (``method="auto"`` says so), the posterior
itself needs MCMC; a fitted q still knows its scale and correlations. NUTS
run with q's covariance as its (dense) inverse mass matrix, equivalent to NUTS
in q's whitened space, and started from q's draws, needs no warm-up to learn a
mass matrix, only its step size (blackjax's ``pathfinder_adaptation`` does the
same from Pathfinder's q; Hoffman et al. 2019, "NeuTra-lizing Bad Geometry in
Hamiltonian Monte Carlo Using Neural Transport", with a flow). :func:`nuts`
runs NumPyro's NUTS on the model's compiled log density, the one every fit
uses, and returns ArviZ's DataTree.
"""

from __future__ import annotations

import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from xarray import DataTree

from bnn_zoo.inference import gaussians
from bnn_zoo.inference.draws import fit_list
from bnn_zoo.inference.sampling import draws_posterior

__all__ = ["TUNE", "nuts"]

#: Warm-up steps of the hand-off: the step size alone is adapted (q gives the mass matrix).
TUNE = 300


def nuts(result, draws: int = 1000, *, tune: int = TUNE, chains: int = 4, target_accept: float = 0.9,
         random_seed: int = 0) -> DataTree:
    """NUTS preconditioned by the fitted q: its covariance as the mass matrix, its draws as the starts.

    Parameters
    ----------
    result : FitResult
        A fit of the model (any method; a ``method="auto"`` fit whose rungs
        all failed their test is the case it is for).
    draws : int, default 1000
        Draws per chain after the warm-up.
    tune : int, default 300
        Warm-up steps per chain, which adapt the step size only.
    chains : int, default 4
        Chains, run side by side in one program (NumPyro's ``"vectorized"``), each
        started from a draw of q.
    target_accept : float, default 0.9
        The step size's target acceptance rate.
    random_seed : int, default 0
        Seeds the starts and the chains.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (the free variables, ``chains`` x ``draws``) and
        ``sample_stats`` (``diverging``, ``tree_depth`` via ``num_steps``,
        ``accept_prob``); ``attrs``: ``fit_method`` (q's), ``seconds``
        (warm-up and draws, compilation included), ``tune``.

    Raises
    ------
    ValueError
        For a bad ``draws``, ``tune``, ``chains`` or ``target_accept``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> with pm.Model() as model:
    ...     tau = pm.HalfNormal("tau", 1)
    ...     theta = pm.Normal("theta", 0, tau, shape=4)
    ...     y = pm.Normal("y", theta, 1, observed=[0.5, -0.3, 1.2, 0.1])
    >>> q = bnn_zoo.fit(model, method="fullrank_advi", steps=3_000, progressbar=False)
    >>> idata = bnn_zoo.nuts(q, 500, chains=2)
    >>> idata["posterior"]["theta"].shape
    (2, 500, 4)
    """
    from numpyro.infer import MCMC, NUTS

    for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= least):
            raise ValueError(f"nuts' {name} must be an integer of at least {least}, got {value!r}")
    if not (isinstance(target_accept, float) and 0 < target_accept < 1):
        raise ValueError(f"nuts' target_accept must be a float in (0, 1), got {target_accept!r}")
    result = fit_list(result)[0]
    model, density = result.model, result.density
    dtype = result.config.get("dtype", "float64")
    data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)

    log_p = density.flat_log_p(data, dtype)
    covariance = gaussians.covariance(result.family.mean_and_factor(result.params)[1])
    starts = result.family.sample(result.params, chains, np.random.default_rng(random_seed))[0].astype(dtype)
    kernel = NUTS(potential_fn=lambda z: -log_p(z), inverse_mass_matrix=jnp.asarray(covariance, dtype),
                  dense_mass=True, adapt_mass_matrix=False, target_accept_prob=target_accept)
    mcmc = MCMC(kernel, num_warmup=tune, num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(random_seed), init_params=jnp.asarray(starts),
             extra_fields=("diverging", "num_steps", "accept_prob"))
    z = np.asarray(mcmc.get_samples(group_by_chain=True), dtype="float64")
    seconds = time.perf_counter() - t0
    tree = draws_posterior(model, density, z)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    tree["sample_stats"] = DataTree(xr.Dataset({
        name: (("chain", "draw"), np.asarray(extra[key])) for name, key in
        (("diverging", "diverging"), ("n_steps", "num_steps"), ("acceptance_rate", "accept_prob"))},
        coords={"chain": np.arange(chains), "draw": np.arange(draws)}))
    tree.attrs.update(fit_method=result.method, sampler="nuts (numpyro), q's covariance as mass matrix",
                      seconds=seconds, tune=tune, rhat_max=float(max(
                          float(v.max()) for v in az.rhat(tree["posterior"].to_dataset()).data_vars.values())))
    return tree
