"""``bnn-zoo <command> [flags]``: every experiment, the prior sweep and its report behind one command.

Each command is the ``main`` of a module of :mod:`bnn_zoo.experiments`
(:data:`EXPERIMENTS`, :data:`TOOLS`, which also hold the line ``bnn-zoo
--help`` shows for it), imported only when run, so that ``bnn-zoo --help``
and a mistyped command answer without loading the engine. ``bnn-zoo
<command> --help`` lists the command's flags.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

__all__ = ["EXPERIMENTS", "TOOLS", "Command", "main"]


class Command(NamedTuple):
    """A command of ``bnn-zoo``: the module that runs it and what it does, in one line.

    Parameters
    ----------
    module : str
        The module of :mod:`bnn_zoo.experiments` whose ``main(argv, prog)`` runs it, by its
        path below the package (``family.module``, e.g. ``"toy.priors"``).
    summary : str
        What it does, as ``bnn-zoo --help`` lists it.
    """

    module: str
    summary: str


#: The experiments, command -> :class:`Command`. ``moons`` and ``circles`` run the toy
#: experiment on that data set alone (``main(argv, prog, dataset)``).
EXPERIMENTS = {
    "moons": Command("toy.priors", "the toy prior study: a hierarchical BNN on the moons data, one prior pair "
                                   "or all"),
    "circles": Command("toy.priors", "the same on the circles data"),
    "toy": Command("toy.priors", "the same on several data sets in one command (--datasets)"),
    "regression": Command("regression.command", "1-D regression and its uncertainty away from the data, over KL "
                                                "weights"),
    "mnist-cnn": Command("mnist.cnn", "Zharikov et al.'s Bayesian CNN on MNIST by minibatch ADVI"),
    "mnist-bbb": Command("mnist.bbb", "Bayes by Backprop on MNIST MLPs, and pruning by signal-to-noise"),
    "uci": Command("uci.command", "the UCI regression benchmark: nine data sets, six methods, one table (Dask)"),
}
#: The tools, command -> :class:`Command`: the prior sweep, its report, and the comparison with
#: other methods.
TOOLS = {
    "sweep": Command("sweep.command", "prior sweeps: many toy fits, vectorised and resumable, on Dask"),
    "report": Command("sweep.report", "a sweep's paired comparisons, figures and verdict (bnn-zoo report "
                                      "SWEEP_DIR)"),
    "alternatives": Command("alternatives.command", "ADVI against NUTS, SGLD, deep ensembles, SWAG and MC dropout"),
}


def _help(usage: str) -> str:
    width = max(map(len, {**EXPERIMENTS, **TOOLS})) + 2
    sections = [usage]
    for title, commands in (("experiments", EXPERIMENTS), ("tools", TOOLS)):
        lines = [f"  {name:<{width}}{command.summary}" for name, command in commands.items()]
        sections.append("\n".join([f"{title}:", *lines]))
    return "\n\n".join(sections)


def main(argv=None) -> int:
    """Run ``bnn-zoo <command> [flags]``: the console script's entry point.

    ``moons`` and ``circles`` run the toy experiment on that data set;
    every other command runs its module's ``main``. A Ctrl-C while the
    command's module loads is held until it has loaded (a
    ``KeyboardInterrupt`` inside the engine's import can leave a module
    half-imported, or abort the process); one anywhere, one line and exit
    code 130.

    Parameters
    ----------
    argv : sequence of str, optional
        The command and its flags; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code: the command's own; 0 for ``--help`` (the commands,
        each with a line of what it does); 2 for no command or an unknown
        one (a line on stderr); 130 on an interrupt.

    Examples
    --------
    >>> from bnn_zoo.cli import main
    >>> main(["--help"])
    usage: bnn-zoo {moons,circles,toy,regression,mnist-cnn,mnist-bbb,uci,sweep,report,alternatives} [flags]   (bnn-zoo <command> --help)
    <BLANKLINE>
    experiments:
      moons         the toy prior study: a hierarchical BNN on the moons data, one prior pair or all
    ...
    0
    >>> main(["moon"])   # a command it does not know: one line on stderr, exit code 2
    2
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {**EXPERIMENTS, **TOOLS}
    usage = f"usage: bnn-zoo {{{','.join(commands)}}} [flags]   (bnn-zoo <command> --help)"
    if argv and argv[0] in ("-h", "--help"):
        print(_help(usage))
        return 0
    if not argv or argv[0] not in commands:
        problem = f"unknown command {argv[0]!r}" if argv else "no command"
        print(f"bnn-zoo: error: {problem}; valid: {', '.join(commands)} (bnn-zoo --help says what each does)",
              file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    try:  # a Ctrl-C while the engine loads, or in a command without its own handler: one line
        from bnn_zoo.experiments.harness.runtime import hold_interrupts, keep_interrupts

        with hold_interrupts():
            import matplotlib

            matplotlib.use("Agg")  # the commands write figures and open no window
            module = importlib.import_module(f"bnn_zoo.experiments.{commands[name].module}")
        with keep_interrupts():  # a Ctrl-C that Python drops before the command's own handler runs
            if name in ("moons", "circles"):
                return module.main(rest, prog=f"bnn-zoo {name}", dataset=name)
            return module.main(rest, prog=f"bnn-zoo {name}")
    except KeyboardInterrupt:
        print(f"bnn-zoo {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
