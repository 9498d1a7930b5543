"""The command-line experiments: ``bnn-zoo <command>``, one module each, over one runner.

- :mod:`~bnn_zoo.experiments.toy`: seed 004's hierarchical BNN on moons and circles
  (``bnn-zoo moons``, ``circles``, ``toy``), and every prior x hyperprior pair with
  ``--all-priors``; :mod:`~bnn_zoo.experiments.moons` and :mod:`~bnn_zoo.experiments.circles`
  run it as scripts;
- :mod:`~bnn_zoo.experiments.mnist_cnn` and :mod:`~bnn_zoo.experiments.mnist_bbb`: the Bayesian
  CNN of seed 004 and Blundell's scale-mixture MLP with pruning (``bnn-zoo mnist-cnn``,
  ``mnist-bbb``), on the pieces they share in :mod:`~bnn_zoo.experiments.mnist_shared`;
- :mod:`~bnn_zoo.experiments.regression`: 1-D regression and its uncertainty away from the
  data, over a sweep of KL weights (``bnn-zoo regression``);
- :mod:`~bnn_zoo.experiments.uci`: the UCI regression benchmark, five methods on nine data
  sets' published splits, a resumable job on Dask (``bnn-zoo uci``);
- :mod:`~bnn_zoo.experiments.alternatives`: ADVI against NUTS, SGLD, deep ensembles, SWAG and
  MC dropout (``bnn-zoo alternatives``);
- :mod:`~bnn_zoo.experiments.sweep`: prior sweeps of many fits on Dask (``bnn-zoo sweep``), and
  :mod:`~bnn_zoo.experiments.report`, their tables (``bnn-zoo report``);
- :mod:`~bnn_zoo.experiments.runner`: the one runner every experiment is a thin script over
  (flags, runs in worker processes, checkpoints, run folders), and
  :mod:`~bnn_zoo.experiments.cli`, the flags' checks and one-line errors.
"""

__all__ = []
