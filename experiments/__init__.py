"""The command-line experiments: ``bnn-zoo <command>``, one module each, over one runner.

- :mod:`~bnn_zoo.experiments.toy_priors`: the prior study on the 2-D toy data sets, a
  hierarchical BNN on moons and circles (``bnn-zoo moons``, ``circles``, ``toy``), and every
  prior x hyperprior pair with ``--all-priors``, compared by
  :mod:`~bnn_zoo.experiments.toy_comparison`; :mod:`~bnn_zoo.experiments.moons` and
  :mod:`~bnn_zoo.experiments.circles` run it as scripts;
- :mod:`~bnn_zoo.experiments.mnist_cnn` and :mod:`~bnn_zoo.experiments.mnist_bbb`: the Bayesian
  CNN of Zharikov et al. and Blundell's scale-mixture MLP with pruning (``bnn-zoo mnist-cnn``,
  ``mnist-bbb``), on the pieces they share in :mod:`~bnn_zoo.experiments.mnist_shared`;
- :mod:`~bnn_zoo.experiments.regression`: 1-D regression and its uncertainty away from the
  data, over a sweep of KL weights (``bnn-zoo regression``);
- :mod:`~bnn_zoo.experiments.uci`: the UCI regression benchmark, six methods on nine data
  sets' published splits, a resumable job on Dask (``bnn-zoo uci``); its fits and methods in
  :mod:`~bnn_zoo.experiments.uci_fits`, its table in :mod:`~bnn_zoo.experiments.uci_table`;
- :mod:`~bnn_zoo.experiments.alternatives`: ADVI against NUTS, SGLD, deep ensembles, SWAG and
  MC dropout (``bnn-zoo alternatives``); its cases in
  :mod:`~bnn_zoo.experiments.alternatives_cases`, one method's run in
  :mod:`~bnn_zoo.experiments.alternatives_fits`;
- :mod:`~bnn_zoo.experiments.sweep`: prior sweeps of many fits on Dask (``bnn-zoo sweep``), its
  fits and their keys in :mod:`~bnn_zoo.experiments.sweep_spec`, its vectorised tasks in
  :mod:`~bnn_zoo.experiments.sweep_fits`; :mod:`~bnn_zoo.experiments.report`, their tables
  (``bnn-zoo report``).

The infrastructure they share:

- :mod:`~bnn_zoo.experiments.runner`: the one runner every experiment is a thin script over
  (one run: fit, sample, evaluate, write the run folder; and the command line);
- :mod:`~bnn_zoo.experiments.config`: a run's settings, an experiment and its records;
- :mod:`~bnn_zoo.experiments.fit_flags`: the flags every experiment shares, and its parser;
- :mod:`~bnn_zoo.experiments.flags`: the flags' checked values and one-line errors;
- :mod:`~bnn_zoo.experiments.runtime`: worker processes, XLA flags, run-folder locks, a Dask
  cluster and the progress bar;
- :mod:`~bnn_zoo.experiments.store`: a job's Parquet records, one per fit (the sweep's, the UCI
  job's and the comparison's).
"""

__all__ = []
