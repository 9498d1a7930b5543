"""Fitting (ADVI) and posterior handling for any PyMC model.

The public API re-exported at :mod:`bnn_zoo`'s root comes from here:
:func:`~bnn_zoo.inference.advi.fit` and its
:class:`~bnn_zoo.inference.advi.FitResult`, :func:`~bnn_zoo.inference.advi.precision`,
:func:`~bnn_zoo.inference.posterior.sample`, :func:`~bnn_zoo.inference.posterior.predict`
and :func:`~bnn_zoo.inference.posterior.loo`, the errors and warning a fit raises, and
:data:`~bnn_zoo.inference.families.METHODS`. The modules:

- :mod:`~bnn_zoo.inference.advi`: ``fit`` and ``FitResult``;
- :mod:`~bnn_zoo.inference.minibatch`: models written with ``pm.Minibatch``, fitted with the
  engine's own minibatches;
- :mod:`~bnn_zoo.inference.batch`: ``fit_many``, many fits of one model structure at once;
- :mod:`~bnn_zoo.inference.posterior`: draws, predictions and PSIS-LOO;
- :mod:`~bnn_zoo.inference.diagnostics`: the convergence test of an ELBO trace;
- :mod:`~bnn_zoo.inference.alternatives` and :mod:`~bnn_zoo.inference.dropout`: NUTS, deep
  ensembles, SGLD, SWAG and MC dropout, for comparison;
- the engine beneath: :mod:`~bnn_zoo.inference.jaxmodel` (a PyMC model as JAX functions),
  :mod:`~bnn_zoo.inference.families`, :mod:`~bnn_zoo.inference.objective`,
  :mod:`~bnn_zoo.inference.estimators`, :mod:`~bnn_zoo.inference.core`,
  :mod:`~bnn_zoo.inference.engine`, :mod:`~bnn_zoo.inference.iterates`,
  :mod:`~bnn_zoo.inference.noise`, :mod:`~bnn_zoo.inference.optim`,
  :mod:`~bnn_zoo.inference.checkpoint`, :mod:`~bnn_zoo.inference.psis`,
  :mod:`~bnn_zoo.inference.io`, :mod:`~bnn_zoo.inference.jax_fixes`, and
  :mod:`~bnn_zoo.inference.reference` (PyMC's own ADVI step, to check the engine against).
"""

from bnn_zoo.inference.advi import ConvergenceWarning, FitResult, NonFiniteLossError, fit, precision
from bnn_zoo.inference.checkpoint import CheckpointError
from bnn_zoo.inference.families import METHODS
from bnn_zoo.inference.posterior import loo, predict, sample

__all__ = ["METHODS", "CheckpointError", "ConvergenceWarning", "FitResult", "NonFiniteLossError", "fit", "loo",
           "precision", "predict", "sample"]
