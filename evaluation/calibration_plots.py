"""Calibration plots through arviz-plots: PIT, LOO-PIT and PAVA reliability diagrams.

A calibrated predictive puts each observation at a uniformly distributed quantile of its own
predictive distribution: the probability integral transform (PIT) values are uniform. The
plots here draw the difference between the PIT values' empirical CDF and the uniform one, with
no envelope: arviz-plots tests the values for uniformity (its POT-C test; Tesso et al.,
*LOO-PIT predictive model checking*), prints the p-value at the top left (``p=…(α=0.01)``)
and, where p is below α, marks the points that drive the departure. How to read the curve, and
what α is, is on the user guide's calibration page. For a binary outcome the PAVA reliability
diagram (Dimitriadis, Gneiting and Jordan, *Stable reliability diagrams for probabilistic
classifiers*) sets the predicted probability against the observed frequency, made monotone by
the pool-adjacent-violators algorithm.

- :func:`pit` of in-sample data: LOO-PIT (``arviz_plots.plot_loo_pit``) where the DataTree has
  the log-likelihood, so that each observation is judged by a predictive that did not see it,
  else the plain PIT (``plot_ppc_pit``);
- :func:`heldout` builds the DataTree of held-out targets and their predictive draws, for
  :func:`pit` and :func:`reliability` on a test set;
- :func:`with_predictive` adds the in-sample posterior predictive of a fit to its draws;
- :func:`reliability`: the PAVA diagram (``plot_ppc_pava``) of a binary outcome.

Each returns a matplotlib figure (:func:`from_arviz`), for :func:`bnn_zoo.evaluation.plots.save`.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from xarray import DataTree

__all__ = ["from_arviz", "heldout", "pit", "reliability", "with_predictive"]


def from_arviz(pc, title: str | None = None) -> Figure:
    """The matplotlib figure of an arviz-plots ``PlotCollection``, titled.

    Parameters
    ----------
    pc : arviz_plots.PlotCollection
        A plot drawn with the matplotlib backend.
    title : str, optional
        On its one panel, or above its panels.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = next(iter(pc.viz["plot"].data_vars.values())).values.flat[0].figure
    if title:
        fig.axes[0].set_title(title) if len(fig.axes) == 1 else fig.suptitle(title, y=1.02)
    return fig


def with_predictive(fit, idata: DataTree, random_seed: int = 0) -> DataTree:
    """``idata`` with the posterior predictive of the fit's observed variables at its own data.

    Parameters
    ----------
    fit : bnn_zoo.FitResult
        The fit whose draws ``idata`` holds.
    idata : xarray.DataTree
        :func:`bnn_zoo.sample`'s draws (with ``log_likelihood`` for LOO-PIT).
    random_seed : int, default 0
        Seeds the observed variables' draws.

    Returns
    -------
    xarray.DataTree
        ``idata`` with a ``posterior_predictive`` group added (in place, and returned).
    """
    from bnn_zoo.inference.posterior.prediction import predict

    pred = predict(fit, idata=idata, random_seed=random_seed)
    idata["posterior_predictive"] = DataTree(pred["predictions"].to_dataset())
    return idata


def heldout(y, draws, name: str = "y") -> DataTree:
    """A DataTree of held-out targets and their predictive draws, for :func:`pit` and :func:`reliability`.

    Parameters
    ----------
    y : array_like, shape (n,)
        The held-out targets.
    draws : array_like, shape (draws, n)
        Predictive draws at the same inputs: of the target for :func:`pit`, or of the
        probability of class 1 (or 0/1 outcomes) for :func:`reliability`.
    name : str, default "y"
        The variable's name in the plots.

    Returns
    -------
    xarray.DataTree
        ``posterior_predictive`` (one chain) and ``observed_data``.

    Raises
    ------
    ValueError
        If ``draws``' last dimension is not ``len(y)``.
    """
    y = np.asarray(y).ravel()
    d = np.asarray(draws).reshape(-1, np.shape(draws)[-1])
    if d.shape[1] != len(y):
        raise ValueError(f"draws has {d.shape[1]} points in its last dimension, y {len(y)}")
    return DataTree.from_dict({
        "posterior_predictive": xr.Dataset({name: (("chain", "draw", "obs"), d[None])}),
        "observed_data": xr.Dataset({name: (("obs",), y)})})


def pit(idata: DataTree, var_names=None, title: str | None = None) -> Figure:
    """The PIT ECDF-difference plot of observed data against its posterior predictive.

    Parameters
    ----------
    idata : xarray.DataTree
        With ``posterior_predictive`` and ``observed_data`` (:func:`with_predictive` or
        :func:`heldout`); with ``log_likelihood`` too, the PIT values are leave-one-out ones.
    var_names : list of str, optional
        The observed variables (default: all).
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import arviz_plots as azp

    plot = azp.plot_loo_pit if "log_likelihood" in idata.children else azp.plot_ppc_pit
    return from_arviz(plot(idata, var_names=var_names, backend="matplotlib"), title)


def reliability(idata: DataTree, var_names=None, title: str | None = None) -> Figure:
    """The PAVA reliability diagram of a binary outcome: predicted probability against observed frequency.

    Parameters
    ----------
    idata : xarray.DataTree
        With ``posterior_predictive`` (draws of the outcome or of its probability) and
        ``observed_data`` holding 0/1 outcomes.
    var_names : list of str, optional
        The observed variables (default: all).
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import arviz_plots as azp

    return from_arviz(azp.plot_ppc_pava(idata, var_names=var_names, backend="matplotlib"), title)
