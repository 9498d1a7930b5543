"""1-D BNN regression and its uncertainty away from the data (Garg; Loya's slides).

``bnn-zoo regression`` fits the sine wave of Garg, "Bayesian Neural Networks and
Variational Inference" (2 x 10 tanh, the sweep of
KL weights beta = 1 ... 0.0001) and Blundell et al.'s (2015) curve (2 x 10
ReLU) by full-batch mean-field ADVI of :func:`~bnn_zoo.models.mlp_regressor`:
one fit, or the equal-weight mixture of ``--restarts`` fits from other
initial means (default 5 for the sine wave, whose single fit keeps its
in-range sd outside the data). One run folder per task and beta
(``<task>-beta<b>-s<seed>``, tagged ``-r<k>`` for other restarts than the
task's default) and one figure per task, a panel per beta.

Metrics, from the posterior draws: ``rmse_in`` (predictive mean against
``E[y | x]`` inside the data range), ``coverage95_in`` (share of fresh noisy
targets in the data range inside the central 95% predictive interval,
observation noise included; likewise at 50% and 90%, with each interval's mean
width, and the conformal intervals' coverage and width at 90% and 95%:
:func:`~bnn_zoo.evaluation.calibration.coverage_metrics`), ``sd_ratio_out_in`` (mean sd of the network
output ``mu`` outside the data range over the mean inside;
``sd_ratio_out_in_total`` with the observation noise) and ``elbo_final``
(the mean of the restarts' final ELBOs, a lower bound on the mixture's).
How the defaults were chosen: docs/reproductions.md (regression-defaults).

The module is the experiment's pieces for :mod:`~bnn_zoo.experiments.harness.runner`:
:class:`RegressionConfig` (one run's settings), :func:`arguments` and
:func:`configs` (flags to runs), :func:`data`, :func:`model`, :func:`evaluate`,
:func:`report` and :func:`summarize`, put together in :data:`EXPERIMENT`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from bnn_zoo import predict
from bnn_zoo.data import regression
from bnn_zoo.evaluation import calibration_plots, comparison_plots, plots
from bnn_zoo.evaluation.calibration import coverage_metrics
from bnn_zoo.evaluation.metrics import predictive_interval
from bnn_zoo.experiments.harness import config, runner
from bnn_zoo.experiments.harness.fit_flags import fit_settings
from bnn_zoo.experiments.harness.flags import int_list, nonneg_float, positive_float
from bnn_zoo.inference.support.io import write_text
from bnn_zoo.models.mlp import ACTIVATIONS, mlp_regressor

__all__ = ["ARCHITECTURE", "BETAS", "DEFAULTS", "EXPERIMENT", "PREDICTIVE_REPLICAS", "RegressionConfig",
           "arguments", "betas", "configs", "data", "evaluate", "figure_path", "main", "model", "report",
           "spread", "summarize"]

#: Garg's sweep of KL weights: the runs without ``--beta``, one per weight.
BETAS = (1.0, 0.1, 0.01, 0.001, 0.0001)  # Garg's sweep
#: Each task's network and restarts, where ``--hidden``, ``--activation`` and ``--restarts`` do not
#: say: Garg fixes 2 x 10 tanh for the sine wave, Blundell's curve uses ReLU. One mean-field
#: tanh fit keeps about its in-range sd outside the data, where NUTS on the same model widens (the
#: study regression_nuts in docs/benchmarks.md, benchmarks/studies/regression_nuts.py); restarts
#: extrapolate each their own way, so the sine wave's mixture of 5 spreads wider outside. The
#: measurements: docs/reproductions.md (regression-defaults).
ARCHITECTURE = {"sine": dict(hidden=(10, 10), activation="tanh", restarts=5),
                "blundell": dict(hidden=(10, 10), activation="relu", restarts=1)}
#: What a user gets with no flags: 50,000 steps of a cosine decay from 0.003, which pass the
#: convergence test; every beta of :data:`BETAS` and each task's restarts of :data:`ARCHITECTURE`
#: (``beta`` and ``restarts`` None); and a full-rank phase at 1e-4, which climbs above its
#: mean-field start where 1e-3 falls below it. The measurements: docs/reproductions.md
#: (regression-defaults).
DEFAULTS = dict(steps=50_000, lr=0.003, lr_schedule="cosine", lr_final=0.01, init_std=0.01, draws=1000,
                restarts=None, beta=None, fullrank_lr=1e-4, average=0.0, pick_at=0.0)
#: Noise draws per posterior draw for the predictive interval
#: (:func:`bnn_zoo.evaluation.metrics.predictive_interval`).
PREDICTIVE_REPLICAS = 4  # noise draws per posterior draw for the predictive interval


@dataclass(frozen=True)
class RegressionConfig(config.RunConfig):
    """One regression run's settings: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, and these.

    The run folder is ``<out>/regression/<task>-beta<beta>-s<seed>``, tagged ``-r<restarts>``
    when the restarts are not the task's default (:data:`ARCHITECTURE`).

    Parameters
    ----------
    task : str, default "sine"
        The task, one of :data:`bnn_zoo.data.regression.TASKS`.
    hidden : tuple of int, default (10, 10)
        Hidden layer sizes.
    activation : str, default "tanh"
        The hidden nonlinearity, a name of :data:`bnn_zoo.models.mlp.ACTIVATIONS`.
    noise : str or float, default "halfnormal"
        The observation noise sd: ``"halfnormal"`` (inferred, sigma ~ HalfNormal(1)) or a fixed
        value.
    data_noise : float, optional
        The sd of the data's noise; default the task's (0.1 for the sine wave, 0.02 for
        Blundell's curve).
    """

    task: str = "sine"
    hidden: tuple[int, ...] = (10, 10)
    activation: str = "tanh"
    noise: str | float = "halfnormal"
    data_noise: float | None = None

    @property
    def name(self) -> str:
        """The run folder's name, ``<task>-beta<beta>-s<seed>`` and a restarts tag."""
        tag = "" if self.restarts == ARCHITECTURE[self.task]["restarts"] else f"-r{self.restarts}"
        return f"{self.task}-beta{self.beta:g}-s{self.seed}{tag}"


def _noise(text):
    if text == "halfnormal":
        return text
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be 'halfnormal' or a positive number, got {text!r}") from None


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the regression experiment's own flags to a parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser (the shared fitting flags are added by the runner).
    """
    p.add_argument("--task", choices=(*regression.TASKS, "all"), default="all", help="which task to fit")
    p.add_argument("--activation", choices=sorted(ACTIVATIONS), default=None,
                   help="hidden nonlinearity (default: tanh for sine, relu for blundell)")
    p.add_argument("--hidden", type=int_list, default=None,
                   help="hidden layer sizes, e.g. 10,10 (default: 10,10)")
    p.add_argument("--noise", type=_noise, default="halfnormal",
                   help="observation noise sd: 'halfnormal' (inferred, sigma ~ HalfNormal(1)) "
                   "or a fixed positive value")
    p.add_argument("--data-noise", type=nonneg_float, default=None,
                   help="sd of the data noise e (default: 0.1 for sine, 0.02 for blundell)")


def configs(args) -> list[RegressionConfig]:
    """The runs a command line asks for: one per task and KL weight.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of RegressionConfig
        For each task of ``--task`` (both with ``all``) and each beta of :func:`betas`, a run
        with the task's network and restarts of :data:`ARCHITECTURE` unless the flags say
        otherwise.
    """
    tasks = regression.TASKS if args.task == "all" else (args.task,)
    shared = fit_settings(args)
    out = []
    for task in tasks:
        arch = ARCHITECTURE[task]
        settings = dict(shared, task=task, hidden=args.hidden or arch["hidden"],
                        activation=args.activation or arch["activation"], noise=args.noise,
                        data_noise=args.data_noise,
                        restarts=arch["restarts"] if args.restarts is None else args.restarts)
        out.extend(RegressionConfig(**settings | {"beta": beta}, dataset="regression")
                   for beta in betas(args))
    return out


def betas(args) -> tuple[float, ...]:
    """``--beta``, or Garg's sweep without it.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    tuple of float
        ``(args.beta,)``, or :data:`BETAS` when ``--beta`` is not given.
    """
    return BETAS if args.beta is None else (args.beta,)


def data(cfg: RegressionConfig) -> regression.Task:
    """A run's task: training and test points, prediction grid and truth.

    Parameters
    ----------
    cfg : RegressionConfig
        The run (its task, data noise and seed).

    Returns
    -------
    bnn_zoo.data.regression.Task
        :func:`bnn_zoo.data.regression.load`'s task.
    """
    return regression.load(cfg.task, noise_sd=cfg.data_noise, seed=cfg.seed)


def model(cfg: RegressionConfig, task: regression.Task):
    """A run's PyMC model: the MLP regressor on its training points.

    Parameters
    ----------
    cfg : RegressionConfig
        The run (its hidden sizes, activation and observation noise).
    task : bnn_zoo.data.regression.Task
        The run's data.

    Returns
    -------
    pymc.Model
        :func:`bnn_zoo.models.mlp.mlp_regressor`'s model, with N(0, 1) on every weight.
    """
    return mlp_regressor(task.x_train[:, None], task.y_train, hidden=cfg.hidden,
                         activation=cfg.activation, noise=cfg.noise)


def spread(mean: np.ndarray, sd: np.ndarray, task: regression.Task) -> dict:
    """``rmse_in``, ``sd_in``, ``sd_out``, ``sd_ratio_out_in`` of grid predictions' mean and sd.

    Parameters
    ----------
    mean : numpy.ndarray
        The predictive mean at each grid point.
    sd : numpy.ndarray
        The predictive sd at each grid point.
    task : bnn_zoo.data.regression.Task
        The task, whose ``in_range`` splits the grid and whose ``mean_grid`` is the truth.

    Returns
    -------
    dict
        ``rmse_in`` (the mean's RMSE against ``E[y | x]`` inside the data range), ``sd_in`` and
        ``sd_out`` (the mean sd inside and outside it) and ``sd_ratio_out_in`` (their ratio).
    """
    inside = task.in_range
    return {"rmse_in": float(np.sqrt(np.mean(np.square(mean - task.mean_grid)[inside]))),
            "sd_in": float(sd[inside].mean()), "sd_out": float(sd[~inside].mean()),
            "sd_ratio_out_in": float(sd[~inside].mean() / sd[inside].mean())}


def evaluate(cfg: RegressionConfig, task: regression.Task, fits, idata) -> config.Evaluation:
    """A fitted run's metrics and its predictions on the grid.

    Predicts the network output ``mu`` on the grid and the test points with the posterior
    draws; the predictive interval adds the observation noise (the posterior's ``sigma``, or
    the fixed ``noise``) with :data:`PREDICTIVE_REPLICAS` draws each.

    Parameters
    ----------
    cfg : RegressionConfig
        The run.
    task : bnn_zoo.data.regression.Task
        The run's data.
    fits : list of bnn_zoo.FitResult
        The run's fits; the first one predicts.
    idata : xarray.DataTree
        The posterior draws.

    Returns
    -------
    bnn_zoo.experiments.harness.config.Evaluation
        The metrics (the module's, :func:`spread`'s, ``rmse_in_vs_e0``, ``rmse_test``,
        ``sigma_mean``, the test intervals' coverage and width, raw and conformal
        (:func:`~bnn_zoo.evaluation.calibration.coverage_metrics`, names ending in ``_in``), and
        the data's sizes and ranges), ``grid.csv`` (truth, mean, sd and 95% interval at each grid
        point) for the run folder, and the task and the grid's bands for :func:`summarize`.
        Writes ``<figures>/regression/pit_<run>.png``, the PIT of the test targets
        (:func:`~bnn_zoo.evaluation.calibration_plots.pit`).
    """
    x = np.concatenate([task.x_grid, task.x_test])[:, None]
    mu = predict(fits[0], {"X": x}, idata=idata, var_names=["mu"])["predictions"]["mu"].values[0]
    mu_grid, mu_test = mu[:, : len(task.x_grid)], mu[:, len(task.x_grid):]
    posterior = idata["posterior"]
    sigma = (posterior["sigma"].values.ravel() if "sigma" in posterior
             else np.full(mu.shape[0], float(cfg.noise)))
    eps = np.random.default_rng([cfg.seed, 1]).standard_normal((PREDICTIVE_REPLICAS, len(sigma)))

    lo_grid, hi_grid = predictive_interval(mu_grid, sigma, eps)
    mean, sd = mu_grid.mean(0), mu_grid.std(0)
    sd_total = np.sqrt(sd**2 + np.mean(sigma**2))
    inside = task.in_range
    y_rep = (mu_test[None] + (sigma[None] * eps)[..., None]).reshape(-1, mu_test.shape[1])
    plots.save(calibration_plots.pit(calibration_plots.heldout(task.y_test, y_rep, name="y_test"),
                                     title=f"{cfg.name}: PIT of the test targets"),
               cfg.figures / "regression" / f"pit_{cfg.name}.png")
    metrics = {
        "n_train": len(task.x_train), "n_test": len(task.x_test), "data_noise_sd": task.noise_sd,
        "data_range": list(task.data_range), "grid_range": [float(task.x_grid[0]), float(task.x_grid[-1])],
        **spread(mean, sd, task),
        "rmse_in_vs_e0": float(np.sqrt(np.mean(np.square(mean - task.f_grid)[inside]))),
        "rmse_test": float(np.sqrt(np.mean(np.square(mu_test.mean(0) - task.y_test)))),
        **coverage_metrics(task.y_test, y_rep, suffix="_in"),
        "sd_ratio_out_in_total": float(sd_total[~inside].mean() / sd_total[inside].mean()),
        "sigma_mean": float(sigma.mean()),
    }
    rows = np.column_stack([task.x_grid, task.mean_grid, task.f_grid, mean, sd, lo_grid, hi_grid, inside])
    text = "\n".join(["x,truth_mean,truth_e0,mean,sd,lo95,hi95,in_range",
                      *(",".join(f"{v:.6g}" for v in row) for row in rows)]) + "\n"
    return config.Evaluation(metrics=metrics, files={"grid.csv": lambda path: write_text(path, text)},
                             summary={"task": task, "panel": {"mean": mean, "sd": sd, "lo": lo_grid,
                                                              "hi": hi_grid}})


def report(r: config.Record) -> str:
    """A finished run as one line: its metrics, fit time and folder.

    Parameters
    ----------
    r : bnn_zoo.experiments.harness.config.Record
        The finished run.

    Returns
    -------
    str
        The line the command prints.
    """
    m = r.metrics
    return (f"{m['task']:>8s} beta {m['beta']:>6g}: rmse_in {m['rmse_in']:.4f}  "
            f"coverage95_in {m['coverage95_in']:.3f}  sd_ratio_out_in {m['sd_ratio_out_in']:5.2f} "
            f"(total {m['sd_ratio_out_in_total']:.2f})  sigma {m['sigma_mean']:.3f}  "
            f"fit {m['fit_seconds']:4.1f} s ({m['restarts']}x) -> {r.dir}")


def figure_path(cfg: RegressionConfig, betas) -> str:
    """``<figures>/regression/<task>.png`` for the default sweep, tagged otherwise.

    Parameters
    ----------
    cfg : RegressionConfig
        One of the task's runs (its figures folder, task, seed and restarts).
    betas : sequence of float
        The KL weights of the figure's panels.

    Returns
    -------
    pathlib.Path
        The figure's path; tagged ``-beta<b>_<b>...`` for other betas than :data:`BETAS`,
        ``-s<seed>`` for a seed other than 0 and ``-r<restarts>`` for other restarts than the
        task's default.
    """
    tag = "" if tuple(betas) == BETAS else "-beta" + "_".join(f"{b:g}" for b in betas)
    tag += "" if cfg.seed == 0 else f"-s{cfg.seed}"
    tag += "" if cfg.restarts == ARCHITECTURE[cfg.task]["restarts"] else f"-r{cfg.restarts}"
    return cfg.figures / "regression" / f"{cfg.task}{tag}.png"


def summarize(args, records: list) -> str:
    """One figure per task, a panel per beta.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.
    records : list of bnn_zoo.experiments.harness.config.Record
        The finished runs.

    Returns
    -------
    str
        A line per task naming its figure (:func:`figure_path`).
    """
    lines = []
    for name in dict.fromkeys(r.cfg.task for r in records):
        runs = [r for r in records if r.cfg.task == name]
        task, m0 = runs[0].summary["task"], runs[0].metrics
        panels = [dict(r.summary["panel"], label=(
            f"$\\beta$ = {r.metrics['beta']:g}: RMSE {r.metrics['rmse_in']:.3f}, "
            f"cov95 {r.metrics['coverage95_in']:.2f},\nsd out/in {r.metrics['sd_ratio_out_in']:.1f}"))
            for r in runs]
        extra = None if np.allclose(task.f_grid, task.mean_grid) else (task.f_grid, "$y(x, e=0)$")
        path = figure_path(runs[0].cfg, betas(args))
        plots.save(comparison_plots.regression_sweep(
            task.x_train, task.y_train, task.x_grid, task.mean_grid, panels, task.data_range,
            extra_truth=extra,
            title=f"{task.name}: {len(task.x_train)} points, {'x'.join(map(str, m0['hidden']))} "
                  f"{m0['activation']} MLP, "
                  + (f"mixture of {m0['restarts']} mean-field ADVI fits" if m0["restarts"] > 1
                     else "mean-field ADVI")
                  + f" ({m0['steps']} steps)" + (", one panel per KL weight $\\beta$" if len(runs) > 1 else "")),
            path)
        lines.append(f"{name}: figure {path}")
    return "\n".join(lines)


#: The experiment for the runner: ``bnn-zoo regression``, with :data:`DEFAULTS`.
EXPERIMENT = config.Experiment(
    name="regression",
    description="Fit Bayesian MLP regressors by mean-field ADVI to Garg's sine wave and Blundell "
                "et al.'s curve for a sweep of KL weights; write metrics and one figure per task.",
    arguments=arguments, configs=configs, data=data, model=model, evaluate=evaluate, report=report,
    summarize=summarize, defaults=DEFAULTS)


def main(argv=None, prog: str | None = None) -> int:
    """Run ``bnn-zoo regression``.

    Parameters
    ----------
    argv : list of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, optional
        The command's name in help and errors.

    Returns
    -------
    int
        The exit code: 0 on success.
    """
    return runner.main(EXPERIMENT, argv, prog)

