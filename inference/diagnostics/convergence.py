"""Did the optimiser stop? The test each fit makes of its own optimisation.

"Converged", here, in :attr:`FitResult.convergence
<bnn_zoo.inference.posterior.result.FitResult.convergence>` and in the records'
``converged`` key, means that *the optimiser's test passed*: ADVI's ELBO
stopped moving (:class:`Convergence`), or L-BFGS reached a mode with a
positive-definite curvature (:class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`, the Laplace
approximation's). It does not say that q is close to the posterior: a
mean-field q of a correlated posterior converges far from it. How close q
is, is what the Pareto k of q's importance ratios measures
(:mod:`~bnn_zoo.inference.diagnostics.qcheck`; ``idata.attrs["q_pareto_k"]`` of
:func:`bnn_zoo.sample`, ``q_pareto_k`` in the records), and
:meth:`FitResult.summary <bnn_zoo.inference.posterior.result.FitResult.summary>`
reports the two verdicts side by side. Each finding has ``converged``,
``describe()`` (what it tested and found), ``hint()`` (what to try) and
``record()`` (its fields for ``metrics.json``); :func:`recorded` reads one
back.

ADVI (:func:`convergence`). The trace of per-step ELBO estimates is noisy
and autocorrelated, so the
test fits a line to the final window (the last tenth of the steps, but at
least :data:`MIN_WINDOW` steps), on the means of :data:`BATCHES` consecutive
batches (batch means make the line's
standard error honest under autocorrelation), and asks how much the ELBO
still moved across that window: ``elbo_change = slope x window``. The ELBO
has stopped moving when every estimate is finite and that change is either within
:data:`Z` standard errors of zero (no trend the noise can tell from none) or
smaller than :data:`NATS` nat or :data:`RELATIVE` of the ELBO's size,
whichever is larger (a trend too small to matter). The window is the last
tenth, not more: as a decaying learning rate stills the iterates, the ELBO
estimates still creep up by a few nats over a longer final stretch of fits
whose q no longer improves, which a longer window would read as a trend
(docs/user_guide/engine.md). A rising ELBO says more steps
or a larger learning rate would help; a falling one, that the fit is
unstable.

A fit has not converged either when it *ended below where it had been*:
the final window's mean ELBO is lower than that of an earlier window of the
same length, or than ``start``, the ELBO of the fit it was started from (a
full-rank fit from a mean-field one, whose family it contains), by more
than :data:`Z` x sqrt(2) standard errors of a window's mean plus
:data:`NATS` or :data:`RELATIVE` of that level, or with :data:`BELOW_SHARE`
of its batch means below that level less the margin (a diverging trace's
noise is as large as its fall). A line through the final window misses
this: a full-rank fit at too large a rate drops far below its mean-field
start within its first steps and then climbs slowly back to a flat last
window, still short of that start; one that diverges ends with a trend too
noisy to be told from none (docs/user_guide/engine.md).

The Laplace approximation's test is :class:`~bnn_zoo.inference.diagnostics.modecheck.ModeCheck`'s
(:mod:`~bnn_zoo.inference.diagnostics.modecheck`).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

import numpy as np

from bnn_zoo.inference.diagnostics.modecheck import ModeCheck, record_fields

__all__ = ["BATCHES", "BELOW_SHARE", "MIN_WINDOW", "NATS", "RELATIVE", "WINDOW", "Z", "Convergence", "convergence",
           "recorded"]

#: Batch means in the final window.
BATCHES = 20
#: Standard errors a change must exceed to count ...
Z = 3.0
#: ... and the change it must exceed, in nats ...
NATS = 1.0
#: ... or in shares of ``|ELBO|``, whichever is larger.
RELATIVE = 1e-3
#: The final window, as a share of the steps ...
WINDOW = 0.1
#: ... but at least this many steps (all of a shorter trace).
MIN_WINDOW = 1000
#: A window with this share of its batch means below an earlier level has fallen.
BELOW_SHARE = 0.95


@dataclass(frozen=True)
class Convergence:
    """The finding of :func:`convergence` on an ADVI fit's ELBO trace.

    Parameters
    ----------
    converged : bool
        The optimiser's test passed: every estimate is finite, the ELBO
        stopped moving across the final window, and it did not fall. Not
        that q is close to the posterior (the module docstring).
    finite : bool
        Every step's ELBO estimate is finite.
    elbo_change : float
        The fitted line's rise over the final window, in nats (NaN for a
        non-finite or very short trace).
    elbo_change_se : float
        Its standard error.
    window : int
        Steps in the final window.
    elbo_mean : float
        The mean ELBO estimate over the final window.
    elbo_shortfall : float, default nan
        How far the final window's mean is below the best earlier window's
        or the start's (NaN when there is neither).
    fell : bool, default False
        Whether that shortfall is more than the noise allows.
    moving : bool, default False
        The trend test's finding: the ELBO still moves across the window.

    Examples
    --------
    >>> import numpy as np
    >>> from bnn_zoo.inference.diagnostics.convergence import convergence
    >>> flat = -150 + np.random.default_rng(0).normal(0, 5, 20_000)
    >>> convergence(flat).describe()
    'the ELBO stopped moving: -0.93 ± 0.32 nats over the last 2,000 steps'
    >>> rising = convergence(flat + np.linspace(0, 100, 20_000))
    >>> rising.converged, rising.hint()
    (False, 'try more steps or a decaying learning rate')
    """

    converged: bool
    finite: bool  # every step's ELBO estimate is finite
    elbo_change: float  # the fitted line's rise over the final window (nats)
    elbo_change_se: float
    window: int  # steps in the final window
    elbo_mean: float  # the mean ELBO estimate over the final window
    # How far the final window's mean is below the best earlier window's or the start's
    # (NaN when there is neither), and whether that is more than the noise allows.
    elbo_shortfall: float = float("nan")
    fell: bool = False
    moving: bool = False  # the trend test's finding: the ELBO still moves across the window

    def record(self) -> dict:
        """The fields as a flat dict for ``metrics.json``.

        Returns
        -------
        dict
            ``converged`` (the optimiser's test passed: the ELBO stopped
            moving), and every other field prefixed ``convergence_``.
        """
        return record_fields(self)

    def describe(self) -> str:
        """What the test found, in words, passed or not.

        Returns
        -------
        str
            E.g. ``"the ELBO is still rising: +12.3 nats over the last 1,000
            steps (se 2.1)"``, or for a fit that passed ``"the ELBO stopped
            moving: +0.3 ± 0.5 nats over the last 2,000 steps"``.
        """
        if not self.finite:
            return "the ELBO became non-finite"
        if self.converged:
            if not np.isfinite(self.elbo_change):
                return f"every ELBO estimate is finite; {self.window:,} steps are too few to test for a trend"
            if abs(self.elbo_change) > Z * self.elbo_change_se:  # a real trend, too small to matter
                margin = max(NATS, RELATIVE * abs(self.elbo_mean))
                return (f"the ELBO moves too little to matter: {self.elbo_change:+.3g} nats over the last "
                        f"{self.window:,} steps (se {self.elbo_change_se:.2g}), under the {margin:.3g} that count")
            return (f"the ELBO stopped moving: {self.elbo_change:+.2g} ± {self.elbo_change_se:.2g} nats over the "
                    f"last {self.window:,} steps")
        if self.fell and not self.moving:
            return (f"the ELBO fell: its last {self.window:,} steps average {self.elbo_shortfall:.4g} nats "
                    "below an earlier stretch of the fit or the fit it started from")
        direction = "rising" if self.elbo_change > 0 else "falling"
        return (f"the ELBO is still {direction}: {self.elbo_change:+.4g} nats over the last "
                f"{self.window:,} steps (se {self.elbo_change_se:.2g})")

    def hint(self, smaller: str = "a smaller learning rate", decaying: str = "a decaying learning rate") -> str:
        """What to try: ``smaller`` steps for an unstable fit, more or ``decaying`` ones otherwise.

        Parameters
        ----------
        smaller : str, default "a smaller learning rate"
            The advice for a fit that became non-finite, fell, or is falling
            (the command line names its flag).
        decaying : str, default "a decaying learning rate"
            The alternative to more steps for a fit still rising.

        Returns
        -------
        str
            ``"try ..."``.
        """
        if not self.finite or self.fell or self.elbo_change < 0:
            return f"try {smaller}"
        return f"try more steps or {decaying}"


def recorded(metrics: dict) -> Convergence | ModeCheck:
    """The finding a run's metrics recorded (what ``record()`` wrote), for its ``describe`` and ``hint``.

    Parameters
    ----------
    metrics : dict
        A run's metrics, as in its ``metrics.json``: ``converged`` and the
        ``convergence_*`` keys. A Laplace fit's record has
        ``convergence_mode_gap``.

    Returns
    -------
    Convergence or ModeCheck
        The finding; a field the metrics lack (one added after they were
        written) takes its default, or NaN.
    """
    kind = ModeCheck if "convergence_mode_gap" in metrics else Convergence
    values = {}
    for f in fields(kind):
        key = f.name if f.name == "converged" else f"convergence_{f.name}"
        if key in metrics:
            values[f.name] = metrics[key]
        elif f.default is MISSING:
            values[f.name] = {"bool": False, "int": 0, "str": ""}.get(f.type, float("nan"))
    return kind(**values)


def convergence(elbo: np.ndarray, start: float | None = None) -> Convergence:
    """The convergence test of an ADVI fit's ELBO trace (see the module docstring).

    Parameters
    ----------
    elbo : numpy.ndarray
        The per-step ELBO estimates.
    start : float, optional
        The ELBO of the fit this one was started from, which it should not
        end below (ignored when not finite).

    Returns
    -------
    Convergence
        The finding.
    """
    elbo = np.asarray(elbo, dtype="float64")
    finite = bool(np.isfinite(elbo).all()) and len(elbo) > 0
    window = min(len(elbo), max(BATCHES, MIN_WINDOW, int(len(elbo) * WINDOW)))
    tail = elbo[-window:]
    if not finite or len(tail) < BATCHES:
        return Convergence(converged=finite and len(tail) > 0, finite=finite, elbo_change=float("nan"),
                           elbo_change_se=float("nan"), window=len(tail),
                           elbo_mean=float(np.mean(tail)) if len(tail) else float("nan"))
    means = np.array([b.mean() for b in np.array_split(tail, BATCHES)])
    x = np.linspace(0.0, 1.0, BATCHES)  # the window's position, so the slope is the change across it
    slope, intercept = np.polyfit(x, means, 1)
    residual = means - (slope * x + intercept)
    se = float(np.sqrt(residual @ residual / (BATCHES - 2) / np.sum((x - x.mean()) ** 2)))
    change = float(slope)
    level = float(means.mean())
    margin = max(NATS, RELATIVE * abs(level))
    small = abs(change) <= Z * se or abs(change) <= margin
    earlier = [elbo[end - window : end].mean() for end in range(len(elbo) - window, window - 1, -window)]
    references = earlier + ([float(start)] if start is not None and np.isfinite(start) else [])
    fell = False
    shortfall = float("nan")
    if references:
        best = max(references)
        shortfall = best - level
        drop = max(NATS, RELATIVE * abs(best))  # the margin, on the level the fit fell from
        level_se = float(means.std(ddof=1) / np.sqrt(BATCHES))
        # Below by more than the noise allows, or (for a diverging trace, whose noise is as
        # large as its fall) nearly every batch of the window below that level.
        below = float(np.mean(means < best - drop)) >= BELOW_SHARE
        fell = bool(shortfall > drop) and (bool(shortfall > drop + Z * np.sqrt(2.0) * level_se) or below)
    return Convergence(converged=bool(small) and not fell, finite=True, elbo_change=change,
                       elbo_change_se=se, window=window, elbo_mean=level,
                       elbo_shortfall=float(shortfall), fell=fell, moving=not small)
