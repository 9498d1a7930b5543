"""The examples in the docstrings of the root API run, and print what they show (optax's habit)."""

import doctest
import importlib

import pytest

MODULES = ["bnn_zoo.inference.advi", "bnn_zoo.inference.batch", "bnn_zoo.inference.objective",
           "bnn_zoo.inference.families", "bnn_zoo.inference.checkpoint", "bnn_zoo.inference.defaults",
           "bnn_zoo.inference.sampling", "bnn_zoo.inference.prediction", "bnn_zoo.inference.psis",
           "bnn_zoo.inference.gaussians", "bnn_zoo.evaluation.calibration"]


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
