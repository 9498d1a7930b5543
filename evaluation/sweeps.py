"""Paired comparisons of a prior sweep's fits (``bnn-zoo sweep``'s ``fits.parquet``).

Within a data set, noise level and seed every prior pair is fitted to the
same training data and scored on the same fresh test points, so pairs are
compared seed by seed (paired differences) and the seeds give the interval:
a mean over ``n`` seeds with its Student-t 95% interval. The held-out ELPD
(``elpd_test``, the log predictive density summed over the test points) is
the reference for ranking pairs; PSIS-LOO is checked against it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["SETTING", "effect_trend", "elpd_differences", "hyperprior_effects", "interval", "loo_agreement",
           "markdown", "pair_gaps", "with_pairs"]

#: The columns that make a cell of the sweep: a data set at a noise level.
SETTING = ["dataset", "noise"]


def with_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """A sweep's table with the columns the comparisons use.

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``).

    Returns
    -------
    pandas.DataFrame
        A copy with ``pair`` (``"prior-hyperprior"``) and the held-out and PSIS-LOO ELPD per point
        (``elpd_test_mean``, ``elpd_loo_mean``).
    """
    table = table.copy()
    table["pair"] = table["prior"] + "-" + table["hyperprior"]
    table["elpd_test_mean"] = table["elpd_test"] / table["n_test"]  # per test point
    table["elpd_loo_mean"] = table["elpd_loo"] / table["n_train"]
    return table


def interval(values) -> tuple[float, float, float]:
    """Mean and its 95% Student-t interval (NaN half-width for fewer than two values).

    Parameters
    ----------
    values : array-like
        The values; non-finite ones are left out.

    Returns
    -------
    tuple of float
        The mean and the interval's lower and upper ends.
    """
    values = np.asarray(values, dtype="float64")
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return np.nan, np.nan, np.nan
    mean = float(values.mean())
    if len(values) < 2:
        return mean, np.nan, np.nan
    half = float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def pair_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Per data set, noise and pair: the accuracy gap to the Bayes-optimal classifier (points),
    mean over seeds with its interval, and the share of fits that converged.

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``) with :func:`with_pairs`' columns.

    Returns
    -------
    pandas.DataFrame
        Columns dataset, noise, pair, gap, gap_lo, gap_hi, seeds and converged.
    """
    rows = []
    for (dataset, noise, pair), t in table.groupby(SETTING + ["pair"]):
        mean, lo, hi = interval(100 * t["gap_accuracy"])
        rows.append((dataset, noise, pair, mean, lo, hi, len(t), t["converged"].mean()))
    return pd.DataFrame(rows, columns=SETTING + ["pair", "gap", "gap_lo", "gap_hi", "seeds", "converged"])


def elpd_differences(table: pd.DataFrame) -> pd.DataFrame:
    """Per data set and noise: each pair's held-out ELPD minus the best pair's (nats per 1,000
    test points), paired over seeds. The best pair has the highest mean held-out ELPD.

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``) with :func:`with_pairs`' columns.

    Returns
    -------
    pandas.DataFrame
        Columns dataset, noise, pair, best, diff, diff_lo and diff_hi.
    """
    rows = []
    for (dataset, noise), t in table.groupby(SETTING):
        wide = t.pivot(index="seed", columns="pair", values="elpd_test_mean")
        best = wide.mean().idxmax()
        for pair in wide.columns:
            mean, lo, hi = interval(1000 * (wide[pair] - wide[best]))
            rows.append((dataset, noise, pair, best, mean, lo, hi))
    return pd.DataFrame(rows, columns=SETTING + ["pair", "best", "diff", "diff_lo", "diff_hi"])


def hyperprior_effects(table: pd.DataFrame) -> pd.DataFrame:
    """Per data set, noise and hyperprior: its held-out ELPD (nats per 1,000 test points) and
    accuracy (points) minus the fixed-scale pair's with the same weight prior, paired over
    seeds and averaged over the weight priors (the flat prior has no scale: left out).

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``) with :func:`with_pairs`' columns.

    Returns
    -------
    pandas.DataFrame
        Columns dataset, noise, hyperprior, and the ELPD and accuracy gains with their intervals;
        empty without the fixed scale and another hyperprior.
    """
    t = table[table["prior"] != "flat"]
    rows = []
    for (dataset, noise), s in t.groupby(SETTING):
        elpd = s.pivot_table(index="seed", columns=["prior", "hyperprior"], values="elpd_test_mean")
        acc = s.pivot_table(index="seed", columns=["prior", "hyperprior"], values="accuracy")
        priors = sorted({p for p, _ in elpd.columns})
        for hyper in sorted({h for _, h in elpd.columns} - {"fixed"}):
            d_elpd = np.mean([elpd[(p, hyper)] - elpd[(p, "fixed")] for p in priors], axis=0)
            d_acc = np.mean([acc[(p, hyper)] - acc[(p, "fixed")] for p in priors], axis=0)
            e, e_lo, e_hi = interval(1000 * d_elpd)
            a, a_lo, a_hi = interval(100 * d_acc)
            rows.append((dataset, noise, hyper, e, e_lo, e_hi, a, a_lo, a_hi))
    return pd.DataFrame(rows, columns=SETTING + ["hyperprior", "elpd_gain", "elpd_gain_lo", "elpd_gain_hi",
                                                 "accuracy_gain", "accuracy_gain_lo", "accuracy_gain_hi"])


def effect_trend(table: pd.DataFrame) -> pd.DataFrame:
    """Does the hyperpriors' gain grow with the noise? Per data set: the slope of the per-seed
    gain (all hyperpriors against fixed, nats per 1,000 test points) on the noise level, with
    its 95% interval.

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``) with :func:`with_pairs`' columns.

    Returns
    -------
    pandas.DataFrame
        Columns dataset, slope, slope_lo, slope_hi and p_value.
    """
    t = table[table["prior"] != "flat"]
    rows = []
    for dataset, s in t.groupby("dataset"):
        x, y = [], []
        for (noise, seed), u in s.groupby(["noise", "seed"]):
            by = u.set_index(["prior", "hyperprior"])["elpd_test_mean"]
            gains = [by[(p, h)] - by[(p, "fixed")] for p, h in by.index if h != "fixed" and (p, "fixed") in by]
            x.append(noise)
            y.append(1000 * np.mean(gains))
        fit = stats.linregress(x, y)
        half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
        rows.append((dataset, fit.slope, fit.slope - half, fit.slope + half, fit.pvalue))
    return pd.DataFrame(rows, columns=["dataset", "slope", "slope_lo", "slope_hi", "p_value"])


def loo_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Per data set and noise: Spearman's rank correlation between PSIS-LOO and the held-out
    ELPD across the pairs (within each seed, then averaged), how often LOO picks the held-out
    best pair, and how often k-hat flags LOO; the same for K-fold CV where the sweep has it.

    Parameters
    ----------
    table : pandas.DataFrame
        A sweep's table (``fits.parquet``) with :func:`with_pairs`' columns.

    Returns
    -------
    pandas.DataFrame
        Columns dataset, noise, spearman (and its interval), same_best, fits_flagged and
        points_flagged, and the K-fold columns where the sweep has them.
    """
    rows = []
    for (dataset, noise), t in table.groupby(SETTING):
        rhos = [stats.spearmanr(u["elpd_loo_mean"], u["elpd_test_mean"]).statistic
                for _, u in t.groupby("seed") if u["elpd_loo"].notna().sum() > 2]
        mean, lo, hi = interval(rhos)
        same_best = np.mean([u.loc[u["elpd_loo"].idxmax(), "pair"] == u.loc[u["elpd_test"].idxmax(), "pair"]
                             for _, u in t.groupby("seed")])
        row = [dataset, noise, mean, lo, hi, same_best, (t["pareto_k_bad_share"] > 0).mean(),
               t["pareto_k_bad_share"].mean()]
        if "elpd_kfold" in t and t["elpd_kfold"].notna().all():  # bnn-zoo sweep --kfold K
            rhos = [stats.spearmanr(u["elpd_kfold"], u["elpd_test_mean"]).statistic for _, u in t.groupby("seed")]
            row += [*interval(rhos), np.mean([u.loc[u["elpd_kfold"].idxmax(), "pair"] ==
                                              u.loc[u["elpd_test"].idxmax(), "pair"] for _, u in t.groupby("seed")])]
        rows.append(row)
    columns = SETTING + ["spearman", "spearman_lo", "spearman_hi", "same_best", "fits_flagged", "points_flagged"]
    if any(len(r) > len(columns) for r in rows):
        columns += ["spearman_kfold", "spearman_kfold_lo", "spearman_kfold_hi", "same_best_kfold"]
    return pd.DataFrame(rows, columns=columns)


def markdown(frame: pd.DataFrame, index: bool = False) -> str:
    """``frame`` as a Markdown table, numbers to 3 significant digits (with its index if ``index``).

    Parameters
    ----------
    frame : pandas.DataFrame
        The table.
    index : bool, default False
        Write the index as the first columns.

    Returns
    -------
    str
        The Markdown table.
    """
    if index:
        frame = frame.reset_index()
    cols = list(frame.columns)
    rows = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for r in frame.itertuples(index=False):
        rows.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)
                                      for v in r) + " |")
    return "\n".join(rows)
