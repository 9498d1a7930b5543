"""``bnn-zoo circles``: seed 004's hierarchical BNN on the circles data set."""

import sys

from bnn_zoo.experiments.toy import main

if __name__ == "__main__":
    sys.exit(main(dataset="circles"))
