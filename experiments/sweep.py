"""Prior sweeps: many toy fits, vectorised, resumable, on one machine or a Dask cluster.

    bnn-zoo sweep --out sweeps/priors --datasets moons,circles --noise 0.1,0.2,0.3,0.4,0.5 \\
        --all-priors --seeds 10

runs every combination of data set, noise level, prior pair and seed (and of
any list given to ``--steps``, ``--lr``, ``--n-train``, ``--restarts``,
``--pick-at``, ``--init-std``) with the toy experiment's defaults, and writes one record per
fit: its settings, the test metrics on ``--n-test`` fresh points (accuracy,
NLL, Brier, ECE, the held-out ELPD), the Bayes-optimal classifier's on the
same points and the gaps to it, PSIS-LOO (``elpd_loo``, its SE, ``p_loo``,
the share of Pareto k above 0.7) and the convergence test. Each fit is what
``bnn-zoo moons``/``circles`` would fit and report for the same settings
(``tests/test_sweep.py`` checks they agree).

The store (``--out``):

- ``records/<key>.parquet``: one row per fit, named by the hash of its
  settings, written to a temporary file and renamed, by the client only;
- ``fits.parquet``: every record in the store in one tidy table (``pandas.read_parquet``),
  rewritten at the end of each run;
- ``draws/<key>.nc``: the fit's posterior draws as an ArviZ DataTree (``--keep-draws``).

A rerun of the same command keeps every finished fit and fits only the
missing ones (after a ``kill -9`` too); a changed spec adds its new fits.

Fits that share a model structure (the same prior pair, architecture,
training-set size and fit settings) run together, ``--fits-per-task`` at a
time, in one vmapped program (:mod:`bnn_zoo.inference.batch`). The tasks run
in this process (``--workers 1``), on a Dask ``LocalCluster`` of
``--workers`` single-threaded processes (default: one per core), or on an
existing cluster (``--scheduler tcp://host:8786``).

:func:`main` is the command; :func:`build_parser`, :func:`run_sweep`,
:func:`specs`, :func:`tasks`, :func:`fit_task` and :class:`Store` are its
steps, for notebooks and scripts (docs/user_guide/sweeps.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from bnn_zoo.experiments import runner, toy
from bnn_zoo.experiments.cli import (HelpFormatter, Parser, UsageError, check_writable, int_list, names,
                                     nonneg_int, positive_float, positive_int, unit_interval)

__all__ = ["KEY_FIELDS", "SPLIT_FIELDS", "Store", "bayes_task", "build_parser", "check", "cluster", "fit_key", "fit_task",
           "folds", "kfold_elpd", "kfold_task", "main", "progress", "run_sweep", "specs", "split_settings", "structure",
           "tasks", "xla_flags"]

#: The toy config's fields that change what a fit fits or measures: :func:`fit_key` hashes them to
#: name the fit's record, and all but the data's (data set, noise, seeds) make its :func:`structure`.
KEY_FIELDS = ("dataset", "noise", "seed", "init_seed", "prior", "hyperprior", "n_train", "n_test", "hidden", "method",
              "steps", "optimizer", "lr", "lr_schedule", "lr_final", "init_std", "mc_samples", "beta",
              "average", "restarts", "pick", "pick_at", "draws", "float32")
#: The toy config's fields that make a data set (:func:`split_settings`): fits that share them
#: share one Bayes-optimal reference (:func:`bayes_task`).
SPLIT_FIELDS = ("dataset", "noise", "seed", "n_train", "n_test")  # what makes a data set


def fit_key(cfg: toy.ToyConfig, kfold: int = 0) -> str:
    """The hash naming a fit's record: of every setting that changes what is fitted or measured
    (and of ``--kfold``, when given: such a record holds more).

    The settings are the config's :data:`KEY_FIELDS`, and the hyperprior's
    parameters where the toy experiment sets its own
    (:func:`~bnn_zoo.experiments.toy.hyperprior_params`).

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings (:class:`bnn_zoo.experiments.toy.ToyConfig`).
    kfold : int, default 0
        The K of the record's K-fold cross-validation; 0: none.

    Returns
    -------
    str
        The SHA-256 of the settings as JSON, its first 20 hex digits.
    """
    settings = {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(cfg).items() if k in KEY_FIELDS}
    params = toy.hyperprior_params(cfg.hyperprior)
    if params:  # only there: the other pairs' keys do not depend on it
        settings["hyperprior_params"] = params
    if kfold:
        settings["kfold"] = kfold
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]


def structure(cfg: toy.ToyConfig) -> tuple:
    """Fits with the same structure run in one vmapped program: all settings but the data's.

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.

    Returns
    -------
    tuple
        The values of :data:`KEY_FIELDS` but the data set, noise, seed and
        ``init_seed``, in that order.
    """
    return tuple(getattr(cfg, k) for k in KEY_FIELDS if k not in ("dataset", "noise", "seed", "init_seed"))


# --- one task: fits of one structure ----------------------------------------------


class _Batch:
    """Fits of one structure (each with its restarts) run as one vmapped program.

    ``trains[i]`` is fit ``i``'s training data ``(X, y)``; the model is
    built on the first. ``best(i)`` is fit ``i``'s q with the highest ELBO
    over its restarts, picked as the toy experiment picks (early, or at the
    end), with its row, the restarts' ELBOs and the picked restart.
    ``optimizer`` replaces the configs' own (``runner.make_optimizer``), for
    benchmarks of other schedules.
    """

    def __init__(self, cfgs: list[toy.ToyConfig], trains: list[tuple[np.ndarray, np.ndarray]],
                 optimizer=None):
        import bnn_zoo
        from bnn_zoo.data.toy import Split
        from bnn_zoo.inference import families
        from bnn_zoo.inference.advi import initial_mean
        from bnn_zoo.inference.batch import run_stacked
        from bnn_zoo.inference.jaxmodel import Layout, compile_model

        cfg0 = cfgs[0]
        self.cfgs, self.R = cfgs, cfg0.restarts
        X, y = trains[0]
        with bnn_zoo.precision(cfg0.float32):
            self.model = toy.model(cfg0, Split(X, y, X[:1], y[:1]))
        point = self.model.initial_point()
        self.layout = Layout.of(self.model, point)
        self.density = compile_model(self.model, self.layout)
        self.family = families.get(cfg0.method)
        self.dtypes = {v.name: np.asarray(v.get_value()).dtype for v in self.model.data_vars}
        self.trains = [self.data(X, y) for X, y in trains]
        seeds = [c.fit_seed + k for c in cfgs for k in range(self.R)]
        stacked = [np.stack([train[j] for train in self.trains for _ in range(self.R)])
                   for j in range(len(self.dtypes))]
        self.out = run_stacked(self.model, self.density, np.stack([initial_mean(self.layout, point, s) for s in seeds]),
                               stacked, seeds, method=cfg0.method, steps=cfg0.steps,
                               optimizer=optimizer or runner.make_optimizer(cfg0, cfg0.lr, cfg0.steps),
                               init_std=cfg0.init_std,
                               beta=cfg0.beta, mc_samples=cfg0.mc_samples, average=cfg0.average,
                               path_derivative=cfg0.path_derivative, estimator=cfg0.estimator, restarts=self.R,
                               pick_at=cfg0.early_pick(cfg0.steps))

    def data(self, X, y) -> list[np.ndarray]:
        """``X`` and ``y`` as the model's data containers, in their order and dtypes."""
        return [np.asarray({"X": X, "y": y}[name], dtype) for name, dtype in self.dtypes.items()]

    def params(self, row: int) -> dict:
        return {k: v[row] for k, v in self.out.params.items()}

    def best(self, i: int):
        """``(q, row, restarts' ELBOs or None, picked restart or None)`` of fit ``i``."""
        from bnn_zoo.inference.posterior import q_elbo

        if self.out.picked is not None:  # picked early: one row per fit
            return (self.family.mean_and_factor(self.params(i)), i, self.out.pick_scores[i].tolist(),
                    int(self.out.picked[i]))
        rows = range(i * self.R, (i + 1) * self.R)
        qs = [self.family.mean_and_factor(self.params(r)) for r in rows]
        if self.R == 1:
            return qs[0], rows[0], None, None
        # q's ELBO from 1,000 draws, as the toy experiment picks its restarts
        elbos = [q_elbo(self.density, q, self.trains[i], seed=self.cfgs[i].seed)[0] for q in qs]
        k = int(np.argmax(elbos))
        return qs[k], rows[k], elbos, k


def fit_task(cfgs: list[toy.ToyConfig], keep_draws: bool = False, kfold: int = 0) -> list[dict]:
    """Fit ``cfgs`` (one structure) together; one record each (and its DataTree with ``keep_draws``).

    With ``kfold`` K, also refit each on K folds of its training data
    (:func:`kfold_task`). Runs on a Dask worker or in this process, and
    writes nothing. The Bayes-optimal classifier's metrics and the gaps to
    them are not in the records: :func:`run_sweep` adds them.

    Parameters
    ----------
    cfgs : list of ToyConfig
        Fits of one :func:`structure` (a task of :func:`tasks`).
    keep_draws : bool, default False
        Also make each fit's posterior draws, as :func:`bnn_zoo.sample`
        makes them.
    kfold : int, default 0
        The K of K-fold cross-validation of each fit; 0: none.

    Returns
    -------
    list of dict
        Per fit, in the order of ``cfgs``: ``"record"``, its row of the
        store (:func:`fit_key`'s ``key``, the settings, the convergence
        test, the test metrics, PSIS-LOO, q's ELBO, the restarts' ELBOs and
        the timings; with ``kfold``, ``elpd_kfold`` and its SE and
        pointwise values), and ``"draws"``, the fit's ArviZ DataTree or
        ``None``.
    """
    from bnn_zoo.inference.diagnostics import convergence

    t0 = time.perf_counter()
    splits = [toy.data(c) for c in cfgs]
    batch = _Batch(cfgs, [(s.X_train, s.y_train) for s in splits])
    observed = batch.model.observed_RVs[0].name
    records = []
    for i, (cfg, split) in enumerate(zip(cfgs, splits)):
        t1 = time.perf_counter()
        q, chosen, elbos, picked = batch.best(i)
        metrics = _evaluate(batch.density, q, batch.trains[i], batch.data(split.X_test, split.y_test),
                            split.y_test, cfg, observed)
        tail = max(1, min(1000, cfg.steps // 10))
        record = {
            "key": fit_key(cfg, kfold), **_settings(cfg), "n_params": batch.layout.dim,
            **convergence(batch.out.elbo[chosen]).record(), **metrics,
            "elbo_final": float(np.mean(batch.out.elbo[chosen][-tail:])),
            "elbo_restarts": elbos, "picked_restart": picked,
            "fit_seconds": batch.out.seconds / len(cfgs), "evaluate_seconds": time.perf_counter() - t1,
            "batched_with": len(cfgs) * batch.R,
        }
        draws = _datatree(cfg, split, batch, chosen) if keep_draws else None
        records.append({"record": record, "draws": draws})
    if kfold:
        for r, fold in zip(records, kfold_task(cfgs, splits, kfold)):
            r["record"].update(fold)
    for r in records:
        r["record"]["task_seconds"] = (time.perf_counter() - t0) / len(cfgs)
    return records


def folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    """The held-out rows of each of ``k`` folds of ``n`` rows (a permutation seeded by ``seed``).

    Parameters
    ----------
    n : int
        The rows of the training set.
    k : int
        The folds; each is ``n // k`` or ``n // k + 1`` rows.
    seed : int
        The data's seed; the permutation's is ``[seed, 17]``.

    Returns
    -------
    list of numpy.ndarray
        Each fold's row indices; together a permutation of ``range(n)``.
    """
    return np.array_split(np.random.default_rng([seed, 17]).permutation(n), k)


def kfold_task(cfgs: list[toy.ToyConfig], splits: list, k: int) -> list[dict]:
    """K-fold cross-validation of each fit: the fit's settings refitted (vectorised) on ``k``
    training sets of ``n - n / k`` rows, each scored on its held-out rows by the log posterior
    predictive density ``log mean_s p(y_i | z_s)`` of ``draws`` draws of its q. Returns per
    fit ``elpd_kfold``, its SE (``sqrt(n) sd(elpd_i)``, as LOO's) and the pointwise values.

    All ``len(cfgs) * k`` refits run as one vmapped program.

    Parameters
    ----------
    cfgs : list of ToyConfig
        Fits of one :func:`structure`.
    splits : list of bnn_zoo.data.toy.Split
        Each fit's data; the folds cut its training set.
    k : int
        The folds (:func:`folds`, seeded by each fit's ``seed``).

    Returns
    -------
    list of dict
        Per fit: ``kfold`` (``k``), ``elpd_kfold``, ``elpd_kfold_se`` and
        ``elpd_kfold_i`` (a list of each training point's value).
    """
    from bnn_zoo.evaluation.metrics import log_predictive
    from bnn_zoo.inference import families
    from bnn_zoo.inference.batch import posterior_mean

    parts = [folds(cfg.n_train, k, cfg.seed) for cfg in cfgs]
    cases = [(i, held) for i, part in enumerate(parts) for held in part]  # one fit per fold
    keep = [np.setdiff1d(np.arange(cfgs[i].n_train), held) for i, held in cases]
    batch = _Batch([cfgs[i] for i, _ in cases],
                   [(splits[i].X_train[rows], splits[i].y_train[rows]) for (i, _), rows in zip(cases, keep)])
    elpd = [np.empty(cfg.n_train) for cfg in cfgs]
    for j, (i, held) in enumerate(cases):
        cfg, split = cfgs[i], splits[i]
        q = batch.best(j)[0]
        z, _ = families.sample(*q, cfg.draws, np.random.default_rng(cfg.seed))
        proba = posterior_mean(batch.density, z, batch.data(split.X_train[held], split.y_train[held]), "p")
        elpd[i][held] = log_predictive(proba, split.y_train[held])
    return [{"kfold": k, "elpd_kfold": float(e.sum()), "elpd_kfold_se": _se(e), "elpd_kfold_i": e.tolist()}
            for e in elpd]


def kfold_elpd(record):
    """A record's K-fold cross-validation as ArviZ's ``ELPDDataLOOKFold`` (what
    ``arviz_stats.loo_kfold`` returns), which ``az.compare`` accepts.

    Parameters
    ----------
    record : dict or pandas.Series
        A fit's record of a sweep run with ``--kfold``: its ``elpd_kfold_i``
        (a list, or the JSON text the store keeps), ``draws`` and ``kfold``.

    Returns
    -------
    arviz_stats.utils.ELPDDataLOOKFold
        The ELPD, its SE and the pointwise values (``p`` is NaN: K-fold
        cross-validation does not estimate it).
    """
    import xarray as xr
    from arviz_stats.utils import ELPDDataLOOKFold

    values = record["elpd_kfold_i"]
    elpd_i = np.asarray(json.loads(values) if isinstance(values, str) else values, dtype="float64")
    return ELPDDataLOOKFold(elpd=float(elpd_i.sum()), se=_se(elpd_i),
                            p=np.nan, n_samples=int(record["draws"]), n_data_points=len(elpd_i), scale="log",
                            warning=False, good_k=None, elpd_i=xr.DataArray(elpd_i, dims=["obs"]),
                            n_folds=int(record["kfold"]))


def _settings(cfg: toy.ToyConfig) -> dict:
    return {k: ",".join(map(str, v)) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(cfg).items() if k in KEY_FIELDS}


def _se(pointwise: np.ndarray) -> float:
    """The SE of a sum of pointwise ELPD values, ``sqrt(n) sd``, as ArviZ's for LOO."""
    return float(np.sqrt(len(pointwise)) * np.std(pointwise, ddof=1))


def _evaluate(density, q, train, test, y_test, cfg, observed: str) -> dict:
    """The toy experiment's metrics of q, with :func:`bnn_zoo.sample`'s draws (seed ``cfg.seed``)."""
    from arviz_stats.base import array_stats

    from bnn_zoo.evaluation.metrics import all_metrics, log_predictive
    from bnn_zoo.inference import families, psis
    from bnn_zoo.inference.batch import posterior_mean
    from bnn_zoo.inference.posterior import evaluate_draws

    z, log_q = families.sample(*q, cfg.draws, np.random.default_rng(cfg.seed))
    values = evaluate_draws(density, z, train, ("logp", f"loglik:{observed}"))
    log_p = values["logp"].astype("float64")
    loo = {}
    if np.isfinite(log_p).all() and np.isfinite(log_q).all():
        elpd_i, k, p_loo_i = psis.loo_approximate_posterior(values[f"loglik:{observed}"], log_p, log_q)
        elpd, se, p_loo, _ = array_stats.loo_summary(elpd_i, p_loo_i)
        loo = {"elpd_loo": float(elpd), "elpd_loo_se": float(se), "p_loo": float(p_loo),
               "pareto_k_max": float(np.max(k)), "pareto_k_bad_share": float(np.mean(k > 0.7))}
    proba = posterior_mean(density, z, test, "p")
    lppd = log_predictive(proba, y_test)
    ratio = log_p - log_q
    return {
        **all_metrics(proba, y_test),
        "elpd_test": float(lppd.sum()), "elpd_test_se": _se(lppd),
        **{k: loo.get(k) for k in ("elpd_loo", "elpd_loo_se", "p_loo", "pareto_k_max", "pareto_k_bad_share")},
        "elbo_q": float(ratio.mean()) if np.isfinite(ratio).all() else None,
        "elbo_q_se": float(ratio.std(ddof=1) / np.sqrt(len(ratio))) if np.isfinite(ratio).all() else None,
    }


def _datatree(cfg, split, batch: _Batch, row: int):
    """The chosen fit's posterior draws as :func:`bnn_zoo.sample` writes them (the runner's idata)."""
    import bnn_zoo
    from bnn_zoo.inference.advi import FitResult

    with bnn_zoo.precision(cfg.float32):
        model = toy.model(cfg, split)
    result = FitResult(model=model, family=batch.family, layout=batch.layout, params=batch.params(row),
                       elbo=batch.out.elbo[row], config=dict(batch.out.config, seed=cfg.seed), seconds=0.0,
                       compile_seconds=0.0, density=batch.density)
    return bnn_zoo.sample(result, cfg.draws, seed=cfg.seed, var_names=())


def bayes_task(split_settings: dict) -> dict:
    """The Bayes-optimal classifier's accuracy, NLL and ELPD on one data set's test points.

    Parameters
    ----------
    split_settings : dict
        The data set's settings, by :data:`SPLIT_FIELDS` (what
        :func:`split_settings` returns).

    Returns
    -------
    dict
        ``bayes_accuracy``, ``bayes_nll`` (per test point) and
        ``bayes_elpd_test`` (summed over the test points).
    """
    from bnn_zoo.data import toy as toy_data

    s = split_settings
    split = toy_data.load(s["dataset"], n_train=s["n_train"], n_test=s["n_test"], noise=s["noise"],
                          seed=s["seed"])
    metrics = toy_data.bayes_metrics(s["dataset"], split.X_test, split.y_test, s["noise"])
    return {**metrics, "bayes_elpd_test": -metrics["bayes_nll"] * len(split.y_test)}


# --- the spec, the store and the scheduler -------------------------------------------


def specs(args) -> list[toy.ToyConfig]:
    """Every fit of the sweep, in a stable order.

    Each is the toy experiment's configuration at its defaults (as
    ``bnn-zoo moons`` with no flags), with the sweep's flags: every
    combination of data set, noise, seed, prior pair and the listed fit
    settings.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags (:func:`build_parser`).

    Returns
    -------
    list of ToyConfig
        One configuration per fit.
    """
    exp = toy.experiment("moons")
    base = toy.configs(runner.build_parser(exp, "bnn-zoo moons").parse_args([]), "moons")[0]
    base = dataclasses.replace(base, n_test=args.n_test, draws=args.draws, hidden=args.hidden,
                               progress=False, uncertainty_map=False, grid=False, keep_draws=args.keep_draws,
                               float32=args.float32)
    pairs = (list(itertools.product(toy.GRID_PRIORS, sorted(toy.HYPERPRIORS))) if args.all_priors
             else list(itertools.product(args.priors, args.hyperpriors)))
    out = []
    for (dataset, noise, seed, (prior, hyper), steps, lr, n_train, restarts, pick_at, init_std) in (
            itertools.product(args.datasets, args.noise, range(args.seeds), pairs, args.steps, args.lr,
                              args.n_train, args.restarts, args.pick_at, args.init_std)):
        out.append(dataclasses.replace(base, dataset=dataset, noise=noise, seed=seed, prior=prior,
                                       hyperprior=hyper, steps=steps, lr=lr, n_train=n_train,
                                       restarts=restarts, pick_at=pick_at if restarts > 1 else 0.0,
                                       init_std=init_std,
                                       init_seed=seed + args.init_offset if args.init_offset else None))
    return out


def tasks(cfgs: list[toy.ToyConfig], per_task: int) -> list[list[toy.ToyConfig]]:
    """Fits grouped by structure, at most ``per_task`` (times their restarts' share) a task.

    A group of one :func:`structure` is cut into as few tasks of even sizes
    as allow at most ``per_task // restarts`` fits each (at least one).

    Parameters
    ----------
    cfgs : list of ToyConfig
        The fits.
    per_task : int
        The most fits a task vmaps, restarts counted (``--fits-per-task``).

    Returns
    -------
    list of list of ToyConfig
        The tasks, each of one structure, in the order of ``cfgs``' first
        appearances.
    """
    groups: dict[tuple, list] = {}
    for cfg in cfgs:
        groups.setdefault(structure(cfg), []).append(cfg)
    out = []
    for group in groups.values():
        size = max(1, per_task // group[0].restarts)
        n = -(-len(group) // size)  # as few tasks as that allows, of even sizes
        out += [list(part) for part in np.array_split(np.array(group, dtype=object), n)]
    return out


class Store:
    """The sweep's folder: one Parquet record per fit, written by this process only.

    Parameters
    ----------
    root : pathlib.Path
        The folder (``--out``).

    Attributes
    ----------
    records : pathlib.Path
        ``root / "records"``: one ``<key>.parquet`` per fit.
    draws : pathlib.Path
        ``root / "draws"``: one ``<key>.nc`` per fit, with ``--keep-draws``.
    """

    def __init__(self, root: Path):
        self.root = root
        self.records = root / "records"
        self.draws = root / "draws"

    def open(self) -> None:
        """Create the folder, and remove the temporary files a killed run left."""
        self.records.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, self.records, self.draws):
            for stale in folder.glob(".*"):  # atomic_write's temporary files that a kill left behind
                if stale.is_file():
                    stale.unlink()

    def set_aside_damaged(self) -> list[tuple[str, str]]:
        """Move every record that cannot be read into ``root / "damaged"``, so that it is fitted again.

        A record cut short (a full disk, a bad copy) or otherwise unreadable would stop every later
        run of the sweep in pyarrow; set aside, its fit counts as not done, and the other records
        stay as they are. Its draws, if any, are overwritten by the new fit.

        Returns
        -------
        list of (str, str)
            Each damaged record's key and why it cannot be read.
        """
        import pyarrow.parquet as pq

        damaged = []
        for path in sorted(self.records.glob("*.parquet")):
            if path.name.startswith("."):
                continue
            try:
                pq.read_table(path)
            except Exception as err:  # pyarrow raises several types for a cut-short or garbled file
                (self.root / "damaged").mkdir(exist_ok=True)
                path.replace(self.root / "damaged" / path.name)
                damaged.append((path.stem, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"))
        return damaged

    def done(self) -> set[str]:
        """The keys of the fits in the store."""
        return {p.stem for p in self.records.glob("*.parquet") if not p.name.startswith(".")}

    def write(self, record: dict, draws=None) -> None:
        """Write a fit's record (lists as JSON text), and its draws first, each atomically."""
        import pandas as pd

        from bnn_zoo.inference.io import atomic_write

        if draws is not None:  # before the record: a record means that everything of its fit is there
            self.draws.mkdir(exist_ok=True)
            atomic_write(self.draws / f"{record['key']}.nc", lambda tmp: draws.to_netcdf(tmp))
        frame = pd.DataFrame([_flat(record)])
        atomic_write(self.records / f"{record['key']}.parquet", lambda tmp: frame.to_parquet(tmp, index=False))

    def table(self, keys: list[str]):
        """The records of ``keys`` as one DataFrame."""
        import pandas as pd

        frames = [pd.read_parquet(self.records / f"{k}.parquet") for k in keys]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def consolidate(self) -> Path:
        """``fits.parquet``: every record in the store (of this spec and of earlier ones)."""
        from bnn_zoo.inference.io import atomic_write

        table = self.table(sorted(self.done()))
        path = self.root / "fits.parquet"
        atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))
        return path


def _flat(record: dict) -> dict:
    # Parquet columns of one type: lists as JSON text.
    return {k: json.dumps(v) if isinstance(v, (list, tuple)) else v for k, v in record.items()}


def split_settings(cfg) -> dict:
    """The settings that make a fit's data set.

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.

    Returns
    -------
    dict
        Its :data:`SPLIT_FIELDS`, by name.
    """
    return {k: getattr(cfg, k) for k in SPLIT_FIELDS}


def xla_flags() -> list[str]:
    """The workers' XLA flags: single-threaded XLA, one small program per core, and the toy experiment's.

    The toy experiment's turn XLA's YNNPACK fusions off where jaxlib has
    them, so that XLA's own loops run the small products of the vmapped
    steps, which is faster (docs/benchmarks.md, "Design choices that make
    the engine fast").

    Returns
    -------
    list of str
        The flags, for ``XLA_FLAGS``.
    """
    return ["--xla_cpu_multi_thread_eigen=false", *toy.experiment().xla_flags]


def cluster(args):
    """A Dask client for a job's tasks, or ``None`` to run them in this process.

    Parameters
    ----------
    args : argparse.Namespace
        ``scheduler`` (a running scheduler's address, or ``None``) and ``workers``
        (the processes of a ``LocalCluster`` started here, with :func:`xla_flags`; 1 and
        no scheduler: none).

    Returns
    -------
    tuple of (dask.distributed.Client or None, callable)
        The client, and the function that closes it and its cluster.
    """
    if args.scheduler is None and args.workers == 1:
        return None, lambda: None
    from dask.distributed import Client, LocalCluster

    if args.scheduler is not None:
        client = Client(args.scheduler)
        return client, client.close
    import logging

    # Shutting workers down that hold JAX's threads takes a few seconds: not worth a warning.
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)
    with runner._xla_flags(xla_flags()):
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0")  # any free port: never a clash
    client = Client(cluster)

    def close():
        client.close()
        cluster.close()

    return client, close


def run_sweep(args, report=print) -> tuple[Path, int]:
    """Fit what the store lacks; returns the consolidated table's path and the fits done now.

    Sets aside the records that cannot be read (:meth:`Store.set_aside_damaged`),
    runs the tasks in this process or on a Dask cluster (:func:`xla_flags`
    on a local one), adds each record's Bayes-optimal reference and gaps,
    writes it to the store as it arrives, and rewrites ``fits.parquet``
    with every record in the store.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags (:func:`build_parser`).
    report : callable, default print
        Called with a line per damaged record set aside, and the line that
        counts the sweep's fits, those already in the store and those to fit.

    Returns
    -------
    tuple of (pathlib.Path, int)
        ``fits.parquet``'s path and the number of fits made now.

    Raises
    ------
    UsageError
        If two fits of the sweep have the same settings.
    """
    cfgs = specs(args)
    keys = [fit_key(c, args.kfold) for c in cfgs]
    if len(set(keys)) != len(keys):
        raise UsageError("the sweep's lists repeat a value (two fits with the same settings)")
    store = Store(args.out)
    store.open()
    for key, why in store.set_aside_damaged():
        report(f"record {key} is damaged ({why}); set aside in {args.out / 'damaged'}, it is fitted again")
    done = store.done()
    todo = [c for c, k in zip(cfgs, keys) if k not in done]
    report(f"{len(cfgs)} fits in the sweep, {len(cfgs) - len(todo)} already in {args.out}, "
           f"{len(todo)} to fit")
    work = tasks(todo, args.fits_per_task)
    splits = {json.dumps(split_settings(c), sort_keys=True): split_settings(c) for c in todo}
    client, close = cluster(args)
    try:
        with progress(len(todo), not args.no_progress) as advance:
            if client is None:
                bayes = {}
                for task in work:
                    results = fit_task(task, args.keep_draws, args.kfold)
                    for cfg, result in zip(task, results):
                        s = json.dumps(split_settings(cfg), sort_keys=True)
                        if s not in bayes:
                            bayes[s] = bayes_task(splits[s])
                        _finish(store, result, bayes[s])
                    advance(len(task))
            else:
                from concurrent.futures import ThreadPoolExecutor

                from dask.distributed import as_completed

                futures = {client.submit(fit_task, task, args.keep_draws, args.kfold, pure=False): task
                           for task in work}
                # The Bayes-optimal references in this process, while the workers fit: a record
                # waits for its data set's, and the workers' queues would put it behind fits.
                with ThreadPoolExecutor(1) as references:
                    bayes = {s: references.submit(bayes_task, settings) for s, settings in splits.items()}
                    for future in as_completed(futures):
                        task = futures[future]
                        for cfg, result in zip(task, future.result()):
                            _finish(store, result, bayes[json.dumps(split_settings(cfg), sort_keys=True)].result())
                        advance(len(task))
    finally:
        close()
    return store.consolidate(), len(todo)


def _finish(store: Store, result: dict, bayes: dict) -> None:
    record = dict(result["record"], **bayes)
    record["gap_accuracy"] = bayes["bayes_accuracy"] - record["accuracy"]
    record["gap_nll"] = record["nll"] - bayes["bayes_nll"]
    record["gap_elpd_test"] = bayes["bayes_elpd_test"] - record["elpd_test"]
    store.write(record, result["draws"])


class progress:
    """Fits done / total with the estimated time left, on stderr: a context manager that gives
    the function advancing it by a number of fits.

    Parameters
    ----------
    total : int
        The fits to make.
    show : bool
        Show the bar (``False``: the function does nothing visible).
    """

    def __init__(self, total: int, show: bool):
        self.total, self.show = total, show

    def __enter__(self):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)
        from rich.console import Console

        self.bar = Progress(TextColumn("fits"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True),
                            disable=not self.show)
        self.bar.start()
        self.task = self.bar.add_task("sweep", total=self.total)
        return lambda n: self.bar.advance(self.task, n)

    def __exit__(self, *exc):
        self.bar.stop()


# --- the command line ------------------------------------------------------------------


def _list(kind, flag):
    """Comma-separated distinct values of ``kind`` (an argparse type)."""
    def parse(text):
        values = [kind(v) for v in text.split(",")]
        if len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(f"repeated value in {text!r}")
        return values
    return parse


def build_parser(prog: str = "bnn-zoo sweep") -> argparse.ArgumentParser:
    """The command line of ``bnn-zoo sweep``.

    Parameters
    ----------
    prog : str, default "bnn-zoo sweep"
        The program's name in usage and error messages.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`~bnn_zoo.experiments.cli.Parser`; ``--out`` is required.
    """
    p = Parser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the sweep's store (created; rerun to resume)")
    p.add_argument("--datasets", type=names(toy.NOISE, "data set"), default=["moons"], help="e.g. moons,circles")
    p.add_argument("--noise", type=_list(positive_float, "--noise"), default=[0.2],
                   help="noise levels, e.g. 0.1,0.3")
    p.add_argument("--priors", type=names(toy.WEIGHT_PRIORS, "prior"), default=["normal"],
                   help="weight priors, e.g. normal,laplace")
    p.add_argument("--hyperpriors", type=names(toy.HYPERPRIORS, "hyperprior"), default=["inversegamma"],
                   help="hyperpriors, e.g. fixed,inversegamma")
    p.add_argument("--all-priors", action="store_true",
                   help=f"the 16 pairs of {', '.join(toy.GRID_PRIORS)} x every hyperprior")
    p.add_argument("--seeds", type=positive_int, default=3, help="seeds 0..N-1 (data, test points and fit)")
    p.add_argument("--steps", type=_list(positive_int, "--steps"), default=[toy.DEFAULTS["steps"]])
    p.add_argument("--lr", type=_list(positive_float, "--lr"), default=[toy.DEFAULTS["lr"]])
    p.add_argument("--n-train", type=_list(toy._n_train, "--n-train"), default=[700])
    p.add_argument("--restarts", type=_list(positive_int, "--restarts"), default=[toy.DEFAULTS["restarts"]])
    p.add_argument("--pick-at", type=_list(unit_interval, "--pick-at"), default=[toy.DEFAULTS["pick_at"]],
                   help="the share of the steps after which each fit's best restart runs on alone "
                   "(0: all run to the end)")
    p.add_argument("--init-std", type=_list(positive_float, "--init-std"), default=[toy.DEFAULTS["init_std"]])
    p.add_argument("--init-offset", type=nonneg_int, default=0,
                   help="start seed s's restarts from the initial means of seeds s+N, s+N+1, ... "
                   "(other initialisations for the same data)")
    p.add_argument("--n-test", type=positive_int, default=10_000, help="fresh test points per data set")
    p.add_argument("--draws", type=positive_int, default=toy.DEFAULTS["draws"])
    p.add_argument("--hidden", type=int_list, default=(5, 5), help="hidden layer sizes, e.g. 5,5")
    p.add_argument("--float32", action="store_true", help="fit and evaluate in single precision")
    p.add_argument("--kfold", type=nonneg_int, default=0,
                   help="also K-fold cross-validation of every fit (K refits on folds of the training data; "
                   "0: none)")
    p.add_argument("--keep-draws", action="store_true", help="also write each fit's DataTree to draws/")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                   help="Dask LocalCluster processes (1: in this process)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--fits-per-task", type=positive_int, default=300,
                   help="fits (restarts counted) vmapped together in one task")
    p.add_argument("--no-progress", action="store_true")
    return p


def check(args) -> None:
    """Check what the flags' own types cannot, before anything is fitted.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags.

    Raises
    ------
    UsageError
        If ``--draws`` is below PSIS-LOO's minimum or below ``--restarts``,
        ``--kfold`` is 1 or does not divide every ``--n-train``, ``--steps``
        exceeds :data:`~bnn_zoo.inference.advi.MAX_STEPS`, ``--scheduler``
        is not a Dask address, or ``--out`` is not a writable folder.
    """
    from bnn_zoo.inference.advi import MAX_STEPS
    from bnn_zoo.inference.psis import MIN_DRAWS

    if args.draws < MIN_DRAWS:
        raise UsageError(f"--draws must be at least {MIN_DRAWS} for PSIS-LOO, got {args.draws}")
    if max(args.restarts) > args.draws:
        raise UsageError(f"--restarts {max(args.restarts)} is more than --draws {args.draws}")
    if args.kfold == 1 or any(args.kfold and n % args.kfold for n in args.n_train):
        raise UsageError(f"--kfold {args.kfold} must be at least 2 and divide --n-train "
                         f"({','.join(map(str, args.n_train))}) into folds of one size")
    if max(args.steps) > MAX_STEPS:
        raise UsageError(f"--steps {max(args.steps):,} is more than {MAX_STEPS:,}")
    if args.scheduler is not None and not args.scheduler.startswith(("tcp://", "tls://", "inproc://", "ws://", "wss://")):
        raise UsageError(f"--scheduler must be a Dask address such as tcp://host:8786, got {args.scheduler!r}")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is not a folder")
    check_writable(args.out, "--out")


def main(argv=None, prog: str = "bnn-zoo sweep") -> int:
    """``bnn-zoo sweep``: exit 0 when every fit is in the store, 2 on bad input.

    Prints the counts of the sweep's fits on stderr and, at the end, the
    fits made, their rate and the table's path.

    Parameters
    ----------
    argv : sequence of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo sweep"
        The program's name in usage and error messages.

    Returns
    -------
    int
        The exit code: 0 on success and for ``--help``; 2 on bad flags or
        input, or when another sweep is writing the store (a one-line error
        on stderr); 130 on an interrupt, after which the same command goes
        on.
    """
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0), or a bad flag: argparse's one line (2)
        return exit_.code
    try:
        check(args)
        runner.use_compilation_cache()
        # in this process (--workers 1) the flags apply if JAX has not started yet
        with runner._lock(args.out), warnings.catch_warnings(), runner._xla_flags(xla_flags()):
            warnings.simplefilter("ignore", UserWarning)  # k-hat and convergence are in the records
            t0 = time.perf_counter()
            path, fitted = run_sweep(args, report=lambda line: print(line, file=sys.stderr))
            seconds = time.perf_counter() - t0
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted (rerun the same command to go on)", file=sys.stderr)
        return 130
    rate = f" ({fitted / seconds:.2f} fits/s)" if fitted else ""
    print(f"{fitted} fits in {seconds:.1f} s{rate}; table: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
