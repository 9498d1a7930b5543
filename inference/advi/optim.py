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

from bnn_zoo.inference import defaults

__all__ = ["OPTIMIZERS", "SCHEDULES", "Described", "default", "describe", "described", "key", "make", "schedule",
           "with_centring"]


class Described(optax.GradientTransformation):
    """An optax transformation with a ``description`` of what it does.

    Made by :func:`described` (or :func:`make`). Fits with optimizers of
    equal descriptions share their compiled programs, so the description
    must say everything the transformation does.

    Attributes
    ----------
    init : callable
        optax's ``init(params) -> state``.
    update : callable
        optax's ``update(updates, state, params) -> (updates, state)``.
    description : str
        What the transformation does, e.g. ``"adam(lr=constant(0.05))"``.
    """

    description: str


def described(transformation: optax.GradientTransformation, description: str) -> Described:
    """``transformation`` labelled with ``description``.

    Parameters
    ----------
    transformation : optax.GradientTransformation
        Any optax transformation.
    description : str
        What it does, in full: fits whose optimizers have equal descriptions
        share their compiled programs.

    Returns
    -------
    Described
        The same ``init`` and ``update``, with ``description``.
    """
    out = Described(transformation.init, transformation.update)
    out.description = description
    return out


def describe(optimizer: optax.GradientTransformation) -> str:
    """The optimizer's description, as results and checkpoints record it.

    Parameters
    ----------
    optimizer : optax.GradientTransformation
        A :class:`Described` or any optax transformation.

    Returns
    -------
    str
        Its ``description``, or ``"optax transformation"`` for a plain one.
    """
    return getattr(optimizer, "description", "optax transformation")


#: The learning-rate schedules :func:`schedule` and :func:`make` know (``--lr-schedule``).
SCHEDULES = ("constant", "cosine", "exponential")


def schedule(kind: str, learning_rate: float, steps: int, *, final: float = 0.01,
             decays: Mapping[int, float] | None = None) -> tuple[optax.Schedule, str]:
    """An optax schedule and its description.

    Parameters
    ----------
    kind : {"constant", "cosine", "exponential"}
        ``"constant"`` at ``learning_rate``; ``"cosine"`` from it to
        ``final * learning_rate`` over ``steps``; ``"exponential"`` likewise,
        geometrically.
    learning_rate : float
        The initial rate, positive.
    steps : int
        The steps of the decay, at least 1.
    final : float, default 0.01
        The decay's final rate as a share of ``learning_rate``, in (0, 1].
    decays : mapping of int to float, optional
        ``{step: factor}``: multiplies the rate by ``factor`` from each
        0-based ``step`` on, on top of any kind (steps >= 1, factors
        positive and finite).

    Returns
    -------
    schedule : callable
        The optax schedule, a function of the step.
    description : str
        E.g. ``"cosine(0.05 -> 0.0005 over 10000)"``.

    Raises
    ------
    ValueError
        For an unknown ``kind`` or a value out of range.
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


#: The optimizers :func:`make` knows, by name (``--optimizer``): functions of the learning rate.
OPTIMIZERS = {
    "adam": optax.adam,
    "adamax": optax.adamax,
    "rmsprop": lambda lr: optax.rmsprop(lr, decay=0.9, eps=1e-6),
    "sgd": optax.sgd,
    "momentum": lambda lr: optax.sgd(lr, momentum=0.9),
}


def make(name: str, learning_rate: float, steps: int, *, schedule_kind: str = "constant",
         final: float = 0.01, decays: Mapping[int, float] | None = None) -> Described:
    """The optimizer ``name`` on a :func:`schedule`, with its description.

    The command line's ``--optimizer``, ``--lr``, ``--lr-schedule`` and
    decays as one optax transformation. The rate is always a schedule (a
    constant one too), so that optimizers of one name have the same state
    structure and a fit can be resumed under another schedule.

    Parameters
    ----------
    name : {"adam", "adamax", "rmsprop", "sgd", "momentum"}
        One of :data:`OPTIMIZERS`.
    learning_rate : float
        The (initial) learning rate.
    steps : int
        The steps of the schedule's decay.
    schedule_kind : {"constant", "cosine", "exponential"}, default "constant"
        The schedule (:func:`schedule`'s ``kind``).
    final : float, default 0.01
        The decay's final rate as a share of ``learning_rate``.
    decays : mapping of int to float, optional
        ``{step: factor}`` on top of the schedule.

    Returns
    -------
    Described
        E.g. ``"adam(lr=constant(0.01))"``.

    Raises
    ------
    ValueError
        For an unknown name or schedule, or a value out of range.

    Examples
    --------
    >>> from bnn_zoo.inference.advi import optim
    >>> opt = optim.make("adam", 0.05, 10_000, schedule_kind="cosine")
    >>> opt.description
    'adam(lr=cosine(0.05 -> 0.0005 over 10000))'
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> with pm.Model() as model:
    ...     y = pm.Normal("y", pm.Normal("b", 0, 10), 1, observed=np.random.default_rng(0).normal(2, 1, 50))
    >>> result = bnn_zoo.fit(model, optimizer=opt, steps=10_000, average=0, progressbar=False)
    >>> result.config["optimizer"]
    'adam(lr=cosine(0.05 -> 0.0005 over 10000))'
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")
    rate, text = schedule(schedule_kind, learning_rate, steps, final=final, decays=decays)
    return described(OPTIMIZERS[name](rate), f"{name}(lr={text})")


def default(steps: int, learning_rate: float = defaults.LEARNING_RATE) -> Described:
    """The default optimizer for a fit of ``steps`` steps.

    Parameters
    ----------
    steps : int
        The fit's steps (the length of a decaying schedule).
    learning_rate : float, default bnn_zoo.inference.defaults.LEARNING_RATE
        The initial learning rate.

    Returns
    -------
    Described
        :data:`~bnn_zoo.inference.defaults.OPTIMIZER` on
        :data:`~bnn_zoo.inference.defaults.SCHEDULE`, e.g. ``"adam(lr=constant(0.01))"``.

    Examples
    --------
    >>> from bnn_zoo.inference.advi import optim
    >>> optim.default(10_000).description
    'adam(lr=constant(0.01))'
    """
    return make(defaults.OPTIMIZER, learning_rate, steps, schedule_kind=defaults.SCHEDULE, final=defaults.FINAL)


def with_centring(optimizer: optax.GradientTransformation, learning_rate: float) -> optax.GradientTransformation:
    """``optimizer`` for q's parameters, and Adam at a constant ``learning_rate`` for learned centring's logits.

    The ``lambda`` logits (``params["centring"]``) have to travel several units from 0 (``lambda`` 0.5) to
    either form; at a full-rank fit's learning rate (1e-3) they do not within its steps.

    Parameters
    ----------
    optimizer : optax.GradientTransformation
        The fit's optimizer.
    learning_rate : float
        The logits' rate.

    Returns
    -------
    optax.GradientTransformation
        Described as ``optimizer``'s description plus the logits' Adam, where it has one.
    """
    out = optax.multi_transform({"q": optimizer, "centring": optax.adam(learning_rate)},
                                lambda params: {k: "centring" if k == "centring" else "q" for k in params})
    if hasattr(optimizer, "description"):
        return described(out, f"{optimizer.description}; centring logits adam(lr=constant({learning_rate:g}))")
    return out


def key(optimizer) -> object:
    """What identifies the optimizer's computation: its description, or the object itself.

    Parameters
    ----------
    optimizer : optax.GradientTransformation
        The optimizer.

    Returns
    -------
    object
        Its ``description`` when it has one (:func:`described`), else itself.
    """
    return optimizer.description if isinstance(optimizer, Described) else optimizer
