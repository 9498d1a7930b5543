"""The alternatives to ADVI on any PyMC model, each returning posterior draws as an ArviZ DataTree.

The same result contract as :func:`bnn_zoo.sample`: a DataTree whose
``posterior`` group holds every free variable (constrained; chains and
draws), so :func:`bnn_zoo.predict` and ArviZ take them alike. Each tree's
``attrs`` say how it was made (``method``, ``seconds`` and the settings).

- :func:`nuts`: ``pm.sample`` with NumPyro's NUTS, with its diagnostics.
- :func:`ensemble`: deep ensembles, MAP fits from other initial points
  (:func:`map_point` is one member).
- :func:`sgld`: stochastic-gradient Langevin dynamics, constant or cyclical.
- :func:`swag`: SWAG's Gaussian from SGD iterates after a MAP fit.

All but NUTS run on the engine (:mod:`bnn_zoo.inference.advi.engine`), on the
compiled log density and minibatches of ADVI (:mod:`bnn_zoo.inference.alternatives.iterates`).
MC dropout needs another network, not a PyMC model: :mod:`bnn_zoo.inference.alternatives.dropout`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import partial

import jax
import numpy as np
import optax
import pymc as pm
import pytensor
from xarray import DataTree

from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.alternatives import iterates
from bnn_zoo.inference.compile.minibatch import minibatch_plan
from bnn_zoo.inference.advi.prepare import model_dtype
from bnn_zoo.inference.advi.starts import initial_mean
from bnn_zoo.inference.advi.engine import Runner, compile_loops
from bnn_zoo.inference.compile.jaxmodel import Layout, ModelFunction, compile_model
from bnn_zoo.inference.posterior.sampling import draws_posterior
from bnn_zoo.inference.support.renamed import refuse_renamed
from bnn_zoo.inference.support.seeds import check_seed

__all__ = ["ensemble", "map_point", "pymc_nuts", "sgld", "swag"]

@dataclass
class _Problem:
    """A model's compiled log density, its data on the device and how minibatches cut it."""

    model: pm.Model
    density: ModelFunction
    point: dict
    data: tuple
    sliced: tuple
    n: int  # rows of the likelihood (the training set's size)
    batch_size: int | None
    dtype: str

    @classmethod
    def of(cls, model: pm.Model, batch_size: int | None) -> "_Problem":
        dtype = model_dtype(model)
        sliced, n = minibatch_plan(model, None, batch_size)
        with pytensor.config.change_flags(floatX=dtype):
            point = model.initial_point()
            density = compile_model(model, Layout.of(model, point))
        rows = n or max(len(np.atleast_1d(v.get_value())) for v in model.data_vars)
        return cls(model, density, point, tuple(jax.device_put(v.get_value()) for v in model.data_vars),
                   sliced, rows, batch_size, dtype)

    def runner(self, key: tuple, update, seed: int) -> Runner:
        """The engine's runner of ``update`` steps, compiled once per model structure and ``key``."""
        key = ("iterates", key, self.sliced, self.batch_size,
               tuple((d.shape, str(d.dtype)) for d in self.data))
        if key not in self.density.jitted:
            self.density.jitted[key] = compile_loops(update, sliced=self.sliced, n=self.n,
                                                     batch_size=self.batch_size, dtype=self.dtype)
        return Runner(self.density.jitted[key], self.data, seed)

    def start(self, seed: int) -> np.ndarray:
        """ADVI's initial mean: the model's initial point with N(0, 1/fan_in) weights."""
        return initial_mean(self.density.layout, self.point, seed).astype(self.dtype)

    def tree(self, z: np.ndarray, attrs: dict) -> DataTree:
        """The posterior DataTree of unconstrained draws ``z``, with ``attrs`` (``None`` ones left out)."""
        tree = draws_posterior(self.model, self.density, z)
        tree.attrs.update({k: v for k, v in attrs.items() if v is not None})
        return tree


def _check(**values) -> None:
    for name, (value, low) in values.items():
        if not (isinstance(value, (int, np.integer)) and value >= low):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _map(problem: _Problem, *, seed: int, steps: int, lr: float) -> np.ndarray:
    """One MAP fit: Adam on ``-log p / N``, its rate decaying by a cosine to 1% of ``lr``."""
    optimizer = optim.make("adam", lr, steps, schedule_kind="cosine")
    update = partial(iterates.optimize_step, density=problem.density, optimizer=optimizer, n=problem.n)
    runner = problem.runner(("map", optimizer.description), update, seed)
    state, trace = runner.advance(iterates.init(problem.start(seed), optimizer), 0, steps)
    if not np.isfinite(trace).all():
        raise FloatingPointError(f"the MAP fit from seed {seed} diverged (log p not finite); lower lr")
    return np.asarray(state.z)


@refuse_renamed
def map_point(model: pm.Model, *, steps: int = 10_000, lr: float = 0.01, batch_size: int | None = None,
              random_seed: int = 0) -> DataTree:
    """The MAP point of ``model`` in its unconstrained space, as a posterior of one draw.

    Adam on ``-log p(z) / N`` from ADVI's initial mean, the rate decaying by
    a cosine from ``lr`` to 1% of it over ``steps``. The mode of the
    unconstrained density (Jacobians included), which for a hierarchical
    scale is not the mode of the scale.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    steps : int, default 10000
        Adam steps.
    lr : float, default 0.01
        The initial learning rate.
    batch_size : int, optional
        Minibatch rows; default all.
    random_seed : int, default 0
        Seeds the initial point (:func:`~bnn_zoo.inference.advi.starts.initial_mean`)
        and the minibatches.

    Returns
    -------
    xarray.DataTree
        ``posterior`` with one chain of one draw; ``attrs``: ``method="map"``,
        the settings and ``seconds``.

    Raises
    ------
    ValueError
        For ``steps`` below 1 or a negative ``random_seed``.
    FloatingPointError
        If ``log p`` becomes non-finite (lower ``lr``).
    """
    _check(steps=(steps, 1))
    check_seed(random_seed)
    problem, t0 = _Problem.of(model, batch_size), time.perf_counter()
    z = _map(problem, seed=random_seed, steps=steps, lr=lr)
    return problem.tree(z[None], dict(method="map", steps=steps, lr=lr, batch_size=batch_size,
                                      seed=random_seed, seconds=time.perf_counter() - t0))


@refuse_renamed
def ensemble(model: pm.Model, members: int = 5, *, steps: int = 10_000, lr: float = 0.01,
             batch_size: int | None = None, random_seed: int = 0) -> DataTree:
    """A deep ensemble (Lakshminarayanan et al. 2017): ``members`` MAP fits from other initial points.

    Member ``k`` is :func:`map_point` from seed ``random_seed + k``; the ensemble's
    predictive is the members' equal mixture. Lakshminarayanan et al. also
    train with adversarial examples and, for regression, a predicted
    variance; here the members are MAP fits of the model itself.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    members : int, default 5
        The number of MAP fits.
    steps : int, default 10000
        Adam steps of each.
    lr : float, default 0.01
        The initial learning rate.
    batch_size : int, optional
        Minibatch rows; default all.
    random_seed : int, default 0
        The first member's seed.

    Returns
    -------
    xarray.DataTree
        ``posterior`` with the members as ``members`` draws of one chain;
        ``attrs``: ``method="ensemble"``, the settings and ``seconds``.

    Raises
    ------
    ValueError
        For ``members`` or ``steps`` below 1 or a negative ``random_seed``.
    FloatingPointError
        If a member's fit diverges (lower ``lr``).
    """
    _check(members=(members, 1), steps=(steps, 1))
    check_seed(random_seed)
    problem, t0 = _Problem.of(model, batch_size), time.perf_counter()
    z = np.stack([_map(problem, seed=random_seed + k, steps=steps, lr=lr) for k in range(members)])
    return problem.tree(z, dict(method="ensemble", members=members, steps=steps, lr=lr, batch_size=batch_size,
                                seed=random_seed, seconds=time.perf_counter() - t0))


@refuse_renamed
def sgld(model: pm.Model, *, steps: int = 20_000, lr: float = 1e-3, burn_in: int | None = None,
         thin: int = 20, cycles: int = 0, explore: float = 0.5, batch_size: int | None = None,
         chains: int = 1, init_steps: int = 0, random_seed: int = 0) -> DataTree:
    """Stochastic-gradient Langevin dynamics (Welling and Teh 2011), or its cyclical variant.

    Each step moves by ``(h / 2) grad log p(z) + sqrt(h) xi`` with ``h = lr / N``
    and ``log p`` estimated on a minibatch at full-data scale
    (:func:`~bnn_zoo.inference.alternatives.iterates.langevin_step`).

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables; with minibatches its
        observed variables need ``total_size``.
    steps : int, default 20000
        Langevin steps per chain.
    lr : float, default 0.001
        Step size in the units of SGD on the mean loss: each step moves by
        ``(lr / 2N) grad log p + sqrt(lr / N) xi``. With ``cycles``, the
        largest step of each cycle.
    burn_in : int, optional
        Steps discarded at the start (default: half of ``steps``; with
        ``cycles``, 0, since each cycle's exploration stage does that).
    thin : int, default 20
        Keep every ``thin``-th point after the burn-in.
    cycles : int, default 0
        0: a constant step. ``M > 0``: Zhang et al.'s (2020) cyclical SGLD,
        ``M`` cosine cycles; the first ``explore`` share of each cycle takes
        SGD steps, the rest Langevin steps, whose points are kept.
    explore : float, default 0.5
        With ``cycles``: the share of each cycle spent exploring (SGD steps,
        no draws kept), in [0, 1).
    batch_size : int, optional
        Minibatch rows (default: all, full-batch Langevin).
    chains : int, default 1
        Independent chains, from seeds ``random_seed, random_seed + 1, ...`` (ADVI's
        initial means).
    init_steps : int, default 0
        MAP steps before Langevin dynamics starts (:func:`map_point`, at
        rate 0.01), to start in a mode rather than at the random initial
        point.
    random_seed : int, default 0
        The first chain's seed (initial point, noise and minibatches).

    Returns
    -------
    xarray.DataTree
        ``posterior`` with ``chains`` chains of the kept points; ``attrs``:
        ``method`` (``"sgld"`` or ``"csgld"``), the settings and ``seconds``.

    Raises
    ------
    ValueError
        For settings out of range, or ones that keep no draws.
    FloatingPointError
        If a chain diverges (lower ``lr``).
    """
    _check(steps=(steps, 1), thin=(thin, 1), cycles=(cycles, 0), chains=(chains, 1),
           init_steps=(init_steps, 0))
    check_seed(random_seed)
    if not 0 <= explore < 1:
        raise ValueError(f"explore must be in [0, 1), got {explore!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    burn_in = (0 if cycles else steps // 2) if burn_in is None else burn_in
    keep = iterates.sampling_steps(steps, burn_in=burn_in, thin=thin, cycles=cycles, explore=explore)
    if len(keep) < 1:
        raise ValueError(f"no draws: {steps} steps, burn-in {burn_in}, thin {thin}")
    problem, t0 = _Problem.of(model, batch_size), time.perf_counter()
    schedule = (iterates.cyclical_schedule(lr, steps, cycles, explore) if cycles
                else iterates.constant_schedule(lr))
    update = partial(iterates.langevin_step, density=problem.density, schedule=schedule, n=problem.n)
    draws = []
    for c in range(chains):
        z0 = (_map(problem, seed=random_seed + c, steps=init_steps, lr=0.01) if init_steps
              else problem.start(random_seed + c))
        runner = problem.runner(("sgld", lr, steps, cycles, explore), update, random_seed + c)
        state, at, chain = iterates.init(z0), 0, []
        for t in keep:
            state, trace = runner.advance(state, at, int(t) - at)
            if not np.isfinite(trace).all():
                raise FloatingPointError(f"SGLD diverged in chain {c} before step {t}; lower lr")
            at = int(t)
            chain.append(np.asarray(state.z))
        draws.append(np.stack(chain))
    return problem.tree(np.stack(draws), dict(
        method="csgld" if cycles else "sgld", steps=steps, lr=lr, burn_in=burn_in, thin=thin, cycles=cycles,
        explore=explore if cycles else None, batch_size=batch_size, init_steps=init_steps, seed=random_seed,
        seconds=time.perf_counter() - t0))


@refuse_renamed
def swag(model: pm.Model, *, map_steps: int = 10_000, map_lr: float = 0.01, steps: int = 5_000,
         lr: float = 0.01, collect_every: int = 50, rank: int = 20, draws: int = 100,
         batch_size: int | None = None, random_seed: int = 0) -> DataTree:
    """SWAG (Maddox et al. 2019): a Gaussian fitted to SGD iterates around a MAP point.

    A MAP fit (:func:`map_point`, ``map_steps`` at ``map_lr``), then
    ``steps`` of SGD at the constant rate ``lr`` (on the mean loss) with
    minibatches, collecting every ``collect_every``-th iterate (once an
    epoch in the paper); the iterates' mean, diagonal variance and last
    ``rank`` deviations make the Gaussian, of which ``draws`` are returned
    (:func:`~bnn_zoo.inference.alternatives.iterates.swag_draws`). Without minibatches the
    iterates have no noise and the Gaussian collapses to a point, so use
    ``batch_size``.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model with continuous free variables.
    map_steps : int, default 10000
        Steps of the MAP fit.
    map_lr : float, default 0.01
        The MAP fit's initial learning rate.
    steps : int, default 5000
        SGD steps after the MAP fit.
    lr : float, default 0.01
        SGD's constant learning rate.
    collect_every : int, default 50
        Collect every ``collect_every``-th iterate; ``steps // collect_every``
        must be at least 2.
    rank : int, default 20
        Deviations kept for the low-rank part of the covariance, at least 2.
    draws : int, default 100
        Draws of the Gaussian returned.
    batch_size : int, optional
        Minibatch rows; default all (see above).
    random_seed : int, default 0
        Seeds the initial point, the minibatches and the draws.

    Returns
    -------
    xarray.DataTree
        ``posterior`` with ``draws`` draws of one chain; ``attrs``:
        ``method="swag"``, the settings and ``seconds``.

    Raises
    ------
    ValueError
        For settings out of range.
    FloatingPointError
        If the MAP fit or SGD diverges (lower the rate).
    """
    _check(map_steps=(map_steps, 1), steps=(steps, 2), collect_every=(collect_every, 1), rank=(rank, 2),
           draws=(draws, 1))
    check_seed(random_seed)
    if steps // collect_every < 2:
        raise ValueError(f"SWAG collects every {collect_every} steps: {steps} steps give fewer than 2")
    problem, t0 = _Problem.of(model, batch_size), time.perf_counter()
    z = _map(problem, seed=random_seed, steps=map_steps, lr=map_lr)
    optimizer = optim.described(optax.sgd(lr), f"sgd({lr:g})")
    update = partial(iterates.optimize_step, density=problem.density, optimizer=optimizer, n=problem.n)
    runner = problem.runner(("swag", optimizer.description), update, random_seed)
    state, moments = iterates.init(z, optimizer), iterates.swag_init(len(z))
    for at in range(0, steps - collect_every + 1, collect_every):
        state, trace = runner.advance(state, at, collect_every)
        if not np.isfinite(trace).all():
            raise FloatingPointError(f"SWAG's SGD diverged before step {at + collect_every}; lower lr")
        moments = iterates.swag_collect(moments, np.asarray(state.z), rank)
    z = iterates.swag_draws(moments, draws, random_seed).astype(problem.dtype)
    return problem.tree(z, dict(method="swag", map_steps=map_steps, map_lr=map_lr, steps=steps, lr=lr,
                                collect_every=collect_every, rank=rank, batch_size=batch_size, seed=random_seed,
                                seconds=time.perf_counter() - t0))


@refuse_renamed
def pymc_nuts(model: pm.Model, *, draws: int = 1000, tune: int = 1000, chains: int = 4, target_accept: float = 0.9,
         random_seed: int = 0, progressbar: bool = False) -> DataTree:
    """NUTS by ``pm.sample`` with NumPyro's sampler, chains one after another.

    The reference for small nets. Its ``sample_stats`` (divergences, tree
    depth) are kept; ``attrs`` add ``divergences`` and ``seconds``. A BNN's
    chains find different modes (the hidden units' permutations among
    them), so judge convergence on predictions, not on weights: the r-hat
    of the predicted probabilities, as ``bnn-zoo alternatives`` reports it.
    The process's ``XLA_FLAGS``, which ``pymc.sampling.jax`` rewrites, are
    restored afterwards.

    Parameters
    ----------
    model : pymc.Model
        Any PyMC model NUTS can sample.
    draws : int, default 1000
        Draws per chain after tuning.
    tune : int, default 1000
        Tuning steps per chain.
    chains : int, default 4
        Chains, run sequentially.
    target_accept : float, default 0.9
        NUTS's target acceptance rate.
    random_seed : int, default 0
        ``pm.sample``'s ``random_seed``.
    progressbar : bool, default False
        Show ``pm.sample``'s progress bar.

    Returns
    -------
    xarray.DataTree
        ``posterior`` and ``sample_stats``; ``attrs``: ``method="nuts"``,
        the settings, ``divergences`` and ``seconds``.

    Raises
    ------
    ValueError
        For ``draws`` or ``chains`` below 1, or a negative ``tune`` or ``random_seed``.
    """
    _check(draws=(draws, 1), tune=(tune, 0), chains=(chains, 1))
    check_seed(random_seed)
    flags = os.environ.get("XLA_FLAGS")
    t0 = time.perf_counter()
    try:
        with model:
            idata = pm.sample(draws=draws, tune=tune, chains=chains, target_accept=target_accept,
                              nuts_sampler="numpyro", random_seed=random_seed, progressbar=progressbar,
                              nuts={"chain_method": "sequential"},
                              idata_kwargs={"log_likelihood": False})
    finally:  # pymc.sampling.jax rewrites XLA_FLAGS (100 host devices) for every later process
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    stats = idata["sample_stats"]
    tree = DataTree.from_dict({"posterior": idata["posterior"].to_dataset(),
                               "sample_stats": stats.to_dataset()})
    tree.attrs.update(method="nuts", draws=draws, tune=tune, chains=chains, target_accept=target_accept,
                      seed=random_seed, divergences=int(stats["diverging"].values.sum()),
                      seconds=time.perf_counter() - t0)
    return tree
