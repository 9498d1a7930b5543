r"""``method="auto"``: the cheapest q that passes its own test, and the path that led to it.

:func:`fit_auto` climbs rungs, cheapest first, and stops at the first whose q
passes its test (:data:`~bnn_zoo.inference.methods.RUNGS`):

1. ``"laplace"``: the mode (L-BFGS, then Newton where it stopped short) and
   the curvature there: seconds, and exact for a Gaussian posterior however
   badly conditioned.
2. ``"gaussian"``: a Gaussian sized to the model, fitted by ADVI
   (:func:`~bnn_zoo.inference.methods.gaussian_for`: full rank up to
   :data:`~bnn_zoo.inference.defaults.AUTO_FULL_RANK_MAX` values, low rank
   above), started from the Laplace fit where that reached its mode (its
   whole factor: what gets full rank to a badly conditioned posterior), else
   from its own start. It stops once converged (``fit_advi``'s ``until_converged``: the
   convergence test every :data:`~bnn_zoo.inference.defaults.CONVERGED_CHECK_EVERY` steps,
   then the iterates averaged over as many steps again).
3. ``"centring"``: the same Gaussian with learned centring
   (:mod:`~bnn_zoo.inference.families.centring`), where the model has a hierarchical
   location-scale variable: a funnel in one form is often close to Gaussian
   in the other.
4. ``"flow"``: a normalizing flow (:mod:`~bnn_zoo.inference.families.flow`)
   put on the Gaussian rung's q (that Gaussian fitted again for all its steps where the rung stopped
   once converged: the flow's k is sensitive to its start), for what no Gaussian in either form
   holds: curved, skewed or heavy-tailed posteriors.

The test (:func:`test`) has two parts.

- **q's Pareto k** (:mod:`~bnn_zoo.inference.diagnostics.qcheck`) on ``draws`` draws and
  on each of their two halves: the rung's k is the largest of the three.
  k is itself an estimate, and near 0.7 a noisy one (on the centred eight
  schools one mean-field fit gives 0.51, 0.91 and 0.93 on three sets of 4,000 draws; Neal's
  funnel after 3,000 steps, 0.65-0.68 on 8,000 draws and 0.95 on 32,000 more). A k
  at most :data:`~bnn_zoo.inference.diagnostics.qcheck.K_GOOD` passes; one above
  :data:`~bnn_zoo.inference.diagnostics.qcheck.K_WARN` fails; between them the test
  draws :data:`MORE` times as many again, and the rung passes only if the
  k of those is at most 0.7 too: a q whose ratios have a heavy tail shows
  it the more draws one looks at, a good q does not.
- **The modes q reaches.** k cannot see a mode q never draws from. Before
  the first rung, L-BFGS runs from :data:`MODE_STARTS` starts (the model's
  initial point, then by turns Stan's ``uniform(-2, 2)`` and the initial
  point jittered by as much: :class:`~bnn_zoo.inference.laplace.Laplace`'s
  ``starts``); where they end at distinct strict modes, a rung whose q has
  less density at one of them (holding at least :data:`MODE_SHARE` of the
  mass by their Laplace estimates) than at every one of its own test draws
  misses that mode, and fails (the centring rung's q lives in the
  rewritten model's space, where no mode is placed: where the search found
  several, it counts as missing all but one). ``config["auto"]["modes"]``
  lists them. A search from a handful of starts can miss a mode too: a pass
  means that neither part found a fault, not a proof.

The rung that passes is returned with ``config["auto"]``, the path (each
rung's method, its k, the modes it misses, ELBO and seconds), and its draws are importance-resampled
(:func:`bnn_zoo.sample`, and so :func:`bnn_zoo.predict`): a k at most 0.7
vouches for the PSIS-weighted estimates, not for q's own moments. When no rung
passes, :func:`fit_auto` warns in one line and returns the rung with the
lowest k, not resampled; :func:`bnn_zoo.nuts` then hands off to NUTS (for a
posterior of separated modes, NUTS's chains do not cross between them either:
the warning says so).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pymc as pm

from bnn_zoo.inference import defaults, methods
from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.posterior import restarts
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.advi.loop import fit_advi
from bnn_zoo.inference.families.centring import candidates
from bnn_zoo.inference.laplace import fit_laplace
from bnn_zoo.inference.methods import RUNGS, Auto, Laplace
from bnn_zoo.inference.posterior.draws import draw_z, evaluate_z
from bnn_zoo.inference.posterior.result import ConvergenceWarning, FitResult, NonFiniteLossError

__all__ = ["MODE_SHARE", "MODE_STARTS", "MORE", "fit_auto", "gaussian_rung", "path_table", "test"]

#: Where the k of ``Auto.draws`` lies between K_GOOD and K_WARN, the test draws this many times as many again.
MORE = 4
#: L-BFGS starts of the search for other modes (multi-path Pathfinder's default paths: four).
MODE_STARTS = 4
#: A mode q misses fails it when its share of the modes' mass (their Laplace estimates) is at least this.
MODE_SHARE = 0.01


def test(result: FitResult, draws: int, seed: int, modes: list | None = None) -> dict:
    """A rung's test (the module's docstring): q's Pareto k, with more draws near 0.7, and the modes q misses.

    Parameters
    ----------
    result : FitResult
        The rung's fit.
    draws : int
        Draws of the first stage, split into two halves.
    seed : int
        Seeds the draws.
    modes : list of dict, optional
        The modes the search found (``Laplace(starts=...)``'s ``config["modes"]``).

    Returns
    -------
    dict
        ``q_pareto_k`` (the k the rule reads: the largest of the first stage's, its halves' and, where
        drawn, the second stage's), ``q_pareto_k_first`` (over the first stage's draws),
        ``q_pareto_k_halves``, ``q_pareto_k_more`` (the second stage's, or None), ``draws`` (all
        drawn), ``missed_modes`` (how many of ``modes`` q misses), ``elbo`` and ``passed``.
    """
    z, log_q = draw_z(result, draws, seed)
    log_p = evaluate_z(result, z, ("logp",))["logp"].astype("float64")
    half = draws // 2
    k_all = qcheck.q_pareto_k(log_p, log_q)[0]
    halves = [qcheck.q_pareto_k(log_p[part], log_q[part])[0] for part in (slice(0, half), slice(half, None))]
    k_rule, k_more, drawn = _worst([k_all, *halves]), None, draws
    if qcheck.K_GOOD < k_rule <= qcheck.K_WARN:  # near the threshold: look at more draws
        z_more, log_q_more = draw_z(result, MORE * draws, [seed, MORE])
        k_more = qcheck.q_pareto_k(evaluate_z(result, z_more, ("logp",))["logp"].astype("float64"), log_q_more)[0]
        k_rule, drawn = _worst([k_rule, k_more]), drawn + MORE * draws
    missed = _missed(result, modes or [], log_q)
    elbo = restarts.draws_elbo(log_p, log_q)[0]
    return {"q_pareto_k": k_rule, "q_pareto_k_first": k_all, "q_pareto_k_halves": halves, "q_pareto_k_more": k_more,
            "draws": drawn, "missed_modes": missed, "elbo": float("-inf") if np.isnan(elbo) else elbo,
            "passed": bool(k_rule <= qcheck.K_WARN and not missed)}


def _worst(ks) -> float:
    """The largest of some k's, NaN counting as infinitely bad."""
    return max(float("inf") if np.isnan(k) else float(k) for k in ks)


def _missed(result: FitResult, modes: list, log_q_draws: np.ndarray) -> int:
    """How many of ``modes`` holding at least :data:`MODE_SHARE` of their mass q misses: its density at the
    mode below its density at every one of its own draws."""
    if len(modes) < 2:
        return 0
    share = _shares(modes, keep_all=True)
    at = result.family.log_q(result.params, np.array([m["z"] for m in modes]))
    return int(np.sum((share >= MODE_SHARE) & ~(at >= log_q_draws.min())))


def _shares(modes: list, keep_all: bool = False) -> np.ndarray:
    """Each mode's share of the modes' mass (their Laplace estimates): those of at least :data:`MODE_SHARE`,
    or with ``keep_all`` every mode's."""
    if not modes:
        return np.empty(0)
    mass = np.array([m["log_mass"] for m in modes])
    share = np.exp(mass - np.logaddexp.reduce(mass))
    return share if keep_all else share[share >= MODE_SHARE]


def gaussian_rung(model: pm.Model, laplace: FitResult | None, steps: int, seed: int, progressbar: bool = False,
                  centring: bool = False, until_converged: bool = True) -> FitResult:
    """The ``"gaussian"`` rung's fit (``"centring"``'s with ``centring``), and the flow rung's start.

    Parameters
    ----------
    model : pymc.Model
        The model.
    laplace : FitResult or None
        The Laplace rung's fit: the start of a full-rank Gaussian where it reached its mode.
    steps : int
        The most steps.
    seed : int
        The random seed.
    progressbar : bool, default False
        Show the fit's progress.
    centring : bool, default False
        Learn the centring of the model's location-scale variables (its own start then).
    until_converged : bool, default True
        Stop once converged, as the rungs do; ``False`` runs all ``steps``, as the flow's start does.

    Returns
    -------
    FitResult
        Full rank up to :data:`~bnn_zoo.inference.defaults.AUTO_FULL_RANK_MAX` values, low rank above
        (:func:`~bnn_zoo.inference.methods.gaussian_for`).
    """
    method = methods.gaussian_for(model, "auto")
    start = laplace if laplace is not None and laplace.convergence.converged else None
    if centring or method == "lowrank_advi":
        start = None  # another space (the rewritten model's), or only the marginal sds: its own start
    spec = methods.FullRank(centring=centring) if method == "fullrank_advi" else methods.LowRank(centring=centring)
    return fit_advi(model, method=spec, init=start, steps=steps, random_seed=seed, progressbar=progressbar,
                    until_converged=until_converged)


def fit_auto(model: pm.Model, spec: Auto = Auto(), *, steps: int = defaults.STEPS, random_seed: int = 0,
             progressbar: bool = False) -> FitResult:
    """Climb :data:`~bnn_zoo.inference.methods.RUNGS` until a q passes its test; return it, with the path in ``config["auto"]``.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    spec : Auto, default Auto()
        The time budget and the draws of the test.
    steps : int, default 20000
        Each rung's most steps (L-BFGS's iterations; the Gaussian rungs', which stop once
        converged; the flow's).
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
    t0 = time.perf_counter()
    path, fits, laplace, modes = [], [], None, None
    planned = [r for r in spec.rungs if r != "centring" or candidates(model)]
    if not planned:
        raise ValueError(f"Auto(rungs={spec.rungs!r}): the model has no location-scale variable whose loc or "
                         "scale is random, so the centring rung has nothing to learn: add 'gaussian' or 'flow'")
    for rung in ["search"] * ("laplace" not in planned) + planned:
        if spec.budget is not None and path and time.perf_counter() - t0 > spec.budget:
            break
        start = time.perf_counter()
        with warnings.catch_warnings():  # each rung's own warnings are in its path entry
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                if rung in ("search", "laplace"):  # the Laplace fit and the search for other modes, in one
                    try:
                        laplace = fit_laplace(model, Laplace(starts=MODE_STARTS), steps=steps, random_seed=random_seed)
                    except NonFiniteLossError:
                        if rung == "search":
                            continue
                        raise
                    modes = laplace.config.get("modes")
                    if rung == "search":
                        continue
                    result = laplace
                elif rung == "flow":  # on the Gaussian rung's q, of the model as written
                    gaussian = next((f for f, e in zip(fits, path) if e["rung"] == "gaussian" and f is not None),
                                    None)
                    if gaussian is not None and gaussian.config.get("converged_at") is not None:
                        # the flow's start runs all its steps: the flow's k is sensitive to it (the
                        # hierarchical regression, seed 0: 0.78 from the Gaussian stopped at its test)
                        gaussian = gaussian_rung(model, laplace, steps, random_seed, progressbar, until_converged=False)
                    result = fit_advi(model, method="flow", init=gaussian, steps=steps, random_seed=random_seed,
                                      progressbar=progressbar)
                else:
                    result = gaussian_rung(model, laplace, steps, random_seed, progressbar, rung == "centring")
            except NonFiniteLossError as err:  # a rung that fails is a step of the path, not the end of it
                path.append({"rung": rung, "error": str(err), "passed": False, "q_pareto_k": float("nan"),
                             "q_pareto_k_halves": [float("nan")] * 2, "missed_modes": 0,
                             "seconds": time.perf_counter() - start})
                fits.append(None)
                continue
            entry = {"rung": rung, "method": result.method, "converged": bool(result.convergence.converged),
                     **test(result, spec.draws, random_seed, modes if "centring" not in result.config else None)}
            if "centring" in result.config:
                entry["centring"] = result.config["centring"]
                # the rewritten model's space is not the modes': a Gaussian there holds one of them at most
                entry["missed_modes"] = max(int(_shares(modes or []).size) - 1, 0)
                entry["passed"] = entry["passed"] and not entry["missed_modes"]
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
    found = [{key: m[key] for key in ("log_p", "log_mass", "starts")} for m in modes or []]
    result.config = dict(result.config, auto=dict(path=path, returned=best, passed=passed, budget=spec.budget,
                                                  draws=spec.draws, modes=found, seconds=time.perf_counter() - t0),
                         importance_resampled=passed)
    if not passed:
        stopped = " (the budget stopped it)" if len(path) < len(planned) else ""
        several = (f"; the posterior has at least {len(modes)} separated modes (L-BFGS from {MODE_STARTS} "
                   "starts), and "
                   "no rung's q reaches them all: neither q's draws nor NUTS's chains, which do not cross between "
                   "modes, weigh them" if any(e.get("missed_modes") for e in path) else "")
        calls.warn(f"method='auto': no rung passed its test{stopped}: "
                      + ", ".join(f"{e['rung']} ({e.get('method', 'failed')}) {_said(e)}" for e in path)
                      + f"{several}; returning {result.method} (the lowest {qcheck.NAME}), not resampled; for "
                      "the posterior itself hand off to NUTS: bnn_zoo.nuts(result)", qcheck.ApproximationWarning)
    return result


def _k(entry: dict) -> float:
    """A rung's k, as the rule reads it (NaN counts as infinitely bad)."""
    return _worst([entry["q_pareto_k"]])


def _said(entry: dict) -> str:
    """A rung's verdict in the warning: its k against the threshold, and the modes it misses."""
    k = _k(entry)
    words = f"{qcheck.NAME} {k:.2f}" + (f" > {qcheck.K_WARN}" if k > qcheck.K_WARN else "")
    return words + (f", misses {entry['missed_modes']} mode(s)" if entry.get("missed_modes") else "")


def path_table(result: FitResult) -> str:
    """The path of a ``method="auto"`` fit, a line per rung.

    Each line shows the k the pass rule reads (``q_pareto_k``: the largest
    of the k over the first stage's draws, over each of its halves and,
    where k came near 0.7, over the second stage's), those parts, the modes
    of the search the rung's q misses, its ELBO estimate and seconds. A
    rung passes when that k is at most 0.7 and it misses no mode; where none
    passes, the rung with the lowest k is returned, marked ``<-``.

    Parameters
    ----------
    result : FitResult
        What ``bnn_zoo.fit(model, method="auto")`` returned.

    Returns
    -------
    str
        ``rung  method  q_pareto_k  (all; halves; more)  modes missed  ELBO  seconds  passed``.

    Raises
    ------
    ValueError
        For a fit that ``method="auto"`` did not make, or anything other than a fit.
    """
    if not isinstance(result, FitResult):
        raise ValueError(f"path_table takes what bnn_zoo.fit(model, method='auto') returned, got "
                         f"{type(result).__name__}")
    auto = result.config.get("auto")
    if auto is None:
        raise ValueError(f"this is a {result.method!r} fit, not one of method='auto': it has no path")
    lines = [f"{'rung':<9} {'method':<14} {qcheck.NAME:>10}  {'(all; halves; more)':<26} {'missed':>6} "
             f"{'ELBO':>12} {'seconds':>8}  passed"]
    for i, e in enumerate(auto["path"]):
        parts = [e.get("q_pareto_k_first", float("nan")), *e["q_pareto_k_halves"]]
        detail = f"({parts[0]:.2f}; {parts[1]:.2f}, {parts[2]:.2f}" + (
            f"; {e['q_pareto_k_more']:.2f})" if e.get("q_pareto_k_more") is not None else ")")
        lines.append(f"{e['rung']:<9} {e.get('method', 'failed'):<14} {e['q_pareto_k']:>10.2f}  {detail:<26} "
                     f"{e.get('missed_modes', 0):>6} {e.get('elbo', float('nan')):>12.2f} {e['seconds']:>8.1f}  "
                     f"{'yes' if e['passed'] else 'no'}" + ("  <-" if i == auto["returned"] else ""))
    return "\n".join(lines)
