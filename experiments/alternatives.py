"""ADVI against the alternatives of seed 003, on the same models and data: ``bnn-zoo alternatives``.

    bnn-zoo alternatives toy          # moons, noise 0.2, N(0, 1) weights: every method against NUTS
    bnn-zoo alternatives regression   # sine, Blundell's curve, and the sine with a gap (Foong 2019)
    bnn-zoo alternatives mnist        # the 2x400 MLP: test error, rotations 0-180, OOD detection

Each method runs in its own process, one after another (``--processes 0``:
in this one), so that its wall time and peak memory are its own. A method's
predictions go to ``<out>/draws/<key>.nc`` and its record to
``<out>/records/<key>.parquet`` (the sweep store's layout; a run skips the
methods already there), where ``<key>`` is ``<benchmark>-<case>-s<seed>-<method>``.
Then each case's comparison goes to ``<out>/<benchmark>-<case>-s<seed>.csv``
and ``.md`` (MNIST adds ``..._shift.csv``, the metrics per rotation and
out-of-distribution set), and its figures to ``--figures``. With ``--quick``,
``-quick`` follows the seed in these names.

Methods (``--methods``): NUTS (``pm.sample`` with NumPyro), mean-field ADVI
with the experiment's defaults (``advi``), full-rank ADVI from it
(``fullrank_advi``), the mixture of 6 mean-field restarts (``advi_mixture``),
mean-field ADVI with the prior study's best pair (``advi_best_prior``, toy
only), SGLD, cyclical SGLD, a deep ensemble of 5 MAP fits, MC dropout
and SWAG (:mod:`bnn_zoo.inference.alternatives`, :mod:`bnn_zoo.inference.dropout`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bnn_zoo.experiments.cli import UsageError, check_writable, names, nonneg_int, positive_int

__all__ = ["BENCHES", "BENCHMARKS", "METHODS", "MNIST", "NOT_ON", "REGRESSION_TASKS", "Benchmark", "Regression",
           "Spec", "Toy", "build_parser", "compare", "load_draws", "main", "peak_rss_mb", "posterior",
           "predictions", "run_one", "specs"]

#: The methods ``--methods`` chooses from, in the order they run and appear in the tables.
METHODS = ("nuts", "advi", "fullrank_advi", "advi_mixture", "advi_best_prior", "sgld", "csgld", "ensemble",
           "mc_dropout", "swag")
#: The benchmarks, the command's positional argument.
BENCHMARKS = ("toy", "regression", "mnist")
#: The methods each benchmark does not run: NUTS and a full-rank q do not scale to the MNIST
#: MLP's 478,410 weights, and the prior study that picks ``advi_best_prior``'s pair was on toy data.
NOT_ON = {"mnist": ("nuts", "fullrank_advi", "advi_best_prior", "advi_mixture"),
          "regression": ("advi_best_prior",)}
#: The regression cases (``--cases``): the sine, Blundell's curve, and the sine with a gap.
REGRESSION_TASKS = ("sine", "blundell", "gap")


@dataclass(frozen=True)
class Spec:
    """One benchmark case: what a worker process needs to rebuild its data and models.

    Parameters
    ----------
    benchmark : {"toy", "regression", "mnist"}
        The benchmark.
    case : str
        ``"moons"`` or ``"circles"`` (toy), a name of :data:`REGRESSION_TASKS`, or ``"mlp2x400"``
        (MNIST).
    seed : int, default 0
        The data's and every method's seed.
    quick : bool, default False
        Tiny data and few steps (what the tests run).
    noise : float, default 0.2
        The toy data's noise.
    data_dir : str, optional
        MNIST's folder (default ``$MNIST_DIR`` or a download).
    epochs : int, default 10
        MNIST: epochs of every method.
    limit_train : int, optional
        MNIST: use the first ``limit_train`` training images.
    options : dict, default {}
        Extra settings; not part of the case's identity.
    """

    benchmark: str
    case: str  # "moons" / a regression task / "mlp2x400"
    seed: int = 0
    quick: bool = False  # CI's version: tiny data, few steps
    noise: float = 0.2
    data_dir: str | None = None
    epochs: int = 10
    limit_train: int | None = None
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key_prefix(self) -> str:
        """``<benchmark>-<case>-s<seed>`` (``-quick`` added): the start of the case's record keys."""
        return f"{self.benchmark}-{self.case}-s{self.seed}{'-quick' if self.quick else ''}"


# --- the benchmarks: data, model, inputs, settings --------------------------------


class Benchmark:
    """A benchmark case's data, PyMC model, prediction inputs and per-method settings.

    A subclass sets ``settings`` (each method's keyword arguments) and ``dropout_data`` (MC
    dropout's network and data) in its ``__init__``, and defines :meth:`model` and :meth:`inputs`.
    """

    var = "p"  # the predicted variable
    prior = ("normal", "fixed")

    def model(self, prior: tuple[str, str]):
        """The case's PyMC model under ``prior``, a (weight prior, hyperprior) pair of names."""
        raise NotImplementedError

    def inputs(self) -> dict[str, np.ndarray]:
        """The input sets every method predicts at, by name (``"test"`` among them)."""
        raise NotImplementedError


class Toy(Benchmark):
    """Moons (or circles), a 2-5-5-2 tanh net with N(0, 1) weights, where NUTS is the reference.

    The step sizes of SGLD, cyclical SGLD and SWAG are each chosen from 3-4 values by their
    agreement with NUTS on seed 0 (docs/user_guide/alternatives.md): a best case, which a user
    without a reference cannot tune to. ADVI runs with the toy experiment's defaults.

    Parameters
    ----------
    spec : Spec
        The case.
    """

    GRID = 60

    def __init__(self, spec: Spec):
        from bnn_zoo.data import toy

        self.spec = spec
        n_train, n_test = (200, 100) if spec.quick else (700, 1000)
        self.split = toy.load(spec.case, n_train=n_train, n_test=n_test, noise=spec.noise, seed=spec.seed)
        self.xx, self.yy, self.grid = self.split.grid(self.GRID)
        steps = 400 if spec.quick else 10_000
        self.settings = {
            "nuts": dict(draws=60, tune=60, chains=2) if spec.quick else dict(draws=1000, tune=1000, chains=4),
            "advi": dict(steps=steps, lr=0.05, lr_final=0.01, restarts=2 if spec.quick else 6, pick_at=0.2,
                         fullrank_lr=0.001, draws=100 if spec.quick else 1000),
            "sgld": dict(steps=1000 if spec.quick else 100_000, lr=0.3, thin=10 if spec.quick else 50),
            "csgld": dict(steps=1000 if spec.quick else 100_000, lr=1.0, cycles=4, explore=0.5,
                          thin=10 if spec.quick else 25),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps, lr=0.01),
            "mc_dropout": dict(fit=dict(steps=steps, lr=0.01, rate=0.1), draws=100 if spec.quick else 1000),
            "swag": dict(map_steps=steps, map_lr=0.01, steps=200 if spec.quick else 5_000, lr=0.1,
                         batch_size=50, collect_every=10, rank=20, draws=100 if spec.quick else 1000),
        }
        self.best_prior = ("laplace", "fixed")  # best by held-out ELPD at moons 0.2 (docs/user_guide/comparing_priors.md)
        self.dropout_data = dict(X=self.split.X_train, y=self.split.y_train, kind="classifier", hidden=(5, 5),
                                 activation="tanh")

    def model(self, prior):
        from bnn_zoo.experiments import toy

        return toy.model(toy.ToyConfig(prior=prior[0], hyperprior=prior[1]), self.split)

    def inputs(self):
        return {"test": self.split.X_test, "grid": self.grid}


class Regression(Benchmark):
    """A 1-D regression task, with the regression experiment's architecture and ADVI settings.

    Parameters
    ----------
    spec : Spec
        The case (``"gap"``: the sine with :data:`bnn_zoo.data.regression.GAP` left out).
    """

    var = "mu"

    def __init__(self, spec: Spec):
        from bnn_zoo.data import regression
        from bnn_zoo.experiments.regression import ARCHITECTURE, DEFAULTS

        self.spec = spec
        task = "sine" if spec.case == "gap" else spec.case
        self.task = regression.load(task, n_train=60 if spec.quick else None, seed=spec.seed,
                                    gap=regression.GAP if spec.case == "gap" else None)
        arch = ARCHITECTURE[task]
        self.hidden, self.activation = arch["hidden"], arch["activation"]
        steps = 500 if spec.quick else DEFAULTS["steps"]
        self.settings = {
            # Regression posteriors make NUTS take its deepest trees (1,024 steps): 4 x 500 draws.
            "nuts": dict(draws=60, tune=60, chains=2) if spec.quick else dict(draws=500, tune=500, chains=4),
            "advi": dict(steps=steps, lr=DEFAULTS["lr"], lr_final=DEFAULTS["lr_final"], restarts=2 if spec.quick else 5,
                         pick_at=0.2, fullrank_lr=DEFAULTS["fullrank_lr"], draws=100 if spec.quick else 1000),
            "sgld": dict(steps=1000 if spec.quick else 100_000, lr=0.01, thin=10 if spec.quick else 50),
            "csgld": dict(steps=1000 if spec.quick else 100_000, lr=0.02, cycles=4, explore=0.5,
                          thin=10 if spec.quick else 25),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps // 2, lr=0.01),
            "mc_dropout": dict(fit=dict(steps=steps // 2, lr=0.01, rate=0.1), draws=100 if spec.quick else 1000),
            "swag": dict(map_steps=steps // 2, map_lr=0.01, steps=200 if spec.quick else 5_000, lr=0.01,
                         batch_size=20, collect_every=10, rank=20, draws=100 if spec.quick else 1000),
        }
        self.dropout_data = dict(X=self.task.x_train[:, None], y=self.task.y_train, kind="regressor",
                                 hidden=self.hidden, activation=self.activation)

    def model(self, prior):
        from bnn_zoo.models.mlp import mlp_regressor

        return mlp_regressor(self.task.x_train[:, None], self.task.y_train, hidden=self.hidden,
                             activation=self.activation, prior=prior[0], hyperprior=prior[1])

    def inputs(self):
        return {"grid": self.task.x_grid[:, None], "test": self.task.x_test[:, None]}


class MNIST(Benchmark):
    """The 2x400 ReLU MLP of the reproduction table, N(0, 1) weights, on flat [0, 1] images, in float32.

    Every method predicts the test images rotated by :attr:`ANGLES` and the out-of-distribution
    sets of :func:`bnn_zoo.data.shift.ood_sets`.

    Parameters
    ----------
    spec : Spec
        The case (its epochs, training images and data folder).
    """

    ANGLES = tuple(range(0, 181, 15))
    HIDDEN = (400, 400)

    def __init__(self, spec: Spec):
        from bnn_zoo.data import mnist, shift

        self.spec = spec
        d = mnist.load(spec.data_dir, normalize="255", seed=spec.seed)
        n = spec.limit_train or len(d.X_train)
        self.X_train, self.y_train = d.flat(d.X_train[:n]), d.y_train[:n]
        n_test = 200 if spec.quick else len(d.X_test)
        images, self.y_test = d.X_test[:n_test, 0], d.y_test[:n_test]
        self.sets = {f"rot{a}": d.flat(shift.rotate(images, a)[:, None]) for a in self.ANGLES}
        rng = np.random.default_rng(spec.seed)
        self.sets.update(shift.ood_sets(images, rng, n_noise=200 if spec.quick else 2_000))
        self.sets = {k: d.flat(v[:, None]) if v.ndim == 3 else v for k, v in self.sets.items()}
        per_epoch = len(self.X_train) // 128
        steps = spec.epochs * per_epoch
        draws = 4 if spec.quick else 20
        self.settings = {
            "advi": dict(steps=steps, lr=1e-3, lr_final=0.01, restarts=1, pick_at=0, batch_size=128,
                         init_std=0.03, draws=draws),
            "sgld": dict(steps=steps, lr=0.05, thin=max(steps // (2 * draws), 1), batch_size=128),
            "csgld": dict(steps=steps, lr=0.1, cycles=max(min(4, steps // 10), 1), explore=0.5,
                          thin=max(steps // (2 * draws), 1), batch_size=128),
            "ensemble": dict(members=2 if spec.quick else 5, steps=steps, lr=1e-3, batch_size=128),
            "mc_dropout": dict(fit=dict(steps=steps, lr=1e-3, rate=0.2, batch_size=128), draws=draws),
            "swag": dict(map_steps=steps, map_lr=1e-3, steps=max(steps // 2, 2 * per_epoch), lr=0.01,
                         batch_size=128, collect_every=per_epoch if not spec.quick else 2,
                         rank=20 if not spec.quick else 2, draws=draws),
        }
        self.dropout_data = dict(X=self.X_train, y=self.y_train, kind="classifier", hidden=self.HIDDEN,
                                 activation="relu")

    def model(self, prior):
        import bnn_zoo
        from bnn_zoo.models import mlp_classifier

        with bnn_zoo.precision(True):  # as in the reproduction: float32 halves the step
            return mlp_classifier(self.X_train, self.y_train, hidden=self.HIDDEN, n_classes=10,
                                  activation="relu", prior=prior[0], hyperprior=prior[1])

    def inputs(self):
        return self.sets


#: Each benchmark's class.
BENCHES = {"toy": Toy, "regression": Regression, "mnist": MNIST}


# --- running one method ----------------------------------------------------------


def _advi(model, s: dict, method: str, seed: int):
    """The experiment's ADVI: restarts picked early (or pooled), full-rank from the mean-field fit."""
    import bnn_zoo
    from bnn_zoo.inference import optim
    from bnn_zoo.inference.advi import fullrank_from
    from bnn_zoo.inference.batch import fit_many, pick_step

    def opt(lr):
        return optim.make("adam", lr, s["steps"], schedule_kind="cosine", final=s["lr_final"])

    shared = dict(steps=s["steps"], batch_size=s.get("batch_size"), init_std=s.get("init_std", 0.01))
    if method == "advi_mixture":
        fits = fit_many([model] * s["restarts"], list(range(seed, seed + s["restarts"])), optimizer=opt(s["lr"]),
                        **shared)
    elif s["restarts"] > 1:
        fits = fit_many([model], [seed], optimizer=opt(s["lr"]), restarts=s["restarts"],
                        pick_at=pick_step(s["pick_at"], s["steps"]), **shared)
    else:
        fits = [bnn_zoo.fit(model, optimizer=opt(s["lr"]), seed=seed, progressbar=False, **shared)]
    if method == "fullrank_advi":
        fits = [fullrank_from(model, fits[0], optimizer=opt(s["fullrank_lr"]), seed=seed, progressbar=False,
                              **shared)]
    tree = bnn_zoo.sample(fits, s["draws"], seed=seed, log_likelihood=False, var_names=())
    tree.attrs.update(method=method, converged=all(f.convergence.converged for f in fits),
                      seconds=float(sum(f.seconds for f in fits)))
    return tree


def posterior(bench: Benchmark, method: str, seed: int):
    """A method's posterior draws on the benchmark's model (any method but MC dropout).

    Parameters
    ----------
    bench : Benchmark
        The case.
    method : str
        A name of :data:`METHODS` other than ``"mc_dropout"``.
    seed : int
        The method's seed.

    Returns
    -------
    model : pymc.Model
        The model (``advi_best_prior``: under the case's best prior pair).
    tree : xarray.DataTree
        The posterior draws, with how the fit went in its ``attrs``.

    Raises
    ------
    ValueError
        For an unknown method.
    """
    from bnn_zoo.inference import alternatives as alt

    prior = getattr(bench, "best_prior", bench.prior) if method == "advi_best_prior" else bench.prior
    model = bench.model(prior)
    s = dict(bench.settings["advi" if method.startswith(("advi", "fullrank")) else method])
    if method.startswith(("advi", "fullrank")):
        return model, _advi(model, s, method, seed)
    if method == "nuts":
        return model, alt.nuts(model, seed=seed, **s)
    if method in ("sgld", "csgld"):
        return model, alt.sgld(model, seed=seed, **s)
    if method == "ensemble":
        return model, alt.ensemble(model, seed=seed, **s)
    if method == "swag":
        return model, alt.swag(model, seed=seed, **s)
    raise ValueError(f"unknown method {method!r}")


def predictions(bench: Benchmark, method: str, seed: int) -> tuple[dict, dict]:
    """A method's predictive draws at each of the benchmark's input sets, and how the fit went.

    Parameters
    ----------
    bench : Benchmark
        The case.
    method : str
        A name of :data:`METHODS`.
    seed : int
        The method's seed.

    Returns
    -------
    arrays : dict of str to numpy.ndarray
        ``"<input set>/<variable>"``: draws x points (x classes) of ``bench.var`` (and ``sigma``
        for a regressor), in float32, chains flattened into draws.
    info : dict
        Fit and prediction seconds, the fit's peak memory, the chains, convergence, and for NUTS
        the predictions' r-hat.
    """
    from bnn_zoo import predict
    from bnn_zoo.inference import dropout

    names = [bench.var] + (["sigma"] if bench.var == "mu" else [])
    t0 = time.perf_counter()
    if method == "mc_dropout":
        s = bench.settings[method]
        net = dropout.fit(**bench.dropout_data, **s["fit"], seed=seed)
        fit_seconds, fit_rss = time.perf_counter() - t0, peak_rss_mb()
        out = {k: dropout.predict(net, X, draws=s["draws"], seed=seed)["predictions"] for k, X in bench.inputs().items()}
        info = {"converged": None}
    else:
        model, tree = posterior(bench, method, seed)
        fit_seconds, fit_rss = time.perf_counter() - t0, peak_rss_mb()
        chunk = 2000 if isinstance(bench, MNIST) else None
        out = {k: predict(model, {"X": X}, idata=tree, var_names=names, seed=seed,
                          chunk=chunk if chunk and len(X) > chunk else None)["predictions"]
               for k, X in bench.inputs().items()}
        info = {k: v for k, v in tree.attrs.items() if isinstance(v, (int, float, str, bool))}
        if method == "nuts":
            info.update(_nuts_checks(out["test"][bench.var].values))
    arrays = {}
    for k, pred in out.items():
        for name in names:
            v = np.asarray(pred[name].values)
            arrays[f"{k}/{name}"] = v.reshape(-1, *v.shape[2:]).astype("float32")
    chains = out[next(iter(out))][bench.var].sizes["chain"]
    info.update(fit_seconds=fit_seconds, predict_seconds=time.perf_counter() - t0 - fit_seconds, chains=chains,
                fit_peak_rss_mb=fit_rss)
    return arrays, info


_peak_seen = 0.0  # MB: the largest reading so far in this process


def peak_rss_mb() -> float:
    """This process's own peak resident memory so far, in MB (never less than an earlier reading).

    Returns
    -------
    float
        The peak, in MB.

    Notes
    -----
    On Linux, ``VmHWM`` of ``/proc/self/status``. Not ``ru_maxrss``: Linux
    carries a process's peak across fork and exec into its children, so a
    spawned worker's ``ru_maxrss`` is at least its parent's peak. ``VmHWM``
    itself can read a few kB lower than before (the kernel updates its
    high-water mark when memory is unmapped, not when pages are released in
    place), so the reading is the largest seen.
    """
    global _peak_seen
    _peak_seen = max(_peak_seen, _read_peak_rss_mb())
    return _peak_seen


def _read_peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def _nuts_checks(pred: np.ndarray) -> dict:
    """r-hat of the predictions (chains, draws, points[, classes]): the largest, and the share > 1.01."""
    from arviz_stats.base import array_stats

    flat = pred.reshape(pred.shape[0], pred.shape[1], -1)
    flat = flat[..., np.ptp(flat, axis=(0, 1)) > 0]
    rhat = np.asarray(array_stats.rhat(flat, chain_axis=0, draw_axis=1))
    return {"rhat_pred_max": float(np.max(rhat)), "rhat_pred_over_101": float(np.mean(rhat > 1.01))}


def run_one(spec: Spec, method: str, out: str) -> dict:
    """Fit, predict and store one method (in a worker process: its time and memory are its own).

    Parameters
    ----------
    spec : Spec
        The case.
    method : str
        A name of :data:`METHODS`.
    out : str
        The store's folder: the draws go to ``draws/<key>.nc``, the record to
        ``records/<key>.parquet``.

    Returns
    -------
    dict
        The record: the key, case and method, :func:`predictions`' info, the seconds and the
        peak memory before the fit and at the end.
    """
    import xarray as xr

    from bnn_zoo.experiments import runner, sweep
    from bnn_zoo.inference.io import atomic_write

    for flag in sweep.xla_flags():
        runner.add_xla_flag(flag)
    bench = BENCHES[spec.benchmark](spec)
    # Peak memory at three points: after the imports and the data (what every method's process
    # holds before it starts), after the fit, and after the predictions.
    before = peak_rss_mb()
    t0 = time.perf_counter()
    arrays, info = predictions(bench, method, spec.seed)
    record = {"key": f"{spec.key_prefix}-{method}", "benchmark": spec.benchmark, "case": spec.case,
              "seed": spec.seed, "quick": spec.quick, "method": method, **info,
              "seconds": time.perf_counter() - t0, "rss_before_mb": before, "peak_rss_mb": peak_rss_mb()}
    store = sweep.Store(Path(out))
    store.open()
    ds = xr.Dataset({k.replace("/", "__"): (tuple(f"{k.replace('/', '__')}_{i}" for i in range(v.ndim)), v)
                     for k, v in arrays.items()})
    atomic_write(store.draws / f"{record['key']}.nc", lambda tmp: ds.to_netcdf(tmp))
    store.write(record)
    return record


def load_draws(out: Path, key: str) -> dict[str, np.ndarray]:
    """A stored method's predictive draws, as :func:`run_one` wrote them.

    Parameters
    ----------
    out : pathlib.Path
        The store's folder.
    key : str
        The record's key, ``<benchmark>-<case>-s<seed>-<method>``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"<input set>/<variable>"``: the draws.
    """
    import xarray as xr

    with xr.open_dataset(out / "draws" / f"{key}.nc") as ds:
        return {k.replace("__", "/"): ds[k].values for k in ds.data_vars}


# --- comparing the methods -----------------------------------------------------------


def compare(spec: Spec, bench: Benchmark, out: Path, methods: list[str], figures: Path) -> "pd.DataFrame":
    """The benchmark's table (methods as rows), written to ``out``; and its figures.

    Writes ``<out>/<key prefix>.csv`` and ``.md`` (and, for MNIST, ``<key prefix>_shift.csv``), and
    the figures of :func:`bnn_zoo.evaluation.alternatives.figures` into ``figures``.

    Parameters
    ----------
    spec : Spec
        The case.
    bench : Benchmark
        The case's data and inputs.
    out : pathlib.Path
        The store's folder, with every method's draws and record.
    methods : list of str
        The methods to compare.
    figures : pathlib.Path
        The figures' folder.

    Returns
    -------
    pandas.DataFrame
        The table: :func:`bnn_zoo.evaluation.alternatives.table`'s metrics, and each method's
        seconds, peak memory and checks.
    """
    import pandas as pd

    from bnn_zoo.evaluation import alternatives as report
    from bnn_zoo.experiments.sweep import Store

    store = Store(out)
    records = store.table([f"{spec.key_prefix}-{m}" for m in methods]).set_index("method")
    draws = {m: load_draws(out, f"{spec.key_prefix}-{m}") for m in methods}
    table = report.table(spec.benchmark, bench, draws)
    table = table.join(records[[c for c in ("seconds", "fit_seconds", "predict_seconds", "rss_before_mb",
                                            "fit_peak_rss_mb", "peak_rss_mb",
                                            "divergences", "rhat_pred_max", "rhat_pred_over_101", "converged")
                                if c in records]])
    table.index.name = "method"
    report.figures(spec.benchmark, bench, draws, figures, spec.key_prefix)
    from bnn_zoo.inference.io import atomic_write, write_text

    atomic_write(out / f"{spec.key_prefix}.csv", lambda tmp: table.to_csv(tmp, float_format="%.6g"))
    if spec.benchmark == "mnist":
        shift = report.shift_table(bench, draws)
        atomic_write(out / f"{spec.key_prefix}_shift.csv", lambda tmp: shift.to_csv(tmp, index=False,
                                                                                 float_format="%.6g"))
    write_text(out / f"{spec.key_prefix}.md", report.markdown(table))
    return table


# --- the command line ----------------------------------------------------------------


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The command's flags.

    Parameters
    ----------
    prog : str
        The command's name in help and errors.

    Returns
    -------
    argparse.ArgumentParser
        The parser.
    """
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("benchmark", choices=BENCHMARKS)
    p.add_argument("--methods", type=names(METHODS), default=None,
                   help=f"comma-separated, from {', '.join(METHODS)} (default: all the benchmark runs)")
    p.add_argument("--cases", type=str, default=None,
                   help="toy: the data set (moons or circles; default moons); regression: tasks from "
                        f"{', '.join(REGRESSION_TASKS)} (default all)")
    p.add_argument("--noise", type=float, default=0.2, help="toy: the data's noise (default 0.2)")
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--epochs", type=positive_int, default=10, help="mnist: epochs of every method (default 10)")
    p.add_argument("--limit-train", type=positive_int, default=None, help="mnist: use the first N training images")
    p.add_argument("--data-dir", default=None, help="mnist: folder of the IDX files (default $MNIST_DIR or a download)")
    p.add_argument("--quick", action="store_true", help="tiny data and few steps (what the tests run)")
    p.add_argument("--processes", type=int, choices=(0, 1), default=1,
                   help="1 (default): each method in a fresh process, for its own time and memory; 0: here")
    p.add_argument("--out", type=Path, default=Path("results/alternatives"))
    p.add_argument("--figures", type=Path, default=Path("figures/alternatives"))
    return p


def specs(args) -> list[Spec]:
    """The cases a command line asks for.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    list of Spec
        One per case of ``--cases`` (MNIST: one).

    Raises
    ------
    bnn_zoo.experiments.cli.UsageError
        For an unknown case, or a ``--noise`` outside (0, 10).
    """
    if args.benchmark == "toy":
        cases = (args.cases or "moons").split(",")
        bad = [c for c in cases if c not in ("moons", "circles")]
    elif args.benchmark == "regression":
        cases = (args.cases or ",".join(REGRESSION_TASKS)).split(",")
        bad = [c for c in cases if c not in REGRESSION_TASKS]
    else:
        cases, bad = ["mlp2x400"], []
    if bad:
        raise UsageError(f"--cases: unknown {', '.join(bad)}")
    if not (0 < args.noise < 10):
        raise UsageError(f"--noise must be in (0, 10), got {args.noise}")
    return [Spec(args.benchmark, c, seed=args.seed, quick=args.quick, noise=args.noise, data_dir=args.data_dir,
                 epochs=args.epochs, limit_train=args.limit_train) for c in cases]


def main(argv=None, prog: str = "bnn-zoo alternatives") -> int:
    """Run ``bnn-zoo alternatives``: every method not stored yet, then each case's comparison.

    Parameters
    ----------
    argv : list of str, optional
        The flags; default ``sys.argv[1:]``.
    prog : str, default "bnn-zoo alternatives"
        The command's name in help and errors.

    Returns
    -------
    int
        The exit code: 0 on success, 2 on a bad flag value, a missing MNIST or an unwritable
        folder (one line on stderr, before any fit).
    """
    from bnn_zoo.experiments.sweep import Store

    args = build_parser(prog).parse_args(argv)
    try:
        todo = specs(args)
        methods = [m for m in (args.methods or METHODS) if m not in NOT_ON.get(args.benchmark, ())]
        skipped = sorted(set(args.methods or ()) & set(NOT_ON.get(args.benchmark, ())))
        if skipped:
            raise UsageError(f"--methods: {', '.join(skipped)} do not run on {args.benchmark}")
        if args.benchmark == "mnist":
            from bnn_zoo.data import mnist

            mnist.fetch(args.data_dir)  # a clear error before any fit
        check_writable(args.out, "--out")
        check_writable(args.figures, "--figures")
    except (UsageError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    for spec in todo:
        done = Store(args.out).done() if args.out.exists() else set()
        for method in methods:
            if f"{spec.key_prefix}-{method}" in done:
                print(f"{spec.key_prefix} {method}: done before (in {args.out})")
                continue
            record = _run(spec, method, args.out, args.processes)
            print(f"{spec.key_prefix} {method}: {record['seconds']:.1f} s, peak RSS {record['peak_rss_mb']:.0f} MB "
                  f"({record['rss_before_mb']:.0f} before the fit, {record['fit_peak_rss_mb']:.0f} after it)",
                  flush=True)
        bench = BENCHES[spec.benchmark](spec)
        table = compare(spec, bench, args.out, methods, args.figures)
        print(table.to_string(float_format=lambda v: f"{v:.4g}"))
    return 0


def _run(spec: Spec, method: str, out: Path, processes: int) -> dict:
    if not processes:
        return run_one(spec, method, str(out))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(run_one, spec, method, str(out)).result()


if __name__ == "__main__":
    sys.exit(main())
