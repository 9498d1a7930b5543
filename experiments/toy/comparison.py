"""The toy prior study's comparison of prior pairs (``--all-priors``): PSIS-LOO ranking, table and figures.

:func:`write_comparison` ranks one data set's pairs by PSIS-LOO
(:func:`compare_pairs`, ``az.compare``), writes the table beside the runs and
the figures into the figures folder, and returns the table as text:
what :func:`bnn_zoo.experiments.toy.priors.summarize` prints.
"""

from __future__ import annotations

import warnings

import arviz as az
import pandas as pd
from xarray import DataTree

from bnn_zoo.evaluation import comparison_plots, plots
from bnn_zoo.inference.support.io import atomic_write, write_text
from bnn_zoo.models.priors import SCALE_FREE

__all__ = ["COLUMNS", "compare_pairs", "write_comparison"]

#: The columns of ``--all-priors``' comparison table (``comparison.csv``), besides ``az.compare``'s.
COLUMNS = ["prior", "hyperprior", "accuracy", "bayes_accuracy", "nll", "bayes_nll", "brier", "ece",
           "elpd_loo", "elpd_loo_se", "pareto_k_max", "psense_prior_median", "psense_prior_share",
           "psense_likelihood_median", "elbo_final", "converged", "fit_seconds"]


def compare_pairs(loos: dict) -> tuple[pd.DataFrame, bool]:
    """``az.compare`` of the pairs' PSIS-LOO, and whether its selection-bias check fired.

    With more than 11 models ArviZ checks whether the best one's lead over
    the median model is within what chance gives the best of that many
    equally good models (McLatchie and Vehtari 2024) and warns if so. The
    toy summary says that once, in words; other warnings pass through.

    Parameters
    ----------
    loos : dict of str to ELPDData
        Each pair's PSIS-LOO result (:func:`bnn_zoo.loo`), by name.

    Returns
    -------
    table : pandas.DataFrame
        ``az.compare``'s table (unrounded).
    chance : bool
        Whether ArviZ warned that the ranking may be due to chance.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        table = az.compare(loos, round_to="none")
    chance = False
    for w in caught:
        if "due to chance" in str(w.message):
            chance = True
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return table, chance


def write_comparison(args, runs: list, split, grid: tuple) -> str:
    """One data set's comparison of the pairs: its table and figures, and the table as text.

    Writes ``<out>/<dataset>/comparison.csv`` and ``comparison_loo.csv``, and into
    ``<figures>/<dataset>/`` ``compare.png`` (``az.plot_compare``), ``psense.png`` (each pair's
    power-scaling sensitivities per variable,
    :func:`~bnn_zoo.evaluation.comparison_plots.psense_grid`), ``forest_scales.png`` (the
    hierarchical pairs' layer scales), ``weights_last_layer.png`` (the output layer's weights
    under each prior, one hyperprior: Zharikov, Isachenko and Bochkarev's Fig. 3) and
    ``prior_grid.png`` (each pair's posterior-mean map).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (``out``, ``figures``, ``priors``, ``hyperprior``, ``hyperpriors``).
    runs : list of bnn_zoo.experiments.harness.config.Record
        The data set's finished runs, one per pair; their ``summary`` holds the grid's mean
        prediction, the PSIS-LOO result and the posterior.
    split : bnn_zoo.data.toy.Split
        The data set's training points, drawn on the maps.
    grid : tuple of numpy.ndarray
        ``(xx, yy)``, the maps' grid (``np.meshgrid``).

    Returns
    -------
    str
        The table as text, and where the table and figures are.
    """
    cfg0 = runs[0].cfg
    names_ = [f"{r.cfg.prior}-{r.cfg.hyperprior}" for r in runs]
    idatas = {name: DataTree.from_dict({"posterior": r.summary["posterior"]}) for name, r in zip(names_, runs)}
    cmp, chance = compare_pairs({name: r.summary["loo"] for name, r in zip(names_, runs)})
    table = pd.DataFrame([r.metrics for r in runs])[COLUMNS]
    table.insert(0, "model", names_)
    table = table.set_index("model").join(cmp[["rank", "elpd_diff", "dse", "weight"]]).sort_values("rank")
    out_dir = args.out / cfg0.dataset
    atomic_write(out_dir / "comparison.csv", lambda tmp: table.to_csv(tmp, float_format="%.4g"))
    write_text(out_dir / "comparison_loo.csv", cmp.to_csv(float_format="%.4g"))

    fig_dir = args.figures / cfg0.dataset
    plots.save(plots.compare(cmp), fig_dir / "compare.png")
    plots.save(comparison_plots.psense_grid({name: r.summary["psense"] for name, r in zip(names_, runs)}),
               fig_dir / "psense.png")
    hierarchical = {k: v for k, v in idatas.items()
                    if k.split("-")[0] not in SCALE_FREE and not k.endswith("-fixed")}
    if hierarchical:
        plots.save(plots.forest(hierarchical, [f"scale_{layer}" for layer in range(len(cfg0.hidden) + 1)]),
                   fig_dir / "forest_scales.png")
    plots.save(plots.weight_posteriors({p: idatas[f"{p}-{args.hyperprior}"] for p in args.priors}, f"W_{len(cfg0.hidden)}"),
               fig_dir / "weights_last_layer.png")
    xx, yy = grid
    plots.save(plots.prior_grid(
        xx, yy,
        {(r.cfg.prior, r.cfg.hyperprior): r.summary["grid_mean"] for r in runs},
        {(r.cfg.prior, r.cfg.hyperprior): r.metrics["accuracy"] for r in runs},
        split.X_train, split.y_train,
        title=f"{cfg0.dataset} (noise {cfg0.noise}): posterior mean of P(class 1), "
              "columns = prior, rows = hyperprior"), fig_dir / "prior_grid.png")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        return (f"{cfg0.dataset}\n{table.round(4).to_string()}\n"
                + (f"the best pair's ELPD lead over the median pair is within what chance gives the best of "
                   f"{len(runs)} equally good models (ArviZ's selection-bias check, McLatchie and "
                   f"Vehtari 2024), so the ranking may be noise\n" if chance else "")
                + f"table: {out_dir / 'comparison.csv'}; figures: {fig_dir}/")
