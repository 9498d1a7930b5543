"""A fit and a run leave nothing in ``$TMPDIR``: PyTensor's generated sources go to bnn-zoo's user
cache, and the run folders' locks go with their runs."""

import os
import subprocess
import sys

SCRIPT = """
import numpy as np, pymc as pm, bnn_zoo
with pm.Model() as model:
    b = pm.Normal("b", 0, 1)
    pm.Normal("y", b, 1, observed=np.array([0.1, -0.3, 0.2]))
result = bnn_zoo.fit(model, steps=50, progressbar=False)
idata = bnn_zoo.sample(result, 50)
print(bnn_zoo.loo(idata).elpd)
"""


def test_a_fit_sample_and_loo_leave_tmpdir_empty(tmp_path):
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in tmp.iterdir()) == []
    assert any((cache / "bnn-zoo" / "generated-src").iterdir())  # where they went instead


LOCKS = """
import os, sys, tempfile
from pathlib import Path
from bnn_zoo.experiments.harness.resources import run_lock
folder = Path(tempfile.gettempdir()) / f"bnn-zoo-locks-{os.getuid()}"
with run_lock(Path("a")):
    with run_lock(Path("b")):
        print(len(list(folder.iterdir())))
    print(len(list(folder.iterdir())))  # a's lock is still held there
print(folder.exists())
with run_lock(Path("a")):  # and made again by the next run
    print(len(list(folder.iterdir())))
"""


def test_the_run_locks_and_their_folder_go_when_the_runs_end(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = subprocess.run([sys.executable, "-c", LOCKS], env={**os.environ, "TMPDIR": str(tmp)}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "1", "False", "1"]
    assert sorted(p.name for p in tmp.iterdir()) == []
