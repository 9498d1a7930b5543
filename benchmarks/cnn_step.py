"""ADVI step of seed 004's Bayesian CNN against a training step of the same deterministic CNN in JAX.

    python -m benchmarks.cnn_step [--steps 100] [--batch-size 128] [--data-dir DIR]

One process, float32, the same MNIST minibatches fed to both (a NumPy batch per
step, host to device included on both sides). The ADVI step is the compiled
step of :func:`inference.build_step` (what :func:`inference.fit` loops over:
mean-field, Adam, one Monte Carlo draw, pytensor compiled to JAX), with the
model's data containers holding one batch that is swapped by ``set_value``
instead of ``pm.Minibatch`` slicing the training set, so that both steps see
identical batches. The deterministic step is plain ``jax.jit`` of
cross-entropy + Adam on the same architecture with the same ``jax.lax``
convolutions. Prints the set-up time (pytensor/JAX compilation and three
warm-up steps), ms/step of each (median over interleaved blocks) and their
ratio.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from data import mnist
from inference import precision
from inference.advi import build_step
from models.cnn import cnn_classifier

DIMS = ("NCHW", "HWIO", "NCHW")


def deterministic_cnn(seed: int = 0):
    """Init params and a jitted Adam training step for conv32-pool-conv32-pool-64-10 (tanh)."""
    rng = np.random.default_rng(seed)
    shapes = [(5, 5, 1, 32), (32,), (5, 5, 32, 32), (32,), (512, 64), (64,), (64, 10), (10,)]
    params = [jnp.asarray(rng.normal(0, 1 / np.sqrt(np.prod(s[:-1])) if len(s) > 1 else 0, s),
                          dtype=jnp.float32) for s in shapes]

    def logits(p, x):
        h = x
        for W, b in (p[0:2], p[2:4]):
            h = jnp.tanh(lax.conv_general_dilated(h, W, (1, 1), "VALID", dimension_numbers=DIMS)
                         + b[None, :, None, None])
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jnp.tanh(h.reshape(len(x), -1) @ p[4] + p[5])
        return h @ p[6] + p[7]

    def loss(p, x, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits(p, x)), y[:, None], 1))

    @jax.jit
    def step(p, m, v, t, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        value, g = jax.value_and_grad(loss)(p, x, y)
        t = t + 1
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g)]
        p = [pi - lr * (mi / (1 - b1**t)) / (jnp.sqrt(vi / (1 - b2**t)) + eps)
             for pi, mi, vi in zip(p, m, v)]
        return p, m, v, t, value

    zeros = [jnp.zeros_like(q) for q in params]
    return step, (params, zeros, list(zeros), jnp.float32(0))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="timed steps of each, in blocks")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    data = mnist.load(args.data_dir)
    n_batches = 20
    X = data.X_train[: n_batches * args.batch_size]
    y = data.y_train[: n_batches * args.batch_size]
    batches = [(X[i::n_batches], y[i::n_batches]) for i in range(n_batches)]

    t0 = time.perf_counter()
    with precision(True):
        model = cnn_classifier(*batches[0], total_size=len(data.X_train))
        _, advi_step = build_step(model, learning_rate=1e-3, init_std=1e-3, backend="jax")
    build_seconds = time.perf_counter() - t0
    y_dtype = model["y"].get_value().dtype
    det_step, state = deterministic_cnn()

    def run_advi(i):
        xb, yb = batches[i % n_batches]
        model["X"].set_value(xb)
        model["y"].set_value(yb.astype(y_dtype))  # pm.Data keeps small labels in a narrow dtype
        return float(advi_step())

    def run_det(i):
        nonlocal state
        xb, yb = batches[i % n_batches]
        *state, value = det_step(*state, xb, yb)
        return float(value)  # waits for the device, like the ADVI step returning its loss

    per_block = max(1, args.steps // args.blocks)
    timings = {"advi": [], "deterministic": []}
    t = {}
    for name, fn in (("advi", run_advi), ("deterministic", run_det)):
        t0 = time.perf_counter()
        for i in range(3):  # compile and warm up
            fn(i)
        t[name] = time.perf_counter() - t0
    t["advi"] += build_seconds
    step_no = 0
    for _ in range(args.blocks):  # interleaved blocks: both see the same machine state
        for name, fn in (("advi", run_advi), ("deterministic", run_det)):
            t0 = time.perf_counter()
            for i in range(per_block):
                fn(step_no + i)
            timings[name].append(1e3 * (time.perf_counter() - t0) / per_block)
        step_no += per_block
    advi, det = np.median(timings["advi"]), np.median(timings["deterministic"])
    print(f"seed-004 CNN, MNIST batch {args.batch_size}, float32, JAX on "
          f"{jax.devices()[0].device_kind} ({jax.device_count()} device), "
          f"{args.blocks} blocks x {per_block} steps")
    print(f"{'step':28s} {'set-up s':>11s} {'ms/step':>8s}")
    print(f"{'ADVI (pm step, pytensor->JAX)':28s} {t['advi']:11.2f} {advi:8.1f}")
    print(f"{'deterministic JAX + Adam':28s} {t['deterministic']:11.2f} {det:8.1f}")
    print(f"ratio ADVI / deterministic: {advi / det:.2f}")


if __name__ == "__main__":
    main()
