"""Why ``advi``'s raw UCI intervals over-cover: the standardised test residuals of its fits.

    python -m benchmarks.studies.uci_residuals [--datasets yacht,boston,naval,power] [--splits 5]

For splits 0 .. splits-1 of each data set it fits ``bnn-zoo uci``'s mean-field ADVI (its model,
settings and minibatches), and pools the test residuals standardised by the predictive sd,
``z = (y - mean) / sd`` (the sd of the network output over 500 draws and the mean noise
variance). A calibrated Gaussian predictive gives ``sd(z) = 1``, ``median |z| / 0.674 = 1`` and
half of the points with ``|z| < 0.674``; ``sd(z)`` below 1 is a predictive too wide, a large excess
kurtosis residuals with heavier tails than the predictive's. The data folder is ``$UCI_DIR`` or
the user's cache (:func:`bnn_zoo.data.uci.resolve_dir`).
"""
import argparse
import warnings

import numpy as np
import scipy.stats

import bnn_zoo
from bnn_zoo.data import uci
from bnn_zoo.experiments.harness.runner import make_optimizer
from bnn_zoo.experiments.uci import fits as job

p = argparse.ArgumentParser()
p.add_argument("--datasets", default="yacht,boston,naval,power")
p.add_argument("--splits", type=int, default=5)
args = p.parse_args()
warnings.simplefilter("ignore")
for name in args.datasets.split(","):
    zs = []
    for k in range(args.splits):
        split = uci.load(name, k, None)
        cfg = job.UCIConfig(uci=name, split=k, approach="advi", **job.DEFAULTS,
                            batch_size=None if len(split.y_train) <= job.BATCH_SIZE else job.BATCH_SIZE)
        fit = bnn_zoo.fit(job.model(cfg, split), optimizer=make_optimizer(cfg, cfg.lr, cfg.steps),
                          **job.fit_settings(cfg))
        idata = bnn_zoo.sample(fit, cfg.draws, random_seed=cfg.seed, log_likelihood=False, var_names=())
        mu = bnn_zoo.predict(fit, {"X": split.X_test}, idata=idata, var_names=["mu"])["predictions"]["mu"]
        mu = mu.values.reshape(-1, len(split.X_test))
        noise_var = (idata["posterior"]["tau"].values.ravel() ** -1).mean()
        zs.append((split.y_test - mu.mean(0)) / np.sqrt(mu.var(0) + noise_var))
    z = np.concatenate(zs)
    print(f"{name}: n {z.size}, sd(z) {z.std():.2f}, median|z|/0.674 {np.median(np.abs(z)) / 0.6745:.2f}, "
          f"excess kurtosis {scipy.stats.kurtosis(z):.1f}, share |z|<0.674 {np.mean(np.abs(z) < 0.6745):.2f}",
          flush=True)
