r"""Did VI work? q's Pareto k (``q_pareto_k``), and the posterior reweighted by it.

For draws :math:`z_s \sim q` the importance ratios :math:`r_s = p(z_s, D) /
q(z_s)` weigh q's draws into draws of the posterior. Pareto-smoothed
importance sampling (PSIS) fits a generalised Pareto distribution to their
largest values; its shape :math:`\hat k` says how heavy their tail is, and
so how far q is from the posterior where it matters (Yao, Vehtari, Simpson
and Gelman 2018, "Yes, but did it work?: Evaluating variational
inference"). Its one name is ``q_pareto_k``: in ``idata.attrs``, in
every record and message. PSIS-LOO's pointwise ``pareto_k`` (of
:func:`~bnn_zoo.inference.psis.loo`) is another number, one per
observation, about leaving that observation out.

- ``q_pareto_k`` :math:`\le` 0.7: the PSIS-reweighted means and sds
  (:func:`reweighted`) are reliable. That is what a low k vouches for, not
  q's own moments at the precision one reads them: on posteriordb's arK
  (an autoregression), a Laplace fit at k 0.38 had a mean 0.38 posterior
  sd off, and reweighted, 0.04. Read the reweighted estimates.
- ``q_pareto_k`` > 0.7: q misses a part of the posterior (a funnel, a
  heavy tail, another mode); neither q's estimates nor the reweighted ones
  can be trusted for the parameters (:data:`NEXT` says what to try).
- ``q_pareto_k`` = inf: some of q's draws have zero posterior density
  (``log p = -inf``: a bound the data set, such as ``Uniform(0, theta)``
  with an observation above ``theta``); q puts mass where the posterior
  has none.

:func:`bnn_zoo.sample` computes it on every call with ``log_likelihood``
(``tree.attrs["q_pareto_k"]``, each draw's smoothed log weight in
``sample_stats["psis_log_weight"]``) and warns above :data:`K_WARN`. On
a network, k is above 0.7 for every Gaussian: it answers whether q is the
posterior over the weights, which a network's posterior, with its
symmetric modes, is not; whether q predicts well is for held-out data
(test NLL, coverage) to say.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from xarray import DataTree

from bnn_zoo.inference.psis import MIN_DRAWS, psis_log_weights

__all__ = ["K_GOOD", "K_WARN", "NAME", "NEXT", "ApproximationWarning", "q_pareto_k", "reweighted",
           "warn_if_poor"]

#: The diagnostic's one name: ``idata.attrs[NAME]``, the records' column, the messages' word.
NAME = "q_pareto_k"
#: Below this, k is good by Yao et al. 2018's scale.
K_GOOD = 0.5
#: Above this, :func:`bnn_zoo.sample` warns: the reweighted estimates are not reliable either.
K_WARN = 0.7
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
        The Pareto shape; ``inf`` when some draws have ``log_p = -inf`` (q
        puts mass where the posterior has none); NaN with fewer than
        ``MIN_DRAWS`` draws or a NaN or ``+inf`` density.
    log_weights : numpy.ndarray
        ``(S,)``, normalised log weights (NaN where ``k`` is NaN or inf).

    Examples
    --------
    >>> import numpy as np
    >>> from bnn_zoo.inference import qcheck
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=4000)                       # q = N(0, 1)
    >>> log_q = -0.5 * z**2
    >>> k_same, _ = qcheck.q_pareto_k(-0.5 * z**2, log_q)  # p = q
    >>> k_wide, _ = qcheck.q_pareto_k(-0.5 * (z / 3)**2, log_q)  # p = N(0, 9): q misses its tails
    >>> k_same < 0.5 < 0.7 < k_wide
    True
    >>> qcheck.q_pareto_k(np.where(z > 2, -np.inf, -0.5 * z**2), log_q)[0]  # p = 0 beyond 2
    inf
    """
    log_p, log_q = np.asarray(log_p, dtype="float64"), np.asarray(log_q, dtype="float64")
    log_ratio = log_p - log_q
    if log_ratio.size < MIN_DRAWS or np.isnan(log_ratio).any() or np.isposinf(log_ratio).any():
        return float("nan"), np.full(log_ratio.size, np.nan)
    if np.isneginf(log_p).any():
        return float("inf"), np.full(log_ratio.size, np.nan)
    if np.ptp(log_ratio) < 1e-12:  # q is the posterior to round-off: equal weights
        return -np.inf, np.full(log_ratio.size, -np.log(log_ratio.size))
    log_w, k = psis_log_weights(log_ratio[None])
    return float(k[0]), log_w[0]


def warn_if_poor(k: float, method: str, n_fits: int = 1, impossible: int = 0, draws: int = 0) -> None:
    """Warn, in one line naming the fit and what to try next, when ``k`` is above :data:`K_WARN`.

    Parameters
    ----------
    k : float
        ``q_pareto_k`` (:func:`q_pareto_k`).
    method : str
        The fit's method (``FitResult.method``).
    n_fits : int, default 1
        The fits whose mixture was drawn.
    impossible, draws : int, default 0
        Of ``draws``, how many have zero posterior density (``k`` is then inf).
    """
    which = f"the {method!r} fit" if n_fits == 1 else f"the mixture of {n_fits} {method!r} fits"
    if impossible:
        warnings.warn(f"{which} puts mass where the posterior has none: {impossible} of {draws} draws have "
                      f"log p = -inf ({NAME} inf), so its means, sds and predictions include impossible "
                      "values; check the model's bounds against the data, then try "
                      f"{NEXT.get(method, 'another method')}", ApproximationWarning, stacklevel=4)
    elif k > K_WARN:
        warnings.warn(f"{which} is far from the posterior: {NAME} {k:.2f} > {K_WARN} "
                      "(docs/user_guide/families.md); its means and sds, reweighted or not, may be off: try "
                      f"{NEXT.get(method, 'another method')} (for a neural network this is expected: judge "
                      "its predictions on held-out data)", ApproximationWarning, stacklevel=4)


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
        Without the weights, or when the Pareto k is above :data:`K_WARN`
        (the reweighted estimates would not be reliable either).
    """
    k = idata.attrs.get(NAME)
    if k is None or "psis_log_weight" not in idata["sample_stats"]:
        raise ValueError("these draws carry no PSIS weights: draw them with bnn_zoo.sample(..., log_likelihood=True)")
    if not k <= K_WARN:
        raise ValueError(f"{NAME} is {k:.2f} > {K_WARN}: the reweighted estimates are not reliable either; "
                         "fit a richer family first")
    w = np.exp(idata["sample_stats"]["psis_log_weight"])
    posterior = idata["posterior"].to_dataset()
    names = list(posterior.data_vars) if var_names is None else list(var_names)
    out = {}
    for name in names:
        x = posterior[name]
        mean = (w * x).sum(("chain", "draw"))
        sd = np.sqrt((w * (x - mean) ** 2).sum(("chain", "draw")))
        out[name] = xr.concat([mean, sd], dim=xr.DataArray(["mean", "sd"], dims="stat"))
    return xr.Dataset(out)
