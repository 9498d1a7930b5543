"""Figures that compare many fits: the KL weights of a regression (``bnn-zoo regression``), the
prior sweep (``bnn-zoo report``) and the other methods (``bnn-zoo alternatives``).

Every function returns its matplotlib Figure and writes nothing;
:func:`bnn_zoo.evaluation.plots.save` writes it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

__all__ = ["hyperprior_effect", "loo_vs_test", "method_bands", "method_maps", "psense_grid", "regression_sweep",
           "shift_curves", "sweep_lines"]


def regression_sweep(x_train, y_train, x_grid, truth, panels: list[dict], data_range,
                     title: str = "", extra_truth=None) -> Figure:
    """One panel per KL weight of a 1-D regression fit.

    Garg's Figs. 3-4 (Bayesian neural networks and variational inference).
    Each panel shows the training data, the truth, the posterior predictive
    mean, a +/-2 sd band of the network output over posterior draws
    (epistemic uncertainty) and the 95% posterior predictive interval
    (observation noise included, dotted). The data range is shaded.
    ``panels`` are dicts with ``label`` (panel title), ``mean``, ``sd``,
    ``lo`` and ``hi`` on ``x_grid``. ``extra_truth`` is an optional
    ``(curve, label)`` drawn dashed.

    Parameters
    ----------
    x_train : numpy.ndarray
        Training inputs.
    y_train : numpy.ndarray
        Training targets.
    x_grid : numpy.ndarray
        The prediction grid.
    truth : numpy.ndarray
        The true curve on the grid.
    panels : list of dict
        One per panel, as above.
    data_range : tuple of float
        Where the training inputs were drawn (shaded).
    title : str, default ""
        The figure's title.
    extra_truth : tuple, optional
        ``(curve, label)`` drawn dashed.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    n = len(panels)
    cols = min(n, 3)
    rows = -(-n // cols)
    # The legend takes a free slot of the last row, or a column of its own.
    legend_column = rows * cols == n
    widths = [1.0] * cols + ([0.8] if legend_column else [])
    fig, axes = plt.subplots(rows, len(widths), figsize=(4.6 * sum(widths), 3.5 * rows),
                             sharex=True, sharey=True, squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    spare = [*axes[:, cols:].ravel(), *axes[:, :cols].ravel()[n:]]
    axes = axes[:, :cols]
    y_all = np.concatenate([np.asarray(y_train), np.asarray(truth)])
    pad = 0.25 * (y_all.max() - y_all.min())
    ylim = (y_all.min() - pad, y_all.max() + pad)
    for ax, panel in zip(axes.ravel(), panels):
        ax.axvspan(*data_range, color="0.92", zorder=0)
        ax.scatter(x_train, y_train, s=4, color="0.45", alpha=0.5, linewidths=0, zorder=1,
                   label="training data")
        ax.fill_between(x_grid, panel["mean"] - 2 * panel["sd"], panel["mean"] + 2 * panel["sd"],
                        color="tab:blue", alpha=0.3, linewidth=0, zorder=2,
                        label="mean $\\pm$ 2 sd (network output)")
        ax.plot(x_grid, panel["lo"], ":", color="tab:blue", lw=1.2, zorder=3,
                label="95% predictive interval (with noise)")
        ax.plot(x_grid, panel["hi"], ":", color="tab:blue", lw=1.2, zorder=3)
        ax.plot(x_grid, truth, color="k", lw=1.3, zorder=4, label="truth $E[y\\,|\\,x]$")
        if extra_truth is not None:
            ax.plot(x_grid, extra_truth[0], "--", color="k", lw=0.8, zorder=4, label=extra_truth[1])
        ax.plot(x_grid, panel["mean"], color="tab:red", lw=1.5, zorder=5,
                label="posterior predictive mean")
        ax.set_title(panel["label"], fontsize=9.5)
        ax.set_ylim(*ylim)
        ax.set_xlim(x_grid.min(), x_grid.max())
    for ax in axes.ravel()[n - cols:n]:
        ax.set_xlabel("x")
        ax.xaxis.set_tick_params(labelbottom=True)
    for ax in axes[:, 0]:
        ax.set_ylabel("y")
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.92"))
    labels.append("data range")
    for ax in spare:
        ax.axis("off")
    spare[0].legend(handles, labels, loc="center", fontsize=9, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11 if cols > 1 else 9.5)
    fig.tight_layout()
    return fig


# --- prior sweeps (bnn-zoo report) ------------------------------------------------


def _by_dataset(frame):
    datasets = sorted(frame["dataset"].unique())
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.2 * len(datasets), 4.6), squeeze=False)
    return fig, list(zip(datasets, axes[0]))


def sweep_lines(frame, column: str, ylabel: str, styles: dict) -> Figure:
    """``frame[column]`` (with ``_lo``/``_hi`` interval columns) against the noise, one line per
    prior pair (colour: weight prior, line style: hyperprior), one panel per data set.

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows with ``dataset``, ``noise``, ``pair`` and the column with its interval.
    column : str
        The column drawn.
    ylabel : str
        The y axis' label.
    styles : dict of str to str
        The line style of each hyperprior.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    priors = sorted({p.split("-")[0] for p in frame["pair"]})
    colors = dict(zip(priors, plt.cm.tab10(np.arange(len(priors)))))
    fig, panels = _by_dataset(frame)
    for dataset, ax in panels:
        d = frame[frame["dataset"] == dataset]
        pairs = sorted(d["pair"].unique())
        for k, pair in enumerate(pairs):
            prior, hyper = pair.split("-")
            t = d[d["pair"] == pair].sort_values("noise")
            x = t["noise"] + (k - len(pairs) / 2) * 0.002  # a small dodge keeps the bars apart
            ax.errorbar(x, t[column], yerr=[t[column] - t[f"{column}_lo"], t[f"{column}_hi"] - t[column]],
                        color=colors[prior], ls=styles.get(hyper, "-"), lw=1.2, capsize=2, label=pair)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(dataset)
        ax.set_xlabel("noise")
        ax.set_ylabel(ylabel)
    panels[-1][1].legend(fontsize=7, ncol=2, loc="best")
    fig.suptitle("mean over seeds with 95% intervals (colour: weight prior; line: hyperprior)", y=1.0)
    return fig


def hyperprior_effect(effects, styles: dict) -> Figure:
    """Each hyperprior's held-out ELPD gain over the fixed scale against the noise (95% intervals).

    Parameters
    ----------
    effects : pandas.DataFrame
        :func:`bnn_zoo.evaluation.sweeps.hyperprior_effects`' table.
    styles : dict of str to str
        The line style of each hyperprior.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    fig, panels = _by_dataset(effects)
    for dataset, ax in panels:
        d = effects[effects["dataset"] == dataset]
        for k, (hyper, t) in enumerate(d.groupby("hyperprior")):
            t = t.sort_values("noise")
            ax.errorbar(t["noise"] + (k - 1) * 0.004, t["elpd_gain"],
                        yerr=[t["elpd_gain"] - t["elpd_gain_lo"], t["elpd_gain_hi"] - t["elpd_gain"]],
                        ls=styles.get(hyper, "-"), marker="o", ms=3, capsize=3, label=hyper)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(dataset)
        ax.set_xlabel("noise")
        ax.set_ylabel("held-out ELPD gain over fixed scale (nats / 1,000 points)")
    panels[-1][1].legend(fontsize=8)
    fig.suptitle("hyperprior minus fixed scale, same weight prior and data (mean over priors; 95% intervals "
                 "over seeds)", y=1.0)
    return fig


def loo_vs_test(table) -> Figure:
    """PSIS-LOO (per training point) against the held-out ELPD (per test point), one dot per fit,
    coloured by the share of the fit's points whose Pareto k is above 0.7.

    Parameters
    ----------
    table : pandas.DataFrame
        The sweep's table with :func:`bnn_zoo.evaluation.sweeps.with_pairs`' columns.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    fig, panels = _by_dataset(table)
    for dataset, ax in panels:
        d = table[table["dataset"] == dataset]
        dots = ax.scatter(d["elpd_test_mean"], d["elpd_loo_mean"], c=d["pareto_k_bad_share"], cmap="viridis",
                          vmin=0, vmax=max(0.05, float(d["pareto_k_bad_share"].max())), s=10)
        lo = float(np.nanmin([d["elpd_test_mean"].min(), d["elpd_loo_mean"].min()]))
        hi = float(np.nanmax([d["elpd_test_mean"].max(), d["elpd_loo_mean"].max()]))
        ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8)
        ax.set_title(dataset)
        ax.set_xlabel("held-out ELPD per test point")
        ax.set_ylabel("PSIS-LOO ELPD per training point")
        fig.colorbar(dots, ax=ax, label="share of points with k-hat > 0.7")
    return fig


def method_maps(xx, yy, maps: dict, X, y, title: str = "", per_row: int = 5) -> Figure:
    """Each method's predictive mean (upper panel) and sd (lower) of P(class 1) on the grid.

    ``maps``: method -> (mean, sd), each shaped like ``xx``. One colour scale
    for every sd panel, so that the methods' uncertainty compares by eye.

    Parameters
    ----------
    xx : numpy.ndarray
        The grid's first coordinate (``np.meshgrid``).
    yy : numpy.ndarray
        The grid's second coordinate.
    maps : dict
        Each method's (mean, sd) maps, shaped like ``xx``.
    X : numpy.ndarray
        The training points, (n, 2), drawn on top.
    y : numpy.ndarray
        Their labels.
    title : str, default ""
        The figure's title.
    per_row : int, default 5
        Methods per row.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    names = list(maps)
    blocks = -(-len(names) // per_row)
    fig, axes = plt.subplots(2 * blocks, per_row, figsize=(2.6 * per_row, 5.0 * blocks), squeeze=False,
                             sharex=True, sharey=True)
    sd_max = max(float(sd.max()) for _, sd in maps.values())
    for k, ax in enumerate(axes.ravel()):
        ax.set_axis_off()
    for i, name in enumerate(names):
        r, c = 2 * (i // per_row), i % per_row
        mean, sd = maps[name]
        for ax, z, cmap, hi in ((axes[r, c], mean, "coolwarm", 1.0), (axes[r + 1, c], sd, "viridis", sd_max)):
            ax.set_axis_on()
            im = ax.contourf(xx, yy, z, levels=np.linspace(0, hi, 21), cmap=cmap, extend="max")
            ax.scatter(X[:, 0], X[:, 1], c=y, cmap="coolwarm", s=2, edgecolors="k", linewidths=0.1, alpha=0.5)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, c].set_title(name, fontsize=10)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.5, label="sd of P(class 1)")
    fig.suptitle(title, fontsize=10)
    return fig


def method_bands(task, bands: dict, reference: str = "nuts", per_row: int = 4) -> Figure:
    """Each method's predictive mean +- 2 sd of the regression function, over the reference's band.

    Parameters
    ----------
    task : bnn_zoo.data.regression.Task
        The regression task (its data and grid).
    bands : dict
        Each method's (mean, sd) of the regression function on the grid.
    reference : str, default "nuts"
        The method whose band is drawn under the others.
    per_row : int, default 4
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    names = [n for n in bands if n != reference] or list(bands)
    rows = -(-len(names) // per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(3.4 * per_row, 2.6 * rows), squeeze=False,
                             sharex=True, sharey=True)
    x = task.x_grid
    lo_y, hi_y = np.percentile(task.y_train, [0, 100])
    pad = 0.6 * (hi_y - lo_y)
    for ax in axes.ravel()[len(names):]:
        ax.set_axis_off()
    for ax, name in zip(axes.ravel(), names):
        if reference in bands and name != reference:
            m, s = bands[reference]
            ax.fill_between(x, m - 2 * s, m + 2 * s, color="0.75", label=f"{reference} +- 2 sd")
        m, s = bands[name]
        ax.fill_between(x, m - 2 * s, m + 2 * s, color="tab:blue", alpha=0.35, label="+- 2 sd")
        ax.plot(x, m, color="tab:blue", lw=1)
        ax.plot(x, task.mean_grid, color="k", lw=0.8, ls="--")
        ax.scatter(task.x_train, task.y_train, s=2, color="k", alpha=0.4)
        if task.gap is not None:
            ax.axvspan(*task.gap, color="tab:orange", alpha=0.1)
        ax.set_ylim(lo_y - pad, hi_y + pad)
        ax.set_title(name, fontsize=10)
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{task.name}{' with a gap' if task.gap else ''}: the network output's mean +- 2 sd "
                 f"(grey: {reference}; dashed: E[y | x])", fontsize=10)
    return fig


def shift_curves(frame) -> Figure:
    """Accuracy, NLL and ECE against the rotation angle, one line per method (``frame``: long format).

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`bnn_zoo.evaluation.baseline_tables.shift_table`'s table.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`~bnn_zoo.evaluation.plots.save`.
    """
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for method, part in frame.groupby("method", sort=False):
        part = part.sort_values("angle")
        for ax, col in zip(axes, ("accuracy", "nll", "ece")):
            ax.plot(part["angle"], part[col], marker="o", ms=3, label=method)
    for ax, col in zip(axes, ("accuracy", "NLL", "ECE")):
        ax.set_xlabel("rotation (degrees)")
        ax.set_ylabel(col)
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle("MNIST test images rotated (Ovadia et al. 2019's protocol)", fontsize=10)
    return fig


def psense_grid(tables: dict) -> Figure:
    """Each pair's median power-scaling sensitivity per variable, to the prior and to the likelihood.

    Parameters
    ----------
    tables : dict of str to pandas.DataFrame
        :func:`bnn_zoo.evaluation.sensitivity.by_variable`'s table of each pair, by name.

    Returns
    -------
    matplotlib.figure.Figure
        Two heat maps, pairs by variables (a blank cell: the pair has no such variable), with
        each value written in and 0.05 (the threshold) marked on the colour bars.
    """
    import pandas as pd

    names = list(tables)
    variables = list(dict.fromkeys(v for t in tables.values() for v in t.index))
    fig, axes = plt.subplots(1, 2, figsize=(2.2 + 0.75 * len(variables) * 2, 0.9 + 0.32 * len(names)),
                             layout="constrained")
    for ax, (column, label) in zip(axes, (("prior_median", "prior"), ("likelihood_median", "likelihood"))):
        grid = pd.DataFrame({n: tables[n][column] for n in names}).T.reindex(index=names, columns=variables)
        image = ax.imshow(grid.values, cmap="viridis", aspect="auto", vmin=0)
        for (i, j), value in np.ndenumerate(grid.values):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if value < 0.6 * np.nanmax(grid.values) else "black")
        ax.set_xticks(range(len(variables)), variables, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names if ax is axes[0] else [])
        ax.set_title(f"sensitivity to the {label} (median over elements)")
        bar = fig.colorbar(image, ax=ax, shrink=0.8)
        bar.ax.axhline(0.05, color="red", lw=1.5)
    return fig
