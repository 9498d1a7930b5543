"""Command-line pieces shared by the experiment scripts: one-line errors, checked numbers, run folders."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):  # one line on stderr, exit 2 (argparse's code)
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def nonneg_float(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def run_dir(out: Path, dataset: str, prior: str, hyperprior: str, seed: int) -> Path:
    """``<out>/<dataset>/<prior>-<hyperprior>-s<seed>``: every experiment's output contract."""
    return out / dataset / f"{prior}-{hyperprior}-s{seed}"


class UsageError(ValueError):
    """A bad combination of arguments, found after parsing."""


def check_writable(path: Path, flag: str) -> None:
    """``path`` is, or can be created as, a writable folder."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {existing} is not a writable folder")


def checkpoints(target: Path, resume: bool) -> tuple[Path, Path | None]:
    """Where a fit into run folder ``target`` checkpoints, and what ``--resume`` continues from.

    A running fit checkpoints next to its run folder; a finished run keeps its
    final state as ``variational.nc`` inside it, so ``--resume`` on a finished
    run re-evaluates it.
    """
    running, finished = target.parent / f"{target.name}.checkpoint.nc", target / "variational.nc"
    if not resume:
        return running, None
    for path in (running, finished):
        if path.is_file():
            return running, path
    raise UsageError(f"--resume: no checkpoint to resume from ({running} and {finished} are absent)")
