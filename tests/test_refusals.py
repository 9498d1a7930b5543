"""What the engine cannot do is refused in one sentence that names the variable and the way out,
raised by bnn_zoo itself (never a traceback from inside pytensor or JAX)."""

import traceback

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

import bnn_zoo


class Doubling(Op):
    """An Op a user wrote, with no JAX implementation."""

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = 2 * inputs[0]

    def pullback(self, inputs, outputs, cotangents):
        return [2 * cotangents[0]]


def discrete():
    with pm.Model() as model:
        k = pm.Poisson("k", 3)
        pm.Normal("y", k, 1, observed=[1.0, 2.0])
    return model


def no_free():
    with pm.Model() as model:
        pm.Normal("y", 0, 1, observed=[1.0, 2.0])
    return model


def custom_op():
    with pm.Model() as model:
        a = pm.Normal("a")
        pm.Normal("y", Doubling()(a), 1, observed=[1.0, 2.0])
    return model


def check(excinfo, *words):
    message = str(excinfo.value)
    assert len(message.splitlines()) == 1, message
    for word in words:
        assert word in message, message
    raised_in = traceback.extract_tb(excinfo.tb)[-1].filename
    assert "/bnn_zoo/" in raised_in or "/inference/" in raised_in, raised_in


@pytest.mark.parametrize("build, error, words", [
    (discrete, ValueError, ["'k'", "discrete", "Poisson", "marginalise", "pm.sample"]),
    (no_free, ValueError, ["no free variables", "nothing to fit"]),
    (custom_op, NotImplementedError, ["Doubling", "no JAX implementation", "jax_funcify"]),
])
def test_what_fit_cannot_fit_is_refused_before_any_step(build, error, words):
    with pytest.raises(error) as excinfo:
        bnn_zoo.fit(build(), steps=10, progressbar=False)
    check(excinfo, *words)


@pytest.fixture(scope="module")
def linear():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pm.Model() as model:
        x = pm.Data("x", X)
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Normal("y", x @ w, 1, observed=X @ [1.0, -1.0])
    return bnn_zoo.fit(model, steps=200, progressbar=False)


def test_predict_sample_and_loo_refuse_bad_input_in_one_sentence(linear):
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.predict(linear, {"X": np.ones((5, 2))})
    check(excinfo, "'X'", "its containers: x")
    for bad in (np.ones((5, 3)), np.ones(5)):
        with pytest.raises(ValueError) as excinfo:
            bnn_zoo.predict(linear, {"x": bad})
        check(excinfo, "'x'", "shape (n, 2)", str(bad.shape))
    for draws in (0, -3):
        with pytest.raises(ValueError) as excinfo:
            bnn_zoo.sample(linear, draws)
        check(excinfo, "draws", str(draws))
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.loo(bnn_zoo.sample(linear, 50, log_likelihood=False))
    check(excinfo, "log_likelihood", "log_likelihood=True")
