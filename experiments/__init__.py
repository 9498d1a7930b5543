"""The command-line experiments: ``bnn-zoo <command>``, a folder per command family over one harness.

The families, each a package whose modules import the harness and, where said, another family:

- :mod:`~bnn_zoo.experiments.toy`: the prior study on the 2-D toy data sets, a hierarchical BNN on
  moons and circles (``bnn-zoo moons``, ``circles``, ``toy``), and every prior x hyperprior pair
  with ``--all-priors``: the experiment in :mod:`~bnn_zoo.experiments.toy.priors`, the pairs
  compared by :mod:`~bnn_zoo.experiments.toy.comparison`; :mod:`~bnn_zoo.experiments.toy.moons`
  and :mod:`~bnn_zoo.experiments.toy.circles` run it as scripts;
- :mod:`~bnn_zoo.experiments.mnist`: the Bayesian CNN of Zharikov et al.
  (:mod:`~bnn_zoo.experiments.mnist.cnn`, ``bnn-zoo mnist-cnn``) and Blundell's scale-mixture MLP
  with pruning (:mod:`~bnn_zoo.experiments.mnist.bbb`, ``bnn-zoo mnist-bbb``), on the pieces they
  share in :mod:`~bnn_zoo.experiments.mnist.shared`;
- :mod:`~bnn_zoo.experiments.regression`: 1-D regression and its uncertainty away from the data,
  over a sweep of KL weights (:mod:`~bnn_zoo.experiments.regression.command`,
  ``bnn-zoo regression``);
- :mod:`~bnn_zoo.experiments.uci`: the UCI regression benchmark, six methods on nine data sets'
  published splits, a resumable job on Dask (:mod:`~bnn_zoo.experiments.uci.command`,
  ``bnn-zoo uci``); its fits and methods in :mod:`~bnn_zoo.experiments.uci.fits`, its table in
  :mod:`~bnn_zoo.experiments.uci.table`;
- :mod:`~bnn_zoo.experiments.sweep`: prior sweeps of many toy fits on Dask
  (:mod:`~bnn_zoo.experiments.sweep.command`, ``bnn-zoo sweep``), its fits and their keys in
  :mod:`~bnn_zoo.experiments.sweep.spec`, its vectorised tasks in
  :mod:`~bnn_zoo.experiments.sweep.fits`, their scores in
  :mod:`~bnn_zoo.experiments.sweep.evaluation`; :mod:`~bnn_zoo.experiments.sweep.report`, their
  tables (``bnn-zoo report``). It builds on the toy family;
- :mod:`~bnn_zoo.experiments.alternatives`: ADVI against NUTS, SGLD, deep ensembles, SWAG and MC
  dropout (:mod:`~bnn_zoo.experiments.alternatives.command`, ``bnn-zoo alternatives``); its cases
  in :mod:`~bnn_zoo.experiments.alternatives.cases`, one method's run in
  :mod:`~bnn_zoo.experiments.alternatives.fits`. Its cases build on the toy and regression families.

``python -m bnn_zoo.experiments.<family>`` runs the command of ``regression``, ``uci``, ``sweep``
and ``alternatives`` (their ``__main__``).

The harness, :mod:`~bnn_zoo.experiments.harness`, which imports no family:

- :mod:`~bnn_zoo.experiments.harness.runner`: the one runner every experiment is a thin script over
  (one run: fit, sample, evaluate, write the run folder; and the command line);
- :mod:`~bnn_zoo.experiments.harness.config`: a run's settings, an experiment and its records;
- :mod:`~bnn_zoo.experiments.harness.fit_flags`: the flags every experiment shares, and its parser;
- :mod:`~bnn_zoo.experiments.harness.flags`: the flags' checked values and one-line errors;
- :mod:`~bnn_zoo.experiments.harness.runtime`: worker processes, interrupts and XLA's flags;
- :mod:`~bnn_zoo.experiments.harness.resources`: what a command holds while it runs: run-folder
  locks, a Dask cluster, the progress bar, peak memory;
- :mod:`~bnn_zoo.experiments.harness.store`: a job's Parquet records, one per fit (the sweep's, the
  UCI job's and the comparison's).
"""

__all__ = []
