"""Data sets: the 2-D toy problems, the 1-D regression tasks, the UCI benchmark and MNIST (verified).

- :mod:`~bnn_zoo.data.toy`: moons and circles, and their Bayes-optimal classifier;
- :mod:`~bnn_zoo.data.regression`: the sine wave and Blundell et al.'s curve, with a gap on request;
- :mod:`~bnn_zoo.data.uci`: the nine UCI regression data sets with their published splits, found
  or downloaded and checked against their SHA-256;
- :mod:`~bnn_zoo.data.mnist`: MNIST's four IDX files, found or downloaded and checked against
  their SHA-256;
- :mod:`~bnn_zoo.data.shift`: rotated digits and out-of-distribution images made from the test set.
"""

__all__ = []
