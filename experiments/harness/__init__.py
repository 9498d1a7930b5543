"""What every command runs on: the runner, a run's settings and records, the shared flags, worker
processes, what a command holds while it runs, and the Parquet store. It imports no family.

- :mod:`~bnn_zoo.experiments.harness.config`: An experiment's types: its settings, what it makes of a fit, and a finished run.
- :mod:`~bnn_zoo.experiments.harness.fit_flags`: The flags every experiment shares, and an experiment's command line.
- :mod:`~bnn_zoo.experiments.harness.flags`: Flag parsing shared by the experiments: one-line errors and checked values.
- :mod:`~bnn_zoo.experiments.harness.resources`: What a command holds while it runs: a lock on its run folder, a Dask cluster, a progress bar, peak memory.
- :mod:`~bnn_zoo.experiments.harness.runner`: The one path every experiment takes: flags -> typed config -> fit -> sample -> predict -> write.
- :mod:`~bnn_zoo.experiments.harness.runtime`: Where the experiments' work runs: worker processes, interrupts, XLA's flags.
- :mod:`~bnn_zoo.experiments.harness.store`: A folder of Parquet records, one per fit: what ``bnn-zoo sweep``, ``uci`` and ``alternatives`` write.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
