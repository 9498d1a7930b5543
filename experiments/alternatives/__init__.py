"""ADVI against NUTS, SGLD, deep ensembles, SWAG and MC dropout (``bnn-zoo alternatives``;
``python -m bnn_zoo.experiments.alternatives``): the command, its cases, one method's run.

- :mod:`~bnn_zoo.experiments.alternatives.__main__`: ``python -m bnn_zoo.experiments.alternatives``: ``bnn-zoo alternatives`` without the entry point.
- :mod:`~bnn_zoo.experiments.alternatives.cases`: The cases of ``bnn-zoo alternatives``: each benchmark's data, model, inputs and method settings.
- :mod:`~bnn_zoo.experiments.alternatives.command`: ADVI against the alternatives in Loya's slides, on the same models and data: ``bnn-zoo alternatives``.
- :mod:`~bnn_zoo.experiments.alternatives.fits`: One method of ``bnn-zoo alternatives`` on one case: fit, predict and store, in a process of its own.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
