"""Prior sweeps (``bnn-zoo sweep``; ``python -m bnn_zoo.experiments.sweep``) and their report
(``bnn-zoo report``): the fits and their keys, the vectorised tasks and their scores.

- :mod:`~bnn_zoo.experiments.sweep.__main__`: ``python -m bnn_zoo.experiments.sweep``: ``bnn-zoo sweep`` without the entry point.
- :mod:`~bnn_zoo.experiments.sweep.command`: Prior sweeps: many toy fits, vectorised, resumable, on one machine or a Dask cluster.
- :mod:`~bnn_zoo.experiments.sweep.evaluation`: A sweep task's scores as one device program: every fit's restart pick, draws, PSIS-LOO and test metrics.
- :mod:`~bnn_zoo.experiments.sweep.fits`: A prior sweep's tasks: fits of one structure as one vmapped program, and their records.
- :mod:`~bnn_zoo.experiments.sweep.report`: ``bnn-zoo report SWEEP_DIR``: figures and a Markdown summary of a prior sweep.
- :mod:`~bnn_zoo.experiments.sweep.spec`: A prior sweep's fits: every combination its flags ask for, their keys and their tasks.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
