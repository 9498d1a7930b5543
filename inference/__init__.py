"""Fitting (ADVI) and posterior handling for the zoo's PyMC models."""

from inference.advi import BACKENDS, ENGINES, METHODS, FitResult, NonFiniteLossError, fit, precision
from inference.checkpoint import CheckpointError
from inference.posterior import Draws, draw, draw_mixture, loo, predict, predict_proba, to_datatree

__all__ = [
    "BACKENDS",
    "ENGINES",
    "CheckpointError",
    "METHODS",
    "Draws",
    "FitResult",
    "NonFiniteLossError",
    "draw",
    "draw_mixture",
    "fit",
    "loo",
    "precision",
    "predict",
    "predict_proba",
    "to_datatree",
]
