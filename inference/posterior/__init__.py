"""A fitted q and what it gives: ``FitResult``, its draws, ``sample``, ``predict`` and q's ELBO.

- :mod:`~bnn_zoo.inference.posterior.draws`: Draws of q, and the model evaluated at any unconstrained draws, in compiled JAX.
- :mod:`~bnn_zoo.inference.posterior.log_prior`: The ``log_prior`` group of any DataTree's posterior draws, in one compiled JAX program.
- :mod:`~bnn_zoo.inference.posterior.prediction`: The posterior predictive of any model variable on new data, from any DataTree's posterior.
- :mod:`~bnn_zoo.inference.posterior.restarts`: q's ELBO by fresh draws: what compares fits of one model (restarts).
- :mod:`~bnn_zoo.inference.posterior.result`: What a fit returns, and what it raises or warns: :class:`FitResult`, :class:`NonFiniteLossError`,
- :mod:`~bnn_zoo.inference.posterior.sampling`: From a fitted q to an ArviZ DataTree of posterior draws.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
