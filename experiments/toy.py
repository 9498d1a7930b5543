"""Seed 004's hierarchical-prior experiment on the 2-D toy data sets.

``python -m experiments.moons`` and ``python -m experiments.circles`` are thin
wrappers around :func:`main`; ``python -m experiments.toy`` runs on several
data sets in one command (``--datasets``, default both). One run fits one
prior x hyperprior pair; ``--all-priors`` fits all of them and compares them
by PSIS-LOO.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import multiprocessing as mp
import os
import re
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
from xarray import DataTree

from data import toy
from experiments.cli import (Parser, nonneg_float, positive_float, positive_int, run_dir,
                             use_compilation_cache)
from evaluation import plots
from evaluation.metrics import all_metrics
from inference import BACKENDS, ENGINES, METHODS, NonFiniteLossError, draw, fit, loo, precision
from inference.io import atomic_dir, atomic_write, write_json, write_text
from inference.posterior import predict_proba, to_datatree
from models import HYPERPRIORS, WEIGHT_PRIORS, mlp_classifier
from models.priors import SCALE_FREE

# What a user gets with no flags: the best-behaved settings we measured (README).
DEFAULTS = dict(prior="normal", hyperprior="inversegamma", n_train=700, n_test=300, steps=10_000,
                lr=0.05, beta=1.0, init_std=0.01, method="advi", engine="jax", backend="numba", seed=0,
                draws=500, hidden=(5, 5))
NOISE = {"moons": 0.2, "circles": 0.2}
# Seed 004's four weight priors: what --all-priors compares unless --priors says otherwise.
GRID_PRIORS = ("cauchy", "flat", "laplace", "normal")
GRID_POINTS = 100


def _names(registry):
    def parse(text):
        names = [n for n in text.split(",") if n]
        unknown = [n for n in names if n not in registry]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'}; valid: {', '.join(sorted(registry))}")
        return names
    return parse


def _n_train(text):
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {value}")
    return value


def _datasets(text):
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in NOISE]
    if unknown or not names or len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(
            f"want distinct names from {', '.join(NOISE)}, got {text!r}")
    return names


def build_parser(dataset: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.<dataset>`` (``None``: ``experiments.toy``)."""
    p = Parser(
        prog=f"python -m experiments.{dataset or 'toy'}",
        description=f"Fit a hierarchical Bayesian MLP (2-5-5-2, tanh) to {dataset or 'toy data'} "
        "by ADVI, write metrics, posterior draws and an uncertainty map.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    if dataset is None:
        p.add_argument("--datasets", type=_datasets, default=list(NOISE),
                       help="comma-separated data sets, each fitted as its own command would")
    p.add_argument("--prior", choices=sorted(WEIGHT_PRIORS), default=DEFAULTS["prior"],
                   help="prior on every weight and bias")
    p.add_argument("--hyperprior", choices=sorted(HYPERPRIORS), default=DEFAULTS["hyperprior"],
                   help="hyperprior on each layer's prior scale (ignored by 'flat')")
    p.add_argument("--all-priors", action="store_true",
                   help="fit every prior x hyperprior pair and compare them by PSIS-LOO")
    p.add_argument("--priors", type=_names(WEIGHT_PRIORS), default=list(GRID_PRIORS),
                   help="with --all-priors: comma-separated priors to compare "
                   f"(any of {', '.join(sorted(WEIGHT_PRIORS))})")
    p.add_argument("--hyperpriors", type=_names(HYPERPRIORS), default=sorted(HYPERPRIORS),
                   help="with --all-priors: comma-separated hyperpriors to compare")
    p.add_argument("--noise", type=nonneg_float, default=NOISE[dataset] if dataset else None,
                   help="data noise std" + ("" if dataset else " (default: each data set's, "
                   + ", ".join(f"{k} {v}" for k, v in NOISE.items()) + ")"))
    p.add_argument("--n-train", type=_n_train, default=DEFAULTS["n_train"])
    p.add_argument("--n-test", type=positive_int, default=DEFAULTS["n_test"])
    p.add_argument("--steps", type=positive_int, default=DEFAULTS["steps"], help="ADVI steps")
    p.add_argument("--lr", type=positive_float, default=DEFAULTS["lr"], help="Adam learning rate")
    p.add_argument("--beta", type=positive_float, default=DEFAULTS["beta"], help="KL weight")
    p.add_argument("--init-std", type=positive_float, default=DEFAULTS["init_std"],
                   help="initial posterior std of every parameter")
    p.add_argument("--method", choices=METHODS, default=DEFAULTS["method"],
                   help="mean-field or full-rank Gaussian approximation")
    p.add_argument("--engine", choices=ENGINES, default=DEFAULTS["engine"],
                   help="'jax': the whole ADVI loop compiled to JAX; 'pymc': PyMC's own step "
                   "(the reference)")
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULTS["backend"],
                   help="pytensor backend of --engine pymc")
    p.add_argument("--float32", action="store_true", help="fit in single precision")
    p.add_argument("--draws", type=positive_int, default=DEFAULTS["draws"],
                   help="posterior draws for predictions and LOO")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="data, init and MC seed")
    p.add_argument("--jobs", type=positive_int, default=min(2, os.cpu_count() or 1),
                   help="parallel fits with --all-priors")
    p.add_argument("--out", type=Path, default=Path("results"), help="results folder")
    p.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


# Run settings copied into metrics.json.
RECORDED = ("dataset", "prior", "hyperprior", "method", "engine", "backend", "seed", "steps", "noise",
            "n_train", "n_test", "lr", "beta", "init_std", "float32", "draws")


def run_one(cfg: dict) -> dict:
    """Fit one prior x hyperprior pair, write its results; return metrics and its grid map."""
    dataset = cfg["dataset"]
    split = toy.load(dataset, n_train=cfg["n_train"], n_test=cfg["n_test"], noise=cfg["noise"],
                     seed=cfg["seed"])
    with precision(cfg["float32"]):
        model = mlp_classifier(split.X_train, split.y_train, hidden=cfg["hidden"],
                               prior=cfg["prior"], hyperprior=cfg["hyperprior"])
        result = fit(model, method=cfg["method"], steps=cfg["steps"], learning_rate=cfg["lr"],
                     beta=cfg["beta"], init_std=cfg["init_std"], engine=cfg["engine"], backend=cfg["backend"],
                     float32=cfg["float32"], seed=cfg["seed"], progressbar=cfg["progress"])
        t0 = time.perf_counter()
        draws = draw(result, cfg["draws"], seed=cfg["seed"])
        xx, yy, grid = split.grid(GRID_POINTS)
        # One call for all inputs: fewer padded rows than one call each.
        proba = predict_proba(result, draws, np.concatenate([split.X_train, split.X_test, grid]))
        proba_train, proba_test, proba_grid = np.split(
            proba, np.cumsum([len(split.X_train), len(split.X_test)]), axis=1)
        predict_seconds = time.perf_counter() - t0

    idata = to_datatree(result, draws, X_train=split.X_train, y_train=split.y_train,
                        X_test=split.X_test, y_test=split.y_test,
                        proba_train=proba_train, proba_test=proba_test)
    elpd = loo(idata)
    metrics = {
        **{key: cfg[key] for key in RECORDED},
        "hidden": list(cfg["hidden"]),
        **all_metrics(proba_test, split.y_test),
        "elbo_final": result.elbo_final, "fit_seconds": result.seconds,
        "predict_seconds": predict_seconds,
        "elpd_loo": float(elpd.elpd), "elpd_loo_se": float(elpd.se), "p_loo": float(elpd.p),
        "pareto_k_max": float(np.max(elpd.pareto_k)),
        "pareto_k_bad_share": float(np.mean(np.asarray(elpd.pareto_k) > 0.7)),
    }
    target = run_dir(cfg["out"], dataset, cfg["prior"], cfg["hyperprior"], cfg["seed"])
    with atomic_dir(target) as staging:
        idata.to_netcdf(staging / "idata.nc")
        az.summary(idata, kind="stats", round_to="none").to_csv(staging / "summary.csv")
        write_json(staging / "metrics.json", metrics)
    if cfg["map"]:
        plots.uncertainty_map(
            cfg["figures"] / dataset / f"uncertainty_{cfg['prior']}-{cfg['hyperprior']}.png",
            xx, yy, proba_grid, split.X_train, split.y_train,
            title=f"{dataset}: {cfg['prior']} prior, {cfg['hyperprior']} hyperprior "
                  f"(test accuracy {metrics['accuracy']:.3f})",
        )
    return {"metrics": metrics, "grid_mean": proba_grid[..., 1].mean(0), "dir": str(target),
            "loo": elpd, "posterior": idata["posterior"].to_dataset()}


def _config(args, dataset: str, prior: str, hyperprior: str, **extra) -> dict:
    return dict(
        dataset=dataset, prior=prior, hyperprior=hyperprior, noise=_noise(args, dataset),
        n_train=args.n_train, n_test=args.n_test, steps=args.steps, lr=args.lr, beta=args.beta,
        init_std=args.init_std, method=args.method, engine=args.engine, backend=args.backend, float32=args.float32,
        draws=args.draws, seed=args.seed, hidden=DEFAULTS["hidden"], out=args.out,
        figures=args.figures, **{"progress": not args.no_progress, "map": True, **extra},
    )


def _noise(args, dataset: str) -> float:
    return NOISE[dataset] if args.noise is None else args.noise


COLUMNS = ["prior", "hyperprior", "accuracy", "nll", "brier", "ece", "elpd_loo", "elpd_loo_se",
           "pareto_k_max", "elbo_final", "fit_seconds"]


def _run_pair(configs: list[dict]) -> list[dict]:
    # One pair on every data set, in one process: the data sets' models have the same
    # structure, so the second one reuses the first one's compiled functions.
    return [run_one(c) for c in configs]


def run_all(args, datasets: list[str]) -> None:
    """Fit every prior x hyperprior pair on each data set; per data set, rank them by LOO and
    write the table and figures."""
    pairs = list(itertools.product(args.priors, args.hyperpriors))
    tasks = [[_config(args, d, p, h, progress=False, map=False) for d in datasets] for p, h in pairs]
    total, runs = len(pairs) * len(datasets), []
    t0 = time.perf_counter()
    with _pool(args.jobs) as pool:
        for done in pool.imap(_run_pair, tasks):
            for r in done:
                runs.append(r)
                _report(r["metrics"], len(runs), total, dataset=len(datasets) > 1)
        wall = time.perf_counter() - t0
        per_dataset = [(args, d, [r for r in runs if r["metrics"]["dataset"] == d]) for d in datasets]
        for line in pool.starmap(summarize, per_dataset):
            print(line)
    print(f"{total} fit{'s' * (total != 1)} in {wall:.1f} s wall ({args.jobs} jobs)")


class _Serial:
    """What :func:`run_all` uses of a process pool, in this process."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap(self, fn, items):
        return map(fn, items)

    def starmap(self, fn, items):
        return [fn(*item) for item in items]


def _pool(jobs: int):
    """``jobs`` worker processes, each on a core of its own where there are enough."""
    if jobs == 1:
        return _Serial()
    # Fork: the workers start with everything imported (about 4 s each otherwise).
    # Nothing in this process has started JAX yet, so there is no JAX state to copy.
    ctx = mp.get_context("fork")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    queue = ctx.SimpleQueue()
    for i in range(jobs):
        queue.put(cores[i] if jobs <= len(cores) else None)
    return ctx.Pool(jobs, initializer=_worker_init, initargs=(queue,))


def _worker_init(cores) -> None:
    # A toy model's XLA programs gain nothing from threads, and with one process per
    # core the threads of each compete for the other's core: single-threaded XLA and
    # one core per worker made 2 x 8 fits 20-30% faster on 2 cores (benchmarks/README).
    core = cores.get()
    if core is not None:
        os.sched_setaffinity(0, {core})
    _add_xla_flag("--xla_cpu_multi_thread_eigen=false")


def _add_xla_flag(flag: str) -> None:
    """Append ``flag`` to ``XLA_FLAGS`` unless the user's flags already set it (before JAX starts)."""
    flags = os.environ.get("XLA_FLAGS", "")
    name = flag.split("=", 1)[0]
    if all(token.split("=", 1)[0] != name for token in flags.split()):
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def _jaxlib_at_least(*version: int) -> bool:
    release = importlib.metadata.version("jaxlib").split(".")
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in release[:len(version)]) >= version


def summarize(args, dataset: str, runs: list[dict]) -> str:
    """One data set's comparison table and figures from its ``runs``; returns the table as text."""
    names = [f"{r['metrics']['prior']}-{r['metrics']['hyperprior']}" for r in runs]
    idatas = {name: DataTree.from_dict({"posterior": r["posterior"]}) for name, r in zip(names, runs)}
    cmp = az.compare({name: r["loo"] for name, r in zip(names, runs)}, round_to="none")
    table = pd.DataFrame([r["metrics"] for r in runs])[COLUMNS]
    table.insert(0, "model", names)
    table = (table.set_index("model").join(cmp[["rank", "elpd_diff", "dse", "weight"]])
             .sort_values("rank"))
    out_dir = args.out / dataset
    atomic_write(out_dir / "comparison.csv", lambda tmp: table.to_csv(tmp, float_format="%.4g"))
    write_text(out_dir / "comparison_loo.csv", cmp.to_csv(float_format="%.4g"))

    fig_dir = args.figures / dataset
    plots.compare(fig_dir / "compare.png", cmp)
    hierarchical = {k: v for k, v in idatas.items()
                    if k.split("-")[0] not in SCALE_FREE and not k.endswith("-fixed")}
    if hierarchical:
        scales = [f"scale_{layer}" for layer in range(len(DEFAULTS["hidden"]) + 1)]
        plots.forest(fig_dir / "forest_scales.png", hierarchical, scales)
    # Seed 004 Fig. 3: output-layer weights under each prior, one hyperprior.
    hyper = args.hyperprior if args.hyperprior in args.hyperpriors else args.hyperpriors[0]
    plots.weight_posteriors(fig_dir / "weights_last_layer.png",
                            {p: idatas[f"{p}-{hyper}"] for p in args.priors},
                            f"W_{len(DEFAULTS['hidden'])}")
    noise = _noise(args, dataset)
    split = toy.load(dataset, n_train=args.n_train, n_test=args.n_test, noise=noise, seed=args.seed)
    xx, yy, _ = split.grid(GRID_POINTS)
    plots.prior_grid(
        fig_dir / "prior_grid.png", xx, yy,
        {(r["metrics"]["prior"], r["metrics"]["hyperprior"]): r["grid_mean"] for r in runs},
        {(r["metrics"]["prior"], r["metrics"]["hyperprior"]): r["metrics"]["accuracy"]
         for r in runs},
        split.X_train, split.y_train,
        title=f"{dataset} (noise {noise}): posterior mean of P(class 1), "
              "columns = prior, rows = hyperprior",
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        return (f"{dataset}\n{table.round(4).to_string()}\n"
                f"table: {out_dir / 'comparison.csv'}; figures: {fig_dir}/")


def _report(m: dict, i: int, n: int, dataset: bool = False) -> None:
    name = f"{m['dataset']:>7s} " if dataset else ""
    print(f"[{i:2d}/{n}] {name}{m['prior']:>8s}-{m['hyperprior']:<13s} accuracy {m['accuracy']:.3f} "
          f"elpd_loo {m['elpd_loo']:9.2f}  fit {m['fit_seconds']:5.1f} s", flush=True)


def main(dataset: str | None = None, argv=None) -> int:
    """Entry point of ``python -m experiments.<dataset>`` (``None``: ``python -m experiments.toy``)."""
    parser = build_parser(dataset)
    args = parser.parse_args(argv)
    datasets = [dataset] if dataset else args.datasets
    use_compilation_cache()
    # XLA's YNNPACK fusions run the toy's predictions (batched 2x5, 5x5 and 5x2
    # products over draws) ~40% slower than XLA's own loops: 0.37 against 0.6 s
    # for 11,000 points x 500 draws, equal to 2e-15; the steps are unchanged.
    # Older jaxlib lacks the flag, and XLA aborts on a flag it does not know
    # (0.10.1 is the oldest seen with it). XLA reads the flags when JAX starts, in
    # this call; they are put back afterwards (a caller's later processes keep theirs).
    saved = os.environ.get("XLA_FLAGS")
    if _jaxlib_at_least(0, 10):
        _add_xla_flag("--xla_cpu_experimental_ynn_fusion_type=")
    try:
        if args.all_priors:
            run_all(args, datasets)
        else:
            for d in datasets:
                r = run_one(_config(args, d, args.prior, args.hyperprior))
                m = r["metrics"]
                print(f"{d} {m['prior']}-{m['hyperprior']}: accuracy {m['accuracy']:.3f}, "
                      f"nll {m['nll']:.3f}, brier {m['brier']:.3f}, ece {m['ece']:.3f}, "
                      f"elpd_loo {m['elpd_loo']:.1f}, fit {m['fit_seconds']:.1f} s -> {r['dir']}")
    except NonFiniteLossError as err:
        print(f"{parser.prog}: error: {err} (try a smaller --lr or --init-std)", file=sys.stderr)
        return 1
    finally:
        if saved is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
