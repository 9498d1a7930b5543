"""``bnn-zoo <experiment> [flags]``: every experiment (and the prior sweep) behind one command."""

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
    "sweep": "sweep",
    "report": "report",
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    usage = f"usage: bnn-zoo {{{','.join(EXPERIMENTS)}}} [flags]   (bnn-zoo <experiment> --help)"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in EXPERIMENTS:
        print(f"bnn-zoo: error: unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}",
              file=sys.stderr)
        return 2
    if name in ("moons", "circles"):
        from bnn_zoo.experiments.toy import main as toy_main

        return toy_main(rest, prog=f"bnn-zoo {name}", dataset=name)
    module = importlib.import_module(f"bnn_zoo.experiments.{EXPERIMENTS[name]}")
    return module.main(rest, prog=f"bnn-zoo {name}")


if __name__ == "__main__":
    sys.exit(main())
