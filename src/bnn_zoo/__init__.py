"""bnn-zoo: Bayesian neural networks as PyMC models, fitted by ADVI, examined with ArviZ.

The library in six names::

    import bnn_zoo
    result = bnn_zoo.fit(model)                        # any PyMC model; mean-field, low/full rank, Laplace, flow, auto
    results = bnn_zoo.fit_many([model], restarts=6)    # many fits at once; the best restart runs on
    idata = bnn_zoo.sample(result, 1000)               # ArviZ DataTree; attrs["q_pareto_k"]: did VI work?
    pred = bnn_zoo.predict(result, {"x": x_new})       # posterior predictive on new data
    elpd = bnn_zoo.loo(idata)                          # PSIS-LOO for the approximate posterior

The settings that are values: :class:`ELBO` (the objective), :class:`Checkpoint`,
:class:`MeanField`, :class:`LowRank`, :class:`FullRank`, :class:`Flow`, :class:`Laplace` and
:class:`Auto`
(``fit``'s ``method`` with its settings). Besides these: :func:`precision` (build a model in
float32), :class:`FitResult` (what ``fit`` returns), :func:`reweighted` (the PSIS-reweighted
posterior means and sds), :func:`path_table` (the rungs a ``method="auto"`` fit climbed),
:func:`nuts` (NUTS preconditioned by a fitted q), ``METHODS`` (every name ``fit``'s ``method``
takes: ``"advi"``, ``"lowrank_advi"``, ``"fullrank_advi"``, ``"laplace"``, ``"flow"`` and
``"auto"``),
and what a fit raises or warns:
:class:`NonFiniteLossError`, :class:`CheckpointError` and :class:`ConvergenceWarning`.
These names load the engine (PyMC, JAX, ArviZ) when first used, not on
``import bnn_zoo``.

Subpackages: ``bnn_zoo.models`` (priors and BNN builders), ``bnn_zoo.inference``
(the engine), ``bnn_zoo.evaluation`` (metrics, pruning, plots), ``bnn_zoo.data``
(toy, regression and MNIST data) and ``bnn_zoo.experiments`` (the command lines).
"""

import contextlib
import signal
import threading
from typing import TYPE_CHECKING

__all__ = ["ELBO", "METHODS", "Auto", "Checkpoint", "CheckpointError", "ConvergenceWarning", "FitResult",
           "Flow", "FullRank", "Laplace", "LowRank", "MeanField", "NonFiniteLossError", "fit", "fit_many", "loo", "nuts",
           "path_table", "precision", "predict", "reweighted", "sample"]
__version__ = "0.2.0"

if TYPE_CHECKING:
    from bnn_zoo.inference import (ELBO, METHODS, Auto, Checkpoint, CheckpointError, ConvergenceWarning,
                                   FitResult, Flow, FullRank, Laplace, LowRank, MeanField, NonFiniteLossError, fit,
                                   fit_many, loo, nuts, path_table, precision, predict, reweighted, sample)


def __getattr__(name: str):
    # The public names load the engine (PyMC, JAX, ArviZ: seconds) when first used, so that
    # ``bnn-zoo --help`` and a mistyped command answer at once.
    if name in __all__:
        try:
            with _interrupts_after():
                from bnn_zoo import inference
        except AttributeError as err:  # from inside the engine's import: not "bnn_zoo has no `name`"
            raise ImportError(f"bnn_zoo.{name}: the engine (bnn_zoo.inference) failed to load: {err}") from err

        value = getattr(inference, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bnn_zoo' has no attribute {name!r}")


@contextlib.contextmanager
def _interrupts_after():
    """A Ctrl-C during the engine's import is raised when the import ends: raised inside it, it can be
    dropped by a callback (JAX's) or leave a module half-initialised. Only in the main thread under
    Python's own handler (the commands hold interrupts their own way)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    noted = []
    signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if noted:
        raise KeyboardInterrupt


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
