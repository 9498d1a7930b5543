"""Metrics, pruning, plots and comparison tables, computed from posterior draws.

- :mod:`~bnn_zoo.evaluation.metrics`: accuracy, NLL, Brier score, calibration (ECE and the
  reliability table), predictive entropy and mutual information, AUROC, predictive intervals;
- :mod:`~bnn_zoo.evaluation.calibration`: coverage of predictive intervals and sets, and conformal
  intervals and sets with a finite-sample guarantee;
- :mod:`~bnn_zoo.evaluation.calibration_plots`: PIT, LOO-PIT and PAVA reliability plots (arviz-plots);
- :mod:`~bnn_zoo.evaluation.sensitivity`: prior and likelihood sensitivity by power-scaling (psense);
- :mod:`~bnn_zoo.evaluation.pruning`: weight pruning by signal-to-noise ratio or magnitude;
- :mod:`~bnn_zoo.evaluation.sweeps`: the paired comparisons of a prior sweep's fits;
- :mod:`~bnn_zoo.evaluation.baseline_tables`: the tables and figures of ``bnn-zoo alternatives``;
- :mod:`~bnn_zoo.evaluation.plots`: the figures of one run (toy maps and prior comparison, MNIST
  calibration, uncertainty, ELBO and pruning), and ``save``, which writes any figure;
- :mod:`~bnn_zoo.evaluation.comparison_plots`: the figures across many fits (a regression's KL
  weights, the prior sweep, the other methods).
"""

__all__ = []
