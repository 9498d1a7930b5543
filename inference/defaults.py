"""The one set of defaults: what :func:`bnn_zoo.fit`, :func:`bnn_zoo.fit_many` and every command use.

Each value is defined here once. ``fit`` and ``fit_many`` take them as their
keyword defaults, and the command line's shared flags (``bnn-zoo <command>
--steps``, ``--lr``, ...) take theirs from here too; an experiment that
reproduces a paper sets its own values on top, and says so in its
``--help`` and on the reproductions page. :func:`table` is the table the
documentation prints.
"""

from __future__ import annotations

__all__ = ["AVERAGE", "CHECKPOINT_EVERY", "DRAWS", "FINAL", "FULLRANK_LEARNING_RATE", "FULLRANK_RATE_AT_DIM_1", "INIT_STD",
           "LEARNING_RATE", "OPTIMIZER", "PICK_AT", "RESTARTS", "SCHEDULE", "STEPS", "WARM_START",
           "full_rank", "fullrank_learning_rate", "table"]

#: Optimisation steps of a fit.
STEPS = 20_000
#: The optimizer, by name (:data:`bnn_zoo.inference.advi.optim.OPTIMIZERS`).
OPTIMIZER = "adam"
#: Its (initial) learning rate.
LEARNING_RATE = 0.01
#: The learning rate's schedule (:data:`bnn_zoo.inference.advi.optim.SCHEDULES`).
SCHEDULE = "constant"
#: A decaying schedule's final rate, as a share of the initial one.
FINAL = 0.01
#: The share of the final steps whose iterates are averaged into q (Polyak-Ruppert).
AVERAGE = 0.5
#: q's initial standard deviation of every unconstrained value.
INIT_STD = 0.01
#: Steps between two checkpoints.
CHECKPOINT_EVERY = 500
#: A fit that stops once converged (``method="auto"``'s ADVI rungs) tests its ELBO trace every this
#: many steps, from twice as many: the convergence test's window is at least this long.
CONVERGED_CHECK_EVERY = 1000
#: Posterior draws for predictions and PSIS-LOO (the commands' ``--draws``).
DRAWS = 500
#: Fits from other initial means, of which the best runs on (``fit_many``'s ``restarts``).
RESTARTS = 1
#: The share of the steps after which the best restart runs on alone.
PICK_AT = 0.2
#: A full-rank fit without ``init``: the share of its steps spent on a mean-field fit first.
WARM_START = 0.3
#: The full-rank phase's learning rate, after that mean-field start: at most this, and
#: ``FULLRANK_RATE_AT_DIM_1 / sqrt(dim)`` above 400 values (:func:`fullrank_learning_rate`).
FULLRANK_LEARNING_RATE = 1e-3
#: The full-rank phase's rate times ``sqrt(dim)``, above 400 values.
FULLRANK_RATE_AT_DIM_1 = 0.02


#: Learned centring's logits: Adam at this constant rate, whatever q's optimizer (they travel several
#: units from lambda = 0.5 to either form).
CENTRING_LEARNING_RATE = 0.05
#: The most unconstrained values for which the library picks a dense (full-rank) Gaussian itself
#: (:func:`full_rank`): a dense factor of 2,000 values is 2 million parameters, and its step O(dim^2).
AUTO_FULL_RANK_MAX = 2000


def full_rank(dim: int) -> bool:
    """Whether the library picks a dense Gaussian for a model of ``dim`` unconstrained values.

    The one size rule behind every Gaussian the library chooses: ``method="auto"``'s Gaussian
    rung (low rank above), a flow's start without ``init`` (mean-field above) and a flow's
    factor (its sds above). Dense up to :data:`AUTO_FULL_RANK_MAX` values.

    Parameters
    ----------
    dim : int
        The model's unconstrained values.

    Returns
    -------
    bool

    Examples
    --------
    >>> full_rank(751), full_rank(10_000)
    (True, False)
    """
    return dim <= AUTO_FULL_RANK_MAX


#: A flow's coupling layers (``bnn_zoo.Flow``), and the units of each of their networks' two hidden layers:
#: Agrawal, Sheldon and Domke's RealNVP at half their width (2x32), whose q was no better on the models
#: where ``auto`` reaches the flow, at 2.7 times the step's cost (``python -m benchmarks.flow_width``).
FLOW_LAYERS = 10
FLOW_HIDDEN = 16
#: A flow without ``init``: the share of its steps spent on the Gaussian it starts from.
FLOW_START = 0.5
#: The flow's learning rate (Adam, constant): its networks' weights, and q's mean.
FLOW_LEARNING_RATE = 1e-3
#: A flow's share of final steps whose iterates are averaged: none. Averaging its networks' weights
#: gives another function (six hierarchical models, seeds 0-2: 7 of 18 flows pass ``auto``'s test with
#: half the steps averaged, 11 without; ``python -m benchmarks.flow_width --average 0,0.5``).
FLOW_AVERAGE = 0.0


def fullrank_learning_rate(dim: int) -> float:
    """The full-rank phase's learning rate for a model of ``dim`` unconstrained values.

    Each Adam step moves every entry of the factor's ``dim (dim - 1) / 2``
    off-diagonal entries by about the rate, so a row gains relative variance
    in proportion to ``dim * rate**2``: the rate falls as ``1 / sqrt(dim)``
    to keep that gain the same at every size (docs/user_guide/families.md).

    Parameters
    ----------
    dim : int
        The model's number of unconstrained values.

    Returns
    -------
    float
        ``min(FULLRANK_LEARNING_RATE, FULLRANK_RATE_AT_DIM_1 / sqrt(dim))``.

    Examples
    --------
    >>> from bnn_zoo.inference import defaults
    >>> defaults.fullrank_learning_rate(10), round(defaults.fullrank_learning_rate(1600), 6)
    (0.001, 0.0005)
    """
    return min(FULLRANK_LEARNING_RATE, FULLRANK_RATE_AT_DIM_1 / dim**0.5)


def table() -> list[tuple[str, str, str]]:
    """The defaults as the documentation prints them.

    Returns
    -------
    list of tuple of str
        ``(setting, value, what it is)``, one row per default.

    Examples
    --------
    >>> from bnn_zoo.inference import defaults
    >>> defaults.table()[0]
    ('steps', '20000', 'optimisation steps of a fit')
    """
    return [
        ("steps", f"{STEPS}", "optimisation steps of a fit"),
        ("optimizer", f"{OPTIMIZER}, learning rate {LEARNING_RATE:g}, {SCHEDULE} schedule"
         + ("" if SCHEDULE == "constant" else f" to {FINAL:g} of it"), "the optimizer (optax)"),
        ("average", f"{AVERAGE:g}", "share of the final steps whose iterates are averaged into q"),
        ("init_std", f"{INIT_STD:g}", "q's initial sd of every unconstrained value"),
        ("warm start", f"{WARM_START:g} of the steps, then learning rate {FULLRANK_LEARNING_RATE:g} "
         f"(above 400 values {FULLRANK_RATE_AT_DIM_1:g} / sqrt(dim))",
         "a full-rank fit without init: its mean-field phase"),
        ("restarts, pick_at", f"{RESTARTS}, {PICK_AT:g} of the steps",
         "fit_many: fits from other initial means; when the best runs on alone"),
        ("checkpoint every", f"{CHECKPOINT_EVERY} steps", "between two checkpoints"),
        ("draws", f"{DRAWS}", "posterior draws of a command, for predictions and PSIS-LOO"),
        ("flow", f"{FLOW_LAYERS} coupling layers of 2x{FLOW_HIDDEN} units, learning rate {FLOW_LEARNING_RATE:g}, "
         f"average {FLOW_AVERAGE:g}; without init, {FLOW_START:g} of the steps on its Gaussian start",
         "method='flow'"),
        ("full rank", f"up to {AUTO_FULL_RANK_MAX} values", "where the library picks the Gaussian (auto's rung, a flow's start)"),
    ]
