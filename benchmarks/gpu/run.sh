#!/usr/bin/env bash
# Run on the GPU node, from the checkout's root (after benchmarks/gpu/prepare.sh filled .whl/):
#     bash benchmarks/gpu/run.sh [OUT_DIR]
# Installs the carried wheels into a target folder (no network), prints the devices JAX sees, and
# runs the kit's steps (benchmarks/gpu/steps.py), each under its own time limit, into OUT_DIR
# (default $OUT, else gpu-results/): results.json and logs.tar.gz. QUICK=1 runs tiny settings.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-gpu-results}}
SITE=${SITE:-/tmp/bnn-zoo-site}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "run.sh: no wheels in .whl/ (run benchmarks/gpu/prepare.sh first, and carry .whl)" >&2
    exit 2
fi
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl || { echo "run.sh: installing the wheels failed" >&2; exit 2; }
# EXTRA_PYTHONPATH: packages that stand in for the node's own (the dry run without a GPU).
export PYTHONPATH="$SITE${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}"
export MNIST_DIR=$PWD/.whl/mnist
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/bnn-zoo-jax-cache}
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
exec "$PYTHON" benchmarks/gpu/steps.py "$OUT_DIR"
