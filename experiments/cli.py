"""Command-line pieces shared by the experiments: one-line errors and checked values."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


class UsageError(ValueError):
    """A bad combination of arguments, found after parsing: one line on stderr, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except ``None`` ones (their help says what happens)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _number(kind, text):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None


def positive_int(text):
    value = _number(int, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def nonneg_int(text):
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def positive_float(text):
    value = _number(float, text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return value


def nonneg_float(text):
    value = _number(float, text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be >= 0 and finite, got {text}")
    return value


def unit_interval(text):
    value = _number(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def fraction(text):
    value = _number(float, text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def names(valid, what: str = "name"):
    """A comma-separated list of distinct names from ``valid``."""
    def parse(text):
        items = [n for n in text.split(",") if n]
        unknown = [n for n in items if n not in valid]
        if unknown or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(unknown) or '(empty list)'}; valid: {', '.join(sorted(valid))}")
        if len(set(items)) < len(items):
            raise argparse.ArgumentTypeError(f"repeated {what} in {text!r}")
        return items
    return parse


def int_list(text):
    """Comma-separated positive integers, e.g. ``10,10``."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be integers >= 1, got {text!r}")
    return values


def check_writable(path: Path, flag: str) -> None:
    """``path`` is, or can be created as, a writable folder."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {existing} is not a writable folder")
