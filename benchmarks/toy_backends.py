"""ADVI step time of the seed-004 toy BNN on each pytensor backend, one process.

    python -m benchmarks.toy_backends [--steps 5000] [--dataset moons]

Prints compile time, ms/step and the ratio to numba (the default backend),
all measured in this run on the same model and data.
"""

from __future__ import annotations

import argparse

from data import toy
from inference import BACKENDS, fit
from models import mlp_classifier


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--dataset", choices=toy.DATASETS, default="moons")
    args = p.parse_args(argv)
    split = toy.load(args.dataset)
    model = mlp_classifier(split.X_train, split.y_train)
    rows = {}
    for backend in BACKENDS:
        fit(model, steps=2, backend=backend, progressbar=False)  # fill on-disk caches
        r = fit(model, steps=args.steps, learning_rate=0.05, backend=backend, progressbar=False)
        rows[backend] = (r.compile_seconds, r.ms_per_step, r.elbo_final)
    ref = rows["numba"][1]
    print(f"{args.dataset}, 2-5-5-2 tanh BNN, {len(split.y_train)} points, full batch, "
          f"mean-field ADVI, {args.steps} steps")
    print(f"{'backend':8s} {'compile s':>9s} {'ms/step':>8s} {'vs numba':>8s} {'ELBO':>9s}")
    for backend, (comp, ms, elbo) in rows.items():
        print(f"{backend:8s} {comp:9.2f} {ms:8.3f} {ms / ref:8.2f} {elbo:9.1f}")


if __name__ == "__main__":
    main()
