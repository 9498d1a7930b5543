"""ADVI with the whole optimisation loop compiled to JAX.

The PyMC model's log density is compiled once (PyMC -> pytensor -> JAX) into
two functions of the unconstrained values: the log prior (Jacobians
included) and the minibatch log likelihood (scaled to the full data set by
the observed variables' ``total_size``). Mean-field or full-rank ADVI then
runs in JAX with an optax optimizer: many steps per call inside one
``lax.fori_loop``, minibatches gathered on the device from data that is put
there once, and parameters and optimizer state donated to each call, so
they are updated in place instead of copied.

The objective is PyMC's ``KLqp``: ``E_q[log p(D|z)] + beta * (E_q[log p(z)]
+ H[q])``, with one reparameterised draw of ``z`` per Monte Carlo sample.
The entropy ``H[q]`` is computed exactly; its gradient equals the gradient of
PyMC's Monte Carlo ``-log q(z)`` (the two differ only by a term that does not
depend on the variational parameters), so the optimisation is the same and
the reported ELBO is less noisy. As in PyMC, the loss is divided by the
minibatch scaling ``N / batch_size`` before the gradient is taken; the ELBO
trace is reported at the full-data scale.

Minibatches are drawn without replacement: each epoch of
``N // batch_size`` steps walks a fresh random permutation of the data
(the remainder is skipped). The noise of step ``t`` and the permutation of
epoch ``e`` are derived from ``(seed, t)`` and ``(seed, e)``, so a fit
resumed from a checkpoint continues exactly where it stopped.

The KL part may be re-weighted per minibatch (``kl_weighting="blundell"``,
Blundell et al. 2015): see :func:`kl_weights`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pymc as pm
import pytensor.tensor as pt
from pymc.sampling.jax import _replace_shared_variables
from pytensor.compile.mode import JAX
from pytensor.graph import FunctionGraph
from pytensor.graph.basic import equal_computations
from pytensor.graph.replace import graph_replace
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.tensor.math import variadic_add

from inference import jax_fixes  # noqa: F401  (float32 stays float32)
from inference import noise

OPTIMIZERS = {
    "adam": optax.adam,
    "adamax": optax.adamax,
    "rmsprop": lambda learning_rate: optax.rmsprop(learning_rate, decay=0.9, eps=1e-6),
    "sgd": optax.sgd,
    "momentum": lambda learning_rate: optax.sgd(learning_rate, momentum=0.9),
}

CHUNK = 100  # steps per call of the compiled loop
LOOP_BELOW_FLOPS = 1e7  # steps cheaper than this run in the compiled loop (see JaxFit)


@dataclass
class Layout:
    """Where each value variable sits in q's flat vector: ``(name, slice, shape, dtype)`` each."""

    slots: list

    @classmethod
    def of(cls, model: pm.Model, ordering) -> "Layout":
        """From a PyMC approximation group's ``ordering``, in ``model.value_vars`` order."""
        return cls([(v.name, ordering[v.name][1], tuple(ordering[v.name][2]), v.dtype)
                    for v in model.value_vars])

    @property
    def dim(self) -> int:
        return sum(int(np.prod(shape)) for _, _, shape, _ in self.slots)

    def unflatten(self, z) -> list:
        """The flat vector ``z`` as one array per value variable (see :func:`_split`)."""
        cuts = tuple(slc.stop for _, slc, _, _ in self.slots[:-1])
        return [part.reshape(shape).astype(dtype)
                for part, (_, _, shape, dtype) in zip(_split(cuts, z), self.slots)]


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _split(cuts: tuple, z) -> list:
    """``jnp.split(z, cuts)``, whose gradient concatenates the pieces' gradients as plain copies.

    ``jnp.split`` rather than slices: its gradient is one concatenation, where
    the slices' was a padded full-length vector per variable (about 1 ms of a
    784-400-400-10 MLP's step). Left to itself, XLA fuses that concatenation
    with everything that makes the gradients (the draw, the prior's
    gradient, the likelihood's), into one loop that finds each element's
    variable and 2-D position per element: 1.4-2.2 ms of the MLP's step
    (profiled), against ~0.1 ms for the copy into the flat vector behind
    optimisation barriers, each variable's gradient made by its own
    vectorised loop.
    """
    return jnp.split(z, cuts)


def _split_fwd(cuts, z):
    return jnp.split(z, cuts), None


def _split_bwd(cuts, _, grads):
    pieces = jax.lax.optimization_barrier(list(grads))
    return (jax.lax.optimization_barrier(jnp.concatenate(pieces)),)


_split.defvjp(_split_fwd, _split_bwd)


@dataclass(eq=False)
class ModelFunction:
    """A model's log densities and variables as one JAX function, built from one pytensor graph.

    ``fn(values, *data) -> [log_prior, log_lik, *variables]``: ``values`` is
    a list of arrays, one per value variable in ``layout`` order (the
    unconstrained space; ``log_prior`` includes the Jacobians); ``data`` one
    array per container of ``model.data_vars``, of any length; ``log_lik``
    is scaled to the full data by the observed variables' ``total_size``;
    ``variables`` are the model's free random variables (constrained) and
    deterministics, named by ``names``. The fit and the posterior's draws
    and predictions all trace this one function, so a model's graph is
    built and rewritten once; JAX drops the outputs a caller does not use.

    Models of the same structure share one instance (:func:`compile_model`),
    and with it ``jitted``: the jitted functions built on it (the fit's
    loop, the posterior's evaluators), so JAX traces them once.
    """

    fn: Callable
    layout: Layout
    names: tuple[str, ...]
    jitted: dict = field(default_factory=dict, repr=False)

    def log_density(self, values, *data):
        """``(log_prior, log_lik)``."""
        out = self.fn(values, *data)
        return out[0], out[1]

    def select(self, outputs: tuple[str, ...]) -> Callable:
        """``f(values, *data) -> list``: the named ``outputs``; ``"logp"`` is the joint log density."""
        unknown = [name for name in outputs if name != "logp" and name not in self.names]
        if unknown:
            raise ValueError(f"model has no variable {', '.join(map(repr, unknown))}")
        index = {name: 2 + i for i, name in enumerate(self.names)}

        def f(values, *data):
            out = self.fn(values, *data)
            return [out[0] + out[1] if name == "logp" else out[index[name]] for name in outputs]

        return f


def jaxify(inputs: list, outputs: list) -> Callable:
    """A JAX function of ``inputs`` computing ``outputs`` (a pytensor graph), rewritten for JAX.

    Like ``pymc.sampling.jax.get_jaxified_graph``, plus PyMC's
    ``local_remove_check_parameter`` rewrite (what ``pm.Model(check_bounds=False)``
    does): the parameter checks of every log density go. They cannot fail
    here, since q lives in the unconstrained space where every value is in
    its variable's support. ``outputs`` may hold no shared variables other
    than ``inputs`` (:func:`_graph` turns them into constants).
    """
    fgraph = FunctionGraph(inputs=inputs, outputs=outputs, clone=True)
    JAX.including("local_remove_check_parameter").optimizer.rewrite(fgraph)
    return jax_funcify(fgraph)


def _graph(model: pm.Model, outputs: list) -> tuple[list, list]:
    """``(inputs, outputs)``: ``outputs`` as a graph of the value variables and data placeholders.

    The data containers are replaced by placeholders of any length; random
    variables by their values (free ones transformed back); other shared
    variables (the lengths of the model's dims) by constants.
    """
    containers = list(model.data_vars)
    batch = [pt.tensor(name=f"{c.name}_batch", dtype=c.dtype, shape=(None, *c.type.shape[1:]))
             for c in containers]
    outputs = graph_replace(model.replace_rvs_by_values(outputs), dict(zip(containers, batch)),
                            strict=False)
    return [*model.value_vars, *batch], _replace_shared_variables(outputs)


def model_function(model: pm.Model, outputs: list) -> Callable:
    """``outputs`` of ``model`` as a JAX function ``f(values, *data) -> list``.

    ``values``: one array per value variable (``model.value_vars`` order, the
    unconstrained space); ``data``: one array per container of
    ``model.data_vars``, of any length (they replace the containers, so a
    minibatch or new inputs can be passed). Random variables in ``outputs``
    are replaced by their values (free ones transformed back).
    """
    inputs, outputs = _graph(model, outputs)
    return _as_values_and_data(jaxify(inputs, outputs), len(model.value_vars))


def _as_values_and_data(fn: Callable, n: int) -> Callable:
    return lambda values, *data: fn(*values[:n], *data)


MEMO_SIZE = 8  # models kept by compile_model for reuse
_compiled: OrderedDict = OrderedDict()  # id -> (inputs, outputs, ModelFunction), newest last


def compile_model(model: pm.Model, ordering) -> ModelFunction:
    """``model`` as a :class:`ModelFunction`, its data containers becoming inputs.

    ``ordering`` is a PyMC approximation group's ordering (name -> slice and
    shape of each value variable in the flat vector of q). The log densities
    of all variables come from one ``model.logp`` call: the free variables'
    terms make the log prior, the rest (observed variables, potentials) the
    log likelihood.

    The :data:`MEMO_SIZE` most recent models are kept: a model whose graph
    computes the same thing as one of them (pytensor's
    ``equal_computations``: the same operations and constants, only the data
    differing) gets that model's instance, without a second rewrite or
    trace. The same builder with the same settings on another data set of
    the same size is such a model.
    """
    terms = model.logp(jacobian=True, sum=False)
    n_free = len(model.free_RVs)
    log_prior = variadic_add(*(t.sum() for t in terms[:n_free]))
    log_lik = variadic_add(*(t.sum() for t in terms[n_free:]))
    named = [*model.free_RVs, *model.deterministics]
    inputs, outputs = _graph(model, [log_prior, log_lik, *named])
    layout, names = Layout.of(model, ordering), tuple(v.name for v in named)
    for key, (ins, outs, known) in reversed(_compiled.items()):
        if (known.layout == layout and known.names == names and len(ins) == len(inputs)
                and equal_computations(outputs, outs, inputs, ins)):
            _compiled.move_to_end(key)
            return known
    built = ModelFunction(fn=_as_values_and_data(jaxify(inputs, outputs), len(model.value_vars)),
                          layout=layout, names=names)
    _compiled[id(built)] = (inputs, outputs, built)
    while len(_compiled) > MEMO_SIZE:
        _compiled.popitem(last=False)
    return built


# --- the variational families ------------------------------------------------
# Parameters use PyMC's own layout, so a fitted state is written straight back
# into a pmvi.MeanField / FullRank: std = softplus(rho); L packed row-major
# lower-triangular with softplus on its diagonal.


@jax.custom_jvp
def softplus(x):
    """``log(1 + exp(x))``, about 3x cheaper than ``jax.nn.softplus`` with its gradient on CPU.

    XLA's CPU ``log1p`` is slow (1.1 ms for the 478,410 scales of the MLP
    784-400-400-10, a tenth of a whole ADVI step); here ``log1p(u)`` is
    ``log(1 + u) * u / ((1 + u) - 1)`` (exact to a few ulps; Goldberg 1991),
    and the gradient ``sigmoid(x)`` reuses ``exp(-|x|)``.
    """
    return _softplus_and_sigmoid(x)[0]


def _softplus_and_sigmoid(x):
    e = jnp.exp(-jnp.abs(x))  # in (0, 1]
    one_e = 1.0 + e
    log1p_e = jnp.where(one_e == 1.0, e, jnp.log(one_e) * e / (one_e - 1.0))
    return jnp.maximum(x, 0.0) + log1p_e, jnp.where(x >= 0, 1.0, e) / one_e


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    value, slope = _softplus_and_sigmoid(primals[0])
    return value, slope * tangents[0]


def _mean_field(params, eps):
    sd = softplus(params["rho"])
    # The draw is made once, behind a barrier: otherwise XLA recomputes it inside
    # each of its consumers, and copies the donated ``mu`` (0.5 ms of the MLP's
    # step, on one thread) so that the in-place update cannot overwrite it too early.
    return jax.lax.optimization_barrier(params["mu"] + sd * eps), jnp.sum(jnp.log(sd))


def _full_rank(params, eps):
    d = params["mu"].shape[0]
    rows, cols = np.tril_indices(d)
    L = jnp.zeros((d, d), params["mu"].dtype).at[rows, cols].set(params["L_tril"])
    diag = softplus(jnp.diagonal(L))
    L = L.at[np.arange(d), np.arange(d)].set(diag)
    return params["mu"] + L @ eps, jnp.sum(jnp.log(diag))


FAMILIES = {"advi": _mean_field, "fullrank_advi": _full_rank}


@dataclass
class Problem:
    """What one fit optimises: the density, the family, the data and the settings."""

    density: ModelFunction
    method: str
    optimizer: optax.GradientTransformation
    data: tuple  # device arrays of model.data_vars, full data set
    sliced: tuple[bool, ...]  # which of them are cut into minibatches
    batch_size: int | None
    beta: float
    mc_samples: int
    dtype: str  # floatX of the fit
    kl_weighting: str = "constant"  # or "blundell" (see kl_weights)
    lr_decay: tuple[tuple[int, float], ...] = ()  # (step, factor) pairs (see lr_factor)

    @property
    def n(self) -> int:
        """Rows of the minibatched containers (0 without minibatches)."""
        return int(self.data[self.sliced.index(True)].shape[0]) if any(self.sliced) else 0

    @property
    def scale(self) -> float:
        """PyMC's minibatch scaling ``N / batch_size`` (1 with the full data)."""
        return self.n / self.batch_size if self.batch_size else 1.0

    @property
    def dim(self) -> int:
        return self.density.layout.dim

    def elbo(self, params, words, step, batch, kl_scale=1.0):
        """(loss for the gradient, ELBO estimate at full-data scale) of one step.

        The loss weights the KL part (log prior and entropy) by an extra
        ``kl_scale`` (Blundell's re-weighting); the ELBO estimate does not.
        """
        d, total_lik, total_prior = self.dim, 0.0, 0.0
        for s in range(self.mc_samples):
            # The barrier keeps XLA from fusing the generator into every consumer of
            # the draw (each variable's slice, the gradient): on a toy BNN that made
            # a step 4x slower.
            eps = jax.lax.optimization_barrier(noise.normal(words, step, s * d, (d,), self.dtype))
            z, log_det = FAMILIES[self.method](params, eps)
            log_prior, log_lik = self.density.log_density(self.density.layout.unflatten(z), *batch)
            total_lik, total_prior = total_lik + log_lik, total_prior + log_prior
        entropy = log_det + 0.5 * self.dim * (1.0 + np.log(2 * np.pi))
        log_lik, log_prior = total_lik / self.mc_samples, total_prior / self.mc_samples
        kl_part = self.beta * (log_prior + entropy)
        elbo = log_lik + kl_part
        return -(log_lik + kl_scale * kl_part) / self.scale, elbo


KL_WEIGHTINGS = ("constant", "blundell")


def kl_weights(kind: str, per_epoch: int, dtype="float64"):
    """``kl_scale(position)``: the extra weight of the KL part at a minibatch's position in its epoch.

    PyMC's minibatch loss gives the KL part ``1 / M`` of its weight in each of
    the ``M`` minibatches of an epoch. ``"constant"`` keeps that (scale 1).
    ``"blundell"`` gives minibatch ``i = position + 1`` the weight
    ``pi_i = 2^(M-i) / (2^M - 1)`` instead (Blundell et al. 2015, eq. 9): most
    of the KL in the first minibatches, the data later. The weights still sum
    to one over an epoch, so an epoch's expected objective is unchanged.
    """
    if kind not in KL_WEIGHTINGS:
        raise ValueError(f"unknown kl_weighting {kind!r}; valid: {', '.join(KL_WEIGHTINGS)}")
    if kind == "constant":
        return lambda position: jnp.asarray(1.0, dtype)
    # pi_i * M, written with 2^-i so that nothing overflows for large M.
    norm = per_epoch / -np.expm1(-per_epoch * np.log(2.0))

    def scale(position):
        return jnp.asarray(norm, dtype) * jnp.exp2(-(position + 1).astype(dtype))

    return scale


def lr_factor(lr_decay, dtype="float64"):
    """``factor(t)``: the learning rate of step ``t`` over the initial one, or None if constant.

    ``lr_decay`` holds ``(step, factor)`` pairs, like optax's
    ``piecewise_constant_schedule``: from step ``step`` (0-based) on, the rate
    is multiplied by ``factor``. Every optimizer of :data:`OPTIMIZERS` ends in
    its learning-rate scaling, so scaling its updates by ``factor(t)`` is
    that optimizer with the rate ``learning_rate * factor(t)``, and its state
    does not change (a checkpoint of a constant-rate fit can go on decayed).
    """
    if not lr_decay:
        return None
    bounds = np.array([b for b, _ in lr_decay])
    factors = np.array([f for _, f in lr_decay])

    def factor(t):
        return jnp.prod(jnp.where(t >= bounds, factors, 1.0)).astype(dtype)

    return factor


def _permutation(key, epoch, n):
    return jax.random.permutation(jax.random.fold_in(key, epoch), n)


def make_runner(problem: Problem, chunk: int = CHUNK):
    """Two jitted ways to run the optimisation, both donating ``params`` and ``opt_state``.

    ``loop(params, opt_state, key, start, n, data) -> (params, opt_state, elbo[chunk])``
    runs steps ``start .. start + n - 1`` (``n <= chunk``) inside one
    ``lax.fori_loop``; ``elbo`` holds their ELBO estimates, NaN past ``n``.
    ``step(params, opt_state, key, t, perm, data) -> (params, opt_state, perm, elbo)``
    runs step ``t`` alone; ``perm`` is the current epoch's permutation
    (:func:`epoch_permutation`). ``data`` is ``problem.data``: an argument
    rather than a constant of the compiled program, so that models of the
    same structure on different data sets compile to the same program (one
    entry in JAX's compilation cache). Donated arrays are updated in place:
    the caller's handles become invalid.
    """
    sliced, B = problem.sliced, problem.batch_size
    n_data = problem.n
    per_epoch = n_data // B if B else 1
    grad = jax.value_and_grad(problem.elbo, has_aux=True)
    kl_scale = kl_weights(problem.kl_weighting, per_epoch, problem.dtype)
    lr_scale = lr_factor(problem.lr_decay, problem.dtype)

    def one_step(t, params, opt_state, words, perm_key, perm, data):
        pos = t % per_epoch
        if B:
            perm = jax.lax.cond(pos == 0, lambda: _permutation(perm_key, t // per_epoch, n_data),
                                lambda: perm)
            idx = jax.lax.dynamic_slice(perm, (pos * B,), (B,))
            batch = tuple(jnp.take(d, idx, axis=0) if cut else d for d, cut in zip(data, sliced))
        else:
            batch = data
        (_, elbo), grads = grad(params, words, t, batch, kl_scale(pos))
        updates, opt_state = problem.optimizer.update(grads, opt_state, params)
        if lr_scale is not None:
            factor = lr_scale(t)
            updates = jax.tree_util.tree_map(lambda u: u * factor, updates)
        return optax.apply_updates(params, updates), opt_state, perm, elbo

    @partial(jax.jit, donate_argnums=(0, 1))
    def loop(params, opt_state, key, start, n, data):
        words, perm_key = noise.key_words(key), jax.random.fold_in(key, 1)
        perm = _permutation(perm_key, start // per_epoch, n_data) if B else None

        def body(i, carry):
            params, opt_state, perm, trace = carry
            params, opt_state, perm, elbo = one_step(start + i, params, opt_state, words,
                                                     perm_key, perm, data)
            return params, opt_state, perm, trace.at[i].set(elbo.astype(trace.dtype))

        trace = jnp.full(chunk, jnp.nan, problem.dtype)
        params, opt_state, _, trace = jax.lax.fori_loop(0, n, body, (params, opt_state, perm, trace))
        return params, opt_state, trace

    @partial(jax.jit, donate_argnums=(0, 1))
    def step(params, opt_state, key, t, perm, data):
        return one_step(t, params, opt_state, noise.key_words(key), jax.random.fold_in(key, 1), perm,
                        data)

    @jax.jit
    def epoch_permutation(key, t):
        return _permutation(jax.random.fold_in(key, 1), t // per_epoch, n_data) if B else None

    return loop, step, epoch_permutation


def batch_indices(seed: int, n: int, batch_size: int, steps: int) -> np.ndarray:
    """The rows the engine's minibatches take in steps ``0 .. steps - 1``: array (steps, batch_size).

    For benchmarks that feed other implementations the same batches.
    """
    per_epoch = n // batch_size
    perm_key = jax.random.fold_in(jax.random.key(seed), 1)
    epochs = [np.asarray(_permutation(perm_key, e, n)) for e in range(-(-steps // per_epoch))]
    rows = [epochs[t // per_epoch][(t % per_epoch) * batch_size:][:batch_size] for t in range(steps)]
    return np.stack(rows)


class JaxFit:
    """One engine fit: the compiled runners, and the parameters and optimizer state on the device.

    ``init`` holds the initial variational parameters in PyMC's layout
    (``mu`` and ``rho``, or ``mu`` and ``L_tril``); ``data`` names the
    containers cut into minibatches when ``batch_size`` is set.

    Cheap steps (under :data:`LOOP_BELOW_FLOPS` by XLA's cost analysis) run
    :data:`CHUNK` at a time inside one compiled loop, so that the per-call
    overhead (about 0.1 ms) does not dominate them: 0.1 ms/step on the toy
    BNN. Larger steps run one per call, with nothing leaving the device
    between calls, because XLA's CPU backend runs convolutions about 8x slower
    inside a loop (the seed-004 CNN: 880 ms/step in a ``fori_loop``, 104 ms
    unrolled). Both ways take identical steps.
    """

    def __init__(self, model: pm.Model, group, init: dict, *, method: str, optimizer: str,
                 learning_rate: float, batch_size: int | None, data: tuple[str, ...], beta: float,
                 mc_samples: int, seed: int, dtype: str, kl_weighting: str = "constant",
                 lr_decay: tuple[tuple[int, float], ...] = ()):
        containers = list(model.data_vars)
        self.problem = Problem(
            density=compile_model(model, group.ordering), method=method,
            optimizer=OPTIMIZERS[optimizer](learning_rate),
            data=tuple(jax.device_put(c.get_value()) for c in containers),
            sliced=tuple(batch_size is not None and c.name in data for c in containers),
            batch_size=batch_size, beta=beta, mc_samples=mc_samples, dtype=dtype,
            kl_weighting=kl_weighting, lr_decay=tuple(lr_decay),
        )
        self.params = {k: jnp.asarray(v, dtype) for k, v in init.items()}
        self.opt_state = self.problem.optimizer.init(self.params)
        self._tree = jax.tree_util.tree_structure((self.params, self.opt_state))
        self.key = jax.random.key(seed)
        # The compiled runners depend on the model's structure and these settings only
        # (the data is an argument): fits that share them share the runners.
        shapes = tuple((d.shape, str(d.dtype)) for d in self.problem.data)
        self.runner = self.problem.density.jitted.setdefault(
            ("fit", method, optimizer, learning_rate, self.problem.sliced, batch_size, beta,
             mc_samples, dtype, kl_weighting, self.problem.lr_decay, shapes), {})
        if not self.runner:
            self.runner.update(zip(("loop", "step", "epoch_permutation"), make_runner(self.problem)))

    def advance(self, start: int, n: int) -> np.ndarray:
        """Run steps ``start .. start + n - 1``; returns their ELBO estimates."""
        runner, data = self.runner, self.problem.data
        if "in_loop" not in runner:
            # XLA's cost analysis counts the loop's body once: the flops of one step.
            lowered = runner["loop"].lower(self.params, self.opt_state, self.key, start, 1, data)
            runner["in_loop"] = (lowered.cost_analysis() or {}).get("flops", np.inf) < LOOP_BELOW_FLOPS
            if runner["in_loop"]:
                runner["loop"] = lowered.compile()
        if runner["in_loop"]:
            trace = []
            for first in range(start, start + n, CHUNK):
                k = min(CHUNK, start + n - first)
                self.params, self.opt_state, part = runner["loop"](
                    self.params, self.opt_state, self.key, first, k, data)
                trace.append(part[:k])
            return np.asarray(jnp.concatenate(trace), dtype="float64")
        perm, elbos = runner["epoch_permutation"](self.key, start), []
        for t in range(start, start + n):
            self.params, self.opt_state, perm, elbo = runner["step"](
                self.params, self.opt_state, self.key, t, perm, data)
            elbos.append(elbo)
        return np.asarray(jnp.stack(elbos), dtype="float64")

    def arrays(self) -> list[np.ndarray]:
        """Parameters and optimizer state as host arrays (what a checkpoint stores)."""
        return [np.asarray(a) for a in jax.tree_util.tree_leaves((self.params, self.opt_state))]

    def load(self, arrays: list[np.ndarray]) -> None:
        """Replace the state by ``arrays`` from :meth:`arrays` (a checkpoint)."""
        current = jax.tree_util.tree_leaves((self.params, self.opt_state))
        leaves = [jnp.asarray(a, dtype=c.dtype) for a, c in zip(arrays, current)]
        self.params, self.opt_state = jax.tree_util.tree_unflatten(self._tree, leaves)

    def write_back(self, group) -> None:
        """Copy the fitted parameters into the PyMC approximation's shared variables."""
        for name, value in self.params.items():
            group.params_dict[name].set_value(np.asarray(value))
