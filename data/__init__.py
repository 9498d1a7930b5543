"""Data sets: the 2-D toy problems, the 1-D regression tasks and MNIST (found or downloaded, verified)."""

from pathlib import Path


def user_cache() -> Path:
    """bnn-zoo's folder in the user's cache: ``$XDG_CACHE_HOME/bnn-zoo``, else ``~/.cache/bnn-zoo``
    on Linux (the platform's cache folder elsewhere). Downloads and JAX's compiled programs go there."""
    import pooch

    return Path(pooch.os_cache("bnn-zoo"))
