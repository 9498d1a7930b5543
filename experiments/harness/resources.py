"""What a command holds while it runs: a lock on its run folder, a Dask cluster, a progress bar, peak memory.

- :func:`run_lock`: one command at a time into a run folder or store;
- :func:`cluster` and :class:`progress`: a job's Dask client and its
  progress bar (``bnn-zoo sweep`` and ``bnn-zoo uci``);
- :func:`peak_rss_mb`: this process's peak memory.

:mod:`~bnn_zoo.experiments.harness.runtime` starts the processes and holds the interrupts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

from bnn_zoo.experiments.harness.flags import UsageError
from bnn_zoo.experiments.harness.runtime import hold_interrupts, pin_to_core, worker_xla_flags, xla_flags

__all__ = ["LOCAL_CLUSTER_CONFIG", "SCHEMES", "check_scheduler", "cluster", "peak_rss_mb", "progress", "run_lock"]


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold a lock on a run folder (or a store) while a command writes it: a second command
    into the same folder, at the same time, is refused instead of overwriting this one's files.

    The lock files live outside ``--out`` (in a folder of the system's
    temporary folder, named by a hash of the folder's absolute path), so a
    refused or failed run leaves nothing behind there; each is removed when
    its run ends, and their folder with the last.

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
    path = folder / f"{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:24]}.lock"
    while True:
        folder.mkdir(exist_ok=True)
        try:
            handle = open(path, "a")
        except FileNotFoundError:  # a run that ended removed the folder meanwhile: make it again
            continue
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
        with contextlib.suppress(OSError):  # another run's lock is still in it
            folder.rmdir()


#: The addresses a Dask scheduler answers at: ``--scheduler``'s schemes.
SCHEMES = ("tcp://", "tls://", "ws://", "wss://", "inproc://")


def check_scheduler(address: str | None, flag: str = "--scheduler", seconds: float = 5.0) -> None:
    """Refuse a scheduler address that is not one, or at which nothing answers, before any work.

    Parameters
    ----------
    address : str or None
        The flag's value (``None``: no scheduler, nothing to check).
    flag : str, default "--scheduler"
        The flag's name, for the message.
    seconds : float, default 5.0
        How long to wait for the address to accept a connection.

    Raises
    ------
    UsageError
        For an address without one of :data:`SCHEMES`, or a host and port
        that refuse a connection or do not answer within ``seconds``.
    """
    import socket
    from urllib.parse import urlsplit

    if address is None:
        return
    if not address.startswith(SCHEMES):
        raise UsageError(f"{flag} must be a Dask address such as tcp://host:8786, got {address!r}")
    if address.startswith("inproc://"):
        return
    parts = urlsplit(address)
    try:
        port = parts.port or 8786
        with socket.create_connection((parts.hostname or "localhost", port), timeout=seconds):
            pass
    except (OSError, ValueError) as err:
        raise UsageError(f"{flag} {address}: no Dask scheduler answers there ({err}); start one "
                         f"(`dask scheduler`), or leave {flag} out to run on a local cluster") from None


#: Dask settings of the local cluster's workers: without the statistical profiler, which samples each
#: worker's stack every 10 ms on the core its fits run on (a task of 24 fits a worker: the fit
#: program 2.9-4.5% faster without it, four pairs of runs; docs/benchmarks.md).
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False}


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
        try:
            client = Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as err:  # it answered the check, then went away
            raise UsageError(f"--scheduler {args.scheduler}: {err}") from None
        return client, client.close
    import logging

    import dask

    # Shutting workers down that hold JAX's threads takes a few seconds: not worth a warning.
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)
    scratch = tempfile.mkdtemp(prefix="bnn-zoo-dask-")  # the workers' folder, removed with them
    client = cluster = None
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def close():
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        _kill_new_descendants(before)  # a worker still inside a compiled loop: not left behind
        shutil.rmtree(scratch, ignore_errors=True)

    try:
        with xla_flags(worker_xla_flags()), dask.config.set(LOCAL_CLUSTER_CONFIG, **{"temporary-directory": scratch}):
            with hold_interrupts(spawn=True):  # a Ctrl-C meanwhile is raised at its end: closed below
                cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", local_directory=scratch)  # any free port
        client = Client(cluster)
        client.run(_quiet_worker_close)
        _pin_workers(client)
    except BaseException:
        close()
        raise
    return client, close


def _kill_new_descendants(before: set) -> None:
    """Kill the processes below this one that ``before`` (their ids before the cluster started) does not hold,
    and reap them: a worker that Dask let go of while it was still inside a compiled loop is one of them."""
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for process in new:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(new, timeout=5)


def _pin_workers(client) -> None:
    """Each worker of a local cluster on a core of its own, where there are as many cores as workers.

    Two single-threaded workers left to the scheduler ran a task's fit program about 20% slower
    than two pinned to a core each (docs/benchmarks.md, "Design choices"): each JAX process keeps a
    dozen threads of its own, which then run on the other worker's core.
    """
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    workers = sorted(client.scheduler_info()["workers"])
    if not cores or len(workers) > len(cores):
        return
    for core, worker in zip(cores, workers):
        client.run(pin_to_core, core, workers=[worker])


def _quiet_worker_close() -> None:
    # A worker closed while it runs a task (after Ctrl-C) warns of each task it drops, and, where its
    # next heartbeat comes before it is killed, logs the scheduler's absence with a traceback; the
    # interrupt's own line says it all. The state machine's logger warns of nothing else, and a
    # scheduler lost while the sweep runs fails the client's own calls.
    import logging

    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
    logging.getLogger("distributed.worker").addFilter(
        lambda record: "during heartbeat" not in record.getMessage())


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
