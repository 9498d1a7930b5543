"""One method of ``bnn-zoo alternatives`` on one case: fit, predict and store, in a process of its own.

:func:`run_one` fits a method (:func:`posterior`; MC dropout its own
network), predicts at the case's input sets (:func:`predictions`) and
stores the predictive draws and a record with the seconds and the peak
memory (:func:`~bnn_zoo.experiments.harness.resources.peak_rss_mb`) in the
:class:`~bnn_zoo.experiments.harness.store.Store`; :func:`load_draws` reads the
draws back.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnn_zoo.experiments.alternatives.cases import BENCHES, MNIST, Benchmark, Spec
from bnn_zoo.experiments.harness.resources import peak_rss_mb
from bnn_zoo.experiments.harness.runtime import add_xla_flag, worker_xla_flags
from bnn_zoo.experiments.harness.store import Store

__all__ = ["load_draws", "posterior", "predictions", "run_one"]


def _advi(model, s: dict, method: str, seed: int):
    """The experiment's ADVI: restarts picked early (or pooled), full-rank from the mean-field fit."""
    import bnn_zoo
    from bnn_zoo.inference.advi import optim

    def opt(lr):
        return optim.make("adam", lr, s["steps"], schedule_kind="cosine", final=s["lr_final"])

    shared = dict(steps=s["steps"], batch_size=s.get("batch_size"),
                  method=bnn_zoo.MeanField(init_std=s.get("init_std", 0.01)),
                  objective=bnn_zoo.ELBO(path_derivative=False))
    if method == "advi_mixture":
        fits = bnn_zoo.fit_many([model] * s["restarts"], random_seed=list(range(seed, seed + s["restarts"])),
                                optimizer=opt(s["lr"]), **shared)
    elif s["restarts"] > 1:
        fits = bnn_zoo.fit_many([model], random_seed=seed, optimizer=opt(s["lr"]), restarts=s["restarts"],
                                pick_at=s["pick_at"], **shared)
    else:
        fits = [bnn_zoo.fit(model, optimizer=opt(s["lr"]), random_seed=seed, progressbar=False, **shared)]
    if method == "fullrank_advi":
        fits = [bnn_zoo.fit(model, init=fits[0], optimizer=opt(s["fullrank_lr"]), random_seed=seed,
                            progressbar=False, **dict(shared, method="fullrank_advi"))]
    tree = bnn_zoo.sample(fits, s["draws"], random_seed=seed, log_likelihood=False, var_names=())
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
        A name of :data:`~bnn_zoo.experiments.alternatives.cases.METHODS` other than ``"mc_dropout"``.
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
    from bnn_zoo.inference.alternatives import baselines as alt

    prior = getattr(bench, "best_prior", bench.prior) if method == "advi_best_prior" else bench.prior
    model = bench.model(prior)
    s = dict(bench.settings["advi" if method.startswith(("advi", "fullrank")) else method])
    if method.startswith(("advi", "fullrank")):
        return model, _advi(model, s, method, seed)
    if method == "nuts":
        return model, alt.pymc_nuts(model, random_seed=seed, **s)
    if method in ("sgld", "csgld"):
        return model, alt.sgld(model, random_seed=seed, **s)
    if method == "ensemble":
        return model, alt.ensemble(model, random_seed=seed, **s)
    if method == "swag":
        return model, alt.swag(model, random_seed=seed, **s)
    raise ValueError(f"unknown method {method!r}")


def predictions(bench: Benchmark, method: str, seed: int) -> tuple[dict, dict]:
    """A method's predictive draws at each of the benchmark's input sets, and how the fit went.

    Parameters
    ----------
    bench : Benchmark
        The case.
    method : str
        A name of :data:`~bnn_zoo.experiments.alternatives.cases.METHODS`.
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
    from bnn_zoo.inference.alternatives import dropout

    names = [bench.var] + (["sigma"] if bench.var == "mu" else [])
    t0 = time.perf_counter()
    if method == "mc_dropout":
        s = bench.settings[method]
        net = dropout.fit_dropout(**bench.dropout_data, **s["fit"], random_seed=seed)
        fit_seconds, fit_rss = time.perf_counter() - t0, peak_rss_mb()
        out = {k: dropout.predict_dropout(net, X, draws=s["draws"], random_seed=seed)["predictions"] for k, X in bench.inputs().items()}
        info = {"converged": None}
    else:
        model, tree = posterior(bench, method, seed)
        fit_seconds, fit_rss = time.perf_counter() - t0, peak_rss_mb()
        chunk = 2000 if isinstance(bench, MNIST) else None
        out = {k: predict(model, {"X": X}, idata=tree, var_names=names, random_seed=seed,
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
        A name of :data:`~bnn_zoo.experiments.alternatives.cases.METHODS`.
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

    from bnn_zoo.inference.support.io import atomic_write

    for flag in worker_xla_flags():
        add_xla_flag(flag)
    bench = BENCHES[spec.benchmark](spec)
    # Peak memory at three points: after the imports and the data (what every method's process
    # holds before it starts), after the fit, and after the predictions.
    before = peak_rss_mb()
    t0 = time.perf_counter()
    arrays, info = predictions(bench, method, spec.seed)
    record = {"key": f"{spec.key_prefix}-{method}", "benchmark": spec.benchmark, "case": spec.case,
              "seed": spec.seed, "quick": spec.quick, "method": method, **info,
              "seconds": time.perf_counter() - t0, "rss_before_mb": before, "peak_rss_mb": peak_rss_mb()}
    store = Store(Path(out))
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
