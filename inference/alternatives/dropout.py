"""MC dropout (Gal and Ghahramani 2016) on the zoo's MLP architectures, in JAX and optax.

Not a PyMC model: dropout is a network with random masks, fitted as one
point. It is one of the methods ``bnn-zoo alternatives`` compares ADVI with
(:mod:`~bnn_zoo.inference.alternatives.baselines` has the others). Gal and Ghahramani
read it as variational inference with a Bernoulli-masked q; its predictive
is the average over random masks at test time. The loss is the zoo
model's, ``-(log lik + log prior) / N`` at the masked weights, with the
prior ``N(0, prior_sd^2)`` on every weight and bias (weight decay); a
regressor also fits its noise sd ``sigma`` (a point)::

    net = dropout.fit_dropout(X, y, kind="classifier", hidden=(5, 5), activation="tanh")
    pred = dropout.predict_dropout(net, X_new, draws=500)   # DataTree: predictions "p" (or "mu", "sigma")

Predictions are an ArviZ DataTree named as the PyMC models name theirs
(``p``; ``mu`` and ``sigma``), so the same metrics code reads them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from arviz_base import from_dict
from xarray import DataTree

from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.support.renamed import refuse_renamed

__all__ = ["ACTIVATIONS", "KINDS", "DropoutNet", "fit_dropout", "predict_dropout"]

#: The hidden layers' nonlinearities, by name (as the zoo's MLP builders name them).
ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid}
#: The kinds of network :func:`fit_dropout` makes.
KINDS = ("classifier", "regressor")


@dataclass
class DropoutNet:
    """A fitted dropout network: what :func:`fit_dropout` returns and :func:`predict_dropout` takes.

    Parameters
    ----------
    params : dict of str to numpy.ndarray
        ``W_<l>`` and ``b_<l>`` of each layer ``l``, and ``log_sigma`` (the
        log noise sd) for a regressor.
    kind : {"classifier", "regressor"}
        The kind of network.
    hidden : tuple of int
        Units of each hidden layer.
    activation : str
        The hidden layers' nonlinearity (a key of :data:`ACTIVATIONS`).
    rate : float
        The dropout probability of every hidden unit.
    seconds : float
        The fit's wall time, compilation included.
    loss : numpy.ndarray
        The loss of every step.
    """

    params: dict  # "W_l", "b_l" per layer; "log_sigma" for a regressor
    kind: str
    hidden: tuple[int, ...]
    activation: str
    rate: float
    seconds: float
    loss: np.ndarray  # per-step loss


def _forward(params: dict, X, key, *, layers: int, activation: str, rate: float, shared: bool = False):
    """The network at ``X`` with a fresh dropout mask on every hidden layer's output (``key``):
    one per row (training), or one for all rows (``shared``: one network of the predictive)."""
    h = X
    act = ACTIVATIONS[activation]
    for layer in range(layers):
        h = h @ params[f"W_{layer}"] + params[f"b_{layer}"]
        if layer < layers - 1:
            h = act(h)
            if rate > 0:
                key, sub = jax.random.split(key)
                keep = jax.random.bernoulli(sub, 1 - rate, h.shape[-1:] if shared else h.shape)
                h = jnp.where(keep, h / (1 - rate), 0.0)
    return h


def _log_lik(params, h, y, kind):
    if kind == "classifier":
        return jnp.take_along_axis(jax.nn.log_softmax(h), y[:, None], axis=1)[:, 0]
    sigma = jnp.exp(params["log_sigma"])
    return -0.5 * ((y - h[:, 0]) / sigma) ** 2 - jnp.log(sigma) - 0.5 * jnp.log(2 * jnp.pi)


@refuse_renamed
def fit_dropout(X: np.ndarray, y: np.ndarray, *, kind: str, hidden=(5, 5), activation: str = "tanh", rate: float = 0.1,
        prior_sd: float = 1.0, steps: int = 10_000, lr: float = 0.01, batch_size: int | None = None,
        random_seed: int = 0) -> DropoutNet:
    """Fit the dropout network by Adam, its rate decaying by a cosine from ``lr`` to 1% of it.

    The loss is ``-(log lik + log prior) / N`` at the masked network, with a
    fresh mask per row and step. Weights start as ADVI's means
    (N(0, 1/fan_in)), biases at 0, a regressor's noise sd at the sd of ``y``.

    Parameters
    ----------
    X : numpy.ndarray
        ``(n, d)`` inputs (cast to float32).
    y : numpy.ndarray
        ``(n,)`` class labels ``0..K-1`` (classifier) or targets (regressor).
    kind : {"classifier", "regressor"}
        ``"classifier"``: a softmax over ``y.max() + 1`` classes;
        ``"regressor"``: one output with Gaussian noise of fitted sd.
    hidden : sequence of int, default (5, 5)
        Units of each hidden layer.
    activation : {"tanh", "relu", "sigmoid"}, default "tanh"
        The hidden layers' nonlinearity.
    rate : float, default 0.1
        The dropout probability of every hidden unit, in [0, 1).
    prior_sd : float, default 1.0
        The Gaussian prior's sd on every weight and bias (the weight decay).
    steps : int, default 10000
        Adam steps.
    lr : float, default 0.01
        The initial learning rate.
    batch_size : int, optional
        Minibatch rows; default all (full batch).
    random_seed : int, default 0
        Seeds the initial weights, the masks and the minibatches.

    Returns
    -------
    DropoutNet
        The fitted network.

    Raises
    ------
    ValueError
        For an unknown ``kind`` or ``activation``, or a ``rate``, ``steps``
        or ``batch_size`` out of range.
    FloatingPointError
        If the loss becomes NaN or infinite (lower ``lr``).

    Examples
    --------
    >>> from bnn_zoo.data import toy
    >>> from bnn_zoo.inference.alternatives import dropout
    >>> split = toy.load("moons", n_train=200, n_test=50)
    >>> net = dropout.fit_dropout(split.X_train, split.y_train, kind="classifier", hidden=(5, 5),
    ...                           activation="tanh", steps=500)
    >>> pred = dropout.predict_dropout(net, split.X_test, draws=100)
    >>> pred["predictions"]["p"].mean(("chain", "draw")).shape   # P(class) at each test point
    (50, 2)
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
    if not 0 <= rate < 1:
        raise ValueError(f"rate must be in [0, 1), got {rate!r}")
    if not (isinstance(steps, (int, np.integer)) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    X = np.asarray(X, "float32")
    y = np.asarray(y, "int32" if kind == "classifier" else "float32")
    n = len(X)
    batch = batch_size or n
    if not 1 <= batch <= n:
        raise ValueError(f"batch_size must be in 1..{n}, got {batch_size!r}")
    widths = [X.shape[1], *hidden, int(y.max()) + 1 if kind == "classifier" else 1]
    rng = np.random.default_rng(random_seed)
    params = {}
    for layer, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        params[f"W_{layer}"] = jnp.asarray(rng.normal(0, 1 / np.sqrt(a), (a, b)), "float32")
        params[f"b_{layer}"] = jnp.zeros(b, "float32")
    if kind == "regressor":
        params["log_sigma"] = jnp.asarray(np.log(np.std(y) + 1e-6), "float32")
    optimizer = optim.make("adam", lr, steps, schedule_kind="cosine")
    forward = partial(_forward, layers=len(widths) - 1, activation=activation, rate=rate)

    def loss(params, key, idx):
        h = forward(params, X_dev[idx], key)
        lik = _log_lik(params, h, y_dev[idx], kind).sum() * (n / batch)
        prior = sum(-0.5 * jnp.sum(v**2) / prior_sd**2 for k, v in params.items() if k != "log_sigma")
        return -(lik + prior) / n

    per_epoch = n // batch

    def body(carry, t):
        params, opt_state = carry
        perm = jax.random.permutation(jax.random.fold_in(key, -1 - t // per_epoch), n)
        idx = jax.lax.dynamic_slice(perm, ((t % per_epoch) * batch,), (batch,))
        value, grad = jax.value_and_grad(loss)(params, jax.random.fold_in(key, t), idx)
        updates, opt_state = optimizer.update(grad, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), value

    X_dev, y_dev, key, t0 = jnp.asarray(X), jnp.asarray(y), jax.random.key(random_seed), time.perf_counter()
    run = jax.jit(lambda params: jax.lax.scan(body, (params, optimizer.init(params)), jnp.arange(steps)))
    (params, _), losses = run(params)
    losses = np.asarray(losses)
    if not np.isfinite(losses).all():
        raise FloatingPointError("the dropout network's loss became NaN or infinite; lower lr")
    return DropoutNet({k: np.asarray(v) for k, v in params.items()}, kind, tuple(hidden), activation, rate,
                      time.perf_counter() - t0, losses)


@refuse_renamed
def predict_dropout(net: DropoutNet, X: np.ndarray, *, draws: int = 500, random_seed: int = 0,
                    chunk: int = 10_000) -> DataTree:
    """The MC-dropout predictive at ``X``: ``draws`` forward passes, each with fresh masks.

    Each draw's mask is shared by all rows, so a draw is one network.

    Parameters
    ----------
    net : DropoutNet
        A fitted network (:func:`fit_dropout`).
    X : numpy.ndarray
        ``(n, d)`` inputs.
    draws : int, default 500
        Forward passes (networks) of the predictive.
    random_seed : int, default 0
        Seeds the masks.
    chunk : int, default 10000
        Rows evaluated at a time.

    Returns
    -------
    xarray.DataTree
        Group ``predictions``: ``p`` (chain, draw, obs, class) for a
        classifier; ``mu`` (chain, draw, obs) and ``sigma`` (chain, draw)
        for a regressor, as the zoo's PyMC models name them.

    Raises
    ------
    ValueError
        If ``draws`` is not a positive integer.
    """
    if not (isinstance(draws, (int, np.integer)) and draws >= 1):
        raise ValueError(f"draws must be an integer >= 1, got {draws!r}")
    layers = len(net.hidden) + 1
    forward = partial(_forward, layers=layers, activation=net.activation, rate=net.rate, shared=True)
    params = {k: jnp.asarray(v) for k, v in net.params.items()}
    keys = jax.random.split(jax.random.key(random_seed), draws)
    out = jax.jit(jax.vmap(lambda k, X: forward(params, X, k), in_axes=(0, None)))
    X = np.asarray(X, "float32")
    h = np.concatenate([np.asarray(out(keys, X[i:i + chunk])) for i in range(0, len(X), chunk)], axis=1)
    if net.kind == "classifier":
        e = np.exp(h - h.max(-1, keepdims=True))
        groups = {"p": (e / e.sum(-1, keepdims=True))[None]}
    else:
        groups = {"mu": h[None, ..., 0], "sigma": np.full((1, draws), np.exp(float(net.params["log_sigma"])))}
    return from_dict({"predictions": groups})
