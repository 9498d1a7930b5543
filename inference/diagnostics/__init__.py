"""Did the fit work: the ELBO trace's convergence test, the mode check, PSIS and Pareto k.

- :mod:`~bnn_zoo.inference.diagnostics.convergence`: Did the optimiser stop? The test each fit makes of its own optimisation.
- :mod:`~bnn_zoo.inference.diagnostics.modecheck`: Did the Laplace approximation reach its mode? The test a Laplace fit makes of its own optimisation.
- :mod:`~bnn_zoo.inference.diagnostics.psis`: Pareto-smoothed importance sampling LOO for variational posteriors, as one JAX program.
- :mod:`~bnn_zoo.inference.diagnostics.qcheck`: Did VI work? q's Pareto k (``q_pareto_k``), and the posterior reweighted by it.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
