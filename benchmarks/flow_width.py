"""The flow's width: coupling networks of several widths on the models where ``auto`` climbs to the flow.

    python -m benchmarks.flow_width [--hidden 8,16,32] [--average 0] [--seeds 0,1,2] [--steps 20000] [--json FILE]

For each model of :mod:`benchmarks.reference_posteriors` on which ``method="auto"`` climbs to its
flow rung (the hierarchical regression, both varying-slopes models, posteriordb's eight schools and
gp_pois_regr), and each seed, one process fits the start ``auto``'s flow rung uses (Laplace, then
the Gaussian rung's q fitted for all its steps) and puts on it a flow of each width
(``bnn_zoo.Flow(hidden=h)``, ten coupling layers), trained for ``--steps`` steps, with each share
of its final iterates averaged that ``--average`` lists (``fit``'s ``average``). Each flow gets
``auto``'s test (:func:`bnn_zoo.inference.auto.test`: q's Pareto k on 8,000 draws and their halves,
with more draws near 0.7), and its own 4,000 draws are scored against the model's reference: the
largest mean error in reference sds and the range of the sds' ratios, as
:mod:`benchmarks.reference_posteriors` scores them. The step time is the trained steps' wall time
(compilation apart) over their number. Prints a row per fit, then per width the passes, the median
step time and the median mean error.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from bnn_zoo.inference.support.io import write_json

MODELS = ("hierarchical_regression", "varying_slopes_centered", "varying_slopes_noncentered",
          "eight_schools-eight_schools_noncentered", "gp_pois_regr-gp_pois_regr")


def run(models, hidden, seeds, steps, averages=(0.0,)) -> list[dict]:
    """One row per model, seed and width (see the module docstring)."""
    import bnn_zoo
    from benchmarks import reference_posteriors as rp
    from bnn_zoo.cache import use_compiled_programs
    from bnn_zoo.inference import auto
    from bnn_zoo.inference.laplace import fit_laplace

    use_compiled_programs()
    rows = []
    for name in models:
        build, reference, _ = rp.MODELS[name]
        model, ref = build(), rp.reference(reference)
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                laplace = fit_laplace(model, bnn_zoo.Laplace(starts=auto.MODE_STARTS), steps=steps,
                                      random_seed=seed)
                start = auto.gaussian_rung(model, laplace, steps, seed, until_converged=False)
            for h, average in ((h, a) for h in hidden for a in averages):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    flow = bnn_zoo.fit(model, method=bnn_zoo.Flow(hidden=h), init=start, steps=steps,
                                       average=average, random_seed=seed, progressbar=False)
                    seconds = time.perf_counter() - t0
                    verdict = auto.test(flow, bnn_zoo.Auto().draws, seed, None)
                    draws = bnn_zoo.sample(flow, rp.DRAWS, random_seed=seed)
                taken, stepping = flow.timed
                row = {"model": name, "seed": seed, "hidden": h, "average": average, "dim": int(flow.layout.dim),
                       "q_pareto_k": float(verdict["q_pareto_k"]), "passed": bool(verdict["passed"]),
                       "kept": flow.config["versus_start"]["kept"], "elbo_final": float(flow.elbo_final),
                       "step_ms": 1e3 * stepping / taken, "fit_seconds": seconds,
                       **rp.errors(draws["posterior"].to_dataset(), ref)}
                rows.append(row)
                print(f"{name} seed {seed} hidden {h:3d} average {average:g}: k {row['q_pareto_k']:.2f} "
                      f"({'passed' if row['passed'] else 'failed'}, kept the {row['kept']}), mean error "
                      f"{row['mean_error_sd']:.2f} sd, sds {row['sd_ratio_min']:.2f}-{row['sd_ratio_max']:.2f}x, "
                      f"ELBO {row['elbo_final']:.2f}, {row['step_ms']:.3f} ms a step", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated, from reference_posteriors")
    p.add_argument("--hidden", default="8,16,32", help="comma-separated widths of the coupling networks")
    p.add_argument("--average", default="0", help="comma-separated shares of the final steps averaged")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated random seeds")
    p.add_argument("--steps", type=int, default=20_000, help="each flow's steps (and its start's)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = p.parse_args(argv)
    hidden = [int(h) for h in args.hidden.split(",")]
    averages = [float(a) for a in args.average.split(",")]
    rows = run(args.models.split(","), hidden, [int(s) for s in args.seeds.split(",")], args.steps, averages)
    print()
    for h, average in ((h, a) for h in hidden for a in averages):
        mine = [r for r in rows if r["hidden"] == h and r["average"] == average]
        print(f"hidden {h:3d} average {average:g}: passed {sum(r['passed'] for r in mine)} of {len(mine)}, median step "
              f"{np.median([r['step_ms'] for r in mine]):.3f} ms, median mean error "
              f"{np.median([r['mean_error_sd'] for r in mine]):.2f} sd (largest "
              f"{max(r['mean_error_sd'] for r in mine):.2f})")
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
