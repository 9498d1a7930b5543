"""bnn-zoo's folder in the user's cache: downloads (MNIST, UCI), JAX's compiled programs, pytensor's sources.

A leaf module, with nothing of bnn-zoo's imported, so that every layer (data, engine, command line)
reads the one folder from the one place.
"""

from pathlib import Path

import contextlib
import os
import time

__all__ = ["OFF", "PROGRAMS_MAX_BYTES", "TRIM_EVERY_SECONDS", "compile_cache_env", "compiled_programs",
           "count_programs", "trim_compiled_programs", "use_compiled_programs", "user_cache"]

#: The environment variable that turns the kept programs off: ``BNN_ZOO_JAX_CACHE=off``.
OFF = "BNN_ZOO_JAX_CACHE"
#: The most the kept programs take on disk: beyond it :func:`trim_compiled_programs` deletes the least recently used.
PROGRAMS_MAX_BYTES = 1 << 30
#: How often the folder is trimmed: at most once a day, by the first process to compile after that.
TRIM_EVERY_SECONDS = 24 * 3600


@contextlib.contextmanager
def count_programs():
    """The XLA programs JAX builds inside the block, compiled or read back from :func:`compiled_programs`.

    Counted through :mod:`jax.monitoring`'s backend-compile event, in every thread of the process.

    Yields
    ------
    list of int
        ``[count]``, final when the block ends.
    """
    import jax

    built = [0]

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            built[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield built
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


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


def trim_compiled_programs(folder: Path | None = None, max_bytes: int = PROGRAMS_MAX_BYTES,
                           every: float = TRIM_EVERY_SECONDS) -> list[Path]:
    """Delete the least recently used compiled programs beyond ``max_bytes``, at most once per ``every`` seconds.

    JAX can bound its folder itself (``jax_compilation_cache_max_size``),
    but then it lists the whole folder and reads a time stamp per program
    under a file lock at every program it writes, a cost that grows with
    the folder (with ten thousand kept programs, seconds on a small
    model's ``fit(method="auto")``). Here the folder is listed once a day instead, by
    whichever process comes first (a stamp file, ``.trimmed``, records
    when); a program's last use is its file's access or modification time,
    whichever is later.

    Parameters
    ----------
    folder : pathlib.Path, optional
        The folder of programs; :func:`compiled_programs` if not given.
    max_bytes : int, default :data:`PROGRAMS_MAX_BYTES`
        The most the programs may take.
    every : float, default :data:`TRIM_EVERY_SECONDS`
        Seconds since the last trim before the folder is listed again; 0 lists it now.

    Returns
    -------
    list of pathlib.Path
        The programs deleted (none when the folder was trimmed recently or is within ``max_bytes``).
    """
    folder = compiled_programs() if folder is None else Path(folder)
    stamp = folder / ".trimmed"
    try:
        if time.time() - stamp.stat().st_mtime < every:
            return []
    except OSError:  # never trimmed, or no folder yet
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        programs = []
        for entry in os.scandir(folder):
            if entry.name.endswith("-cache") and entry.is_file():
                info = entry.stat()
                programs.append((max(info.st_atime, info.st_mtime), info.st_size, Path(entry.path)))
    except OSError:  # a folder that cannot be written: JAX warns about it on its own
        return []
    total = sum(size for _, size, _ in programs)
    deleted = []
    for _, size, path in sorted(programs):
        if total <= max_bytes:
            break
        for gone in (path, path.with_name(path.name.removesuffix("-cache") + "-atime")):
            gone.unlink(missing_ok=True)  # another process may have trimmed it first
        total -= size
        deleted.append(path)
    return deleted


def use_compiled_programs() -> bool:
    """Keep JAX's compiled programs in :func:`compiled_programs`, so that a script run again skips XLA.

    ``bnn_zoo.fit``, ``bnn_zoo.fit_many`` and every command call it. JAX
    keys a kept program by its XLA graph, JAX's version and the XLA flags,
    never by the data (the engine passes data as arguments), so a program
    read back is the one a compilation would make. Every program is kept
    however fast it compiled, the process's others too (JAX's setting is
    the process's), at most :data:`PROGRAMS_MAX_BYTES` in all, the least
    recently used deleted first (:func:`trim_compiled_programs`, once a
    day). It takes effect from the process's first
    compilation: a process that compiled before it keeps JAX's settings. A
    folder the user gave JAX (``JAX_COMPILATION_CACHE_DIR``, ``jax.config``)
    is kept, and ``BNN_ZOO_JAX_CACHE=off`` leaves JAX's settings as they are.

    Returns
    -------
    bool
        Whether JAX is set to keep compiled programs on disk.
    """
    import jax

    if os.environ.get(OFF, "").lower() not in ("off", "0", "false", "no"):
        if jax.config.jax_compilation_cache_dir is None:
            jax.config.update("jax_compilation_cache_dir", str(compiled_programs()))
            trim_compiled_programs()
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return jax.config.jax_compilation_cache_dir is not None
