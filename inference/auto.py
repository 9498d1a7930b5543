r"""``method="auto"``: the cheapest q that passes its own test, and the path that led to it.

:func:`fit_auto` climbs rungs, cheapest first, and stops at the first whose q
passes its test (:data:`RUNGS`):

1. ``"laplace"``: the mode (L-BFGS, then Newton where it stopped short) and
   the curvature there: seconds, and exact for a Gaussian posterior however
   badly conditioned.
2. ``"gaussian"``: a Gaussian sized to the model, fitted by ADVI: full rank
   up to :data:`~bnn_zoo.inference.defaults.AUTO_FULL_RANK_MAX` values, low
   rank above, started from the Laplace fit where that reached its mode (its
   whole factor: what gets full rank to a badly conditioned posterior), else
   from its own start.
3. ``"centring"``: the same Gaussian with learned centring
   (:mod:`~bnn_zoo.inference.families.centring`), where the model has a hierarchical
   location-scale variable: a funnel in one form is often close to Gaussian
   in the other.
4. ``"flow"``: a normalizing flow (:mod:`~bnn_zoo.inference.families.flow`)
   put on the Gaussian rung's q, for what no Gaussian in either form holds:
   curved, skewed or heavy-tailed posteriors.

The test is q's Pareto k (:mod:`~bnn_zoo.inference.qcheck`) on ``draws``
draws, split into two independent halves: a rung passes when the k of each
half is at most :data:`~bnn_zoo.inference.qcheck.K_WARN`. k is itself an
estimate, and near 0.7 a noisy one (on the centred eight schools one fit gave
0.51, 0.74 and 0.82 on three sets of draws); two halves that agree make a
pass at the threshold less likely to be luck, and each half holds more than
the 2,154 draws below which PSIS cannot estimate a k of 0.7 at all
(``10 ** (1 / (1 - k))``; Vehtari et al. 2024, "Pareto smoothed importance
sampling").

The rung that passes is returned with ``config["auto"]``, the path (each
rung's method, k, ELBO and seconds), and its draws are importance-resampled
(:func:`bnn_zoo.sample`, and so :func:`bnn_zoo.predict`): a k at most 0.7
vouches for the PSIS-weighted estimates, not for q's own moments. When no rung
passes, :func:`fit_auto` warns in one line and returns the rung with the
lowest k, not resampled; :func:`bnn_zoo.nuts` then hands off to NUTS.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pymc as pm

from bnn_zoo.inference import defaults, methods, qcheck
from bnn_zoo.inference.families.centring import candidates
from bnn_zoo.inference.draws import draw_z, evaluate_z
from bnn_zoo.inference.result import ConvergenceWarning, FitResult, NonFiniteLossError

__all__ = ["DRAWS", "RUNGS", "Auto", "fit_auto", "path_table"]

#: The rungs, cheapest first.
RUNGS = ("laplace", "gaussian", "centring", "flow")
#: Draws of each rung's q for its Pareto k: two halves of 4,000.
DRAWS = 8000


@dataclass(frozen=True)
class Auto:
    """Cheapest first until q passes its test, as ``bnn_zoo.fit``'s ``method`` (the same as ``"auto"``).

    Parameters
    ----------
    budget : float, optional
        Seconds: no rung starts once this much time has passed (the rung
        running then finishes). Default: no limit.
    draws : int, default 8000
        Draws of each rung's q for its Pareto k, split into two halves; at
        least 2 x 2,200 (PSIS's minimum for a k of 0.7).
    rungs : tuple of str, default RUNGS
        The rungs to climb, in :data:`RUNGS`' order (a benchmark's or a
        study's choice; the default climbs them all).

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Auto(budget=60)
    Auto(budget=60, draws=8000, rungs=('laplace', 'gaussian', 'centring', 'flow'))
    """

    budget: float | None = None
    draws: int = DRAWS
    rungs: tuple[str, ...] = RUNGS
    #: The method's name: ``fit``'s ``method="auto"``. The result's ``method`` is the rung's.
    name: ClassVar[str] = "auto"

    def __post_init__(self):
        if self.budget is not None and not (isinstance(self.budget, (int, float)) and self.budget > 0):
            raise ValueError(f"Auto's budget must be a positive number of seconds or None, got {self.budget!r}")
        if not (isinstance(self.draws, (int, np.integer)) and not isinstance(self.draws, bool)
                and self.draws >= 4400):
            raise ValueError(f"Auto's draws must be an integer of at least 4400 (two halves of 2,200, PSIS's "
                             f"minimum for k = 0.7), got {self.draws!r}")
        rungs = tuple(self.rungs) if isinstance(self.rungs, (tuple, list)) else None
        if not rungs or any(r not in RUNGS for r in rungs) or list(rungs) != sorted(rungs, key=RUNGS.index) \
                or len(set(rungs)) < len(rungs):
            raise ValueError(f"Auto's rungs must be some of {', '.join(RUNGS)}, in that order, got {self.rungs!r}")


def _test(result: FitResult, draws: int, seed: int) -> dict:
    """q's Pareto k on ``draws`` draws and on each half, and q's ELBO estimated from them."""
    z, log_q = draw_z(result, draws, seed)
    log_p = evaluate_z(result, z, ("logp",))["logp"].astype("float64")
    half = draws // 2
    k_all = qcheck.q_pareto_k(log_p, log_q)[0]
    halves = [qcheck.q_pareto_k(log_p[part], log_q[part])[0] for part in (slice(0, half), slice(half, None))]
    finite = np.isfinite(log_p)
    return {"q_pareto_k": k_all, "q_pareto_k_halves": halves,
            "elbo": float(np.mean(log_p - log_q)) if finite.all() else float("-inf"),
            "passed": bool(all(k <= qcheck.K_WARN for k in halves))}


def _gaussian(model: pm.Model, laplace: FitResult | None, steps: int, seed: int, progressbar: bool,
              centring: bool = False) -> FitResult:
    from bnn_zoo.inference.advi import fit

    dim = sum(int(np.size(v)) for v in model.initial_point().values())
    method = "fullrank_advi" if dim <= defaults.AUTO_FULL_RANK_MAX else "lowrank_advi"
    start = laplace if laplace is not None and laplace.convergence.converged else None
    if centring or method == "lowrank_advi":
        start = None  # another space (the rewritten model's), or only the marginal sds: its own start
    spec = methods.FullRank(centring=centring) if method == "fullrank_advi" else methods.LowRank(centring=centring)
    return fit(model, method=spec, init=start, steps=steps, random_seed=seed, progressbar=progressbar)


def fit_auto(model: pm.Model, spec: Auto = Auto(), *, steps: int = defaults.STEPS, random_seed: int = 0,
             progressbar: bool = False) -> FitResult:
    """Climb :data:`RUNGS` until a q passes its test; return it, with the path in ``config["auto"]``.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    spec : Auto, default Auto()
        The time budget and the draws of the test.
    steps : int, default 20000
        Each rung's steps (L-BFGS's most iterations; ADVI's steps).
    random_seed : int, default 0
        Seeds every rung and its test's draws.
    progressbar : bool, default False
        Show the ADVI rungs' progress bars.

    Returns
    -------
    FitResult
        The rung that passed (its ``method`` is that rung's: ``"laplace"``,
        ``"fullrank_advi"``, ``"lowrank_advi"``, ``"flow"``), or, where none did, the one
        with the lowest k. ``config["auto"]`` holds ``path`` (a dict per rung
        run: ``rung``, ``method``, ``q_pareto_k``, ``q_pareto_k_halves``,
        ``elbo``, ``seconds``, ``passed``, and for the centring rung each
        variable's ``centring``, its ``lambda``), ``returned`` (the index in it),
        ``passed``, ``budget`` and ``draws``; ``config["importance_resampled"]``
        whether its draws are resampled by their PSIS weights.

    Warns
    -----
    ApproximationWarning
        When no rung passes (or the budget stops the climb first), in one
        line naming each rung's k and the hand-off to NUTS.
    """
    from bnn_zoo.inference.laplace import fit_laplace

    t0 = time.perf_counter()
    path, fits, laplace = [], [], None
    planned = [r for r in spec.rungs if r != "centring" or candidates(model)]
    for rung in planned:
        if spec.budget is not None and path and time.perf_counter() - t0 > spec.budget:
            break
        start = time.perf_counter()
        with warnings.catch_warnings():  # each rung's own warnings are in its path entry
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                if rung == "laplace":
                    result = laplace = fit_laplace(model, steps=steps, random_seed=random_seed)
                elif rung == "flow":  # on the Gaussian rung's q, of the model as written
                    from bnn_zoo.inference.advi import fit

                    gaussian = next((f for f, e in zip(fits, path) if e["rung"] == "gaussian" and f is not None),
                                    None)
                    result = fit(model, method="flow", init=gaussian, steps=steps, random_seed=random_seed,
                                 progressbar=progressbar)
                else:
                    result = _gaussian(model, laplace, steps, random_seed, progressbar, rung == "centring")
            except NonFiniteLossError as err:  # a rung that fails is a step of the path, not the end of it
                path.append({"rung": rung, "error": str(err), "passed": False, "q_pareto_k": float("nan"),
                             "q_pareto_k_halves": [float("nan")] * 2, "seconds": time.perf_counter() - start})
                fits.append(None)
                continue
            entry = {"rung": rung, "method": result.method, "converged": bool(result.convergence.converged),
                     **_test(result, spec.draws, random_seed)}
            if "centring" in result.config:
                entry["centring"] = result.config["centring"]
        entry["seconds"] = time.perf_counter() - start
        path.append(entry)
        fits.append(result)
        if entry["passed"]:
            break
    if all(f is None for f in fits):
        raise NonFiniteLossError("method='auto': every rung failed: "
                                 + "; ".join(f"{e['rung']}: {e['error']}" for e in path))
    passed = path[-1]["passed"]
    fitted = [i for i, f in enumerate(fits) if f is not None]  # a rung that failed has no fit to return
    best = len(path) - 1 if passed else min(fitted, key=lambda i: _k(path[i]))
    result = fits[best]
    result.config = dict(result.config, auto=dict(path=path, returned=best, passed=passed, budget=spec.budget,
                                                  draws=spec.draws, seconds=time.perf_counter() - t0),
                         importance_resampled=passed)
    if not passed:
        stopped = " (the budget stopped it)" if len(path) < len(planned) else ""
        warnings.warn(f"method='auto': no rung passed its test{stopped}: "
                      + ", ".join(f"{e['rung']} ({e.get('method', 'failed')}) {qcheck.NAME} {_k(e):.2f}"
                                  for e in path)
                      + f" > {qcheck.K_WARN}; returning {result.method}, not resampled; for the posterior "
                      "itself hand off to NUTS: bnn_zoo.nuts(result)", qcheck.ApproximationWarning, stacklevel=4)
    return result


def _k(entry: dict) -> float:
    """A rung's k for comparison: the larger half (NaN counts as infinitely bad)."""
    k = max(entry["q_pareto_k_halves"])
    return float("inf") if np.isnan(k) else k


def path_table(result: FitResult) -> str:
    """The path of a ``method="auto"`` fit, a line per rung.

    Parameters
    ----------
    result : FitResult
        What ``bnn_zoo.fit(model, method="auto")`` returned.

    Returns
    -------
    str
        ``rung  method  k (halves)  ELBO  seconds  passed``, the returned rung marked ``<-``.

    Raises
    ------
    ValueError
        For a fit that ``method="auto"`` did not make.
    """
    auto = result.config.get("auto")
    if auto is None:
        raise ValueError(f"this is a {result.method!r} fit, not one of method='auto': it has no path")
    lines = [f"{'rung':<9} {'method':<14} {qcheck.NAME + ' (halves)':<24} {'ELBO':>12} {'seconds':>8}  passed"]
    for i, e in enumerate(auto["path"]):
        k = f"{e['q_pareto_k']:.2f} ({', '.join(f'{h:.2f}' for h in e['q_pareto_k_halves'])})"
        lines.append(f"{e['rung']:<9} {e.get('method', 'failed'):<14} {k:<24} {e.get('elbo', float('nan')):>12.2f}"
                     f" {e['seconds']:>8.1f}  {'yes' if e['passed'] else 'no'}"
                     + ("  <-" if i == auto["returned"] else ""))
    return "\n".join(lines)
