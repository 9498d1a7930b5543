"""``fit(method="auto")`` + ``sample(4000)`` against PyMC's NUTS, each in a fresh process.

    python -m benchmarks.auto_speed [--models NAME,...] [--json FILE]

Per model, each timed in a process of its own, imports and model building apart:

- ``nuts``: ``pm.sample(1000, tune=1000, chains=4, nuts_sampler="numpyro")``, what a PyMC user runs
  (the same 4,000 draws ``auto`` returns);
- ``auto, new cache``: ``bnn_zoo.fit(model, method="auto")`` and ``bnn_zoo.sample(result, 4000)``
  with an empty folder of compiled programs (a new machine, or ``BNN_ZOO_JAX_CACHE=off``);
- ``auto, cache filled``: the same again, reading back what the first run compiled (the same
  script run a second time);
- ``second fit``: for ``regression_data`` (a regression on ``pm.Data``), a second ``fit`` +
  ``sample`` in the same process after ``pm.set_data`` with new observations.

Each row gives the seconds, the XLA compilations (JAX's log of them; a program read back from the
folder is logged too, at a fraction of the time) and the ratio to NUTS's time measured in the same
run. The models are those of :mod:`benchmarks.reference_posteriors`, and ``regression_data``.
Every module's bytecode is written first (:func:`benchmarks.processes.write_bytecode`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

DEFAULT_MODELS = ("regression_data", "eight_schools_noncentered", "arK-arK", "kidiq-kidscore_interaction",
                  "poisson_glm", "logistic_breast_cancer", "low_dim_gauss_mix-low_dim_gauss_mix")


def regression_data():
    """A three-parameter regression on ``pm.Data`` (posteriordb's kilpisjarvi shape: years as the
    predictor, uncentred), and new observations for a second fit."""
    import numpy as np
    import pymc as pm

    rng = np.random.default_rng(1)
    x = np.arange(1952, 2014, dtype=float)
    y = 8.0 + 0.02 * (x - 1980) + rng.normal(0, 1.1, x.size)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        alpha, beta = pm.Normal("alpha", 0, 100), pm.Normal("beta", 0, 100)
        sigma = pm.HalfNormal("sigma", 5)
        pm.Normal("obs", alpha + beta * xd, sigma, observed=yd)
    return model, 8.0 + 0.03 * (x - 1980) + rng.normal(0, 1.1, x.size)


def _build(name: str):
    if name == "regression_data":
        return regression_data()
    from benchmarks.reference_posteriors import MODELS

    return MODELS[name][0](), None


def _count_compilations() -> list:
    """JAX's log of its compilations, collected into the returned list as ``(name, seconds)``."""
    import jax

    found = []

    class Handler(logging.Handler):
        def emit(self, record):
            match = re.search(r"Finished XLA compilation of (.*) in ([0-9.e-]+) sec", record.getMessage())
            if match:
                found.append((match.group(1), float(match.group(2))))

    for name in ("jax._src.dispatch", "jax._src.interpreters.pxla", "jax._src.compiler"):
        logger = logging.getLogger(name)
        logger.addHandler(Handler())
        logger.setLevel(logging.DEBUG)
    jax.config.update("jax_log_compiles", True)
    return found


def one(name: str, mode: str) -> dict:
    """One timed run in this process: ``mode`` is ``"nuts"`` or ``"auto"``."""
    warnings.simplefilter("ignore")
    import pymc as pm

    import bnn_zoo
    from bnn_zoo.inference import dispatch  # noqa: F401  (the engine loaded before the clock)

    model, new_y = _build(name)
    compiled = _count_compilations()
    t0 = time.perf_counter()
    if mode == "nuts":
        pm.sample(1000, tune=1000, chains=4, nuts_sampler="numpyro", progressbar=False, random_seed=0, model=model)
        return {"seconds": time.perf_counter() - t0, "compilations": len(compiled)}
    result = bnn_zoo.fit(model, method="auto", progressbar=False)
    idata = bnn_zoo.sample(result, 4000)
    row = {"seconds": time.perf_counter() - t0, "compilations": len(compiled),
           "compile_seconds": sum(s for _, s in compiled), "method": result.method,
           "passed": bool(result.config["auto"]["passed"]), "q_pareto_k": float(idata.attrs["q_pareto_k"])}
    if new_y is not None:
        with model:
            pm.set_data({"y": new_y})
        before, t1 = len(compiled), time.perf_counter()
        bnn_zoo.sample(bnn_zoo.fit(model, method="auto", progressbar=False), 4000)
        row |= {"second_seconds": time.perf_counter() - t1, "second_compilations": len(compiled) - before}
    return row


def _child(name: str, mode: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.auto_speed", "--one", name, "--mode", mode],
                          capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"{name} {mode}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model names")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.mode)))
        return 0
    from benchmarks.processes import write_bytecode

    write_bytecode()  # as pip install leaves an environment: no timed process compiles its modules' source
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XDG_CACHE_HOME=cache)
            env.pop("JAX_COMPILATION_CACHE_DIR", None)
            nuts = _child(name, "nuts", env)
            cold = _child(name, "auto", env)
            warm = _child(name, "auto", env)
        row = {"model": name, "nuts_seconds": nuts["seconds"], "auto_cold": cold, "auto_warm": warm}
        rows.append(row)
        second = (f", second fit {warm['second_seconds']:.2f} s ({warm['second_seconds'] / nuts['seconds']:.2f}x, "
                  f"{warm['second_compilations']} compilations)" if "second_seconds" in warm else "")
        print(f"{name}: NUTS {nuts['seconds']:.1f} s; auto ({cold['method']}, passed {cold['passed']}) "
              f"{cold['seconds']:.2f} s new cache ({cold['seconds'] / nuts['seconds']:.2f}x, "
              f"{cold['compilations']} compilations, {cold['compile_seconds']:.2f} s), "
              f"{warm['seconds']:.2f} s cache filled ({warm['seconds'] / nuts['seconds']:.2f}x){second}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
