"""What a fit returns, and what it raises or warns: :class:`FitResult`, :class:`NonFiniteLossError`,
:class:`ConvergenceWarning` (:func:`warn_unless_converged`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pymc as pm

from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.families import gaussians
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.diagnostics.convergence import Convergence, convergence
from bnn_zoo.inference.diagnostics.modecheck import ModeCheck
from bnn_zoo.inference.families import Family
from bnn_zoo.inference.compile.jaxmodel import Layout, ModelFunction

__all__ = ["ConvergenceWarning", "FitResult", "NonFiniteLossError", "ValuesByName", "warn_unless_converged"]


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
    """A fit did not pass its optimiser's test: ADVI's ELBO still moving or fallen, L-BFGS short of a mode.

    :func:`fit` warns with it, for every method, when
    :attr:`FitResult.convergence` finds that the fit has not converged
    (:mod:`~bnn_zoo.inference.diagnostics.convergence`); the message says what the test
    found and what to try. Its absence does not say that q is close to the
    posterior: that is the Pareto k's (:meth:`FitResult.summary`).

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
        full-data scale; for the Laplace approximation, not an ELBO but the
        log density at each L-BFGS iteration.
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
        The model compiled to JAX (:func:`~bnn_zoo.inference.compile.jaxmodel.compile_model`),
        which the posterior code evaluates draws with.
    timed : tuple of (int, float), default (0, 0.0)
        This run's steps after the first, and their wall time in seconds,
        for :attr:`ms_per_step`. Set by the fit.
    mode_check : ModeCheck, optional
        The Laplace approximation's test of its mode, made where the
        Hessian was at hand; ``None`` for ADVI, whose test reads ``elbo``.

    Attributes
    ----------
    method : str
        ``"advi"``, ``"lowrank_advi"``, ``"fullrank_advi"``, ``"flow"`` or ``"laplace"`` (after
        ``method="auto"``, the rung's).
    mean : dict of str to numpy.ndarray
        q's mean of each value variable.
    sd : dict of str to numpy.ndarray
        q's marginal standard deviation of each value variable.
    convergence : Convergence or ModeCheck
        The optimiser's test: of the ELBO trace (ADVI), or of the mode
        (Laplace). ``converged`` says that it passed, not that q is close
        to the posterior (:meth:`summary` gives both verdicts).
    ms_per_step : float
        Mean wall time of this run's steps after the first, in milliseconds.
    elbo_final : float
        Mean ELBO estimate over the last 10% of the steps (at most 1000);
        NaN for the Laplace approximation, which has no ELBO.

    See Also
    --------
    fit : What makes a ``FitResult``.
    bnn_zoo.sample : Posterior draws of q as an ArviZ DataTree.

    Examples
    --------
    Mean-field q of a posterior whose two weights are correlated -0.999: the
    optimiser converges, and q is far from the posterior all the same.

    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=40)
    >>> X = np.column_stack([x, x + 0.05 * rng.normal(size=40)])  # two nearly equal columns
    >>> with pm.Model() as model:
    ...     w = pm.Normal("w", 0.0, 3.0, shape=2)
    ...     y = pm.Normal("y", X @ w, 1.0, observed=X @ [1.0, -0.5] + rng.normal(size=40))
    >>> result = bnn_zoo.fit(model, progressbar=False)
    >>> print(np.round(result.mean["w"], 1), np.round(result.sd["w"], 2))  # q's mean and marginal sd
    [0.3 0.4] [0.2 0.2]
    >>> result                                   # the optimiser's verdict
    FitResult('advi', 2 values): optimiser converged: the ELBO stopped moving: ... nats over the last 2,000 steps;
    q's accuracy not measured (result.summary(bnn_zoo.sample(result)) adds it)
    >>> print(result.summary(bnn_zoo.sample(result, 20_000)))  # and q's accuracy
    FitResult('advi', 2 values): optimiser converged: ...; q is far from the posterior (q_pareto_k 0.95 > 0.7):
    its means and sds may be off
    >>> approx = result.to_pymc()                # a pymc.variational.MeanField
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
    mode_check: ModeCheck | None = field(default=None, repr=False)  # the Laplace approximation's test

    @property
    def method(self) -> str:
        """The method that made q: ``"advi"``, ``"lowrank_advi"``, ``"fullrank_advi"``, ``"flow"`` or ``"laplace"``."""
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
    def convergence(self) -> Convergence | ModeCheck:
        """The optimiser's test (:mod:`~bnn_zoo.inference.diagnostics.convergence`): did it stop, or reach the mode?

        For ADVI, the test of the ELBO trace
        (:func:`~bnn_zoo.inference.diagnostics.convergence.convergence`): a fit started
        from another (``init=``) at the same ``beta`` is also tested against
        that fit's final ELBO, which it should not end below. For the Laplace
        approximation, :attr:`mode_check`. Either way ``converged`` says
        that the optimiser's test passed, not that q is close to the
        posterior (:meth:`summary`).
        """
        if self.mode_check is not None:
            return self.mode_check
        return convergence(self.elbo, start=self.config.get("init_elbo_final"))

    def summary(self, idata=None) -> str:
        """One line: the method, the optimiser's verdict and, given draws, q's accuracy verdict.

        The optimiser's verdict is :attr:`convergence`'s; the accuracy
        verdict is the Pareto k of q's importance ratios
        (:mod:`~bnn_zoo.inference.diagnostics.qcheck`), which ``idata`` carries. A fit
        whose optimiser converged can still be far from the posterior, so
        both are shown. ``repr(result)`` is the summary without draws.

        Parameters
        ----------
        idata : xarray.DataTree, optional
            :func:`bnn_zoo.sample`'s draws of this fit, with their
            ``attrs["q_pareto_k"]`` (:data:`~bnn_zoo.inference.diagnostics.qcheck.NAME`).

        Returns
        -------
        str
            E.g. ``"FitResult('advi', 2 values): optimiser converged: the ELBO
            stopped moving: ...; q is far from the posterior (q_pareto_k 0.93
            > 0.7): its means and sds may be off"``.

        Raises
        ------
        ValueError
            When ``idata`` holds draws of another method's fit.
        """
        check = self.convergence
        verdict = "converged" if check.converged else "did not converge"
        line = f"FitResult({self.method!r}, {self.layout.dim:,} values): optimiser {verdict}: {check.describe()}"
        if idata is None:
            return f"{line}; q's accuracy not measured (result.summary(bnn_zoo.sample(result)) adds it)"
        method = idata.attrs.get("fit_method", self.method)
        if method != self.method:
            raise ValueError(f"idata holds draws of a {method!r} fit, this is a {self.method!r} one: pass "
                             "bnn_zoo.sample(result) of this fit")
        return f"{line}; {_accuracy(idata.attrs.get(qcheck.NAME), idata.attrs.get(qcheck.DRAWS_NAME))}"

    def __repr__(self) -> str:
        return self.summary()

    @property
    def ms_per_step(self) -> float:
        """Mean wall time of this run's steps after the first, in milliseconds (NaN without any)."""
        steps, seconds = self.timed
        return 1e3 * seconds / steps if steps else float("nan")

    @property
    def elbo_final(self) -> float:
        """Mean ELBO estimate over the last 10% of the steps (at most 1000 steps).

        NaN for the Laplace approximation: its trace is the log density along
        L-BFGS's path, not an ELBO (its last value is the log density where
        L-BFGS stopped).
        """
        if self.method == "laplace":
            return float("nan")
        tail = max(1, min(1000, len(self.elbo) // 10))
        return float(np.mean(self.elbo[-tail:]))


def _accuracy(k, draws) -> str:
    """The accuracy verdict of a ``q_pareto_k`` from ``draws`` draws (:func:`~bnn_zoo.inference.diagnostics.qcheck.verdict`),
    in words."""
    said = qcheck.verdict(k, draws)
    if said.startswith("passes"):
        return (f"q passes its accuracy check {said[len('passes '):]}: the reweighted means and sds "
                "(bnn_zoo.reweighted) are reliable")
    if said.startswith("fails"):
        return f"q is far from the posterior ({said[len('fails ('):-1]}): its means and sds may be off"
    if said.startswith("not measured") or said.startswith("unknown"):
        return f"q's accuracy {said}"
    return f"q {said}"


def warn_unless_converged(result: FitResult, category: type[Warning] = ConvergenceWarning) -> None:
    """Warn, in one line saying what the test found and what to try, when ``result`` failed its test.

    Every method's fit calls it at its end (:attr:`FitResult.convergence`).

    Parameters
    ----------
    result : FitResult
        The fit.
    category : type, default ConvergenceWarning
        A :class:`ConvergenceWarning` or a subclass.
    """
    check = result.convergence
    if not check.converged:
        calls.warn(f"the {result.method!r} fit did not pass its convergence test: {check.describe()}; "
                   f"{check.hint()}", category)  # at the caller's line
