"""Do two runs of a prior study say the same? Their reports' tables, cell by cell.

``bnn-zoo report`` turns a sweep into tables (accuracy gaps, ELPD differences,
hyperprior effects, their trend with the noise, PSIS-LOO's agreement) and a
verdict in words. This compares those of other runs of the same grid with a
first one: a shorter study (fewer steps), another host's or a GPU's float32
round-off. For each table's estimates it counts the cells whose printed value
(3 significant digits, as the report prints them) differs, measures each
cell's move in half-widths of the first run's 95% interval (each data set and
noise level's best pair, 0 by definition, has none), and counts the
cells whose interval changes side of zero (above, across, below); then the best
pair of each data set and noise level, the share of converged fits and the
verdict's lines. About 12 minutes for the 10,000-step study and 5 for 3,000
steps on 2 cores::

    G="--datasets moons,circles --noise 0.1,0.2,0.3,0.4,0.5 --all-priors --seeds 10 --float32"
    bnn-zoo sweep --out sweeps/study $G
    bnn-zoo sweep --out sweeps/study-3000 $G --steps 3000
    mkdir -p sweeps/committed && cp benchmarks/results/prior_sweep_fits.parquet sweeps/committed/fits.parquet
    python -m benchmarks.studies.sweep_agreement sweeps/committed rerun=sweeps/study 3000=sweeps/study-3000

Writes ``sweep_agreement.csv`` (one row per run, table and estimate) into
``--out`` and prints it with each run's summary line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bnn_zoo.evaluation import sweeps
from bnn_zoo.experiments.sweep import report
from bnn_zoo.inference.support.io import atomic_write

#: Each report table: how it is made, the columns that name a cell, and its estimates with their
#: 95% interval's columns.
TABLES = {
    "gaps": (sweeps.pair_gaps, [*sweeps.SETTING, "pair"], [("gap", "gap_lo", "gap_hi")]),
    "elpd_differences": (sweeps.elpd_differences, [*sweeps.SETTING, "pair"], [("diff", "diff_lo", "diff_hi")]),
    "hyperprior_effects": (sweeps.hyperprior_effects, [*sweeps.SETTING, "hyperprior"],
                           [("elpd_gain", "elpd_gain_lo", "elpd_gain_hi"),
                            ("accuracy_gain", "accuracy_gain_lo", "accuracy_gain_hi")]),
    "effect_trend": (sweeps.effect_trend, ["dataset"], [("slope", "slope_lo", "slope_hi")]),
    "loo_agreement": (sweeps.loo_agreement, sweeps.SETTING, [("spearman", "spearman_lo", "spearman_hi")]),
}


def run(argument: str) -> tuple[str, Path]:
    """``NAME=FOLDER`` (or a folder, named by itself): a sweep's folder holding ``fits.parquet``."""
    name, sep, folder = argument.partition("=")
    name, folder = (name, folder) if sep else (argument, argument)
    if not (name and (Path(folder) / "fits.parquet").is_file()):
        raise argparse.ArgumentTypeError(f"{folder} has no fits.parquet (a bnn-zoo sweep --out folder)")
    return name, Path(folder)


def side(lo, hi) -> np.ndarray:
    """Where a 95% interval lies: 1 above zero, -1 below, 0 across it."""
    return np.where(np.asarray(lo) > 0, 1, np.where(np.asarray(hi) < 0, -1, 0))


def tables(table: pd.DataFrame) -> dict:
    """The report's tables of a sweep's table (:func:`bnn_zoo.experiments.sweep.report.load`'s)."""
    made = {name: make(table) for name, (make, _, _) in TABLES.items() if name != "effect_trend"}
    several = table.groupby("dataset")["noise"].nunique() > 1
    made["effect_trend"] = (sweeps.effect_trend(table[table["dataset"].isin(several[several].index)])
                            if several.any() and not made["hyperprior_effects"].empty else
                            pd.DataFrame(columns=["dataset", "slope", "slope_lo", "slope_hi"]))
    return made


def compare(first: dict, other: dict) -> list[dict]:
    """One row per table and estimate: its cells, how many print differently, the median and
    largest move in half-widths of ``first``'s interval (where it has one), and the cells whose side of
    zero changes."""
    rows = []
    for name, (_, keys, estimates) in TABLES.items():
        both = first[name].merge(other[name], on=keys, suffixes=("", "_other"))
        for est, lo, hi in estimates:
            a, b = both[est].to_numpy(float), both[f"{est}_other"].to_numpy(float)
            half = (both[hi] - both[lo]).to_numpy(float) / 2
            # in half-widths, where the first run has an interval (a best pair's difference is 0 to 0)
            move = np.abs(b - a)[half > 0] / half[half > 0]
            rows.append({"table": name, "estimate": est, "cells": len(both),
                         "printed_differ": int(sum(f"{x:.3g}" != f"{y:.3g}" for x, y in zip(a, b))),
                         "move_median": float(np.median(move)) if len(move) else np.nan,
                         "move_max": float(np.max(move)) if len(move) else np.nan,
                         "side_changed": int((side(both[lo], both[hi]) !=
                                              side(both[f"{lo}_other"], both[f"{hi}_other"])).sum())})
    return rows


def summary(name: str, table: pd.DataFrame, made: dict, first_table: pd.DataFrame, first: dict) -> str:
    """A run's line: its fits and converged share, its tasks' summed seconds, the best pairs and
    the verdict's lines that match the first run's."""
    def best(m):
        d = m["elpd_differences"]
        return d[d["pair"] == d["best"]].set_index(sweeps.SETTING)["pair"]

    def words(m):
        return report.verdict(m["hyperprior_effects"], m["effect_trend"], m["gaps"], m["elpd_differences"],
                              m["loo_agreement"])

    mine, theirs = best(made), best(first)
    same_best = int((mine.reindex(theirs.index) == theirs).sum())
    lines = list(zip(words(made), words(first)))
    steps = ", ".join(str(s) for s in sorted(table["steps"].unique()))
    return (f"{name}: {len(table)} fits at {steps} steps, {table['converged'].mean():.1%} converged "
            f"(first run {first_table['converged'].mean():.1%}); tasks {table['task_seconds'].sum():,.1f} s "
            f"summed; the same best pair in {same_best} of {len(theirs)} cells; "
            f"{sum(x == y for x, y in lines)} of {len(lines)} verdict lines word for word")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.sweep_agreement",
                                description=__doc__.splitlines()[0])
    p.add_argument("first", type=run, metavar="[NAME=]FOLDER", help="the run the others are compared with")
    p.add_argument("others", type=run, nargs="+", metavar="NAME=FOLDER", help="runs of the same grid")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/studies"))
    p.add_argument("--name", default="sweep_agreement.csv", help="the table's file name in --out")
    args = p.parse_args(argv)
    first_table = report.load(args.first[1])
    first = tables(first_table)
    rows, lines = [], []
    for name, folder in args.others:
        table = report.load(folder)
        made = tables(table)
        rows += [{"run": name, **row} for row in compare(first, made)]
        lines.append(summary(name, table, made, first_table, first))
    frame = pd.DataFrame(rows)
    path = args.out / args.name
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False, float_format="%.4g"))
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("\n".join(lines))
    print(f"rows: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
