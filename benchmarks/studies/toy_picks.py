"""When can an early pick tell which restart will reach the better optimum?

For the cases of a ``benchmarks.studies.toy_defaults`` table whose default fit fell
more than 3 nats short of the reference (and the default pair's worst seed),
fit ``--restarts`` restarts to the end at the toy defaults, keep their ELBO
traces, and replay pick rules on them: each restart's trajectory is its own
(the restarts of one fit do not interact), so keeping the best ``R`` at step
``K`` and running it on gives exactly that restart's end. About 6 minutes on
2 cores for the 13 cases of ``toy_defaults.csv`` at 16 restarts::

    python -m benchmarks.studies.toy_picks benchmarks/results/studies/toy_defaults.csv

Prints, per case, how far each rule's pick ends below the reference's ELBO,
and how many cases each rule brings within 3 nats; writes every restart's
final ELBO and accuracy to ``toy_picks.csv`` (``--name``) in ``--out``.

``--restart-peak RATE`` replays the rules under a warm restart instead of
the defaults' one cosine decay: the rate decays (cosine) from ``--lr`` to
its final value by the default pick's step, 2,000, so that the restarts are
compared near their optima, and then again from ``RATE`` over the rest::

    python -m benchmarks.studies.toy_picks benchmarks/results/studies/toy_defaults.csv --restart-peak 0.05 --name toy_picks_warm0.05.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import optax
import pandas as pd

from bnn_zoo.experiments.sweep import command as sweep, fits as sweep_fits, spec as sweep_spec
from bnn_zoo.experiments.toy import priors as toy_priors
from bnn_zoo.inference.advi import optim
from bnn_zoo.inference.advi.batch import pick_rows, pick_step
from bnn_zoo.inference.support.io import atomic_write

CASE = ["dataset", "noise", "seed", "pair"]


def rules(restarts: int) -> dict[str, tuple[int, int]]:
    """Name -> (restarts compared, step of the pick); step 0 picks by q's ELBO at the end."""
    return {"6 at 2000 (defaults)": (6, 2000), f"{restarts} at 2000": (restarts, 2000),
            f"{restarts} at 5000": (restarts, 5000), f"{restarts} at 8000": (restarts, 8000),
            f"{restarts} at the end": (restarts, 0)}


def cases(table: pd.DataFrame) -> pd.DataFrame:
    proper = table[~table.pair.str.startswith("flat")]
    default = table[table.pair == "normal-inversegamma"]
    worst = default.loc[[default["gap"].idxmax()]]
    return pd.concat([proper[proper["elbo_short"] > 3], worst]).drop_duplicates(CASE)


def warm_restart(cfg, peak: float) -> tuple[optax.Schedule, str]:
    """The rate of ``--restart-peak``, and its description: a cosine decay (:func:`optim.schedule`)
    from ``cfg.lr`` to its final rate by the default pick's step, then another from ``peak`` to
    the same rate (a ``ValueError`` if ``peak`` is not a rate above it)."""
    at, final = pick_step(toy_priors.DEFAULTS["pick_at"], cfg.steps), cfg.lr * cfg.lr_final
    first, text1 = optim.schedule("cosine", cfg.lr, at, final=cfg.lr_final)
    second, text2 = optim.schedule("cosine", peak, cfg.steps - at, final=final / peak)
    return optax.join_schedules([first, second], [at]), f"{text1}, then {text2}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.studies.toy_picks", description=__doc__.splitlines()[0])
    p.add_argument("table", type=Path, help="a table of benchmarks.studies.toy_defaults (its cases and reference_elbo)")
    p.add_argument("--restarts", type=int, default=16)
    p.add_argument("--restart-peak", type=float, default=None,
                   help="the rate of a warm restart at the default pick's step (default: none, the defaults)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/studies"))
    p.add_argument("--name", default="toy_picks.csv", help="the rows' file name in --out")
    args = p.parse_args(argv)
    if args.restarts < 6:
        print("error: --restarts must be at least 6 (the defaults' pick is one of the rules)", file=sys.stderr)
        return 2
    todo = cases(pd.read_csv(args.table))
    flags = ["--out", "unused", "--all-priors", "--datasets", ",".join(sorted(set(todo.dataset))),
             "--noise", ",".join(map(str, sorted(set(todo.noise)))), "--seeds", str(int(todo.seed.max()) + 1),
             "--restarts", str(args.restarts), "--pick-at", "0", "--float32"]
    specs = {(c.dataset, c.noise, c.seed, f"{c.prior}-{c.hyperprior}"): c
             for c in sweep_spec.specs(sweep.build_parser().parse_args(flags))}
    optimizer = None  # the cases share the toy defaults' rate and steps, so one optimizer serves them all
    if args.restart_peak is not None:
        cfg = next(iter(specs.values()))
        try:
            rate, text = warm_restart(cfg, args.restart_peak)
            optimizer = optim.described(optim.OPTIMIZERS[cfg.optimizer](rate), f"{cfg.optimizer}(lr={text})")
        except ValueError as e:
            print(f"error: --restart-peak {args.restart_peak}: {e}", file=sys.stderr)
            return 2
    rows, summary = [], []
    for case in todo.itertuples(index=False):
        cfg = specs[(case.dataset, case.noise, case.seed, case.pair)]
        split = toy_priors.data(cfg)
        batch = sweep_fits.Batch([cfg], [(split.X_train, split.y_train)], optimizer)
        observed = batch.model.observed_RVs[0].name
        final = []
        for r in range(args.restarts):
            q = batch.family.mean_and_factor(batch.params(r))
            m = sweep_fits.evaluate(batch.density, q, batch.trains[0], batch.data(split.X_test, split.y_test, cfg),
                                    split.y_test, cfg, observed)
            final.append(m["elbo_q"])
            rows.append({**dict(zip(CASE, case[:4])), "restart": r, "elbo_q": m["elbo_q"],
                         "accuracy": m["accuracy"], "reference_elbo": case.reference_elbo})
        final, trace = np.array(final), batch.out.elbo
        line = dict(zip(CASE, case[:4]))
        for name, (r, at) in rules(args.restarts).items():
            k = int(np.argmax(final[:r])) if not at else int(pick_rows(trace[:r, :at], r)[0][0])
            line[name] = case.reference_elbo - final[k]
        summary.append(line)
        print(f"{case.dataset} {case.noise} s{case.seed} {case.pair}: best of {args.restarts} "
              f"{final.max():.1f}, reference {case.reference_elbo:.1f}", flush=True)
    summary = pd.DataFrame(summary)
    shown = summary.set_index(CASE)
    print("nats below the reference, by pick rule:")
    print(shown.round(1).to_string())
    print("cases within 3 nats:", ", ".join(f"{k} {v}" for k, v in (shown <= 3).sum().items()))
    path = args.out / args.name
    atomic_write(path, lambda tmp: pd.DataFrame(rows).to_csv(tmp, index=False, float_format="%.6g"))
    print(f"rows: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
