"""Ctrl-C, as a terminal sends it (SIGINT to the whole foreground process group): one line on
stderr, exit code 130, no process left behind, and only complete records in the store.

One command per way the work runs: in the command's own process (``bnn-zoo alternatives
--processes 0``), in a spawned process (``--processes 1``), in a pool of forked workers
(``bnn-zoo toy --jobs 2``) and on a Dask LocalCluster (``bnn-zoo sweep --workers 2``)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bnn_zoo.experiments.store import Store
from tests.conftest import command_env


def _ctrl_c(tmp_path: Path, argv: list[str], started, settle: float = 0.0, timeout: float = 120):
    """Run ``bnn-zoo argv`` in a session of its own; once ``started(pid, stdout)`` (polled) and
    ``settle`` seconds more, SIGINT its process group. Returns the exit code and the stdout and
    stderr lines."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "bnn_zoo", *argv], stdout=stdout, stderr=stderr,
                                env=command_env(), cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not started(proc.pid, out.read_text()):
            assert proc.poll() is None, f"ended before it started fitting: {err.read_text()}"
            assert time.monotonic() < deadline, "did not start fitting in time"
            time.sleep(0.05)
        time.sleep(settle)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: every process of the group
        code = proc.wait(timeout=60)
        assert _alive(proc.pid) == [], err.read_text()  # no worker outlives the command
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return code, out.read_text().splitlines(), err.read_text().splitlines()


def _alive(group: int) -> list[str]:
    """The processes of a process group still running (a dead one not yet reaped does not count)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, fields = stat.read_text().rsplit(")", 1)
        except OSError:  # ended meanwhile
            continue
        state, _, pgrp = fields.split()[:3]
        if int(pgrp) == group and state != "Z":
            alive.append(f"{stat.parent.name} {name}) {state}")
    return alive


def _complete(folder: Path) -> list[str]:
    """The store's records, each checked whole (readable, one row, its own key), and no half-written file."""
    store = Store(folder)
    assert store.set_aside_damaged() == []
    assert not [p for p in folder.rglob(".*")]  # atomic writes leave no temporary file behind
    return sorted(store.done())


@pytest.mark.parametrize("processes", ["0", "1"])
def test_ctrl_c_in_the_commands_own_process_or_a_spawned_one(tmp_path, processes):
    """alternatives --processes 0 (every method here) and 1 (each in a spawned process): sgld stored,
    Ctrl-C while advi fits."""
    code, out, err = _ctrl_c(tmp_path, ["alternatives", "toy", "--quick", "--processes", processes, "--methods",
                                        "sgld,advi", "--out", "alt", "--figures", "fig"],
                             started=lambda pid, text: " sgld: " in text)
    assert code == 130, err
    assert err == ["bnn-zoo alternatives: interrupted (rerun the same command to go on)"]
    assert _complete(tmp_path / "alt") == ["toy-moons-s0-quick-sgld"]


def test_ctrl_c_with_a_pool_of_worker_processes(tmp_path):
    """toy --jobs 2: Ctrl-C while both workers fit; the workers leave it to the command."""
    def workers(pid, text):  # the pool's two processes are there
        children = Path(f"/proc/{pid}/task/{pid}/children")
        return children.exists() and len(children.read_text().split()) >= 2

    code, out, err = _ctrl_c(tmp_path, ["toy", "--all-priors", "--priors", "normal,laplace", "--hyperpriors", "fixed",
                                        "--steps", "3000000", "--restarts", "1", "--jobs", "2", "--no-progress",
                                        "--out", "runs", "--figures", "fig"], started=workers, settle=2.0)
    assert code == 130, err
    assert err == ["bnn-zoo toy: interrupted"]
    runs = tmp_path / "runs"
    assert not list(runs.rglob(".*"))  # no run folder half-written
    assert all((run / "metrics.json").is_file() for run in runs.glob("*/*"))


def test_ctrl_c_on_a_dask_cluster(tmp_path):
    """sweep --workers 2: a short fit stored, Ctrl-C while a long one runs on the other worker."""
    code, out, err = _ctrl_c(tmp_path, ["sweep", "--out", "sweep", "--steps", "200,3000000", "--priors", "normal",
                                        "--hyperpriors", "fixed", "--seeds", "1", "--restarts", "1", "--n-test",
                                        "300", "--draws", "30", "--workers", "2", "--fits-per-task", "1",
                                        "--no-progress"],
                             started=lambda pid, text: any(not p.name.startswith(".")  # a whole record
                                                          for p in (tmp_path / "sweep" / "records").glob("*.parquet")))
    assert code == 130, err
    assert err == ["2 fits in the sweep, 0 already in sweep, 2 to fit",
                   "bnn-zoo sweep: interrupted (rerun the same command to go on)"]
    [key] = _complete(tmp_path / "sweep")
    assert Store(tmp_path / "sweep").table([key])["steps"].item() == 200


def test_a_ctrl_c_that_python_drops_is_raised_again(capsys):
    """A KeyboardInterrupt in a garbage collector's callback (JAX has one) is printed and lost by
    Python; keep_interrupts raises it again in the main thread, without the print."""
    import gc

    from bnn_zoo.experiments.runtime import keep_interrupts

    def callback(phase, info):
        if phase == "start":
            raise KeyboardInterrupt

    alarm, hook = signal.getsignal(signal.SIGALRM), sys.unraisablehook
    gc.callbacks.append(callback)
    try:
        with pytest.raises(KeyboardInterrupt), keep_interrupts():
            gc.collect()
            gc.callbacks.remove(callback)
            time.sleep(5)
    finally:
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)
    assert capsys.readouterr().err == ""
    assert signal.getsignal(signal.SIGALRM) is alarm and sys.unraisablehook is hook  # put back as they were
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
