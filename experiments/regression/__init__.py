"""1-D regression and its uncertainty away from the data, over a sweep of KL weights
(``bnn-zoo regression``; ``python -m bnn_zoo.experiments.regression``).

- :mod:`~bnn_zoo.experiments.regression.__main__`: ``python -m bnn_zoo.experiments.regression``: ``bnn-zoo regression`` without the entry point.
- :mod:`~bnn_zoo.experiments.regression.command`: 1-D BNN regression and its uncertainty away from the data (Garg; Loya's slides).
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
