"""A prior sweep's tasks: fits of one structure as one vmapped program, and their records.

:func:`fit_task` fits a task of ``bnn-zoo sweep`` (a list of toy
configurations of one :func:`~bnn_zoo.experiments.sweep.spec.structure`)
together in a :class:`Batch`, and scores every fit's q as ``bnn-zoo moons``
would in one device program (:func:`~bnn_zoo.experiments.sweep.evaluation.score`);
the host makes the programs' noise and writes the records. :func:`kfold_task` refits each on K folds
of its training data, :func:`kfold_elpd` turns a record's folds into
ArviZ's ELPD, and :func:`bayes_task` is a data set's Bayes-optimal
reference. They run on a Dask worker or in this process, and write nothing.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import jax
import numpy as np

from bnn_zoo.cache import count_programs
from bnn_zoo.experiments.harness.runner import make_optimizer
from bnn_zoo.experiments.sweep import evaluation
from bnn_zoo.experiments.sweep.spec import KEY_FIELDS, fit_key, indices, structure
from bnn_zoo.experiments.toy import priors as toy
from bnn_zoo.inference.posterior import restarts
from bnn_zoo.models.layers import select

__all__ = ["TIMES", "Batch", "bayes_task", "describe_times", "evaluate", "fit_task", "folds", "kfold_elpd", "kfold_task",
           "scores", "shared_record", "time_split"]

#: A record's timings, each its fit's share of its task's seconds (:func:`fit_task`): the fit
#: program (its compilation and first chunk of steps included), their compilation and first chunk,
#: the evaluation program, its compilation, and the whole task.
TIMES = ("fit_seconds", "fit_compile_seconds", "evaluate_seconds", "evaluate_compile_seconds", "task_seconds")


class Batch:
    """Fits of one structure (each with its restarts) run as one vmapped program.

    ``trains[i]`` is fit ``i``'s training data ``(X, y)``, all of one
    shape; the model is the structure's, made once in a process.
    :meth:`candidates` are the rows of :attr:`out` fit
    ``i`` picks its q from (its restarts, when they were not picked early),
    and :meth:`qs` their q's, stacked for a device program.

    Parameters
    ----------
    cfgs : list of ToyConfig
        Fits of one :func:`~bnn_zoo.experiments.sweep.spec.structure`; the
        first's settings are the fit's.
    trains : list of tuple of numpy.ndarray
        Each fit's training data ``(X, y)``.
    optimizer : optional
        Replaces the configs' own
        (:func:`~bnn_zoo.experiments.harness.runner.make_optimizer`), for benchmarks
        of other schedules.
    choice : tuple of (list of str, list of str), optional
        The structure's priors and hyperpriors
        (:func:`~bnn_zoo.experiments.sweep.spec.choices`); ``None``: the
        fits' one pair.

    Attributes
    ----------
    model : pymc.Model
        The structure's model (its prior ``choice``), made once in a process
        on the first data it met (the programs take the data as arguments).
    layout, density, family
        Its layout, compiled density and q's family.
    trains : list of list of numpy.ndarray
        Each fit's training data as the model's data containers.
    out
        The stacked fits (:func:`bnn_zoo.inference.advi.batch.run_stacked`'s
        result), one row per fit and restart.
    """

    def __init__(self, cfgs: list[toy.ToyConfig], trains: list[tuple[np.ndarray, np.ndarray]],
                 optimizer=None, choice: tuple | None = None):
        import bnn_zoo
        from bnn_zoo.inference import families, methods
        from bnn_zoo.inference.advi.batch import run_stacked
        from bnn_zoo.inference.advi.starts import initial_mean

        cfg0 = cfgs[0]
        self.cfgs, self.R, self.choice = cfgs, cfg0.restarts, choice
        known = _structure_model(cfgs, *trains[0], choice)
        self.model, self.layout, self.density, points = (known[k] for k in ("model", "layout", "density", "points"))
        self.dtypes = {v.name: np.asarray(v.get_value()).dtype for v in self.model.data_vars}
        self.trains = [self.data(X, y, cfg) for (X, y), cfg in zip(trains, cfgs)]
        seeds = [c.fit_seed + k for c in cfgs for k in range(self.R)]
        means = [initial_mean(self.layout, points[tuple(indices(c, choice).items())], c.fit_seed + k)
                 for c in cfgs for k in range(self.R)]
        stacked = [np.stack([train[j] for train in self.trains for _ in range(self.R)])
                   for j in range(len(self.dtypes))]
        early = cfg0.early_pick(cfg0.steps) > 0  # else every restart is a fit of its own, picked below
        self.out = run_stacked(self.model, self.density, np.stack(means),
                               stacked, seeds, method=methods.spec(cfg0.method, cfg0.init_std),
                               steps=cfg0.steps, optimizer=optimizer or make_optimizer(cfg0, cfg0.lr, cfg0.steps),
                               objective=bnn_zoo.ELBO(beta=cfg0.beta, mc_samples=cfg0.mc_samples,
                                                      path_derivative=cfg0.path_derivative, estimator=cfg0.estimator),
                               average=cfg0.average, restarts=self.R if early else 1,
                               pick_at=cfg0.pick_at if early else 0.0)
        self.family = families.get(self.out.config["method"])  # the family that ran

    def data(self, X, y, cfg: toy.ToyConfig) -> list[np.ndarray]:
        """``X``, ``y`` and the index of ``cfg``'s pair (:func:`~bnn_zoo.experiments.sweep.spec.indices`)
        as the model's data containers, in their order and dtypes."""
        values = {"X": X, "y": y, **indices(cfg, self.choice)}
        return [np.asarray(values[name], dtype) for name, dtype in self.dtypes.items()]

    def params(self, row: int) -> dict:
        """q's parameters of one row (a fit's restart) of :attr:`out`."""
        return {k: v[row] for k, v in self.out.params.items()}

    @property
    def late_pick(self) -> bool:
        """Whether each fit's restarts all ran to the end, to be picked by q's ELBO."""
        return self.out.picked is None and self.R > 1

    def candidates(self, i: int) -> list[int]:
        """The rows of :attr:`out` fit ``i`` picks from: its restarts with :attr:`late_pick`, else its row."""
        return list(range(i * self.R, (i + 1) * self.R)) if self.late_pick else [i]

    def qs(self, rows: list[list[int]]) -> tuple:
        """``(mean, factor)`` of the rows, stacked ``(len(rows), len(rows[0]), ...)``."""
        qs = [[self.family.mean_and_factor(self.params(r)) for r in group] for group in rows]
        return jax.tree_util.tree_map(lambda *a: np.stack(a), *[jax.tree_util.tree_map(
            lambda *b: np.stack(b), *group) for group in qs])


#: Each structure's model, compiled, and its pairs' initial points: made once in a process.
_STRUCTURES: dict[str, dict] = {}
_STRUCTURES_LOCK = threading.Lock()


def _structure_model(cfgs: list[toy.ToyConfig], X: np.ndarray, y: np.ndarray, choice: tuple | None) -> dict:
    """The model of ``cfgs``' structure and training data's shape (built on the first data it met
    in this process: the programs take the data as arguments), its ``layout``, its ``density`` and the ``points``
    of its pairs, by their indices (``model.initial_point()`` with the pair's index set)."""
    import bnn_zoo
    from bnn_zoo.data.toy import Split
    from bnn_zoo.inference.compile.jaxmodel import Layout, compile_model
    from pymc.initial_point import make_initial_point_fn

    cfg0 = cfgs[0]
    priors, hyperpriors = choice or ([cfg0.prior], [cfg0.hyperprior])
    key = json.dumps([repr(structure(cfg0)), np.shape(X), priors, {h: toy.hyperprior_params(h) for h in hyperpriors}],
                     sort_keys=True)  # the data's shape too: a K-fold refit's rows are fewer
    # Under the sweep's precision: PyMC builds the log density when it is asked for, and a float32
    # model's, built under float64, would compute in float64 (tests/test_sweep.py checks).
    with _STRUCTURES_LOCK, bnn_zoo.precision(cfg0.float32):  # one task at a time sets a model's index
        if key not in _STRUCTURES:
            _STRUCTURES[key] = {"model": toy.model(cfg0, Split(X, y, X[:1], y[:1]), choice=choice), "points": {}}
        known = _STRUCTURES[key]
        missing = {tuple(indices(c, choice).items()) for c in cfgs} - set(known["points"])
        if missing:
            start = make_initial_point_fn(model=known["model"], return_transformed=True)
            for pair in sorted(missing):
                select(known["model"], dict(pair))
                known["points"][pair] = start(None)
        if "density" not in known:
            known["layout"] = Layout.of(known["model"], known["points"][tuple(indices(cfg0, choice).items())])
            known["density"] = compile_model(known["model"], known["layout"])
    return known


def fit_task(cfgs: list[toy.ToyConfig], keep_draws: bool = False, kfold: int = 0,
             choice: tuple | None = None) -> list[dict]:
    """Fit ``cfgs`` (one structure) together; one record each (and its DataTree with ``keep_draws``).

    With ``kfold`` K, also refit each on K folds of its training data
    (:func:`kfold_task`). Runs on a Dask worker or in this process, and
    writes nothing. The Bayes-optimal classifier's metrics and the gaps to
    them are not in the records:
    :func:`~bnn_zoo.experiments.sweep.command.run_sweep` adds them.

    Parameters
    ----------
    cfgs : list of ToyConfig
        Fits of one :func:`~bnn_zoo.experiments.sweep.spec.structure` (a task of
        :func:`~bnn_zoo.experiments.sweep.spec.tasks`).
    keep_draws : bool, default False
        Also make each fit's posterior draws, as :func:`bnn_zoo.sample`
        makes them.
    kfold : int, default 0
        The K of K-fold cross-validation of each fit; 0: none.
    choice : tuple of (list of str, list of str), optional
        The structure's priors and hyperpriors in the sweep
        (:func:`~bnn_zoo.experiments.sweep.spec.choices`); ``None``: the
        fits' one pair.

    Returns
    -------
    list of dict
        Per fit, in the order of ``cfgs``: ``"record"``, its row of the
        store (:func:`~bnn_zoo.experiments.sweep.spec.fit_key`'s ``key``,
        ``fit_of``, the key of the record whose fit it is (its own here; a
        :func:`shared_record`'s is another's), the settings, the convergence test, the test metrics, PSIS-LOO,
        q's ELBO, the restarts' ELBOs and the timings; with ``kfold``, ``elpd_kfold`` and its SE and
        pointwise values), and ``"draws"``, the fit's ArviZ DataTree or
        ``None``. ``xla_programs`` is the fit's share of the XLA programs
        its task built (compiled or read back from JAX's persistent cache,
        small helpers included): the sum over a sweep's records is its count
        where each process runs one task at a time (the sweep's workers
        have one thread each).
    """
    with count_programs() as built:
        records = _fit_task(cfgs, keep_draws, kfold, choice)
    for r in records:
        r["record"]["xla_programs"] = built[0] / len(cfgs)
    return records


def _fit_task(cfgs: list[toy.ToyConfig], keep_draws: bool, kfold: int, choice: tuple | None) -> list[dict]:
    from bnn_zoo.inference.diagnostics.convergence import convergence

    t0 = time.perf_counter()
    splits = [toy.data(c) for c in cfgs]
    batch = Batch(cfgs, [(s.X_train, s.y_train) for s in splits], choice=choice)
    rows = [batch.candidates(i) for i in range(len(cfgs))]
    timing = evaluation.Timing()
    out = evaluation.score(batch.density, batch.model.observed_RVs[0].name, batch.qs(rows),
                           _stack(batch.trains), _stack([batch.data(s.X_test, s.y_test, c) for s, c in zip(splits, cfgs)]),
                           np.stack([s.y_test for s in splits]), [c.seed for c in cfgs], cfgs[0].draws,
                           batch.late_pick, timing)
    records = []
    for i, cfg in enumerate(cfgs):
        k = int(out["picked"][i])
        chosen = rows[i][k]
        if batch.out.picked is not None:  # picked early, by the ELBO trace
            elbos, picked = batch.out.pick_scores[i].tolist(), int(batch.out.picked[i])
        else:
            elbos, picked = (out["elbos"][i].tolist(), k) if batch.late_pick else (None, None)
        tail = max(1, min(1000, cfg.steps // 10))
        key = fit_key(cfg, kfold)
        record = {
            "key": key, "fit_of": key, **_settings(cfg), "method": batch.family.name, "n_params": batch.layout.dim,
            **convergence(batch.out.elbo[chosen]).record(), **scores({k: v[i] for k, v in out.items()}),
            "elbo_final": float(np.mean(batch.out.elbo[chosen][-tail:])),
            "elbo_restarts": elbos, "picked_restart": picked,
            "fit_seconds": batch.out.seconds / len(cfgs),
            "fit_compile_seconds": batch.out.compile_seconds / len(cfgs),
            "evaluate_seconds": timing.run / len(cfgs), "evaluate_compile_seconds": timing.compile / len(cfgs),
            "batched_with": len(cfgs) * batch.R,
        }
        draws = _datatree(cfg, splits[i], batch, chosen) if keep_draws else None
        records.append({"record": record, "draws": draws})
    if kfold:
        for r, fold in zip(records, kfold_task(cfgs, splits, kfold, choice)):
            r["record"].update(fold)
    for r in records:
        r["record"]["task_seconds"] = (time.perf_counter() - t0) / len(cfgs)
    return records


def shared_record(record: dict, cfg: toy.ToyConfig, kfold: int = 0) -> dict:
    """A fit's record as the record of ``cfg``, whose fit it is too (the same
    :func:`~bnn_zoo.experiments.sweep.spec.fit_identity`).

    Parameters
    ----------
    record : dict
        The fit's record (:func:`fit_task`'s, or a store's row).
    cfg : ToyConfig
        The settings to record it under: another pair's names for the same fit.
    kfold : int, default 0
        The sweep's ``--kfold`` (part of the key).

    Returns
    -------
    dict
        ``record`` with ``cfg``'s key and settings, ``fit_of`` the key of the record it comes from,
        and no time of its own: each of :data:`TIMES` and ``xla_programs`` 0, so that
        :func:`time_split` counts the fit once.
    """
    fit_of = record.get("fit_of")
    fit_of = fit_of if isinstance(fit_of, str) else record["key"]  # a record from before the field
    return {**record, "key": fit_key(cfg, kfold), "fit_of": fit_of, **_settings(cfg),
            **dict.fromkeys(TIMES, 0.0), "xla_programs": 0.0}


def time_split(records) -> dict:
    """Where the tasks' time went: each of :data:`TIMES`, and ``xla_programs``, summed over ``records``.

    Parameters
    ----------
    records : iterable of dict
        Records of :func:`fit_task` (a store's rows, as dicts); :func:`shared_record`'s add no time.

    Returns
    -------
    dict
        ``fits`` (the records), each field of :data:`TIMES` in seconds and
        ``xla_programs`` (the XLA programs the tasks built), summed over the
        records that have it; a field no record has is left out.
    """
    records = list(records)
    split = {"fits": len(records)}
    for field in (*TIMES, "xla_programs"):
        values = [r[field] for r in records if r.get(field) is not None and r[field] == r[field]]  # not NaN
        if values:
            split[field] = float(np.sum(values))
    return split


def describe_times(split: dict, seconds: float, workers: int) -> str:
    """:func:`time_split`'s sums in one line, beside a run's ``seconds`` on ``workers`` processes."""
    labels = {"fit_seconds": "fit programs", "fit_compile_seconds": "of which compiling them and their first steps",
              "evaluate_seconds": "evaluation programs", "evaluate_compile_seconds": "compiling them"}
    line = ", ".join(f"{label} {split[field]:,.1f} s" for field, label in labels.items() if field in split)
    if "task_seconds" in split:
        line += (f"; the tasks {split['task_seconds']:,.1f} s in all, {split['task_seconds'] / (seconds * workers):.0%}"
                 f" of the workers' time ({workers} x {seconds:,.1f} s)")
    if "xla_programs" in split:
        line += f"; {split['xla_programs']:,.0f} XLA programs built"
    n = split["fits"]
    return f"{n:,} fit{'s' * (n != 1)} made; their tasks' time, summed: {line}"


def _stack(datas: list[list[np.ndarray]]) -> tuple[np.ndarray, ...]:
    """Each data container's arrays of every fit, stacked on a leading axis."""
    return tuple(np.stack(parts) for parts in zip(*datas))


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


def kfold_task(cfgs: list[toy.ToyConfig], splits: list, k: int, choice: tuple | None = None) -> list[dict]:
    """K-fold cross-validation of each fit: the fit's settings refitted (vectorised) on ``k``
    training sets of ``n - n / k`` rows, each scored on its held-out rows by the log posterior
    predictive density ``log mean_s p(y_i | z_s)`` of ``draws`` draws of its q. Returns per
    fit ``elpd_kfold``, its SE (``sqrt(n) sd(elpd_i)``, as LOO's) and the pointwise values.

    All ``len(cfgs) * k`` refits run as one vmapped program, and are scored
    by one device program (:func:`~bnn_zoo.experiments.sweep.evaluation.fold_scores`).

    Parameters
    ----------
    cfgs : list of ToyConfig
        Fits of one :func:`~bnn_zoo.experiments.sweep.spec.structure`.
    splits : list of bnn_zoo.data.toy.Split
        Each fit's data; the folds cut its training set.
    k : int
        The folds (:func:`folds`, seeded by each fit's ``seed``).
    choice : tuple of (list of str, list of str), optional
        The structure's priors and hyperpriors, as :func:`fit_task`'s.

    Returns
    -------
    list of dict
        Per fit: ``kfold`` (``k``), ``elpd_kfold``, ``elpd_kfold_se`` and
        ``elpd_kfold_i`` (a list of each training point's value).
    """
    parts = [folds(cfg.n_train, k, cfg.seed) for cfg in cfgs]
    cases = [(i, held) for i, part in enumerate(parts) for held in part]  # one fit per fold
    keep = [np.setdiff1d(np.arange(cfgs[i].n_train), held) for i, held in cases]
    batch = Batch([cfgs[i] for i, _ in cases],
                  [(splits[i].X_train[rows], splits[i].y_train[rows]) for (i, _), rows in zip(cases, keep)],
                  choice=choice)
    lppd = evaluation.fold_scores(  # the folds are of equal size: k divides n_train (sweep.check)
        batch.density, batch.qs([batch.candidates(j) for j in range(len(cases))]), _stack(batch.trains),
        _stack([batch.data(splits[i].X_train[held], splits[i].y_train[held], cfgs[i]) for i, held in cases]),
        np.stack([splits[i].y_train[held] for i, held in cases]),
        [cfgs[i].seed for i, _ in cases], cfgs[0].draws, batch.late_pick)
    elpd = [np.empty(cfg.n_train) for cfg in cfgs]
    for j, (i, held) in enumerate(cases):
        elpd[i][held] = lppd[j]
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


def scores(out: dict) -> dict:
    """A fit's record fields from its row of :func:`~bnn_zoo.experiments.sweep.evaluation.score`'s arrays.

    Parameters
    ----------
    out : dict of str to numpy.ndarray
        The fit's arrays (one row of each).

    Returns
    -------
    dict
        The test metrics (:func:`bnn_zoo.evaluation.metrics.scores`),
        ``elpd_test`` and its SE (``None`` where a test point's predictive
        density is not finite), PSIS-LOO's ``elpd_loo``, ``elpd_loo_se``,
        ``p_loo``, ``pareto_k_max`` and ``pareto_k_bad_share`` (``None``
        where q's draws are not finite), and q's ELBO ``elbo_q`` and its SE.

    Raises
    ------
    ValueError
        Where an observation's importance ratios have a tail of one value,
        as ArviZ's PSIS.
    """
    from arviz_stats.base import array_stats

    finite = bool(np.isfinite(out["log_p"]).all() and np.isfinite(out["log_q"]).all())
    loo = {}
    if finite:
        if out["flat"]:
            raise ValueError("All tail values are the same")
        elpd, se, p_loo, _ = array_stats.loo_summary(out["elpd_i"], out["p_loo_i"])
        k = out["pareto_k"]
        loo = {"elpd_loo": float(elpd), "elpd_loo_se": float(se), "p_loo": float(p_loo),
               "pareto_k_max": float(np.max(k)), "pareto_k_bad_share": float(np.mean(k > 0.7))}
    lppd = out["lppd_i"]
    predicted = bool(np.isfinite(lppd).all())  # else q's draws gave NaN probabilities: no metrics
    test = {name: float(out[name]) for name in ("accuracy", "nll", "brier", "ece")}
    test.update(elpd_test=float(lppd.sum()), elpd_test_se=_se(lppd))
    return {
        **{name: value if predicted else None for name, value in test.items()},
        **{k: loo.get(k) for k in ("elpd_loo", "elpd_loo_se", "p_loo", "pareto_k_max", "pareto_k_bad_share")},
        **dict(zip(("elbo_q", "elbo_q_se"), (None if np.isnan(v) else v for v in
                                             restarts.draws_elbo(out["log_p"], out["log_q"])))),
    }


def evaluate(density, q, train, test, y_test, cfg, observed: str) -> dict:
    """The toy experiment's metrics of one q, with :func:`bnn_zoo.sample`'s draws (seed ``cfg.seed``).

    :func:`~bnn_zoo.experiments.sweep.evaluation.score` for one fit, and
    :func:`scores` of it.

    Parameters
    ----------
    density : bnn_zoo.inference.compile.jaxmodel.ModelFunction
        The compiled model (a :class:`Batch`'s ``density``).
    q : tuple of numpy.ndarray
        q's mean and factor.
    train : list of numpy.ndarray
        The training data, as the model's data containers (for PSIS-LOO).
    test : list of numpy.ndarray
        The test inputs, as the model's data containers.
    y_test : numpy.ndarray
        The test labels.
    cfg : ToyConfig
        The fit's settings (``draws`` and ``seed``).
    observed : str
        The name of the model's observed variable.

    Returns
    -------
    dict
        :func:`scores`.
    """
    one = jax.tree_util.tree_map(lambda a: np.asarray(a)[None, None], q)
    out = evaluation.score(density, observed, one, _stack([train]), _stack([test]), np.asarray(y_test)[None],
                           [cfg.seed], cfg.draws, False)
    return scores({k: v[0] for k, v in out.items()})


def _datatree(cfg, split, batch: Batch, row: int):
    """The chosen fit's posterior draws as :func:`bnn_zoo.sample` writes them (the runner's idata)."""
    import bnn_zoo
    from bnn_zoo.inference.posterior.result import FitResult

    with bnn_zoo.precision(cfg.float32):
        model = toy.model(cfg, split, choice=batch.choice)  # the batch's model, on this fit's data
    select(model, indices(cfg, batch.choice))
    result = FitResult(model=model, family=batch.family, layout=batch.layout, params=batch.params(row),
                       elbo=batch.out.elbo[row], config=dict(batch.out.config, seed=cfg.seed), seconds=0.0,
                       compile_seconds=0.0, density=batch.density)
    tree = bnn_zoo.sample(result, cfg.draws, random_seed=cfg.seed, var_names=())
    # the pair's index is the batch's, not the fit's data: the tree is the one the toy run writes
    tree["constant_data"] = tree["constant_data"].to_dataset().drop_vars(list(indices(cfg, batch.choice)))
    return tree


def bayes_task(split_settings: dict) -> dict:
    """The Bayes-optimal classifier's accuracy, NLL and ELPD on one data set's test points.

    Parameters
    ----------
    split_settings : dict
        The data set's settings, by
        :data:`~bnn_zoo.experiments.sweep.spec.SPLIT_FIELDS` (what
        :func:`~bnn_zoo.experiments.sweep.spec.split_settings` returns).

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
