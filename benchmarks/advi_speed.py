"""ADVI step time: this project's JAX engine against pm.fit, NumPyro SVI and a deterministic step.

    python -m benchmarks.advi_speed --model {mlp400,cnn} [--steps 200] [--json FILE]
                                    [--batch-size 128] [--blocks 5] [--data-dir DIR]

One process, float32, MNIST, batch 128, mean-field Gaussian q, Adam, one
Monte Carlo draw per step, N(0, 1) priors on every weight and bias. All five
see the same minibatches: the rows the engine draws on the device
(:func:`bnn_zoo.inference.advi.engine.batch_indices`), gathered from device-resident data
inside each jitted step (for pm.fit, copied into its ``pm.Data`` containers
by ``set_value``, which is how ``pm.fit`` takes minibatches from NumPy).

- ``engine``: what :func:`bnn_zoo.fit` runs (:func:`bnn_zoo.inference.advi.prepare.prepare`'s
  runner): the PyMC model compiled to JAX, many steps per call.
- ``pymc_fit``: PyMC's own ADVI step (``KLqp`` on ``MeanField``, what
  ``pm.fit(method="advi", backend="jax")`` iterates), one Python call per step.
- ``numpyro``: NumPyro SVI, ``AutoNormal`` guide, ``Trace_ELBO``, the same
  architecture written in JAX, ``jax.jit(svi.update)`` once per step.
- ``handwritten_bbb``: the engine's computation (same q parametrisation and
  softplus, noise generator and barrier, prior, Adam, donation) written by
  hand in JAX for this one network: the engine without PyMC's graph.
- ``deterministic``: the same network trained by plain cross-entropy with
  optax Adam, ``jax.jit`` once per step: the floor for one forward and one
  backward pass.

The models: ``mlp400`` is 784-400-400-10 with ReLU; ``cnn`` is the CNN of
Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks":
conv(32, 5x5)-pool-conv(32, 5x5)-pool-64-10 with tanh, NHWC. Timings are the
median ms/step over ``--blocks`` interleaved blocks (each engine runs a block
in turn, so all see the same machine state) after a warm-up that compiles.
Prints a table and the ratios (engine / deterministic also as the median of
each block's ratio, which the machine's drift within a run moves less);
``--json`` writes ``engine_ms``, ``pymc_fit_ms``, ``numpyro_ms``,
``handwritten_bbb_ms``, ``deterministic_ms``, the ratios and the set-up.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from bnn_zoo import MeanField, precision
from bnn_zoo.data import mnist
from bnn_zoo.inference.advi import noise
from bnn_zoo.inference.alternatives import reference
from bnn_zoo.inference.advi.prepare import prepare
from bnn_zoo.inference.advi.engine import batch_indices
from bnn_zoo.inference.families import softplus
from bnn_zoo.inference.support.io import write_json
from bnn_zoo.models import mlp_classifier
from bnn_zoo.models.cnn import cnn_classifier

LR, INIT_STD, SEED = 1e-3, 1e-3, 0
CONV = ("NHWC", "HWIO", "NHWC")


def shapes(model: str) -> list[tuple]:
    """Weight and bias shapes, in the zoo's layout (dense (in, out), conv HWIO)."""
    if model == "mlp400":
        return [(784, 400), (400,), (400, 400), (400,), (400, 10), (10,)]
    return [(5, 5, 1, 32), (32,), (5, 5, 32, 32), (32,), (512, 64), (64,), (64, 10), (10,)]


def initial_weights(model: str) -> list[np.ndarray]:
    """The same starting network for every implementation: weights N(0, 1/fan_in), biases 0."""
    rng = np.random.default_rng(SEED)
    return [rng.normal(0, 1 / np.sqrt(np.prod(s[:-1])) if len(s) > 1 else 0, s) for s in shapes(model)]


def logits(model: str, params: list, x):
    """The network in plain JAX (for NumPyro and the deterministic step)."""
    params = [w.astype(x.dtype) for w in params]  # NumPyro's set-up traces in float64
    if model == "mlp400":
        h = x.reshape(len(x), -1)
        for W, b in zip(params[0:-2:2], params[1:-2:2]):
            h = jax.nn.relu(h @ W + b)
        return h @ params[-2] + params[-1]
    h = x.transpose(0, 2, 3, 1)  # NCHW images, NHWC activations (as models.cnn)
    for W, b in zip(params[0:4:2], params[1:4:2]):
        h = jnp.tanh(lax.conv_general_dilated(h, W, (1, 1), "VALID", dimension_numbers=CONV) + b)
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jnp.tanh(h.reshape(len(x), -1) @ params[4] + params[5])
    return h @ params[6] + params[7]


def deterministic(model: str, X, y):
    """A jitted cross-entropy + Adam step on rows ``idx`` of the device data."""
    params = [jnp.asarray(w, jnp.float32) for w in initial_weights(model)]
    opt = optax.adam(LR)

    def loss(p, idx):
        logp = jax.nn.log_softmax(logits(model, p, X[idx]))
        return -jnp.mean(jnp.take_along_axis(logp, y[idx][:, None], axis=1))

    @jax.jit
    def step(state, idx):
        p, s = state
        value, g = jax.value_and_grad(loss)(p, idx)
        updates, s = opt.update(g, s, p)
        return (optax.apply_updates(p, updates), s), value

    return step, (params, opt.init(params))


def handwritten_bbb(model: str, X, y, n: int):
    """The engine's mean-field step written directly in JAX: what it costs without PyMC's graph.

    The engine's own pieces, minus the PyMC model: one flat ``mu`` and
    ``rho``, one draw of noise from :mod:`bnn_zoo.inference.advi.noise` behind the same
    optimisation barrier, ``w = mu + softplus(rho) * eps`` with the engine's
    :func:`bnn_zoo.inference.families.softplus`, N(0, 1) prior on every weight and
    bias, the batch's log likelihood scaled by ``n / B``, Adam, parameters
    and optimizer state donated. Its ratio to the deterministic step is what
    Bayes by Backprop itself costs on this machine.
    """
    offsets = np.cumsum([0, *(int(np.prod(s)) for s in shapes(model))])
    words = noise.key_words(jax.random.key(SEED))
    mu = np.concatenate([w.ravel() for w in initial_weights(model)])
    q = {"mu": jnp.asarray(mu, jnp.float32),
         "rho": jnp.full(mu.size, np.log(np.expm1(INIT_STD)), jnp.float32)}
    opt = optax.adam(LR)

    def neg_elbo(q, t, idx):
        eps = lax.optimization_barrier(noise.normal(words, t, 0, (mu.size,), jnp.float32))
        sigma = softplus(q["rho"])
        z = q["mu"] + sigma * eps
        weights = [z[a:b].reshape(s) for a, b, s in zip(offsets[:-1], offsets[1:], shapes(model))]
        logp = jax.nn.log_softmax(logits(model, weights, X[idx]))
        log_lik = jnp.sum(jnp.take_along_axis(logp, y[idx][:, None], axis=1))
        return -(log_lik * (n / len(idx)) - 0.5 * jnp.sum(z * z) + jnp.sum(jnp.log(sigma)))

    @partial(jax.jit, donate_argnums=(0,))
    def step(state, t, idx):
        q, s = state
        value, g = jax.value_and_grad(neg_elbo)(q, t, idx)
        updates, s = opt.update(g, s, q)
        return (optax.apply_updates(q, updates), s), value

    return step, (q, opt.init(q))


def numpyro_svi(model: str, X, y, n: int):
    """A jitted NumPyro SVI step (AutoNormal, Trace_ELBO, Adam) on rows ``idx``."""
    try:
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import SVI, Trace_ELBO
        from numpyro.infer.autoguide import AutoNormal
    except ImportError:
        sys.exit("python -m benchmarks.advi_speed: error: NumPyro is not installed (a dependency of bnn-zoo); "
                 "pip install -e .")

    def bnn(x, labels):
        params = [numpyro.sample(f"w{i}", dist.Normal(jnp.zeros(s, jnp.float32),
                                                      jnp.ones(s, jnp.float32)).to_event(len(s)))
                  for i, s in enumerate(shapes(model))]
        # The batch's log likelihood scaled to the full data, as total_size does in PyMC
        # (a subsampled plate would draw its own batches instead of the shared ones).
        with numpyro.handlers.scale(scale=n / len(x)), numpyro.plate("data", len(x)):
            numpyro.sample("y", dist.Categorical(logits=logits(model, params, x)), obs=labels)

    init = {f"w{i}": jnp.asarray(w, jnp.float32) for i, w in enumerate(initial_weights(model))}
    # A float32 init_scale: a Python float makes the scales float64 (pytensor turns on x64).
    guide = AutoNormal(bnn, init_loc_fn=numpyro.infer.init_to_value(values=init),
                       init_scale=np.float32(INIT_STD))
    svi = SVI(bnn, guide, numpyro.optim.Adam(LR), Trace_ELBO())
    state = svi.init(jax.random.key(SEED), X[:2], y[:2])
    dtypes = {str(a.dtype) for a in jax.tree_util.tree_leaves(svi.get_params(state))}
    if dtypes != {"float32"}:
        sys.exit(f"python -m benchmarks.advi_speed: error: NumPyro parameters are {dtypes}")

    @jax.jit
    def step(state, idx):
        return svi.update(state, X[idx], y[idx])

    return step, state


def interleaved(runners: dict, warmup: int, per_block: int, blocks: int, prog: str) -> tuple[dict, dict]:
    """Time each ``run(first_step, steps) -> last loss`` in interleaved blocks, after a warm-up that compiles.

    Returns each runner's warm-up seconds and its ms per step in each block; exits with one line when a
    loss is not finite.
    """
    setup = {}
    for name, run in runners.items():  # compile and warm up
        t0 = time.perf_counter()
        run(0, warmup)
        setup[name] = time.perf_counter() - t0
    timings = {name: [] for name in runners}
    for block in range(blocks):  # each runs a block in turn, so that all see the same machine state
        start = warmup + block * per_block
        for name, run in runners.items():
            t0 = time.perf_counter()
            last = run(start, per_block)
            timings[name].append(1e3 * (time.perf_counter() - t0) / per_block)
            if not np.isfinite(last):
                sys.exit(f"{prog}: error: {name}'s loss is {last}")
    return setup, timings


def zoo_model(model: str, X, y, total_size: int):
    if model == "mlp400":
        return mlp_classifier(X.reshape(len(X), -1), y, hidden=(400, 400), n_classes=10,
                              activation="relu", prior="normal", hyperprior="fixed",
                              total_size=total_size)
    return cnn_classifier(X, y, prior="normal", hyperprior="fixed", total_size=total_size)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.advi_speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("mlp400", "cnn"), required=True)
    p.add_argument("--steps", type=int, default=200, help="timed steps of each, in blocks")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    args = p.parse_args(argv)
    if args.steps < args.blocks or args.blocks < 1:
        p.error("--steps must be >= --blocks >= 1")

    try:
        data = mnist.load(args.data_dir)
    except mnist.MNISTError as e:
        p.error(str(e))
    X_host = data.X_train if args.model == "cnn" else data.flat(data.X_train)
    n, B = len(X_host), args.batch_size
    warmup, per_block = 3, args.steps // args.blocks
    total = warmup + per_block * args.blocks
    rows = batch_indices(SEED, n, B, total)  # the engine's own minibatches, step by step
    X, y = jax.device_put(X_host), jax.device_put(data.y_train.astype(np.int32))

    setup = {}
    t0 = time.perf_counter()
    with precision(True):
        # The engine fits the model on the whole training set, drawing its own batches.
        full = zoo_model(args.model, X_host, data.y_train, n)
        # PyMC's step sees one batch at a time through its pm.Data containers.
        one = zoo_model(args.model, X_host[rows[0]], data.y_train[rows[0]], n)
    engine = prepare(full, method=MeanField(init_std=INIT_STD), steps=total, optimizer=optax.adam(LR),
                     batch_size=B, average=0, random_seed=SEED)
    _, pymc_step, _ = reference.build_step(one, learning_rate=LR, init_std=INIT_STD, backend="jax",
                                           seed=SEED)
    setup["build"] = time.perf_counter() - t0
    y_dtype = one["y"].get_value().dtype  # pm.Data keeps small labels in a narrow dtype
    det_step, det_state = deterministic(args.model, X, y)
    svi_step, svi_state = numpyro_svi(args.model, X, y, n)
    bbb_step, bbb_state = handwritten_bbb(args.model, X, y, n)

    def run_engine(t, k):
        engine.state, trace = engine.runner.advance(engine.state, t, k)
        return trace[-1]

    def run_pymc(t, k):
        for i in range(t, t + k):
            one["X"].set_value(X_host[rows[i]])
            one["y"].set_value(data.y_train[rows[i]].astype(y_dtype))
            value = float(pymc_step())
        return value

    def run_numpyro(t, k):
        nonlocal svi_state
        for i in range(t, t + k):
            svi_state, value = svi_step(svi_state, rows[i])
        return float(value)  # waits for the device

    def run_bbb(t, k):
        nonlocal bbb_state
        for i in range(t, t + k):
            bbb_state, value = bbb_step(bbb_state, i, rows[i])
        return float(value)

    def run_det(t, k):
        nonlocal det_state
        for i in range(t, t + k):
            det_state, value = det_step(det_state, rows[i])
        return float(value)

    runners = {"engine": run_engine, "pymc_fit": run_pymc, "numpyro": run_numpyro,
               "handwritten_bbb": run_bbb, "deterministic": run_det}
    compiled, timings = interleaved(runners, warmup, per_block, args.blocks, p.prog)
    setup.update(compiled)
    ms = {name: float(np.median(t)) for name, t in timings.items()}
    # Each block's engine time over the deterministic time of the same round: the machine's
    # drift within a run moves both, so their median ratio varies less.
    blockwise = float(np.median(np.array(timings["engine"]) / np.array(timings["deterministic"])))

    device = jax.devices()[0]
    machine = f"{platform.processor() or platform.machine()}, {device.platform} ({device.device_kind})"
    print(f"{args.model}, MNIST batch {B}, float32, mean-field, Adam; {machine}; "
          f"{args.blocks} interleaved blocks x {per_block} steps, median")
    print(f"{'':16s} {'set-up s':>9s} {'ms/step':>8s} {'x deterministic':>16s}")
    for name in runners:
        print(f"{name:16s} {setup[name]:9.2f} {ms[name]:8.2f} {ms[name] / ms['deterministic']:16.2f}")
    ratios = {"engine_vs_numpyro": ms["engine"] / ms["numpyro"],
              "engine_vs_deterministic": ms["engine"] / ms["deterministic"],
              "engine_vs_pymc_fit": ms["engine"] / ms["pymc_fit"],
              "engine_vs_handwritten_bbb": ms["engine"] / ms["handwritten_bbb"]}
    print("engine / numpyro {engine_vs_numpyro:.2f}, engine / deterministic "
          "{engine_vs_deterministic:.2f}, engine / pymc_fit {engine_vs_pymc_fit:.2f}, "
          "engine / handwritten_bbb {engine_vs_handwritten_bbb:.2f}".format(**ratios))
    print(f"engine / deterministic, median of the {args.blocks} blocks' ratios: {blockwise:.2f}")
    if args.json:
        write_json(args.json, {
            **{f"{name}_ms": ms[name] for name in runners}, **ratios,
            "engine_vs_deterministic_blockwise": blockwise,
            "blocks_ms": timings, "setup_seconds": setup, "model": args.model,
            "steps": per_block * args.blocks, "batch_size": B, "dtype": "float32",
            "device": machine, "cpu_count": __import__("os").cpu_count(),
            "jax": jax.__version__,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
