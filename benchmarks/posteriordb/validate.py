"""Check each PyMC translation of a posteriordb posterior against posteriordb's reference, by NUTS.

    python -m benchmarks.posteriordb.validate [--posteriors NAME,...] [--json FILE]

Each posterior is sampled by ``pm.sample`` with NumPyro's NUTS (4 chains, run one after another, of
1,000 draws after 1,000 tuning steps, target acceptance 0.95, seed 0). Per scalar of every variable
the reference holds: the error of the NUTS mean in units of the reference sd, and the ratio of the
NUTS sd to the reference sd, both against the mean and sd of all 10,000 reference draws. A
translation passes when every mean lies within 0.2 reference sd and every sd ratio within 0.8 to
1.25. One line per posterior goes to stdout, and all rows to ``--json`` (by default
``benchmarks/results/posteriordb_validation.json``), written to a temporary file and renamed.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

from bnn_zoo.inference.support.io import write_json
from benchmarks.posteriordb import POSTERIORS, reference_moments

__all__ = ["MEAN_TOL", "SD_RANGE", "compare", "validate", "main"]

DEFAULT_JSON = Path(__file__).resolve().parents[1] / "results" / "posteriordb_validation.json"
#: The largest |mean - reference mean| / reference sd a passing translation may show.
MEAN_TOL = 0.2
#: The range the ratio sd / reference sd of a passing translation lies in.
SD_RANGE = (0.8, 1.25)


def compare(posterior, moments: dict) -> dict:
    """The largest standardised mean error and the range of sd ratios over every reference scalar.

    Parameters
    ----------
    posterior : xarray.Dataset
        Draws with dims ``("chain", "draw", ...)``, holding every variable of ``moments``.
    moments : dict
        Variable name -> ``(mean, sd)`` of the reference, as `reference_moments` returns.

    Returns
    -------
    dict
        ``max_mean_error``, ``sd_ratio_min``, ``sd_ratio_max``, ``worst`` (the scalar with the
        largest mean error, as ``name[index]``) and ``passed``.
    """
    errors, ratios, labels = [], [], []
    for var, (ref_mean, ref_sd) in moments.items():
        draws = np.asarray(posterior[var]).reshape(-1, *np.shape(ref_mean))
        err = np.abs(draws.mean(0) - ref_mean) / ref_sd
        errors += list(np.ravel(err))
        ratios += list(np.ravel(draws.std(0, ddof=1) / ref_sd))
        labels += [var if np.ndim(ref_mean) == 0 else f"{var}[{i}]" for i in range(np.size(ref_mean))]
    worst = int(np.argmax(errors))
    passed = max(errors) <= MEAN_TOL and SD_RANGE[0] <= min(ratios) and max(ratios) <= SD_RANGE[1]
    return {"max_mean_error": float(max(errors)), "sd_ratio_min": float(min(ratios)),
            "sd_ratio_max": float(max(ratios)), "worst": labels[worst], "passed": bool(passed)}


def validate(name: str, seed: int = 0) -> dict:
    """Sample posterior ``name`` by NUTS and compare it with posteriordb's reference.

    Parameters
    ----------
    name : str
        A key of `POSTERIORS`.
    seed : int, default 0
        ``pm.sample``'s random seed.

    Returns
    -------
    dict
        The posterior's row: ``seconds`` (compilation included), ``rhat_max``, ``divergences`` and
        the fields of `compare`.
    """
    model = POSTERIORS[name]()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=1000, tune=1000, chains=4, target_accept=0.95, random_seed=seed, model=model,
                          nuts_sampler="numpyro", nuts_sampler_kwargs={"chain_method": "sequential"},
                          progressbar=False, compute_convergence_checks=False)
    seconds = time.perf_counter() - start
    posterior = idata["posterior"].to_dataset()
    moments = reference_moments(name)
    rhat = az.rhat(posterior[list(moments)])
    row = {"posterior": name, "seconds": round(seconds, 1),
           "rhat_max": float(max(float(v.max()) for v in rhat.data_vars.values())),
           "divergences": int(idata["sample_stats"]["diverging"].sum())}
    return row | compare(posterior, moments)


def _line(row: dict) -> str:
    return (f"{row['posterior']:42s} {row['seconds']:7.1f} s  max |mean err| {row['max_mean_error']:.3f} sd "
            f"({row['worst']})  sd ratio {row['sd_ratio_min']:.3f}-{row['sd_ratio_max']:.3f}  "
            f"r-hat max {row['rhat_max']:.3f}  divergences {row['divergences']}  "
            f"{'PASS' if row['passed'] else 'FAIL'}")


def main(argv: list[str] | None = None) -> int:
    """Validate the named posteriors (all six by default) and write their rows.

    Parameters
    ----------
    argv : list of str, optional
        The command line, ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        0 when every posterior passes, 1 when one fails, 2 on an unknown posterior name.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posteriors", default=",".join(POSTERIORS), help="comma-separated names")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where the rows go")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.posteriors.split(",") if n.strip()]
    unknown = [n for n in names if n not in POSTERIORS]
    if unknown:
        print(f"unknown posterior {', '.join(unknown)}; known: {', '.join(POSTERIORS)}", file=sys.stderr)
        return 2
    rows = []
    for name in names:
        rows.append(validate(name))
        print(_line(rows[-1]), flush=True)
        write_json(args.json, {"mean_tol": MEAN_TOL, "sd_range": list(SD_RANGE), "rows": rows})  # rows so far
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
