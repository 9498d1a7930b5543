"""From a fitted q to an ArviZ DataTree of posterior draws.

:func:`sample` draws from q (or from a mixture of several fits' q) and
returns an ArviZ DataTree whose draws carry ``log q`` (q's density) and
``log p`` (the model's joint log density, Jacobian included), both in the
unconstrained space where q lives: what PSIS-LOO for variational posteriors
(``az.loo_approximate_posterior``, :func:`~bnn_zoo.inference.diagnostics.psis.loo`)
needs. :func:`point_posterior` and :func:`draws_posterior` put given
unconstrained points in a DataTree's ``posterior``, as the other methods
(:mod:`~bnn_zoo.inference.alternatives.baselines`) return their draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import xarray as xr
from arviz_base import from_dict
from pymc.backends.arviz import find_constants, find_observations
from xarray import DataTree

from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.support.renamed import refuse_renamed
from bnn_zoo.inference.support.seeds import check_seed
from bnn_zoo.inference.posterior.draws import draw_z, evaluate_draws, evaluate_z, fit_list, model_data
from bnn_zoo.inference.compile.jaxmodel import ModelFunction
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["RESAMPLE_MIN", "RESAMPLE_POOL", "draws_posterior", "model_coords", "model_tree", "output_names",
           "point_posterior", "sample"]

#: A ``method="auto"`` fit that passed its test gives ``draws`` draws resampled, by their PSIS weights,
#: from this many times as many draws of q.
RESAMPLE_POOL = 4
#: ... and from at least this many (PSIS needs 2,154 draws to estimate a k of 0.7).
RESAMPLE_MIN = 4000


def point_posterior(result: FitResult, z: np.ndarray) -> DataTree:
    """A DataTree whose ``posterior`` holds the free variables at given unconstrained points.

    What :func:`~bnn_zoo.inference.posterior.prediction.predict` takes (as ``idata``)
    to evaluate those networks.

    Parameters
    ----------
    result : FitResult
        A fit of the model.
    z : array_like
        One flat unconstrained point ``(dim,)``, or one per row ``(k, dim)``
        (e.g. q's mean, or pruned copies of it), in the fit's ``layout``.

    Returns
    -------
    xarray.DataTree
        Its ``posterior`` has one chain of ``k`` draws.
    """
    return draws_posterior(result.model, result.density, np.atleast_2d(np.asarray(z)))


def draws_posterior(model: pm.Model, density: ModelFunction, z: np.ndarray) -> DataTree:
    """A DataTree whose ``posterior`` holds the free variables (constrained) at unconstrained draws.

    What every method that makes points of the unconstrained space (SGLD,
    SWAG, ensembles) returns, so that
    :func:`~bnn_zoo.inference.posterior.prediction.predict` and ArviZ take their draws
    like ``pm.sample``'s.

    Parameters
    ----------
    model : pymc.Model
        The model (its free variables, dims and coords).
    density : ModelFunction
        The compiled model.
    z : numpy.ndarray
        ``(draws, dim)`` (one chain) or ``(chains, draws, dim)``, in
        ``density.layout``.

    Returns
    -------
    xarray.DataTree
        With a ``posterior`` group of the free variables, with the model's dims.
    """
    z = np.asarray(z)
    z3 = z[None] if z.ndim == 2 else z
    names = tuple(rv.name for rv in model.free_RVs)
    values = evaluate_draws(density, z3.reshape(-1, z3.shape[-1]), model_data(model), names)
    dims = {name: [d for d in model.named_vars_to_dims.get(name, ())] for name in names}
    coords = {d: v for d, v in model_coords(model).items() if any(d in x for x in dims.values())}
    return from_dict({"posterior": {name: values[name].reshape(z3.shape[:2] + values[name].shape[1:])
                                       for name in names}},
                        dims={k: v for k, v in dims.items() if v}, coords=coords)


@refuse_renamed
def sample(fits, draws: int = 500, *, random_seed: int = 0, log_likelihood: bool = True,
           var_names: Sequence[str] | None = None) -> DataTree:
    """Posterior draws of a fitted q (or of a mixture of fits: pass a list) as an ArviZ DataTree.

    Draws from q itself in the unconstrained space, maps them to the model's
    variables, and records each draw's ``log q`` and ``log p`` (the model's
    joint log density, Jacobian included): what PSIS-LOO for an approximate
    posterior (:func:`~bnn_zoo.inference.diagnostics.psis.loo`) needs. A list of fits of one model gives draws
    from their equal-weight mixture, with the mixture's ``log q``
    (:func:`draw_z`).

    Parameters
    ----------
    fits : FitResult or sequence of FitResult
        One fit, or fits of one model (restarts, say).
    draws : int, default 500
        The number of draws, at least the number of fits.
    random_seed : int, default 0
        Seeds the draws.
    log_likelihood : bool, default True
        Evaluate ``log p`` and each observed variable's pointwise log
        likelihood on the model's data (a pass over the data per draw).
        Without it ``log_p`` is NaN and there is no ``log_likelihood`` group.
    var_names : sequence of str, optional
        Further variables for the ``posterior`` group. Default: every
        ``pm.Deterministic`` of the model, as ``pm.sample`` does; ``()``: the
        free variables alone (a network's per-observation deterministics can
        be large: draws x observations x classes).

    Returns
    -------
    xarray.DataTree
        Groups:

        - ``posterior``: the free variables (and ``var_names``), one chain,
          with the model's dims;
        - ``sample_stats``: ``log_q`` and ``log_p`` of each draw, and its
          Pareto-smoothed importance log weight ``psis_log_weight`` (with
          ``log_likelihood``);
        - ``log_likelihood``: each observed variable's pointwise log density
          on the model's data (with ``log_likelihood``);
        - ``observed_data``, ``constant_data``: the observed values and the
          other data containers;
        - ``fit``: q's ``mean`` and ``sd`` of each value variable (the
          unconstrained space) along a ``param`` dim, with a ``component``
          dim for a mixture;
        - ``fit_stats``: the ELBO trace (``elbo`` along ``step``).

        With ``log_likelihood``, ``attrs["q_pareto_k"]`` is the Pareto k of
        the importance ratios ``p / q``: VI's own diagnostic
        (:mod:`~bnn_zoo.inference.diagnostics.qcheck`; at or below 0.7 the
        PSIS-reweighted estimates of :func:`bnn_zoo.reweighted` are reliable,
        above it they are not; inf when some draws have zero posterior
        density, ``log p`` -inf or NaN). It is computed on at least
        :data:`~bnn_zoo.inference.diagnostics.qcheck.VERDICT_DRAWS` draws of q, enough
        to judge a k of 0.7: where ``draws`` is fewer, further draws are
        made for it (their ``log p`` alone) and not kept;
        ``attrs["q_pareto_k_draws"]`` says how many.

        A ``method="auto"`` fit that passed its test
        (``config["importance_resampled"]``) gives draws of the
        PSIS-weighted posterior: ``draws`` resampled, with replacement, from
        :data:`RESAMPLE_POOL` times as many draws of q (at least
        :data:`RESAMPLE_MIN`), whose k is ``attrs["q_pareto_k"]``;
        ``attrs["importance_resampled"]`` says so, and each draw's
        ``psis_log_weight`` is then ``-log(draws)``. Where the pool's k is
        above 0.7 the draws are ``draws`` of q's own, with the warning.

    Raises
    ------
    ValueError
        For no fits, fits of different models, too few draws, or a name in
        ``var_names`` the model does not have.

    Warns
    -----
    ApproximationWarning
        When ``q_pareto_k`` is above 0.7 (or some draws have zero posterior
        density), naming the fit and what to try.

    See Also
    --------
    bnn_zoo.inference.diagnostics.psis.loo : PSIS-LOO from these draws.
    bnn_zoo.inference.posterior.prediction.predict : The posterior predictive on new data.

    Examples
    --------
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=100)
    >>> with pm.Model() as model:
    ...     X = pm.Data("X", x)
    ...     b = pm.Normal("b", 0, 10)
    ...     mu = pm.Deterministic("mu", b * X)
    ...     y = pm.Normal("y", mu, 1, observed=2 * x + rng.normal(size=100), shape=X.shape)
    >>> result = bnn_zoo.fit(model, steps=5_000, progressbar=False)
    >>> idata = bnn_zoo.sample(result, 1000)
    >>> idata["posterior"]["b"].shape             # one chain of 1,000 draws
    (1, 1000)
    >>> b = idata["posterior"]["b"]
    >>> print(f"{float(b.mean()):.1f} +- {float(b.std()):.1f}")
    2.0 +- 0.1
    >>> sorted(idata["sample_stats"].data_vars)   # each draw's log p, log q and PSIS weight
    ['log_p', 'log_q', 'psis_log_weight']
    >>> idata.attrs["q_pareto_k"] < 0.7            # did VI work? (bnn_zoo.inference.diagnostics.qcheck)
    True

    The mixture of restarts from other seeds:

    >>> fits = [bnn_zoo.fit(model, steps=2_000, random_seed=s, progressbar=False) for s in range(3)]
    >>> bnn_zoo.sample(fits, 1000).attrs["draws_from"]
    '3 fit(s)'
    """
    fits = fit_list(fits)
    random_seed = check_seed(random_seed)
    result, model = fits[0], fits[0].model
    resample = len(fits) == 1 and bool(result.config.get("importance_resampled"))
    z, log_q = draw_z(fits, max(RESAMPLE_POOL * draws, RESAMPLE_MIN) if resample else draws, random_seed)
    names, observed = output_names(model, var_names)
    judged = log_likelihood or resample
    logliks = tuple(f"loglik:{o}" for o in observed) if log_likelihood else ()
    if resample:  # the pool is judged by its log p alone; what is kept is evaluated at the draws kept (below)
        values = evaluate_z(result, z, ("logp",))
    else:
        values = evaluate_z(result, z, names + (("logp",) if judged else ()) + logliks)
    log_p = values["logp"].astype("float64") if "logp" in values else np.full(len(z), np.nan)
    attrs = {"inference_library": "pymc", "inference_library_version": pm.__version__,
             "fit_method": result.method, "draws_from": f"{len(fits)} fit(s)"}
    if judged:
        # the verdict rests on enough draws (qcheck.VERDICT_DRAWS): more of q's, their log p alone, where fewer are kept
        more = max(qcheck.VERDICT_DRAWS - len(z), 0)
        extra_p, extra_q = np.empty(0), np.empty(0)
        if more:  # (at least one draw of each fit of a mixture)
            z_more, extra_q = draw_z(fits, max(more, len(fits)), [random_seed, more])
            extra_p = evaluate_z(result, z_more, ("logp",))["logp"].astype("float64")
        k, log_w = qcheck.q_pareto_k(np.concatenate([log_p, extra_p]), np.concatenate([log_q, extra_q]))
        log_w = _normalised(log_w[: len(z)])  # the kept draws' weights (k = -inf: q exact, equal weights)
        n_judged = len(z) + len(extra_p)
        impossible = qcheck.zero_density(np.concatenate([log_p, extra_p]))
        failed = [f for f in fits if f.config.get("auto") and not f.config["auto"]["passed"]]
        for fit in failed:  # auto's verdict travels with its q's draws, whatever k these draws give
            _repeat_auto_verdict(fit)
        if impossible or not failed:
            qcheck.warn_if_poor(k, result.method, len(fits), draws=n_judged, impossible=impossible,
                                advice=_advice(result))
        attrs[qcheck.DRAWS_NAME] = n_judged
    if resample:
        passed = qcheck.verdict(k, n_judged).startswith("passes")
        if passed:  # method="auto" passed: draws of the PSIS-weighted posterior
            p = np.exp(log_w - log_w.max())
            pick = np.random.default_rng([random_seed, len(z)]).choice(len(z), size=draws, p=p / p.sum())
            log_w = np.full(draws, -np.log(draws))  # resampled: equal weights
            attrs["importance_resampled"] = f"{draws} of {len(z)} draws of q, by their PSIS weights"
        else:  # q's own draws, as many as asked, with the warning above
            pick = np.arange(draws)
            log_w = _normalised(log_w[pick])
        distinct, back = np.unique(pick, return_inverse=True)  # a draw resampled twice is evaluated once
        values = {key: v[back] for key, v in evaluate_z(result, z[distinct], names + logliks).items()}
        log_p, log_q = log_p[pick], log_q[pick]
    groups = {
        "posterior": {name: values[name][None] for name in names},
        "sample_stats": {"log_p": log_p[None], "log_q": log_q[None]},
    }
    if log_likelihood:
        groups["log_likelihood"] = {o: values[f"loglik:{o}"][None] for o in observed}
        groups["sample_stats"]["psis_log_weight"] = log_w[None]
        attrs[qcheck.NAME] = k
    tree = model_tree(model, groups, attrs)
    tree["fit"] = DataTree(_fit_group(fits))
    tree["fit_stats"] = DataTree(_fit_stats(fits))
    return tree


def output_names(model: pm.Model, var_names: Sequence[str] | None = None) -> tuple[tuple, tuple]:
    """The variables a posterior's draws hold (the free ones, then ``var_names``, by default every
    ``pm.Deterministic``, as ``pm.sample`` keeps them) and the observed ones (for ``log_likelihood``).

    Parameters
    ----------
    model : pymc.Model
        The model (a learned-centring fit's rewritten one, whose deterministics are the variables as written).
    var_names : sequence of str, optional
        Further variables; default the model's deterministics.

    Returns
    -------
    names, observed : tuple of str
    """
    if var_names is None:
        var_names = [v.name for v in model.deterministics]
    free = {rv.name for rv in model.free_RVs}
    return (tuple(rv.name for rv in model.free_RVs) + tuple(v for v in var_names if v not in free),
            tuple(rv.name for rv in model.observed_RVs))


def model_tree(model: pm.Model, groups: dict, attrs: dict) -> DataTree:
    """An ArviZ DataTree of ``groups`` (name to a dict of ``(chain, draw, ...)`` arrays) with the model's
    observed and constant data, dims and coords.

    Parameters
    ----------
    model : pymc.Model
        The model the draws are of.
    groups : dict
        ``posterior``, ``sample_stats``, ``log_likelihood``, ... (an empty group is left out).
    attrs : dict
        The tree's attributes.

    Returns
    -------
    xarray.DataTree
    """
    groups = dict(groups, observed_data=find_observations(model), constant_data=find_constants(model))
    dims = {name: list(d) for name, d in model.named_vars_to_dims.items()}
    return from_dict({k: v for k, v in groups.items() if v}, dims=_dims_that_fit(groups, dims, model),
                        coords=model_coords(model), attrs={"/": attrs})


def _normalised(log_w: np.ndarray) -> np.ndarray:
    """Log weights that sum to one (NaN ones, where k is NaN or inf, as they are)."""
    return log_w - np.logaddexp.reduce(log_w) if np.isfinite(log_w).all() else log_w


def _repeat_auto_verdict(result: FitResult) -> None:
    """Warn that ``result`` is what ``method="auto"`` returned when no rung passed, and why it failed."""
    auto = result.config["auto"]
    entry = auto["path"][auto["returned"]]
    missed = entry.get("missed_modes", 0)
    why = (f"misses {missed} of the {len(auto['modes'])} (at least) modes its search found "
           "(config['auto']['modes'])" if missed else
           f"failed its test ({qcheck.NAME} {entry['q_pareto_k']:.2f} on {entry.get('draws', auto['draws']):,} draws)")
    calls.warn(f"this {result.method!r} fit is what method='auto' returned when no rung passed: its q {why}, "
               f"whatever the {qcheck.NAME} of these draws; they are q's own, not the posterior's: "
               "bnn_zoo.nuts(result) hands off to NUTS" + (", though its chains do not cross between modes either"
                                                           if missed else ""), qcheck.ApproximationWarning)


def _advice(result: FitResult) -> str:
    """What to try after ``result``'s method, knowing whether it learned centring and whether the model has a
    hierarchy for it (:func:`~bnn_zoo.inference.diagnostics.qcheck.next_step`); after ``method="auto"``, the hand-off."""
    from bnn_zoo.inference.families.centring import candidates

    if "auto" in result.config:
        return qcheck.NEXT["flow"]

    centred = "centring" in result.config
    hierarchy = result.method == "fullrank_advi" and not centred and bool(candidates(result.model))
    return qcheck.next_step(result.method, centred=centred, hierarchy=hierarchy)


def model_coords(model: pm.Model) -> dict:
    """The model's coordinates, as arrays (dims without values left out).

    Parameters
    ----------
    model : pymc.Model
        The model.

    Returns
    -------
    dict of str to numpy.ndarray
        Each dim's coordinate values.
    """
    return {k: np.asarray(v) for k, v in model.coords.items() if v is not None}


def _dims_that_fit(groups: dict, dims: dict, model: pm.Model) -> dict:
    """``dims`` of the variables whose trailing shape matches their dims' coordinate lengths."""
    lengths = {k: len(v) for k, v in model.coords.items() if v is not None}
    out = {}
    for group in groups.values():
        for name, value in group.items():
            d = dims.get(name)
            if d is None:
                continue
            shape = np.shape(value)[-len(d):] if d else ()
            if len(shape) == len(d) and all(lengths.get(dim) in (None, size) for dim, size in zip(d, shape)):
                out[name] = d
    return out


def _fit_group(fits: list[FitResult]):
    """q's mean and sd of each value variable, by name, along ``param`` (and ``component``)."""
    model = fits[0].model
    value_dims = {}
    for rv in model.free_RVs:
        value_dims[model.rvs_to_values[rv].name] = list(model.named_vars_to_dims.get(rv.name, ()))
    coords = model_coords(model)
    data = {}
    for name, _, shape, _ in fits[0].layout.slots:
        stack = np.stack([np.stack([f.mean[name], f.sd[name]]) for f in fits])
        d = value_dims.get(name) or [f"{name}_dim_{i}" for i in range(len(shape))]
        # a transform may change the length (a simplex has one coordinate fewer than its
        # variable): the variable's dims then do not describe its unconstrained value
        if len(d) != len(shape) or any(len(coords.get(dim, ())) not in (0, size) for dim, size in zip(d, shape)):
            d = [f"{name}_dim_{i}" for i in range(len(shape))]
        if len(fits) == 1:
            data[name] = (["param", *d], stack[0])
        else:
            data[name] = (["component", "param", *d], stack)
    ds = xr.Dataset(data, coords={"param": ["mean", "sd"]})
    return ds.assign_coords({k: v for k, v in coords.items() if k in ds.dims and len(v) == ds.sizes[k]})


def _fit_stats(fits: list[FitResult]):
    if len(fits) == 1:
        return xr.Dataset({"elbo": ("step", fits[0].elbo)}, coords={"step": np.arange(len(fits[0].elbo))})
    elbo = np.full((len(fits), max(len(f.elbo) for f in fits)), np.nan)  # NaN past a shorter fit
    for row, f in zip(elbo, fits):
        row[: len(f.elbo)] = f.elbo
    return xr.Dataset({"elbo": (("component", "step"), elbo)})
