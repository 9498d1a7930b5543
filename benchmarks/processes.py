"""What the benchmarks that time fresh Python processes do first: write every module's bytecode.

A process imports its modules from their cached bytecode (``__pycache__/*.pyc``) where it is
there, else compiles them from source. ``pip install`` writes the bytecode of what it installs, so
a user's environment has it; an environment installed with ``--no-compile`` (the Makefile's, to
install faster) gets it as each module is first imported, unless ``PYTHONDONTWRITEBYTECODE`` is set
(some containers set it), in which case every process compiles again. The time a fresh process
then spends compiling modules it imports lazily (numpyro's inside ``pm.sample``, ``dask.array``
inside xarray, the engine's wings) is no part of either method's own: with none written,
``auto_speed``'s regression on ``pm.Data`` took 1.1 s, cache filled, against 0.7 s with it.
:func:`write_bytecode` writes it before the first timed process, as ``pip install`` would have.
"""

from __future__ import annotations

import compileall
import os
import sysconfig
from pathlib import Path

__all__ = ["write_bytecode"]

#: The project's folders mapped into the ``bnn_zoo`` package, and the benchmarks'.
PROJECT = ("data", "evaluation", "experiments", "inference", "models", "src", "benchmarks")


def write_bytecode() -> None:
    """Write the bytecode of the environment's packages and of the project, where it is missing or
    older than its source (a few seconds once written)."""
    root = Path(__file__).resolve().parent.parent
    folders = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    folders |= {str(root / name) for name in PROJECT if (root / name).is_dir()}
    for folder in sorted(folders):
        compileall.compile_dir(folder, quiet=2, workers=os.cpu_count() or 1)
