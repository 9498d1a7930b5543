"""Seed 004's Bayesian CNN on MNIST: minibatch ADVI on the JAX backend, uncertainty analysis.

``python -m experiments.mnist_cnn`` fits the network (conv 32@5x5 tanh, pool,
conv 32@5x5 tanh, pool, dense 64 tanh, softmax) with a prior and hyperprior
from the registry, checkpointing the variational state every
``--checkpoint-every`` steps (``--resume`` continues from it), then draws
``--samples`` networks from q for every test image and writes metrics, the
per-image uncertainties and the figures of seed 004 (Figs. 4-6) plus a
reliability diagram.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time

import numpy as np
import pandas as pd

from data import mnist
from experiments.cli import (Parser, UsageError, add_mnist_run_arguments, check_writable,
                             checkpoints, lr_decay, positive_float, positive_int, run_dir,
                             run_resumable, use_compilation_cache)
from evaluation import plots
from evaluation.metrics import all_metrics, per_input_uncertainty, reliability_table
from inference import BACKENDS, ENGINES, draw, fit, precision
from inference.io import atomic_dir, write_json
from inference.posterior import predict_proba
from models import HYPERPRIORS, WEIGHT_PRIORS
from models.cnn import cnn_classifier

DATASET = "mnist_cnn"
# Measured on the full data (README): beta=1 gave 1.68% test error and an
# underconfident 1.80% ECE after 30 epochs; beta=0.1 gave 0.94% and 0.25%.
DEFAULTS = dict(prior="normal", hyperprior="inversegamma", epochs=30, batch_size=128, lr=2e-3,
                beta=0.1, init_std=1e-3, samples=100, engine="jax", backend="jax", seed=0, normalize="255",
                channels=(32, 32), dense=(64,), checkpoint_every=500)
PREDICT_CHUNK = 1000  # test images per forward pass


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.mnist_cnn``."""
    p = Parser(
        prog="python -m experiments.mnist_cnn",
        description="Fit seed 004's Bayesian CNN to MNIST by minibatch ADVI and analyse its "
        "predictive uncertainty.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    d = DEFAULTS
    p.add_argument("--prior", choices=sorted(WEIGHT_PRIORS), default=d["prior"],
                   help="prior on every weight and bias")
    p.add_argument("--hyperprior", choices=sorted(HYPERPRIORS), default=d["hyperprior"],
                   help="hyperprior on each layer's prior scale (ignored by 'flat')")
    p.add_argument("--epochs", type=positive_int, default=d["epochs"], help="passes over the training set")
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"], help="minibatch size")
    p.add_argument("--lr", type=positive_float, default=d["lr"], help="Adam learning rate")
    p.add_argument("--beta", type=positive_float, default=d["beta"], help="KL weight")
    p.add_argument("--init-std", type=positive_float, default=d["init_std"],
                   help="initial posterior std of every parameter")
    p.add_argument("--samples", type=positive_int, default=d["samples"],
                   help="posterior draws per test image")
    p.add_argument("--channels", type=positive_int, nargs="+", default=list(d["channels"]),
                   help="filters of each conv layer")
    p.add_argument("--dense", type=positive_int, nargs="+", default=list(d["dense"]),
                   help="units of each hidden dense layer")
    p.add_argument("--engine", choices=ENGINES, default=d["engine"],
                   help="'jax': the whole ADVI loop compiled to JAX; 'pymc': PyMC's own step "
                   "(the reference)")
    p.add_argument("--backend", choices=BACKENDS, default=d["backend"],
                   help="pytensor backend of --engine pymc")
    add_mnist_run_arguments(p, d)
    return p


# Run settings copied into metrics.json.
RECORDED = ("prior", "hyperprior", "epochs", "batch_size", "lr", "lr_decay_epochs",
            "lr_decay_factor", "beta", "init_std", "samples",
            "engine", "backend", "seed", "normalize", "limit_train", "channels", "dense")


def run(args) -> dict:
    """Fit, evaluate and write one run; returns its metrics."""
    data = mnist.load(args.data_dir, normalize=args.normalize, seed=args.seed)
    X_train, y_train = data.X_train, data.y_train
    if args.limit_train is not None:
        X_train, y_train = X_train[: args.limit_train], y_train[: args.limit_train]
    if args.batch_size > len(X_train):
        raise UsageError(f"--batch-size {args.batch_size} is larger than the training set "
                         f"({len(X_train)} images)")
    if args.lr_decay_epochs and args.engine != "jax":
        raise UsageError("--lr-decay-epochs needs --engine jax")
    check_writable(args.out, "--out")
    check_writable(args.figures, "--figures")
    target = run_dir(args.out, DATASET, args.prior, args.hyperprior, args.seed)
    running, resume = checkpoints(target, args.resume)
    steps_per_epoch = math.ceil(len(X_train) / args.batch_size)

    with precision(True):
        model = cnn_classifier(X_train, y_train, channels=args.channels, dense=args.dense,
                               prior=args.prior, hyperprior=args.hyperprior)
        result = fit(model, steps=args.epochs * steps_per_epoch, batch_size=args.batch_size,
                     learning_rate=args.lr, lr_decay=lr_decay(args, steps_per_epoch),
                     beta=args.beta, init_std=args.init_std,
                     engine=args.engine, backend=args.backend, float32=True, seed=args.seed,
                     progressbar=not args.no_progress, checkpoint=running,
                     checkpoint_every=args.checkpoint_every, resume=resume)
        t0 = time.perf_counter()
        draws = draw(result, args.samples, seed=args.seed, log_p=False)
        proba = predict_proba(result, draws, data.X_test, chunk=PREDICT_CHUNK)
        predict_seconds = time.perf_counter() - t0

    unc = per_input_uncertainty(proba)
    ran = len(result.elbo) - result.config["resumed_at"]
    metrics = {
        **{key: getattr(args, key) for key in RECORDED},
        "n_train": len(X_train), "n_test": len(data.X_test), "steps": len(result.elbo),
        **all_metrics(proba, data.y_test),
        "fit_seconds": result.seconds, "predict_seconds": predict_seconds,
        # Timings of this invocation's steps: absent when it only re-evaluated.
        "ms_per_step": result.ms_per_step if ran > 1 else None,
        "compile_seconds": result.compile_seconds if ran else None,
        "elbo_final": result.elbo_final, "resumed_at_step": result.config["resumed_at"],
    }
    metrics["test_error"] = 1.0 - metrics["accuracy"]
    per_image = pd.DataFrame({"label": data.y_test, "predicted": unc["predicted"],
                              "expected_error": unc["expected_error"], "variance": unc["variance"]})
    per_image.index.name = "test_image"
    table = pd.DataFrame(reliability_table(proba, data.y_test))
    table.index.name = "bin"

    # Figures first: the run folder appears only once everything else is written.
    fig_dir = args.figures / DATASET
    name = f"{args.prior}-{args.hyperprior}"
    correct = unc["predicted"] == data.y_test
    plots.variance_vs_error(fig_dir / f"variance_vs_error_{name}.png", unc["expected_error"],
                            unc["variance"], correct)

    def captions(index):
        return [f"label {data.y_test[i]}, said {unc['predicted'][i]}\n"
                f"exp. error {unc['expected_error'][i]:.3f}" for i in index]

    wrong_sure = np.flatnonzero(~correct)[np.argsort(unc["expected_error"][~correct], kind="stable")][:12]
    plots.image_grid(fig_dir / f"confident_mistakes_{name}.png", data.X_test[wrong_sure],
                     captions(wrong_sure), "Misclassified test images with the lowest expected error")
    unsure = np.argsort(-unc["expected_error"], kind="stable")[:12]
    plots.image_grid(fig_dir / f"least_confident_{name}.png", data.X_test[unsure],
                     captions(unsure), "Test images with the highest expected error")
    plots.reliability(fig_dir / f"reliability_{name}.png", table,
                      title=f"MNIST CNN ({name}): test error {metrics['test_error']:.2%}, "
                            f"ECE {metrics['ece']:.2%}")
    plots.elbo_trace(fig_dir / f"elbo_{name}.png", result.elbo, steps_per_epoch)

    with atomic_dir(target) as staging:
        write_json(staging / "metrics.json", metrics)
        per_image.to_csv(staging / "per_image.csv", float_format="%.6g")
        table.to_csv(staging / "reliability.csv", float_format="%.6g")
        # The final state: this run's last checkpoint, or the one it re-evaluated.
        shutil.copyfile(running if ran else resume, staging / "variational.nc")
    running.unlink(missing_ok=True)
    return metrics


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    use_compilation_cache()
    target = run_dir(args.out, DATASET, args.prior, args.hyperprior, args.seed)
    return run_resumable(
        "python -m experiments.mnist_cnn", run, args,
        lambda m: f"test error {m['test_error']:.2%}  nll {m['nll']:.4f}  ece {m['ece']:.2%}  "
                  f"fit {m['fit_seconds']:.0f} s  predict {m['predict_seconds']:.0f} s  -> {target}")


if __name__ == "__main__":
    sys.exit(main())
