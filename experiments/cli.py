"""Command-line pieces shared by the experiment scripts: one-line errors, checked numbers, run folders."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path


def use_compilation_cache() -> None:
    """Keep JAX's compiled programs on disk, so that a run reuses what an earlier one compiled.

    The cache is ``$XDG_CACHE_HOME/bnn-zoo/jax`` (``~/.cache/bnn-zoo/jax``)
    unless ``JAX_COMPILATION_CACHE_DIR`` names another folder. Programs are
    keyed by their XLA graph, not by the data (the engine passes data as
    arguments): the 16 models of ``--all-priors`` on circles reuse what
    moons compiled, and a second run of an experiment compiles nothing.
    Every program is kept, however fast it compiles (JAX's default keeps only
    those over 1 s): with 0.2 s, a warm run of 8 toy fits still compiled 19
    small programs (0.8 s); with 0, none.
    """
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        jax.config.update("jax_compilation_cache_dir", str(base / "bnn-zoo" / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


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
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return value


def nonneg_float(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def epoch_list(text):
    """Comma-separated positive epochs, e.g. ``80`` or ``60,80``."""
    try:
        epochs = tuple(sorted({int(e) for e in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated epochs, got {text!r}") from None
    if not epochs or epochs[0] < 1:
        raise argparse.ArgumentTypeError(f"epochs must be >= 1, got {text!r}")
    return epochs


def lr_decay(args, steps_per_epoch: int) -> dict[int, float]:
    """``fit``'s ``lr_decay`` from ``--lr-decay-epochs`` and ``--lr-decay-factor``.

    Raises :class:`UsageError` for a decay that would never happen (at or after ``--epochs``).
    """
    late = [e for e in args.lr_decay_epochs if e >= args.epochs]
    if late:
        raise UsageError(f"--lr-decay-epochs {','.join(map(str, late))} is not before --epochs "
                         f"{args.epochs}: no epoch would run at the decayed rate")
    return {e * steps_per_epoch: args.lr_decay_factor for e in args.lr_decay_epochs}


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


def run_resumable(prog: str, run, args, summary) -> int:
    """``run(args)`` of a checkpointed experiment, its errors as one line and an exit code.

    Bad input (usage, data files, a checkpoint of another fit) exits 2, a
    diverged fit 1, Ctrl-C 130 with a hint to ``--resume``; on success
    ``summary(metrics)`` is printed and the code is 0.
    """
    from data.mnist import MNISTError
    from inference import CheckpointError, NonFiniteLossError

    try:
        metrics = run(args)
    except (MNISTError, CheckpointError, UsageError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLossError as err:
        print(f"{prog}: error: {err} (try a smaller --lr or --init-std)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; add --resume to continue from the last checkpoint "
              f"(every {args.checkpoint_every} steps)", file=sys.stderr)
        return 130
    print(summary(metrics))
    return 0


def add_mnist_run_arguments(p: argparse.ArgumentParser, defaults: dict) -> None:
    """The MNIST experiments' shared flags: learning-rate decay, data, seed, checkpoints, outputs."""
    from data.mnist import NORMALIZATIONS

    p.add_argument("--lr-decay-epochs", type=epoch_list, default=(), metavar="E[,E...]",
                   help="multiply the learning rate by --lr-decay-factor after each of these "
                   "epochs (e.g. 80 with --epochs 90: the last 10 epochs at a tenth; default: none)")
    p.add_argument("--lr-decay-factor", type=positive_float, default=0.1,
                   help="factor of each learning-rate decay")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder with the four MNIST IDX files; None: $MNIST_DIR, else data/cache/mnist")
    p.add_argument("--normalize", choices=NORMALIZATIONS, default=defaults["normalize"],
                   help="pixel scaling: /255, standardise, or /126 (Blundell et al.)")
    p.add_argument("--limit-train", type=positive_int, default=None, metavar="N",
                   help="fit on the first N training images only (quick runs)")
    p.add_argument("--seed", type=int, default=defaults["seed"],
                   help="split, init, MC and minibatch seed")
    p.add_argument("--checkpoint-every", type=positive_int, default=defaults["checkpoint_every"],
                   help="steps between checkpoints")
    p.add_argument("--resume", action="store_true",
                   help="continue from this run's checkpoint (or re-evaluate a finished run)")
    p.add_argument("--out", type=Path, default=Path("results"), help="results folder")
    p.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
