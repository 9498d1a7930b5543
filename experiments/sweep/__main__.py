"""``python -m bnn_zoo.experiments.sweep``: ``bnn-zoo sweep`` without the entry point.

It runs the ``main`` of :mod:`~bnn_zoo.experiments.sweep.command`, with the same flags and results.
"""

import sys

from bnn_zoo.experiments.sweep.command import main

# A script: its one import is the command's ``main``, not offered as this module's own.
__all__ = []

if __name__ == "__main__":
    sys.exit(main())
