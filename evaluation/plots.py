"""Figures: uncertainty maps, weight posteriors, prior comparison, pruning, calibration, sweeps
and the alternatives.

Every function returns nothing and writes one PNG atomically.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bnn_zoo.inference.io import atomic_write  # noqa: E402

__all__ = ["compare", "elbo_trace", "forest", "hyperprior_effect", "image_grid", "loo_vs_test",
           "method_bands", "method_maps", "prior_grid", "pruned_weights", "regression_sweep", "reliability",
           "shift_curves", "snr_distribution", "sweep_lines", "uncertainty_map", "variance_vs_error",
           "weight_posteriors"]


def _save(fig, path) -> None:
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def _scatter(ax, X, y) -> None:
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap="coolwarm", s=9, edgecolors="k", linewidths=0.3)


def uncertainty_map(path, xx, yy, proba_grid, X, y, title: str = "") -> None:
    """Seed 004's two panels: posterior mean of P(class 1) and its posterior std.

    ``proba_grid`` is ``(draws, xx.size, classes)``; training points ``X, y``
    are drawn on top.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    xx : numpy.ndarray
        The grid's first coordinate (``np.meshgrid``).
    yy : numpy.ndarray
        The grid's second coordinate.
    proba_grid : numpy.ndarray
        Class probabilities on the grid, (draws, xx.size, classes).
    X : numpy.ndarray
        The training points, (n, 2), drawn on top.
    y : numpy.ndarray
        Their labels.
    title : str, default ""
        The figure's title.
    """
    p1 = proba_grid[..., 1]
    mean, std = p1.mean(0).reshape(xx.shape), p1.std(0).reshape(xx.shape)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2), sharey=True)
    panels = [
        (mean, "coolwarm", (0, 1), "posterior predictive mean of P(class 1)"),
        (std, "viridis", (0, None), "posterior std of P(class 1) (uncertainty)"),
    ]
    for ax, (z, cmap, (lo, hi), label) in zip(axes, panels):
        im = ax.contourf(xx, yy, z, levels=20, cmap=cmap, vmin=lo, vmax=hi)
        fig.colorbar(im, ax=ax, label=label, fraction=0.046, pad=0.03)
        _scatter(ax, X, y)
        ax.set_xlabel("$x_1$")
    axes[0].contour(xx, yy, mean, levels=[0.5], colors="k", linewidths=1)
    axes[0].set_ylabel("$x_2$")
    if title:
        fig.suptitle(title)
    _save(fig, path)


def prior_grid(path, xx, yy, mean_maps: dict, accuracies: dict, X, y, title: str = "") -> None:
    """Grid of posterior-mean maps, one per (prior, hyperprior) pair.

    Panels share limits set once (not matplotlib's shared axes, whose every
    autoscale touches all 16) and a fixed layout (not ``tight_layout``, one
    more rendering): a third less time for 16 panels.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    xx : numpy.ndarray
        The grid's first coordinate (``np.meshgrid``).
    yy : numpy.ndarray
        The grid's second coordinate.
    mean_maps : dict
        The posterior-mean map of P(class 1) of each (prior, hyperprior) pair, shaped like ``xx``.
    accuracies : dict
        Each pair's test accuracy, in its panel's title.
    X : numpy.ndarray
        The training points, (n, 2), drawn on top.
    y : numpy.ndarray
        Their labels.
    title : str, default ""
        The figure's title.
    """
    priors = list(dict.fromkeys(p for p, _ in mean_maps))
    hypers = list(dict.fromkeys(h for _, h in mean_maps))
    width, height = 3 * len(priors), 2.8 * len(hypers)
    fig, axes = plt.subplots(len(hypers), len(priors), figsize=(width, height), squeeze=False)
    # Margins in inches, whatever the number of panels: names left, titles on top.
    fig.subplots_adjust(left=0.84 / width, right=1 - 0.12 / width, bottom=0.45 / height,
                        top=1 - 1.12 / height, wspace=0.12, hspace=0.28)
    for (prior, hyper), mean in mean_maps.items():
        ax = axes[hypers.index(hyper), priors.index(prior)]
        ax.set_autoscale_on(False)
        ax.set(xlim=(xx.min(), xx.max()), ylim=(yy.min(), yy.max()))
        ax.contourf(xx, yy, mean.reshape(xx.shape), levels=20, cmap="coolwarm", vmin=0, vmax=1)
        ax.contour(xx, yy, mean.reshape(xx.shape), levels=[0.5], colors="k", linewidths=0.8)
        _scatter(ax, X, y)
        ax.set_title(f"acc {accuracies[prior, hyper]:.3f}", fontsize=9)
        ax.label_outer()
    for j, prior in enumerate(priors):
        axes[0, j].annotate(prior, (0.5, 1), xycoords="axes fraction", xytext=(0, 26),
                            textcoords="offset points", ha="center", fontsize=12, weight="bold")
    for i, hyper in enumerate(hypers):
        axes[i, 0].set_ylabel(hyper, fontsize=12, weight="bold")
    if title:
        fig.suptitle(title, y=1 - 0.22 / height)
    _save(fig, path)


def weight_posteriors(path, idatas: dict, var_name: str) -> None:
    """ArviZ densities of every weight of ``var_name``, one panel per model (seed 004 Fig. 3).

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    idatas : dict of str to xarray.DataTree
        Posterior draws by model name.
    var_name : str
        The weights' variable (``W_2``, say).
    """
    az.plot_dist(
        idatas, var_names=[var_name], kind="kde", backend="matplotlib", cols=["model"],
        aes={"color": [d for d in next(iter(idatas.values()))["posterior"][var_name].dims
                       if d not in ("chain", "draw")]},
        visuals={"point_estimate_text": False, "credible_interval": False, "point_estimate": False},
        figure_kwargs={"figsize": (3.2 * len(idatas), 3.2)},
    )
    fig = plt.gcf()
    lo = min(ax.get_xlim()[0] for ax in fig.axes)
    hi = max(ax.get_xlim()[1] for ax in fig.axes)
    for ax in fig.axes:
        ax.set_xlim(lo, hi)  # a shared axis shows which prior concentrates at zero
    fig.suptitle(f"posterior densities of the output-layer weights {var_name}", y=1.02)
    _save(fig, path)


def compare(path, cmp_df) -> None:
    """``az.plot_compare`` of an ``az.compare`` table.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    cmp_df : pandas.DataFrame
        ``az.compare``'s table.
    """
    az.plot_compare(cmp_df, backend="matplotlib", figure_kwargs={"figsize": (7, 0.35 * len(cmp_df) + 1.5)})
    _save(plt.gcf(), path)


def forest(path, idatas: dict, var_names: list[str]) -> None:
    """``az.plot_forest`` of ``var_names`` across models.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    idatas : dict of str to xarray.DataTree
        Posterior draws by model name.
    var_names : list of str
        The variables, the same in every model.
    """
    pc = az.plot_forest(idatas, var_names=var_names, combined=True, backend="matplotlib",
                        figure_kwargs={"figsize": (8, 1.5 + 0.28 * len(idatas) * len(var_names))})
    pc.add_legend("model", title="model", loc="upper right", fontsize=8)
    plt.gcf().suptitle(f"posterior of {', '.join(var_names)} across models", y=1.0)
    _save(plt.gcf(), path)


def snr_distribution(path, snr, fractions, title: str = "") -> None:
    """Seed 001 Fig. 2: density and CDF of the weights' signal-to-noise (dB), pruning cut-offs marked.

    ``snr`` is ``|mu| / sigma`` per weight; ``fractions`` the shares pruned
    (each drawn at its quantile of ``snr``). Blundell et al. plot
    ``10 log10(snr)``.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    snr : numpy.ndarray
        Each weight's signal-to-noise ratio.
    fractions : sequence of float
        The shares pruned, marked at their quantiles.
    title : str, default ""
        The figure's title.
    """
    db = 10 * np.log10(np.clip(np.asarray(snr, dtype="float64"), 1e-12, None))
    colors = plt.cm.viridis(np.linspace(0.1, 0.9, max(len(fractions), 1)))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 6), sharex=True)
    top.hist(db, bins=200, density=True, color="0.4")
    top.set_ylabel("density")
    order = np.sort(db)
    bottom.plot(order, np.arange(1, order.size + 1) / order.size, color="0.2")
    bottom.set_ylabel("cumulative share of weights")
    bottom.set_xlabel("signal-to-noise ratio 10 log10(|mu| / sigma) (dB)")
    for fraction, color in zip(fractions, colors):
        cut = np.quantile(db, fraction)
        for ax in (top, bottom):
            ax.axvline(cut, color=color, lw=1.2, label=f"{fraction:.0%} pruned" if ax is top else None)
    top.set_xlim(np.quantile(db, 0.001), db.max())  # a long thin tail of near-zero means
    top.legend(fontsize=8)
    if title:
        top.set_title(title)
    _save(fig, path)


def pruned_weights(path, mu, masks: dict, title: str = "") -> None:
    """Seed 001 Fig. 3: histograms of the posterior-mean weights left by each pruning method.

    ``masks`` maps a method name to ``{fraction: keep mask}``; one panel per
    method, one histogram per fraction (0 is the unpruned network).

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    mu : numpy.ndarray
        The weights' posterior means.
    masks : dict
        :func:`bnn_zoo.evaluation.pruning.pruning_masks`' masks.
    title : str, default ""
        The figure's title.
    """
    mu = np.asarray(mu, dtype="float64")
    edges = np.linspace(*np.quantile(mu, [0.0005, 0.9995]), 161)
    fig, axes = plt.subplots(1, len(masks), figsize=(5.2 * len(masks), 3.8), sharey=True,
                             squeeze=False)
    for ax, (method, by_fraction) in zip(axes[0], masks.items()):
        colors = plt.cm.viridis(np.linspace(0.1, 0.9, len(by_fraction)))
        for (fraction, keep), color in zip(by_fraction.items(), colors):
            ax.hist(mu[keep], bins=edges, histtype="step", color="k" if fraction == 0 else color,
                    lw=1.1, label=f"{fraction:.0%} pruned")
        ax.set_yscale("log")
        ax.set_title(f"{method.replace('_', '-')} pruning")
        ax.set_xlabel("posterior mean of the weight")
    axes[0, 0].set_ylabel("weights kept (log scale)")
    axes[0, -1].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    _save(fig, path)


def variance_vs_error(path, expected_error, variance, correct) -> None:
    """Seed 004 Fig. 4: predictive variance against expected error rate, one point per image.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    expected_error : numpy.ndarray
        Each image's expected error rate.
    variance : numpy.ndarray
        Each image's predictive variance.
    correct : numpy.ndarray of bool
        Whether each image is classified correctly (the points' colour).
    """
    fig, ax = plt.subplots(figsize=(6, 4.5))
    floor = 1e-9  # log axes: exact zeros (float32 round-off) are drawn at the floor
    x, y = np.maximum(expected_error, floor), np.maximum(variance, floor)
    for mask, colour, label in ((correct, "tab:blue", "correct"), (~correct, "tab:red", "misclassified")):
        ax.scatter(x[mask], y[mask], s=4, alpha=0.4, c=colour, label=f"{label} ({mask.sum()})",
                   linewidths=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("expected error rate (1 - mean p of the predicted class)")
    ax.set_ylabel("variance of p over draws, summed over classes")
    ax.set_title("Predictive uncertainty per test image")
    ax.legend(markerscale=4)
    _save(fig, path)


def image_grid(path, images, titles, title: str = "", cols: int = 6) -> None:
    """Seed 004 Figs. 5-6: a grid of (1, h, w) images with one caption each.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    images : numpy.ndarray
        Images, (n, 1, h, w).
    titles : list of str
        One caption per image.
    title : str, default ""
        The figure's title.
    cols : int, default 6
        Images per row.
    """
    rows = max(1, -(-len(images) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(1.9 * cols, 2.2 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, image, caption in zip(axes.ravel(), images, titles):
        ax.imshow(np.asarray(image)[0], cmap="gray_r")
        ax.set_title(caption, fontsize=8)
    fig.suptitle(title)
    _save(fig, path)


def reliability(path, table, title: str = "") -> None:
    """Reliability diagram from :func:`evaluation.metrics.reliability_table` (dict or DataFrame).

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    table : dict or pandas.DataFrame
        :func:`bnn_zoo.evaluation.metrics.reliability_table`'s table.
    title : str, default ""
        The figure's title.
    """
    n_bins = len(table["count"])
    edges = np.linspace(0, 1, n_bins + 1)
    fig, (ax, ax_n) = plt.subplots(2, 1, figsize=(5, 6.6), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    used = np.asarray(table["count"]) > 0
    ax.bar(edges[:-1][used], np.asarray(table["accuracy"])[used], width=1 / n_bins, align="edge",
           edgecolor="k", alpha=0.7, label="accuracy in bin")
    ax.plot(np.asarray(table["confidence"])[used], np.asarray(table["accuracy"])[used], "o",
            color="tab:red", label="(mean confidence, accuracy)", clip_on=False, zorder=3)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    # Above the panel: inside, it covered the low-confidence bins (few images, any accuracy).
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    fig.suptitle(title)
    ax_n.bar(edges[:-1], np.asarray(table["count"]), width=1 / n_bins, align="edge", edgecolor="k")
    ax_n.set_yscale("log")
    ax_n.set_xlabel("confidence (mean p of the predicted class)")
    ax_n.set_ylabel("images")
    ax_n.set_xlim(0, 1)
    _save(fig, path)


def elbo_trace(path, elbo, steps_per_epoch: int) -> None:
    """The ELBO per step (light) and its per-epoch mean, against epochs.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    elbo : numpy.ndarray
        The ELBO per step.
    steps_per_epoch : int
        Steps per epoch (the x axis is in epochs).
    """
    elbo = np.asarray(elbo)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(1, len(elbo) + 1) / steps_per_epoch
    ax.plot(x, elbo, lw=0.3, alpha=0.4, color="tab:blue")
    n = len(elbo) // steps_per_epoch
    if n:
        means = elbo[: n * steps_per_epoch].reshape(n, steps_per_epoch).mean(axis=1)
        ax.plot(np.arange(1, n + 1), means, "o-", color="tab:blue", label="epoch mean")
        ax.legend()
        lo = np.percentile(elbo[len(elbo) // 10:], 1)
        ax.set_ylim(lo - 0.1 * abs(lo), None)
    ax.set_xlabel("epoch")
    ax.set_ylabel("ELBO (minibatch estimate)")
    _save(fig, path)


def regression_sweep(path, x_train, y_train, x_grid, truth, panels: list[dict], data_range,
                     title: str = "", extra_truth=None) -> None:
    """Seed 000 Figs. 3-4: one panel per KL weight of a 1-D regression fit.

    Each panel shows the training data, the truth, the posterior predictive
    mean, a +/-2 sd band of the network output over posterior draws
    (epistemic uncertainty) and the 95% posterior predictive interval
    (observation noise included, dotted). The data range is shaded.
    ``panels`` are dicts with ``label`` (panel title), ``mean``, ``sd``,
    ``lo`` and ``hi`` on ``x_grid``. ``extra_truth`` is an optional
    ``(curve, label)`` drawn dashed.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
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
    _save(fig, path)


# --- prior sweeps (bnn-zoo report) ------------------------------------------------


def _by_dataset(frame):
    datasets = sorted(frame["dataset"].unique())
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.2 * len(datasets), 4.6), squeeze=False)
    return fig, list(zip(datasets, axes[0]))


def sweep_lines(path, frame, column: str, ylabel: str, styles: dict) -> None:
    """``frame[column]`` (with ``_lo``/``_hi`` interval columns) against the noise, one line per
    prior pair (colour: weight prior, line style: hyperprior), one panel per data set.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    frame : pandas.DataFrame
        Rows with ``dataset``, ``noise``, ``pair`` and the column with its interval.
    column : str
        The column drawn.
    ylabel : str
        The y axis' label.
    styles : dict of str to str
        The line style of each hyperprior.
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
    _save(fig, path)


def hyperprior_effect(path, effects, styles: dict) -> None:
    """Each hyperprior's held-out ELPD gain over the fixed scale against the noise (95% intervals).

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    effects : pandas.DataFrame
        :func:`bnn_zoo.evaluation.sweeps.hyperprior_effects`' table.
    styles : dict of str to str
        The line style of each hyperprior.
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
    _save(fig, path)


def loo_vs_test(path, table) -> None:
    """PSIS-LOO (per training point) against the held-out ELPD (per test point), one dot per fit,
    coloured by the share of the fit's points whose Pareto k is above 0.7.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    table : pandas.DataFrame
        The sweep's table with :func:`bnn_zoo.evaluation.sweeps.with_pairs`' columns.
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
    _save(fig, path)


def method_maps(path, xx, yy, maps: dict, X, y, title: str = "", per_row: int = 5) -> None:
    """Each method's predictive mean (upper panel) and sd (lower) of P(class 1) on the grid.

    ``maps``: method -> (mean, sd), each shaped like ``xx``. One colour scale
    for every sd panel, so that the methods' uncertainty compares by eye.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
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
    _save(fig, path)


def method_bands(path, task, bands: dict, reference: str = "nuts", per_row: int = 4) -> None:
    """Each method's predictive mean +- 2 sd of the regression function, over the reference's band.

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    task : bnn_zoo.data.regression.Task
        The regression task (its data and grid).
    bands : dict
        Each method's (mean, sd) of the regression function on the grid.
    reference : str, default "nuts"
        The method whose band is drawn under the others.
    per_row : int, default 4
        Panels per row.
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
    _save(fig, path)


def shift_curves(path, frame) -> None:
    """Accuracy, NLL and ECE against the rotation angle, one line per method (``frame``: long format).

    Parameters
    ----------
    path : str or pathlib.Path
        The PNG to write (its folder is created).
    frame : pandas.DataFrame
        :func:`bnn_zoo.evaluation.alternatives.shift_table`'s table.
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
    _save(fig, path)
