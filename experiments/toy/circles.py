"""``python -m bnn_zoo.experiments.toy.circles``: the toy prior study's hierarchical BNN on the circles data.

The toy experiment (:mod:`~bnn_zoo.experiments.toy.priors`) run on circles alone,
with the same flags and results as ``bnn-zoo circles``, which
:mod:`bnn_zoo.cli` dispatches to ``bnn_zoo.experiments.toy.priors.main`` directly.
"""

import sys

from bnn_zoo.experiments.toy.priors import main

# A script: its one import, the toy experiment's ``main``, runs both data sets unless told which, so it is not
# offered as this module's own.
__all__ = []

if __name__ == "__main__":
    sys.exit(main(prog="python -m bnn_zoo.experiments.toy.circles", dataset="circles"))
