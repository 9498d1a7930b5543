"""Did the Laplace approximation reach its mode? The test a Laplace fit makes of its own optimisation.

The Laplace approximation (:class:`ModeCheck`) has no ELBO to watch: its
test is whether L-BFGS reached the mode it takes q's mean from. At the
point where L-BFGS stopped, in the unconstrained space, the log density and
its gradient ``g`` must be finite; the gradient must be small on the
posterior's own scale: ``g' H^-1 g / 2`` (half the Newton decrement, ``H``
the negative log density's Hessian, with the absolute values of its
eigenvalues), the nats by which the quadratic model of the log density puts
the mode above that point, at most :data:`MODE_NATS` (so that q's mean is
within ``sqrt(2 x MODE_NATS)`` = 0.14 posterior sds, Mahalanobis, of the
mode); and ``H`` must be positive definite: every curvature (eigenvalue of
``H``) tested above :data:`FLAT` x the dtype's machine epsilon x the
largest. A curvature within that of zero is a flat direction, and the
finding names the variables that span it: where the log density still
rises along it by more than :data:`RISING` nats per unit, it has no mode
there (it grows without bound, as a funnel's does as its scale shrinks);
where it does not, the posterior is improper there or the model
unidentified. A negative curvature says L-BFGS stopped at a saddle, or
short of the mode. The dense curvature tests every eigenvalue; the low-rank
one its ``rank`` largest and the mean of the rest.

:mod:`~bnn_zoo.inference.diagnostics.convergence` holds ADVI's test, and what "converged" means for both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["FLAT", "MODE_NATS", "RISING", "ModeCheck", "flat_tolerance", "mode_check", "record_fields"]

#: A Laplace fit has reached the mode when the quadratic model puts it at most this many nats above.
MODE_NATS = 0.01
#: A curvature within this many machine epsilons (of the model's dtype) of the largest is flat.
FLAT = 1000.0
#: A flat direction along which the log density rises by more than this, in nats per unit of the
#: unconstrained space, has no mode.
RISING = 1e-3


def record_fields(finding) -> dict:
    """A finding's fields as a flat dict: ``converged``, and every other field prefixed ``convergence_``.

    Parameters
    ----------
    finding : ModeCheck or bnn_zoo.inference.diagnostics.convergence.Convergence
        A convergence finding (a dataclass).

    Returns
    -------
    dict
        What ``metrics.json`` records of it.
    """
    return {f"convergence_{k}" if k != "converged" else k: v for k, v in asdict(finding).items()}


@dataclass(frozen=True)
class ModeCheck:
    """The Laplace approximation's test: did L-BFGS reach a mode? (The module docstring.)

    The same interface as :class:`~bnn_zoo.inference.diagnostics.convergence.Convergence` (``converged``,
    :meth:`describe`, :meth:`hint`, :meth:`record`), with the fields of what
    it tested: the gradient and the curvatures where L-BFGS stopped, in the
    unconstrained space.

    Parameters
    ----------
    converged : bool
        The optimiser's test passed: ``finite``, ``mode_gap`` at most
        :data:`MODE_NATS`, and no curvature tested ``negative`` or ``flat``.
        Not that q is close to the posterior (the module docstring).
    finite : bool
        The log density and its gradient are finite where L-BFGS stopped.
    mode_gap : float
        ``g' H^-1 g / 2``: the nats by which the quadratic model puts the
        mode above that point (flat directions left out).
    gradient_max : float
        The largest ``|d log p / dz|`` there.
    curvature_min, curvature_max : float
        The smallest and the largest curvature tested (eigenvalues of the
        negative log density's Hessian).
    negative : int
        Curvatures below ``-flat_tolerance``: not a maximum.
    flat : int
        Curvatures within ``flat_tolerance`` of zero: the posterior is
        improper or the model unidentified along them.
    flat_tolerance : float
        :func:`flat_tolerance` of the largest curvature.
    flat_variables : str
        The value variables that span the flat directions, largest share
        first, comma-separated ("" when there are none, or when they lie
        outside the low-rank curvature's eigenvectors).
    flat_slope : float
        The norm of the gradient along the flat directions, in nats per
        unit: above :data:`RISING`, the log density has no mode there.
    tested : int
        The curvatures tested: every eigenvalue (dense Hessian), or the
        ``rank`` largest and the mean of the rest, counted as one (low rank).
    dim : int
        The unconstrained dimension.
    iterations : int
        L-BFGS's iterations.
    hit_limit : bool
        L-BFGS stopped at its limit, ``steps``.
    stopped : str
        L-BFGS's own reason for stopping.

    Examples
    --------
    >>> import pymc as pm, bnn_zoo
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     y = pm.Normal("y", mu, 1, observed=[0.5, 1.5])
    >>> check = bnn_zoo.fit(model, method="laplace").convergence
    >>> check.converged, check.negative, check.flat
    (True, 0, 0)
    """

    converged: bool
    finite: bool
    mode_gap: float
    gradient_max: float
    curvature_min: float
    curvature_max: float
    negative: int
    flat: int
    flat_tolerance: float
    flat_variables: str
    flat_slope: float
    tested: int
    dim: int
    iterations: int
    hit_limit: bool
    stopped: str

    @property
    def at_mode(self) -> bool:
        """The gradient test: ``mode_gap`` at most :data:`MODE_NATS`."""
        return bool(self.mode_gap <= MODE_NATS)

    def record(self) -> dict:
        """The fields as a flat dict for ``metrics.json``.

        Returns
        -------
        dict
            ``converged`` (the optimiser's test passed: L-BFGS reached a
            mode), and every other field prefixed ``convergence_``.
        """
        return record_fields(self)

    def _curvatures(self) -> str:
        if self.tested < self.dim:
            return f"the {self.tested - 1:,} largest curvatures and the mean of the rest"
        return f"all {self.tested:,} curvatures" if self.tested > 1 else "its curvature"

    @property
    def _unbounded(self) -> bool:
        return bool(self.flat and self.flat_slope > RISING)

    def describe(self) -> str:
        """What the test found, in words, passed or not.

        Returns
        -------
        str
            E.g. ``"L-BFGS reached the mode: 3e-09 nats below it by the
            gradient (max |gradient| 2e-05) after 12 iterations, and all 2
            curvatures are positive (smallest 24.5)"``.
        """
        if not self.finite:
            return "the log density or its gradient is not finite where L-BFGS stopped"
        gradient = (f"{self.mode_gap:.3g} nats below {{}} by the gradient (max |gradient| "
                    f"{self.gradient_max:.2g}) after {self.iterations:,} iteration{'s' * (self.iterations != 1)}")
        if self.converged:
            return (f"L-BFGS reached the mode: {gradient.format('it')}, and {self._curvatures()} "
                    f"{'are' if self.tested > 1 else 'is'} positive ({'smallest ' * (self.tested > 1)}"
                    f"{self.curvature_min:.3g})")
        found = []
        if self.flat:
            where = (f"{self.flat} of {self.dim:,} directions, spanned by "
                     f"{self.flat_variables or 'directions outside the largest curvatures'} (curvature within "
                     f"{self.flat_tolerance:.2g} of 0)")
            found.append(f"the log density has no mode: it keeps rising, by {self.flat_slope:.3g} nats per unit, "
                         f"along {where}, as a funnel's does as its scale shrinks" if self._unbounded else
                         f"the log density is flat along {where}: the posterior is improper there, or the "
                         "model unidentified, and q's sds along it are meaningless")
        if self.negative:
            found.append(f"L-BFGS stopped where the log density is no maximum: {self.negative} of the "
                         f"{self.tested:,} curvatures tested are negative (smallest {self.curvature_min:.3g}), a "
                         "saddle or a point short of the mode")
        if not self.at_mode:
            limit = "its limit, steps" if self.hit_limit else f"L-BFGS: {self.stopped.lower()}"
            found.append(f"L-BFGS stopped {gradient.format('the mode')} ({limit})")
        return "; ".join(found)

    def hint(self, smaller: str | None = None, decaying: str | None = None) -> str:
        """What to try.

        Parameters
        ----------
        smaller, decaying : str, optional
            :meth:`Convergence.hint`'s, taken and ignored (L-BFGS has no
            learning rate), so that a caller may pass them to either finding.

        Returns
        -------
        str
            ``"try ..."`` ("" for a fit that passed).
        """
        if self.converged:
            return ""
        if not self.finite:
            return "try another random_seed, or method='advi'"
        if self._unbounded:
            return ("the Laplace approximation needs a mode: try a non-centred model, or "
                    "method='fullrank_advi'")
        if self.flat:
            where = f" on {self.flat_variables}" if self.flat_variables else ""
            return (f"try proper priors{where}, or a model whose data identify every direction (the Laplace "
                    "approximation needs a curved mode)")
        if self.hit_limit:
            return "try more steps"
        return ("try another random_seed or method='fullrank_advi' (L-BFGS stopped by itself, so more steps "
                "will not help; a log density without a mode, as a funnel's, has none to reach)")


def mode_check(**found) -> ModeCheck:
    """A :class:`ModeCheck` of what the Laplace fit found, with ``converged`` decided here.

    Parameters
    ----------
    **found
        Every field of :class:`ModeCheck` but ``converged``.

    Returns
    -------
    ModeCheck
        ``converged`` when the log density and its gradient are finite, the
        mode gap is at most :data:`MODE_NATS`, and no curvature tested is
        negative or flat.
    """
    passed = found["finite"] and found["mode_gap"] <= MODE_NATS and not found["negative"] and not found["flat"]
    return ModeCheck(converged=bool(passed), **found)


def flat_tolerance(largest: float, dtype: str) -> float:
    """The largest ``|curvature|`` :class:`ModeCheck` calls flat: :data:`FLAT` x ``eps(dtype)`` x ``largest``.

    Parameters
    ----------
    largest : float
        The largest ``|curvature|`` of the Hessian.
    dtype : str
        The model's float dtype, whose round-off the Hessian carries.

    Returns
    -------
    float
        The tolerance.
    """
    return float(FLAT * np.finfo(dtype).eps * abs(largest))
