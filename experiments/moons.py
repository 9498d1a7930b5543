"""``bnn-zoo moons``: seed 004's hierarchical BNN on the moons data set."""

import sys

from bnn_zoo.experiments.toy import main

if __name__ == "__main__":
    sys.exit(main(dataset="moons"))
