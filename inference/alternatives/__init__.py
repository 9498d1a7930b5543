"""The comparisons: NUTS (plain, and handed a fitted q), deep ensembles, SGLD, SWAG, MC dropout,
and PyMC's own ADVI step.

- :mod:`~bnn_zoo.inference.alternatives.baselines`: The alternatives to ADVI on any PyMC model, each returning posterior draws as an ArviZ DataTree.
- :mod:`~bnn_zoo.inference.alternatives.dropout`: MC dropout (Gal and Ghahramani 2016) on the zoo's MLP architectures, in JAX and optax.
- :mod:`~bnn_zoo.inference.alternatives.handoff`: The hand-off from VI to NUTS: NUTS preconditioned by a fitted q, started from q's draws.
- :mod:`~bnn_zoo.inference.alternatives.reference`: The reference: PyMC's own ADVI step, for the tests and benchmarks that check the engine.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
