"""bnn-zoo's folder in the user's cache: downloads (MNIST, UCI), JAX's compiled programs, pytensor's sources.

A leaf module, with nothing of bnn-zoo's imported, so that every layer (data, engine, command line)
reads the one folder from the one place.
"""

from pathlib import Path

__all__ = ["compile_cache_env", "compiled_programs", "user_cache"]


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


def compiled_programs() -> Path:
    """The folder of JAX's compiled programs: the commands', the tests' and the docs' notebooks'.

    Returns
    -------
    pathlib.Path
        ``jax`` in :func:`user_cache`.
    """
    return user_cache() / "jax"


def compile_cache_env() -> dict[str, str]:
    """JAX's settings, as environment variables, that keep every compiled program in :func:`compiled_programs`.

    A process given them (the tests' workers, the commands they start, the notebooks' kernels) reads
    back what an earlier one compiled, however fast it compiled.

    Returns
    -------
    dict of str to str
        ``JAX_COMPILATION_CACHE_DIR`` and ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``.
    """
    return {"JAX_COMPILATION_CACHE_DIR": str(compiled_programs()), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
