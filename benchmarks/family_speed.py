"""Step time of each family: the engine against NumPyro's autoguides and hand-written steps, side by side.

    python -m benchmarks.family_speed [--steps 500] [--blocks 5] [--json FILE]

One process, float64, a 2-25-25-1 tanh network (751 weights and biases, N(0, 1)
priors) classifying 500 points of two moons on the full data, one Monte Carlo
draw per step, Adam. For each family, the engine's step (what
:func:`bnn_zoo.fit` runs: :func:`bnn_zoo.inference.advi.prepare.prepare`'s runner,
many steps per call) and its peers', in interleaved blocks (each runs a block
in turn, so all see the same machine state), median ms per step after a
warm-up that compiles:

- mean-field: the engine (``"advi"``) against NumPyro's ``AutoNormal``;
- full rank: the engine (``"fullrank_advi"``, with the path derivative, its
  default) against NumPyro's ``AutoMultivariateNormal`` and a hand-written
  dense step (the engine's parametrisation and gradient, written in JAX for
  this one network);
- flow: the engine (``"flow"`` at its defaults, ``defaults.FLOW_LAYERS`` coupling
  layers of two hidden layers of ``defaults.FLOW_HIDDEN`` units, on a dense
  factor, with the path derivative, its default, and without it) against
  NumPyro's ``AutoIAFNormal`` of 10 autoregressive layers (``Trace_ELBO``: no
  path derivative) of 2x751 units: NumPyro's autoregressive networks are at
  least as wide as the dimension, so this is its narrowest, not the same size.

Prints the table and the ratios; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import platform
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pymc as pm

import bnn_zoo
from bnn_zoo.data import toy
from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.families import FULL_RANK, softplus
from bnn_zoo.inference.support.io import write_json
from bnn_zoo.inference.advi.prepare import prepare

from benchmarks.advi_speed import interleaved

SEED, LR, HIDDEN, N = 0, 1e-3, 25, 500
DIM = 2 * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN + HIDDEN + 1  # 751


def data():
    split = toy.load("moons", n_train=N, n_test=10, noise=0.2)
    return np.asarray(split.X_train, "float64"), np.asarray(split.y_train, "int64")


def shapes():
    return [(2, HIDDEN), (HIDDEN,), (HIDDEN, HIDDEN), (HIDDEN,), (HIDDEN, 1), (1,)]


def logits(weights, X):
    W1, b1, W2, b2, W3, b3 = weights
    h = jnp.tanh(X @ W1 + b1)
    h = jnp.tanh(h @ W2 + b2)
    return (h @ W3 + b3)[:, 0]


def pymc_model(X, y):
    with pm.Model() as model:
        names = ["W1", "b1", "W2", "b2", "W3", "b3"]
        w = [pm.Normal(n, 0, 1, shape=s) for n, s in zip(names, shapes())]
        h = pm.math.tanh(pm.math.dot(X, w[0]) + w[1])
        h = pm.math.tanh(pm.math.dot(h, w[2]) + w[3])
        pm.Bernoulli("y", logit_p=(pm.math.dot(h, w[4]) + w[5])[:, 0], observed=y)
    return model


def numpyro_step(X, y, guide_name):
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoIAFNormal, AutoMultivariateNormal, AutoNormal

    def bnn():
        w = [numpyro.sample(f"w{i}", dist.Normal(jnp.zeros(s), 1.0).to_event(len(s)))
             for i, s in enumerate(shapes())]
        numpyro.sample("y", dist.Bernoulli(logits=logits(w, X)).to_event(1), obs=y)

    guide = {"AutoNormal": lambda: AutoNormal(bnn, init_scale=0.01),
             "AutoMultivariateNormal": lambda: AutoMultivariateNormal(bnn, init_scale=0.01),
             # NumPyro's autoregressive networks are at least as wide as the dimension: its narrowest IAF.
             "AutoIAFNormal": lambda: AutoIAFNormal(bnn, num_flows=10, hidden_dims=[DIM, DIM])}[guide_name]()
    svi = SVI(bnn, guide, numpyro.optim.Adam(LR), Trace_ELBO())
    state = svi.init(jax.random.key(SEED))
    return jax.jit(svi.update), state


def handwritten_fullrank(X, y):
    """The engine's full-rank step for this network in JAX: ``z = mu + s (eps + T eps)``, the path derivative."""
    d = sum(int(np.prod(s)) for s in shapes())
    offsets = np.cumsum([0, *(int(np.prod(s)) for s in shapes())])
    rows, cols = np.tril_indices(d, -1)
    words = noise.key_words(jax.random.key(SEED))
    q = {"mu": jnp.asarray(np.random.default_rng(SEED).normal(size=d) * 0.1),
         "rho": jnp.full(d, np.log(np.expm1(0.01))), "T_tril": jnp.zeros(rows.size)}
    opt = optax.adam(LR)

    def log_q(q, z):
        s = softplus(q["rho"])
        unit = jnp.eye(d).at[rows, cols].set(q["T_tril"])
        eps = jax.scipy.linalg.solve_triangular(unit, (z - q["mu"]) / s, lower=True, unit_diagonal=True)
        return -0.5 * jnp.sum(eps**2) - jnp.sum(jnp.log(s))

    def neg_elbo(q, t):
        eps = jax.lax.optimization_barrier(noise.normal(words, t, 0, (d,), jnp.float64))
        s = softplus(q["rho"])
        T = jnp.zeros((d, d)).at[rows, cols].set(q["T_tril"])
        z = q["mu"] + s * (eps + T @ eps)
        weights = [z[a:b].reshape(sh) for a, b, sh in zip(offsets[:-1], offsets[1:], shapes())]
        f = logits(weights, X)
        log_lik = jnp.sum(y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f))
        frozen = jax.lax.stop_gradient(q)
        return -(log_lik - 0.5 * jnp.sum(z * z) - log_q(frozen, z))

    def step(state, t):
        q, opt_state = state
        value, g = jax.value_and_grad(neg_elbo)(q, t)
        updates, opt_state = opt.update(g, opt_state, q)
        return (optax.apply_updates(q, updates), opt_state), value

    return jax.jit(step, donate_argnums=(0,)), (q, opt.init(q))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.family_speed", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500, help="timed steps of each, in blocks")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    if args.steps < args.blocks or args.blocks < 1:
        p.error("--steps must be >= --blocks >= 1")
    X, y = data()
    model = pymc_model(X, y)
    warmup, per_block = 3, args.steps // args.blocks
    total = warmup + per_block * args.blocks
    with warnings.catch_warnings():  # a short fit: the flow's dense factor, not a result
        warnings.simplefilter("ignore", bnn_zoo.ConvergenceWarning)
        start = bnn_zoo.fit(model, method="fullrank_advi", steps=200, progressbar=False)
    engines = {
        "mean-field engine": prepare(model, method="advi", steps=total, optimizer=optax.adam(LR), average=0),
        "full-rank engine": prepare(model, method="fullrank_advi", steps=total, optimizer=optax.adam(LR),
                                    objective=bnn_zoo.ELBO(path_derivative=True), average=0),
        "flow engine": prepare(model, method="flow", steps=total, optimizer=optax.adam(LR), init=start,
                               objective=bnn_zoo.ELBO(path_derivative=True), average=0),
        "flow engine (no path derivative)": prepare(model, method="flow", steps=total, optimizer=optax.adam(LR),
                                                    init=start, objective=bnn_zoo.ELBO(path_derivative=False),
                                                    average=0),
    }
    assert engines["full-rank engine"].family is FULL_RANK
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    stepped = {name: numpyro_step(Xj, yj, name) for name in ("AutoNormal", "AutoMultivariateNormal", "AutoIAFNormal")}
    stepped["full-rank handwritten"] = handwritten_fullrank(Xj, yj.astype(jnp.float64))

    def engine_runner(setup):
        def run(t, k):
            setup.state, trace = setup.runner.advance(setup.state, t, k)
            return trace[-1]
        return run

    def step_runner(name):
        def run(t, k):
            step, state = stepped[name]
            for i in range(t, t + k):
                state, value = step(state, i) if name == "full-rank handwritten" else step(state)
            stepped[name] = (step, state)
            return float(value)
        return run

    order = ["mean-field engine", "AutoNormal", "full-rank engine", "full-rank handwritten", "AutoMultivariateNormal",
             "flow engine", "flow engine (no path derivative)", "AutoIAFNormal"]
    runners = {name: engine_runner(engines[name]) if name in engines else step_runner(name) for name in order}
    setup_s, timings = interleaved(runners, warmup, per_block, args.blocks, p.prog)
    ms = {name: float(np.median(t)) for name, t in timings.items()}
    ratios = {"mean-field engine / AutoNormal": ms["mean-field engine"] / ms["AutoNormal"],
              "full-rank engine / AutoMultivariateNormal": ms["full-rank engine"] / ms["AutoMultivariateNormal"],
              "full-rank engine / handwritten": ms["full-rank engine"] / ms["full-rank handwritten"],
              "flow engine / AutoIAFNormal": ms["flow engine"] / ms["AutoIAFNormal"],
              "flow engine without the path derivative / AutoIAFNormal":
                  ms["flow engine (no path derivative)"] / ms["AutoIAFNormal"]}
    device = jax.devices()[0]
    machine = f"{platform.processor() or platform.machine()}, {device.platform} ({device.device_kind})"
    print(f"2-25-25-1 tanh network (751 values), two moons n={N}, float64, Adam, one draw per step; {machine}; "
          f"{args.blocks} interleaved blocks x {per_block} steps, median")
    print(f"{'':34s} {'set-up s':>9s} {'ms/step':>8s}")
    for name in runners:
        print(f"{name:34s} {setup_s[name]:9.2f} {ms[name]:8.3f}")
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}x")
    if args.json:
        write_json(args.json, {"ms": ms, "ratios": ratios, "blocks_ms": timings, "setup_seconds": setup_s,
                               "steps": per_block * args.blocks, "device": machine,
                               "cpu_count": __import__("os").cpu_count(), "jax": jax.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
