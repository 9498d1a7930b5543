"""Pareto-smoothed importance sampling LOO for variational posteriors, as one JAX program.

The same computation as ArviZ's ``az.loo_approximate_posterior`` (arviz-stats
1.x: PSIS of Vehtari et al. 2024 with the approximate-posterior correction of
Magnusson et al. 2019), written in ``jax.numpy`` for one observation and
mapped over all of them. ArviZ runs it one observation at a time in Python
(``np.vectorize``); compiled, it takes a fraction of the time
(docs/user_guide/engine.md), and a sweep's device program maps it over fits
too. ``tests/test_posterior.py`` checks both agree to 1e-10.
:func:`pointwise` is the traceable core; :func:`loo_approximate_posterior`
runs it on NumPy arrays, and :func:`loo` on a DataTree of draws from
:func:`~bnn_zoo.inference.posterior.sampling.sample`, returning what ArviZ's does.
:func:`smooth` takes its array namespace: :func:`psis_log_weights` (one
row of a few thousand draws, ``q_pareto_k``'s) runs it in NumPy on the host,
in a few milliseconds and with no program compiled for each draw count.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from xarray import DataTree

if TYPE_CHECKING:
    from arviz_stats.utils import ELPDDataLOO

__all__ = ["MIN_DRAWS", "gpd_fit", "gpd_quantile", "loo", "loo_approximate_posterior", "pointwise",
           "psis_log_weights", "smooth", "tail_length"]

PRIOR_K = 10  # weakly informative prior on the Pareto shape: N(0.5, ...) worth 10 observations
PRIOR_BS = 3  # Zhang & Stephens' grid scale
BLOCK = 1024  # observations at a time
#: Draws beyond the tail that :func:`pointwise` ranks again in double precision (see :func:`_tops`).
CANDIDATES = 8


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


def gpd_fit(x, xp=jnp):
    """Generalized Pareto (shape k, scale sigma) of ``x``, traceable.

    Zhang & Stephens' empirical Bayes estimate with the prior on k of
    Vehtari et al. (2024).

    Parameters
    ----------
    x : jax.Array
        ``(n,)``, sorted ascending, non-negative.
    xp : module, default jax.numpy
        The array namespace: ``numpy`` computes it on the host, with nothing to compile.

    Returns
    -------
    k, sigma : jax.Array
        Scalars; NaN both when the first quartile is not above the minimum
        (far from a generalized Pareto).
    """
    n = x.shape[-1]
    m = 30 + int(n**0.5)
    xstar = x[int(n / 4 + 0.5) - 1]  # first quartile
    valid = ~(xstar <= x[0])  # as ArviZ: a NaN quartile goes on (to k = inf)
    xstar = xp.where(valid, xstar, 1.0)
    b = (1 - xp.sqrt(m / (xp.arange(1, m + 1) - 0.5))) / (PRIOR_BS * xstar) + 1 / x[-1]
    with np.errstate(divide="ignore", invalid="ignore"):  # on the host, NaN and inf are results, as in JAX
        k = xp.mean(xp.log1p(-b[:, None] * x[None, :]), axis=1)
        log_lik = n * (xp.log(-b / k) - k - 1)
        w = xp.exp(log_lik - _logsumexp(xp)(log_lik))
        w = xp.where(w >= 10 * np.finfo(float).eps, w, 0.0)  # negligible weights dropped
        w = w / w.sum()
        b_post = xp.sum(b * w)
        k = xp.mean(xp.log1p(-b_post * x))
        sigma = -k / b_post
    k = (n * k + PRIOR_K * 0.5) / (n + PRIOR_K)
    k = xp.where(xp.isnan(k), xp.inf, k)
    return xp.where(valid, k, xp.nan), xp.where(valid, sigma, xp.nan)


def gpd_quantile(p, k, sigma, mu, xp=jnp):
    """Quantiles ``p`` of the generalized Pareto ``(k, sigma, mu)``, traceable.

    Parameters
    ----------
    p : jax.Array
        ``(m,)`` probabilities.
    k, sigma, mu : jax.Array
        Scalars: shape, scale and location.
    xp : module, default jax.numpy
        The array namespace (``numpy`` on the host).

    Returns
    -------
    jax.Array
        ``(m,)`` quantiles; NaN where ``sigma <= 0``.
    """
    safe_k = xp.where(k == 0, 1.0, k)
    with np.errstate(invalid="ignore"):
        q = xp.where(k == 0, mu - sigma * xp.log1p(-p), mu + sigma * xp.expm1(-safe_k * xp.log1p(-p)) / safe_k)
    return xp.where(sigma > 0, q, xp.nan)


def _logsumexp(xp):
    if xp is np:
        from scipy.special import logsumexp as host

        return host
    return logsumexp


def _top(lw, n: int, xp):
    """The ``n`` largest of ``lw``, descending, and their indices: the lower index first among equals."""
    if xp is not np:
        return jax.lax.top_k(lw, n)  # a partial sort, faster than a sort on a CPU
    idx = np.sort(np.argpartition(lw, lw.size - n)[lw.size - n:])
    idx = idx[np.argsort(-lw[idx], kind="stable")]
    return lw[idx], idx


def smooth(log_ratios, xp=jnp, top=None):
    """Pareto-smoothed, normalised log importance weights of one observation, traceable.

    Parameters
    ----------
    log_ratios : jax.Array
        ``(S,)`` log importance ratios, ``S >=`` :data:`MIN_DRAWS`.
    xp : module, default jax.numpy
        The array namespace: ``numpy`` smooths on the host, with nothing to compile (one
        observation's few thousand draws: the time a compilation for each draw count would cost
        is most of it).
    top : tuple of jax.Array, optional
        The ``tail_length(S) + 1`` largest log ratios, descending, and their
        indices, as ``jax.lax.top_k`` finds them, where the caller ranked them
        (:func:`pointwise` ranks a block of observations at once); the log
        ratios then have a maximum of 0.

    Returns
    -------
    log_weights : jax.Array
        ``(S,)``, summing to one.
    k : jax.Array
        The Pareto shape estimate of the tail (NaN: not smoothed).
    flat : jax.Array
        Whether the tail is one value, which ArviZ refuses.
    """
    S = log_ratios.shape[-1]
    M = tail_length(S)
    lw = xp.asarray(log_ratios)
    lw = lw - lw.max()
    top, top_idx = _top(lw, M + 1, xp) if top is None else top  # descending
    tail, tail_idx = top[M - 1::-1], top_idx[M - 1::-1]  # ascending
    cutoff = top[M]
    flat = xp.abs(tail[-1] - tail[0]) < np.finfo(float).tiny
    k, sigma = gpd_fit(xp.exp(tail) - xp.exp(cutoff), xp)
    with np.errstate(invalid="ignore", divide="ignore"):
        smoothed = xp.log(gpd_quantile(xp.arange(0.5, M) / M, k, sigma, xp.exp(cutoff), xp))
    smoothed = xp.where(smoothed > tail[-1], tail[-1], smoothed)
    new = xp.where(xp.isfinite(k), smoothed, tail)
    if xp is np:
        lw = lw.copy()
        lw[tail_idx] = new
    else:
        lw = lw.at[tail_idx].set(new)
    return lw - _logsumexp(xp)(lw), k, flat


def pointwise(log_lik, log_p, log_q, block: int = BLOCK):
    """Pointwise PSIS-LOO of draws from an approximation q of the posterior p, traceable.

    The importance ratios of observation ``i`` are ``p(z) / (q(z) p(y_i | z))``;
    the observations are mapped ``block`` at a time (bounded memory).

    Parameters
    ----------
    log_lik : jax.Array
        ``(draws, n)``, each draw's pointwise log likelihood.
    log_p, log_q : jax.Array
        ``(draws,)``, the model's joint log density and q's of each draw.
    block : int, default BLOCK
        Observations at a time.

    Returns
    -------
    elpd_i, pareto_k, p_loo_i : jax.Array
        ``(n,)`` each: the expected log pointwise predictive density, the
        Pareto k and the effective number of parameters of each observation.
    flat : jax.Array
        Whether some observation's tail is one value (ArviZ refuses those).
    """
    correction = log_p - log_q
    correction = correction - correction.max()
    M = tail_length(log_lik.shape[0])

    def one(ll, log_ratios, top):
        lw, k, flat = smooth(log_ratios, top=top)
        elpd = logsumexp(lw + ll)
        return elpd, k, logsumexp(ll, b=1 / ll.shape[0]) - elpd, flat

    def rows(ll):  # a block of observations, (rows, S)
        log_ratios = -ll + correction
        log_ratios = log_ratios - log_ratios.max(axis=1, keepdims=True)
        return jax.vmap(one)(ll, log_ratios, _tops(log_ratios, M + 1))

    elpd_i, k, p_loo_i, flat = _blocks(rows, log_lik.T, min(block, log_lik.shape[1]))
    return elpd_i, k, p_loo_i, flat.any()


def _tops(lw, n: int):
    """What ``jax.lax.top_k(lw, n)`` returns for a block of rows ``lw`` ``(rows, S)``, faster on a CPU.

    XLA's CPU backend partially sorts single precision several times faster
    than double (700 rows of 500 draws: 9 ms against 22), so the ``n +``
    :data:`CANDIDATES` largest of each row are found in single precision
    (rounding keeps the order, merging near values) and the ``n`` largest of
    those in double. They are the row's ``n`` largest wherever the last
    candidate rounds below the ``n``-th: every other draw is then smaller. A
    block where some row has more near values at the cut than the candidates
    leave room for is ranked in double throughout. Equal values keep
    ``top_k``'s order, the lower index first, either way.
    """
    m = min(n + CANDIDATES, lw.shape[-1])
    _, idx = jax.lax.top_k(lw.astype("float32"), m)  # descending, the lower index first among equals
    candidates = jnp.take_along_axis(lw, idx, axis=-1)
    top, j = jax.lax.top_k(candidates, n)  # equals stay in index order
    # The test reads the candidates rounded again, not top_k's own single-precision values: on
    # XLA's CPU backend a use of those made the partial sort as slow as double's.
    rounded = candidates.astype("float32")
    whole = (m == lw.shape[-1]) | jnp.all(rounded[:, m - 1] < rounded[:, n - 1])
    return jax.lax.cond(whole, lambda lw, top, idx, j: (top, jnp.take_along_axis(idx, j, axis=-1)),
                        lambda lw, top, idx, j: tuple(jax.lax.top_k(lw, n)), lw, top, idx, j)


def _blocks(fn, x, block: int):
    """``fn`` of the rows of ``x``, ``block`` rows at a time in a loop (the remainder last): what
    ``jax.lax.map(f, x, batch_size=block)`` does for ``fn = jax.vmap(f)``, with ``fn`` seeing a block."""
    full = x.shape[0] // block * block
    parts = []
    if full:
        out = jax.lax.map(fn, x[:full].reshape(full // block, block, *x.shape[1:]))
        parts.append(jax.tree_util.tree_map(lambda a: a.reshape(full, *a.shape[2:]), out))
    if full < x.shape[0]:
        parts.append(fn(x[full:]))
    return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)


def _check_draws(S: int) -> None:
    if tail_length(S) < 5:
        raise ValueError(f"PSIS needs at least {MIN_DRAWS} draws, got {S}")


def _tails_differ(flat) -> None:
    if bool(flat):
        raise ValueError("All tail values are the same")


@functools.partial(jax.jit, static_argnums=3)
def _pointwise(log_lik, log_p, log_q, block):
    return pointwise(log_lik, log_p, log_q, block)


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
    log_ratios = np.asarray(log_ratios, dtype=float)
    _check_draws(log_ratios.shape[1])
    rows = [smooth(row, np) for row in log_ratios]  # on the host: no program compiled for each draw count
    _tails_differ(any(flat for _, _, flat in rows))
    return np.stack([lw for lw, _, _ in rows]), np.array([float(k) for _, k, _ in rows])


def loo_approximate_posterior(log_lik: np.ndarray, log_p: np.ndarray, log_q: np.ndarray):
    """:func:`pointwise` on NumPy arrays: pointwise PSIS-LOO of draws from q.

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
        With fewer than :data:`MIN_DRAWS` draws, or an observation whose
        tail is one value.
    """
    log_lik = np.asarray(log_lik, dtype=float)
    _check_draws(log_lik.shape[0])
    *values, flat = _pointwise(log_lik, np.asarray(log_p, dtype=float), np.asarray(log_q, dtype=float), BLOCK)
    _tails_differ(flat)
    return tuple(np.asarray(v) for v in values)


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
        From :func:`~bnn_zoo.inference.posterior.sampling.sample` with
        ``log_likelihood=True``: the ``log_likelihood`` group and
        ``sample_stats`` with every draw's finite ``log_p`` and ``log_q``;
        or from :func:`bnn_zoo.nuts`, whose draws are the posterior's (no
        ``log_q``: no correction).
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
        For anything but :func:`bnn_zoo.sample`'s DataTree; without the
        ``log_likelihood`` group or finite ``log_p`` and ``log_q``; without
        ``var_name`` when there are several observed variables, or one that
        is not among them; with fewer than 25 draws.

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
    if not isinstance(idata, DataTree) or "sample_stats" not in idata.children:
        raise ValueError(f"loo takes the DataTree of draws that bnn_zoo.sample returns, got {type(idata).__name__}: "
                         f"bnn_zoo.loo(bnn_zoo.sample(result))")
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
    # Draws of the posterior itself (bnn_zoo.nuts's; a method="auto" fit's resampled by their PSIS weights)
    # need no correction by p / q: they carry no log q, or say they were resampled.
    exact = "importance_resampled" in idata.attrs or "log_q" not in stats
    if not (np.isfinite(stats["log_p"]).all() and (exact or np.isfinite(stats["log_q"]).all())):
        raise ValueError("loo needs each draw's finite log p and log q; some are NaN or +inf")
    group = idata["log_likelihood"]
    if var_name is None:
        if len(group.data_vars) != 1:
            raise ValueError(f"name the observed variable: var_name one of {', '.join(group.data_vars)}")
        var_name = next(iter(group.data_vars))
    if var_name not in group.data_vars:
        raise ValueError(f"var_name {var_name!r} has no log likelihood here: one of {', '.join(group.data_vars)} "
                         f"(the observed variables)")
    log_lik = group[var_name]
    obs_dims = [d for d in log_lik.dims if d not in ("chain", "draw")]
    log_lik = log_lik.transpose("chain", "draw", *obs_dims)
    n_samples = log_lik.sizes["chain"] * log_lik.sizes["draw"]
    values = log_lik.values.reshape(n_samples, -1)
    log_q = stats["log_p" if exact else "log_q"].values.ravel()
    elpd_i, pareto_k, p_loo_i = (
        log_lik.isel(chain=0, draw=0, drop=True).copy(data=v.reshape(log_lik.shape[2:]))
        for v in loo_approximate_posterior(values, stats["log_p"].values.ravel(), log_q))
    good_k = min(1 - 1 / np.log10(n_samples), 0.7) if n_samples > 1 else 0.7
    warning = bool(np.any(pareto_k.values > good_k))
    if warning:
        warnings.warn(f"Estimated shape parameter of Pareto distribution is greater than {good_k:.2f} "
                      "for one or more samples: importance sampling is less reliable for them.",
                      stacklevel=2)
    from arviz_stats.utils import ELPDDataLOO  # and the .azstats accessor; with scipy.stats, a second of import

    elpd, se, p_loo, _ = elpd_i.azstats.loo_summary(p_loo_i)
    return ELPDDataLOO(elpd=elpd, se=se, p=p_loo, n_samples=n_samples, n_data_points=values.shape[1],
                       scale="log", warning=warning, good_k=good_k, elpd_i=elpd_i, pareto_k=pareto_k,
                       approx_posterior=not exact)
