"""The path-derivative ("sticking the landing") gradient on a conjugate model: its variance and final error.

    python -m benchmarks.studies.stl_conjugate [--steps 5000] [--seeds 5]
        [--json benchmarks/results/studies/stl_conjugate.json]

Bayesian linear regression with 5 features of pairwise correlation 0.8 and
200 points (:func:`bnn_zoo.models.linear.linear_regression`), whose
posterior is exact. For mean-field and full-rank q it prints

- the gradient's variance (summed over q's parameters, 4,000 draws of one
  Monte Carlo sample each) with the standard and with the path-derivative
  estimator, at q's optimum and at the fit's starting point;
- the error of the fitted q after ``--steps`` steps of Adam, over
  ``--seeds`` seeds: the largest |mean error| in posterior sds, and the
  largest relative error of q's sds (against the exact posterior's for
  full-rank, against the mean-field optimum's for mean-field), with a
  constant learning rate of 0.01 and with a cosine decay to 1% of it, from
  q's default initial sd (0.01) and from one near the posterior's (0.1; the
  posterior sds are 0.13-0.16, the mean-field ones 0.07-0.08).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import bnn_zoo
from bnn_zoo.inference import families
from bnn_zoo.inference.advi import objective
from bnn_zoo.inference.advi.prepare import prepare
from bnn_zoo.inference.support.io import write_json
from bnn_zoo.models.linear import correlated_design, linear_posterior, linear_regression

DRAWS = 4000


def optimum(method: str, post) -> dict:
    """q's parameters at the optimum: the posterior (full-rank) or its mean-field projection."""
    if method == "advi":
        return {"mu": jnp.asarray(post.mean),
                "rho": jnp.asarray(families.inverse_softplus(post.mean_field_sd))}
    L = np.linalg.cholesky(post.cov)
    L[np.diag_indices_from(L)] = families.inverse_softplus(np.diag(L))
    return {"mu": jnp.asarray(post.mean), "L_tril": jnp.asarray(L[np.tril_indices_from(L)])}


def gradient_variance(setup, params, path_derivative: bool) -> float:
    elbo = objective.ELBOFunction(setup.density, setup.family, path_derivative=path_derivative)
    data = tuple(jnp.asarray(v.get_value()) for v in setup.model.data_vars)
    eps = jax.random.normal(jax.random.key(1), (DRAWS, 1, params["mu"].shape[0]))
    grads = jax.vmap(lambda e: jax.grad(lambda q: elbo(q, e, data)[0])(params))(eps)
    return float(sum(np.var(np.asarray(g), axis=0).sum() for g in jax.tree_util.tree_leaves(grads)))


def errors(result, post) -> tuple[float, float]:
    mean, sd = result.mean["w"], result.sd["w"]
    target = post.sd if result.method == "fullrank_advi" else post.mean_field_sd
    return float(np.max(np.abs(mean - post.mean) / post.sd)), float(np.max(np.abs(sd / target - 1)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.stl_conjugate",
                                description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    X, y = correlated_design()
    post = linear_posterior(X, y)
    model = linear_regression(X, y)
    rows = {}
    print(f"conjugate linear regression, 200 points x 5 features (correlation 0.8), "
          f"{args.steps} Adam steps, seeds 0-{args.seeds - 1}")
    for method in ("advi", "fullrank_advi"):
        setup = prepare(model, method=method)
        at = {"optimum": optimum(method, post), "start": setup.state.params}
        for where, params in at.items():
            plain, stl = (gradient_variance(setup, params, s) for s in (False, True))
            rows[f"{method} gradient variance at the {where}"] = {"standard": plain, "path_derivative": stl}
            print(f"{method:14s} gradient variance at the {where:8s}: standard {plain:10.4g}, "
                  f"path derivative {stl:10.4g} ({stl / plain:.3g}x)")
        for schedule, init_std, stl in itertools.product(("constant", "cosine"), (0.01, 0.1),
                                                         (False, True)):
            rate = 0.01 if schedule == "constant" else optax.cosine_decay_schedule(0.01, args.steps, 0.01)
            family = (bnn_zoo.MeanField if method == "advi" else bnn_zoo.FullRank)(init_std=init_std)
            errs = np.array([errors(bnn_zoo.fit(model, method=family, steps=args.steps,
                                                optimizer=optax.adam(rate),
                                                objective=bnn_zoo.ELBO(path_derivative=stl),
                                                random_seed=seed, progressbar=False), post)
                             for seed in range(args.seeds)])
            name = f"{method} {schedule} lr, init sd {init_std:g}, {'path derivative' if stl else 'standard'}"
            rows[name] = {"mean_error_sd": errs[:, 0].tolist(), "sd_rel_error": errs[:, 1].tolist()}
            print(f"{name:58s} max |mean error| / sd {errs[:, 0].mean():.3f} "
                  f"(worst seed {errs[:, 0].max():.3f}), max sd error {errs[:, 1].mean():.2%} "
                  f"(worst {errs[:, 1].max():.2%})")
    if args.json:
        write_json(args.json, {"steps": args.steps, "seeds": args.seeds, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
