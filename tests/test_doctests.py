"""The examples in the library's docstrings run, and print what they show (optax's habit)."""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Every library module whose docstrings hold an example: none is left out, so that an example
#: cannot drift from the code.
MODULES = sorted(
    ".".join(["bnn_zoo", *([] if folder == "src/bnn_zoo" else [folder]),
              *path.relative_to(ROOT / folder).with_suffix("").parts]).removesuffix(".__init__")
    for folder in ("models", "inference", "evaluation", "data", "experiments", "src/bnn_zoo")
    for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts and ">>> " in path.read_text())


def test_the_examples_found_include_the_public_api():
    assert {"bnn_zoo.inference.dispatch", "bnn_zoo.inference.diagnostics.qcheck", "bnn_zoo.inference.methods",
            "bnn_zoo.inference.advi.optim", "bnn_zoo.inference.families.gaussians",
            "bnn_zoo.evaluation.calibration"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
