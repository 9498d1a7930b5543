r"""Did VI work? The Pareto k of q's importance ratios, and the posterior reweighted by them.

For draws :math:`z_s \sim q` the importance ratios :math:`r_s = p(z_s, D) /
q(z_s)` weigh q's draws into draws of the posterior. Pareto-smoothed
importance sampling (PSIS) fits a generalised Pareto distribution to their
largest values; its shape :math:`\hat k` says how heavy their tail is, and
so how far q is from the posterior where it matters (Yao, Vehtari, Simpson
and Gelman 2018, "Yes, but did it work?: Evaluating variational
inference"):

- :math:`\hat k < 0.5`: q is close; the PSIS-reweighted means and sds
  (:func:`reweighted`) are reliable, and q's own are close to them;
- :math:`0.5 \le \hat k \le 0.7`: q is usable, and the reweighted
  estimates correct it;
- :math:`\hat k > 0.7`: q misses a part of the posterior (a funnel, a
  heavy tail, another mode); neither q's estimates nor the reweighted ones
  can be trusted: try a richer family, a reparameterised model or NUTS.

:func:`bnn_zoo.sample` computes it on every call with ``log_likelihood``
(``tree.attrs["pareto_k"]``, each draw's smoothed log weight in
``sample_stats["psis_log_weight"]``) and warns above :data:`K_WARN`. On
wide networks :math:`\hat k` is large for every Gaussian: it answers
whether q is the posterior, not whether q predicts well.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from xarray import DataTree

from bnn_zoo.inference.psis import MIN_DRAWS, psis_log_weights

__all__ = ["K_GOOD", "K_WARN", "NEXT", "ApproximationWarning", "pareto_k", "reweighted", "warn_if_poor"]

#: Below this, q is close to the posterior (Yao et al. 2018).
K_GOOD = 0.5
#: Above this, :func:`bnn_zoo.sample` warns.
K_WARN = 0.7
#: The method to try next, after each one.
NEXT = {"advi": "method='lowrank_advi'", "lowrank_advi": "method='fullrank_advi'",
        "fullrank_advi": "a reparameterised (non-centred) model, or pm.sample",
        "laplace": "method='fullrank_advi'"}


class ApproximationWarning(UserWarning):
    """q is far from the posterior: the Pareto k of its importance ratios is above :data:`K_WARN`."""


def pareto_k(log_p: np.ndarray, log_q: np.ndarray) -> tuple[float, np.ndarray]:
    """PSIS's Pareto k of the importance ratios ``p / q`` of draws of q, and their smoothed log weights.

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
        The Pareto shape; NaN with fewer than ``MIN_DRAWS`` draws or a
        non-finite density.
    log_weights : numpy.ndarray
        ``(S,)``, normalised log weights (NaN where ``k`` is).

    Examples
    --------
    >>> import numpy as np
    >>> from bnn_zoo.inference import qcheck
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=4000)                       # q = N(0, 1)
    >>> log_q = -0.5 * z**2
    >>> k_same, _ = qcheck.pareto_k(-0.5 * z**2, log_q)  # p = q
    >>> k_wide, _ = qcheck.pareto_k(-0.5 * (z / 3)**2, log_q)  # p = N(0, 9): q misses its tails
    >>> k_same < 0.5 < 0.7 < k_wide
    True
    """
    log_ratio = np.asarray(log_p, dtype="float64") - np.asarray(log_q, dtype="float64")
    if log_ratio.size < MIN_DRAWS or not np.isfinite(log_ratio).all():
        return float("nan"), np.full(log_ratio.size, np.nan)
    if np.ptp(log_ratio) < 1e-12:  # q is the posterior to round-off: equal weights
        return -np.inf, np.full(log_ratio.size, -np.log(log_ratio.size))
    log_w, k = psis_log_weights(log_ratio[None])
    return float(k[0]), log_w[0]


def warn_if_poor(k: float, method: str, n_fits: int = 1) -> None:
    """Warn, in one line naming the fit and the next method to try, when ``k`` is above :data:`K_WARN`.

    Parameters
    ----------
    k : float
        The Pareto k (:func:`pareto_k`).
    method : str
        The fit's method (``FitResult.method``).
    n_fits : int, default 1
        The fits whose mixture was drawn.
    """
    if k > K_WARN:
        which = f"the {method!r} fit" if n_fits == 1 else f"the mixture of {n_fits} {method!r} fits"
        warnings.warn(f"{which} is far from the posterior: Pareto k of its importance ratios {k:.2f} > "
                      f"{K_WARN} (docs/user_guide/families.md); its means and sds may be off: try "
                      f"{NEXT.get(method, 'another method')}", ApproximationWarning, stacklevel=4)


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
    k = idata.attrs.get("pareto_k")
    if k is None or "psis_log_weight" not in idata["sample_stats"]:
        raise ValueError("these draws carry no PSIS weights: draw them with bnn_zoo.sample(..., log_likelihood=True)")
    if not k <= K_WARN:
        raise ValueError(f"Pareto k is {k:.2f} > {K_WARN}: the reweighted estimates are not reliable either; "
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
