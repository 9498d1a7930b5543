"""What a compiled computation costs, by XLA's own analysis: whether it is cheap enough to loop.

The engine runs steps under :data:`LOOP_BELOW_FLOPS` many at a time inside
one compiled loop, and the posterior's draws evaluate cheap outputs in one
compiled loop over blocks of draws; :func:`cheap` decides both.
"""

from __future__ import annotations

__all__ = ["LOOP_BELOW_FLOPS", "cheap"]

#: Steps cheaper than this many flops (by XLA's cost analysis) run in the compiled loop.
LOOP_BELOW_FLOPS = 1e7


def cheap(lowered) -> bool:
    """Whether a lowered computation costs under :data:`LOOP_BELOW_FLOPS` by XLA's cost analysis.

    XLA leaves out the ``flops`` entry of a computation that has none (one
    that only moves or exponentiates values; an empty analysis is one that
    only slices its input); no analysis at all counts as expensive.

    Parameters
    ----------
    lowered : jax.stages.Lowered
        ``jax.jit(f).lower(*args)``.

    Returns
    -------
    bool
        Cheap enough to run many at a time in one compiled loop.
    """
    analysis = lowered.cost_analysis()
    return analysis is not None and analysis.get("flops", 0.0) < LOOP_BELOW_FLOPS
