import atexit
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from bnn_zoo.cache import compile_cache_env

ROOT = Path(__file__).resolve().parents[1]
# A shell without job control starts a background job with SIGINT ignored, and every process
# it starts inherits that (Python installs its KeyboardInterrupt handler only where SIGINT is
# not ignored): the Ctrl-C tests need the default, here and in the commands they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
os.environ.setdefault("MPLBACKEND", "Agg")
# JAX's compiled programs, every one of them, in the folder the commands keep them in (bnn-zoo's
# user cache, `bnn_zoo.cache.compile_cache_env`), for the test processes, their workers and the
# commands they run alike: a program compiled once is read back by every later test and run. A
# program is stored under a key of its code, JAX's version and the flags, so a cached program
# is the program a compilation would make. BNN_ZOO_TEST_JAX_CACHE=off keeps them in a folder of
# this session only, removed when it ends (a run that compiles everything, as a new machine does).
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and os.environ.get("BNN_ZOO_TEST_JAX_CACHE", "on") == "off":
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="bnn-zoo-jax-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
for _name, _value in compile_cache_env().items():
    os.environ.setdefault(_name, _value)


def command_env(**extra) -> dict:
    """The environment of a command a test runs as a user would: the installed package, no display."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "MPLBACKEND": "Agg",
            "HOME": os.environ.get("HOME", "/tmp"),
            **{k: os.environ[k] for k in compile_cache_env()},
            **extra}


def without_figures(command):
    """A toy command (``bnn_zoo.experiments.toy.priors.experiment``) whose runs draw no figures (the
    uncertainty map and its grid, LOO-PIT, reliability, psense): the same flags, fits, records and
    DataTrees, for tests whose subject is not a figure."""
    return dataclasses.replace(command, configs=lambda args: [
        dataclasses.replace(c, uncertainty_map=False, sensitivity_plot=False, grid=False)
        for c in command.configs(args)])


# --- MNIST fixture: the first 600 training / 200 test examples (tests/data/make_mnist_tiny.py)
MNIST_TINY = ROOT / "tests" / "data" / "mnist_tiny"


@pytest.fixture
def mnist_tiny_dir() -> Path:
    """The folder of the tiny gzip IDX fixture (read-only: copy it before changing files)."""
    return MNIST_TINY


def mnist_tiny_sums() -> dict[str, str]:
    """Raw file name -> sha256 of its decompressed content, from the fixture's SHA256SUMS.raw.txt."""
    sums = {}
    for line in (MNIST_TINY / "SHA256SUMS.raw.txt").read_text().splitlines():
        digest, name = line.split()
        sums[name] = digest
    return sums


@pytest.fixture
def tiny_checksums() -> dict[str, str]:
    """:func:`mnist_tiny_sums`, as a fixture."""
    return mnist_tiny_sums()
