"""Hierarchical Bayesian MLP classifier as a PyMC model.

Every layer ``l`` has weights ``W_l`` (dims ``(in, out)``) and biases ``b_l``
with the same weight prior and one shared scale ``scale_l`` drawn from the
hyperprior. The output is a softmax over the classes with a Categorical
likelihood (Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks",
use a 2-unit softmax for the binary toy problems; the same builder serves
10-class MNIST).

Inputs live in ``pm.Data("X")`` and labels in ``pm.Data("y")`` so the model
predicts on new points: ``p`` is the class-probability tensor.

:func:`mlp_regressor` is the regression counterpart (the sine wave of Garg,
"Bayesian Neural Networks and Variational Inference";
Blundell et al. 2015's curve): one linear output ``mu`` and a Normal
likelihood with observation-noise sd ``sigma``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from bnn_zoo.models.layers import LayerPriors
from bnn_zoo.models.priors import get_hyperprior

__all__ = ["ACTIVATIONS", "GAMMA_NOISE", "NOISE_MODELS", "mlp_classifier", "mlp_regressor"]

#: The hidden layers' activations by name (``activation=``), shared with the CNN.
ACTIVATIONS = {
    "tanh": pt.tanh,
    "relu": lambda x: pt.maximum(x, 0),
    "sigmoid": pt.sigmoid,
}


def _check_inputs(X, y, *, activation: str, hidden, total_size):
    """Both builders' argument checks; returns ``X, y`` as arrays."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y) or len(X) == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be (n, d) and y (n,) with n, d >= 1, got {X.shape} and {y.shape}")
    if not (np.issubdtype(X.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
        raise ValueError(f"X and y must be numeric, got {X.dtype} and {y.dtype}")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError("X and y must be finite")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
    if total_size is not None and total_size < len(X):
        raise ValueError(f"total_size must be >= len(X) = {len(X)}, got {total_size}")
    if any(int(h) < 1 for h in hidden):
        raise ValueError(f"hidden layer sizes must be >= 1, got {tuple(hidden)}")
    return X, y


def _layout(X, hidden, feature_names, out_dim: str, n_out: int) -> tuple[dict, list[str]]:
    """Both builders' coords, and the dims of each layer's units.

    The unit dims run ``feature``, ``unit_0``, ..., ``out_dim``.
    """
    n, d = X.shape
    coords = {
        "obs": np.arange(n),
        "feature": list(feature_names) if feature_names else [f"x{i + 1}" for i in range(d)],
        out_dim: np.arange(n_out),
        **{f"unit_{i}": np.arange(int(h)) for i, h in enumerate(hidden)},
    }
    return coords, ["feature", *(f"unit_{i}" for i in range(len(hidden))), out_dim]


def _network(X_data, layer_priors: LayerPriors, unit_dims: list[str], act):
    """Every layer's weights and biases under ``layer_priors``; returns the output layer's
    pre-activation (``act`` after each hidden layer)."""
    h = X_data
    for layer, (dim_in, dim_out) in enumerate(zip(unit_dims[:-1], unit_dims[1:])):
        W, b = layer_priors(layer, (dim_in, dim_out), dim_out)
        h = h @ W + b
        if dim_out != unit_dims[-1]:
            h = act(h)
    return h


def mlp_classifier(
    X: np.ndarray,
    y: np.ndarray,
    *,
    hidden: Sequence[int] = (5, 5),
    n_classes: int | None = None,
    activation: str = "tanh",
    prior: str | Sequence[str] = "normal",
    hyperprior: str | Sequence[str] = "inversegamma",
    prior_params: dict | None = None,
    hyperprior_params: dict | None = None,
    feature_names: Sequence[str] | None = None,
    total_size: int | None = None,
) -> pm.Model:
    """Build the hierarchical BNN classifier.

    Parameters
    ----------
    X : array (n, d)
        Training inputs; stored as ``pm.Data("X")`` in ``pytensor.config.floatX``.
    y : array of int (n,)
        Class labels in ``0..n_classes-1``; stored as ``pm.Data("y")``.
    hidden : sequence of int
        Units of each hidden layer (Zharikov et al.: ``(5, 5)``).
    n_classes : int, optional
        Number of classes; default ``y.max() + 1``.
    activation : {"tanh", "relu", "sigmoid"}
        Hidden-layer nonlinearity.
    prior, hyperprior : str or sequence of str
        Names from :mod:`models.priors`. Priors without a scale (``flat``)
        ignore the hyperprior. A sequence of names is a choice among them,
        selected by the data container ``prior_index`` (``hyperprior_index``):
        one compiled model for all of them
        (:class:`~bnn_zoo.models.layers.LayerPriors`).
    prior_params, hyperprior_params : dict, optional
        Overrides of the registry's default parameters (for a choice, by name).
    feature_names : sequence of str, optional
        Coordinate labels of the input features.
    total_size : int, optional
        Size of the full training set when ``X`` is one minibatch (the
        likelihood is scaled by ``total_size / len(X)``); default ``len(X)``.

    Returns
    -------
    pm.Model
        With coords ``obs``, ``feature``, ``unit_<l>``, ``class``; free
        variables ``W_<l>``, ``b_<l>`` (and ``scale_<l>`` when hierarchical);
        the deterministic ``p`` (class probabilities) and the likelihood
        ``y_obs``.
    """
    X, y = _check_inputs(X, y, activation=activation, hidden=hidden, total_size=total_size)
    n_classes = int(y.max()) + 1 if n_classes is None else int(n_classes)
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1}")
    layer_priors = LayerPriors(prior, hyperprior, prior_params, hyperprior_params)
    n = len(X)
    coords, unit_dims = _layout(X, hidden, feature_names, "class", n_classes)
    with pm.Model(coords=coords) as model:
        X_data = pm.Data("X", X.astype(pytensor.config.floatX), dims=("obs", "feature"))
        y_data = pm.Data("y", y.astype("int64"), dims="obs")
        h = _network(X_data, layer_priors, unit_dims, ACTIVATIONS[activation])
        p = pm.Deterministic("p", pt.special.softmax(h, axis=-1), dims=("obs", "class"))
        # total_size keeps the likelihood at full-data scale when fit() swaps
        # the data for minibatches; with the full data the factor is 1.
        pm.Categorical("y_obs", p=p, observed=y_data, dims="obs", total_size=total_size or n)
    return model


#: The priors :func:`mlp_regressor` takes on its observation noise: ``"halfnormal"`` on the sd
#: ``sigma``, ``"gamma"`` on the precision ``tau = 1 / sigma^2`` (probabilistic backpropagation's).
NOISE_MODELS = ("halfnormal", "gamma")
#: The Gamma prior on the noise precision of ``noise="gamma"``: shape and rate 6, as probabilistic
#: backpropagation (Hernández-Lobato and Adams 2015) sets it for standardised targets.
GAMMA_NOISE = {"alpha": 6.0, "beta": 6.0}


def mlp_regressor(
    X: np.ndarray,
    y: np.ndarray,
    *,
    hidden: Sequence[int] = (10, 10),
    activation: str = "tanh",
    prior: str = "normal",
    hyperprior: str = "fixed",
    prior_params: dict | None = None,
    hyperprior_params: dict | None = None,
    noise: str | float = "halfnormal",
    noise_scale: float = 1.0,
    noise_params: dict | None = None,
    feature_names: Sequence[str] | None = None,
    total_size: int | None = None,
) -> pm.Model:
    """Build a Bayesian MLP regressor with a Gaussian likelihood.

    Same layers and priors as :func:`mlp_classifier` (weights ``W_l``, biases
    ``b_l`` and, when hierarchical, one scale ``scale_l`` per layer), with one
    linear output unit: ``mu = f(X; W, b)`` and ``y ~ Normal(mu, sigma)``.

    Parameters
    ----------
    X : array (n, d)
        Training inputs; stored as ``pm.Data("X")`` in ``pytensor.config.floatX``.
        A single feature is a column, ``x[:, None]``.
    y : array (n,)
        Real-valued targets; stored as ``pm.Data("y")``.
    hidden : sequence of int
        Units of each hidden layer (Garg's sine wave: ``(10, 10)``).
    activation : {"tanh", "relu", "sigmoid"}
        Hidden-layer nonlinearity.
    prior, hyperprior : str
        Names from :mod:`models.priors` (default: Normal weights with the
        fixed scale 1, i.e. N(0, 1) on every weight and bias).
    prior_params, hyperprior_params : dict, optional
        Overrides of the registry's default parameters.
    noise : "halfnormal", "gamma" or float
        Observation-noise sd ``sigma``. ``"halfnormal"`` (default, the
        Bayesian choice): a free variable ``sigma ~ HalfNormal(noise_scale)``
        inferred with the weights, so the predictive interval learns the
        data's noise level. ``"gamma"``: a free noise precision
        ``tau ~ Gamma(alpha, beta)`` (:data:`GAMMA_NOISE`, or
        ``noise_params``), as probabilistic backpropagation has it, and the
        deterministic ``sigma = tau^(-1/2)``. A positive number fixes
        ``sigma`` to that known value (no ``sigma`` variable is created).
    noise_scale : float
        Scale of the HalfNormal prior on ``sigma`` (in the units of ``y``);
        used only with ``noise="halfnormal"``.
    noise_params : dict, optional
        With ``noise="gamma"``: ``alpha`` and ``beta`` of the precision's
        Gamma prior, overriding :data:`GAMMA_NOISE`'s.
    feature_names : sequence of str, optional
        Coordinate labels of the input features.
    total_size : int, optional
        Size of the full training set when ``X`` is one minibatch; default ``len(X)``.

    Returns
    -------
    pm.Model
        With coords ``obs``, ``feature``, ``unit_<l>``, ``output`` (one
        entry); free variables ``W_<l>``, ``b_<l>`` (``scale_<l>`` when
        hierarchical, ``sigma`` when ``noise="halfnormal"``, ``tau`` and the
        deterministic ``sigma`` when ``noise="gamma"``); the
        deterministic ``mu`` (dims ``obs``: the regression function at ``X``)
        and the likelihood ``y_obs``.

    Raises
    ------
    ValueError
        On bad shapes, non-finite data, an unknown activation, prior or
        noise model, a non-positive noise value or scale, or empty layers.
    """
    X, y = _check_inputs(X, y, activation=activation, hidden=hidden, total_size=total_size)
    if isinstance(noise, str):
        if noise not in NOISE_MODELS:
            raise ValueError(f"unknown noise model {noise!r}; valid: {', '.join(NOISE_MODELS)} "
                             "or a positive number (a fixed sd)")
        if not noise_scale > 0:
            raise ValueError(f"noise_scale must be positive, got {noise_scale}")
        gamma = {**GAMMA_NOISE, **(noise_params or {})}
        if set(gamma) != set(GAMMA_NOISE) or not all(np.isfinite(v) and v > 0 for v in gamma.values()):
            raise ValueError(f"noise_params must give positive alpha and beta, got {noise_params!r}")
    elif isinstance(noise, bool) or not isinstance(noise, (int, float, np.number)) or not noise > 0 \
            or not np.isfinite(noise):
        raise ValueError(f"noise must be 'halfnormal' or a positive number, got {noise!r}")
    layer_priors = LayerPriors(prior, hyperprior, prior_params, hyperprior_params)
    n = len(X)
    coords, unit_dims = _layout(X, hidden, feature_names, "output", 1)
    floatX = pytensor.config.floatX
    with pm.Model(coords=coords) as model:
        X_data = pm.Data("X", X.astype(floatX), dims=("obs", "feature"))
        y_data = pm.Data("y", y.astype(floatX), dims="obs")
        h = _network(X_data, layer_priors, unit_dims, ACTIVATIONS[activation])
        mu = pm.Deterministic("mu", h[:, 0], dims="obs")
        if noise == "gamma":
            tau = pm.Gamma("tau", alpha=gamma["alpha"], beta=gamma["beta"])
            sigma = pm.Deterministic("sigma", tau**-0.5)
        elif isinstance(noise, str):
            sigma = pm.HalfNormal("sigma", sigma=noise_scale)
        else:
            sigma = get_hyperprior("fixed", value=float(noise))("sigma")
        pm.Normal("y_obs", mu=mu, sigma=sigma, observed=y_data, dims="obs",
                  total_size=total_size or n)
    return model
