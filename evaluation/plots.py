"""Figures of one run: the toy classifiers' uncertainty maps and prior comparison, and the MNIST
networks' calibration, uncertainty, ELBO and pruning; :func:`save` writes any figure.

Every function returns its matplotlib Figure and writes nothing; the caller saves it,
``plots.save(plots.uncertainty_map(...), path)``. The command line picks matplotlib's backend
(:func:`bnn_zoo.cli.main`: Agg), not this module. The figures that compare many fits (the KL
weights of a regression, the prior sweep, the other methods) are in
:mod:`~bnn_zoo.evaluation.comparison_plots`.
"""

from __future__ import annotations

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bnn_zoo.inference.support.io import atomic_write

__all__ = ["compare", "elbo_trace", "forest", "image_grid", "prior_grid", "pruned_weights", "reliability",
           "save", "snr_distribution", "uncertainty_map", "variance_vs_error", "weight_posteriors"]


def save(fig: Figure, path) -> None:
    """Write ``fig`` as a PNG at ``path`` atomically, and close it.

    The folder is created if missing; the PNG is written to a temporary
    file beside ``path`` and renamed, so a reader never sees half a file.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (what this module's functions return).
    path : str or pathlib.Path
        The PNG to write.
    """
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    finally:
        plt.close(fig)


def _scatter(ax, X, y) -> None:
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap="coolwarm", s=9, edgecolors="k", linewidths=0.3)


def uncertainty_map(xx, yy, proba_grid, X, y, title: str = "") -> Figure:
    """Two panels: the posterior mean of P(class 1) and its posterior std.

    The panels of Zharikov, Isachenko and Bochkarev's toy figures.
    ``proba_grid`` is ``(draws, xx.size, classes)``; training points
    ``X, y`` are drawn on top.

    Parameters
    ----------
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

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def prior_grid(xx, yy, mean_maps: dict, accuracies: dict, X, y, title: str = "") -> Figure:
    """Grid of posterior-mean maps, one per (prior, hyperprior) pair.

    Panels share limits set once (not matplotlib's shared axes, whose every
    autoscale touches all 16) and a fixed layout (not ``tight_layout``, one
    more rendering): a third less time for 16 panels.

    Parameters
    ----------
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

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def weight_posteriors(idatas: dict, var_name: str) -> Figure:
    """ArviZ densities of every weight of ``var_name``, one panel per model.

    Zharikov, Isachenko and Bochkarev's Fig. 3, drawn with one x axis for every panel.

    Parameters
    ----------
    idatas : dict of str to xarray.DataTree
        Posterior draws by model name.
    var_name : str
        The weights' variable (``W_2``, say).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def compare(cmp_df) -> Figure:
    """``az.plot_compare`` of an ``az.compare`` table.

    Parameters
    ----------
    cmp_df : pandas.DataFrame
        ``az.compare``'s table.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
    """
    az.plot_compare(cmp_df, backend="matplotlib", figure_kwargs={"figsize": (7, 0.35 * len(cmp_df) + 1.5)})
    return plt.gcf()


def forest(idatas: dict, var_names: list[str]) -> Figure:
    """``az.plot_forest`` of ``var_names`` across models.

    Parameters
    ----------
    idatas : dict of str to xarray.DataTree
        Posterior draws by model name.
    var_names : list of str
        The variables, the same in every model.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
    """
    pc = az.plot_forest(idatas, var_names=var_names, combined=True, backend="matplotlib",
                        figure_kwargs={"figsize": (8, 1.5 + 0.28 * len(idatas) * len(var_names))})
    pc.add_legend("model", title="model", loc="upper right", fontsize=8)
    plt.gcf().suptitle(f"posterior of {', '.join(var_names)} across models", y=1.0)
    return plt.gcf()


def snr_distribution(snr, fractions, title: str = "") -> Figure:
    """Density and CDF of the weights' signal-to-noise (dB), pruning cut-offs marked.

    Fig. 2 of Singh's reproduction of Blundell et al. 2015 (Weight
    Uncertainty in Neural Networks). ``snr`` is ``|mu| / sigma`` per weight;
    ``fractions`` the shares pruned (each drawn at its quantile of ``snr``).
    Blundell et al. plot ``10 log10(snr)``.

    Parameters
    ----------
    snr : numpy.ndarray
        Each weight's signal-to-noise ratio.
    fractions : sequence of float
        The shares pruned, marked at their quantiles.
    title : str, default ""
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def pruned_weights(mu, masks: dict, title: str = "") -> Figure:
    """Histograms of the posterior-mean weights left by each pruning method.

    Fig. 3 of Singh's reproduction of Blundell et al. 2015. ``masks`` maps a
    method name to ``{fraction: keep mask}``; one panel per method, one
    histogram per fraction (0 is the unpruned network).

    Parameters
    ----------
    mu : numpy.ndarray
        The weights' posterior means.
    masks : dict
        :func:`bnn_zoo.evaluation.pruning.pruning_masks`' masks.
    title : str, default ""
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def variance_vs_error(expected_error, variance, correct) -> Figure:
    """Predictive variance against expected error rate, one point per image.

    Zharikov, Isachenko and Bochkarev's Fig. 4.

    Parameters
    ----------
    expected_error : numpy.ndarray
        Each image's expected error rate.
    variance : numpy.ndarray
        Each image's predictive variance.
    correct : numpy.ndarray of bool
        Whether each image is classified correctly (the points' colour).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def image_grid(images, titles, title: str = "", cols: int = 6) -> Figure:
    """A grid of (1, h, w) images with one caption each.

    Zharikov, Isachenko and Bochkarev's Figs. 5-6 (confident mistakes and the least confident test images).

    Parameters
    ----------
    images : numpy.ndarray
        Images, (n, 1, h, w).
    titles : list of str
        One caption per image.
    title : str, default ""
        The figure's title.
    cols : int, default 6
        Images per row.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
    """
    rows = max(1, -(-len(images) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(1.9 * cols, 2.2 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, image, caption in zip(axes.ravel(), images, titles):
        ax.imshow(np.asarray(image)[0], cmap="gray_r")
        ax.set_title(caption, fontsize=8)
    fig.suptitle(title)
    return fig


def reliability(table, title: str = "") -> Figure:
    """Reliability diagram from :func:`evaluation.metrics.reliability_table` (dict or DataFrame).

    Parameters
    ----------
    table : dict or pandas.DataFrame
        :func:`bnn_zoo.evaluation.metrics.reliability_table`'s table.
    title : str, default ""
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig


def elbo_trace(elbo, steps_per_epoch: int) -> Figure:
    """The ELBO per step (light) and its per-epoch mean, against epochs.

    Parameters
    ----------
    elbo : numpy.ndarray
        The ELBO per step.
    steps_per_epoch : int
        Steps per epoch (the x axis is in epochs).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, for :func:`save`.
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
    return fig
