"""``bnn-zoo report SWEEP_DIR``: figures and a Markdown summary of a prior sweep.

Reads the sweep's ``fits.parquet`` and writes into ``SWEEP_DIR/report/``
(or ``--out``):

- ``gap_vs_noise.png``: the accuracy gap to the Bayes-optimal classifier
  against the noise, one line per pair with 95% intervals over the seeds,
  one panel per data set;
- ``elpd_differences.png``: each pair's held-out ELPD minus the best pair's
  (paired over seeds), per noise level;
- ``hyperprior_effect.png``: each hyperprior's gain over the fixed scale
  against the noise;
- ``loo_vs_test.png``: PSIS-LOO against the held-out ELPD (per point), one
  dot per fit, coloured by the share of its Pareto k above 0.7;
- ``summary.md``: the tables behind them and the verdict on the conclusions of
  Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks", in words, with the
  numbers; ``gaps.csv``,
  ``elpd_differences.csv``, ``hyperprior_effects.csv``, ``effect_trend.csv``
  and ``loo_agreement.csv``: the tables.

:func:`main` is the command; :func:`write_report` does the work for a
notebook or a script. The statistics come from
:mod:`~bnn_zoo.evaluation.sweeps`, the figures from
:mod:`~bnn_zoo.evaluation.comparison_plots`.
"""

from __future__ import annotations

import sys
from pathlib import Path


from bnn_zoo.experiments.harness.flags import HelpFormatter, Parser, UsageError, check_writable

__all__ = ["HYPER_STYLE", "build_parser", "load", "main", "verdict", "write_report"]

#: The line style of each hyperprior in the report's line figures (``gap_vs_noise.png``,
#: ``elpd_differences.png``, ``hyperprior_effect.png``); colour tells the weight priors apart.
HYPER_STYLE = {"fixed": "-", "halfnormal": "--", "halfcauchy": ":", "inversegamma": "-."}


def build_parser(prog: str = "bnn-zoo report") -> Parser:
    """The command line of ``bnn-zoo report``: the sweep's folder and ``--out``.

    Parameters
    ----------
    prog : str, default "bnn-zoo report"
        The program's name in usage and error messages.

    Returns
    -------
    Parser
        The parser; its arguments are ``sweep`` (a :class:`~pathlib.Path`)
        and ``out`` (a :class:`~pathlib.Path`, or ``None`` for
        ``SWEEP/report``).
    """
    p = Parser(prog=prog, description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("sweep", type=Path, help="a bnn-zoo sweep --out folder")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: SWEEP/report)")
    return p


def load(folder: Path):
    """A sweep's table of fits, checked, with the columns the report adds.

    Parameters
    ----------
    folder : pathlib.Path
        A ``bnn-zoo sweep --out`` folder, holding ``fits.parquet``.

    Returns
    -------
    pandas.DataFrame
        One row per fit, with ``pair`` (``"prior-hyperprior"``) and the held-out
        and PSIS-LOO ELPD per point (``elpd_test_mean``, ``elpd_loo_mean``)
        added (:func:`bnn_zoo.evaluation.sweeps.with_pairs`).

    Raises
    ------
    UsageError
        If ``folder`` has no ``fits.parquet``, or one that is not Parquet, the table lacks a column the
        report needs, or it has a single seed (the intervals are over seeds).
    """
    import pandas as pd

    from bnn_zoo.evaluation import sweeps

    path = folder / "fits.parquet"
    if not path.is_file():
        raise UsageError(f"{folder} has no fits.parquet: run bnn-zoo sweep --out {folder} first")
    try:
        table = pd.read_parquet(path)
    except Exception as err:  # pyarrow's ArrowInvalid and OSError: not a Parquet file, or a damaged one
        raise UsageError(f"{path} cannot be read as Parquet ({type(err).__name__}: {str(err).splitlines()[0]}); "
                         f"write it again from the records: bnn-zoo sweep --out {folder} with the sweep's "
                         f"flags") from None
    missing = {"prior", "hyperprior", "noise", "seed", "elpd_test", "gap_accuracy"} - set(table.columns)
    if missing:
        raise UsageError(f"{path} is not a sweep's table (no {', '.join(sorted(missing))})")
    if table["seed"].nunique() < 2:
        seeds = "no seed (no records)" if table.empty else "one seed"
        raise UsageError(f"{path} has {seeds}: intervals over seeds need at least two (--seeds 2)")
    return sweeps.with_pairs(table)


def verdict(effects, trend, gaps, diffs, agreement) -> list[str]:
    """Zharikov et al.'s conclusions against the sweep, in words.

    The tables are :mod:`~bnn_zoo.evaluation.sweeps`' of the sweep's table
    (as :func:`write_report` makes them); the lines answer, with their
    numbers: do hyperpriors beat a fixed scale, does their gain grow with
    the noise (per data set), which pair is best (per data set), how far
    the default pair is from the Bayes-optimal classifier, and whether
    PSIS-LOO (and K-fold CV, where the sweep has it) ranks the pairs as the
    held-out ELPD does.

    Parameters
    ----------
    effects : pandas.DataFrame
        Each hyperprior's gain over the fixed scale
        (:func:`~bnn_zoo.evaluation.sweeps.hyperprior_effects`).
    trend : pandas.DataFrame
        The gain's slope on the noise, per data set
        (:func:`~bnn_zoo.evaluation.sweeps.effect_trend`).
    gaps : pandas.DataFrame
        Each pair's accuracy gap to the Bayes-optimal classifier
        (:func:`~bnn_zoo.evaluation.sweeps.pair_gaps`).
    diffs : pandas.DataFrame
        Each pair's held-out ELPD minus the best pair's
        (:func:`~bnn_zoo.evaluation.sweeps.elpd_differences`).
    agreement : pandas.DataFrame
        PSIS-LOO's agreement with the held-out ELPD
        (:func:`~bnn_zoo.evaluation.sweeps.loo_agreement`).

    Returns
    -------
    list of str
        Markdown bullet lines, one per question (and per data set where
        the answer is). A question the sweep cannot answer (no hyperprior
        against a fixed scale, one noise level, fewer than three pairs)
        gets a line that says why.
    """
    lines = []
    if effects.empty:
        lines.append("- **Do hyperpriors beat a fixed scale?** Not answered: the sweep needs the fixed scale "
                     "and another hyperprior with the same weight prior (`--hyperpriors fixed,inversegamma`).")
    else:
        overall = effects.groupby("hyperprior")[["elpd_gain", "accuracy_gain"]].mean()
        helped = effects[effects["elpd_gain_lo"] > 0]
        hurt = effects[effects["elpd_gain_hi"] < 0]
        lines.append(
            f"- **Do hyperpriors beat a fixed scale?** In {len(helped)} of {len(effects)} (data set, noise, "
            f"hyperprior) cells the held-out ELPD gain over the fixed-scale pair has a 95% interval above "
            f"zero, in {len(hurt)} below zero. Averaged over data sets and noise levels: "
            + "; ".join(f"{h} {r.elpd_gain:+.1f} nats per 1,000 test points ({r.accuracy_gain:+.2f} accuracy "
                        "points)" for h, r in overall.iterrows()) + ".")
    if trend.empty and not effects.empty:
        lines.append("- **Does the gain grow with the noise?** Not answered: it needs at least two noise levels "
                     "of a data set (`--noise 0.1,0.3`).")
    for r in trend.itertuples():
        grows = ("grows with the noise" if r.slope_lo > 0 else "shrinks with the noise" if r.slope_hi < 0
                 else "shows no trend with the noise that the seeds can tell from none")
        lines.append(f"- **{r.dataset}: does the gain grow with the noise?** The mean gain {grows}: "
                     f"slope {r.slope:+.1f} nats per 1,000 points per unit of noise "
                     f"(95% interval {r.slope_lo:+.1f} to {r.slope_hi:+.1f}).")
    best = diffs[diffs["pair"] == diffs["best"]]
    for dataset, b in best.groupby("dataset"):
        tied = diffs[(diffs["dataset"] == dataset) & (diffs["diff_hi"] >= 0)]
        n_tied = tied.groupby("noise")["pair"].count()
        lines.append(f"- **{dataset}: which pair is best?** By held-out ELPD: "
                     + ", ".join(f"noise {r.noise:g}: {r.pair} ({n_tied[r.noise] - 1} others within its 95% interval)"
                                 for r in b.itertuples()) + ".")
    default = gaps[gaps["pair"] == "normal-inversegamma"]
    if default.empty:
        lines.append(f"- **How far from the best possible classifier?** The default pair (normal-inversegamma) "
                     f"is not in this sweep; the best cell of any pair is {gaps['gap'].min():.2f} accuracy "
                     "points below the Bayes-optimal classifier.")
    else:
        lines.append(f"- **How far from the best possible classifier?** The default pair (normal-inversegamma) "
                     f"is {default['gap'].mean():.2f} accuracy points below the Bayes-optimal classifier on "
                     f"average (worst cell {default['gap'].max():.2f}); the best cell of any pair "
                     f"{gaps['gap'].min():.2f}.")
    if agreement["spearman"].isna().all():
        lines.append("- **Does PSIS-LOO rank the pairs as the held-out ELPD does?** Not answered: a rank "
                     "correlation needs at least three pairs.")
        return lines
    lines.append(f"- **Does PSIS-LOO rank the pairs as the held-out ELPD does?** Mean Spearman correlation "
                 f"{agreement['spearman'].mean():.2f} (cells from {agreement['spearman'].min():.2f} to "
                 f"{agreement['spearman'].max():.2f}); LOO picks the held-out best pair in "
                 f"{agreement['same_best'].mean():.0%} of the seeds, and k-hat flags "
                 f"{agreement['fits_flagged'].mean():.0%} of the fits (share of points with k > 0.7: "
                 f"{agreement['points_flagged'].mean():.1%}).")
    if "spearman_kfold" in agreement:
        lines.append(f"- **K-fold cross-validation instead** (where a user cannot trust LOO): mean Spearman "
                     f"correlation with the held-out ELPD {agreement['spearman_kfold'].mean():.2f} (LOO "
                     f"{agreement['spearman'].mean():.2f} on the same fits); it picks the held-out best pair "
                     f"in {agreement['same_best_kfold'].mean():.0%} of the seeds (LOO "
                     f"{agreement['same_best'].mean():.0%}).")
    return lines


def write_report(folder: Path, out: Path) -> Path:
    """Write a sweep's report: the figures, tables and summary the module lists.

    Parameters
    ----------
    folder : pathlib.Path
        A ``bnn-zoo sweep --out`` folder, holding ``fits.parquet``.
    out : pathlib.Path
        The folder to write into, created if missing; files already there
        are replaced.

    Returns
    -------
    pathlib.Path
        The summary, ``out / "summary.md"``.

    Raises
    ------
    UsageError
        If the sweep's table is missing or unfit for a report (see
        :func:`load`).
    """
    import pandas as pd

    from bnn_zoo.evaluation import comparison_plots, plots, sweeps
    from bnn_zoo.inference.support.io import atomic_write, write_text

    table = load(folder)
    gaps, diffs = sweeps.pair_gaps(table), sweeps.elpd_differences(table)
    effects = sweeps.hyperprior_effects(table)
    # The gain's trend needs the gain (a hyperprior against the fixed scale) at two noise levels.
    levels = table.groupby("dataset")["noise"].nunique()
    trended = table[table["dataset"].isin(levels[levels > 1].index)]
    trend = (sweeps.effect_trend(trended) if not effects.empty and not trended.empty
             else pd.DataFrame(columns=["dataset", "slope", "slope_lo", "slope_hi", "p_value"]))
    agreement = sweeps.loo_agreement(table)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("gaps", gaps), ("elpd_differences", diffs), ("hyperprior_effects", effects),
                        ("effect_trend", trend), ("loo_agreement", agreement)):
        atomic_write(out / f"{name}.csv", lambda tmp, f=frame: f.to_csv(tmp, index=False, float_format="%.6g"))
    plots.save(comparison_plots.sweep_lines(gaps, "gap", "accuracy gap to Bayes-optimal (points)", HYPER_STYLE),
               out / "gap_vs_noise.png")
    plots.save(comparison_plots.sweep_lines(diffs.rename(columns={"diff": "gap", "diff_lo": "gap_lo",
                                                                  "diff_hi": "gap_hi"}),
                                            "gap", "held-out ELPD minus the best pair's (nats / 1,000 points)",
                                            HYPER_STYLE),
               out / "elpd_differences.png")
    (out / "hyperprior_effect.png").unlink(missing_ok=True)  # a report of an earlier sweep's may be there
    if not effects.empty:
        plots.save(comparison_plots.hyperprior_effect(effects, HYPER_STYLE), out / "hyperprior_effect.png")
    plots.save(comparison_plots.loo_vs_test(table), out / "loo_vs_test.png")
    n = table.groupby(["dataset", "noise", "pair"]).size()
    text = [f"# Prior sweep: {folder}", "",
            f"{len(table)} fits: data sets {', '.join(sorted(table['dataset'].unique()))}; noise "
            f"{', '.join(f'{v:g}' for v in sorted(table['noise'].unique()))}; {table['pair'].nunique()} prior "
            f"pair{'s' if table['pair'].nunique() > 1 else ''}; {n.min() if n.min() == n.max() else f'{n.min()}-{n.max()}'} seeds each; {int(table['n_test'].iloc[0]):,} fresh test points per "
            f"data set; {table['converged'].mean():.1%} of the fits converged. Intervals are 95% "
            "Student-t intervals over the seeds of paired differences (every pair sees the same data "
            "within a seed).", "", "## Verdict on Zharikov et al.", "",
            *verdict(effects, trend, gaps, diffs, agreement), "",
            "![accuracy gap](gap_vs_noise.png)", "",
            *(["![hyperprior effect](hyperprior_effect.png)", ""] if not effects.empty else []),
            "![ELPD differences](elpd_differences.png)", "", "![LOO against held-out](loo_vs_test.png)", "",
            "## Hyperprior against fixed scale", "",
            sweeps.markdown(effects) if not effects.empty else
            "No hyperprior to set against the fixed scale in this sweep: no table and no figure.", "",
            "## PSIS-LOO against the held-out ELPD", "", sweeps.markdown(agreement), "",
            "## Accuracy gap to the Bayes-optimal classifier", "", sweeps.markdown(gaps), ""]
    path = out / "summary.md"
    write_text(path, "\n".join(text))
    return path


def main(argv=None, prog: str = "bnn-zoo report") -> int:
    """Run ``bnn-zoo report SWEEP_DIR [--out DIR]``.

    Writes the report into ``--out`` (default ``SWEEP_DIR/report``) and
    prints the summary's path.

    Parameters
    ----------
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo report"
        The program's name in usage and error messages.

    Returns
    -------
    int
        The exit code: 0 on success and for ``--help``; 2 for bad flags, an
        ``--out`` that cannot be written, or a folder without a usable
        sweep table (with a one-line error on stderr).
    """
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code
    out = args.out or args.sweep / "report"
    try:
        check_writable(out, "--out")
        path = write_report(args.sweep, out)
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
