"""Hierarchical Bayesian CNN classifier as a PyMC model (the MNIST network of
Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks").

conv 32@5x5 tanh -> max-pool 2 -> conv 32@5x5 tanh -> max-pool 2 -> dense 64
tanh -> dense 10 softmax. As in :mod:`bnn_zoo.models.mlp`, layer ``l`` has weights
``W_l`` and biases ``b_l`` with one weight prior and one shared scale
``scale_l`` from the hyperprior. Convolution kernels are HWIO
``(kernel_row, kernel_col, in, out)``.

Images live in ``pm.Data("X")`` (N, C, H, W), the layout of the data
loaders, and labels in ``pm.Data("y")``; ``p`` is the class-probability
tensor. Inside the graph the activations are channels-last (NHWC, see
:mod:`bnn_zoo.models.ops`): the images are transposed once at the input (for one
channel a free reshape), and the flattened features run over (row, col,
channel).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from bnn_zoo.models.layers import LayerPriors
from bnn_zoo.models.mlp import ACTIVATIONS
from bnn_zoo.models.ops import conv2d, max_pool2d

__all__ = ["cnn_classifier"]


def cnn_classifier(
    X: np.ndarray,
    y: np.ndarray,
    *,
    channels: Sequence[int] = (32, 32),
    kernel: int = 5,
    pool: int = 2,
    dense: Sequence[int] = (64,),
    n_classes: int = 10,
    activation: str = "tanh",
    prior: str = "normal",
    hyperprior: str = "inversegamma",
    prior_params: dict | None = None,
    hyperprior_params: dict | None = None,
    total_size: int | None = None,
) -> pm.Model:
    """Build the hierarchical Bayesian CNN.

    Parameters
    ----------
    X : array (n, c, h, w)
        Training images (NCHW, as the loaders give them); stored as ``pm.Data("X")`` in ``pytensor.config.floatX``.
    y : array of int (n,)
        Labels in ``0..n_classes-1``; stored as ``pm.Data("y")``.
    channels : sequence of int
        Filters of each convolution layer (Zharikov et al.: ``(32, 32)``); each is
        followed by the activation and a ``pool x pool`` max-pool.
    kernel : int
        Side of the square convolution kernels (Zharikov et al.: 5).
    pool : int
        Side of the max-pooling windows (Zharikov et al.: 2).
    dense : sequence of int
        Units of the hidden dense layers after the convolutions (Zharikov et al.: ``(64,)``).
    n_classes : int
        Number of classes.
    activation : {"tanh", "relu", "sigmoid"}
        Nonlinearity of every hidden layer.
    prior, hyperprior, prior_params, hyperprior_params
        As in :func:`models.mlp.mlp_classifier`.
    total_size : int, optional
        Size of the data set the likelihood is scaled to; default ``len(X)``.
        Set it when ``X`` holds one minibatch that is swapped between steps.

    Returns
    -------
    pm.Model
        With coords ``obs``, ``channel``, ``row``, ``col``, ``kernel_row``,
        ``kernel_col``, ``conv_<l>``, ``feature``, ``unit_<l>``, ``class``;
        free variables ``W_<l>``, ``b_<l>`` (and ``scale_<l>``); the
        deterministic ``p`` and the likelihood ``y_obs``.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 4 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"X must be (n, c, h, w) and y (n,), got {X.shape} and {y.shape}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
    if any(int(c) < 1 for c in (*channels, *dense)) or kernel < 1 or pool < 1:
        raise ValueError("channels, dense units, kernel and pool must all be >= 1")
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1}")
    n, c, h, w = X.shape
    for _ in channels:
        h, w = (h - kernel + 1) // pool, (w - kernel + 1) // pool
    if h < 1 or w < 1:
        raise ValueError(f"images of {X.shape[2]}x{X.shape[3]} are too small for {len(channels)} conv+pool layers")
    n_features = channels[-1] * h * w if channels else c * X.shape[2] * X.shape[3]

    conv_dims = ["channel"] + [f"conv_{i}" for i in range(len(channels))]
    unit_dims = ["feature"] + [f"unit_{len(channels) + i}" for i in range(len(dense))] + ["class"]
    coords = {
        "obs": np.arange(n), "channel": np.arange(c), "row": np.arange(X.shape[2]),
        "col": np.arange(X.shape[3]), "kernel_row": np.arange(kernel), "kernel_col": np.arange(kernel),
        "feature": np.arange(n_features), "class": np.arange(n_classes),
    }
    coords.update({f"conv_{i}": np.arange(k) for i, k in enumerate(channels)})
    coords.update({d: np.arange(k) for d, k in zip(unit_dims[1:-1], dense)})

    act = ACTIVATIONS[activation]
    layer_priors = LayerPriors(prior, hyperprior, prior_params, hyperprior_params)
    with pm.Model(coords=coords) as model:
        X_data = pm.Data("X", X.astype(pytensor.config.floatX), dims=("obs", "channel", "row", "col"))
        y_data = pm.Data("y", y.astype("int64"), dims="obs")
        hid = X_data.transpose(0, 2, 3, 1)  # NHWC
        layer = 0
        for dim_in, dim_out in zip(conv_dims[:-1], conv_dims[1:]):
            W, b = layer_priors(layer, ("kernel_row", "kernel_col", dim_in, dim_out), dim_out)
            hid = max_pool2d(act(conv2d(hid, W) + b), pool)
            layer += 1
        hid = hid.reshape((hid.shape[0], n_features))
        for dim_in, dim_out in zip(unit_dims[:-1], unit_dims[1:]):
            W, b = layer_priors(layer, (dim_in, dim_out), dim_out)
            hid = hid @ W + b
            if dim_out != "class":
                hid = act(hid)
            layer += 1
        p = pm.Deterministic("p", pt.special.softmax(hid, axis=-1), dims=("obs", "class"))
        # total_size keeps the likelihood at full-data scale under minibatches.
        pm.Categorical("y_obs", p=p, observed=y_data, dims="obs", total_size=total_size or n)
    return model
