"""Peak memory of an MNIST MLP fit with the JAX engine (the whole process, as the OS counts it).

    python -m benchmarks.fit_memory [--hidden 1200] [--steps 300] [--data-dir DIR]

Fits a mean-field MLP 784-H-H-10 (ReLU, N(0, 1) priors, float32, batch 128)
to the 50,000 MNIST training images with :func:`bnn_zoo.fit` and prints
the process's peak resident memory next to the sizes of what it holds: the
training data, and the variational parameters plus Adam's state (4 arrays of
the parameter count, and 2 for mu and sigma). The engine updates parameters
and optimizer state in place (donated buffers), so the peak should not grow
with the number of steps.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import optax

import bnn_zoo
from bnn_zoo.data import mnist
from bnn_zoo.experiments.harness.resources import peak_rss_mb as peak_mb
from bnn_zoo.models import mlp_classifier


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fit_memory",
                                description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=1200)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        data = mnist.load(args.data_dir)
    except mnist.MNISTError as e:
        p.error(str(e))
    X = data.flat(data.X_train)
    loaded = peak_mb()
    t0 = time.perf_counter()
    with bnn_zoo.precision(True):
        model = mlp_classifier(X, data.y_train, hidden=(args.hidden, args.hidden), n_classes=10,
                               activation="relu", prior="normal", hyperprior="fixed")
    result = bnn_zoo.fit(model, method=bnn_zoo.MeanField(init_std=1e-3), steps=args.steps, batch_size=128,
                         optimizer=optax.adam(1e-3), progressbar=False)
    d = result.layout.dim
    print(f"MLP 784-{args.hidden}-{args.hidden}-10, {d:,} weights, {args.steps} steps of batch 128, "
          f"{time.perf_counter() - t0:.0f} s ({result.ms_per_step:.1f} ms/step)")
    print(f"training images (float32): {X.nbytes / 2**20:.0f} MB; q and Adam state: "
          f"{6 * d * 4 / 2**20:.0f} MB")
    print(f"peak resident memory: {peak_mb():.0f} MB (after loading MNIST: {loaded:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
