"""Priors, hyperpriors and model builders: Bayesian MLPs and CNNs, and a conjugate linear regression."""

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
