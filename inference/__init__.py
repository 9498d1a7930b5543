"""Fitting (ADVI) and posterior handling for any PyMC model."""

from bnn_zoo.inference.advi import ConvergenceWarning, FitResult, NonFiniteLossError, fit, precision
from bnn_zoo.inference.checkpoint import CheckpointError
from bnn_zoo.inference.families import METHODS
from bnn_zoo.inference.posterior import loo, predict, sample

__all__ = ["METHODS", "CheckpointError", "ConvergenceWarning", "FitResult", "NonFiniteLossError", "fit", "loo",
           "precision", "predict", "sample"]
