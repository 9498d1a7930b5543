"""Full-rank ADVI started from the mean-field fit on UCI data: its ELBO against the start, by rate.

    python -m benchmarks.studies.uci_fullrank [--datasets yacht,boston] [--rates 1e-4,1e-5,1e-6]
        [--data-dir DIR] [--json benchmarks/results/studies/uci_fullrank.json]

For split 0 of each data set it fits ``bnn-zoo uci``'s mean-field ADVI (its
model, 10,000 steps, full batch), then the full-rank phase from that fit
(``bnn_zoo.fit(model, method="fullrank_advi", init=that_fit)``, 10,000
steps of the same cosine schedule, the plain gradient) at each rate. It prints, per fit, the ELBO estimate
averaged over the full-rank phase's first 200 steps and its last 1,000
(the mean-field fit's over its last 1,000), and the test RMSE and
log-likelihood. A full-rank q contains the mean-field one, so a full-rank
phase that ends below its start has lost ELBO to the optimiser.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings

import numpy as np

import bnn_zoo
from bnn_zoo.data import uci
from bnn_zoo.experiments.harness import runner
from bnn_zoo.experiments.uci import fits as job
from bnn_zoo.inference.support.io import write_json


def study(name: str, rates, data_dir) -> list[dict]:
    """The mean-field fit of ``name``'s split 0 and a full-rank phase from it at each rate."""
    cfg = job.UCIConfig(uci=name, split=0, approach="fullrank_advi", **job.DEFAULTS, batch_size=None)
    split = uci.load(name, 0, data_dir)
    model = job.model(cfg, split)
    settings = job.fit_settings(cfg)  # bnn-zoo uci's own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is in the rows
        mf = bnn_zoo.fit(model, optimizer=runner.make_optimizer(cfg, cfg.lr, cfg.steps), **settings)
        rows = [dict(uci=name, q="mean-field", rate=cfg.lr, elbo_first200=float(np.mean(mf.elbo[:200])),
                     elbo_final=mf.elbo_final, seconds=mf.seconds, **job.score_fit(mf, cfg, split))]
        objective = dataclasses.replace(settings.get("objective") or bnn_zoo.ELBO(), path_derivative=False)
        full = dict(settings, method="fullrank_advi", init=mf, objective=objective)
        for rate in rates:
            fr = bnn_zoo.fit(model, optimizer=runner.make_optimizer(cfg, rate, cfg.steps), **full)
            rows.append(dict(uci=name, q="full-rank", rate=rate, elbo_first200=float(np.mean(fr.elbo[:200])),
                             elbo_final=fr.elbo_final, seconds=fr.seconds,
                             **job.score_fit(fr, cfg, split)))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.uci_fullrank", description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="yacht,boston")
    p.add_argument("--rates", default="1e-4,1e-5,1e-6", help="the full-rank phase's rates")
    p.add_argument("--data-dir", help="the UCI data's folder (default: $UCI_DIR, else the user cache)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    names = args.datasets.split(",")
    try:
        rates = [float(r) for r in args.rates.split(",")]
        for name in names:
            uci.verify(name, uci.resolve_dir(args.data_dir))
    except (ValueError, uci.UCIError) as err:
        print(f"uci_fullrank: {err}", file=sys.stderr)
        return 2
    rows = []
    print(f"{'data set':<9} {'q':<10} {'rate':>7} {'ELBO first 200':>15} {'ELBO last 1000':>15} {'RMSE':>7} {'LL':>7}")
    for name in names:
        for r in study(name, rates, args.data_dir):
            rows.append(r)
            print(f"{r['uci']:<9} {r['q']:<10} {r['rate']:>7.0e} {r['elbo_first200']:>15.1f} {r['elbo_final']:>15.1f} "
                  f"{r['rmse']:>7.3f} {r['ll']:>7.3f}", flush=True)
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
