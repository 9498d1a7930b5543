"""Which fit defaults: six candidates on the conjugate check, the reference posteriors and the moons.

    python -m benchmarks.studies.defaults_choice conjugate --seeds 20
    python -m benchmarks.studies.defaults_choice reference --seeds 3
    python -m benchmarks.studies.defaults_choice toy --noise 0.2,0.3 --seeds 10
        [--candidates A,B,C,D,E,F] [--steps N] [--json benchmarks/results/studies/defaults_choice_PART.json]

The candidates for :mod:`bnn_zoo.inference.defaults`, all mean-field ADVI
with Adam (``--candidates`` picks some):

- A: a constant 0.01 for 20,000 steps, averaging the iterates of the last half
  (what the library chose);
- B: a cosine decay from 0.05 to 1% of it over 10,000 steps, no averaging (the
  toy commands' schedule);
- C: a cosine decay from 0.01 to 1% over 10,000 steps, no averaging (``bnn-zoo uci``'s);
- D: a constant 0.01 for 10,000 steps, averaging the last half;
- E: a cosine decay from 0.02 to 1% over 10,000 steps, no averaging;
- F: B's schedule, averaging the last half.

The three parts, each a table per candidate:

- ``conjugate``: the linear regression of :mod:`bnn_zoo.models.linear` (200
  points, 5 features of pairwise correlation 0.8), whose posterior is exact;
  per seed, the largest |mean error| in posterior sds and the largest
  relative error of q's sds against the mean-field optimum. A seed passes
  with both below 0.05 sd and 3%, what ``tests/test_advi.py`` asks of the
  defaults.
- ``reference``: the models of ``benchmarks.reference_posteriors`` against
  their stored NUTS references (4,000 draws of q): the largest mean error in
  reference sds, per model, and its mean over the close-to-Gaussian models,
  where the optimizer's last noise is what separates the candidates.
- ``toy``: ``bnn-zoo moons``' default model (Normal weights, InverseGamma(3,
  4) scales) on its data of each ``--noise`` and seed, fitted as the command
  fits it (6 restarts, the best after a fifth of the steps running on, 500
  draws): the test accuracy against the Bayes-optimal classifier's, and q's
  ELBO from the draws behind the best candidate's.

``--steps`` replaces every candidate's steps (a quick check, not a
measurement). Every fit is deterministic for its seed.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

import bnn_zoo
from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.support.io import write_json

#: name: (description, schedule, learning rate, steps, average)
CANDIDATES = {
    "A": ("Adam constant 0.01, 20k steps, average 0.5 (the library's)", "constant", 0.01, 20_000, 0.5),
    "B": ("Adam cosine 0.05 to 1%, 10k steps, average 0 (the toy commands')", "cosine", 0.05, 10_000, 0.0),
    "C": ("Adam cosine 0.01 to 1%, 10k steps, average 0 (bnn-zoo uci's)", "cosine", 0.01, 10_000, 0.0),
    "D": ("Adam constant 0.01, 10k steps, average 0.5", "constant", 0.01, 10_000, 0.5),
    "E": ("Adam cosine 0.02 to 1%, 10k steps, average 0", "cosine", 0.02, 10_000, 0.0),
    "F": ("Adam cosine 0.05 to 1%, 10k steps, average 0.5", "cosine", 0.05, 10_000, 0.5),
}
#: The conjugate check's targets: largest mean error (posterior sds) and sd error.
MEAN_TARGET, SD_TARGET = 0.05, 0.03


def settings(name: str, steps: int | None = None) -> dict:
    """``bnn_zoo.fit``'s ``optimizer``, ``steps`` and ``average`` for candidate ``name``."""
    _, kind, lr, n, average = CANDIDATES[name]
    n = steps or n
    return dict(optimizer=optim.make("adam", lr, n, schedule_kind=kind, final=0.01), steps=n, average=average)


def conjugate(names, seeds, steps=None) -> list[dict]:
    """The conjugate check's rows: one per candidate and seed."""
    from bnn_zoo.models.linear import correlated_design, linear_posterior, linear_regression

    X, y = correlated_design()
    post, model = linear_posterior(X, y), linear_regression(X, y)
    rows = []
    for name in names:
        for seed in seeds:
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = bnn_zoo.fit(model, random_seed=seed, progressbar=False, **settings(name, steps))
            rows.append(dict(candidate=name, seed=seed, optimizer=r.config["optimizer"], steps=r.config["steps"],
                             average=r.config["average"],
                             mean_error_sd=float(np.max(np.abs(r.mean["w"] - post.mean) / post.sd)),
                             sd_rel_error=float(np.max(np.abs(r.sd["w"] / post.mean_field_sd - 1))),
                             converged=bool(r.convergence.converged), seconds=time.perf_counter() - t))
            print(rows[-1], flush=True)
    return rows


def reference(names, models, seeds, steps=None) -> list[dict]:
    """The reference posteriors' rows: one per model, candidate and seed."""
    from benchmarks.reference_posteriors import DRAWS, MODELS
    from benchmarks.reference_posteriors import errors as reference_errors
    from benchmarks.reference_posteriors import reference as nuts_reference

    rows = []
    for model_name in models:
        builder, ref_name, _ = MODELS[model_name]
        ref = nuts_reference(ref_name)
        for name in names:
            for seed in seeds:
                row = dict(model=model_name, reference=ref_name, candidate=name, seed=seed)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        r = bnn_zoo.fit(builder(), random_seed=seed, progressbar=False, **settings(name, steps))
                        fit_s = time.perf_counter() - t
                        draws = bnn_zoo.sample(r, DRAWS, random_seed=seed, log_likelihood=False)["posterior"]
                    row.update(fit_seconds=fit_s, converged=bool(r.convergence.converged),
                               **reference_errors(draws.to_dataset(), ref))
                except Exception as err:  # one model's failure is a row, not the end of the study
                    row.update(error=f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
                    traceback.print_exc(limit=2)
                print(row, flush=True)
                rows.append(row)
    return rows


def toy(names, noises, seeds, steps=None) -> list[dict]:
    """The moons rows: one per noise, seed and candidate."""
    from bnn_zoo.data import toy as toy_data
    from bnn_zoo.evaluation.metrics import all_metrics
    from bnn_zoo.experiments.toy import priors as toy_priors

    rows = []
    for noise in noises:
        for seed in seeds:
            cfg = toy_priors.ToyConfig(dataset="moons", noise=noise, seed=seed)  # the command's otherwise
            split = toy_priors.data(cfg)
            model = toy_priors.model(cfg, split)
            bayes = toy_data.bayes_metrics("moons", split.X_test, split.y_test, noise)["bayes_accuracy"]
            for name in names:
                s = settings(name, steps)
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    [fit] = bnn_zoo.fit_many([model], random_seed=seed, restarts=6, pick_at=0.2, **s)
                fit_s = time.perf_counter() - t
                idata = bnn_zoo.sample([fit], 500, random_seed=seed, log_likelihood=True, var_names=())
                pred = bnn_zoo.predict(fit, {"X": split.X_test}, idata=idata, var_names=["p"])
                m = all_metrics(pred["predictions"]["p"].values[0], split.y_test)
                stats = idata["sample_stats"]
                ratio = (stats["log_p"] - stats["log_q"]).values.ravel()  # q's ELBO, as the command's elbo_q
                rows.append(dict(candidate=name, noise=noise, seed=seed, optimizer=fit.config["optimizer"],
                                 steps=s["steps"], average=s["average"], accuracy=float(m["accuracy"]),
                                 nll=float(m["nll"]), bayes_accuracy=float(bayes), gap=float(bayes - m["accuracy"]),
                                 converged=bool(fit.convergence.converged),
                                 picked_restart=fit.config["picked_restart"], elbo_final=float(fit.elbo_final),
                                 elbo_q=float(ratio.mean()), fit_seconds=fit_s))
                print(rows[-1], flush=True)
    return rows


def conjugate_table(rows) -> str:
    """Per candidate: the seeds that pass, the worst and median errors."""
    lines = ["| candidate | seeds passing | worst mean error (sd) | worst sd error | median sd error | "
             "all converged | s per fit (median) |", "| --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for name in dict.fromkeys(r["candidate"] for r in rows):
        rs = [r for r in rows if r["candidate"] == name]
        passing = sum(r["mean_error_sd"] < MEAN_TARGET and r["sd_rel_error"] < SD_TARGET for r in rs)
        sd = [r["sd_rel_error"] for r in rs]
        lines.append(f"| {name} | {passing}/{len(rs)} | {max(r['mean_error_sd'] for r in rs):.3f} | "
                     f"{max(sd):.1%} | {np.median(sd):.1%} | {all(r['converged'] for r in rs)} | "
                     f"{np.median([r['seconds'] for r in rs]):.2f} |")
    return "\n".join(lines)


def reference_table(rows) -> str:
    """Per model and candidate: the mean over the seeds of the largest mean error (and the worst)."""
    from benchmarks.reference_posteriors import MODELS

    rows = [r for r in rows if "error" not in r]
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    lines = ["| model | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]

    def mean_error(model, name):
        return np.mean([r["mean_error_sd"] for r in rows if r["model"] == model and r["candidate"] == name])

    for model in models:
        cells = []
        for name in names:
            rs = [r for r in rows if r["model"] == model and r["candidate"] == name]
            nc = sum(not r["converged"] for r in rs)
            cells.append(f"{mean_error(model, name):.2f} ({max(r['mean_error_sd'] for r in rs):.2f})"
                         + (f" [{nc} not converged]" if nc else ""))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    gaussian = [m for m in models if MODELS[m][2] == "yes"]
    if gaussian:
        lines.append("| mean, close-to-Gaussian models | "
                     + " | ".join(f"{np.mean([mean_error(m, n) for m in gaussian]):.3f}" for n in names) + " |")
    return "\n".join(lines)


def toy_table(rows) -> str:
    """Per noise and candidate: accuracy, its gap to the Bayes-optimal classifier, and q's ELBO."""
    lines = []
    for noise in dict.fromkeys(r["noise"] for r in rows):
        at = [r for r in rows if r["noise"] == noise]
        best = {s: max(r["elbo_q"] for r in at if r["seed"] == s) for s in {r["seed"] for r in at}}
        lines += [f"\nnoise {noise}:", "| candidate | mean accuracy | mean gap to Bayes | worst gap | mean NLL | "
                  "q's ELBO behind the best (nats) | converged | fit s (median) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
        for name in dict.fromkeys(r["candidate"] for r in at):
            rs = [r for r in at if r["candidate"] == name]
            lines.append(f"| {name} | {np.mean([r['accuracy'] for r in rs]):.4f} | "
                         f"{np.mean([r['gap'] for r in rs]):.4f} | {max(r['gap'] for r in rs):.3f} | "
                         f"{np.mean([r['nll'] for r in rs]):.4f} | "
                         f"{np.mean([best[r['seed']] - r['elbo_q'] for r in rs]):.2f} | "
                         f"{sum(r['converged'] for r in rs)}/{len(rs)} | "
                         f"{np.median([r['fit_seconds'] for r in rs]):.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.defaults_choice",
                                description=__doc__.splitlines()[0])
    p.add_argument("part", choices=("conjugate", "reference", "toy"))
    p.add_argument("--candidates", default=",".join(CANDIDATES), help="comma-separated, from " + ",".join(CANDIDATES))
    p.add_argument("--seeds", type=int, default=3, help="seeds 0 to N - 1")
    p.add_argument("--models", default="", help="reference: comma-separated (default: all)")
    p.add_argument("--noise", default="0.2,0.3", help="toy: comma-separated noise levels")
    p.add_argument("--steps", type=int, default=None, help="replace every candidate's steps (a quick check)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = p.parse_args(argv)
    names = args.candidates.split(",")
    unknown = [n for n in names if n not in CANDIDATES]
    try:
        noises = [float(x) for x in args.noise.split(",")]
    except ValueError:
        noises = []
    problem = (f"unknown candidate {unknown[0]!r}" if unknown
               else "--seeds and --steps must be positive" if args.seeds < 1 or (args.steps or 1) < 1
               else f"--noise must be numbers, got {args.noise!r}" if not noises else None)
    if problem:
        print(f"defaults_choice: {problem}", file=sys.stderr)
        return 2
    seeds = list(range(args.seeds))
    print("\n".join(f"{n}: {CANDIDATES[n][0]}" for n in names))
    if args.part == "conjugate":
        rows = conjugate(names, seeds, args.steps)
        table = conjugate_table(rows)
    elif args.part == "reference":
        from benchmarks.reference_posteriors import MODELS

        models = args.models.split(",") if args.models else list(MODELS)
        if any(m not in MODELS for m in models):
            print(f"defaults_choice: unknown model in {args.models!r}; the models: {', '.join(MODELS)}",
                  file=sys.stderr)
            return 2
        rows = reference(names, models, seeds, args.steps)
        table = reference_table(rows)
    else:
        from bnn_zoo.experiments.harness import runtime

        # as bnn-zoo moons sets it (toy.priors.experiment), before JAX's first computation
        if runtime.jaxlib_at_least(0, 10):
            runtime.add_xla_flag("--xla_cpu_experimental_ynn_fusion_type=")
        rows = toy(names, noises, seeds, args.steps)
        table = toy_table(rows)
    print(table)
    if args.json:
        write_json(args.json, {"part": args.part, "candidates": {n: CANDIDATES[n][0] for n in names},
                               "steps": args.steps, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
