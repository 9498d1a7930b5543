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
tenth, not more: as a decaying learning rate stills the iterates, the
ELBO estimates creep up by 1-3 nats over the last fifth of the toy fits,
whose q is already as good as that of fits three times as long; over the
last tenth the creep is gone. A rising ELBO says more steps
or a larger learning rate would help; a falling one, that the fit is
unstable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

BATCHES = 20  # batch means in the final window
Z = 3.0  # standard errors a change must exceed to count
NATS = 1.0  # ... and the change it must exceed, in nats
RELATIVE = 1e-3  # ... or in shares of |ELBO|, whichever is larger
WINDOW = 0.1  # the final window, as a share of the steps ...
MIN_WINDOW = 1000  # ... but at least this many steps (all of a shorter trace)


@dataclass(frozen=True)
class Convergence:
    converged: bool
    finite: bool  # every step's ELBO estimate is finite
    elbo_change: float  # the fitted line's rise over the final window (nats)
    elbo_change_se: float
    window: int  # steps in the final window
    elbo_mean: float  # the mean ELBO estimate over the final window

    def record(self) -> dict:
        return {f"convergence_{k}" if k != "converged" else k: v for k, v in asdict(self).items()}

    def describe(self) -> str:
        if not self.finite:
            return "the ELBO became non-finite"
        direction = "rising" if self.elbo_change > 0 else "falling"
        return (f"the ELBO is still {direction}: {self.elbo_change:+.4g} nats over the last "
                f"{self.window} steps (se {self.elbo_change_se:.2g})")


def convergence(elbo: np.ndarray) -> Convergence:
    """The convergence test of an ELBO trace (see the module docstring)."""
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
    small = abs(change) <= Z * se or abs(change) <= max(NATS, RELATIVE * abs(means.mean()))
    return Convergence(converged=bool(small), finite=True, elbo_change=change, elbo_change_se=se,
                       window=window, elbo_mean=float(means.mean()))
