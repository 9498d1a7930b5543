"""The UCI regression benchmark (``bnn-zoo uci``; ``python -m bnn_zoo.experiments.uci``): the job,
its fits and methods, its table.

- :mod:`~bnn_zoo.experiments.uci.__main__`: ``python -m bnn_zoo.experiments.uci``: ``bnn-zoo uci`` without the entry point.
- :mod:`~bnn_zoo.experiments.uci.command`: The UCI regression benchmark: nine data sets, their published splits, six methods, one table.
- :mod:`~bnn_zoo.experiments.uci.fits`: The UCI benchmark's fits: one fit's settings, the methods, and the test scores.
- :mod:`~bnn_zoo.experiments.uci.table`: The UCI benchmark's table: per data set and method, beside the published columns.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
