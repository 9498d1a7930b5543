"""Weights of one layer under the zoo's prior registry, shared by the model builders."""

from __future__ import annotations

import numpy as np
import pymc as pm

from bnn_zoo.models.priors import (SCALE_FREE, get_hyperprior, get_weight_prior, hyperprior_choice,
                                   weight_prior_choice)

__all__ = ["HYPERPRIOR_INDEX", "LayerPriors", "PRIOR_INDEX", "select"]

#: The data containers that select a choice of priors (:class:`LayerPriors`): an index into the
#: names of the weight priors, and one into those of the hyperpriors.
PRIOR_INDEX, HYPERPRIOR_INDEX = "prior_index", "hyperprior_index"


class LayerPriors:
    """Makes ``W_l``, ``b_l`` (and their shared scale ``scale_l``) for layer ``l``.

    A sequence of names in place of one makes the prior (or the hyperprior)
    a choice among them, selected by the model's integer data container
    ``prior_index`` (or ``hyperprior_index``), 0 when built: the model with
    the index at ``i`` has the log density and the initial point of the
    model built with the ``i``-th name alone
    (:func:`~bnn_zoo.models.priors.weight_prior_choice`), so one compiled
    model serves every candidate (``pm.set_data({"prior_index": i})``, or
    the index stacked as data for many fits at once; :func:`select`).

    Parameters
    ----------
    prior, hyperprior : str or sequence of str
        Names from :mod:`bnn_zoo.models.priors`. Priors without a scale
        (``flat``) ignore the hyperprior (its name is still validated).
    prior_params, hyperprior_params : dict, optional
        Overrides of the registry's default parameters; for a choice, each
        candidate's by its name.

    Raises
    ------
    ValueError
        For an unknown prior or hyperprior, a parameter it does not take, or
        a choice whose candidates would build models of other variables: a
        prior without a scale beside one with a scale, unless the hyperprior
        is ``fixed``. (Priors that all lack a scale ignore the hyperprior,
        and their model has no ``hyperprior_index``.)
    """

    def __init__(self, prior, hyperprior, prior_params=None, hyperprior_params=None):
        self.priors = [prior] if isinstance(prior, str) else list(prior)
        self.hyperpriors = [hyperprior] if isinstance(hyperprior, str) else list(hyperprior)
        for name in self.priors:
            get_weight_prior(name, **_params(prior_params, name, len(self.priors) > 1))
        for name in self.hyperpriors:
            get_hyperprior(name, **_params(hyperprior_params, name, len(self.hyperpriors) > 1))
        scale_free = [name in SCALE_FREE for name in self.priors]
        if any(scale_free) and not all(scale_free) and self.hyperpriors != ["fixed"]:
            raise ValueError(f"a choice among the priors {self.priors} and the hyperpriors {self.hyperpriors} mixes "
                             "models with a scale variable and models without one; a prior without a scale "
                             "(flat) is a choice beside others only with the fixed hyperprior")
        self.prior_params, self.hyperprior_params = prior_params, hyperprior_params
        self.has_scale = not all(scale_free)

    def _makers(self):
        """The weight prior and the scale's maker (``None`` without a scale), in the model being built."""
        if len(self.priors) > 1:
            weight_prior = weight_prior_choice(self.priors, _index(PRIOR_INDEX), self.prior_params)
        else:
            weight_prior = get_weight_prior(self.priors[0], **(self.prior_params or {}))
        if not self.has_scale:
            return weight_prior, None
        if len(self.hyperpriors) > 1:
            return weight_prior, hyperprior_choice(self.hyperpriors, _index(HYPERPRIOR_INDEX),
                                                   self.hyperprior_params)
        return weight_prior, get_hyperprior(self.hyperpriors[0], **(self.hyperprior_params or {}))

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
        weight_prior, scale_prior = self._makers()
        scale = None if scale_prior is None else scale_prior(f"scale_{layer}")
        return weight_prior(f"W_{layer}", scale, w_dims), weight_prior(f"b_{layer}", scale, b_dims)


def _params(params: dict | None, name: str, choice: bool) -> dict:
    """A candidate's parameters: by its name in a choice's, else the one prior's own."""
    return (params or {}).get(name, {}) if choice else (params or {})


def _index(name: str):
    """The model's integer data container ``name`` (made, at 0, on first use)."""
    model = pm.modelcontext(None)
    return model[name] if name in model.named_vars else pm.Data(name, np.zeros((), dtype="int64"))


def select(model: pm.Model, indices: dict[str, int]) -> None:
    """Set a model's choice of priors (:class:`LayerPriors`) to ``indices``.

    Parameters
    ----------
    model : pymc.Model
        A model built with a choice of priors.
    indices : dict of str to int
        :data:`PRIOR_INDEX` and, for a choice of hyperpriors,
        :data:`HYPERPRIOR_INDEX`: each an index into its names.
    """
    for name, value in indices.items():  # as the container's dtype (pm.set_data would make it intX)
        model[name].set_value(np.asarray(value, dtype=model[name].type.dtype))
