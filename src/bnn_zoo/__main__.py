"""``python -m bnn_zoo <experiment> [flags]``: the same as ``bnn-zoo``."""

import sys

from bnn_zoo.cli import main

sys.exit(main())
