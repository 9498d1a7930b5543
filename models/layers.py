"""Weights of one layer under the zoo's prior registry, shared by the model builders."""

from __future__ import annotations

from bnn_zoo.models.priors import SCALE_FREE, get_hyperprior, get_weight_prior

__all__ = ["LayerPriors"]


class LayerPriors:
    """Makes ``W_l``, ``b_l`` (and their shared scale ``scale_l``) for layer ``l``.

    Parameters
    ----------
    prior, hyperprior : str
        Names from :mod:`bnn_zoo.models.priors`. Priors without a scale
        (``flat``) ignore the hyperprior (its name is still validated).
    prior_params, hyperprior_params : dict, optional
        Overrides of the registry's default parameters.

    Raises
    ------
    ValueError
        For an unknown prior or hyperprior, or a parameter it does not take.
    """

    def __init__(self, prior: str, hyperprior: str, prior_params=None, hyperprior_params=None):
        self.weight_prior = get_weight_prior(prior, **(prior_params or {}))
        scale_prior = get_hyperprior(hyperprior, **(hyperprior_params or {}))
        self.scale_prior = None if prior in SCALE_FREE else scale_prior

    def __call__(self, layer: int, w_dims: tuple, b_dims):
        """Create the layer's random variables (inside a model context).

        Parameters
        ----------
        layer : int
            The layer's index: the variables are ``W_<layer>``, ``b_<layer>`` and
            ``scale_<layer>``.
        w_dims : tuple of str
            The weights' dims.
        b_dims : str or tuple of str
            The biases' dims.

        Returns
        -------
        tuple of TensorVariable
            ``(W, b)``.
        """
        scale = None if self.scale_prior is None else self.scale_prior(f"scale_{layer}")
        return (
            self.weight_prior(f"W_{layer}", scale, w_dims),
            self.weight_prior(f"b_{layer}", scale, b_dims),
        )
