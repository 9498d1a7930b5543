"""ADVI: the objective and its estimators, the functional core, the compiled engine, the optimisers,
q's start, checkpoints, the loop (``fit_advi``) and many fits at once (``fit_many``).

- :mod:`~bnn_zoo.inference.advi.batch`: Many fits of one model structure at once: one compiled program, ``jax.vmap`` over the fits.
- :mod:`~bnn_zoo.inference.advi.checkpoint`: Checkpoints of a fit: the state's leaves, its fingerprint and its history, as netCDF.
- :mod:`~bnn_zoo.inference.advi.core`: ADVI as a small functional core: ``init``, ``step`` and ``sample`` on a ``NamedTuple`` state.
- :mod:`~bnn_zoo.inference.advi.engine`: Runs the core's ADVI steps fast, in compiled JAX.
- :mod:`~bnn_zoo.inference.advi.estimators`: Gradient estimators of the expected log likelihood for mean-field q: per-example noise in dense layers.
- :mod:`~bnn_zoo.inference.alternatives.iterates`: Methods that follow one point through the parameter space: MAP (deep ensembles), SGLD, SWAG.
- :mod:`~bnn_zoo.inference.advi.loop`: ``fit``: ADVI for any PyMC model.
- :mod:`~bnn_zoo.inference.advi.noise`: Standard normal noise for the JAX engine: Threefry-2x32 in counter mode, written to vectorise.
- :mod:`~bnn_zoo.inference.advi.objective`: The ADVI objective: PyMC's ``KLqp`` ELBO, tempered by ``beta``, with its KL weighting.
- :mod:`~bnn_zoo.inference.advi.optim`: Optimizers for :func:`bnn_zoo.fit`: optax transformations, and the command line's shortcuts.
- :mod:`~bnn_zoo.inference.advi.prepare`: Everything a fit builds before its first step: the compiled model, q's initial state, the runner.
- :mod:`~bnn_zoo.inference.advi.starts`: Where q starts: the model's initial point with noise on its weights, or another fit's q.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
