"""Prior and likelihood sensitivity by power-scaling, through arviz-stats' ``psense``.

Power-scaling raises the prior (or the likelihood) to a power :math:`\\alpha` near 1,
:math:`p_\\alpha(\\theta \\mid y) \\propto p(\\theta)^\\alpha\\, p(y \\mid \\theta)`, and measures how
far each posterior quantity moves: the derivative at :math:`\\alpha = 1` of the cumulative
Jensen-Shannon distance between the perturbed and the original posterior, estimated by
Pareto-smoothed importance weights of the existing draws, without refitting (Kallioinen, Paananen,
Bürkner and Vehtari, *Detecting and diagnosing prior and likelihood sensitivity with
power-scaling*). Above 0.05 a quantity is sensitive. Sensitive to both: a possible
prior-data conflict. To the prior alone: a strong prior or a weak likelihood. To the likelihood
alone: the data decide it, the usual case.

On draws from a variational q rather than from the posterior the weights power-scale q's
draws, so the numbers describe q's posterior as far as q resembles it (see
:func:`bnn_zoo.reweighted` and q's Pareto k in ``idata.attrs`` for how far that is). Where q's
k is above :data:`~bnn_zoo.inference.diagnostics.qcheck.K_WARN`, q misses a part of the posterior, a
quantity can read as not sensitive ("✓") where NUTS draws find it prior-sensitive, and
:func:`prior_sensitivity` and :func:`plot` warn (``ApproximationWarning``).

- :func:`prior_sensitivity`: the table, per quantity (each element of each variable);
- :func:`by_variable`: the table summarised per variable;
- :func:`plot`: ArviZ's ``plot_psense_dist``, the power-scaled posteriors of some variables.
"""

from __future__ import annotations

import math
import warnings

from matplotlib.figure import Figure
from xarray import DataTree

from bnn_zoo.evaluation.calibration_plots import from_arviz

__all__ = ["THRESHOLD", "by_variable", "plot", "prior_sensitivity"]

#: Kallioinen et al.'s threshold on the sensitivity (arviz-stats' default): above it, a quantity
#: is sensitive to the power-scaled component.
THRESHOLD = 0.05


def _q_pareto_k(idata: DataTree) -> float:
    """The Pareto k of q's importance ratios that :func:`bnn_zoo.sample` stored in ``idata.attrs``.

    NaN for draws without one (``pm.sample``'s, or ``bnn_zoo.sample``'s without log-likelihood).
    """
    from bnn_zoo.inference.diagnostics.qcheck import NAME  # the engine: loaded when used

    k = idata.attrs.get(NAME, idata.attrs.get("pareto_k"))  # "pareto_k": DataTrees written before the rename
    return math.nan if k is None else float(k)


def _prepared(idata: DataTree, model, caller: str) -> DataTree:
    """``idata`` with its ``log_prior`` group, after checking it and warning about a poor q."""
    from bnn_zoo.inference.diagnostics.qcheck import K_WARN, NEXT, ApproximationWarning  # the engine: loaded when used

    if "log_likelihood" not in idata.children:
        raise ValueError(f"{caller}: idata has no log_likelihood group; add it with "
                         "pm.compute_log_likelihood(idata, model=model), or draw with bnn_zoo.sample(fit, draws), "
                         "which adds it")
    if "log_prior" not in idata.children and model is None:
        raise ValueError(f"{caller}: idata has no log_prior group; pass the model (fit.model) to compute it")
    k = _q_pareto_k(idata)
    if k > K_WARN:
        instead = NEXT.get(idata.attrs.get("fit_method"), "a richer family (fit's method=)")
        if "pm.sample" not in instead:
            instead += ", or draw with pm.sample"
        warnings.warn(f"{caller}: these draws come from a q whose Pareto k is {k:.2f} > {K_WARN}, so their "
                      "power-scaling sensitivities are unreliable (a '✓' can hide a prior-sensitive quantity); "
                      f"refit with {instead}", ApproximationWarning, stacklevel=3)
    if "log_prior" not in idata.children:
        from bnn_zoo.inference.posterior.log_prior import add_log_prior  # the engine: loaded when used

        add_log_prior(idata, model)
    return idata


def prior_sensitivity(idata: DataTree, model=None, var_names=None) -> "pandas.DataFrame":
    """Each quantity's power-scaling sensitivity to the prior and to the likelihood.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior draws with a ``log_likelihood`` group (:func:`bnn_zoo.sample`'s, or
        ``pm.sample``'s after ``pm.compute_log_likelihood``).
    model : pymc.Model, optional
        The model, to add the ``log_prior`` group where ``idata`` lacks it (its free variables'
        log densities, as ``pymc.stats.compute_log_prior`` computes them, by
        :func:`~bnn_zoo.inference.posterior.log_prior.add_log_prior`; ``idata`` gains the group).
    var_names : list of str, optional
        The posterior variables to judge (default: all of them, deterministics included).

    Returns
    -------
    pandas.DataFrame
        One row per quantity (``W_0[x1, 0]``), with ``prior`` and ``likelihood`` (the
        sensitivities, by ``arviz_stats.psense``; 0 to a prior whose log density is the same at
        every draw, a flat one), ``diagnosis`` (arviz-stats' words) and ``variable`` (the name
        before the brackets).

    Raises
    ------
    ValueError
        Without a ``log_likelihood`` group, or without a ``log_prior`` group and a model.

    Warns
    -----
    ApproximationWarning
        When q's Pareto k (in ``idata.attrs``) is above
        :data:`~bnn_zoo.inference.diagnostics.qcheck.K_WARN`: the sensitivities of its draws are unreliable.
    """
    import numpy as np
    import xarray as xr
    from arviz_base import dataset_to_dataframe
    from arviz_stats import psense

    _prepared(idata, model, "prior_sensitivity")
    parts = []
    for group in ("prior", "likelihood"):
        ds = idata[f"log_{group}"].to_dataset()
        total = sum(v.sum([d for d in v.dims if d not in ("chain", "draw")]) for v in ds.data_vars.values())
        if float(np.ptp(np.asarray(total))) == 0:  # a flat prior: power-scaling moves nothing
            base = idata["posterior"].to_dataset()
            base = base[var_names] if var_names is not None else base
            parts.append(xr.zeros_like(base.isel(chain=0, draw=0, drop=True), dtype=float))
        else:
            parts.append(psense(idata, var_names=var_names, group=group))
    joined = xr.concat(parts, dim="component").assign_coords(component=["prior", "likelihood"])
    table = dataset_to_dataframe(joined, sample_dims=["component"]).T.astype(float)
    table["diagnosis"] = np.where((table["prior"] >= THRESHOLD) & (table["likelihood"] >= THRESHOLD),
                                  "potential prior-data conflict",
                                  np.where(table["prior"] > THRESHOLD, "potential strong prior / weak likelihood",
                                           "✓"))
    table = table.copy()
    table["variable"] = [str(name).split("[")[0] for name in table.index]
    return table


def by_variable(table) -> "pandas.DataFrame":
    """:func:`prior_sensitivity`'s table per variable: the median and largest sensitivities, and
    the share of elements above :data:`THRESHOLD`.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`prior_sensitivity`'s.

    Returns
    -------
    pandas.DataFrame
        Indexed by variable: ``prior_median``, ``prior_max``, ``prior_share``,
        ``likelihood_median``, ``likelihood_max``, ``likelihood_share``, ``size``.
    """
    groups = table.groupby("variable", sort=False)
    out = groups.agg(prior_median=("prior", "median"), prior_max=("prior", "max"),
                     likelihood_median=("likelihood", "median"), likelihood_max=("likelihood", "max"),
                     size=("prior", "size"))
    out["prior_share"] = groups["prior"].apply(lambda s: float((s > THRESHOLD).mean()))
    out["likelihood_share"] = groups["likelihood"].apply(lambda s: float((s > THRESHOLD).mean()))
    return out[["prior_median", "prior_max", "prior_share", "likelihood_median", "likelihood_max",
                "likelihood_share", "size"]]


def plot(idata: DataTree, var_names, model=None, title: str | None = None) -> Figure:
    """ArviZ's power-scaled posteriors (``arviz_plots.plot_psense_dist``) of ``var_names``.

    Parameters
    ----------
    idata : xarray.DataTree
        As :func:`prior_sensitivity` takes it.
    var_names : list of str
        A few scalar variables (each element gets its own panel).
    model : pymc.Model, optional
        To add the ``log_prior`` group where ``idata`` lacks it.
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import arviz_plots as azp

    _prepared(idata, model, "sensitivity.plot")
    rows = len(var_names) if isinstance(var_names, (list, tuple)) else 1
    pc = azp.plot_psense_dist(idata, var_names=var_names, backend="matplotlib",
                              figure_kwargs={"figsize": (10, 2.2 * rows + 0.6), "layout": "constrained"})
    return from_arviz(pc, title)
