"""Command-line pieces shared by the experiment scripts: one-line errors, checked numbers, run folders."""

from __future__ import annotations

import argparse
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
