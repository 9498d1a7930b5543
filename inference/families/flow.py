"""Normalizing-flow q (``"flow"``): affine coupling layers on top of a Gaussian, ``z = mu + A f(u)``.

``u`` is a draw of the base (a standard normal, or a multivariate Student-t
of ``df`` degrees of freedom for heavy tails), ``f`` a stack of RealNVP
affine coupling layers (Dinh, Sohl-Dickstein and Bengio 2017), each of
which moves and scales half of the coordinates by a small network of the
other half, and ``A`` the factor of a Gaussian fit, fixed. Every coupling
layer starts at the identity (its last weights zero), so a flow starts as
exactly the Gaussian it is put on, the start Agrawal, Sheldon and Domke's
"Advances in Black-Box VI: Normalizing Flows, Importance Weighting, and
Optimization" recommend. They use ten layers of two hidden layers of 32
units; the default here is 16 units
(:data:`~bnn_zoo.inference.defaults.FLOW_HIDDEN`: the step's cost grows with
the width, and on posteriors of 10-21 values the narrower flow reached
as good a q in the same steps, docs/user_guide/families.md). The
coupling layers are exactly invertible, so ``log q(z)`` at any ``z`` costs
one inverse pass: the sticking-the-landing gradient (``path_derivative``),
``log q`` of a mixture, and PSIS's ``log q`` use it.

The parameters are one dict of arrays like every family's (the engine,
the checkpoints and the averaging treat them alike): ``mu``; ``A`` (a
lower-triangular factor, or a vector of sds) and ``masks`` (which half each
layer keeps), both held fixed by a stopped gradient; and each layer's
weights stacked over layers, ``W1 (layers, dim, hidden)``, ``b1``, ``W2``,
``b2``, ``W3 (layers, hidden, 2 dim)``, ``b3``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from bnn_zoo.inference import defaults
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.families.base import Family

__all__ = ["SCALE_BOUND", "flow"]

#: Each coupling layer's log scale is ``SCALE_BOUND * tanh(raw / SCALE_BOUND)``: a layer scales a
#: coordinate by at most ``e**3`` either way, so one bad step cannot overflow the draws.
SCALE_BOUND = 3.0
#: The draws of q whose mean and covariance stand for a flow's ``mean_and_factor`` (its moments).
MOMENT_DRAWS = 4000


def _masks(dim: int, layers: int) -> np.ndarray:
    """Alternating halves: each pair of layers splits the coordinates at random, then the other way."""
    rng, rows = np.random.default_rng(0), []
    for k in range(layers):
        if k % 2 == 0:
            half = np.zeros(dim)
            half[rng.permutation(dim)[: dim // 2]] = 1.0
        rows.append(half if k % 2 == 0 else 1.0 - half)
    return np.stack(rows)


def _net(layer, x, dim):
    h = jnp.tanh(x @ layer["W1"] + layer["b1"])
    h = jnp.tanh(h @ layer["W2"] + layer["b2"])
    out = h @ layer["W3"] + layer["b3"]
    return SCALE_BOUND * jnp.tanh(out[:dim] / SCALE_BOUND), out[dim:]


_LAYER_KEYS = ("W1", "b1", "W2", "b2", "W3", "b3", "masks")


def _layers(params):
    stacked = {k: params[k] for k in _LAYER_KEYS}
    stacked["masks"] = jax.lax.stop_gradient(stacked["masks"])
    return stacked


def _forward(params, u):
    dim = u.shape[0]

    def layer(carry, p):
        x, log_det = carry
        m = p["masks"]
        s, t = _net(p, m * x, dim)
        return (m * x + (1 - m) * (x * jnp.exp(s) + t), log_det + jnp.sum((1 - m) * s)), None

    (v, log_det), _ = jax.lax.scan(layer, (u, jnp.zeros((), u.dtype)), _layers(params))
    return v, log_det


def _inverse(params, v):
    dim = v.shape[0]

    def layer(carry, p):
        y, log_det = carry
        m = p["masks"]
        s, t = _net(p, m * y, dim)
        return (m * y + (1 - m) * (y - t) * jnp.exp(-s), log_det + jnp.sum((1 - m) * s)), None

    (u, log_det), _ = jax.lax.scan(layer, (v, jnp.zeros((), v.dtype)), _layers(params), reverse=True)
    return u, log_det


def _apply_A(A, v):
    return A @ v if A.ndim == 2 else A * v


def _log_det_A(A):
    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(A) if A.ndim == 2 else A)))


def _base(df: int | None):
    """``(draw(eps) -> u, log_density(u))`` of the base: standard normal, or multivariate Student-t."""
    if df is None:
        return (lambda eps: eps), (lambda u: -0.5 * jnp.sum(u**2) - 0.5 * u.shape[0] * np.log(2 * np.pi))

    def draw(eps):  # eps: dim normals, then df normals whose squares make the chi-square
        d = eps.shape[0] - df
        return eps[:d] / jnp.sqrt(jnp.sum(eps[d:] ** 2) / df)

    def log_density(u):
        d = u.shape[0]
        return (gammaln((df + d) / 2) - gammaln(df / 2) - 0.5 * d * np.log(df * np.pi)
                - 0.5 * (df + d) * jnp.log1p(jnp.sum(u**2) / df))

    return draw, log_density


def flow(layers: int = 10, hidden: int = 32, df: int | None = None) -> Family:
    """The coupling-flow family: ``layers`` affine coupling layers of ``hidden`` units on a Gaussian's factor.

    Parameters
    ----------
    layers : int, default 10
        Affine coupling layers; each pair transforms every coordinate once.
    hidden : int, default 32
        Units in each of the two hidden layers of each layer's network.
    df : int, optional
        The base's degrees of freedom: ``None`` for a standard normal, an
        integer for a multivariate Student-t (heavier tails than any
        Gaussian's, which an affine flow keeps).

    Returns
    -------
    Family
        Named ``"flow"``. Its ``init(mean, sd)`` puts the flow on a diagonal
        Gaussian, ``from_factor(mean, factor)`` on any Gaussian's factor
        (dense where it is dense, up to
        :data:`~bnn_zoo.inference.defaults.AUTO_FULL_RANK_MAX` values, else its
        sds); its ``factor`` is q's moments from :data:`MOMENT_DRAWS` draws,
        the mean and the Cholesky factor of the covariance (above
        ``AUTO_FULL_RANK_MAX`` values the sds alone), for the uses that need a
        Gaussian (a NUTS mass matrix, ``FitResult.mean``), while draws and
        ``log q`` are the flow's own.
    """
    draw_base, base_log_density = _base(df)
    extra = 0 if df is None else int(df)

    def from_factor(mu, factor):
        d = mu.size
        if isinstance(factor, gaussians.LowRank):  # dense where auto's Gaussian would be, else its sds
            factor = (np.linalg.cholesky(gaussians.covariance(factor)) if defaults.full_rank(d)
                      else gaussians.marginal_sd(factor))
        A = np.asarray(factor, dtype="float64")
        A = np.broadcast_to(A, (d,)) if A.ndim < 2 else A
        rng = np.random.default_rng(1)
        return {"mu": mu, "A": A.astype(mu.dtype), "masks": _masks(d, layers).astype(mu.dtype),
                "W1": (rng.standard_normal((layers, d, hidden)) / np.sqrt(max(d // 2, 1))).astype(mu.dtype),
                "b1": np.zeros((layers, hidden), mu.dtype),
                "W2": (rng.standard_normal((layers, hidden, hidden)) / np.sqrt(hidden)).astype(mu.dtype),
                "b2": np.zeros((layers, hidden), mu.dtype),
                "W3": np.zeros((layers, hidden, 2 * d), mu.dtype), "b3": np.zeros((layers, 2 * d), mu.dtype)}

    def parts(params, eps):
        u = draw_base(eps)
        v, log_det = _forward(params, u)
        A = jax.lax.stop_gradient(params["A"])
        return params["mu"] + _apply_A(A, v), base_log_density(u) - log_det - _log_det_A(A)

    def draw(params, eps):
        z, log_q = parts(params, eps)
        # entropy(log_det, dim) = log_det + dim/2 (1 + log 2 pi) is then this draw's -log q(z).
        return z, -log_q - 0.5 * z.shape[0] * (1.0 + np.log(2 * np.pi))

    def log_density(params, z):
        A = jax.lax.stop_gradient(params["A"])
        v = (jax.scipy.linalg.solve_triangular(A, z - params["mu"], lower=True) if A.ndim == 2
             else (z - params["mu"]) / A)
        u, log_det = _inverse(params, v)
        return base_log_density(u) - log_det - _log_det_A(A)

    def noise_size(params):
        return params["mu"].shape[0] + extra

    def sample(params, n, rng):
        params = {k: jnp.asarray(v, "float64") for k, v in params.items()}
        eps = jnp.asarray(rng.standard_normal((n, noise_size(params))))
        z, log_q = _sample_jit(parts, params, eps)
        return np.asarray(z), np.asarray(log_q)

    def log_q(params, z):
        params = {k: jnp.asarray(v, "float64") for k, v in params.items()}
        return np.asarray(_log_q_jit(log_density, params, jnp.asarray(z, "float64")))

    def factor(params):
        z, _ = sample(params, MOMENT_DRAWS, np.random.default_rng(0))
        if not defaults.full_rank(z.shape[1]):  # the sds alone: a dense factor would not fit, nor be estimated
            return z.mean(axis=0), z.std(axis=0)
        return z.mean(axis=0), np.linalg.cholesky(np.atleast_2d(np.cov(z, rowvar=False)))

    return Family(name="flow", pymc=None, init=from_factor, draw=draw, log_density=log_density,
                  factor=factor, from_factor=from_factor, noise_size=noise_size, to_pymc=_no_pymc,
                  sampler=sample, log_q_fn=log_q, exact_entropy=False)


@partial(jax.jit, static_argnums=0)
def _sample_jit(parts, params, eps):
    return jax.vmap(lambda e: parts(params, e))(eps)


@partial(jax.jit, static_argnums=0)
def _log_q_jit(log_density, params, z):
    return jax.vmap(lambda x: log_density(params, x))(z)


def _no_pymc(params):
    raise ValueError("PyMC has no flow approximation: use bnn_zoo.sample(result) for draws")
