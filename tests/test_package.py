"""The distribution: one import package, a console command, and no clash with a user's own modules."""

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import ROOT, command_env

SOURCES = ("pyproject.toml", "README.md", "src", "models", "inference", "evaluation", "data",
           "experiments")


def test_the_wheel_installs_bnn_zoo_and_nothing_else(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in SOURCES:  # a copy, so that the build leaves nothing in the checkout
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, tree / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path / "dist"), str(tree)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("bnn_zoo-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert {n.split("/")[0] for n in names} == {"bnn_zoo", info}
        assert z.read(f"{info}/top_level.txt").decode().split() == ["bnn_zoo"]
        assert "bnn-zoo = bnn_zoo.cli:main" in z.read(f"{info}/entry_points.txt").decode()
    for sub in ("models", "inference", "evaluation", "data", "experiments"):
        assert f"bnn_zoo/{sub}/__init__.py" in names
    assert not any("tests/" in n or "benchmarks/" in n for n in names)


def test_a_folder_with_its_own_models_and_data_packages(tmp_path):
    # A user's project beside ours: its models.py and data/ package stay its own.
    (tmp_path / "models.py").write_text("MINE = True\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__init__.py").write_text("MINE = True\n")
    check = ("import bnn_zoo, bnn_zoo.experiments.toy.priors, bnn_zoo.data.toy, models, data;"
             "assert models.MINE and data.MINE and not hasattr(data, 'toy');"
             "print(bnn_zoo.models.__name__, bnn_zoo.data.toy.__name__)")
    proc = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True,
                          text=True, env=command_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["bnn_zoo.models", "bnn_zoo.data.toy"]
    proc = subprocess.run(["bnn-zoo", "moons", "--steps", "200", "--draws", "30", "--n-train", "50", "--n-test",
                           "20", "--restarts", "1", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, env=command_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "results" / "moons" / "normal-inversegamma-s0" / "idata.nc").is_file()


def test_the_command_answers_help_and_a_wrong_command_without_loading_the_engine(tmp_path):
    # bnn_zoo's public names load PyMC, JAX and ArviZ (seconds) when first used, not on import.
    check = ("import sys, bnn_zoo, bnn_zoo.cli as cli\n"
             "codes = cli.main(['--help']), cli.main(['spirals'])\n"
             "heavy = sorted(m for m in ('pymc', 'jax', 'arviz', 'pytensor') if m in sys.modules)\n"
             "fit = bnn_zoo.fit\n"
             "print(codes, heavy, fit.__module__, 'pymc' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          env=command_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "(0, 2) [] bnn_zoo.inference.dispatch True"
    assert "unknown command 'spirals'" in proc.stderr
