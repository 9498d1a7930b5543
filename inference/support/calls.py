"""How a library call meets its caller: warnings that point at the caller's line, and a Ctrl-C that ends
the call.

- :func:`warn`: a warning attributed to the first frame outside the library (``skip_file_prefixes``),
  however deep in the engine it is raised and however many wrappers stand between: the line of the
  user's script that called :func:`bnn_zoo.fit`, not a line of the library.
- :func:`interruptible`: while a fit runs, a Ctrl-C ends it in one ``KeyboardInterrupt``. Without it, an
  interrupt that arrives while a garbage-collector callback runs (JAX's ``_xla_gc_callback``) is raised
  there, printed as "Exception ignored in ..." and lost, and the fit runs to its end.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import os
import signal
import threading
import warnings

__all__ = ["in_finaliser", "interrupted", "interruptible", "library_folders", "warn"]

_NOTED: list[int] = []  # SIGINTs received while an interruptible call runs


@functools.cache
def library_folders() -> tuple[str, ...]:
    """The folders of ``bnn_zoo`` and ``bnn_zoo.inference`` (two places in a checkout, one installed), each
    ending in a separator: a warning is attributed to the first frame outside them."""
    root = importlib.util.find_spec("bnn_zoo").submodule_search_locations  # the package's, not imported here
    folders = [*root, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # inference/, above support/
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


def in_finaliser(frame) -> bool:
    """Whether ``frame`` runs inside a garbage-collector callback or a ``__del__``, where an exception is printed
    as "Exception ignored in ..." and dropped.

    Parameters
    ----------
    frame : frame or None
        The frame a signal handler was given.

    Returns
    -------
    bool
    """
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def interrupted() -> None:
    """Raise ``KeyboardInterrupt`` where a Ctrl-C came during this call but was swallowed: the engine calls
    it between compiled chunks of steps."""
    if _NOTED:
        raise KeyboardInterrupt


def interruptible(function):
    """Wrap a long library call (``fit``, ``nuts``) so that a Ctrl-C ends it in one ``KeyboardInterrupt``.

    In the main thread, where SIGINT has Python's own handler, the call runs with a handler that raises
    ``KeyboardInterrupt`` at once, except while a garbage-collector callback or a ``__del__`` runs, where
    Python would print the exception and drop it: there it notes the interrupt, which the engine's next
    :func:`interrupted` check, or the call's end, raises. Elsewhere (another thread, a handler of the
    caller's own, a call inside another such call) the call runs as it is.

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
            if in_finaliser(frame):
                _NOTED.append(signum)  # raised where it cannot be dropped
                return
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, note)
        try:
            out = function(*args, **kwargs)
        except KeyboardInterrupt:  # one traceback, from the call: not chained to whatever it interrupted
            raise KeyboardInterrupt from None
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            swallowed = bool(_NOTED)
            _NOTED.clear()
        if swallowed:  # raised inside a callback that ignored it: the call ran on
            raise KeyboardInterrupt
        return out

    return wrapper
