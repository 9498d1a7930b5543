"""The toy prior study (``bnn-zoo moons``, ``circles``, ``toy``): a hierarchical BNN on the 2-D toy
data sets under each prior, and the comparison of prior pairs.

- :mod:`~bnn_zoo.experiments.toy.circles`: ``python -m bnn_zoo.experiments.toy.circles``: the toy prior study's hierarchical BNN on the circles data.
- :mod:`~bnn_zoo.experiments.toy.comparison`: The toy prior study's comparison of prior pairs (``--all-priors``): PSIS-LOO ranking, table and figures.
- :mod:`~bnn_zoo.experiments.toy.moons`: ``python -m bnn_zoo.experiments.toy.moons``: the toy prior study's hierarchical BNN on the moons data.
- :mod:`~bnn_zoo.experiments.toy.priors`: The prior study on the 2-D toy data sets (moons, circles): a hierarchical BNN under each prior.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
