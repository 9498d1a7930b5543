"""Optimizers for :func:`bnn_zoo.fit`: optax transformations, and the command line's shortcuts.

``fit`` takes any optax ``GradientTransformation``. The ones made here also
carry a ``description`` (``"adam(lr=constant(0.05))"``), which the fit
records in its results and checkpoints, and which lets fits with equal
optimizers share their compiled programs. Learning-rate schedules are optax
schedules.
"""

from __future__ import annotations

from collections.abc import Mapping

import optax


class Described(optax.GradientTransformation):
    """An optax transformation with a ``description`` of what it does."""

    description: str


def described(transformation: optax.GradientTransformation, description: str) -> Described:
    """``transformation`` labelled with ``description`` (which must say everything it does)."""
    out = Described(transformation.init, transformation.update)
    out.description = description
    return out


def describe(optimizer: optax.GradientTransformation) -> str:
    """The optimizer's description, or a generic one for a plain optax transformation."""
    return getattr(optimizer, "description", "optax transformation")


SCHEDULES = ("constant", "cosine", "exponential")


def schedule(kind: str, learning_rate: float, steps: int, *, final: float = 0.01,
             decays: Mapping[int, float] | None = None) -> tuple[optax.Schedule, str]:
    """An optax schedule and its description.

    ``kind``: ``"constant"`` at ``learning_rate``; ``"cosine"`` from it to
    ``final * learning_rate`` over ``steps``; ``"exponential"`` likewise,
    geometrically. ``decays`` (``{step: factor}``) multiplies the rate by
    ``factor`` from each 0-based ``step`` on, on top of any kind.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; valid: {', '.join(SCHEDULES)}")
    if not (learning_rate > 0 and 0 < final <= 1 and steps >= 1):
        raise ValueError(f"need learning_rate > 0, 0 < final <= 1 and steps >= 1, got "
                         f"{learning_rate}, {final}, {steps}")
    if kind == "constant":
        base, text = optax.constant_schedule(learning_rate), f"constant({learning_rate:g})"
    elif kind == "cosine":
        base = optax.cosine_decay_schedule(learning_rate, steps, alpha=final)
        text = f"cosine({learning_rate:g} -> {learning_rate * final:g} over {steps})"
    else:
        base = optax.exponential_decay(learning_rate, steps, final, end_value=learning_rate * final)
        text = f"exponential({learning_rate:g} -> {learning_rate * final:g} over {steps})"
    if not decays:
        return base, text
    for step, factor in decays.items():
        if not (isinstance(step, int) and step >= 1 and factor > 0 and factor < float("inf")):
            raise ValueError(f"decays need integer steps >= 1 and positive finite factors, "
                             f"got {step!r}: {factor!r}")
    pieces = optax.piecewise_constant_schedule(1.0, dict(sorted(decays.items())))
    text += " x " + ", ".join(f"{f:g} from step {s}" for s, f in sorted(decays.items()))
    return (lambda t: base(t) * pieces(t)), text


OPTIMIZERS = {
    "adam": optax.adam,
    "adamax": optax.adamax,
    "rmsprop": lambda lr: optax.rmsprop(lr, decay=0.9, eps=1e-6),
    "sgd": optax.sgd,
    "momentum": lambda lr: optax.sgd(lr, momentum=0.9),
}


def make(name: str, learning_rate: float, steps: int, *, schedule_kind: str = "constant",
         final: float = 0.01, decays: Mapping[int, float] | None = None) -> Described:
    """The optimizer ``name`` (one of :data:`OPTIMIZERS`) on a :func:`schedule`: the command line's
    ``--optimizer``, ``--lr``, ``--lr-schedule`` and decays as one optax transformation.

    The rate is always a schedule (a constant one too), so that optimizers of
    one name have the same state structure and a fit can be resumed under
    another schedule.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")
    rate, text = schedule(schedule_kind, learning_rate, steps, final=final, decays=decays)
    return described(OPTIMIZERS[name](rate), f"{name}(lr={text})")
