"""The UCI regression benchmark: nine data sets, their published splits, five methods, one table.

    bnn-zoo uci --datasets yacht --splits 2 --out results

fits each data set's published train/test splits (:mod:`bnn_zoo.data.uci`)
with one hidden layer of ReLU units (50, and 100 for protein) by every method
of ``--method``, and writes one record per (data set, split, method) and the
table: per data set and method, the mean and standard error over splits of
the test RMSE and the test log-likelihood per point, in the target's own
units, next to the published VI, PBP and MC-dropout columns
(:data:`bnn_zoo.data.uci.PUBLISHED`).

The protocol is the papers': inputs and target standardised on each split's
training part; the network :func:`~bnn_zoo.models.mlp_regressor` with N(0, 1)
weights and a Gaussian likelihood whose noise precision is learned under a
Gamma prior (``--noise-prior``). The methods (:data:`METHODS`):

``advi``
    mean-field ADVI (:func:`bnn_zoo.fit`);
``local_reparam``
    the same with the local-reparameterisation gradient estimator;
``fullrank_advi``
    full-rank ADVI from the mean-field fit
    (:func:`~bnn_zoo.inference.advi.fullrank_from`), where the network has
    at most :data:`FULLRANK_MAX_PARAMS` parameters;
``dropout``
    MC dropout (:mod:`bnn_zoo.inference.dropout`) at rate ``--dropout-rate``;
``ensemble``
    a deep ensemble of ``--members`` MAP fits of the same PyMC model
    (:func:`bnn_zoo.inference.alternatives.ensemble`).

The job is resumable like ``bnn-zoo sweep`` (:class:`~bnn_zoo.experiments.sweep.Store`):
``<out>/uci/records/<key>.parquet`` holds one record per fit, named by the
hash of its settings, so a rerun of a killed command fits only what is
missing. Tasks run in this process (``--workers 1``), on a Dask
``LocalCluster`` or on a running scheduler (``--scheduler``; the client
writes every record). At the end it writes ``fits.parquet`` (every record in the store),
``fits.csv`` (the job's records), ``table.csv`` and ``table.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnn_zoo.data import uci
from bnn_zoo.experiments import runner, sweep
from bnn_zoo.experiments.cli import HelpFormatter, Parser, UsageError, names, positive_float, positive_int

__all__ = ["BATCH_SIZE", "DEFAULTS", "FULLRANK_MAX_PARAMS", "METHODS", "UCIConfig", "build_parser", "configs", "fit_key",
           "fit_settings", "fit_task", "main", "markdown", "model", "run_job", "score_fit", "scores", "split_list",
           "table", "tasks"]

#: The methods, in the table's order: mean-field ADVI, its local-reparameterisation estimator,
#: full-rank ADVI, MC dropout and a deep ensemble.
METHODS = ("advi", "local_reparam", "fullrank_advi", "dropout", "ensemble")
#: The largest network (free parameters, the noise precision included) that ``fullrank_advi`` fits:
#: every data set's but protein's (100 hidden units: 1,102). Larger ones are left out of the job.
FULLRANK_MAX_PARAMS = 1000
#: Minibatch rows on the data sets with more training rows: wine (1,439) and the four large ones
#: (kin8nm, naval, power, protein: 7,373 to 41,157); the other four are fitted full-batch. On
#: kin8nm's and naval's split 0, minibatches of 1,000 give the full batch's RMSE and
#: log-likelihood to 0.03 nats in a half to a third of the time.
BATCH_SIZE = 1000
#: The shared fit flags' defaults: 10,000 Adam steps of a cosine decay from 0.01 to 1% of it, from
#: ADVI's initial means with sd 0.01, and 500 posterior draws for the predictive. Every
#: method takes the same steps and rate (each member of an ensemble too); the full-rank phase runs
#: at 1e-6: at 1e-4 its ELBO falls over a thousand nats below its mean-field start within 200 steps
#: on yacht and boston, at 1e-6 it ends above it on both (``benchmarks.studies.uci_fullrank``).
#: Minibatches of ``--batch-size`` rows (default :data:`BATCH_SIZE`) on the data sets that have more
#: training rows; the others are fitted full-batch.
DEFAULTS = dict(steps=10_000, lr=0.01, lr_schedule="cosine", lr_final=0.01, init_std=0.01, draws=500,
                average=0.0, fullrank_lr=1e-6)


@dataclass(frozen=True)
class UCIConfig(runner.RunConfig):
    """One fit of the benchmark: :class:`~bnn_zoo.experiments.runner.RunConfig`'s settings, and these.

    Parameters
    ----------
    uci : str, default "yacht"
        The data set, a key of :data:`bnn_zoo.data.uci.DATASETS`.
    split : int, default 0
        The published split.
    approach : str, default "advi"
        The method, one of :data:`METHODS`.
    noise_prior : tuple of float, default (1.0, 0.1)
        Shape and rate of the Gamma prior on the noise precision (of the
        standardised target).
    dropout_rate : float, default 0.05
        MC dropout's rate.
    members : int, default 5
        The deep ensemble's MAP fits.
    data_dir : str, default ""
        The data's folder (``""``: :func:`bnn_zoo.data.uci.resolve_dir`'s).
    """

    uci: str = "yacht"
    split: int = 0
    approach: str = "advi"
    noise_prior: tuple[float, float] = (1.0, 0.1)
    dropout_rate: float = 0.05
    members: int = 5
    data_dir: str = ""

    @property
    def name(self) -> str:
        """``<data set>-<method>-split<k>``."""
        return f"{self.uci}-{self.approach}-split{self.split}"

    def record(self) -> dict:
        """The settings as recorded: :class:`~bnn_zoo.experiments.runner.RunConfig`'s, without the
        data's folder and the fields the method does not use."""
        out = {k: v for k, v in super().record().items() if k != "data_dir"}
        if self.approach != "dropout":
            out.pop("dropout_rate")
        if self.approach != "ensemble":
            out.pop("members")
        if self.approach != "fullrank_advi":
            out.pop("fullrank_lr")
        return out


def fit_key(cfg: UCIConfig) -> str:
    """The hash naming a fit's record: of every setting that changes what is fitted or measured.

    Parameters
    ----------
    cfg : UCIConfig
        The fit.

    Returns
    -------
    str
        16 hex digits.
    """
    return hashlib.sha256(json.dumps(cfg.record(), sort_keys=True).encode()).hexdigest()[:16]


# --- one task: one data set's splits, one method --------------------------------------------------


def model(cfg: UCIConfig, split: uci.Split):
    """The benchmark's network on a split's training part.

    Parameters
    ----------
    cfg : UCIConfig
        The fit (its noise prior).
    split : bnn_zoo.data.uci.Split
        The standardised split.

    Returns
    -------
    pymc.Model
        :func:`~bnn_zoo.models.mlp_regressor` with one hidden layer of ``split.hidden`` ReLU
        units, N(0, 1) weights, and the noise precision ``tau ~ Gamma(*cfg.noise_prior)``.
    """
    from bnn_zoo.models.mlp import mlp_regressor

    alpha, beta = cfg.noise_prior
    return mlp_regressor(split.X_train, split.y_train, hidden=(split.hidden,), activation="relu", noise="gamma",
                         noise_params={"alpha": alpha, "beta": beta})


def scores(mu: np.ndarray, sigma: np.ndarray, split: uci.Split) -> dict:
    """Test RMSE and log-likelihood in the target's units, of a predictive mixture of Gaussians.

    Parameters
    ----------
    mu : numpy.ndarray, shape (draws, n_test)
        Each draw's predicted mean of the standardised target.
    sigma : numpy.ndarray, shape (draws,)
        Each draw's noise sd, of the standardised target.
    split : bnn_zoo.data.uci.Split
        The split (its test targets, mean and sd).

    Returns
    -------
    dict
        ``rmse`` (of the predictive mean), ``ll`` (the mean over test points of
        ``log (1/S) sum_s N(y | mu_s, sigma_s)``) and ``sigma`` (the mean noise sd), in the
        target's units.
    """
    from scipy.special import logsumexp

    y = split.y_test_original
    m = split.y_mean + split.y_sd * np.asarray(mu, float)
    s = split.y_sd * np.asarray(sigma, float)[:, None]
    log_density = -0.5 * ((y - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
    ll = logsumexp(log_density, axis=0) - np.log(len(m))
    return {"rmse": float(np.sqrt(np.mean((m.mean(0) - y) ** 2))), "ll": float(ll.mean()),
            "sigma": float(s.mean())}


def _advi(cfg: UCIConfig, split: uci.Split) -> dict:
    """A mean-field fit (and a full-rank one from it) of one split, and its scores."""
    import bnn_zoo
    from bnn_zoo.inference.advi import fullrank_from

    m = model(cfg, split)
    settings = fit_settings(cfg)
    fit = bnn_zoo.fit(m, optimizer=runner.make_optimizer(cfg, cfg.lr, cfg.steps),
                      estimator="local_reparam" if cfg.approach == "local_reparam" else "weights",
                      path_derivative=cfg.path_derivative, **settings)
    if cfg.approach == "fullrank_advi":
        fit = fullrank_from(m, fit, optimizer=runner.make_optimizer(cfg, cfg.fullrank_lr, cfg.steps),
                            path_derivative=cfg.path_derivative or None, **settings)
    return {**score_fit(fit, cfg, split), "fit_seconds": fit.seconds, "n_params": fit.layout.dim,
            "converged": bool(fit.convergence.converged), "elbo_final": float(fit.elbo_final)}


def fit_settings(cfg: UCIConfig) -> dict:
    """The keyword arguments of :func:`bnn_zoo.fit` (and ``fullrank_from``) that an ADVI fit of ``cfg`` takes.

    Parameters
    ----------
    cfg : UCIConfig
        One fit's settings.

    Returns
    -------
    dict
        ``steps``, ``init_std``, ``beta``, ``mc_samples``, ``average``, ``batch_size``, ``seed``
        (``cfg.fit_seed``) and ``progressbar=False``.
    """
    return dict(steps=cfg.steps, init_std=cfg.init_std, beta=cfg.beta, mc_samples=cfg.mc_samples,
                average=cfg.average, batch_size=cfg.batch_size, seed=cfg.fit_seed, progressbar=False)


def score_fit(fit, cfg: UCIConfig, split: uci.Split) -> dict:
    """:func:`scores` of an ADVI fit's predictive, from ``cfg.draws`` posterior draws.

    Parameters
    ----------
    fit : bnn_zoo.FitResult
        A fit of :func:`model` for ``split``.
    cfg : UCIConfig
        Its settings (``draws`` and ``seed``).
    split : bnn_zoo.data.uci.Split
        The split, whose test part is scored.

    Returns
    -------
    dict
        ``rmse``, ``ll`` and ``sigma``, as :func:`scores` gives them.
    """
    import bnn_zoo

    idata = bnn_zoo.sample(fit, cfg.draws, seed=cfg.seed, log_likelihood=False, var_names=())
    pred = bnn_zoo.predict(fit, {"X": split.X_test}, idata=idata, var_names=["mu"], seed=cfg.seed)
    mu = pred["predictions"]["mu"].values.reshape(-1, len(split.X_test))
    return scores(mu, idata["posterior"]["tau"].values.ravel() ** -0.5, split)


def _dropout(cfg: UCIConfig, split: uci.Split) -> dict:
    from bnn_zoo.inference import dropout

    net = dropout.fit(split.X_train, split.y_train, kind="regressor", hidden=(split.hidden,), activation="relu",
                      rate=cfg.dropout_rate, steps=cfg.steps, lr=cfg.lr, batch_size=cfg.batch_size, seed=cfg.fit_seed)
    pred = dropout.predict(net, split.X_test, draws=cfg.draws, seed=cfg.seed)["predictions"]
    return {**scores(pred["mu"].values[0], pred["sigma"].values[0], split), "fit_seconds": net.seconds}


def _ensemble(cfg: UCIConfig, split: uci.Split) -> dict:
    import bnn_zoo
    from bnn_zoo.inference.alternatives import ensemble

    m = model(cfg, split)
    tree = ensemble(m, cfg.members, steps=cfg.steps, lr=cfg.lr, batch_size=cfg.batch_size, seed=cfg.fit_seed)
    pred = bnn_zoo.predict(m, {"X": split.X_test}, idata=tree, var_names=["mu"], seed=cfg.seed)
    mu = pred["predictions"]["mu"].values.reshape(-1, len(split.X_test))
    tau = tree["posterior"]["tau"].values.ravel()
    return {**scores(mu, tau**-0.5, split), "fit_seconds": float(tree.attrs["seconds"])}


def fit_task(cfgs: list[UCIConfig]) -> list[dict]:
    """Fit ``cfgs`` (one data set and method, other splits) and score each on its test part.

    The splits are fitted one after another in this process, so that they share the
    model's compiled programs.

    Parameters
    ----------
    cfgs : list of UCIConfig
        Fits that differ only in their split.

    Returns
    -------
    list of dict
        One record per fit: its settings, ``key``, ``rmse``, ``ll``, ``sigma`` (in the
        target's units), ``fit_seconds``, ``n_train``, ``n_test`` and, for ADVI,
        ``n_params``, ``converged`` and ``elbo_final``.
    """
    splits = [uci.load(c.uci, c.split, c.data_dir or None) for c in cfgs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is in the records
        one = {"dropout": _dropout, "ensemble": _ensemble}.get(cfgs[0].approach, _advi)
        results = [one(c, s) for c, s in zip(cfgs, splits)]
    return [{"key": fit_key(c), "experiment": "uci", **c.record(), "n_train": len(s.y_train),
             "n_test": len(s.y_test), **r} for c, s, r in zip(cfgs, splits, results)]


def tasks(cfgs: list[UCIConfig], per_task: int) -> list[list[UCIConfig]]:
    """Fits of one data set and method, at most ``per_task`` splits each, in the order a cut-short job wants.

    Parameters
    ----------
    cfgs : list of UCIConfig
        The fits to make.
    per_task : int
        The most splits in one task.

    Returns
    -------
    list of list of UCIConfig
        The first ``per_task`` splits of every data set and method, then the next ones, and so
        on (a job cut short has some splits of every cell of the table); within those, in
        :data:`METHODS` order, and by training rows, largest first, so that the long tasks
        start early on a cluster.
    """
    groups: dict = {}
    for c in cfgs:
        groups.setdefault((c.uci, c.approach), []).append(c)
    out = [(i, g[i:i + per_task]) for g in groups.values() for i in range(0, len(g), per_task)]
    rows = {"protein": 41_000, "naval": 10_700, "power": 8_600, "kin8nm": 7_400}
    out.sort(key=lambda it: (it[0], METHODS.index(it[1][0].approach), -rows.get(it[1][0].uci, 1_000) * len(it[1])))
    return [t for _, t in out]


# --- the table ----------------------------------------------------------------------------------


def table(fits) -> "pandas.DataFrame":
    """Per data set and method: the mean and standard error over splits, beside the published columns.

    Parameters
    ----------
    fits : pandas.DataFrame
        Records (:func:`fit_task`): columns ``uci``, ``approach``, ``split``, ``rmse``, ``ll``,
        ``fit_seconds``.

    Returns
    -------
    pandas.DataFrame
        One row per data set and method, in :data:`bnn_zoo.data.uci.DATASETS` and
        :data:`METHODS` order: ``dataset``, ``method``, ``splits``, ``rmse``, ``rmse_se``,
        ``ll``, ``ll_se``, ``fit_seconds`` (the mean), the published ``<vi|pbp|dropout>_rmse``
        and ``_ll``, and ``beats_vi`` (RMSE below and log-likelihood above VI's) and
        ``matches_pbp`` (each of RMSE and log-likelihood better than PBP's or within one
        standard error of it).
    """
    import pandas as pd

    rows = []
    for name in uci.DATASETS:
        for method in METHODS:
            f = fits[(fits["uci"] == name) & (fits["approach"] == method)]
            if f.empty:
                continue
            n = len(f)
            row = {"dataset": name, "method": method, "splits": n,
                   "rmse": f["rmse"].mean(), "rmse_se": f["rmse"].std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
                   "ll": f["ll"].mean(), "ll_se": f["ll"].std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
                   "fit_seconds": f["fit_seconds"].mean()}
            for col, values in uci.PUBLISHED.items():
                row[f"{col}_rmse"], row[f"{col}_ll"] = values[name]
            vi_rmse, vi_ll = uci.PUBLISHED["vi"][name]
            pbp_rmse, pbp_ll = uci.PUBLISHED["pbp"][name]
            rmse_se, ll_se = np.nan_to_num(row["rmse_se"]), np.nan_to_num(row["ll_se"])
            row["beats_vi"] = bool(row["rmse"] < vi_rmse and row["ll"] > vi_ll)
            row["matches_pbp"] = bool(row["rmse"] <= pbp_rmse + rmse_se and row["ll"] >= pbp_ll - ll_se)
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(t) -> str:
    """The table as Markdown: mean ± standard error, the published columns beside them.

    Parameters
    ----------
    t : pandas.DataFrame
        :func:`table`'s.

    Returns
    -------
    str
        A line per method counting the data sets where it beats the published VI column and
        matches or beats PBP's (:func:`table`'s flags), then two tables, test RMSE and test
        log-likelihood, one row per data set and method.
    """
    def cell(mean, se, digits):
        return f"{mean:.{digits}f}" + ("" if np.isnan(se) else f" ± {se:.{digits}f}")

    out = []
    for method in dict.fromkeys(t["method"]):
        rows = t[t["method"] == method]
        lost = ", ".join(rows.loc[~rows["matches_pbp"], "dataset"])
        out.append(f"- `{method}`: beats VI on {int(rows['beats_vi'].sum())} of {len(rows)} data sets; "
                   f"matches or beats PBP on {int(rows['matches_pbp'].sum())} of {len(rows)}"
                   + (f" (not on: {lost})." if lost else "."))
    out.append("")
    for metric, label, better in (("rmse", "test RMSE (lower is better)", "lower"),
                                  ("ll", "test log-likelihood (higher is better)", "higher")):
        out += [f"**{label}**", "",
                "| data set | method | splits | this run | VI | PBP | dropout |", "|---|---|---:|---:|---:|---:|---:|"]
        for _, r in t.iterrows():
            digits = 4 if r["dataset"] == "naval" and metric == "rmse" else (3 if metric == "rmse" else 2)
            out.append(f"| {r['dataset']} | {r['method']} | {r['splits']} | {cell(r[metric], r[f'{metric}_se'], digits)} "
                       f"| {r[f'vi_{metric}']:.2f} | {r[f'pbp_{metric}']:.2f} | {r[f'dropout_{metric}']:.2f} |")
        out.append("")
    return "\n".join(out)


# --- the job ------------------------------------------------------------------------------------


def split_list(text: str) -> tuple[int, ...] | int:
    """``--splits``: ``N`` (the first N splits) or ``I-J`` (splits I to J, inclusive).

    Parameters
    ----------
    text : str
        The flag's value.

    Returns
    -------
    int or tuple of int
        N, or the indices I..J.

    Raises
    ------
    argparse.ArgumentTypeError
        For anything else.
    """
    try:
        if "-" in text:
            first, last = (int(v) for v in text.split("-"))
            if 0 <= first <= last:
                return tuple(range(first, last + 1))
        elif int(text) >= 1:
            return int(text)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a count N (the first N splits) or a range I-J of split indices, "
                                     f"got {text!r}")


def configs(args) -> list[UCIConfig]:
    """The fits a command line asks for, after checking the data and the splits.

    Every file of each data set of ``--datasets`` is checked against its sha256
    first (:func:`bnn_zoo.data.uci.verify`, downloading missing files where
    ``--data-dir`` and ``UCI_DIR`` are unset).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of UCIConfig
        One per data set, split and method (``fullrank_advi`` only for networks of at most
        :data:`FULLRANK_MAX_PARAMS` parameters).

    Raises
    ------
    UsageError
        For a missing or damaged file, or a split that a data set does not have.
    """
    shared = {k: v for k, v in runner.fit_settings(args).items()
              if k not in ("method", "batch_size", "restarts", "pick", "pick_at", "estimator", "figures")}
    data_dir = "" if args.data_dir is None else str(args.data_dir)
    out = []
    for name in args.datasets or uci.DATASETS:
        try:
            if not data_dir and not os.environ.get("UCI_DIR"):
                uci.fetch(name, mirror=uci.MIRROR)
            uci.verify(name, data_dir or None)
            count = uci.n_splits(name, data_dir or None)
        except uci.UCIError as err:
            raise UsageError(str(err)) from None
        chosen = range(count) if args.splits is None else (
            range(args.splits) if isinstance(args.splits, int) else args.splits)
        if max(chosen) >= count:
            raise UsageError(f"{name} has {count} splits (0..{count - 1}); --splits "
                             f"{args.splits if isinstance(args.splits, int) else f'{chosen[0]}-{chosen[-1]}'} "
                             "is out of range")
        first = uci.load(name, 0, data_dir or None)
        d, hidden, rows = first.X_train.shape[1], first.hidden, len(first.y_train)
        for method in args.method or METHODS:
            if method == "fullrank_advi" and (d + 2) * hidden + 2 > FULLRANK_MAX_PARAMS:
                continue
            out += [UCIConfig(**shared, dataset="uci", uci=name, split=k, approach=method, data_dir=data_dir,
                              noise_prior=tuple(args.noise_prior), dropout_rate=args.dropout_rate,
                              batch_size=None if rows <= args.batch_size else args.batch_size,
                              members=args.members, keep_draws=False) for k in chosen]
    return out


def run_job(args, report=print) -> tuple[Path, int]:
    """Fit what the store lacks and write the table; returns ``table.csv``'s path and the fits made now.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (:func:`build_parser`).
    report : callable, default print
        Called with the line that counts the job's fits, and a line per damaged
        record set aside.

    Returns
    -------
    tuple of (pathlib.Path, int)
        ``<out>/uci/table.csv`` and the number of fits made now.

    Raises
    ------
    UsageError
        For bad input (:func:`configs`), or ``--table-only`` on a store without any of the
        job's records.
    """
    from bnn_zoo.inference.io import atomic_write, write_text

    cfgs = configs(args)
    keys = {fit_key(c) for c in cfgs}
    store = sweep.Store(args.out / "uci")
    if args.table_only and not keys & store.done():
        raise UsageError(f"--table-only: {store.root} holds none of this job's fits")
    store.open()
    for key, why in store.set_aside_damaged():
        report(f"record {key} is damaged ({why}); set aside in {store.root / 'damaged'}, it is fitted again")
    done = store.done()
    todo = [c for c in cfgs if fit_key(c) not in done]
    report(f"{len(cfgs)} fits in the job, {len(cfgs) - len(todo)} already in {store.root}, "
           + (f"{len(todo)} left out (--table-only)" if args.table_only else f"{len(todo)} to fit"))
    work = [] if args.table_only else tasks(todo, args.splits_per_task)
    client, close = sweep.cluster(args) if work else (None, lambda: None)
    try:
        with sweep.progress(len(todo) if work else 0, not args.no_progress) as advance:
            if client is None:
                for task in work:
                    for record in fit_task(task):
                        store.write(record)
                    advance(len(task))
            else:
                from dask.distributed import as_completed

                futures = [client.submit(fit_task, task, pure=False) for task in work]
                for future in as_completed(futures):
                    records = future.result()
                    for record in records:
                        store.write(record)
                    advance(len(records))
    finally:
        close()
    store.consolidate()
    fits = store.table(sorted(keys & store.done()))
    t = table(fits)
    path = store.root / "table.csv"
    atomic_write(store.root / "fits.csv", lambda tmp: fits.sort_values(["uci", "approach", "split"]).to_csv(
        tmp, index=False, float_format="%.6g"))
    atomic_write(path, lambda tmp: t.to_csv(tmp, index=False, float_format="%.6g"))
    write_text(store.root / "table.md", markdown(t))
    return path, len(todo)


def build_parser(prog: str = "bnn-zoo uci") -> argparse.ArgumentParser:
    """The command line of ``bnn-zoo uci``: its own flags, then the shared fit flags.

    Parameters
    ----------
    prog : str, default "bnn-zoo uci"
        The program's name in usage and error messages.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.cli.Parser`; ``--method`` takes a list of
        :data:`METHODS`.
    """
    p = Parser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
               conflict_handler="resolve")
    p.add_argument("--datasets", type=names(uci.DATASETS, "data set"), default=None,
                   help="e.g. yacht,boston (default: all nine)")
    p.add_argument("--splits", type=split_list, default=None,
                   help="N: the first N splits; I-J: splits I to J (default: all, 20 or 5 for protein)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="the folder of the nine data sets (default: $UCI_DIR, else downloaded to the user's cache)")
    p.add_argument("--noise-prior", type=_pair, default="1,0.1", metavar="ALPHA,BETA",
                   help="shape and rate of the Gamma prior on the noise precision of the standardised target")
    p.add_argument("--dropout-rate", type=_rate, default=0.05, help="MC dropout's rate")
    p.add_argument("--members", type=positive_int, default=5, help="the deep ensemble's MAP fits")
    p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE,
                   help="minibatch rows on data sets with more training rows (the others: full batch)")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                   help="Dask LocalCluster processes (1: in this process)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--splits-per-task", type=positive_int, default=5,
                   help="splits of one data set and method fitted one after another in one task")
    p.add_argument("--table-only", action="store_true",
                   help="fit nothing: write the table of the job's fits already in the store")
    exp = runner.Experiment(name="uci", description="", arguments=lambda p: None, configs=configs, data=None,
                            model=model, evaluate=None, report=None, defaults=DEFAULTS)
    runner.add_fit_arguments(p, exp)
    p.add_argument("--method", type=names(METHODS, "method"), default=None,
                   help=f"methods, e.g. advi,dropout (default: all: {','.join(METHODS)})")
    for flag in ("--restarts", "--pick", "--pick-at", "--estimator", "--figures"):  # the shared ones it has not
        p.add_argument(flag, action=_NotHere, nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="results folder: the job's store is <out>/uci (rerun to resume)")
    return p


class _NotHere(argparse.Action):
    """A shared flag that ``bnn-zoo uci`` does not take: refused in one line."""

    def __call__(self, parser, namespace, values, option_string=None):
        why = " (the local-reparameterisation estimator is --method local_reparam)" \
            if option_string == "--estimator" else ""
        parser.error(f"{option_string} is not a setting of bnn-zoo uci{why}")


def _pair(text):
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 2 or not all(np.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be two positive numbers ALPHA,BETA, got {text!r}")
    return values


def _rate(text):
    rate = positive_float(text)
    if rate >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text!r}")
    return rate


def main(argv=None, prog: str = "bnn-zoo uci") -> int:
    """``bnn-zoo uci``: exit 0 when every fit is in the store and the table is written, 2 on bad input.

    Parameters
    ----------
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo uci"
        The program's name in usage and error messages.

    Returns
    -------
    int
        0 on success and for ``--help``; 2 on bad flags or input (an unknown data set, a
        split out of range, a missing or damaged file: one line on stderr, before any fit);
        130 on an interrupt, after which the same command goes on.
    """
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code
    try:
        from bnn_zoo.experiments.cli import check_writable
        from bnn_zoo.inference.advi import MAX_STEPS

        if args.steps > MAX_STEPS:
            raise UsageError(f"--steps {args.steps:,} is more than {MAX_STEPS:,}")
        if args.scheduler is not None and "://" not in args.scheduler:
            raise UsageError(f"--scheduler must be a Dask address such as tcp://host:8786, got {args.scheduler!r}")
        check_writable(args.out, "--out")
        runner.use_compilation_cache()
        with runner._lock(args.out / "uci"), runner._xla_flags(sweep.xla_flags()):
            t0 = time.perf_counter()
            path, fitted = run_job(args, report=lambda line: print(line, file=sys.stderr))
            seconds = time.perf_counter() - t0
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted (rerun the same command to go on)", file=sys.stderr)
        return 130
    print((path.parent / "table.md").read_text())
    print(f"{fitted} fits in {seconds:.1f} s; table: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
