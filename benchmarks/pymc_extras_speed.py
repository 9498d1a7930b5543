"""Step time of bnn_zoo's engine against pymc-extras' ``Trainer``, the closest peer, in one process.

    pip install --no-deps "pymc-extras==0.15.1"   # it pins pymc<6.4, but runs on 6.4
    python -m benchmarks.pymc_extras_speed [--steps 200] [--blocks 5] [--data-dir DIR]

The MNIST MLP 784-400-400-10 (ReLU, N(0, 1) priors, float32, batch 128,
mean-field q, Adam 1e-3, the standard gradient), written as a plain PyMC
model without dims: pymc-extras' JAX backend cannot trace the zoo's own
builders, whose dims give shapes from shared variables. Both see the same
minibatches (the engine's, fed to the Trainer through its ``data`` stream).
Timings are interleaved blocks after a warm-up that compiles.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import optax
import pymc as pm
import pytensor
import pytensor.tensor as pt

from bnn_zoo import MeanField
from bnn_zoo.data import mnist
from bnn_zoo.inference.advi.prepare import prepare
from bnn_zoo.inference.advi.engine import batch_indices

LR, INIT_STD, SEED, B = 1e-3, 1e-3, 0, 128


def mlp(X, y, total_size: int) -> pm.Model:
    with pm.Model() as model:
        h, labels = pm.Data("X", X), pm.Data("y", y)
        for i, (n_in, n_out) in enumerate([(784, 400), (400, 400), (400, 10)]):
            h = h @ pm.Normal(f"W_{i}", 0, 1, shape=(n_in, n_out)) + pm.Normal(f"b_{i}", 0, 1, shape=n_out)
            h = pt.maximum(h, 0) if i < 2 else h
        pm.Categorical("y_obs", logit_p=h, observed=labels, total_size=total_size)
    return model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pymc_extras_speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="timed steps of each, per block")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        from pymc_extras.inference.advi import Trainer, adam
    except ImportError:
        p.error('pymc-extras is not installed: pip install --no-deps "pymc-extras==0.15.1"')
    data = mnist.load(args.data_dir)
    X, y = data.flat(data.X_train), data.y_train.astype("int64")
    warmup = 3
    rows = batch_indices(SEED, len(X), B, warmup + args.steps * args.blocks)
    with pytensor.config.change_flags(floatX="float32"):
        setup = prepare(mlp(X, y, len(X)), method=MeanField(init_std=INIT_STD), steps=len(rows),
                        optimizer=optax.adam(LR), batch_size=B, average=0, random_seed=SEED)
        one = mlp(X[rows[0]], y[rows[0]], len(X))
        trainer = Trainer(optimizer=adam(LR), backend="jax", path_derivative_gradient=False,
                          random_seed=SEED)

        def run_trainer(t, k):
            trainer.fit(k, data=({"X": X[rows[i]], "y": y[rows[i]]} for i in range(t, t + k)), model=one)

        def run_engine(t, k):
            setup.state, trace = setup.runner.advance(setup.state, t, k)
            float(trace[-1])

        runners = {"bnn_zoo engine": run_engine, "pymc-extras Trainer (jax)": run_trainer}
        for run in runners.values():
            run(0, warmup)
        times = {name: [] for name in runners}
        for block in range(args.blocks):
            start = warmup + block * args.steps
            for name, run in runners.items():
                t0 = time.perf_counter()
                run(start, args.steps)
                times[name].append(1e3 * (time.perf_counter() - t0) / args.steps)
    ms = {name: float(np.median(t)) for name, t in times.items()}
    print(f"MLP 784-400-400-10, MNIST batch {B}, float32, mean-field, Adam; "
          f"{args.blocks} interleaved blocks x {args.steps} steps, median ms/step")
    for name, value in ms.items():
        print(f"{name:28s} {value:7.2f}")
    ratios = np.array(times["pymc-extras Trainer (jax)"]) / np.array(times["bnn_zoo engine"])
    print(f"pymc-extras / engine: {ms['pymc-extras Trainer (jax)'] / ms['bnn_zoo engine']:.2f} "
          f"(blocks {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
