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

from bnn_zoo.experiments.harness.store import Store
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
        assert _alive_after(proc.pid) == [], err.read_text()  # no worker outlives the command
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


def _alive_after(group: int, grace: float = 10.0) -> list[str]:
    """The processes of the group still running ``grace`` seconds after the command's exit (or none, sooner).

    Some processes end a moment after the command: multiprocessing's resource
    tracker (started by a command that spawns) once the command's end closes
    its pipe, and a sandboxed kernel can list an ended process for a moment
    after its parent reaped it (a CI run saw the command's own pid, state R,
    just after ``wait`` returned). A worker left behind runs on and is still
    listed at the deadline."""
    deadline = time.monotonic() + grace
    while (alive := _alive(group)) and time.monotonic() < deadline:
        time.sleep(0.05)
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

    from bnn_zoo.experiments.harness.runtime import keep_interrupts

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


#: Ctrl-C as the engine loads, at a module that the import of the toy experiment reaches: inside
#: jaxlib's C extension initialisation (which aborted the process), and inside jax's own import
#: (which left ``jax`` without ``random``: "cannot import name 'loo' from 'bnn_zoo'").
TRIP = """
import os, signal, sys
class Trip:  # Ctrl-C, as the import reaches one module
    tripped = False
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1] and not Trip.tripped:
            Trip.tripped = True
            os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, Trip())
from bnn_zoo.cli import main
code = main(["moons", "--steps", "200", "--restarts", "1", "--draws", "30", "--no-progress"])
assert Trip.tripped, "the import no longer reaches " + sys.argv[1]
sys.exit(code)
"""


@pytest.mark.parametrize("module", ["jaxlib._hlo", "jax._src.random"])
def test_ctrl_c_while_the_engine_loads(tmp_path, module):
    proc = subprocess.run([sys.executable, "-c", TRIP, module], capture_output=True, text=True,
                          env=command_env(), cwd=tmp_path, timeout=300)
    assert (proc.returncode, proc.stderr.splitlines()) == (130, ["bnn-zoo moons: interrupted"]), proc.stderr[-2000:]
    assert not (tmp_path / "results").exists()  # held until the engine loaded, then raised: nothing fitted


def test_a_ctrl_c_while_workers_start_is_held_not_lost():
    """hold_interrupts: a Ctrl-C inside the block is raised as it ends; a process started inside
    never sees one."""
    from bnn_zoo.experiments.harness.runtime import hold_interrupts

    import multiprocessing

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with hold_interrupts(spawn=True):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); print('done')"],
                                     stdout=subprocess.PIPE, text=True)
            spawned = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(2,))
            spawned.start()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            reached.append(True)  # not raised inside the block
    os.kill(child.pid, signal.SIGINT)
    os.kill(spawned.pid, signal.SIGINT)
    spawned.join(30)
    assert reached and child.communicate(timeout=30) == ("done\n", None) and child.returncode == 0
    assert spawned.exitcode == 0
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # unblocked again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_dropped_just_before_the_block_ends_is_raised_at_its_end():
    """keep_interrupts: a KeyboardInterrupt that Python drops as the block ends, before the alarm
    that raises it again, is raised as the block ends."""
    import gc

    from bnn_zoo.experiments.harness.runtime import keep_interrupts

    def callback(phase, info):
        if phase == "start":
            raise KeyboardInterrupt

    gc.callbacks.append(callback)
    try:
        with pytest.raises(KeyboardInterrupt), keep_interrupts():
            gc.collect()
            gc.callbacks.remove(callback)
    finally:
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_failed_engine_load_is_not_reported_as_a_missing_name(tmp_path):
    """``from bnn_zoo import loo`` with a Ctrl-C in jax's import, as the toy experiment imports (arviz
    first, whose import of jax drops it): the error says that the engine failed to load, and why,
    not "cannot import name 'loo'"."""
    script = TRIP.split("from bnn_zoo.cli")[0] + "import arviz\nfrom bnn_zoo import loo\n"
    proc = subprocess.run([sys.executable, "-c", script, "jax._src.random"], capture_output=True, text=True,
                          env=command_env(), cwd=tmp_path, timeout=300)
    last = proc.stderr.splitlines()[-1]
    assert proc.returncode != 0 and "cannot import name" not in proc.stderr, proc.stderr[-2000:]
    assert last == "KeyboardInterrupt" or last.startswith(
        "ImportError: bnn_zoo.loo: the engine (bnn_zoo.inference) failed to load: "), proc.stderr[-2000:]
