"""Tables and figures of ``bnn-zoo alternatives``: every method's predictive draws, compared.

``draws[method]`` maps ``"<input set>/<variable>"`` to the method's draws
(draws first): ``test/p`` and ``grid/p`` (toy), ``grid/mu``, ``test/mu`` and
their ``sigma`` (regression), ``rot<angle>/p`` and the OOD sets' ``p``
(MNIST). Every method's metrics come from these arrays by the same code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnn_zoo.evaluation import metrics as M
from bnn_zoo.evaluation.sweeps import markdown as _markdown

__all__ = ["NEAR", "OOD", "REFERENCE", "REPLICAS", "figures", "markdown", "mnist_rows", "regression_row",
           "shift_table", "table", "toy_row"]

#: The method the others are measured against, where it ran.
REFERENCE = "nuts"
#: Toy: grid points closer than this to a training point count as near the data.
NEAR = 0.25
#: Regression: noise replicas per draw for the predictive interval.
REPLICAS = 4
#: MNIST: the out-of-distribution sets (:func:`bnn_zoo.data.shift.ood_sets`).
OOD = ("permuted", "uniform", "gaussian")


def markdown(table: pd.DataFrame) -> str:
    """A method table as Markdown, methods as rows.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`table`'s table.

    Returns
    -------
    str
        The table.
    """
    return _markdown(table, index=True) + "\n"


def _ratio(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a) / np.mean(b))


def toy_row(d: dict, ref: dict | None, bench) -> dict:
    """A toy method's metrics, and its distance to the reference's predictions near and far from the data.

    Parameters
    ----------
    d : dict of str to numpy.ndarray
        One method's draws, by ``"<input set>/<variable>"``.
    ref : dict or None
        The reference method's draws (None: no reference columns).
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.

    Returns
    -------
    dict
        Accuracy, NLL and ECE on the test points; with a reference, the mean and largest difference
        of P(class 1) and the ratio of predictive sds, on the test points, the grid, near the data
        and far from it.
    """
    p_test, p_grid = d["test/p"], d["grid/p"]
    row = {k: v for k, v in M.all_metrics(p_test, bench.split.y_test).items() if k != "brier"}
    if ref is None:
        return row
    dist = np.sqrt(((bench.grid[:, None, :] - bench.split.X_train[None]) ** 2).sum(-1)).min(1)
    near = dist < NEAR
    for where, p, q in (("test", p_test, ref["test/p"]), ("grid", p_grid, ref["grid/p"])):
        diff = np.abs(p[..., 1].mean(0) - q[..., 1].mean(0))
        row[f"dp_{where}_mean"], row[f"dp_{where}_max"] = float(diff.mean()), float(diff.max())
        row[f"sd_ratio_{where}"] = _ratio(p[..., 1].std(0), q[..., 1].std(0))
    sd, sd_ref = p_grid[..., 1].std(0), ref["grid/p"][..., 1].std(0)
    row["sd_ratio_near"], row["sd_ratio_far"] = _ratio(sd[near], sd_ref[near]), _ratio(sd[~near], sd_ref[~near])
    return row


def regression_row(d: dict, ref: dict | None, bench, seed: int = 0) -> dict:
    """A regression method's accuracy, calibration and uncertainty in, between and beyond the data.

    Parameters
    ----------
    d : dict of str to numpy.ndarray
        One method's draws, by ``"<input set>/<variable>"``.
    ref : dict or None
        The reference method's draws (None: no reference columns).
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.
    seed : int, default 0
        Seeds the noise replicas of the predictive interval.

    Returns
    -------
    dict
        RMSE and coverage of the 95% interval in the data range, test NLL, the noise sd, the
        predictive sd in, beyond (and between) the data, and with a reference the distance to its
        mean and the ratio of sds.
    """
    task = bench.task
    mu, sigma, mu_test, sigma_test = d["grid/mu"], d["grid/sigma"], d["test/mu"], d["test/sigma"]
    eps = np.random.default_rng([seed, 1]).standard_normal((REPLICAS, len(sigma_test)))
    lo, hi = M.predictive_interval(mu_test, sigma_test, eps)
    # log mean_s N(y | mu_s, sigma_s), per test point
    z = (task.y_test[None] - mu_test) / sigma_test[:, None]
    log_dens = -0.5 * z**2 - np.log(sigma_test[:, None]) - 0.5 * np.log(2 * np.pi)
    sd = mu.std(0)
    inside, gap, out = task.in_range, task.in_gap, ~(task.in_range | task.in_gap)
    row = {"rmse_in": float(np.sqrt(np.mean((mu.mean(0) - task.mean_grid)[inside] ** 2))),
           "coverage95_in": float(np.mean((task.y_test >= lo) & (task.y_test <= hi))),
           "nll_test": float(-np.mean(np.logaddexp.reduce(log_dens, axis=0) - np.log(len(mu_test)))),
           "sigma": float(np.mean(sigma)), "sd_in": float(sd[inside].mean()), "sd_out": float(sd[out].mean())}
    if gap.any():
        row["sd_gap"] = float(sd[gap].mean())
    if ref is not None:
        sd_ref = ref["grid/mu"].std(0)
        row["dmean_in"] = float(np.mean(np.abs(mu.mean(0) - ref["grid/mu"].mean(0))[inside]))
        row["sd_ratio_in"] = _ratio(sd[inside], sd_ref[inside])
        row["sd_ratio_out"] = _ratio(sd[out], sd_ref[out])
        if gap.any():
            row["sd_ratio_gap"] = _ratio(sd[gap], sd_ref[gap])
    return row


def mnist_rows(d: dict, bench) -> tuple[dict, dict]:
    """``(summary row, {angle: (accuracy, nll, ece)})``.

    Parameters
    ----------
    d : dict of str to numpy.ndarray
        One method's draws, by ``"<input set>/<variable>"``.
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.

    Returns
    -------
    row : dict
        Test error, NLL, ECE, the AUROC of entropy and mutual information against each OOD set, and
        the mean ECE under rotation.
    curve : dict
        Accuracy, NLL and ECE at each angle.
    """
    y = bench.y_test
    curve = {a: M.all_metrics(d[f"rot{a}/p"], y) for a in bench.ANGLES}
    clean = curve[0]
    row = {"test_error": 1 - clean["accuracy"], "nll": clean["nll"], "ece": clean["ece"]}
    ent_in, mi_in = M.predictive_entropy(d["rot0/p"]), M.mutual_information(d["rot0/p"])
    for name in OOD:
        row[f"auroc_entropy_{name}"] = M.auroc(ent_in, M.predictive_entropy(d[f"{name}/p"]))
        row[f"auroc_mi_{name}"] = M.auroc(mi_in, M.mutual_information(d[f"{name}/p"]))
    row["ece_mean_rotated"] = float(np.mean([curve[a]["ece"] for a in bench.ANGLES if a]))
    return row, curve


def table(benchmark: str, bench, draws: dict) -> pd.DataFrame:
    """One row per method (NUTS first when there).

    Parameters
    ----------
    benchmark : str
        ``"toy"``, ``"regression"`` or ``"mnist"``.
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.
    draws : dict
        Every method's draws, by method.

    Returns
    -------
    pandas.DataFrame
        The metrics, one row per method.
    """
    ref = draws.get(REFERENCE)
    rows = {}
    for method, d in draws.items():
        if benchmark == "toy":
            rows[method] = toy_row(d, ref, bench)
        elif benchmark == "regression":
            rows[method] = regression_row(d, ref, bench, bench.spec.seed)
        else:
            rows[method] = mnist_rows(d, bench)[0]
    return pd.DataFrame.from_dict(rows, orient="index")


def shift_table(bench, draws: dict) -> pd.DataFrame:
    """MNIST under rotation: accuracy, NLL and ECE of every method at every angle (long format).

    Parameters
    ----------
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.
    draws : dict
        Every method's draws, by method.

    Returns
    -------
    pandas.DataFrame
        Columns method, angle, accuracy, nll, brier and ece.
    """
    rows = [{"method": m, "angle": a, **v} for m, d in draws.items() for a, v in mnist_rows(d, bench)[1].items()]
    return pd.DataFrame(rows)


# --- figures ---------------------------------------------------------------------------


def figures(benchmark: str, bench, draws: dict, folder, name: str) -> list:
    """Draw the benchmark's figure: maps (toy), bands (regression) or rotation curves (MNIST).

    Parameters
    ----------
    benchmark : str
        ``"toy"``, ``"regression"`` or ``"mnist"``.
    bench : Benchmark
        The case (:mod:`bnn_zoo.experiments.alternatives.cases`): its data and inputs.
    draws : dict
        Every method's draws, by method.
    folder : pathlib.Path
        The figures' folder; the figure goes into ``<folder>/<benchmark>/``.
    name : str
        The file's stem.

    Returns
    -------
    list of pathlib.Path
        The figures written.
    """
    from bnn_zoo.evaluation import comparison_plots, plots

    folder = folder / benchmark
    if benchmark == "toy":
        maps = {m: (d["grid/p"][..., 1].mean(0).reshape(bench.xx.shape),
                    d["grid/p"][..., 1].std(0).reshape(bench.xx.shape)) for m, d in draws.items()}
        path = folder / f"{name}_maps.png"
        plots.save(comparison_plots.method_maps(
            bench.xx, bench.yy, maps, bench.split.X_train, bench.split.y_train,
            title=f"{bench.spec.case} (noise {bench.spec.noise}), N(0, 1) weights: predictive "
                  "mean (top) and sd (bottom) of P(class 1)"), path)
        return [path]
    if benchmark == "regression":
        path = folder / f"{name}_bands.png"
        plots.save(comparison_plots.method_bands(
            bench.task, {m: (d["grid/mu"].mean(0), d["grid/mu"].std(0)) for m, d in draws.items()},
            reference=REFERENCE), path)
        return [path]
    path = folder / f"{name}_shift.png"
    plots.save(comparison_plots.shift_curves(shift_table(bench, draws)), path)
    return [path]
