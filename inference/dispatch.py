"""``fit``: the one entry to every method, by :data:`~bnn_zoo.inference.methods.METHODS`' registry.

:func:`fit` checks what every method shares (a PyMC model, the settings a
method takes), reads the method's value from the registry
(:func:`~bnn_zoo.inference.methods.value`) and hands the model to the stage
that fits it: :func:`~bnn_zoo.inference.laplace.fit_laplace`,
:func:`~bnn_zoo.inference.auto.fit_auto`, or ADVI
(:func:`~bnn_zoo.inference.advi.loop.fit_advi`: the three Gaussians and the
flow).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import optax
import pymc as pm

from bnn_zoo.cache import use_compiled_programs
from bnn_zoo.inference import defaults, methods
from bnn_zoo.inference.support import calls
from bnn_zoo.inference.advi.loop import fit_advi
from bnn_zoo.inference.auto import fit_auto
from bnn_zoo.inference.advi.checkpoint import Checkpoint
from bnn_zoo.inference.laplace import fit_laplace
from bnn_zoo.inference.advi.objective import ELBO
from bnn_zoo.inference.support.renamed import refuse_renamed
from bnn_zoo.inference.support.seeds import check_seed
from bnn_zoo.inference.posterior.prediction import describe_containers
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["SHAPE_ERRORS", "fit"]


#: What JAX says when a model's arrays' shapes do not broadcast or multiply: :func:`fit` says it in the model's words.
SHAPE_ERRORS = re.compile(r"incompatible shapes|contracting dimensions|shapes must be|shape mismatch")


@refuse_renamed
@calls.interruptible
def fit(
    model: pm.Model,
    *,
    method: str | methods.MeanField | methods.LowRank | methods.FullRank | methods.Flow | methods.Laplace
    | methods.Auto = "advi",
    steps: int = defaults.STEPS,
    optimizer: optax.GradientTransformation | None = None,
    objective: ELBO | None = None,
    batch_size: int | None = None,
    minibatch: Sequence[str] | None = None,
    init: FitResult | None = None,
    average: float | None = None,
    random_seed: int = 0,
    checkpoint: Checkpoint | None = None,
    progressbar: bool = True,
) -> FitResult:
    r"""Fit an approximation q to ``model``'s posterior: ADVI (three Gaussians, a flow), Laplace, or ``"auto"``.

    q is fitted over the model's unconstrained values (the space of
    PyMC's value variables), by maximising the ELBO with
    reparameterised gradients (PyMC's ``KLqp``; Kucukelbir et al. 2017):

    .. math::

        \max_q\; \mathbb{E}_q[\log p(D \mid z)] + \beta\,(\mathbb{E}_q[\log p(z)] + H[q]),
        \qquad z = \mu + L\varepsilon,\; \varepsilon \sim N(0, I),

    with the model and the whole optimisation compiled to JAX. The fit stops
    at the first non-finite ELBO estimate, can write checkpoints and resume
    from them, and tests its ELBO trace for convergence at the end. Every
    default comes from :mod:`bnn_zoo.inference.defaults`.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables of one float dtype,
        fitted in the dtype it was built in (build it inside
        :func:`bnn_zoo.precision` for float32).
    method : {"advi", "lowrank_advi", "fullrank_advi", "flow", "laplace", "auto"} or MeanField or LowRank or FullRank or Flow or Laplace or Auto, default "advi"
        Mean-field (diagonal), low-rank-plus-diagonal (rank ``sqrt(dim)``)
        or full-rank Gaussian q fitted by ADVI; a normalizing flow on a
        Gaussian fit (:mod:`~bnn_zoo.inference.families.flow`); the Laplace
        approximation (the mode by L-BFGS, then the curvature there;
        ``steps`` and ``random_seed`` only); or ``"auto"``: Laplace, a
        Gaussian, learned centring, a flow, stopping at the first q that
        passes its test (:mod:`~bnn_zoo.inference.auto`; ``steps``,
        ``random_seed`` and ``progressbar`` only). ``bnn_zoo.MeanField(...)``,
        ``LowRank(rank=...)``, ``FullRank(...)``, ``Flow(layers=...)``,
        ``Laplace(curvature=...)`` and ``Auto(budget=...)`` set each one
        (docs/user_guide/families.md); the three Gaussians' ``centring=True``
        is learned centring: each hierarchical location-scale variable fitted
        between its centred and non-centred forms
        (:mod:`~bnn_zoo.inference.families.centring`; ``config["centring"]``
        holds each ``lambda``; the result's model is the rewritten one).
        A full-rank fit without ``init`` first fits
        mean-field q for :data:`~bnn_zoo.inference.defaults.WARM_START` of the
        steps, then the full-rank q from it, with the path-derivative
        gradient and (default optimizer) Adam at
        :func:`~bnn_zoo.inference.defaults.fullrank_learning_rate` of the
        model's dimension.
    steps : int, default 20000
        Optimisation steps, at most ``MAX_STEPS`` (the total, when resuming).
    optimizer : optax.GradientTransformation, optional
        Any optax optimizer; learning-rate schedules are optax schedules
        (``optax.adam(optax.cosine_decay_schedule(0.01, steps))``; with a rate
        that decays to near zero, set ``average=0``). Default: Adam at a
        constant 0.01 (:func:`bnn_zoo.inference.advi.optim.default`).
    objective : ELBO, optional
        The objective as a value: ``bnn_zoo.ELBO(beta=..., kl_weighting=...,
        mc_samples=..., estimator=..., path_derivative=...)``. Default
        ``ELBO()``, the ELBO itself.
    batch_size : int, optional
        Minibatch size; ``None`` (default) uses the full data every step.
        Each epoch of ``N // batch_size`` steps walks a fresh random
        permutation of the rows (the remainder is skipped). The observed
        variables must carry ``total_size`` for the likelihood to stay at
        full-data scale. A model written with ``pm.Minibatch`` needs neither
        this nor ``minibatch``: it is fitted with its own batch size.
    minibatch : sequence of str, optional
        The ``pm.Data`` containers cut into minibatches, rows taken together;
        default every container of the model. Only with ``batch_size``.
    init : FitResult, optional
        Start at another fit's q: its means and marginal sds; a full-rank
        fit from a full-rank q (or a dense Laplace fit) takes its whole
        factor. A full-rank fit takes the path-derivative gradient unless
        the objective says otherwise. On a badly conditioned posterior, a
        Laplace fit that passed its test of the mode is the start to give
        (docs/user_guide/families.md); one that did not is refused. The
        model must have the same variables and shapes. A full-rank fit from
        a mean-field one is a warm start made by hand: ``config`` records it
        as ``fit``'s own (``warm_start``, ``warm_start_elbo_final``), and
        ``seconds`` counts the full-rank phase alone.
    average : float, optional
        Share of the final steps whose iterates are averaged into the result
        (Polyak-Ruppert), in [0, 1). Use 0 with a decaying schedule. Default
        :data:`~bnn_zoo.inference.defaults.AVERAGE` (0.5), and
        :data:`~bnn_zoo.inference.defaults.FLOW_AVERAGE` (0) for a flow: the
        mean of a network's weights is not a mean of its functions.
    random_seed : int, default 0
        Seeds the initial means, the Monte Carlo noise and the minibatches.
    checkpoint : Checkpoint, optional
        Where and how often to write the fit's state, and whether to resume
        from a saved one (``bnn_zoo.Checkpoint(path, every=500, resume=True)``).
    progressbar : bool, default True
        Show a progress bar with the running ELBO (mean of the last 100 steps).

    Returns
    -------
    FitResult
        q's parameters, the ELBO trace, the settings and the timings. Its
        :attr:`~FitResult.convergence` tests the ELBO trace.

    Raises
    ------
    ValueError
        For bad arguments, naming the argument; for a model without
        continuous value variables of one float dtype, or whose float data
        has another dtype than its variables.
    TypeError
        For a keyword ``fit`` took before (``seed``, ``beta``, ...), naming
        its spelling now.
    NonFiniteLossError
        When the ELBO becomes NaN or infinite; the message names the step.
    CheckpointError
        When the checkpoint to resume from is missing, unreadable, not of
        this fit (model, data or settings), or has more steps than ``steps``.

    Warns
    -----
    ConvergenceWarning
        When the fit did not pass its optimiser's test
        (:attr:`FitResult.convergence`: ADVI's ELBO still moving or fallen,
        the Laplace approximation's L-BFGS short of a curved mode); the
        message says what the test found and what to try.

    See Also
    --------
    bnn_zoo.fit_many : Many fits of one model structure at once, and restarts.
    bnn_zoo.sample : Posterior draws of the fitted q, as an ArviZ DataTree.
    bnn_zoo.predict : The posterior predictive on new data.

    Notes
    -----
    JAX's compiled programs are kept in bnn-zoo's user cache
    (``bnn_zoo.cache.use_compiled_programs``), so that the same script
    run again reads them back instead of compiling; ``BNN_ZOO_JAX_CACHE=off``
    turns that off.

    Examples
    --------
    >>> import numpy as np, pymc as pm, bnn_zoo
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=100)
    >>> with pm.Model() as model:
    ...     b = pm.Normal("b", 0, 10)
    ...     sigma = pm.HalfNormal("sigma", 1)
    ...     y = pm.Normal("y", b * x, sigma, observed=2 * x + rng.normal(size=100))
    >>> result = bnn_zoo.fit(model, steps=5_000, progressbar=False)
    >>> print(f"{result.mean['b']:.1f} +- {result.sd['b']:.1f}")
    2.1 +- 0.1
    >>> result.convergence.converged
    True

    Full rank, a tempered objective, a checkpoint and its resume:

    >>> full = bnn_zoo.fit(model, method="fullrank_advi", init=result, steps=2_000, progressbar=False)
    >>> cold = bnn_zoo.fit(model, objective=bnn_zoo.ELBO(beta=0.5), steps=2_000, progressbar=False)
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "fit.nc"
    ...     first = bnn_zoo.fit(model, steps=1_000, checkpoint=bnn_zoo.Checkpoint(path, every=500),
    ...                         progressbar=False)
    ...     more = bnn_zoo.fit(model, steps=3_000, checkpoint=bnn_zoo.Checkpoint(path, resume=True),
    ...                        progressbar=False)
    >>> more.config["resumed_at"], len(more.elbo)
    (1000, 3000)
    >>> bnn_zoo.fit(model, seed=1)
    Traceback (most recent call last):
    ...
    TypeError: fit() no longer takes seed=: use random_seed= (CHANGELOG.md, 'What moved')
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit takes a pymc.Model, got {type(model).__name__}")
    chosen = methods.value(method)
    random_seed = check_seed(random_seed)
    use_compiled_programs()
    if isinstance(chosen, (methods.Laplace, methods.Auto)):
        given = [name for name, value in (
            ("optimizer", optimizer), ("objective", objective), ("batch_size", batch_size),
            ("minibatch", minibatch), ("init", init), ("checkpoint", checkpoint), ("average", average))
            if value is not None]
        if given and chosen.name == "laplace":
            raise ValueError(f"method='laplace' takes steps and random_seed only, not {given[0]}=: "
                             "it finds the mode by L-BFGS on the full data")
        if given:
            raise ValueError(f"method='auto' takes steps, random_seed and progressbar only, not {given[0]}=: "
                             "it chooses each rung's settings (docs/user_guide/families.md); to set them, "
                             "fit the rung's method yourself")
    try:
        if isinstance(chosen, methods.Auto):
            return fit_auto(model, chosen, steps=steps, random_seed=random_seed, progressbar=progressbar)
        if isinstance(chosen, methods.Laplace):
            return fit_laplace(model, chosen, steps=steps, random_seed=random_seed)
        return fit_advi(model, method=method, steps=steps, optimizer=optimizer, objective=objective,
                        batch_size=batch_size, minibatch=minibatch, init=init, average=average,
                        random_seed=random_seed, checkpoint=checkpoint, progressbar=progressbar)
    except TypeError as err:  # JAX's, tracing the model: its arrays' shapes do not fit together
        if not SHAPE_ERRORS.search(str(err)):
            raise
        raise ValueError(f"the model's arrays do not fit together ({str(err).splitlines()[0]}): check its data "
                         f"containers' shapes against each other and against the observed values (after "
                         f"pm.set_data, every container of the rows): {describe_containers(model) or 'none'}") \
            from None
