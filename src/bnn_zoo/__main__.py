"""``python -m bnn_zoo <command> [flags]``: the same as ``bnn-zoo`` (:func:`bnn_zoo.cli.main`)."""

import sys

from bnn_zoo.cli import main

__all__ = []

sys.exit(main())
