"""The engine's face: the names :mod:`bnn_zoo` re-exports, and nothing else.

Behind it, the engine is in wings by stage, each on a floor, imports pointing down
(docs/contributing.md, "The engine by floor"):

- :mod:`~bnn_zoo.inference.dispatch`: ``fit``, the one entry to every method, by the registry of
  :mod:`~bnn_zoo.inference.methods` (``METHODS`` and the values ``MeanField``, ``LowRank``,
  ``FullRank``, ``Flow``, ``Laplace``, ``Auto``);
- :mod:`~bnn_zoo.inference.auto` (``path_table``) over :mod:`~bnn_zoo.inference.laplace` and
  the ADVI wing;
- :mod:`~bnn_zoo.inference.alternatives`: NUTS handed a fitted q (``nuts``), and the comparisons;
- :mod:`~bnn_zoo.inference.advi`: the loop, ``fit_many``, the objective (``ELBO``), the engine,
  the optimisers, checkpoints (``Checkpoint``), ``precision``;
- :mod:`~bnn_zoo.inference.posterior`: ``FitResult`` and what a fit raises or warns, ``sample``,
  ``predict``, q's ELBO;
- :mod:`~bnn_zoo.inference.diagnostics`: the convergence tests, PSIS (``loo``), Pareto k
  (``reweighted``);
- :mod:`~bnn_zoo.inference.compile` and :mod:`~bnn_zoo.inference.families`: the model in JAX,
  the q's;
- :mod:`~bnn_zoo.inference.defaults` and :mod:`~bnn_zoo.inference.support`: the one set of
  defaults, and what every stage shares.
"""

from bnn_zoo.inference.dispatch import fit
from bnn_zoo.inference.auto import path_table
from bnn_zoo.inference.advi.batch import fit_many
from bnn_zoo.inference.advi.checkpoint import Checkpoint, CheckpointError
from bnn_zoo.inference.alternatives.handoff import nuts
from bnn_zoo.inference.methods import METHODS, Auto, Flow, FullRank, Laplace, LowRank, MeanField
from bnn_zoo.inference.advi.objective import ELBO
from bnn_zoo.inference.posterior.prediction import predict
from bnn_zoo.inference.advi.prepare import precision
from bnn_zoo.inference.diagnostics.psis import loo
from bnn_zoo.inference.diagnostics.qcheck import reweighted
from bnn_zoo.inference.posterior.result import ConvergenceWarning, FitResult, NonFiniteLossError
from bnn_zoo.inference.posterior.sampling import sample

__all__ = ["ELBO", "METHODS", "Auto", "Checkpoint", "CheckpointError", "ConvergenceWarning", "FitResult",
           "Flow", "FullRank", "Laplace", "LowRank", "MeanField", "NonFiniteLossError", "fit", "fit_many", "loo", "nuts",
           "path_table", "precision", "predict", "reweighted", "sample"]
