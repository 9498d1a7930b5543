"""Priors, hyperpriors and Bayesian neural-network model builders."""

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
    "get_hyperprior",
    "get_weight_prior",
    "hyperprior",
    "mlp_classifier",
    "mlp_regressor",
    "weight_prior",
]
