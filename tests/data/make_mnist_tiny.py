"""Regenerate ``tests/data/mnist_tiny/``: the first 600 training and 200 test MNIST examples.

Cut from the real files in ``$MNIST_DIR``, else ``<workspace>/shared/data/mnist``, which are
verified first. Output is byte-for-byte reproducible (gzip level 9, mtime 0, no file name).

    python tests/data/make_mnist_tiny.py
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bnn_zoo.data import mnist  # noqa: E402

OUT = Path(__file__).resolve().parent / "mnist_tiny"
SIZES = {"train": 600, "test": 200}


def idx_bytes(a: np.ndarray) -> bytes:
    """``a`` (uint8, 1-D or 3-D) as IDX: magic, big-endian uint32 dims, data."""
    magic = {1: 0x0801, 3: 0x0803}[a.ndim]
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in a.shape)
    return header + np.ascontiguousarray(a, np.uint8).tobytes()


def main() -> None:
    src = Path(os.environ.get("MNIST_DIR") or ROOT.parent / "shared" / "data" / "mnist")
    paths = mnist.fetch(src, mirrors=())
    OUT.mkdir(exist_ok=True)
    sums = {}
    for key, name in mnist.FILES.items():
        mnist.verify(paths[key], mnist.CHECKSUMS[name])
        raw = idx_bytes(mnist.read_idx(paths[key])[:SIZES[key.split("_")[0]]])
        (OUT / f"{name}.gz").write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
        sums[name] = hashlib.sha256(raw).hexdigest()
    (OUT / "SHA256SUMS.raw.txt").write_text(
        "".join(f"{sums[n]}  {n}\n" for n in sorted(sums)))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
