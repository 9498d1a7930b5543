"""Data sets: the 2-D toy problems, the 1-D regression tasks, the UCI benchmark and MNIST (verified).

- :mod:`~bnn_zoo.data.toy`: moons and circles, and their Bayes-optimal classifier;
- :mod:`~bnn_zoo.data.regression`: the sine wave and Blundell et al.'s curve, with a gap on request;
- :mod:`~bnn_zoo.data.uci`: the nine UCI regression data sets with their published splits, found
  or downloaded and checked against their SHA-256;
- :mod:`~bnn_zoo.data.mnist`: MNIST's four IDX files, found or downloaded and checked against
  their SHA-256;
- :mod:`~bnn_zoo.data.shift`: rotated digits and out-of-distribution images made from the test set.
"""

from pathlib import Path

__all__ = ["user_cache"]


def user_cache() -> Path:
    """bnn-zoo's folder in the user's cache, where downloads and JAX's compiled programs go.

    Returns
    -------
    pathlib.Path
        ``$XDG_CACHE_HOME/bnn-zoo``, else ``~/.cache/bnn-zoo`` on Linux (the platform's cache
        folder elsewhere).
    """
    import pooch

    return Path(pooch.os_cache("bnn-zoo"))
