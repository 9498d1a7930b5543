"""The UCI benchmark's table: per data set and method, beside the published columns.

:func:`table` summarises the records of ``bnn-zoo uci`` over splits (mean
and standard error of the test RMSE and log-likelihood) next to the
published VI, PBP and MC-dropout columns
(:data:`bnn_zoo.data.uci.PUBLISHED`), with the mean coverage and width of the
raw and conformal predictive intervals; :func:`markdown` writes it for
``table.md``.
"""

from __future__ import annotations

import numpy as np

from bnn_zoo.data import uci
from bnn_zoo.experiments.uci.fits import COVERAGE, INTERVALS, METHODS

__all__ = ["markdown", "scored", "table"]


def scored(fits) -> "pandas.Series":
    """Which records carry the intervals' coverage: every one of
    :data:`~bnn_zoo.experiments.uci.fits.INTERVALS` finite.

    Parameters
    ----------
    fits : pandas.DataFrame
        Records, one a row.

    Returns
    -------
    pandas.Series of bool
        One per row; False where a column of them is missing or not finite.
    """
    import pandas as pd

    values = fits.reindex(columns=list(INTERVALS)).apply(pd.to_numeric, errors="coerce")
    return pd.Series(np.isfinite(values.to_numpy(float)).all(axis=1), index=fits.index)


def table(fits) -> "pandas.DataFrame":
    """Per data set and method: the mean and standard error over splits, beside the published columns.

    Parameters
    ----------
    fits : pandas.DataFrame
        Records (:func:`~bnn_zoo.experiments.uci.fits.fit_task`): columns ``uci``, ``method``, ``split``,
        ``rmse``, ``ll``, ``fit_seconds``, and where scored the intervals'
        (:data:`~bnn_zoo.experiments.uci.fits.INTERVALS`).

    Returns
    -------
    pandas.DataFrame
        One row per data set and method, in :data:`bnn_zoo.data.uci.DATASETS` and
        :data:`~bnn_zoo.experiments.uci.fits.METHODS` order: ``dataset``, ``method``, ``splits``, ``rmse``, ``rmse_se``,
        ``ll``, ``ll_se``, ``fit_seconds`` (the mean), the published ``<vi|pbp|dropout>_rmse``
        and ``_ll``, and ``beats_vi`` (RMSE below and log-likelihood above VI's) and
        ``matches_pbp`` (each of RMSE and log-likelihood better than PBP's or within one
        standard error of it); ``coverage_splits`` (the splits whose records carry every
        interval's coverage and width, :func:`scored`) and the mean
        over them of each of :data:`~bnn_zoo.experiments.uci.fits.COVERAGE` and its width (NaN
        where none does).
    """
    import pandas as pd

    rows = []
    for name in uci.DATASETS:
        for method in METHODS:
            f = fits[(fits["uci"] == name) & (fits["method"] == method)]
            if f.empty:
                continue
            n = len(f)
            row = {"dataset": name, "method": method, "splits": n,
                   "rmse": f["rmse"].mean(), "rmse_se": f["rmse"].std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
                   "ll": f["ll"].mean(), "ll_se": f["ll"].std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
                   "fit_seconds": f["fit_seconds"].mean()}
            with_intervals = f[scored(f)]
            row["coverage_splits"] = len(with_intervals)
            for col in COVERAGE:
                width = col.replace("coverage", "width")
                row[col] = with_intervals[col].mean() if len(with_intervals) else np.nan
                row[width] = with_intervals[width].mean() if len(with_intervals) else np.nan
            for col, values in uci.PUBLISHED.items():
                row[f"{col}_rmse"], row[f"{col}_ll"] = values[name]
            vi_rmse, vi_ll = uci.PUBLISHED["vi"][name]
            pbp_rmse, pbp_ll = uci.PUBLISHED["pbp"][name]
            rmse_se, ll_se = np.nan_to_num(row["rmse_se"]), np.nan_to_num(row["ll_se"])
            row["beats_vi"] = bool(row["rmse"] < vi_rmse and row["ll"] > vi_ll)
            row["matches_pbp"] = bool(row["rmse"] <= pbp_rmse + rmse_se and row["ll"] >= pbp_ll - ll_se)
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(t) -> str:
    """The table as Markdown: mean ± standard error, the published columns beside them.

    Parameters
    ----------
    t : pandas.DataFrame
        :func:`table`'s.

    Returns
    -------
    str
        A line per method counting the data sets where it beats the published VI column and
        matches or beats PBP's (:func:`table`'s flags), then two tables, test RMSE and test
        log-likelihood, one row per data set and method, and a third, where records carry it,
        of the intervals' coverage and width.
    """
    def cell(mean, se, digits):
        return f"{mean:.{digits}f}" + ("" if np.isnan(se) else f" ± {se:.{digits}f}")

    out = []
    for method in dict.fromkeys(t["method"]):
        rows = t[t["method"] == method]
        lost = ", ".join(rows.loc[~rows["matches_pbp"], "dataset"])
        out.append(f"- `{method}`: beats VI on {int(rows['beats_vi'].sum())} of {len(rows)} data sets; "
                   f"matches or beats PBP on {int(rows['matches_pbp'].sum())} of {len(rows)}"
                   + (f" (not on: {lost})." if lost else "."))
    out.append("")
    for metric, label, better in (("rmse", "test RMSE (lower is better)", "lower"),
                                  ("ll", "test log-likelihood (higher is better)", "higher")):
        out += [f"**{label}**", "",
                "| data set | method | splits | this run | VI | PBP | dropout |", "|---|---|---:|---:|---:|---:|---:|"]
        for _, r in t.iterrows():
            digits = 4 if r["dataset"] == "naval" and metric == "rmse" else (3 if metric == "rmse" else 2)
            out.append(f"| {r['dataset']} | {r['method']} | {r['splits']} | {cell(r[metric], r[f'{metric}_se'], digits)} "
                       f"| {r[f'vi_{metric}']:.2f} | {r[f'pbp_{metric}']:.2f} | {r[f'dropout_{metric}']:.2f} |")
        out.append("")
    covered = t[t["coverage_splits"] > 0]
    if len(covered):
        out += ["**coverage of the predictive intervals, % of test targets (mean width in the target's units)**", "",
                "| data set | method | splits | 50% | 90% | 95% | conformal 90% | conformal 95% |",
                "|---|---|---:|---:|---:|---:|---:|---:|"]
        for _, r in covered.iterrows():
            cells = " | ".join(f"{100 * r[c]:.1f} ({r[c.replace('coverage', 'width')]:.3g})" for c in COVERAGE)
            out.append(f"| {r['dataset']} | {r['method']} | {r['coverage_splits']} | {cells} |")
        out.append("")
    return "\n".join(out)
