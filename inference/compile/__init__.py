"""A PyMC model to JAX: its graphs, its log density and outputs as JAX functions, minibatches, cost.

- :mod:`~bnn_zoo.inference.compile.graphs`: PyTensor graphs as JAX functions: the model's log terms, its data as inputs, and a cache.
- :mod:`~bnn_zoo.inference.compile.jax_fixes`: Fixes to pytensor's JAX backend, applied on import.
- :mod:`~bnn_zoo.inference.compile.jaxmodel`: A PyMC model as JAX functions: its log densities, its variables, and its forward samples.
- :mod:`~bnn_zoo.inference.compile.minibatch`: Models written with ``pm.Minibatch``, fitted with the engine's own minibatches.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
