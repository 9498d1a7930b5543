"""bnn-zoo's folder in the user's cache: downloads (MNIST, UCI), JAX's compiled programs, pytensor's sources.

A leaf module, with nothing of bnn-zoo's imported, so that every layer (data, engine, command line)
reads the one folder from the one place.
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
