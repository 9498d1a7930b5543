"""Where the experiments' work runs: worker processes, XLA's flags, locks, a Dask cluster.

- :func:`run_many`: groups of runs in forked worker processes, each on a
  core of its own, with single-threaded XLA;
- :func:`children_ignore_sigint`: worker processes that leave Ctrl-C to this
  one, which shuts them down and prints one line; :func:`keep_interrupts`:
  no Ctrl-C lost where Python cannot raise it;
- :func:`add_xla_flag`, :func:`xla_flags` and :func:`worker_xla_flags`: XLA
  flags that keep the user's own; :func:`jaxlib_at_least` for flags that
  only newer jaxlib knows; :func:`use_compilation_cache`, JAX's programs kept
  on disk;
- :func:`run_lock`: one command at a time into a run folder or store;
- :func:`cluster` and :class:`progress`: a job's Dask client and its
  progress bar (``bnn-zoo sweep`` and ``bnn-zoo uci``);
- :func:`peak_rss_mb`: this process's peak memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bnn_zoo.experiments.flags import UsageError

__all__ = ["add_xla_flag", "children_ignore_sigint", "cluster", "jaxlib_at_least", "keep_interrupts",
           "peak_rss_mb", "progress", "run_lock", "run_many", "use_compilation_cache", "worker_xla_flags", "xla_flags"]


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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap(self, fn, items):
        return map(fn, items)


def _pool(jobs: int):
    """``jobs`` worker processes, each on a core of its own where there are enough."""
    if jobs == 1:
        return _Serial()
    # Fork: the workers start with everything imported. Nothing in this process
    # has started JAX's backend yet, so there is no JAX state to copy.
    ctx = mp.get_context("fork")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    queue = ctx.SimpleQueue()
    for i in range(jobs):
        queue.put(cores[i] if jobs <= len(cores) else None)
    with children_ignore_sigint():
        return ctx.Pool(jobs, initializer=_worker_init, initargs=(queue,))


@contextlib.contextmanager
def children_ignore_sigint():
    """Start worker processes inside this block: they ignore SIGINT, and this process handles it.

    Ctrl-C sends SIGINT to every process of the terminal's foreground group,
    workers included; a worker that raised ``KeyboardInterrupt`` would print
    its own traceback. A process inherits an ignored SIGINT through ``fork``
    and ``exec``, and Python then leaves it ignored, so the workers started
    here never see Ctrl-C: this process gets it alone, shuts them down
    (a pool's ``terminate``, a cluster's ``close``) and prints the one line.
    This process ignores SIGINT too while the block runs (a Ctrl-C then is
    lost), so the block holds only the workers' start. Outside the main
    thread, where Python cannot change a signal's handler, it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def keep_interrupts():
    """While the block runs, a Ctrl-C that Python would drop is raised again a moment later.

    A ``KeyboardInterrupt`` raised where it cannot propagate, in a garbage
    collector's callback (JAX runs one at every collection) or a ``__del__``,
    is printed as "Exception ignored in ..." and lost: the command runs on.
    Here it is not printed, and SIGALRM raises it again 10 ms later, where
    the main thread is then (again if that too drops it). In the main thread
    only; elsewhere it does nothing.
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
    try:
        yield
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        sys.unraisablehook = previous_hook


def _worker_init(cores) -> None:
    # Small models' XLA programs gain nothing from threads, and with one process per
    # core the threads of each compete for the others' cores: single-threaded XLA and
    # one core per worker (docs/user_guide/experiments.md, "Flags of the toy commands").
    core = cores.get()
    if core is not None:
        os.sched_setaffinity(0, {core})
    add_xla_flag("--xla_cpu_multi_thread_eigen=false")


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


def use_compilation_cache() -> None:
    """Keep JAX's compiled programs on disk, so that a run reuses what an earlier one compiled.

    The cache is ``$XDG_CACHE_HOME/bnn-zoo/jax`` (``~/.cache/bnn-zoo/jax``)
    unless ``JAX_COMPILATION_CACHE_DIR`` names another folder. Programs are
    keyed by their XLA graph, not by the data (the engine passes data as
    arguments), and every program is kept however fast it compiled.
    Changes JAX's configuration for the whole process.
    """
    import jax

    from bnn_zoo.data import user_cache

    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", str(user_cache() / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


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
    from bnn_zoo.experiments import toy_priors

    return ["--xla_cpu_multi_thread_eigen=false", *toy_priors.experiment().xla_flags]


# --- locks, Dask and progress ----------------------------------------------------


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold a lock on a run folder (or a store) while a command writes it: a second command
    into the same folder, at the same time, is refused instead of overwriting this one's files.

    The lock files live outside ``--out`` (in the system's temporary folder,
    named by a hash of the folder's absolute path), so a refused or failed run
    leaves nothing behind there; each is removed when its run ends.

    Parameters
    ----------
    run_dir : pathlib.Path
        The folder to hold.

    Raises
    ------
    UsageError
        If another process holds it.
    """
    folder = Path(tempfile.gettempdir()) / f"bnn-zoo-locks-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:24]}.lock"
    while True:
        handle = open(path, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise UsageError(f"another run is writing {run_dir} right now") from None
        try:  # the holder before us may have removed the file we opened: then lock the new one
            if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # removed while held, so no one locks a file that is gone
        handle.close()


def cluster(args):
    """A Dask client for a job's tasks, or ``None`` to run them in this process.

    Parameters
    ----------
    args : argparse.Namespace
        ``scheduler`` (a running scheduler's address, or ``None``) and ``workers``
        (the processes of a ``LocalCluster`` started here, with :func:`worker_xla_flags`; 1 and
        no scheduler: none).

    Returns
    -------
    tuple of (dask.distributed.Client or None, callable)
        The client, and the function that closes it and its cluster.
    """
    if args.scheduler is None and args.workers == 1:
        return None, lambda: None
    from dask.distributed import Client, LocalCluster

    if args.scheduler is not None:
        client = Client(args.scheduler)
        return client, client.close
    import logging

    import dask

    # Shutting workers down that hold JAX's threads takes a few seconds: not worth a warning.
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)
    with xla_flags(worker_xla_flags()), children_ignore_sigint():
        scratch = tempfile.mkdtemp(prefix="bnn-zoo-dask-")  # the workers' folder, removed with them
        with dask.config.set({"temporary-directory": scratch}):
            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", local_directory=scratch)  # any free port
    client = Client(cluster)
    client.run(_quiet_worker_close)

    def close():
        client.close()
        cluster.close()
        shutil.rmtree(scratch, ignore_errors=True)

    return client, close


def _quiet_worker_close() -> None:
    # A worker closed while it runs a task (after Ctrl-C) warns of each task it drops; the
    # interrupt's own line says it all. The logger warns of nothing else.
    import logging

    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)


class progress:
    """Fits done / total with the estimated time left, on stderr: a context manager that gives
    the function advancing it by a number of fits.

    Parameters
    ----------
    total : int
        The fits to make.
    show : bool
        Show the bar (``False``: the function does nothing visible).
    """

    def __init__(self, total: int, show: bool):
        self.total, self.show = total, show

    def __enter__(self):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)
        from rich.console import Console

        self.bar = Progress(TextColumn("fits"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True),
                            disable=not self.show)
        self.bar.start()
        self.task = self.bar.add_task("sweep", total=self.total)
        return lambda n: self.bar.advance(self.task, n)

    def __exit__(self, *exc):
        self.bar.stop()


# --- memory --------------------------------------------------------------------


_peak_seen = 0.0  # MB: the largest reading so far in this process


def peak_rss_mb() -> float:
    """This process's own peak resident memory so far, in MB (never less than an earlier reading).

    Returns
    -------
    float
        The peak, in MB.

    Notes
    -----
    On Linux, ``VmHWM`` of ``/proc/self/status``. Not ``ru_maxrss``: Linux
    carries a process's peak across fork and exec into its children, so a
    spawned worker's ``ru_maxrss`` is at least its parent's peak. ``VmHWM``
    itself can read a few kB lower than before (the kernel updates its
    high-water mark when memory is unmapped, not when pages are released in
    place), so the reading is the largest seen.
    """
    global _peak_seen
    _peak_seen = max(_peak_seen, _read_peak_rss_mb())
    return _peak_seen


def _read_peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere
