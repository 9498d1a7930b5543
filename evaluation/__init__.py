"""Metrics, pruning, plots and comparison tables, computed from posterior draws.

- :mod:`~bnn_zoo.evaluation.metrics`: accuracy, NLL, Brier score, calibration (ECE and the
  reliability table), predictive entropy and mutual information, AUROC, predictive intervals;
- :mod:`~bnn_zoo.evaluation.pruning`: weight pruning by signal-to-noise ratio or magnitude;
- :mod:`~bnn_zoo.evaluation.sweeps`: the paired comparisons of a prior sweep's fits;
- :mod:`~bnn_zoo.evaluation.alternatives`: the tables and figures of ``bnn-zoo alternatives``;
- :mod:`~bnn_zoo.evaluation.plots`: every figure the experiments write.
"""

__all__ = []
