"""Where the experiments' work runs: worker processes, interrupts, XLA's flags.

- :func:`run_many`: groups of runs in forked worker processes, each on a
  core of its own, with single-threaded XLA;
- :func:`hold_interrupts`: a Ctrl-C held until a block ends (the engine's
  import; worker processes started inside never see it, and leave it to this
  one, which shuts them down and prints one line); :func:`keep_interrupts`:
  no Ctrl-C lost where Python cannot raise it;
- :func:`add_xla_flag`, :func:`xla_flags` and :func:`worker_xla_flags`: XLA
  flags that keep the user's own; :func:`jaxlib_at_least` for flags that
  only newer jaxlib knows (JAX's programs are kept on disk by
  :func:`bnn_zoo.cache.use_compiled_programs`, which the engine's ``fit`` calls);

:mod:`~bnn_zoo.experiments.harness.resources` holds what a command holds while it
runs: run locks, a Dask cluster, a progress bar, peak memory.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import multiprocessing as mp
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any


__all__ = ["add_xla_flag", "hold_interrupts", "jaxlib_at_least", "keep_interrupts", "pin_to_core", "run_many",
           "small_program_xla_flags", "worker_xla_flags", "xla_flags"]


# --- worker processes -----------------------------------------------------------


def run_many(task: Callable[[list], list], groups: list[list], jobs: int, report: Callable[[Any], None]) -> list:
    """Every group through ``task``, ``jobs`` processes at a time, each group in one process, in order.

    Groups stay in this process when there is one, or when JAX has already
    started here (a caller's earlier work): forking a process whose JAX
    runtime threads are running can deadlock the child. Worker processes
    are forked, each pinned to a core of its own where there are enough,
    and run XLA single-threaded.

    Parameters
    ----------
    task : callable
        A group -> its results, a list; a module-level function (or a
        ``functools.partial`` of one), which a worker process is sent.
    groups : list of list
        The work, in groups that share one process (runs of one model
        structure reuse its compiled programs).
    jobs : int
        The most worker processes at once.
    report : callable
        Called with each result as its group finishes, in order.

    Returns
    -------
    list
        Every group's results, in the groups' order.
    """
    from jax._src import xla_bridge

    if len(groups) == 1 or xla_bridge.backends_are_initialized():
        jobs = 1
    results = []
    with _pool(min(jobs, len(groups))) as pool:
        for done in pool.imap(task, groups):
            for r in done:
                results.append(r)
                report(r)
    return results


class _Serial:
    """What :func:`run_many` uses of a process pool, in this process."""

    def imap(self, fn, items):
        return map(fn, items)


@contextlib.contextmanager
def _pool(jobs: int):
    """``jobs`` worker processes, each on a core of its own where there are enough; terminated at the end."""
    if jobs == 1:
        yield _Serial()
        return
    # Fork: the workers start with everything imported. Nothing in this process
    # has started JAX's backend yet, so there is no JAX state to copy.
    ctx = mp.get_context("fork")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    queue = ctx.SimpleQueue()
    for i in range(jobs):
        queue.put(cores[i] if jobs <= len(cores) else None)
    with contextlib.ExitStack() as stack:
        with hold_interrupts():  # a Ctrl-C meanwhile is raised at its end, and the pool terminated
            pool = stack.enter_context(ctx.Pool(jobs, initializer=_worker_init, initargs=(queue,)))
        yield pool


@contextlib.contextmanager
def hold_interrupts(spawn: bool = False):
    """While the block runs, a Ctrl-C waits: it is raised as ``KeyboardInterrupt`` when the block ends.

    SIGINT is blocked in this thread, and one that another thread receives
    is noted, not raised, so a Ctrl-C meanwhile is raised as the block ends,
    by the handler there was before. Threads and processes started inside
    inherit the blocked signal (through ``fork`` and ``exec``) and keep it:
    they never see Ctrl-C. Two uses:

    - the engine's import (:func:`bnn_zoo.cli.main`): a ``KeyboardInterrupt``
      raised inside it can leave a module half-imported, be turned into an
      ``ImportError`` by a C extension's initialisation, or abort the process;
    - the start of worker processes (a pool, a Dask cluster): Ctrl-C sends
      SIGINT to every process of the terminal's foreground group, and a
      worker that raised ``KeyboardInterrupt`` would print its own
      traceback. Started here, the workers leave Ctrl-C to this process,
      which shuts them down (a pool's ``terminate``, a cluster's ``close``)
      and prints the one line; the caller makes sure that the interrupt
      raised at the block's end does so.

    Outside the main thread, where Python raises no ``KeyboardInterrupt``,
    it does nothing.

    Parameters
    ----------
    spawn : bool, default False
        Processes started inside are spawned (``exec``): multiprocessing's
        resource tracker is started first, since its start unblocks SIGINT
        in the thread that starts it, and every process that thread spawns
        would see Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if spawn:
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    noted = []
    handler = signal.getsignal(signal.SIGINT)
    if handler not in (signal.SIG_IGN, None):
        signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if handler not in (signal.SIG_IGN, None):
            signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending Ctrl-C is raised here
        if noted:
            signal.raise_signal(signal.SIGINT)


@contextlib.contextmanager
def keep_interrupts():
    """While the block runs, a Ctrl-C that Python would drop is raised again a moment later.

    A ``KeyboardInterrupt`` raised where it cannot propagate, in a garbage
    collector's callback (JAX runs one at every collection) or a ``__del__``,
    is printed as "Exception ignored in ..." and lost: the command runs on.
    Here it is not printed, and SIGALRM raises it again 10 ms later, where
    the main thread is then (again if that too drops it), or as the block
    ends, if that is sooner. In the main thread only; elsewhere it does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def again(signum, frame):
        raise KeyboardInterrupt

    armed = []

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            armed.append(True)
            signal.setitimer(signal.ITIMER_REAL, 0.01)  # not now: it would be raised in this hook, and lost
        else:
            previous_hook(unraisable)

    previous_hook, previous_alarm = sys.unraisablehook, signal.signal(signal.SIGALRM, again)
    sys.unraisablehook = hook
    pending = False
    try:
        yield
    finally:
        if armed:
            pending = signal.setitimer(signal.ITIMER_REAL, 0)[0] > 0  # the block ended before the alarm
        signal.signal(signal.SIGALRM, previous_alarm)
        sys.unraisablehook = previous_hook
    if pending:
        raise KeyboardInterrupt


def _worker_init(cores) -> None:
    # Small models' XLA programs gain nothing from threads, and with one process per
    # core the threads of each compete for the others' cores: single-threaded XLA and
    # one core per worker (docs/user_guide/experiments.md, "Flags of the toy commands").
    core = cores.get()
    if core is not None:
        pin_to_core(core)
    add_xla_flag("--xla_cpu_multi_thread_eigen=false")


def pin_to_core(core: int) -> None:
    """Pin every thread of this process to ``core``; threads it starts later inherit that.

    What a worker process of one core does (the toy commands' process pool, the sweep's Dask
    workers): the threads a JAX process keeps would otherwise run on the other workers' cores.

    Parameters
    ----------
    core : int
        A core this process may run on (:func:`os.sched_getaffinity`).
    """
    for thread in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(thread), {core})
        except OSError:  # a thread that ended meanwhile
            pass


def add_xla_flag(flag: str) -> None:
    """Append ``flag`` to ``XLA_FLAGS`` unless the user's flags already set it (before JAX starts).

    XLA reads ``XLA_FLAGS`` when JAX's backend starts, so a flag added later
    has no effect in this process.

    Parameters
    ----------
    flag : str
        An XLA flag, ``--name=value``; it counts as set when ``XLA_FLAGS``
        has a flag of that name, whatever its value.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    name = flag.split("=", 1)[0]
    if all(token.split("=", 1)[0] != name for token in flags.split()):
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def jaxlib_at_least(*version: int) -> bool:
    """Whether the installed jaxlib is at least ``version``.

    Compares the release's leading numbers (a part's trailing letters, as
    in ``0.10.0rc1``, are dropped), as many as ``version`` has.

    Parameters
    ----------
    *version : int
        The release's numbers, e.g. ``0, 10`` for 0.10.

    Returns
    -------
    bool
        ``True`` if jaxlib's release is ``version`` or later.
    """
    release = importlib.metadata.version("jaxlib").split(".")
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in release[:len(version)]) >= version


@contextlib.contextmanager
def xla_flags(flags):
    """Set ``flags`` while a command runs (XLA reads them when JAX starts, inside it), then put
    ``XLA_FLAGS`` back, so that a caller's later processes keep theirs.

    Each flag is added as :func:`add_xla_flag` adds it (a flag the user's
    ``XLA_FLAGS`` set is kept as the user set it).

    Parameters
    ----------
    flags : iterable of str
        XLA flags, ``--name=value``.
    """
    saved = os.environ.get("XLA_FLAGS")
    for flag in flags:
        add_xla_flag(flag)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = saved


def worker_xla_flags() -> list[str]:
    """The workers' XLA flags: single-threaded XLA, one small program per core, and the toy experiment's.

    The toy experiment's turn XLA's YNNPACK fusions off where jaxlib has
    them, so that XLA's own loops run the small products of the vmapped
    steps, which is faster (docs/benchmarks.md, "Design choices that make
    the engine fast").

    Returns
    -------
    list of str
        The flags, for ``XLA_FLAGS``.
    """
    return ["--xla_cpu_multi_thread_eigen=false", *small_program_xla_flags()]


def small_program_xla_flags() -> tuple[str, ...]:
    """XLA flags for the toy networks' small batched programs (the toy experiment's and the sweep's).

    XLA's YNNPACK fusions (a CPU-backend flag) run the small batched
    products over draws slower than XLA's own loops, so they are turned off
    (docs/benchmarks.md, "Design choices"). Older jaxlib lacks the flag, and
    XLA aborts on a flag it does not know: none there.

    Returns
    -------
    tuple of str
        The flags, for ``XLA_FLAGS``.
    """
    return ("--xla_cpu_experimental_ynn_fusion_type=",) if jaxlib_at_least(0, 10) else ()
