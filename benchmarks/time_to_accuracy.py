"""Time to a test error, per gradient estimator: Bayes by Backprop on MNIST with the paper's objective.

    python -m benchmarks.time_to_accuracy [--hidden 400] [--layers 2] [--epochs 100]
        [--minutes 20] [--targets 2.0,1.8,1.6] [--estimators weights,local_reparam,flipout]
        [--data-dir DIR] [--limit-train N] [--csv FILE] [--json FILE]

Each estimator (:mod:`bnn_zoo.inference.advi.estimators`) fits the same 784-H-H-10
ReLU network (``bnn-zoo mnist-bbb``'s model: N(0, 1) weights, images scaled
by 126, float32) by mean-field ADVI with beta = 1 and Blundell's KL
weighting, batch 128, Adam at a constant 1e-3, from the same initial q and
seed. The estimators advance one epoch each in turn, so all see the same
machine state. After each epoch the test error of the predictive averaged
over 10 networks drawn from q is measured (not timed; the same draws' noise
for every estimator). An estimator stops when it has reached every target,
after ``--epochs``, or after ``--minutes`` of training time.

Prints, per estimator: ms per step, and the epochs and training seconds to
reach each target (``-`` if not reached), with the wall-time ratio to the
weight estimator. ``--csv`` writes the per-epoch trace; ``--json`` the summary.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bnn_zoo import ELBO, MeanField, precision
from bnn_zoo.data import mnist
from bnn_zoo.inference.advi import core, optim
from bnn_zoo.inference.advi.prepare import prepare
from bnn_zoo.inference.advi.estimators import ESTIMATORS
from bnn_zoo.inference.families import MEAN_FIELD
from bnn_zoo.inference.support.io import atomic_write, write_json
from bnn_zoo.inference.compile.jaxmodel import compile_predictive
from bnn_zoo.models import mlp_classifier

BATCH, LR, INIT_STD, DRAWS, SEED = 128, 1e-3, 0.03, 10, 0


def evaluator(model, layout, X: np.ndarray, y: np.ndarray, chunk: int = 2000):
    """``error(params)``: test error of the mean predictive of ``DRAWS`` networks drawn from q."""
    predictive = compile_predictive(model, ("p",))
    dtypes = {v.name: v.dtype for v in model.data_vars}
    X, y = jnp.asarray(X), jnp.asarray(y)
    key = jax.random.key(SEED + 1)

    @jax.jit
    def proba(params, x):
        z = core.sample(key, params, MEAN_FIELD, DRAWS)

        def one(row):
            data = [x if name == "X" else jnp.zeros(len(x), dtype) for name, dtype in dtypes.items()]
            return predictive.fn(layout.unflatten(row), data, [])[0]

        return jnp.mean(jax.lax.map(one, z), axis=0)

    def error(params) -> float:
        wrong = 0
        for start in range(0, len(X), chunk):
            p = proba(params, X[start:start + chunk])
            wrong += int(jnp.sum(jnp.argmax(p, axis=1) != y[start:start + chunk]))
        return wrong / len(X)

    return error


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.time_to_accuracy", description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=400)
    p.add_argument("--layers", type=int, choices=(1, 2), default=2)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--minutes", type=float, default=20.0, help="training time allowed per estimator")
    p.add_argument("--targets", default="2.0,1.8,1.6", help="test errors in percent")
    p.add_argument("--estimators", default=",".join(ESTIMATORS))
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--limit-train", type=int, default=None)
    p.add_argument("--csv", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    estimators = args.estimators.split(",")
    bad = [e for e in estimators if e not in ESTIMATORS]
    try:
        targets = sorted((float(t) / 100 for t in args.targets.split(",")), reverse=True)
    except ValueError:
        targets = []
    if bad or not targets or args.epochs < 1 or args.minutes <= 0 or args.hidden < 1:
        print(f"{p.prog}: error: bad --estimators {bad}, --targets, --epochs, --minutes or --hidden", file=sys.stderr)
        return 2
    try:
        d = mnist.load(args.data_dir, normalize="126", seed=SEED)
    except mnist.MNISTError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    n = args.limit_train or len(d.X_train)
    X, y = d.flat(d.X_train[:n]), d.y_train[:n]
    with precision(True):
        model = mlp_classifier(X, y, hidden=(args.hidden,) * args.layers, n_classes=10, activation="relu",
                               prior="normal", hyperprior="fixed")
    per_epoch = n // BATCH
    steps = args.epochs * per_epoch
    runs = {}
    for est in estimators:
        def setup():
            return prepare(model, method=MeanField(init_std=INIT_STD), steps=steps,
                           optimizer=optim.make("adam", LR, steps), batch_size=BATCH, average=0,
                           objective=ELBO(beta=1.0, kl_weighting="blundell", estimator=est), random_seed=SEED)
        warm = setup()  # compiles the steps, which the run's own set-up then shares
        jax.block_until_ready(warm.runner.advance(warm.state, 0, 2)[0].params)
        run = setup()
        runs[est] = dict(setup=run, state=run.state, seconds=0.0, epoch=0, reached={}, done=False)
    error = evaluator(model, runs[estimators[0]]["setup"].layout, d.flat(d.X_test), d.y_test)
    rows = []
    while not all(r["done"] for r in runs.values()):
        for est, r in runs.items():
            if r["done"]:
                continue
            t0 = time.perf_counter()
            r["state"], trace = r["setup"].runner.advance(r["state"], r["epoch"] * per_epoch, per_epoch)
            jax.block_until_ready(r["state"].params)
            r["seconds"] += time.perf_counter() - t0
            r["epoch"] += 1
            err = error(r["state"].params)
            rows.append(dict(estimator=est, epoch=r["epoch"], train_seconds=r["seconds"], test_error=err,
                             elbo=float(np.mean(trace))))
            for t in targets:
                if err <= t and t not in r["reached"]:
                    r["reached"][t] = (r["epoch"], r["seconds"])
            r["done"] = (len(r["reached"]) == len(targets) or r["epoch"] >= args.epochs
                         or r["seconds"] >= 60 * args.minutes or not np.isfinite(trace).all())
            print(f"{est:14s} epoch {r['epoch']:4d}  {r['seconds']:7.1f} s  test error {err:.2%}", flush=True)
    trace = pd.DataFrame(rows)
    summary = {"host": platform.processor() or platform.machine(), "hidden": args.hidden, "layers": args.layers,
               "n_train": n, "batch_size": BATCH, "lr": LR, "beta": 1.0, "kl_weighting": "blundell",
               "targets": targets, "estimators": {}}
    base = runs.get("weights")
    print(f"\n{'estimator':14s} {'ms/step':>8s}  " + "  ".join(f"{'to ' + format(t, '.1%'):>22s}" for t in targets))
    for est, r in runs.items():
        ms = 1000 * r["seconds"] / (r["epoch"] * per_epoch)
        cells = []
        for t in targets:
            if t in r["reached"]:
                e, s = r["reached"][t]
                ratio = (f" ({s / base['reached'][t][1]:.2f}x)" if base and t in base["reached"]
                         and base["reached"][t][1] > 0 else "")
                cells.append(f"{e:4d} ep {s:6.0f} s{ratio}")
            else:
                cells.append("-")
        print(f"{est:14s} {ms:8.2f}  " + "  ".join(f"{c:>22s}" for c in cells))
        summary["estimators"][est] = {
            "ms_per_step": ms, "epochs_run": r["epoch"], "train_seconds": r["seconds"],
            "final_test_error": float(trace[trace.estimator == est].test_error.iloc[-1]),
            "best_test_error": float(trace[trace.estimator == est].test_error.min()),
            "reached": {f"{t:.4f}": {"epochs": e, "seconds": s} for t, (e, s) in r["reached"].items()}}
    if args.csv:
        atomic_write(args.csv, lambda path: trace.to_csv(path, index=False))
    if args.json:
        write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
