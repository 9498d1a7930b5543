"""Atomic writes: a reader never sees a half-written result or checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_dir", "atomic_write", "write_json", "write_text"]

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it.

    The temporary file keeps ``path``'s suffix (some writers pick a format by
    it) and is removed if ``write`` fails. The file gets the permissions a
    plain new file would (the umask's), not the temporary file's 0600.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write; its folder is created if missing.
    write : callable
        ``write(tmp_path)`` writes the content to the path given (a str).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    Exception
        Whatever ``write`` raises; ``path`` is then untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would outlive the rename
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path, obj) -> Path:
    """Write ``obj`` as indented JSON with sorted keys, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    obj : object
        Anything ``json.dump`` takes.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")

    return atomic_write(path, write)


def write_text(path, text: str) -> Path:
    """Write ``text``, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    text : str
        The content.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike):
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` whole.

    On an exception the temporary folder is removed and ``path`` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        The folder to write; its parent is created if missing.

    Yields
    ------
    pathlib.Path
        The temporary folder to fill.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as out:
    ...     with atomic_dir(Path(out) / "moons" / "run") as tmp:
    ...         _ = write_json(tmp / "metrics.json", {"accuracy": 0.97})
    ...     sorted(p.name for p in (Path(out) / "moons").iterdir())   # the run, and no staging folder
    ['run']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old."))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
