"""ADVI step time of the toy BNN: the JAX engine and PyMC's step on each pytensor backend.

    python -m benchmarks.studies.toy_backends [--steps 5000] [--dataset moons]

The toy BNN is the 2-5-5-2 tanh network of Zharikov, Isachenko and
Bochkarev, *Bayesian Neural Networks*. Prints compile time, ms/step and the
ratio to PyMC's step on numba (the reference engine's default backend), all
measured in this run on the same model and data.
"""

from __future__ import annotations

import argparse

import optax

import bnn_zoo
from bnn_zoo.data import toy
from bnn_zoo.inference.alternatives import reference
from bnn_zoo.models import mlp_classifier


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--dataset", choices=toy.DATASETS, default="moons")
    args = p.parse_args(argv)
    split = toy.load(args.dataset)
    model = mlp_classifier(split.X_train, split.y_train)
    rows = {}
    for backend in (None, *reference.BACKENDS):
        name = "engine (jax)" if backend is None else f"pymc {backend}"

        def run(steps):
            if backend is None:
                return bnn_zoo.fit(model, steps=steps, optimizer=optax.adam(0.05), progressbar=False)
            return reference.pymc_fit(model, steps=steps, learning_rate=0.05, backend=backend)

        run(2)  # fill the disk caches
        r = run(args.steps)
        rows[name] = (r.compile_seconds, r.ms_per_step, r.elbo_final)
    ref = rows["pymc numba"][1]
    print(f"{args.dataset}, 2-5-5-2 tanh BNN, {len(split.y_train)} points, full batch, "
          f"mean-field ADVI, {args.steps} steps")
    print(f"{'':12s} {'compile s':>9s} {'ms/step':>8s} {'vs numba':>8s} {'ELBO':>9s}")
    for name, (comp, ms, elbo) in rows.items():
        print(f"{name:12s} {comp:9.2f} {ms:8.3f} {ms / ref:8.2f} {elbo:9.1f}")


if __name__ == "__main__":
    main()
