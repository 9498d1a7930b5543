"""The GPU kit's steps, each a command under its own time limit: the devices, the fast tests, the
ADVI step benchmarks, an MNIST CNN fit and the sweep's throughput. Every result goes into one JSON
file, ``OUT_DIR/results.json``, and the logs, run folders and figures into ``OUT_DIR/logs.tar.gz``
(two files, so that they come back from a node that returns few); the steps work in ``$WORK``
(default /tmp/bnn-zoo-gpu-work). run.sh calls this.

``QUICK=1`` runs each step with tiny settings (the dry run on a CPU); the environment variables
below set the full run's sizes and limits.
"""

import json
import math
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

QUICK = os.environ.get("QUICK") == "1"
PY = sys.executable


def env(name: str, full, quick):
    return type(full)(os.environ.get(name, quick if QUICK else full))


CNN_EPOCHS = env("CNN_EPOCHS", 5, 1)
SWEEP_BATCH = env("SWEEP_BATCH", 384, 4)
SWEEP_FITS = env("SWEEP_FITS", 3, 1)  # fits timed one at a time and in a small task (0: the big task alone)
SWEEP_WARMUP = env("SWEEP_WARMUP", 1, 1)  # 0: time each path's first run, compilation included
BLUNDELL_EPOCHS = env("BLUNDELL_EPOCHS", 0, 0)  # Blundell's 2x1200 scale mixture, the paper's objective
# Its optimiser: the kit's default is the product's (Adam at 1e-3); Blundell et al. used plain SGD
# with a learning rate of 1e-3, 1e-4 or 1e-5 (BLUNDELL_OPTIMIZER=sgd BLUNDELL_LR=1e-3).
BLUNDELL_OPTIMIZER = os.environ.get("BLUNDELL_OPTIMIZER", "adam")
BLUNDELL_LR = os.environ.get("BLUNDELL_LR", "1e-3")

DEVICES = """
import json, jax
devices = jax.devices()
print(json.dumps({"platform": devices[0].platform, "device_kind": devices[0].device_kind,
                  "count": len(devices), "jax": jax.__version__,
                  "x64": bool(jax.config.jax_enable_x64)}))
"""

STEPS = [
    # name, time limit (s), command
    ("devices", 60, [PY, "-c", DEVICES]),
    ("tests", env("TESTS_LIMIT", 300, 300),
     [PY, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
     + (os.environ["TESTS"].split(",") if os.environ.get("TESTS") else ["tests/test_engine.py"]
        + ([] if QUICK else ["tests/test_posterior.py", "tests/test_estimators.py", "tests/test_ops.py"]))),
    ("advi_speed_mlp400", env("ADVI_LIMIT", 200, 300),
     [PY, "-m", "benchmarks.advi_speed", "--model", "mlp400", "--json", "{work}/advi_speed_mlp400.json"]
     + (["--steps", "20", "--blocks", "2"] if QUICK else ["--steps", "2000", "--blocks", "10"])),
    ("advi_speed_cnn", env("ADVI_LIMIT", 200, 300),
     [PY, "-m", "benchmarks.advi_speed", "--model", "cnn", "--json", "{work}/advi_speed_cnn.json"]
     + (["--steps", "4", "--blocks", "2"] if QUICK else ["--steps", "600", "--blocks", "5"])),
    ("mnist_cnn", env("CNN_LIMIT", 360, 300),
     [PY, "-m", "bnn_zoo", "mnist-cnn", "--epochs", str(CNN_EPOCHS), "--no-progress",
      "--out", "{work}/runs/mnist_cnn", "--figures", "{work}/figures"]
     + (["--limit-train", "1000", "--draws", "3"] if QUICK else [])),
    ("sweep_speed", env("SWEEP_LIMIT", 300, 300),
     [PY, "-m", "benchmarks.sweep_speed", "--float32", "--batch", str(SWEEP_BATCH)]
     + (["--fits", "1", "--steps", "200"] if QUICK else ["--fits", str(SWEEP_FITS)])
     + ([] if SWEEP_WARMUP else ["--no-warmup"])),
]
STEPS.append(("sweep_study", env("STUDY_LIMIT", 300, 300),
              [PY, "-m", "bnn_zoo", "sweep", "--out", "{work}/study", "--datasets", "moons,circles",
               "--noise", "0.1,0.2,0.3,0.4,0.5", "--all-priors", "--seeds", "2" if QUICK else "10", "--float32",
               "--workers", "1", "--no-progress"] + (["--steps", "200", "--n-test", "500"] if QUICK else [])))
if BLUNDELL_EPOCHS:
    STEPS.append(("mnist_bbb_2x1200", env("BLUNDELL_LIMIT", 570, 570),
                  [PY, "-m", "bnn_zoo", "mnist-bbb", "--hidden", "1200", "--prior", "scale_mixture",
                   "--beta", "1", "--kl-weighting", "blundell", "--epochs", str(BLUNDELL_EPOCHS),
                   "--optimizer", BLUNDELL_OPTIMIZER, "--lr", BLUNDELL_LR,
                   "--prune", "--no-progress", "--out", "{work}/runs/mnist_bbb_2x1200",
                   "--figures", "{work}/figures"]))

# ONLY=a,b runs those steps alone (`devices` always runs): a node whose commands may take at most
# 10 minutes runs the kit in parts (README).
ONLY = [n for n in os.environ.get("ONLY", "").split(",") if n]
unknown = set(ONLY) - {name for name, _, _ in STEPS}
if unknown:
    sys.exit(f"steps.py: unknown steps in ONLY: {', '.join(sorted(unknown))}; "
             f"valid: {', '.join(name for name, _, _ in STEPS)}")
if ONLY:  # in ONLY's order
    STEPS = [step for name in ("devices", *ONLY) for step in STEPS if step[0] == name]


def parse(name: str, work: Path, stdout: str):
    """What a step measured, read from the files it wrote or its output."""
    if name == "devices":
        return json.loads(stdout.strip().splitlines()[-1])
    if name == "tests":
        counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", stdout)}
        return counts
    if name.startswith("advi_speed"):
        return json.loads((work / f"{name}.json").read_text())
    if name.startswith("mnist"):
        [metrics] = [json.loads(p.read_text()) for p in (work / "runs" / name).rglob("metrics.json")]
        epochs = metrics.get("epochs") or 1
        metrics["seconds_per_epoch"] = metrics["fit_seconds"] / epochs
        return metrics
    if name == "sweep_speed":
        rates = {m.group(1).strip(): float(m.group(2))
                 for m in re.finditer(r"^(.*?)\s+\d+ fits\s+[\d.]+ s\s+([\d.]+) fits/s", stdout, re.M)}
        ratios = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(.*?): ([\d.]+)x the fits", stdout, re.M)}
        splits = [dict(zip(("fit_program_ms", "fit_compile_ms", "evaluation_ms", "evaluation_compile_ms", "host_ms"),
                           map(float, m)))
                  for m in re.findall(r"split per fit: fit program ([\d.]+) ms \(compiling and its first chunk "
                                      r"([\d.]+)\), evaluation program ([\d.]+) ms, compiling it ([\d.]+) ms, "
                                      r"host (-?[\d.]+) ms", stdout)]
        return {"fits_per_second": rates, "x_one_at_a_time": ratios, "split": splits}
    if name == "sweep_study":
        m = re.search(r"(\d+) records in ([\d.]+) s \(([\d.]+) records/s\)", stdout)
        if not m:
            return None
        result = {"records": int(m.group(1)), "seconds": float(m.group(2)), "records_per_second": float(m.group(3))}
        return {**result, **study_split(work, result["seconds"])}
    return None


def study_split(work: Path, wall: float) -> dict:
    """The study's time split, summed over the records of the fits it made: the fit programs and
    their compilation, the evaluation and its compilation, the tasks in all, and the client (the
    wall's rest); and the XLA programs the tasks built. Read from the per-fit records, so that a study stopped at its limit reports too."""
    import pandas as pd

    from bnn_zoo.experiments.sweep.fits import TIMES, time_split
    paths = sorted((work / "study" / "records").glob("*.parquet"))
    if not paths:
        return {}
    sums = time_split(pd.concat([pd.read_parquet(p) for p in paths]).to_dict("records"))
    split = {"records": sums["fits"], "sums_seconds": {c: round(sums[c], 1) for c in TIMES if c in sums}}
    if "xla_programs" in sums:  # the XLA programs the study's tasks built, helpers included
        split["xla_programs"] = int(round(sums["xla_programs"]))
    if "task_seconds" in sums:
        split["client_seconds"] = round(wall - sums["task_seconds"], 1)
    return split


def finite(value):
    """``value`` with every NaN or infinity replaced by None, so that results.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def main(out_dir: str) -> int:
    out = Path(out_dir).resolve()
    work = Path(os.environ.get("WORK", "/tmp/bnn-zoo-gpu-work")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    results = {"quick": QUICK, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "steps": {}}
    if (out / "results.json").exists():  # a kit run in parts (ONLY=...) adds its steps to the file
        earlier = json.loads((out / "results.json").read_text())
        results["steps"] = earlier.get("steps", {})
    for name, limit, command in STEPS:
        command = [c.replace("{work}", str(work)) for c in command]
        print(f"== {name} (at most {limit} s): {' '.join(command)}", flush=True)
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=limit)
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, stdout, stderr = "timeout", e.stdout or "", e.stderr or ""
            stdout, stderr = [s.decode() if isinstance(s, bytes) else s for s in (stdout, stderr)]
        seconds = time.perf_counter() - start
        (work / "logs" / f"{name}.log").write_text(f"$ {' '.join(command)}\n{stdout}\n--- stderr\n{stderr}")
        step = {"command": command, "rc": rc, "seconds": round(seconds, 1)}
        try:
            step["result"] = (parse(name, work, stdout) if rc == 0 or name == "tests"
                              else study_split(work, seconds) if name == "sweep_study" else None)
        except Exception as e:  # a step's output that cannot be read is recorded, not fatal
            step["parse_error"] = f"{type(e).__name__}: {e}"
        results["steps"][name] = step
        if name == "devices" and rc == 0:
            results["device"] = step["result"]
        print(f"   rc {rc}, {seconds:.1f} s; {json.dumps(step.get('result'))[:300]}", flush=True)
        tmp = out / "results.json.tmp"
        tmp.write_text(json.dumps(finite(results), indent=1, allow_nan=False))
        tmp.replace(out / "results.json")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        for part in ("logs", "runs", "figures", "study"):
            if (work / part).exists():
                tar.add(work / part, arcname=part,
                        filter=lambda info: None if info.name.endswith((".nc", "variational.nc")) else info)
    failed = [name for name, _, _ in STEPS if results["steps"][name]["rc"] != 0]
    print(f"results in {out / 'results.json'}; failed steps: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpu-results"))
