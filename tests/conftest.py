import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MPLBACKEND", "Agg")
# JAX's compilation cache (the experiments turn it on) in a folder of this test session only,
# made by the first process (xdist's workers inherit it) and removed when that process ends.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="bnn-zoo-jax-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def command_env(**extra) -> dict:
    """The environment of a command a test runs as a user would: the installed package, no display."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "MPLBACKEND": "Agg",
            "HOME": os.environ.get("HOME", "/tmp"),
            "JAX_COMPILATION_CACHE_DIR": os.environ["JAX_COMPILATION_CACHE_DIR"], **extra}


# --- MNIST fixture: the first 600 training / 200 test examples (tests/data/make_mnist_tiny.py)
MNIST_TINY = ROOT / "tests" / "data" / "mnist_tiny"


@pytest.fixture
def mnist_tiny_dir() -> Path:
    """The folder of the tiny gzip IDX fixture (read-only: copy it before changing files)."""
    return MNIST_TINY


@pytest.fixture
def tiny_checksums() -> dict[str, str]:
    """Raw file name -> sha256 of its decompressed content, from the fixture's SHA256SUMS.raw.txt."""
    sums = {}
    for line in (MNIST_TINY / "SHA256SUMS.raw.txt").read_text().splitlines():
        digest, name = line.split()
        sums[name] = digest
    return sums
