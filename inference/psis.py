"""Pareto-smoothed importance sampling LOO for variational posteriors, over all observations at once.

The same computation as ArviZ's ``az.loo_approximate_posterior`` (arviz-stats
1.x: PSIS of Vehtari et al. 2024 with the approximate-posterior correction of
Magnusson et al. 2019), written with numpy operations over the observation
axis. ArviZ runs it one observation at a time in Python (``np.vectorize``);
over all observations at once it takes a fraction of the time
(docs/user_guide/engine.md). ``tests/test_posterior.py`` checks both agree
to 1e-10 on real fits. :func:`loo` takes a DataTree of draws from
:func:`~bnn_zoo.inference.sampling.sample` and returns what ArviZ's does.
"""

from __future__ import annotations

import warnings

import numpy as np
from arviz_stats.utils import ELPDDataLOO
from scipy.special import logsumexp
from xarray import DataTree

__all__ = ["MIN_DRAWS", "gpd_fit", "gpd_quantile", "loo", "loo_approximate_posterior", "psis_log_weights",
           "tail_length"]

PRIOR_K = 10  # weakly informative prior on the Pareto shape: N(0.5, ...) worth 10 observations
PRIOR_BS = 3  # Zhang & Stephens' grid scale
BLOCK = 1024  # observations at a time


#: The fewest draws PSIS takes: fewer leave under 5 draws in the tail that the Pareto fit smooths.
MIN_DRAWS = 25


def tail_length(n_draws: int) -> int:
    """Draws in the fitted right tail: ``3 sqrt(S)`` above 225 draws, else ``S / 5``.

    Parameters
    ----------
    n_draws : int
        ``S``, the number of draws.

    Returns
    -------
    int
        The tail's length, rounded down.
    """
    return int(np.floor(3 * n_draws**0.5 if n_draws > 225 else n_draws / 5))


def gpd_fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Generalized Pareto (shape k, scale sigma) of each row of ``x``.

    Zhang & Stephens' empirical Bayes estimate with the prior on k of
    Vehtari et al. (2024).

    Parameters
    ----------
    x : numpy.ndarray
        ``(rows, n)``, each row sorted ascending, non-negative.

    Returns
    -------
    k : numpy.ndarray
        ``(rows,)`` shapes; NaN for rows whose first quartile is not above
        their minimum (far from a generalized Pareto).
    sigma : numpy.ndarray
        ``(rows,)`` scales, NaN for the same rows.
    """
    n = x.shape[-1]
    m = 30 + int(n**0.5)
    xstar = x[:, int(n / 4 + 0.5) - 1]  # first quartile
    valid = ~(xstar <= x[:, 0])  # as ArviZ: a NaN quartile goes on (to k = inf)
    xstar = np.where(valid, xstar, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = (1 - np.sqrt(m / (np.arange(1, m + 1) - 0.5)))[None, :] / (PRIOR_BS * xstar[:, None])
        b = b + 1 / x[:, -1:]
        k = np.mean(np.log1p(-b[:, :, None] * x[:, None, :]), axis=2)
        log_lik = n * (np.log(-b / k) - k - 1)
        w = np.exp(log_lik - logsumexp(log_lik, axis=1, keepdims=True))
        w = np.where(w >= 10 * np.finfo(float).eps, w, 0.0)  # negligible weights dropped
        w = w / w.sum(axis=1, keepdims=True)
        b_post = np.sum(b * w, axis=1)
        k = np.mean(np.log1p(-b_post[:, None] * x), axis=1)
        sigma = -k / b_post
    k = (n * k + PRIOR_K * 0.5) / (n + PRIOR_K)
    k = np.where(np.isnan(k), np.inf, k)
    return np.where(valid, k, np.nan), np.where(valid, sigma, np.nan)


def gpd_quantile(p: np.ndarray, k: np.ndarray, sigma: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Quantiles ``p`` of generalized Paretos with ``(k, sigma, mu)`` per row.

    Parameters
    ----------
    p : numpy.ndarray
        ``(1, m)`` probabilities, shared by every row.
    k, sigma, mu : numpy.ndarray
        ``(rows,)`` shape, scale and location of each row's distribution.

    Returns
    -------
    numpy.ndarray
        ``(rows, m)`` quantiles; NaN where ``sigma <= 0``.
    """
    k, sigma, mu = k[:, None], sigma[:, None], mu[:, None]
    safe_k = np.where(k == 0, 1.0, k)
    with np.errstate(invalid="ignore"):
        q = np.where(k == 0, mu - sigma * np.log1p(-p),
                     mu + sigma * np.expm1(-safe_k * np.log1p(-p)) / safe_k)
        return np.where(sigma > 0, q, np.nan)


def psis_log_weights(log_ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, normalised log importance weights of each row, and each row's Pareto k.

    Parameters
    ----------
    log_ratios : numpy.ndarray
        ``(rows, S)`` log importance ratios, one row per observation.

    Returns
    -------
    log_weights : numpy.ndarray
        ``(rows, S)``, each row's log weights, summing to one.
    k : numpy.ndarray
        ``(rows,)``, the Pareto shape estimate of each row's tail.

    Raises
    ------
    ValueError
        With fewer than :data:`MIN_DRAWS` draws, or a tail of equal values.
    """
    n_obs, S = log_ratios.shape
    M = tail_length(S)
    if M < 5:
        raise ValueError(f"PSIS needs at least {MIN_DRAWS} draws, got {S}")
    lw = log_ratios - log_ratios.max(axis=1, keepdims=True)
    order = np.argsort(lw, axis=1)
    tail_idx = order[:, S - M:]
    tail = np.take_along_axis(lw, tail_idx, axis=1)  # ascending
    cutoff = np.take_along_axis(lw, order[:, S - M - 1 : S - M], axis=1)[:, 0]
    if np.any(np.abs(tail[:, -1] - tail[:, 0]) < np.finfo(float).tiny):
        raise ValueError("All tail values are the same")
    k, sigma = gpd_fit(np.exp(tail) - np.exp(cutoff)[:, None])
    smooth = np.isfinite(k)
    if smooth.any():
        p = (np.arange(0.5, M) / M)[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            smoothed = np.log(gpd_quantile(p, k[smooth], sigma[smooth], np.exp(cutoff[smooth])))
        max_tail = tail[smooth, -1:]
        smoothed = np.where(smoothed > max_tail, max_tail, smoothed)
        rows = np.flatnonzero(smooth)[:, None]
        lw[rows, tail_idx[smooth]] = smoothed
    return lw - logsumexp(lw, axis=1, keepdims=True), k


def loo_approximate_posterior(log_lik: np.ndarray, log_p: np.ndarray, log_q: np.ndarray):
    """Pointwise PSIS-LOO of draws from an approximation q of the posterior p.

    The importance ratios of observation ``i`` are ``p(z) / (q(z) p(y_i | z))``.

    Parameters
    ----------
    log_lik : numpy.ndarray
        ``(draws, n)``, each draw's pointwise log likelihood.
    log_p : numpy.ndarray
        ``(draws,)``, the model's joint log density of each draw.
    log_q : numpy.ndarray
        ``(draws,)``, q's log density of each draw.

    Returns
    -------
    elpd_i : numpy.ndarray
        ``(n,)``, each observation's expected log pointwise predictive density.
    pareto_k : numpy.ndarray
        ``(n,)``, each observation's Pareto k.
    p_loo_i : numpy.ndarray
        ``(n,)``, each observation's effective number of parameters.

    Raises
    ------
    ValueError
        With fewer than :data:`MIN_DRAWS` draws.
    """
    log_lik = np.asarray(log_lik, dtype=float).T  # (n, S)
    correction = np.asarray(log_p, dtype=float) - np.asarray(log_q, dtype=float)
    correction = correction - correction.max()
    parts = []
    for start in range(0, len(log_lik), BLOCK):  # bounded memory: gpd_fit holds (rows, ~38, ~67)
        ll = log_lik[start : start + BLOCK]
        log_ratios = -ll + correction
        lw, k = psis_log_weights(log_ratios - log_ratios.max(axis=1, keepdims=True))
        elpd_i = logsumexp(lw + ll, axis=1)
        lppd_i = logsumexp(ll, axis=1, b=1 / ll.shape[1])
        parts.append((elpd_i, k, lppd_i - elpd_i))
    return tuple(np.concatenate(p) for p in zip(*parts))


def loo(idata: DataTree, var_name: str | None = None) -> ELPDDataLOO:
    """PSIS-LOO for draws from an approximate posterior, corrected by each draw's ``log p - log q``.

    What ``az.loo_approximate_posterior(idata, log_p, log_q, var_name=...)``
    returns (Pareto-smoothed importance sampling, Vehtari et al.; the
    approximate-posterior correction of Magnusson et al. 2019), computed for
    all observations at once (:func:`loo_approximate_posterior`), so
    ``az.compare`` takes it.

    Parameters
    ----------
    idata : xarray.DataTree
        From :func:`~bnn_zoo.inference.sampling.sample` with
        ``log_likelihood=True``: the ``log_likelihood`` group and
        ``sample_stats`` with every draw's finite ``log_p`` and ``log_q``.
    var_name : str, optional
        The observed variable; default the one in ``log_likelihood``.

    Returns
    -------
    arviz_stats.utils.ELPDDataLOO
        ``elpd``, its ``se``, ``p`` (the effective number of parameters),
        and pointwise ``elpd_i`` and ``pareto_k``, with
        ``approx_posterior=True``.

    Raises
    ------
    ValueError
        Without the ``log_likelihood`` group or finite ``log_p`` and
        ``log_q``; without ``var_name`` when there are several observed
        variables; with fewer than 25 draws.

    Warns
    -----
    UserWarning
        When a Pareto k estimate exceeds ``good_k`` (0.7, or less for fewer
        than about 2,200 draws): the importance sampling is less reliable
        for those observations.

    Examples
    --------
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=100)
    >>> with pm.Model() as model:
    ...     X = pm.Data("X", x)
    ...     b = pm.Normal("b", 0, 10)
    ...     mu = pm.Deterministic("mu", b * X)
    ...     y = pm.Normal("y", mu, 1, observed=2 * x + rng.normal(size=100), shape=X.shape)
    >>> result = bnn_zoo.fit(model, steps=5_000, progressbar=False)
    >>> elpd = bnn_zoo.loo(bnn_zoo.sample(result, 1000))
    >>> print(f"elpd {elpd.elpd:.1f} +- {elpd.se:.1f}, p_loo {elpd.p:.1f}, max k {float(elpd.pareto_k.max()):.1f}")
    elpd -138.4 +- 6.1, p_loo 0.7, max k 0.4

    ``az.compare({"a": bnn_zoo.loo(idata_a), "b": bnn_zoo.loo(idata_b)})``
    ranks two models of the same data by it.
    """
    stats = idata["sample_stats"]
    if "log_likelihood" not in idata.children:
        raise ValueError("loo needs the log_likelihood group (sample(..., log_likelihood=True))")
    if "log_p" not in stats or np.isnan(stats["log_p"]).all():
        raise ValueError("loo needs each draw's log p and log q (sample(..., log_likelihood=True))")
    impossible = int((stats["log_p"] == -np.inf).sum())
    if impossible:
        raise ValueError(f"{impossible} of {stats['log_p'].size} draws have log p = -inf: q puts mass where the "
                         "posterior has none (its q_pareto_k is inf), so no importance weights exist; fit q "
                         "again, or fit the data the model gives zero density to")
    if not (np.isfinite(stats["log_p"]).all() and np.isfinite(stats["log_q"]).all()):
        raise ValueError("loo needs each draw's finite log p and log q; some are NaN or +inf")
    group = idata["log_likelihood"]
    if var_name is None:
        if len(group.data_vars) != 1:
            raise ValueError(f"name the observed variable: var_name one of {', '.join(group.data_vars)}")
        var_name = next(iter(group.data_vars))
    log_lik = group[var_name]
    obs_dims = [d for d in log_lik.dims if d not in ("chain", "draw")]
    log_lik = log_lik.transpose("chain", "draw", *obs_dims)
    n_samples = log_lik.sizes["chain"] * log_lik.sizes["draw"]
    values = log_lik.values.reshape(n_samples, -1)
    elpd_i, pareto_k, p_loo_i = (
        log_lik.isel(chain=0, draw=0, drop=True).copy(data=v.reshape(log_lik.shape[2:]))
        for v in loo_approximate_posterior(
            values, stats["log_p"].values.ravel(), stats["log_q"].values.ravel()))
    good_k = min(1 - 1 / np.log10(n_samples), 0.7) if n_samples > 1 else 0.7
    warning = bool(np.any(pareto_k.values > good_k))
    if warning:
        warnings.warn(f"Estimated shape parameter of Pareto distribution is greater than {good_k:.2f} "
                      "for one or more samples: importance sampling is less reliable for them.",
                      stacklevel=2)
    elpd, se, p_loo, _ = elpd_i.azstats.loo_summary(p_loo_i)
    return ELPDDataLOO(elpd=elpd, se=se, p=p_loo, n_samples=n_samples, n_data_points=values.shape[1],
                       scale="log", warning=warning, good_k=good_k, elpd_i=elpd_i, pareto_k=pareto_k,
                       approx_posterior=True)
