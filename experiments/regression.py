"""``python -m experiments.regression``: 1-D BNN regression and its uncertainty away from the data.

Reproduces seed 000's sine wave (2 hidden layers x 10 tanh units, a sweep of
the KL weight beta = 1 ... 0.0001) and the regression curve of Blundell et
al. 2015 (1000 inputs in [0, 0.5], predictions on [-0.2, 1.2]). Each task x
beta is fitted by full-batch mean-field ADVI of :func:`models.mlp_regressor`:
one fit, or (``--restarts``, by default 5 for the sine wave) the equal-weight
mixture of several fits from different initial means. Its metrics go to
``<out>/regression/<task>-beta<beta>-s<seed>/`` and each task's sweep to one
figure, ``<figures>/regression/<task>.png`` (both tagged ``-r<restarts>``
for a number of restarts other than the task's default).

Metrics (``metrics.json``), all from the fitted posterior's draws:

``rmse_in``
    RMSE of the posterior predictive mean against the noise-free regression
    function ``E[y | x]`` on the grid points inside the data range (for
    ``blundell`` the noise enters inside the sines, so ``E[y | x]`` is a
    damped curve; ``rmse_in_vs_e0`` compares with ``y(x, e=0)`` instead, and
    ``rmse_test`` with the noisy held-out targets).
``coverage95_in``
    Fraction of fresh noisy targets, drawn in the data range like the
    training ones, inside the central 95% posterior predictive interval
    (quantiles of ``mu + sigma * eps`` over draws: observation noise included).
``sd_ratio_out_in``
    Mean sd of the network output ``mu`` over posterior draws (the
    epistemic uncertainty: seed 000's "standard deviation of the
    predictions") on grid points outside the data range over the mean inside.
    ``sd_ratio_out_in_total`` is the same ratio for the predictive sd
    ``sqrt(var(mu) + E[sigma^2])``, which includes the observation noise.
``elbo_final``
    The mean of the restarts' final ELBO estimates (``elbo_restarts``): a
    lower bound on the mixture's ELBO, at most ``log(restarts)`` below it.

Restart ``k`` is fitted with seed ``seed + k`` (its initial means and Monte
Carlo noise), so runs with neighbouring ``--seed`` share initial means; their
data differ (the data are drawn with ``seed``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from data import regression
from evaluation import plots
from experiments.cli import Parser, nonneg_float, positive_float, positive_int, use_compilation_cache
from inference import NonFiniteLossError, draw_mixture, fit, predict
from inference.io import atomic_dir, write_json, write_text
from models.mlp import ACTIVATIONS, mlp_regressor

BETAS = (1.0, 0.1, 0.01, 0.001, 0.0001)  # seed 000's sweep
# What a user gets with no flags (README): the measured settings that meet the
# targets at beta = 1 (coverage in [0.9, 0.99]; sd_ratio_out_in >= 3 for blundell).
DEFAULTS = dict(steps=20_000, lr=0.003, init_std=0.01, draws=1000, seed=0, noise="halfnormal",
                noise_scale=1.0, prior="normal", hyperprior="fixed")
# Per task: seed 000 fixes 2 x 10 tanh for the sine wave. Under mean-field q
# the tanh net keeps about its in-range sd outside the data (the exact
# posterior does not: benchmarks/regression_nuts.py); with ReLU, q's sd grows
# there (README).
ARCHITECTURE = {
    "sine": dict(hidden=(10, 10), activation="tanh"),
    "blundell": dict(hidden=(10, 10), activation="relu"),
}
# Mean-field fits per task, from different initial means, pooled as an equal-weight
# mixture (inference.draw_mixture). One tanh fit keeps about its in-range sd outside
# the data (1.2x at beta = 1); the restarts extrapolate differently, and five of them
# spread 4x as far outside as inside (README). The ReLU fit alone already does.
RESTARTS = {"sine": 5, "blundell": 1}
PREDICTIVE_REPLICAS = 4  # noise draws per posterior draw for the predictive interval


def beta_name(beta: float) -> str:
    return format(beta, "g")


def _noise(text):
    if text == "halfnormal":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 'halfnormal' or a positive number, got {text!r}") from None
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be 'halfnormal' or a positive number, got {text!r}")
    return value


def _hidden(text):
    try:
        sizes = tuple(int(h) for h in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"layer sizes must be >= 1, got {text!r}")
    return sizes


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except ``None`` ones (their help says what happens)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.regression``."""
    p = Parser(
        prog="python -m experiments.regression",
        description="Fit Bayesian MLP regressors by mean-field ADVI to seed 000's sine wave and "
        "Blundell et al.'s curve for a sweep of KL weights; write metrics and one figure per task.",
        formatter_class=_Help,
    )
    p.add_argument("--task", choices=(*regression.TASKS, "all"), default="all",
                   help="which task to fit")
    p.add_argument("--beta", type=positive_float, default=None,
                   help=f"KL weight of one fit (default: the sweep {', '.join(map(beta_name, BETAS))})")
    p.add_argument("--steps", type=positive_int, default=DEFAULTS["steps"], help="ADVI steps")
    p.add_argument("--lr", type=positive_float, default=DEFAULTS["lr"], help="Adam learning rate")
    p.add_argument("--init-std", type=positive_float, default=DEFAULTS["init_std"],
                   help="initial posterior std of every parameter")
    p.add_argument("--activation", choices=sorted(ACTIVATIONS), default=None,
                   help="hidden nonlinearity (default: tanh for sine, relu for blundell)")
    p.add_argument("--hidden", type=_hidden, default=None,
                   help="hidden layer sizes, e.g. 10,10 (default: 10,10)")
    p.add_argument("--noise", type=_noise, default=DEFAULTS["noise"],
                   help="observation noise sd: 'halfnormal' (inferred, sigma ~ HalfNormal(1)) "
                   "or a fixed positive value")
    p.add_argument("--data-noise", type=nonneg_float, default=None,
                   help="sd of the data noise e (default: 0.1 for sine, 0.02 for blundell)")
    p.add_argument("--restarts", type=positive_int, default=None,
                   help="mean-field fits from different initial means (seeds seed, seed + 1, "
                   "...), their draws pooled as an equal-weight mixture (default: "
                   + ", ".join(f"{k} for {t}" for t, k in RESTARTS.items()) + ")")
    p.add_argument("--draws", type=positive_int, default=DEFAULTS["draws"],
                   help="posterior draws for the predictions (all restarts together)")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="data, init and MC seed")
    p.add_argument("--out", type=Path, default=Path("results"), help="results folder")
    p.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return p


def run_dir(out: Path, task: str, beta: float, seed: int, restarts: int | None = None) -> Path:
    """``<out>/regression/<task>-beta<beta>-s<seed>``, tagged ``-r<restarts>`` if not the task's default."""
    return out / "regression" / f"{task}-beta{beta_name(beta)}-s{seed}{_restarts_tag(task, restarts)}"


def _restarts_tag(task: str, restarts: int | None) -> str:
    return "" if restarts in (None, RESTARTS[task]) else f"-r{restarts}"


def build_model(x, y, hidden, activation, noise):
    """The task's regressor on 1-D inputs ``x`` (the weight prior and noise scale of DEFAULTS)."""
    return mlp_regressor(x[:, None], y, hidden=hidden, activation=activation,
                         prior=DEFAULTS["prior"], hyperprior=DEFAULTS["hyperprior"], noise=noise,
                         noise_scale=DEFAULTS["noise_scale"])


def spread(mean: np.ndarray, sd: np.ndarray, task) -> dict:
    """``rmse_in``, ``sd_in``, ``sd_out``, ``sd_ratio_out_in`` of grid predictions' mean and sd."""
    inside = task.in_range
    return {"rmse_in": float(np.sqrt(np.mean(np.square(mean - task.mean_grid)[inside]))),
            "sd_in": float(sd[inside].mean()), "sd_out": float(sd[~inside].mean()),
            "sd_ratio_out_in": float(sd[~inside].mean() / sd[inside].mean())}


def run_one(cfg: dict) -> dict:
    """Fit one task at one beta, write its folder; return metrics and grid predictions."""
    task = regression.load(cfg["task"], noise_sd=cfg["data_noise"], seed=cfg["seed"])
    model = build_model(task.x_train, task.y_train, cfg["hidden"], cfg["activation"], cfg["noise"])
    restarts = cfg.get("restarts", 1)
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")
    results = [fit(model, beta=cfg["beta"], steps=cfg["steps"], learning_rate=cfg["lr"],
                   init_std=cfg["init_std"], engine="jax", method="advi", seed=cfg["seed"] + k,
                   progressbar=cfg["progress"])
               for k in range(restarts)]
    result = results[0]
    draws = draw_mixture(results, cfg["draws"], seed=cfg["seed"], log_p=False)
    mu_grid = predict(result, draws, task.x_grid[:, None], var="mu")  # (draws, n_grid)
    mu_test = predict(result, draws, task.x_test[:, None], var="mu")
    sigma = (draws.posterior["sigma"] if "sigma" in draws.posterior
             else np.full(cfg["draws"], float(cfg["noise"])))
    # Noise replicas shared by every input (common random numbers): each
    # replica is a smooth curve, so the interval is smooth along the grid.
    eps = np.random.default_rng([cfg["seed"], 1]).standard_normal((PREDICTIVE_REPLICAS, len(sigma)))

    def interval(mu):  # central 95% of the posterior predictive, noise included
        y_rep = mu[None] + (sigma[None] * eps)[..., None]  # (replicas, draws, n)
        return np.quantile(y_rep.reshape(-1, mu.shape[1]), [0.025, 0.975], axis=0)

    lo_test, hi_test = interval(mu_test)
    lo_grid, hi_grid = interval(mu_grid)
    mean, sd = mu_grid.mean(0), mu_grid.std(0)
    sd_total = np.sqrt(sd**2 + np.mean(sigma**2))
    inside = task.in_range
    rms = lambda a: float(np.sqrt(np.mean(np.square(a))))  # noqa: E731
    metrics = {
        "task": cfg["task"], "beta": cfg["beta"], "seed": cfg["seed"], "steps": cfg["steps"],
        "lr": cfg["lr"], "init_std": cfg["init_std"], "draws": cfg["draws"],
        "hidden": list(cfg["hidden"]), "activation": cfg["activation"],
        "prior": DEFAULTS["prior"], "hyperprior": DEFAULTS["hyperprior"], "noise": cfg["noise"],
        "engine": "jax", "method": "advi", "restarts": restarts,
        "n_train": len(task.x_train), "n_test": len(task.x_test),
        "data_noise_sd": task.noise_sd, "data_range": list(task.data_range),
        "grid_range": [float(task.x_grid[0]), float(task.x_grid[-1])],
        **spread(mean, sd, task),
        "rmse_in_vs_e0": rms((mean - task.f_grid)[inside]),
        "rmse_test": rms(mu_test.mean(0) - task.y_test),
        "coverage95_in": float(np.mean((task.y_test >= lo_test) & (task.y_test <= hi_test))),
        "sd_ratio_out_in_total": float(sd_total[~inside].mean() / sd_total[inside].mean()),
        "sigma_mean": float(sigma.mean()),
        "elbo_final": float(np.mean([r.elbo_final for r in results])),
        "elbo_restarts": [r.elbo_final for r in results],
        "fit_seconds": sum(r.seconds for r in results),
        "ms_per_step": float(np.mean([r.ms_per_step for r in results])),
    }
    target = run_dir(cfg["out"], cfg["task"], cfg["beta"], cfg["seed"], restarts)
    header = "x,truth_mean,truth_e0,mean,sd,lo95,hi95,in_range"
    rows = np.column_stack([task.x_grid, task.mean_grid, task.f_grid, mean, sd, lo_grid, hi_grid,
                            inside])
    with atomic_dir(target) as staging:
        write_json(staging / "metrics.json", metrics)
        write_text(staging / "grid.csv", "\n".join(
            [header, *(",".join(f"{v:.6g}" for v in row) for row in rows)]) + "\n")
    return {"metrics": metrics, "dir": str(target), "task": task,
            "panel": {"mean": mean, "sd": sd, "lo": lo_grid, "hi": hi_grid}}


def figure_path(figures: Path, task: str, betas, seed: int, restarts: int | None = None) -> Path:
    """``<figures>/regression/<task>.png`` for the default sweep, tagged otherwise."""
    tag = "" if tuple(betas) == BETAS else "-beta" + "_".join(map(beta_name, betas))
    tag += "" if seed == 0 else f"-s{seed}"
    tag += _restarts_tag(task, restarts)
    return figures / "regression" / f"{task}{tag}.png"


def _figure(path: Path, runs: list[dict]) -> None:
    task = runs[0]["task"]
    m0 = runs[0]["metrics"]
    panels = [dict(r["panel"], label=(
        f"$\\beta$ = {beta_name(r['metrics']['beta'])}: RMSE {r['metrics']['rmse_in']:.3f}, "
        f"cov95 {r['metrics']['coverage95_in']:.2f},\nsd out/in {r['metrics']['sd_ratio_out_in']:.1f}"
    )) for r in runs]
    arch = f"{'x'.join(map(str, m0['hidden']))} {m0['activation']}"
    extra = None if np.allclose(task.f_grid, task.mean_grid) else (task.f_grid, "$y(x, e=0)$")
    plots.regression_sweep(
        path, task.x_train, task.y_train, task.x_grid, task.mean_grid,
        panels, task.data_range, extra_truth=extra,
        title=f"{task.name}: {len(task.x_train)} points, {arch} MLP, "
              + (f"mixture of {m0['restarts']} mean-field ADVI fits" if m0["restarts"] > 1
                 else "mean-field ADVI")
              + f" ({m0['steps']} steps)" + (", one panel per KL weight $\\beta$" if len(runs) > 1 else ""),
    )


def _report(m: dict, path: str) -> None:
    print(f"{m['task']:>8s} beta {beta_name(m['beta']):>6s}: rmse_in {m['rmse_in']:.4f}  "
          f"coverage95_in {m['coverage95_in']:.3f}  sd_ratio_out_in {m['sd_ratio_out_in']:5.2f} "
          f"(total {m['sd_ratio_out_in_total']:.2f})  sigma {m['sigma_mean']:.3f}  "
          f"fit {m['fit_seconds']:4.1f} s ({m['restarts']}x) -> {path}", flush=True)


def main(argv=None) -> int:
    """Entry point of ``python -m experiments.regression``."""
    args = build_parser().parse_args(argv)
    use_compilation_cache()
    tasks = regression.TASKS if args.task == "all" else (args.task,)
    betas = BETAS if args.beta is None else (args.beta,)
    try:
        for name in tasks:
            arch = dict(ARCHITECTURE[name])
            if args.activation is not None:
                arch["activation"] = args.activation
            if args.hidden is not None:
                arch["hidden"] = args.hidden
            restarts = RESTARTS[name] if args.restarts is None else args.restarts
            runs = []
            for beta in betas:
                cfg = dict(task=name, beta=beta, steps=args.steps, lr=args.lr,
                           init_std=args.init_std, draws=args.draws, seed=args.seed,
                           noise=args.noise, data_noise=args.data_noise, out=args.out,
                           progress=not args.no_progress, restarts=restarts, **arch)
                runs.append(run_one(cfg))
                _report(runs[-1]["metrics"], runs[-1]["dir"])
            path = figure_path(args.figures, name, betas, args.seed, restarts)
            _figure(path, runs)
            print(f"{name}: figure {path}", flush=True)
    except NonFiniteLossError as err:
        print(f"python -m experiments.regression: error: {err} (try a smaller --lr or --init-std)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
