"""``bnn-zoo <command> [flags]``: every experiment, the prior sweep and its report behind one command.

Each command is the ``main`` of a module of :mod:`bnn_zoo.experiments`
(:data:`EXPERIMENTS`, :data:`TOOLS`), imported only when run, so that
``bnn-zoo --help`` and a mistyped command answer without loading the
engine. ``bnn-zoo <command> --help`` lists the command's flags.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["EXPERIMENTS", "TOOLS", "main"]

#: The experiments: command -> module of :mod:`bnn_zoo.experiments` (each has ``main(argv, prog)``).
EXPERIMENTS = {
    "moons": "moons",
    "circles": "circles",
    "toy": "toy_priors",
    "regression": "regression",
    "mnist-cnn": "mnist_cnn",
    "mnist-bbb": "mnist_bbb",
    "uci": "uci",
}
#: The tools: command -> module of :mod:`bnn_zoo.experiments` (the prior sweep, its report, and the
#: comparison with other methods).
TOOLS = {"sweep": "sweep", "report": "report", "alternatives": "alternatives"}


def main(argv=None) -> int:
    """Run ``bnn-zoo <command> [flags]``: the console script's entry point.

    ``moons`` and ``circles`` run the toy experiment on that data set;
    every other command runs its module's ``main``.

    Parameters
    ----------
    argv : sequence of str, optional
        The command and its flags; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code: the command's own; 0 for ``--help``; 2 for no
        command (after printing the usage) or an unknown one (with an error
        on stderr).

    Examples
    --------
    >>> from bnn_zoo.cli import main
    >>> main(["--help"])
    usage: bnn-zoo {moons,circles,toy,regression,mnist-cnn,mnist-bbb,uci,sweep,report,alternatives} [flags]   (bnn-zoo <command> --help)
    0
    >>> code = main(["moons", "--noise", "0.3", "--no-progress"])   # as ``bnn-zoo moons --noise 0.3``
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {**EXPERIMENTS, **TOOLS}
    usage = f"usage: bnn-zoo {{{','.join(commands)}}} [flags]   (bnn-zoo <command> --help)"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(f"bnn-zoo: error: unknown command {name!r}; valid: {', '.join(commands)}",
              file=sys.stderr)
        return 2
    try:  # a Ctrl-C while the engine loads, or in a command without its own handler: one line
        import matplotlib

        matplotlib.use("Agg")  # the commands write figures and open no window
        if name in ("moons", "circles"):
            from bnn_zoo.experiments.toy_priors import main as toy_main

            return toy_main(rest, prog=f"bnn-zoo {name}", dataset=name)
        module = importlib.import_module(f"bnn_zoo.experiments.{commands[name]}")
        return module.main(rest, prog=f"bnn-zoo {name}")
    except KeyboardInterrupt:
        print(f"bnn-zoo {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
