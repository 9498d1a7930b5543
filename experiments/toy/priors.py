"""The prior study on the 2-D toy data sets (moons, circles): a hierarchical BNN under each prior.

The experiment of Zharikov, Isachenko and Bochkarev. ``bnn-zoo moons``,
``bnn-zoo circles`` and ``bnn-zoo toy`` (both data sets, ``--datasets``) fit
one prior x hyperprior pair of a 2-5-5-2 tanh BNN by ADVI, or every pair with
``--all-priors``, which are then compared by PSIS-LOO (table and ArviZ figures
per data set, :mod:`~bnn_zoo.experiments.toy.comparison`).

The module is the experiment's pieces for :mod:`~bnn_zoo.experiments.harness.runner`:
:class:`ToyConfig` (one run's settings), :func:`arguments` and :func:`configs`
(flags to runs), :func:`data`, :func:`model`, :func:`evaluate`, :func:`report`
and :func:`summarize`, put together by :func:`experiment`. The sweep
(:mod:`~bnn_zoo.experiments.sweep.command`) reuses :func:`model`, :func:`evaluate` and
:data:`HYPERPRIOR_PARAMS`, so a sweep's record is what a run writes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np
from xarray import DataTree

from bnn_zoo import loo, predict
from bnn_zoo.data import toy
from bnn_zoo.evaluation.calibration import coverage_metrics
from bnn_zoo.evaluation.metrics import all_metrics
from bnn_zoo.experiments.harness import config, runner
from bnn_zoo.experiments.harness.fit_flags import fit_settings
from bnn_zoo.experiments.harness.runtime import small_program_xla_flags
from bnn_zoo.inference.diagnostics.qcheck import ApproximationWarning
from bnn_zoo.experiments.harness.flags import int_list, n_train, names, nonneg_float, positive_int
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS, mlp_classifier

__all__ = ["DEFAULTS", "GRID_POINTS", "GRID_PRIORS", "HYPERPRIOR_PARAMS", "NOISE", "ToyConfig", "arguments",
           "bayes_reference", "configs", "data", "evaluate", "experiment", "hyperprior_params", "main", "model",
           "report", "summarize"]

#: Each data set's default noise standard deviation (``--noise``); its keys are the data sets.
NOISE = {"moons": 0.2, "circles": 0.2}
#: The four weight priors of Zharikov, Isachenko and Bochkarev: what ``--all-priors`` compares
#: unless ``--priors`` says otherwise.
GRID_PRIORS = ("cauchy", "flat", "laplace", "normal")
#: Points per axis of the uncertainty map's grid.
GRID_POINTS = 100
#: The toy experiments' hyperprior parameters, where they differ from the registry's:
#: InverseGamma(3, 4), whose mode is 1 (the fixed pairs' scale) and mean 2. Where the data say
#: little, the mean-field fit leaves each layer's scale near the hyperprior's mode, and the
#: registry's mode of 0.5 leaves the network nearly linear on noisy data. :func:`model` and the
#: sweep use them. The measurements: docs/reproductions.md (toy-hyperprior).
HYPERPRIOR_PARAMS = {"inversegamma": {"alpha": 3.0, "beta": 4.0}}


def hyperprior_params(hyperprior: str) -> dict:
    """The toy experiments' parameters of a hyperprior.

    Parameters
    ----------
    hyperprior : str
        A name of :data:`bnn_zoo.models.HYPERPRIORS`.

    Returns
    -------
    dict
        Keyword arguments for the hyperprior (``{}``: the registry's defaults).
    """
    return HYPERPRIOR_PARAMS.get(hyperprior, {})


#: What a user gets with no flags: 10,000 steps with a cosine decay of the rate, and 6 fits from
#: other initial means, of which the best by ELBO at step 2,000 runs on alone. One fit alone can
#: land in an optimum whose input layer's scale has collapsed; the 6 fits run together for the first
#: fifth of the steps, two fits' cost in all. The measurements: docs/reproductions.md (toy-defaults).
DEFAULTS = dict(steps=10_000, lr=0.05, lr_schedule="cosine", lr_final=0.01, init_std=0.01,
                draws=500, restarts=6, pick="best", pick_at=0.2, average=0.0)


@dataclass(frozen=True)
class ToyConfig(config.RunConfig):
    """One toy run's settings: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, and these.

    The run folder is ``<out>/<dataset>/<prior>-<hyperprior>-s<seed>``.

    Parameters
    ----------
    prior : str, default "normal"
        The weight prior, a name of :data:`bnn_zoo.models.WEIGHT_PRIORS`.
    hyperprior : str, default "inversegamma"
        The hyperprior on each layer's prior scale, a name of :data:`bnn_zoo.models.HYPERPRIORS`
        (with :data:`HYPERPRIOR_PARAMS`).
    noise : float, default 0.2
        The data's noise standard deviation.
    n_train : int, default 700
        Training points.
    n_test : int, default 300
        Test points.
    hidden : tuple of int, default (5, 5)
        Hidden layer sizes.
    uncertainty_map : bool, default True
        Draw the run's uncertainty map.
    sensitivity_plot : bool, default True
        Draw ArviZ's power-scaled posteriors of the layer scales (hierarchical pairs only).
    grid : bool, default True
        Predict on the map's grid (the uncertainty map and ``--all-priors``' figures need it).
    """

    prior: str = "normal"
    hyperprior: str = "inversegamma"
    noise: float = 0.2
    n_train: int = 700
    n_test: int = 300
    hidden: tuple[int, ...] = (5, 5)
    uncertainty_map: bool = True
    sensitivity_plot: bool = True
    grid: bool = True  # predict on the map's grid (the uncertainty map, --all-priors' figures)

    @property
    def name(self) -> str:
        return f"{self.prior}-{self.hyperprior}-s{self.seed}"

    def record(self) -> dict:
        return {**super().record(), "hyperprior_params": hyperprior_params(self.hyperprior)}

    @property
    def group_key(self):  # the pair's runs on every data set share one process
        return (self.prior, self.hyperprior)


def arguments(p: argparse.ArgumentParser, dataset: str | None) -> None:
    """Add the toy experiment's own flags to a parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser (the shared fitting flags are added by the runner).
    dataset : str or None
        The data set of ``bnn-zoo moons`` or ``bnn-zoo circles``; None for ``bnn-zoo toy``, which
        takes ``--datasets``.
    """
    if dataset is None:
        p.add_argument("--datasets", type=names(NOISE, "data set"), default=list(NOISE),
                       help="comma-separated data sets, each fitted as its own command would")
    p.add_argument("--prior", choices=sorted(WEIGHT_PRIORS), default=None,
                   help=f"prior on every weight and bias (default: {ToyConfig.prior}; with --all-priors, "
                   "the pair whose sensitivity plot is drawn)")
    p.add_argument("--hyperprior", choices=sorted(HYPERPRIORS), default=None,
                   help=f"hyperprior on each layer's prior scale (default: {ToyConfig.hyperprior}; ignored by "
                   "'flat'; inversegamma: InverseGamma({alpha:g}, {beta:g}))".format(**HYPERPRIOR_PARAMS["inversegamma"]))
    p.add_argument("--all-priors", action="store_true",
                   help="fit every prior x hyperprior pair and compare them by PSIS-LOO")
    p.add_argument("--priors", type=names(WEIGHT_PRIORS, "prior"), default=None,
                   help="with --all-priors: comma-separated priors to compare (default: "
                   + ",".join(GRID_PRIORS) + ")")
    p.add_argument("--hyperpriors", type=names(HYPERPRIORS, "hyperprior"), default=None,
                   help="with --all-priors: comma-separated hyperpriors to compare (default: all)")
    p.add_argument("--noise", type=nonneg_float, default=NOISE[dataset] if dataset else None,
                   help="data noise std" + ("" if dataset else " (default: each data set's, "
                   + ", ".join(f"{k} {v}" for k, v in NOISE.items()) + ")"))
    p.add_argument("--n-train", type=n_train, default=700, help="training points (per data set)")
    p.add_argument("--n-test", type=positive_int, default=300, help="test points (per data set)")
    p.add_argument("--hidden", type=int_list, default=(5, 5), help="hidden layer sizes, e.g. 5,5")
    p.add_argument("--float32", action="store_true", help="fit in single precision")


def configs(args, dataset: str | None) -> list[ToyConfig]:
    """The runs a command line asks for: one per pair and data set.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.
    dataset : str or None
        The command's data set; None: each of ``args.datasets``.

    Returns
    -------
    list of ToyConfig
        With ``--all-priors``, every pair of ``--priors`` and ``--hyperpriors`` on every data set
        (without uncertainty maps or progress bars; the psense figure for the pair of ``--prior`` and
        ``--hyperprior`` only); otherwise ``--prior`` and ``--hyperprior``.

    Raises
    ------
    bnn_zoo.experiments.harness.flags.UsageError
        If ``--priors`` or ``--hyperpriors`` is given without ``--all-priors``, or, with it, a
        ``--prior`` or ``--hyperprior`` that is not among the pairs.
    """
    datasets = [dataset] if dataset else args.datasets
    given = [flag for flag, value in (("--priors", args.priors), ("--hyperpriors", args.hyperpriors))
             if value is not None]
    if given and not args.all_priors:
        raise runner.UsageError(f"{' and '.join(given)} select the pairs of --all-priors: add --all-priors, "
                                "or fit one pair with --prior and --hyperprior")
    args.priors = list(GRID_PRIORS) if args.priors is None else args.priors
    args.hyperpriors = sorted(HYPERPRIORS) if args.hyperpriors is None else args.hyperpriors
    for name, among in (("prior", args.priors), ("hyperprior", args.hyperpriors)):
        value, default = getattr(args, name), getattr(ToyConfig, name)
        if args.all_priors and value is not None and value not in among:
            raise runner.UsageError(f"--{name} {value} picks the pair whose sensitivity plot --all-priors draws, "
                                    f"and --{name}s has only {','.join(among)}: add it there or drop --{name}")
        if value is None:  # with --all-priors, the default if it is compared, else the first compared
            value = default if not args.all_priors or default in among else among[0]
        setattr(args, name, value)
    pairs = (list(itertools.product(args.priors, args.hyperpriors)) if args.all_priors
             else [(args.prior, args.hyperprior)])
    shared = fit_settings(args) | ({"progress": False} if args.all_priors else {})
    return [ToyConfig(**shared, dataset=d, prior=p, hyperprior=h,
                      noise=NOISE[d] if args.noise is None else args.noise, n_train=args.n_train,
                      n_test=args.n_test, hidden=args.hidden, uncertainty_map=not args.all_priors,
                      sensitivity_plot=(p, h) == (args.prior, args.hyperprior))
            for p, h in pairs for d in datasets]


def data(cfg: ToyConfig) -> toy.Split:
    """A run's training and test data.

    Parameters
    ----------
    cfg : ToyConfig
        The run (its data set, sizes, noise and seed).

    Returns
    -------
    bnn_zoo.data.toy.Split
        The training and test points.
    """
    return toy.load(cfg.dataset, n_train=cfg.n_train, n_test=cfg.n_test, noise=cfg.noise, seed=cfg.seed)


def model(cfg: ToyConfig, split: toy.Split, choice: tuple | None = None):
    """A run's PyMC model: the hierarchical tanh MLP classifier on its training data.

    Parameters
    ----------
    cfg : ToyConfig
        The run (its prior, hyperprior and hidden sizes).
    split : bnn_zoo.data.toy.Split
        The run's data.
    choice : tuple of (list of str, list of str), optional
        Priors and hyperpriors to build the model with in place of the
        run's pair: a choice among them, selected by data
        (:class:`bnn_zoo.models.layers.LayerPriors`), as a prior sweep
        builds one model for many pairs.

    Returns
    -------
    pymc.Model
        :func:`bnn_zoo.models.mlp_classifier`'s model, with :func:`hyperprior_params`.
    """
    priors, hyperpriors = choice or ([cfg.prior], [cfg.hyperprior])
    params = {h: hyperprior_params(h) for h in hyperpriors}
    return mlp_classifier(split.X_train, split.y_train, hidden=cfg.hidden,
                          prior=priors if len(priors) > 1 else priors[0],
                          hyperprior=hyperpriors if len(hyperpriors) > 1 else hyperpriors[0],
                          hyperprior_params=params if len(hyperpriors) > 1 else params[hyperpriors[0]])


def evaluate(cfg: ToyConfig, split: toy.Split, fits, idata) -> config.Evaluation:
    """A fitted run's metrics, its ArviZ summary and, if asked, its uncertainty map.

    Parameters
    ----------
    cfg : ToyConfig
        The run.
    split : bnn_zoo.data.toy.Split
        The run's data.
    fits : list of bnn_zoo.FitResult
        The run's fits; the first one predicts.
    idata : xarray.DataTree
        The posterior draws; the test points' predictions are added to it.

    Returns
    -------
    bnn_zoo.experiments.harness.config.Evaluation
        The metrics (:func:`bnn_zoo.evaluation.metrics.all_metrics`, the prediction sets'
        coverage and size, raw and conformal (:func:`bnn_zoo.evaluation.calibration.coverage_metrics`), the Bayes-optimal
        classifier's, PSIS-LOO's ELPD and Pareto k, and the power-scaling sensitivities:
        ``psense_prior_median``, ``psense_prior_share`` (of quantities above 0.05) and
        ``psense_likelihood_median``), ``summary.csv`` (``az.summary``) and ``psense.csv``
        (:func:`bnn_zoo.evaluation.sensitivity.by_variable`), and for :func:`summarize` the grid's
        mean prediction, the LOO result, the posterior and the sensitivity table. With
        ``uncertainty_map``, the figures ``uncertainty_<pair>.png``, ``loo_pit_<pair>.png`` and
        ``reliability_<pair>.png`` (PAVA, test points); with ``sensitivity_plot`` and layer
        scales, ``psense_<pair>.png``.
    """
    # The evaluation's modules (ArviZ, matplotlib, scipy.stats: seconds of import) load here, so that
    # a sweep's worker, which fits with this module's model and data, starts without them.
    import arviz as az

    from bnn_zoo.evaluation import calibration_plots, plots, sensitivity

    xx, yy, grid = split.grid(GRID_POINTS) if cfg.grid else (None, None, np.empty((0, 2)))
    # One call for the test points and the map: fewer padded rows than one call each.
    pred = predict(fits[0], {"X": np.concatenate([split.X_test, grid])}, idata=idata, var_names=["p"])
    proba = pred["predictions"]["p"].values[0]
    proba_test, proba_grid = proba[:, : len(split.X_test)], proba[:, len(split.X_test):]
    idata["predictions"] = DataTree(pred["predictions"].to_dataset().isel(obs=slice(len(split.X_test))))
    with warnings.catch_warnings():  # k-hat is reported in the metrics (pareto_k_*)
        warnings.simplefilter("ignore", UserWarning)
        elpd = loo(idata)
    metrics = {
        **all_metrics(proba_test, split.y_test),
        **coverage_metrics(split.y_test, proba=proba_test),
        **bayes_reference(cfg, split),
        "elpd_loo": float(elpd.elpd), "elpd_loo_se": float(elpd.se), "p_loo": float(elpd.p),
        "pareto_k_max": float(np.max(elpd.pareto_k)),
        "pareto_k_bad_share": float(np.mean(np.asarray(elpd.pareto_k) > 0.7)),
    }
    names = [v.name for v in fits[0].model.free_RVs]
    with warnings.catch_warnings():  # q_pareto_k > 0.7, this network's expected case: the runner's note says it
        warnings.simplefilter("ignore", ApproximationWarning)
        psense = sensitivity.by_variable(sensitivity.prior_sensitivity(idata, fits[0].model, var_names=names))
    metrics |= {"psense_prior_median": float(psense["prior_median"].median()),
                "psense_prior_share": float(np.average(psense["prior_share"], weights=psense["size"])),
                "psense_likelihood_median": float(psense["likelihood_median"].median())}
    fig_dir, pair = cfg.figures / cfg.dataset, f"{cfg.prior}-{cfg.hyperprior}"
    if cfg.uncertainty_map:
        plots.save(plots.uncertainty_map(
            xx, yy, proba_grid, split.X_train, split.y_train,
            title=f"{cfg.dataset}: {cfg.prior} prior, {cfg.hyperprior} hyperprior "
                  f"(test accuracy {metrics['accuracy']:.3f})"), fig_dir / f"uncertainty_{pair}.png")
        plots.save(calibration_plots.pit(calibration_plots.with_predictive(fits[0], idata.copy(), cfg.seed),
                                         title=f"{cfg.dataset} ({pair}): LOO-PIT of the training labels"),
                   fig_dir / f"loo_pit_{pair}.png")
        plots.save(calibration_plots.reliability(
            calibration_plots.heldout(split.y_test, proba_test[..., 1], name="y_test"),
            title=f"{cfg.dataset} ({pair}): PAVA reliability on the test points"), fig_dir / f"reliability_{pair}.png")
    scales = [n for n in names if n.startswith("scale_")]
    if cfg.sensitivity_plot and scales:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ApproximationWarning)
            plots.save(sensitivity.plot(idata, scales, title=f"{cfg.dataset} ({pair}): power-scaled posteriors"),
                       fig_dir / f"psense_{pair}.png")
    summary = az.summary(idata, kind="stats", round_to="none")
    return config.Evaluation(
        metrics=metrics, files={"summary.csv": lambda path: summary.to_csv(path),
                                "psense.csv": lambda path: psense.to_csv(path, float_format="%.4g")},
        summary={"grid_mean": proba_grid[..., 1].mean(0) if cfg.grid else None, "loo": elpd,
                 "posterior": idata["posterior"].to_dataset(), "psense": psense})


def bayes_reference(cfg: ToyConfig, split: toy.Split) -> dict:
    """The Bayes-optimal classifier's accuracy and NLL on the run's test points.

    Parameters
    ----------
    cfg : ToyConfig
        The run (its data set and noise).
    split : bnn_zoo.data.toy.Split
        The run's data.

    Returns
    -------
    dict
        ``bayes_accuracy`` and ``bayes_nll``; both None when the data have no noise.
    """
    if cfg.noise <= 0:
        return {"bayes_accuracy": None, "bayes_nll": None}
    return toy.bayes_metrics(cfg.dataset, split.X_test, split.y_test, cfg.noise)


def report(r: config.Record) -> str:
    """A finished run as one line: its metrics against the Bayes-optimal classifier's, and its folder.

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
    bayes = "" if m["bayes_accuracy"] is None else f" (Bayes {m['bayes_accuracy']:.3f})"
    return (f"{m['dataset']:>7s} {m['prior']}-{m['hyperprior']}: accuracy {m['accuracy']:.3f}{bayes}, "
            f"nll {m['nll']:.3f}, ece {m['ece']:.3f}, elpd_loo {m['elpd_loo']:.1f} "
            f"(LOO's k > 0.7 at {m['pareto_k_bad_share']:.0%} of points), "
            f"fit {m['fit_seconds']:.1f} s{'' if m['converged'] else ' (optimiser not settled)'} -> {r.dir}")


def summarize(args, records: list) -> str:
    """With ``--all-priors``, each data set's comparison table and figures.

    :func:`~bnn_zoo.experiments.toy.comparison.write_comparison` for each data
    set: ``<out>/<dataset>/comparison.csv`` and ``comparison_loo.csv``, and
    the figures in ``<figures>/<dataset>/``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.
    records : list of bnn_zoo.experiments.harness.config.Record
        The finished runs.

    Returns
    -------
    str
        Each data set's table as text ("" without ``--all-priors``).
    """
    if not args.all_priors:
        return ""
    from bnn_zoo.experiments.toy.comparison import write_comparison  # ArviZ's plots: as evaluate's modules

    out = []
    for dataset in dict.fromkeys(r.cfg.dataset for r in records):
        runs = [r for r in records if r.cfg.dataset == dataset]
        split = data(runs[0].cfg)
        xx, yy, _ = split.grid(GRID_POINTS)
        out.append(write_comparison(args, runs, split, (xx, yy)))
    return "\n".join(out)


def experiment(dataset: str | None = None) -> config.Experiment:
    """The toy experiment for the runner: ``bnn-zoo <dataset>``.

    Parameters
    ----------
    dataset : str, optional
        ``"moons"`` or ``"circles"``; None (default): ``bnn-zoo toy``, several data sets.

    Returns
    -------
    bnn_zoo.experiments.harness.config.Experiment
        The experiment, with :data:`DEFAULTS` and PSIS-LOO on.
    """
    return config.Experiment(
        name=dataset or "toy",
        description=f"Fit a hierarchical Bayesian MLP (2-5-5-2, tanh) to {dataset or 'toy data'} by "
                    "ADVI; write metrics, posterior draws and an uncertainty map.",
        arguments=partial(arguments, dataset=dataset), configs=partial(configs, dataset=dataset),
        data=data, model=model, evaluate=evaluate, report=report, summarize=summarize,
        defaults=DEFAULTS, loo=True, jobs=True, xla_flags=small_program_xla_flags())


def main(argv=None, prog: str | None = None, dataset: str | None = None) -> int:
    """Run ``bnn-zoo moons``, ``circles`` or ``toy``.

    Parameters
    ----------
    argv : list of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, optional
        The command's name in help and errors.
    dataset : str, optional
        ``"moons"`` or ``"circles"``; None (default): ``bnn-zoo toy``.

    Returns
    -------
    int
        The exit code: 0 on success.
    """
    return runner.main(experiment(dataset), argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m bnn_zoo.experiments.toy.priors"))
