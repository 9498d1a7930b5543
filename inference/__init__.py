"""Fitting (ADVI) and posterior handling for any PyMC model.

The public API re-exported at :mod:`bnn_zoo`'s root comes from here. The modules, one job each:

- the API: :mod:`~bnn_zoo.inference.advi` (``fit``), :mod:`~bnn_zoo.inference.batch`
  (``fit_many``: many fits at once, restarts), :mod:`~bnn_zoo.inference.result` (``FitResult``
  and what a fit raises or warns), :mod:`~bnn_zoo.inference.sampling` (``sample``),
  :mod:`~bnn_zoo.inference.prediction` (``predict``), :mod:`~bnn_zoo.inference.psis` (``loo``
  and Pareto-smoothed importance sampling), :mod:`~bnn_zoo.inference.defaults` (the one set of
  defaults);
- the settings that are values: :mod:`~bnn_zoo.inference.objective` (``ELBO``),
  :mod:`~bnn_zoo.inference.methods` (``METHODS``, ``MeanField``, ``LowRank``, ``FullRank``, ``Flow``),
  :mod:`~bnn_zoo.inference.laplace` (``Laplace``, and the Laplace approximation itself),
  :mod:`~bnn_zoo.inference.checkpoint` (``Checkpoint``), :mod:`~bnn_zoo.inference.optim`
  (optimizers with a description);
- what a fit builds and runs: :mod:`~bnn_zoo.inference.families` (the Gaussians q as JAX
  functions), :mod:`~bnn_zoo.inference.gaussians` (a fitted q in NumPy),
  :mod:`~bnn_zoo.inference.prepare` (before the first step), :mod:`~bnn_zoo.inference.starts`
  (where q starts),
  :mod:`~bnn_zoo.inference.minibatch` (``pm.Minibatch`` models and the cut containers),
  :mod:`~bnn_zoo.inference.jaxmodel` (a PyMC model as JAX functions),
  :mod:`~bnn_zoo.inference.graphs` (PyTensor graphs to JAX), :mod:`~bnn_zoo.inference.core`
  (``init``/``step``/``sample``), :mod:`~bnn_zoo.inference.engine` (compiled loops),
  :mod:`~bnn_zoo.inference.estimators`, :mod:`~bnn_zoo.inference.iterates`,
  :mod:`~bnn_zoo.inference.noise`, :mod:`~bnn_zoo.inference.diagnostics` and
  :mod:`~bnn_zoo.inference.modecheck` (the convergence tests), :mod:`~bnn_zoo.inference.io`, :mod:`~bnn_zoo.inference.jax_fixes`;
- after a fit: :mod:`~bnn_zoo.inference.draws` (draws of q and the model at them),
  :mod:`~bnn_zoo.inference.restarts` (q's ELBO, the best of several fits),
  :mod:`~bnn_zoo.inference.qcheck` (did VI work? Pareto k, ``reweighted``);
- for comparison: :mod:`~bnn_zoo.inference.baselines` (NUTS, deep ensembles, SGLD, SWAG),
  :mod:`~bnn_zoo.inference.dropout` (MC dropout) and :mod:`~bnn_zoo.inference.reference`
  (PyMC's own ADVI step, to check the engine against).
"""

from bnn_zoo.inference.dispatch import fit
from bnn_zoo.inference.auto import path_table
from bnn_zoo.inference.batch import fit_many
from bnn_zoo.inference.checkpoint import Checkpoint, CheckpointError
from bnn_zoo.inference.handoff import nuts
from bnn_zoo.inference.methods import METHODS, Auto, Flow, FullRank, Laplace, LowRank, MeanField
from bnn_zoo.inference.objective import ELBO
from bnn_zoo.inference.prediction import predict
from bnn_zoo.inference.prepare import precision
from bnn_zoo.inference.psis import loo
from bnn_zoo.inference.qcheck import reweighted
from bnn_zoo.inference.result import ConvergenceWarning, FitResult, NonFiniteLossError
from bnn_zoo.inference.sampling import sample

__all__ = ["ELBO", "METHODS", "Auto", "Checkpoint", "CheckpointError", "ConvergenceWarning", "FitResult",
           "Flow", "FullRank", "Laplace", "LowRank", "MeanField", "NonFiniteLossError", "fit", "fit_many", "loo", "nuts",
           "path_table", "precision", "predict", "reweighted", "sample"]
