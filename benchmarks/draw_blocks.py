"""The posterior's draws evaluated in blocks of several sizes: the time of 8,000 draws per block budget.

    python -m benchmarks.draw_blocks [--megabytes 8,32,64,256] [--models NAME,...] [--json FILE]

:class:`~bnn_zoo.inference.posterior.draws.DrawMap` evaluates the model at many
draws in blocks of as many draws as fit in
:data:`~bnn_zoo.inference.posterior.draws.MAP_BYTES`. For each budget, in a
process of its own (a block's size is decided once per process), each model is
fitted briefly (mean-field ADVI, 200 steps) and the model evaluated at 8,000
draws of q: ``log p`` alone (what ``method="auto"``'s test and ``sample``'s
resampling pool need), then ``log p`` and the pointwise log likelihoods
(``sample``'s kept draws). Median of three runs after one that compiles, in
ms; the block's draws beside. The models are those of
:mod:`benchmarks.reference_posteriors`.

Prints the table with each time's ratio to the library's budget, and each budget's total over the
models; ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys

from bnn_zoo.inference.support.io import write_json

DEFAULT_MODELS = ("logistic_breast_cancer", "low_dim_gauss_mix-low_dim_gauss_mix", "bnn_full_batch",
                  "diamonds-diamonds", "hierarchical_regression", "gp_pois_regr-gp_pois_regr")
DRAWS = 8000


def _one(megabytes: int, names: list[str]) -> list[dict]:
    """Each model's times with a block budget of ``megabytes`` (this process's)."""
    import time
    import warnings

    import numpy as np

    import bnn_zoo
    from benchmarks.reference_posteriors import MODELS
    from bnn_zoo.inference.posterior import draws

    draws.MAP_BYTES = megabytes * 2**20
    warnings.simplefilter("ignore")
    rows = []
    for name in names:
        model = MODELS[name][0]()
        result = bnn_zoo.fit(model, method="advi", steps=200, random_seed=0, progressbar=False)
        z, _ = draws.draw_z(result, DRAWS, 0)
        for outputs in (("logp",), ("logp", *[f"loglik:{rv.name}" for rv in model.observed_RVs])):
            draws.evaluate_z(result, z, outputs)  # compiles
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                draws.evaluate_z(result, z, outputs)
                times.append(time.perf_counter() - t0)
            block = list(result.density.jitted[("evaluate", outputs)].block_draws.values())[0]
            rows.append({"model": name, "megabytes": megabytes, "outputs": "log p" if len(outputs) == 1
                         else "log p, log likelihoods", "block": block, "ms": 1e3 * float(np.median(times))})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", default="8,32,64,256", help="the block budgets to compare")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a budget's run, in its own process
    args = parser.parse_args(argv)
    names = args.models.split(",")
    if args.one is not None:
        print(json.dumps(_one(args.one, names)))
        return
    from bnn_zoo.inference.posterior.draws import MAP_BYTES

    rows = []
    for megabytes in [int(m) for m in args.megabytes.split(",")]:
        out = subprocess.run([sys.executable, "-m", "benchmarks.draw_blocks", "--one", str(megabytes),
                              "--models", args.models], check=True, capture_output=True, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    library = MAP_BYTES // 2**20
    base = {(r["model"], r["outputs"]): r["ms"] for r in rows if r["megabytes"] == library}
    print(f"{platform.processor() or platform.machine()}; {DRAWS:,} draws; ms (block's draws, x the "
          f"library's {library} MB)")
    budgets = sorted({r["megabytes"] for r in rows})
    print("| model | outputs | " + " | ".join(f"{m} MB" for m in budgets) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in budgets) + " |")
    for key in dict.fromkeys((r["model"], r["outputs"]) for r in rows):
        cells = []
        for m in budgets:
            r = next(r for r in rows if (r["model"], r["outputs"]) == key and r["megabytes"] == m)
            ratio = f", {r['ms'] / base[key]:.2f}x" if key in base else ""
            cells.append(f"{r['ms']:.1f} ({r['block']}{ratio})")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    for outputs in dict.fromkeys(r["outputs"] for r in rows):  # each budget's total over the models
        totals = [sum(r["ms"] for r in rows if r["outputs"] == outputs and r["megabytes"] == m) for m in budgets]
        print(f"| all | {outputs} | " + " | ".join(f"{t:.1f}" for t in totals) + " |")
    if args.json:
        write_json(args.json, {"machine": platform.processor() or platform.machine(), "draws": DRAWS,
                               "library_megabytes": library, "rows": rows})


if __name__ == "__main__":
    main()
