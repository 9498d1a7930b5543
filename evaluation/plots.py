"""Figures: uncertainty maps, weight posteriors, prior comparison.

Every function returns nothing and writes one PNG atomically.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from inference.io import atomic_write  # noqa: E402


def _save(fig, path) -> None:
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def _scatter(ax, X, y) -> None:
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap="coolwarm", s=9, edgecolors="k", linewidths=0.3)


def uncertainty_map(path, xx, yy, proba_grid, X, y, title: str = "") -> None:
    """Seed 004's two panels: posterior mean of P(class 1) and its posterior std.

    ``proba_grid`` is ``(draws, xx.size, classes)``; training points ``X, y``
    are drawn on top.
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
    """Grid of posterior-mean maps, one per (prior, hyperprior) pair."""
    priors = list(dict.fromkeys(p for p, _ in mean_maps))
    hypers = list(dict.fromkeys(h for _, h in mean_maps))
    fig, axes = plt.subplots(len(hypers), len(priors), figsize=(3 * len(priors), 2.8 * len(hypers)),
                             sharex=True, sharey=True, squeeze=False)
    for (prior, hyper), mean in mean_maps.items():
        ax = axes[hypers.index(hyper), priors.index(prior)]
        ax.contourf(xx, yy, mean.reshape(xx.shape), levels=20, cmap="coolwarm", vmin=0, vmax=1)
        ax.contour(xx, yy, mean.reshape(xx.shape), levels=[0.5], colors="k", linewidths=0.8)
        _scatter(ax, X, y)
        ax.set_title(f"acc {accuracies[prior, hyper]:.3f}", fontsize=9)
    for j, prior in enumerate(priors):
        axes[0, j].annotate(prior, (0.5, 1.18), xycoords="axes fraction", ha="center",
                            fontsize=12, weight="bold")
    for i, hyper in enumerate(hypers):
        axes[i, 0].set_ylabel(hyper, fontsize=12, weight="bold")
    if title:
        fig.suptitle(title, y=1.0)
    fig.tight_layout()
    _save(fig, path)


def weight_posteriors(path, idatas: dict, var_name: str) -> None:
    """ArviZ densities of every weight of ``var_name``, one panel per model (seed 004 Fig. 3)."""
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
    """``az.plot_compare`` of an ``az.compare`` table."""
    az.plot_compare(cmp_df, backend="matplotlib", figure_kwargs={"figsize": (7, 0.35 * len(cmp_df) + 1.5)})
    _save(plt.gcf(), path)


def forest(path, idatas: dict, var_names: list[str]) -> None:
    """``az.plot_forest`` of ``var_names`` across models."""
    pc = az.plot_forest(idatas, var_names=var_names, combined=True, backend="matplotlib",
                        figure_kwargs={"figsize": (8, 1.5 + 0.28 * len(idatas) * len(var_names))})
    pc.add_legend("model", title="model", loc="upper right", fontsize=8)
    plt.gcf().suptitle(f"posterior of {', '.join(var_names)} across models", y=1.0)
    _save(plt.gcf(), path)


def variance_vs_error(path, expected_error, variance, correct) -> None:
    """Seed 004 Fig. 4: predictive variance against expected error rate, one point per image."""
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
    """Seed 004 Figs. 5-6: a grid of (1, h, w) images with one caption each."""
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
    """Reliability diagram from :func:`evaluation.metrics.reliability_table` (dict or DataFrame)."""
    n_bins = len(table["count"])
    edges = np.linspace(0, 1, n_bins + 1)
    fig, (ax, ax_n) = plt.subplots(2, 1, figsize=(5, 6), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    used = np.asarray(table["count"]) > 0
    ax.bar(edges[:-1][used], np.asarray(table["accuracy"])[used], width=1 / n_bins, align="edge",
           edgecolor="k", alpha=0.7, label="accuracy in bin")
    ax.plot(np.asarray(table["confidence"])[used], np.asarray(table["accuracy"])[used], "o",
            color="tab:red", label="(mean confidence, accuracy)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    ax.set_title(title)
    ax_n.bar(edges[:-1], np.asarray(table["count"]), width=1 / n_bins, align="edge", edgecolor="k")
    ax_n.set_yscale("log")
    ax_n.set_xlabel("confidence (mean p of the predicted class)")
    ax_n.set_ylabel("images")
    ax_n.set_xlim(0, 1)
    _save(fig, path)


def elbo_trace(path, elbo, steps_per_epoch: int) -> None:
    """The ELBO per step (light) and its per-epoch mean, against epochs."""
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
