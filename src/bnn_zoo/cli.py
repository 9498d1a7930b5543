"""``bnn-zoo <command> [flags]``: every experiment, the prior sweep and its report behind one command."""

from __future__ import annotations

import importlib
import sys

# command -> module of bnn_zoo.experiments (each has main(argv, prog))
EXPERIMENTS = {
    "moons": "moons",
    "circles": "circles",
    "toy": "toy",
    "regression": "regression",
    "mnist-cnn": "mnist_cnn",
    "mnist-bbb": "mnist_bbb",
}
# command -> module of bnn_zoo.experiments: many experiments' fits, their analysis, the other methods
TOOLS = {"sweep": "sweep", "report": "report", "alternatives": "alternatives"}


def main(argv=None) -> int:
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
    if name in ("moons", "circles"):
        from bnn_zoo.experiments.toy import main as toy_main

        return toy_main(rest, prog=f"bnn-zoo {name}", dataset=name)
    module = importlib.import_module(f"bnn_zoo.experiments.{commands[name]}")
    return module.main(rest, prog=f"bnn-zoo {name}")


if __name__ == "__main__":
    sys.exit(main())
