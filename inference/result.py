"""What a fit returns, and what it raises or warns: :class:`FitResult`, :class:`NonFiniteLossError`,
:class:`ConvergenceWarning`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pymc as pm

from bnn_zoo.inference import gaussians
from bnn_zoo.inference.diagnostics import Convergence, convergence
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.jaxmodel import Layout, ModelFunction

__all__ = ["ConvergenceWarning", "FitResult", "NonFiniteLossError", "ValuesByName"]


class ValuesByName(dict):
    """q's values by value variable, with a one-line answer for a model variable's name.

    A ``dict`` from PyMC's value-variable names (``"W_0"``, ``"sigma_log__"``)
    to arrays. Asked for a transformed variable by its model name
    (``"sigma"``), it raises a ``KeyError`` that names its unconstrained key
    and how to get the variable itself.

    Parameters
    ----------
    values : dict of str to numpy.ndarray
        The values by value variable.
    model : pymc.Model
        The model they belong to.
    """

    def __init__(self, values: dict, model: pm.Model):
        super().__init__(values)
        self._model = model

    def __missing__(self, name):
        model = self._model
        if name in getattr(model, "named_vars", {}):
            rv = model[name]
            value = model.rvs_to_values.get(rv)
            if value is not None and value.name in self:
                raise KeyError(f"{name!r} is transformed: q lives on its unconstrained value "
                               f"{value.name!r}, so use [{value.name!r}] here; bnn_zoo.sample(result) "
                               f"gives {name!r}'s own draws")
            raise KeyError(f"{name!r} is not a free variable of the model, so q has no value for it; "
                           f"bnn_zoo.sample(result) gives its draws. Keys: {', '.join(self)}")
        raise KeyError(f"{name!r} is not a variable of the model; keys: {', '.join(self)}")


class NonFiniteLossError(FloatingPointError):
    """The ELBO became NaN or infinite during a fit.

    :func:`fit` raises it at the first non-finite ELBO estimate, and its
    message names the step (``"ELBO is nan at step 1234"``). A fit with
    ``checkpoint`` can be resumed from its last checkpoint, for example with
    a smaller learning rate.

    Parameters
    ----------
    *args
        The message, as for any exception.
    **kwargs
        None are accepted, as for any built-in exception.
    """


class ConvergenceWarning(UserWarning):
    """A fit ended with its ELBO still moving, or below where it had been.

    :func:`fit` warns with it when :attr:`FitResult.convergence` finds that
    the fit has not converged (:mod:`~bnn_zoo.inference.diagnostics`); the
    message says what the test found and what to try.

    Parameters
    ----------
    *args
        The message, as for any warning.
    **kwargs
        None are accepted, as for any built-in warning.
    """


@dataclass
class FitResult:
    """A fitted q, the model it approximates, and how the fit went.

    What :func:`fit` returns. q is a Gaussian over the model's
    unconstrained values, flattened as ``layout`` says; ``params`` are its
    parameters in PyMC's own layout (:mod:`~bnn_zoo.inference.families`).
    :attr:`mean`, :attr:`sd` and :meth:`cov` read them by variable,
    :meth:`to_pymc` makes a ``pymc.variational`` approximation of them,
    :func:`bnn_zoo.sample` draws from q, and :func:`bnn_zoo.predict` makes
    predictions on new data.

    Parameters
    ----------
    model : pymc.Model
        The model q approximates.
    family : Family
        q's variational family, mean-field or full-rank
        (:mod:`~bnn_zoo.inference.families`).
    layout : Layout
        Where each value variable sits in q's flat vector.
    params : dict of str to numpy.ndarray
        q's parameters: ``mu`` and ``rho`` (mean-field, ``sd =
        softplus(rho)``) or ``mu`` and ``L_tril`` (full-rank). With iterate
        averaging, their average over the averaged steps.
    elbo : numpy.ndarray
        The ELBO estimate of every step (with the KL weight ``beta``), at
        full-data scale.
    config : dict
        The fit's settings as recorded in results (method, steps, optimizer,
        batch size, ``beta``, seed, dtype, ...), and ``history``: the
        optimizer of each run, by the step it began at.
    seconds : float
        Wall time of the whole fit in seconds, compilation included, with
        the runs before a resume.
    compile_seconds : float
        Wall time of this run's compilation and first step, in seconds.
    density : ModelFunction
        The model compiled to JAX (:func:`~bnn_zoo.inference.jaxmodel.compile_model`),
        which the posterior code evaluates draws with.
    timed : tuple of (int, float), default (0, 0.0)
        This run's steps after the first, and their wall time in seconds,
        for :attr:`ms_per_step`. Set by the fit.

    Attributes
    ----------
    method : str
        ``"advi"`` (mean-field) or ``"fullrank_advi"``.
    mean : dict of str to numpy.ndarray
        q's mean of each value variable.
    sd : dict of str to numpy.ndarray
        q's marginal standard deviation of each value variable.
    convergence : Convergence
        The convergence test of the ELBO trace.
    ms_per_step : float
        Mean wall time of this run's steps after the first, in milliseconds.
    elbo_final : float
        Mean ELBO estimate over the last 10% of the steps (at most 1000).

    See Also
    --------
    fit : What makes a ``FitResult``.
    bnn_zoo.sample : Posterior draws of q as an ArviZ DataTree.

    Examples
    --------
    >>> result = bnn_zoo.fit(model)
    >>> result.mean["W_0"]          # q's mean of a weight matrix
    >>> result.sd["scale_0_log__"]  # a positive variable's value lives on the log scale
    >>> result.convergence.converged
    >>> approx = result.to_pymc()   # a pymc.variational.MeanField
    """

    model: pm.Model
    family: Family
    layout: Layout
    params: dict[str, np.ndarray]
    elbo: np.ndarray  # per-step ELBO estimate (with the KL weight beta), full-data scale
    config: dict  # the settings, as recorded in results
    seconds: float  # whole fit, compilation included (with the runs before a resume)
    compile_seconds: float  # compilation and the first step of this run
    density: ModelFunction = field(repr=False)
    timed: tuple[int, float] = (0, 0.0)  # this run's steps after the first, and their seconds

    @property
    def method(self) -> str:
        """The method that made q: ``"advi"``, ``"lowrank_advi"``, ``"fullrank_advi"`` or ``"laplace"``."""
        return self.config.get("method", self.family.name)

    @property
    def mean(self) -> dict[str, np.ndarray]:
        """q's mean of each value variable, by name, in the unconstrained space.

        Value variables are PyMC's: a positive variable ``s`` appears as
        ``s_log__``, on the log scale. float64 arrays of each variable's shape.
        """
        return ValuesByName(self.layout.split(self.family.mean_and_factor(self.params)[0]), self.model)

    @property
    def sd(self) -> dict[str, np.ndarray]:
        """q's marginal standard deviation of each value variable, by name (see :attr:`mean`)."""
        return ValuesByName(self.layout.split(gaussians.marginal_sd(self.family.mean_and_factor(self.params)[1])),
                            self.model)

    def cov(self) -> np.ndarray:
        """q's covariance matrix over the flat vector of unconstrained values.

        Returns
        -------
        numpy.ndarray
            ``(dim, dim)``, float64, diagonal for a mean-field fit. ``layout``
            says which coordinates belong to which variable
            (``layout.slots``: name, slice, shape, dtype).
        """
        return gaussians.covariance(self.family.mean_and_factor(self.params)[1])

    def to_pymc(self):
        """q as a ``pymc.variational`` approximation with these parameters.

        Returns
        -------
        pymc.variational.approximations.MeanField or pymc.variational.approximations.FullRank
            A new approximation of ``model`` whose parameters are q's, so that
            PyMC's own tools (``approx.sample(1000)``, ...) work on the fit.

        Raises
        ------
        ValueError
            If PyMC orders the model's variables differently from ``layout``.
        """
        if self.family.pymc is None:
            raise ValueError(f"PyMC has no approximation of a {self.method!r} fit: use bnn_zoo.sample(result) "
                             "for draws")
        approx = self.family.pymc(model=self.model)
        group = approx.groups[0]
        if [(name, group.ordering[name][1]) for name in self.layout.names] != \
                [(name, slc) for name, slc, _, _ in self.layout.slots]:
            raise ValueError("PyMC orders this model's variables differently from the fit")
        for name, value in self.family.to_pymc(self.params).items():
            group.params_dict[name].set_value(np.asarray(value, dtype=group.params_dict[name].dtype))
        return approx

    @property
    def convergence(self) -> Convergence:
        """The convergence test of the ELBO trace (:func:`~bnn_zoo.inference.diagnostics.convergence`).

        A fit started from another (``init=``) at the same ``beta`` is also
        tested against that fit's final ELBO, which it should not end below.
        """
        return convergence(self.elbo, start=self.config.get("init_elbo_final"))

    @property
    def ms_per_step(self) -> float:
        """Mean wall time of this run's steps after the first, in milliseconds (NaN without any)."""
        steps, seconds = self.timed
        return 1e3 * seconds / steps if steps else float("nan")

    @property
    def elbo_final(self) -> float:
        """Mean ELBO estimate over the last 10% of the steps (at most 1000 steps)."""
        tail = max(1, min(1000, len(self.elbo) // 10))
        return float(np.mean(self.elbo[-tail:]))

