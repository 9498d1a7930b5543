"""Priors, hyperpriors and model builders: Bayesian MLPs and CNNs, and a conjugate linear regression.

- :mod:`~bnn_zoo.models.priors`: the registries of weight priors (Normal, Laplace, Cauchy,
  Blundell's scale mixture, Flat) and of hyperpriors on a layer's scale (fixed, HalfNormal,
  HalfCauchy, InverseGamma), and the decorators that add one;
- :mod:`~bnn_zoo.models.layers`: one layer's weights, biases and shared scale under a pair;
- :mod:`~bnn_zoo.models.mlp`: ``mlp_classifier`` and ``mlp_regressor``;
- :mod:`~bnn_zoo.models.cnn`: ``cnn_classifier``, the MNIST network of Zharikov, Isachenko and
  Bochkarev, "Bayesian Neural Networks";
- :mod:`~bnn_zoo.models.ops`: the convolution and max-pooling Ops it is built from;
- :mod:`~bnn_zoo.models.linear`: a conjugate linear regression and its exact posterior.
"""

from bnn_zoo.models.cnn import cnn_classifier
from bnn_zoo.models.linear import linear_posterior, linear_regression
from bnn_zoo.models.mlp import mlp_classifier, mlp_regressor
from bnn_zoo.models.priors import (
    HYPERPRIORS,
    WEIGHT_PRIORS,
    get_hyperprior,
    get_weight_prior,
    hyperprior,
    weight_prior,
)

__all__ = [
    "HYPERPRIORS",
    "WEIGHT_PRIORS",
    "cnn_classifier",
    "linear_posterior",
    "linear_regression",
    "get_hyperprior",
    "get_weight_prior",
    "hyperprior",
    "mlp_classifier",
    "mlp_regressor",
    "weight_prior",
]
