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
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from arviz_base import from_dict
from xarray import DataTree

from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.support.seeds import check_seed
from bnn_zoo.inference.posterior.draws import evaluate_z
from bnn_zoo.inference.posterior.result import FitResult
from bnn_zoo.inference.posterior.sampling import model_tree, output_names

__all__ = ["RHAT_MAX", "TUNE", "SamplingWarning", "nuts"]

#: Warm-up steps of the hand-off: the step size alone is adapted (q gives the mass matrix).
TUNE = 300
#: Above this largest r-hat (and at any divergence) :func:`nuts` warns, as ``pm.sample`` does.
RHAT_MAX = 1.01


class SamplingWarning(UserWarning):
    """NUTS's draws may not be the posterior's: transitions diverged, or the chains disagree (r-hat)."""


@calls.interruptible
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
        What :func:`bnn_zoo.sample` holds, ``chains`` x ``draws``:
        ``posterior`` (the model's variables: the free ones and every
        ``pm.Deterministic``; after a learned-centring fit, the variables as
        written, ``x`` beside ``x_vip``), ``log_likelihood`` (each observed
        variable's pointwise log density, for :func:`bnn_zoo.loo`),
        ``observed_data``, ``constant_data``, and ``sample_stats``
        (``diverging``, ``n_steps``, ``acceptance_rate``, ``log_p``);
        ``attrs``: ``fit_method`` (q's), ``seconds`` (warm-up and draws,
        compilation included), ``tune``, ``divergences`` and ``rhat_max``
        (over the free variables).

    Raises
    ------
    TypeError
        For anything other than a fit.
    ValueError
        For a bad ``draws``, ``tune``, ``chains`` or ``target_accept``.

    Warns
    -----
    SamplingWarning
        In one line, when a transition after the warm-up diverged or the
        largest r-hat is above :data:`RHAT_MAX` (as ``pm.sample`` warns).

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
    if not (isinstance(target_accept, (float, int, np.floating, np.integer)) and not isinstance(target_accept, bool)
            and 0 < target_accept < 1):
        raise ValueError(f"nuts' target_accept must be a number in (0, 1), got {target_accept!r}")
    if not isinstance(result, FitResult):
        raise TypeError(f"nuts takes a fit (what bnn_zoo.fit returns), got {type(result).__name__}")
    random_seed = check_seed(random_seed)
    model, density = result.model, result.density
    dtype = result.config.get("dtype", "float64")
    data = tuple(jnp.asarray(v.get_value()) for v in model.data_vars)

    log_p = density.flat_log_p(data, dtype)
    covariance = gaussians.covariance(result.family.mean_and_factor(result.params)[1])
    starts = result.family.sample(result.params, chains, np.random.default_rng(random_seed))[0].astype(dtype)
    kernel = NUTS(potential_fn=lambda z: -log_p(z), inverse_mass_matrix=jnp.asarray(covariance, dtype),
                  dense_mass=True, adapt_mass_matrix=False, target_accept_prob=float(target_accept))
    mcmc = MCMC(kernel, num_warmup=tune, num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(random_seed), init_params=jnp.asarray(starts if chains > 1 else starts[0]),
             extra_fields=("diverging", "num_steps", "accept_prob"))
    z = np.asarray(mcmc.get_samples(group_by_chain=True), dtype="float64")
    seconds = time.perf_counter() - t0
    names, observed = output_names(model)
    values = evaluate_z(result, z.reshape(-1, z.shape[-1]), names + ("logp",) + tuple(f"loglik:{o}" for o in observed))
    per_chain = {key: v.reshape(z.shape[:2] + v.shape[1:]) for key, v in values.items()}
    extra = mcmc.get_extra_fields(group_by_chain=True)
    stats = {name: np.asarray(extra[key]) for name, key in
             (("diverging", "diverging"), ("n_steps", "num_steps"), ("acceptance_rate", "accept_prob"))}
    free = [rv.name for rv in model.free_RVs]
    rhat_max = float("nan")
    if chains > 1 and draws >= 4:  # r-hat needs two chains of a few draws each
        from arviz_stats import rhat as rhat_of  # scipy.stats with it: a second of import, only here

        with warnings.catch_warnings():  # ArviZ's shape notes: the verdict below says what matters
            warnings.simplefilter("ignore")
            rhat = rhat_of(from_dict({"posterior": {n: per_chain[n] for n in free}})["posterior"].to_dataset())
            rhat_max = float(np.nanmax([float(v.max()) for v in rhat.data_vars.values()]))
    divergences = int(stats["diverging"].sum())
    tree = model_tree(model, {"posterior": {name: per_chain[name] for name in names},
                              "log_likelihood": {o: per_chain[f"loglik:{o}"] for o in observed},
                              "sample_stats": dict(stats, log_p=per_chain["logp"].astype("float64"))},
                      dict(fit_method=result.method, sampler="nuts (numpyro), q's covariance as mass matrix",
                           seconds=seconds, tune=tune, divergences=divergences, rhat_max=rhat_max))
    found = []
    if divergences:
        found.append(f"{divergences} of {chains * draws} transitions after the warm-up diverged (try target_accept="
                     "0.95 or more, or the model's other parameterisation, centred or non-centred)")
    if rhat_max > RHAT_MAX:
        found.append(f"the largest r-hat is {rhat_max:.3f} > {RHAT_MAX} (try a longer tune or more draws)")
    elif not np.isfinite(rhat_max):
        found.append("r-hat was not computed, so nothing checks that the chains agree (it needs chains=2 or more "
                     "of 4 draws or more)")
    if found:
        calls.warn(f"bnn_zoo.nuts: {'; '.join(found)}: the draws may not be the posterior's", SamplingWarning)
    return tree
