"""Do the toy experiment's defaults reach the optimum, and how far are they from the best classifier?

Two sweeps, then this summary (about 20 minutes on 2 cores)::

    S="--datasets moons --noise 0.1,0.2,0.3,0.4,0.5 --all-priors --seeds 3"
    C="--datasets circles --noise 0.1,0.2,0.3 --all-priors --seeds 3"
    bnn-zoo sweep --out sweeps/defaults $S && bnn-zoo sweep --out sweeps/defaults $C
    R="--steps 30000 --restarts 5 --pick-at 0 --init-offset 1000 --float32"
    bnn-zoo sweep --out sweeps/reference $S $R && bnn-zoo sweep --out sweeps/reference $C $R
    python -m benchmarks.studies.toy_defaults sweeps/defaults sweeps/reference

Other settings against the same reference, e.g. 16 restarts picked at 80%
of the steps (about 6.5 times the defaults' steps), without rerunning it::

    X="--restarts 16 --pick-at 0.8 --float32"
    bnn-zoo sweep --out sweeps/r16 $S $X && bnn-zoo sweep --out sweeps/r16 $C $X
    python -m benchmarks.studies.toy_defaults sweeps/r16 benchmarks/results/studies/toy_defaults.csv --name toy_restarts16.csv

When a change of the model touches some pairs only (e.g. the inverse-gamma
hyperprior's parameters), the reference of those pairs alone, with a stored
table's reference for the rest::

    R="$R --priors cauchy,laplace,normal --hyperpriors inversegamma"
    bnn-zoo sweep --out sweeps/reference-ig $M $R && bnn-zoo sweep --out sweeps/reference-ig $N $R
    python -m benchmarks.studies.toy_defaults sweeps/defaults benchmarks/results/studies/toy_defaults.csv sweeps/reference-ig

(``M`` and ``N``: ``S`` and ``C`` without ``--all-priors``, which takes
every pair.) The defaults sweep fits as ``bnn-zoo moons`` does (float64);
the reference runs in float32 (half the time; its ELBOs differ from
float64's by hundredths of a nat).

For moons at noise 0.1-0.5 and circles at 0.1-0.3, each seed's data (700
training points, 10,000 fresh test points) and each prior pair: the default
fit of ``bnn-zoo moons``/``circles`` (its accuracy and NLL, the Bayes-optimal
classifier's on the same points, its convergence test, its q's ELBO), and a
reference, the best ELBO of 5 fits three times as long from other initial
means. Writes ``toy_defaults.csv`` (one row per data set, noise, seed and
pair) into ``--out`` and prints three checks:

- the default pair (normal-inversegamma) within 1.5 accuracy points of the
  Bayes-optimal classifier at every noise level (its worst seed);
- the best pair (by mean accuracy over the seeds) within 0.7 points;
- every pair's default fit within 3 nats of the reference's ELBO (the flat
  prior aside: its improper density has no maximum, so longer fits keep
  raising its ELBO).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from bnn_zoo.experiments.harness.store import Store
from bnn_zoo.inference.support.io import atomic_write

CASE = ["dataset", "noise", "seed", "pair"]


def load(folder: Path) -> pd.DataFrame:
    """Every record in a sweep's store (its finished fits, also of a sweep still running)."""
    store = Store(folder)
    table = store.table(sorted(store.done()))
    table["pair"] = table["prior"] + "-" + table["hyperprior"]
    return table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.toy_defaults", description=__doc__.splitlines()[0])
    p.add_argument("defaults", type=Path, help="the sweep at the toy experiment's defaults")
    p.add_argument("reference", type=Path, nargs="+", help="the sweep of longer fits from other initial "
                   "means, or a table this command wrote (its reference_elbo column); of several, a later "
                   "one's fits replace an earlier one's of the same case")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/studies"))
    p.add_argument("--name", default="toy_defaults.csv", help="the table's file name in --out")
    args = p.parse_args(argv)
    default = load(args.defaults)
    references = []
    for source in args.reference:
        if source.suffix == ".csv":
            reference = pd.read_csv(source)[CASE + ["reference_elbo"]]
        else:
            reference = load(source)
            reference["reference_elbo"] = reference["elbo_restarts"].map(lambda text: max(json.loads(text)))
        references.append(reference[CASE + ["reference_elbo"]])
    reference = pd.concat(references).drop_duplicates(CASE, keep="last")
    table = default[CASE + ["accuracy", "bayes_accuracy", "nll", "bayes_nll", "converged",
                            "convergence_elbo_change", "convergence_elbo_change_se", "elbo_q",
                            "picked_restart"]].merge(reference[CASE + ["reference_elbo"]], on=CASE, how="left")
    table["gap"] = table["bayes_accuracy"] - table["accuracy"]
    # the default fit's q's ELBO (its 500 draws; its restarts' scores are estimates at the early
    # pick) against the best of the reference's 5 (1,000 draws each)
    table["elbo_short"] = table["reference_elbo"] - table["elbo_q"]
    table = table.sort_values(CASE)
    path = args.out / args.name
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False, float_format="%.6g"))
    print(f"{len(default)} fits, {len(reference)} reference fits")
    print(summary(table))
    print(f"rows: {path}")
    return 0


def summary(table: pd.DataFrame) -> str:
    """Per data set and noise, in accuracy points: the default pair's mean and worst gap over the
    seeds, the best pair's mean gap; the proper priors' cases within 3 nats of the reference."""
    lines = [f"{'data set':8s} {'noise':>5s} {'default pair: mean / worst gap':>31s} "
             f"{'best pair (mean gap)':>34s} {'ELBO within 3 nats':>19s} {'worst short':>11s} "
             f"{'converged':>9s}"]
    for (dataset, noise), t in table.groupby(["dataset", "noise"], sort=False):
        default = t[t.pair == "normal-inversegamma"]
        by_pair = t.groupby("pair")["gap"].mean()
        proper = t[~t.pair.str.startswith("flat") & t["reference_elbo"].notna()]
        within = f"{(proper['elbo_short'] <= 3).sum()} of {len(proper)}"
        lines.append(f"{dataset:8s} {noise:5.1f} {100 * default['gap'].mean():16.2f} / {100 * default['gap'].max():.2f}"
                     f"          {by_pair.idxmin():>22s} ({100 * by_pair.min():.2f}) {within:>19s} "
                     f"{proper['elbo_short'].max():11.1f} {t['converged'].mean():9.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
