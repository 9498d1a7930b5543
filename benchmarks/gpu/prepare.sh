#!/usr/bin/env bash
# Run on a machine with PyPI access, from the checkout's root: fills the ignored folder .whl/ with
# what an offline GPU node needs to run benchmarks/gpu/run.sh: the wheels it lacks (Python 3.12,
# manylinux x86-64), bnn-zoo's own wheel, and MNIST's four files. Checks that the working tree
# and .whl/ together stay under the 64 MiB that travel to the node.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LIMIT=$((64 * 1024 * 1024))
WHL=.whl

rm -rf "$WHL"
mkdir -p "$WHL/mnist"
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
           manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
grep -v '^#' benchmarks/gpu/requirements.txt | grep . > "$WHL/requirements.txt"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none "${platforms[@]}" --platform any -d "$WHL" -r "$WHL/requirements.txt"
rm "$WHL/requirements.txt"
"$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$WHL" . 2>/dev/null \
    || "$PYTHON" -m pip wheel -q --no-deps -w "$WHL" .

# MNIST: $MNIST_DIR, else the project's shared copy beside the checkout, else the user's cache
# (where bnn-zoo downloads it); bnn-zoo checks each file's SHA-256 when it reads it.
for dir in "${MNIST_DIR:-}" ../shared/data/mnist "${XDG_CACHE_HOME:-$HOME/.cache}/bnn-zoo/mnist"; do
    if [ -n "$dir" ] && ls "$dir"/train-images-idx3-ubyte.gz >/dev/null 2>&1; then
        cp "$dir"/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "$WHL/mnist/"
        break
    fi
done
if [ ! -f "$WHL/mnist/t10k-labels-idx1-ubyte.gz" ]; then
    echo "prepare.sh: no MNIST found (set MNIST_DIR, or run 'bnn-zoo mnist-cnn --epochs 1' once to download it)" >&2
    exit 2
fi
"$PYTHON" -c "from bnn_zoo.data import mnist; mnist.load('$WHL/mnist', download=False)" 2>/dev/null \
    || { echo "prepare.sh: the MNIST files in $WHL/mnist fail their checksums" >&2; exit 2; }

tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
wheels=$(du -sb "$WHL" | cut -f1)
total=$((tree + wheels))
printf 'prepare.sh: %d wheels, %.1f MiB in %s; with the working tree %.1f MiB of the 64 MiB that travel\n' \
    "$(ls "$WHL"/*.whl | wc -l)" "$(echo "$wheels / 1048576" | bc -l)" "$WHL" "$(echo "$total / 1048576" | bc -l)"
if [ "$total" -gt "$LIMIT" ]; then
    echo "prepare.sh: over the 64 MiB limit" >&2
    exit 2
fi
