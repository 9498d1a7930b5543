"""Seed 004's hierarchical-prior experiment on a 2-D toy data set.

``python -m experiments.moons`` and ``python -m experiments.circles`` are thin
wrappers around :func:`main`. One run fits one prior x hyperprior pair;
``--all-priors`` fits all of them and compares them by PSIS-LOO.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd

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


def build_parser(dataset: str) -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.<dataset>``."""
    p = Parser(
        prog=f"python -m experiments.{dataset}",
        description=f"Fit a hierarchical Bayesian MLP (2-5-5-2, tanh) to {dataset} by ADVI, "
        "write metrics, posterior draws and an uncertainty map.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
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
    p.add_argument("--noise", type=nonneg_float, default=NOISE[dataset], help="data noise std")
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
        proba_train = predict_proba(result, draws, split.X_train)
        proba_test = predict_proba(result, draws, split.X_test)
        predict_seconds = time.perf_counter() - t0
        xx, yy, grid = split.grid(GRID_POINTS)
        proba_grid = predict_proba(result, draws, grid)

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
            "loo": elpd}


def _config(args, dataset: str, prior: str, hyperprior: str, **extra) -> dict:
    return dict(
        dataset=dataset, prior=prior, hyperprior=hyperprior, noise=args.noise,
        n_train=args.n_train, n_test=args.n_test, steps=args.steps, lr=args.lr, beta=args.beta,
        init_std=args.init_std, method=args.method, engine=args.engine, backend=args.backend, float32=args.float32,
        draws=args.draws, seed=args.seed, hidden=DEFAULTS["hidden"], out=args.out,
        figures=args.figures, **{"progress": not args.no_progress, "map": True, **extra},
    )


COLUMNS = ["prior", "hyperprior", "accuracy", "nll", "brier", "ece", "elpd_loo", "elpd_loo_se",
           "pareto_k_max", "elbo_final", "fit_seconds"]


def run_all(args, dataset: str) -> None:
    """Fit every prior x hyperprior pair, rank them by LOO, write the table and figures."""
    pairs = list(itertools.product(args.priors, args.hyperpriors))
    configs = [_config(args, dataset, p, h, progress=False, map=False) for p, h in pairs]
    t0 = time.perf_counter()
    if args.jobs > 1:
        # Fork: the workers start with everything imported (about 4 s each otherwise).
        # Nothing in this process has started JAX yet, so there is no JAX state to copy.
        with mp.get_context("fork").Pool(args.jobs) as pool:
            runs = []
            for r in pool.imap(run_one, configs):
                runs.append(r)
                _report(r["metrics"], len(runs), len(configs))
    else:
        runs = [run_one(c) for c in configs]
        for i, r in enumerate(runs, 1):
            _report(r["metrics"], i, len(configs))
    wall = time.perf_counter() - t0

    idatas = {f"{r['metrics']['prior']}-{r['metrics']['hyperprior']}":
              az.from_netcdf(Path(r["dir"]) / "idata.nc") for r in runs}
    cmp = az.compare({f"{r['metrics']['prior']}-{r['metrics']['hyperprior']}": r["loo"]
                      for r in runs}, round_to="none")
    table = pd.DataFrame([r["metrics"] for r in runs])[COLUMNS]
    table.insert(0, "model", [f"{p}-{h}" for p, h in zip(table.prior, table.hyperprior)])
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
    split = toy.load(dataset, n_train=args.n_train, n_test=args.n_test, noise=args.noise,
                     seed=args.seed)
    xx, yy, _ = split.grid(GRID_POINTS)
    plots.prior_grid(
        fig_dir / "prior_grid.png", xx, yy,
        {(r["metrics"]["prior"], r["metrics"]["hyperprior"]): r["grid_mean"] for r in runs},
        {(r["metrics"]["prior"], r["metrics"]["hyperprior"]): r["metrics"]["accuracy"]
         for r in runs},
        split.X_train, split.y_train,
        title=f"{dataset} (noise {args.noise}): posterior mean of P(class 1), "
              "columns = prior, rows = hyperprior",
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(4).to_string())
    print(f"{len(runs)} fits in {wall:.1f} s wall ({args.jobs} jobs); "
          f"table: {out_dir / 'comparison.csv'}; figures: {fig_dir}/")


def _report(m: dict, i: int, n: int) -> None:
    print(f"[{i:2d}/{n}] {m['prior']:>8s}-{m['hyperprior']:<13s} accuracy {m['accuracy']:.3f} "
          f"elpd_loo {m['elpd_loo']:9.2f}  fit {m['fit_seconds']:5.1f} s", flush=True)


def main(dataset: str, argv=None) -> int:
    """Entry point of ``python -m experiments.<dataset>``."""
    args = build_parser(dataset).parse_args(argv)
    use_compilation_cache()
    try:
        if args.all_priors:
            run_all(args, dataset)
        else:
            r = run_one(_config(args, dataset, args.prior, args.hyperprior))
            m = r["metrics"]
            print(f"{dataset} {m['prior']}-{m['hyperprior']}: accuracy {m['accuracy']:.3f}, "
                  f"nll {m['nll']:.3f}, brier {m['brier']:.3f}, ece {m['ece']:.3f}, "
                  f"elpd_loo {m['elpd_loo']:.1f}, fit {m['fit_seconds']:.1f} s -> {r['dir']}")
    except NonFiniteLossError as err:
        print(f"python -m experiments.{dataset}: error: {err} (try a smaller --lr or --init-std)",
              file=sys.stderr)
        return 1
    return 0
