"""How a library call meets its caller: warnings that point at the caller's line, and a Ctrl-C that ends
the call.

- :func:`warn`: a warning attributed to the first frame outside the library (``skip_file_prefixes``),
  however deep in the engine it is raised and however many wrappers stand between: the line of the
  user's script that called :func:`bnn_zoo.fit`, not a line of the library.
- :func:`interruptible`: while a fit runs, a Ctrl-C ends it in one ``KeyboardInterrupt``. Without it, an
  interrupt that arrives while a JAX callback runs (the garbage collector's, say) is printed as
  "Exception ignored in ..." and lost, and the fit runs to its end.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import threading
import warnings

__all__ = ["interrupted", "interruptible", "library_folders", "warn"]

_NOTED: list[int] = []  # SIGINTs received while an interruptible call runs


@functools.cache
def library_folders() -> tuple[str, ...]:
    """The folders of ``bnn_zoo`` and ``bnn_zoo.inference`` (two places in a checkout, one installed), each
    ending in a separator: a warning is attributed to the first frame outside them."""
    root = importlib.util.find_spec("bnn_zoo").submodule_search_locations  # the package's, not imported here
    folders = [*root, os.path.dirname(os.path.abspath(__file__))]
    return tuple(sorted({os.path.join(f, "") for p in folders for f in (p, os.path.realpath(p))}))


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` at the caller's line: the first frame outside :func:`library_folders`.

    Parameters
    ----------
    message : str
        One line.
    category : type
        The warning's class.
    """
    warnings.warn(message, category, skip_file_prefixes=library_folders())


def interrupted() -> None:
    """Raise ``KeyboardInterrupt`` where a Ctrl-C came during this call but was swallowed: the engine calls
    it between compiled chunks of steps."""
    if _NOTED:
        raise KeyboardInterrupt


def interruptible(function):
    """Wrap a long library call (``fit``, ``nuts``) so that a Ctrl-C ends it in one ``KeyboardInterrupt``.

    In the main thread, where SIGINT has Python's own handler, the call runs with a handler that notes the
    interrupt before raising it; an interrupt that something swallowed is raised again at the next
    :func:`interrupted` check, or at the call's end. Elsewhere (another thread, a handler of the caller's
    own, a call inside another such call) the call runs as it is.

    Parameters
    ----------
    function : callable
        The library call.

    Returns
    -------
    callable
        The same function (and signature), interruptible.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return function(*args, **kwargs)

        def note(signum, frame):
            _NOTED.append(signum)
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, note)
        try:
            out = function(*args, **kwargs)
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            swallowed = bool(_NOTED)
            _NOTED.clear()
        if swallowed:  # raised inside a callback that ignored it: the call ran on
            raise KeyboardInterrupt
        return out

    return wrapper
