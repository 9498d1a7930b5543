"""Did a fit converge? A test on its ELBO trace.

The trace of per-step ELBO estimates is noisy and autocorrelated, so the
test fits a line to the final window (the last tenth of the steps, but at
least :data:`MIN_WINDOW` steps), on the means of :data:`BATCHES` consecutive
batches (batch means make the line's
standard error honest under autocorrelation), and asks how much the ELBO
still moved across that window: ``elbo_change = slope x window``. A fit has
converged when every estimate is finite and that change is either within
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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["BATCHES", "BELOW_SHARE", "MIN_WINDOW", "NATS", "RELATIVE", "WINDOW", "Z", "Convergence",
           "convergence"]

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
    """The finding of :func:`convergence` on an ELBO trace.

    Parameters
    ----------
    converged : bool
        Every estimate is finite, the ELBO no longer moves across the final
        window, and it did not fall.
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
    >>> c = result.convergence
    >>> c.converged, c.elbo_change, c.elbo_change_se
    >>> if not c.converged:
    ...     print(c.describe(), c.hint())
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
            ``converged``, and every other field prefixed ``convergence_``.
        """
        return {f"convergence_{k}" if k != "converged" else k: v for k, v in asdict(self).items()}

    def describe(self) -> str:
        """What the test found, in words (for a warning).

        Returns
        -------
        str
            E.g. ``"the ELBO is still rising: +12.3 nats over the last 1000
            steps (se 2.1)"``.
        """
        if not self.finite:
            return "the ELBO became non-finite"
        if self.fell and not self.moving:
            return (f"the ELBO fell: its last {self.window} steps average {self.elbo_shortfall:.4g} nats "
                    "below an earlier stretch of the fit or the fit it started from")
        direction = "rising" if self.elbo_change > 0 else "falling"
        return (f"the ELBO is still {direction}: {self.elbo_change:+.4g} nats over the last "
                f"{self.window} steps (se {self.elbo_change_se:.2g})")

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


def convergence(elbo: np.ndarray, start: float | None = None) -> Convergence:
    """The convergence test of an ELBO trace (see the module docstring).

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
