r"""Did VI work? q's Pareto k (``q_pareto_k``), and the posterior reweighted by it.

For draws :math:`z_s \sim q` the importance ratios :math:`r_s = p(z_s, D) /
q(z_s)` weigh q's draws into draws of the posterior. Pareto-smoothed
importance sampling (PSIS) fits a generalised Pareto distribution to their
largest values; its shape :math:`\hat k` says how heavy their tail is, and
so how far q is from the posterior where it matters (Yao, Vehtari, Simpson
and Gelman 2018, "Yes, but did it work?: Evaluating variational
inference"). Its one name is ``q_pareto_k``: in ``idata.attrs``, in
every record and message. PSIS-LOO's pointwise ``pareto_k`` (of
:func:`~bnn_zoo.inference.diagnostics.psis.loo`) is another number, one per
observation, about leaving that observation out.

- ``q_pareto_k`` :math:`\le` 0.7: the PSIS-reweighted means and sds
  (:func:`reweighted`) are reliable. That is what a low k vouches for, not
  q's own moments at the precision one reads them: on posteriordb's arK
  (an autoregression), a Laplace fit at k 0.38 had a mean 0.38 posterior
  sd off, and reweighted, 0.04. Read the reweighted estimates.
- ``q_pareto_k`` > 0.7: q misses a part of the posterior (a funnel, a
  heavy tail, another mode); neither q's estimates nor the reweighted ones
  can be trusted for the parameters (:data:`NEXT` says what to try).
- ``q_pareto_k`` = inf: some of q's draws have zero (or undefined, ``log p``
  NaN) posterior density (``log p = -inf``: a bound the data set, such as
  ``Uniform(0, theta)`` with an observation above ``theta``; a scale that
  goes negative); q puts mass where the posterior has none.

What k cannot see: a part of the posterior that q never draws from. A q
that holds one of two separated modes has importance ratios as even as a
q of a one-mode posterior, and a k as low; so does a q that stops short of
a funnel's neck when none of its draws reach it. ``method="auto"`` looks
for other modes another way (L-BFGS from several jittered starts,
:mod:`~bnn_zoo.inference.laplace`), and tests more draws where k lies near
0.7 (:func:`~bnn_zoo.inference.auto.fit_auto`).

k is itself an estimate from the draws: PSIS needs about ``10 ** (1 / (1 -
k))`` draws to estimate a k (2,154 at 0.7; Vehtari et al. 2024, "Pareto
smoothed importance sampling"), so a verdict rests on at least
:data:`VERDICT_DRAWS` draws (:func:`verdict`); :func:`bnn_zoo.sample`
draws that many for the diagnostic even when it keeps fewer.

:func:`bnn_zoo.sample` computes it on every call with ``log_likelihood``
(``tree.attrs["q_pareto_k"]``, each draw's smoothed log weight in
``sample_stats["psis_log_weight"]``) and warns above :data:`K_WARN`. On
a network, k is above 0.7 for every Gaussian: it answers whether q is the
posterior over the weights, which a network's posterior, with its
symmetric modes, is not; whether q predicts well is for held-out data
(test NLL, coverage) to say.
"""

from __future__ import annotations


import numpy as np
import xarray as xr
from xarray import DataTree

from bnn_zoo.inference.support import calls
from bnn_zoo.inference.diagnostics.psis import MIN_DRAWS, psis_log_weights

__all__ = ["DRAWS_NAME", "K_GOOD", "K_WARN", "NAME", "NEXT", "VERDICT_DRAWS", "ApproximationWarning", "next_step",
           "q_pareto_k", "reweighted", "verdict", "warn_if_poor", "zero_density"]

#: The diagnostic's one name: ``idata.attrs[NAME]``, the records' column, the messages' word.
NAME = "q_pareto_k"
#: Below this, k is good by Yao et al. 2018's scale.
K_GOOD = 0.5
#: Above this, :func:`bnn_zoo.sample` warns: the reweighted estimates are not reliable either.
K_WARN = 0.7
#: The fewest draws a verdict on k rests on: PSIS estimates a k of 0.7 from 2,154 (``10 ** (1 / 0.3)``).
VERDICT_DRAWS = 4000
#: ``idata.attrs[DRAWS_NAME]``: how many draws of q the ``q_pareto_k`` beside it was computed on.
DRAWS_NAME = "q_pareto_k_draws"
#: What to try next, after each method: a richer family, then learned centring (a hierarchy written
#: centred, fitted between its two forms: docs/user_guide/own_model.md), then a flow, then NUTS
#: preconditioned by q;
#: ``method='auto'`` climbs these itself.
NEXT = {"advi": "method='lowrank_advi' or 'fullrank_advi' (or method='auto')",
        "lowrank_advi": "method='fullrank_advi' (or method='auto')",
        "fullrank_advi": "method=bnn_zoo.FullRank(centring=True), which learns the model's other "
                         "parameterisation (write a hierarchy centred, x ~ Normal(mu, tau)), or "
                         "method='flow', or bnn_zoo.nuts(result)",
        "flow": "bnn_zoo.nuts(result), NUTS with q's covariance as its mass matrix",
        "laplace": "method='fullrank_advi' (or method='auto')"}


class ApproximationWarning(UserWarning):
    """q is far from the posterior: its ``q_pareto_k`` is above :data:`K_WARN`."""


def next_step(method: str, *, centred: bool = False, hierarchy: bool = True) -> str:
    """What to try after a ``method`` fit whose k is above :data:`K_WARN`: the first of :data:`NEXT` not done.

    Parameters
    ----------
    method : str
        The fit's method (``FitResult.method``).
    centred : bool, default False
        The fit already learned centring (``config["centring"]``): not advised again.
    hierarchy : bool, default True
        The model has a location-scale variable that learned centring applies to; without one it is not
        advised.

    Returns
    -------
    str
        The advice, e.g. ``"method='flow', or bnn_zoo.nuts(result)"``.

    Examples
    --------
    >>> from bnn_zoo.inference.diagnostics import qcheck
    >>> qcheck.next_step("fullrank_advi", centred=True)
    "method='flow', or bnn_zoo.nuts(result)"
    """
    if method == "fullrank_advi" and (centred or not hierarchy):
        return "method='flow', or bnn_zoo.nuts(result)"
    return NEXT.get(method, "another method")


def zero_density(log_p: np.ndarray) -> int:
    """How many draws have zero posterior density: ``log p`` of ``-inf`` or NaN (a density undefined there,
    such as a scale that went negative, counts as none).

    Parameters
    ----------
    log_p : numpy.ndarray
        Each draw's joint log density.

    Returns
    -------
    int
        The count.
    """
    log_p = np.asarray(log_p)
    return int(np.sum(np.isneginf(log_p) | np.isnan(log_p)))


def q_pareto_k(log_p: np.ndarray, log_q: np.ndarray) -> tuple[float, np.ndarray]:
    """``q_pareto_k``: PSIS's Pareto k of the importance ratios ``p / q`` of draws of q, and their
    smoothed log weights.

    Parameters
    ----------
    log_p : numpy.ndarray
        ``(S,)``, the model's joint log density at each draw (Jacobians
        included, unconstrained space).
    log_q : numpy.ndarray
        ``(S,)``, q's log density at each draw.

    Returns
    -------
    k : float
        The Pareto shape; ``inf`` when some draws have zero posterior
        density (``log_p`` of ``-inf`` or NaN, :func:`zero_density`: q puts
        mass where the posterior has none); NaN with fewer than
        ``MIN_DRAWS`` draws or a NaN or ``+inf`` ``log_q`` or ``+inf``
        ``log_p``.
    log_weights : numpy.ndarray
        ``(S,)``, normalised log weights (NaN where ``k`` is NaN or inf).

    Examples
    --------
    >>> import numpy as np
    >>> from bnn_zoo.inference.diagnostics import qcheck
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=4000)                       # q = N(0, 1)
    >>> log_q = -0.5 * z**2
    >>> k_same, _ = qcheck.q_pareto_k(-0.5 * z**2, log_q)  # p = q
    >>> k_wide, _ = qcheck.q_pareto_k(-0.5 * (z / 3)**2, log_q)  # p = N(0, 9): q misses its tails
    >>> k_same < 0.5 < 0.7 < k_wide
    True
    >>> qcheck.q_pareto_k(np.where(z > 2, -np.inf, -0.5 * z**2), log_q)[0]  # p = 0 beyond 2
    inf
    >>> qcheck.q_pareto_k(np.where(z > 2, np.nan, -0.5 * z**2), log_q)[0]  # p undefined beyond 2: the same
    inf
    """
    log_p, log_q = np.asarray(log_p, dtype="float64"), np.asarray(log_q, dtype="float64")
    if log_p.size < MIN_DRAWS or not np.isfinite(log_q).all() or np.isposinf(log_p).any():
        return float("nan"), np.full(log_p.size, np.nan)
    if zero_density(log_p):
        return float("inf"), np.full(log_p.size, np.nan)
    log_ratio = log_p - log_q
    if np.ptp(log_ratio) < 1e-12:  # q is the posterior to round-off: equal weights
        return -np.inf, np.full(log_ratio.size, -np.log(log_ratio.size))
    log_w, k = psis_log_weights(log_ratio[None])
    return float(k[0]), log_w[0]


def verdict(k: float | None, draws: int | None) -> str:
    """What a ``q_pareto_k`` of ``draws`` draws says, in one phrase: the one wording of every message.

    Parameters
    ----------
    k : float or None
        ``q_pareto_k`` (None: not computed).
    draws : int or None
        The draws it was computed on (None: unknown, as in a DataTree written before they were recorded).

    Returns
    -------
    str
        Starting with ``"passes"`` only where the reweighted estimates are reliable: k at most
        :data:`K_WARN` from at least :data:`VERDICT_DRAWS` draws.

    Examples
    --------
    >>> from bnn_zoo.inference.diagnostics import qcheck
    >>> qcheck.verdict(0.52, 500)
    'too few draws to judge (q_pareto_k 0.52 from 500 draws; a verdict needs 4,000)'
    >>> qcheck.verdict(0.41, 4000)
    'passes (q_pareto_k 0.41 <= 0.7)'
    """
    if k is None:
        return f"not measured (these draws carry no {NAME}: sample with log_likelihood=True)"
    if k == np.inf:
        return f"puts mass where the posterior has none ({NAME} inf)"
    if np.isnan(k):
        return f"unknown ({NAME} NaN: too few draws, or a non-finite density of q)"
    if k > K_WARN:
        return f"fails ({NAME} {k:.2f} > {K_WARN})"
    if draws is not None and draws < VERDICT_DRAWS:
        return (f"too few draws to judge ({NAME} {k:.2f} from {draws:,} draws; a verdict needs "
                f"{VERDICT_DRAWS:,})")
    return f"passes ({NAME} {k:.2f} <= {K_WARN})"


def warn_if_poor(k: float, method: str, n_fits: int = 1, impossible: int = 0, draws: int = 0,
                 advice: str | None = None) -> None:
    """Warn, in one line naming the fit and what to try next, when ``k`` is above :data:`K_WARN` (or inf).

    Parameters
    ----------
    k : float
        ``q_pareto_k`` (:func:`q_pareto_k`).
    method : str
        The fit's method (``FitResult.method``).
    n_fits : int, default 1
        The fits whose mixture was drawn.
    impossible, draws : int, default 0
        Of ``draws``, how many have zero posterior density (:func:`zero_density`; ``k`` is then inf).
    advice : str, optional
        What to try next; default :func:`next_step` of ``method``.
    """
    which = f"the {method!r} fit" if n_fits == 1 else f"the mixture of {n_fits} {method!r} fits"
    advice = advice or next_step(method)
    if impossible:
        calls.warn(f"{which} puts mass where the posterior has none: {impossible} of {draws} draws have "
                      f"log p = -inf or NaN ({NAME} inf), so its means, sds and predictions include impossible "
                      f"values; check the model's bounds against the data, then try {advice}",
                      ApproximationWarning)
    elif k > K_WARN or np.isnan(k):
        said = f"{NAME} {k:.2f} > {K_WARN}" if k > K_WARN else verdict(k, draws)
        calls.warn(f"{which} is far from the posterior: {said} (docs/user_guide/families.md); "
                      f"its means and sds, reweighted or not, may be off: try {advice} (for a neural network "
                      "this is expected: judge its predictions on held-out data)", ApproximationWarning)


def reweighted(idata: DataTree, var_names=None) -> xr.Dataset:
    """The posterior's means and sds from q's draws, reweighted by their PSIS weights.

    Parameters
    ----------
    idata : xarray.DataTree
        Draws from :func:`bnn_zoo.sample` (with ``log_likelihood``, so that
        each draw has its weight).
    var_names : sequence of str, optional
        The posterior's variables; default all.

    Returns
    -------
    xarray.Dataset
        Each variable with a leading ``stat`` dimension, ``["mean", "sd"]``.

    Raises
    ------
    ValueError
        For anything but :func:`bnn_zoo.sample`'s DataTree, a name not in
        its posterior; without the weights, or unless :func:`verdict` passes:
        k above :data:`K_WARN` (the reweighted estimates would not be
        reliable either), or computed on too few draws to judge.
    """
    if not isinstance(idata, DataTree) or "sample_stats" not in idata.children:
        raise ValueError(f"reweighted takes the DataTree of draws that bnn_zoo.sample returns, got "
                         f"{type(idata).__name__}: bnn_zoo.reweighted(bnn_zoo.sample(result, {VERDICT_DRAWS}))")
    k = idata.attrs.get(NAME)
    if k is None or "psis_log_weight" not in idata["sample_stats"]:
        raise ValueError("these draws carry no PSIS weights: draw them with bnn_zoo.sample(..., log_likelihood=True)")
    said = verdict(k, idata.attrs.get(DRAWS_NAME))
    if said.startswith("too few"):
        raise ValueError(f"q_pareto_k is {said}: the reweighted estimates cannot be vouched for; draw with "
                         f"bnn_zoo.sample(result, {VERDICT_DRAWS})")
    if not said.startswith("passes"):
        raise ValueError(f"q {said}: the reweighted estimates are not reliable either; fit a richer family first")
    w = np.exp(idata["sample_stats"]["psis_log_weight"])
    posterior = idata["posterior"].to_dataset()
    names = list(posterior.data_vars) if var_names is None else list(var_names)
    unknown = [name for name in names if name not in posterior.data_vars]
    if unknown:
        raise ValueError(f"var_names: {unknown[0]!r} is not in the posterior; its variables: "
                         f"{', '.join(posterior.data_vars)}")
    out = {}
    for name in names:
        x = posterior[name]
        mean = (w * x).sum(("chain", "draw"))
        sd = np.sqrt((w * (x - mean) ** 2).sum(("chain", "draw")))
        out[name] = xr.concat([mean, sd], dim=xr.DataArray(["mean", "sd"], dims="stat"))
    return xr.Dataset(out)
