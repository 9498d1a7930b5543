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


@pytest.mark.parametrize("seed", [-1, None, 2.5, "0", True, 2**32, np.random.default_rng(0)])
def test_a_bad_random_seed_is_refused_by_name_everywhere(linear, seed):
    calls = {"fit": lambda: bnn_zoo.fit(linear.model, steps=10, random_seed=seed, progressbar=False),
             "fit_many": lambda: bnn_zoo.fit_many([linear.model], steps=10, random_seed=seed),
             "sample": lambda: bnn_zoo.sample(linear, 10, random_seed=seed),
             "predict": lambda: bnn_zoo.predict(linear, random_seed=seed),
             "nuts": lambda: bnn_zoo.nuts(linear, 10, tune=10, random_seed=seed)}
    for name, call in calls.items():
        with pytest.raises(ValueError) as excinfo:
            call()
        check(excinfo, "random_seed", "must be an integer in [0, 2**32)", "random_seed=0")
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit_many([linear.model, linear.model], steps=10, random_seed=[0, seed])
    check(excinfo, "random_seed[1]")


def _regression(rows=200, observed="container", total_size=True):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=rows) * 0.1
    with pm.Model() as model:
        x = pm.Data("x", X)
        w = pm.Normal("w", 0, 1, shape=2)
        value = pm.Data("y_data", y) if observed == "container" else y
        pm.Normal("y", x @ w, 0.1, observed=value, total_size=rows if total_size else None)
    return model


def test_a_minibatch_fit_whose_likelihood_would_be_wrong_is_refused():
    """Without total_size the likelihood stays at a minibatch's scale (sds ~sqrt(N / batch) too wide, as
    PyMC gives them, silently); observed values in a plain array cannot be cut with the inputs."""
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit(_regression(total_size=False), steps=10, batch_size=20, progressbar=False)
    check(excinfo, "'y'", "no total_size", "total_size=200", "pm.Normal('y'")
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit(_regression(observed="array"), steps=10, batch_size=20, progressbar=False)
    check(excinfo, "'y'", "not in a data container", "pm.Data('y_data', values)")
    X, y = np.ones((200, 2)), np.ones(200)
    with pm.Model() as written:  # PyMC's own minibatch form, total_size forgotten
        xb, yb = pm.Minibatch(X, y, batch_size=20)
        pm.Normal("y", xb @ pm.Normal("w", 0, 1, shape=2), 1, observed=yb)
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit(written, steps=10, progressbar=False)
    check(excinfo, "'y'", "total_size=200")
    bnn_zoo.fit(_regression(), steps=10, batch_size=20, progressbar=False)  # as PyMC writes it: fits


def test_loo_reweighted_and_predict_refuse_what_is_not_their_input(linear):
    idata = bnn_zoo.sample(linear, 100)
    for call, words in [(lambda: bnn_zoo.loo(linear), ["loo takes", "FitResult", "bnn_zoo.sample(result)"]),
                        (lambda: bnn_zoo.reweighted(linear), ["reweighted takes", "FitResult"]),
                        (lambda: bnn_zoo.loo(idata, var_name="nope"), ["'nope'", "one of y"]),
                        (lambda: bnn_zoo.predict(linear, {"x": np.ones((3, 2))}, idata=linear),
                         ["idata", "posterior group", "FitResult"]),
                        (lambda: bnn_zoo.predict(linear, np.ones((5, 2))), ["new_data", "ndarray", "x"])]:
        with pytest.raises(ValueError) as excinfo:
            call()
        check(excinfo, *words)


def test_predict_refuses_fractions_and_indices_past_the_end_for_an_integer_container():
    with pm.Model() as model:
        g = pm.Data("g", np.arange(30) % 3)
        a = pm.Normal("a", 0, 10, shape=3)
        pm.Normal("y", a[g], 0.1, observed=np.repeat([-5.0, 0.0, 5.0], 10).reshape(3, 10).T.ravel())
    result = bnn_zoo.fit(model, steps=200, progressbar=False)
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.predict(result, {"g": np.array([0.4, 1.9])})
    check(excinfo, "'g'", "must be integers like the container", "values such as 0.4")
    whole = bnn_zoo.predict(result, {"g": np.array([0.0, 2.0])}, draws=50)  # integral floats are indices
    assert whole["predictions"]["y"].shape == (1, 50, 2)
    for past in (3, -4):  # JAX would clamp 3 to the last group, where NumPy and PyMC raise
        with pytest.raises(ValueError) as excinfo:
            bnn_zoo.predict(result, {"g": np.array([0, 2, past])})
        check(excinfo, "'g'", "indexes an axis of 3 (0..2)", f"got {past}")
    assert bnn_zoo.predict(result, {"g": np.array([-1])}, draws=10)["predictions"]["y"].shape == (1, 10, 1)


def test_fit_many_precision_laplace_and_checkpoint_refuse_what_they_would_mishandle(linear, tmp_path):
    for call, error, words in [
            (lambda: bnn_zoo.fit_many(linear.model), TypeError, ["list of pymc.Model", "fit_many([model])"]),
            (lambda: bnn_zoo.fit_many([]), ValueError, ["at least one model"]),
            (lambda: bnn_zoo.fit_many([no_free()]), ValueError, ["no free variables"]),
            (lambda: bnn_zoo.fit(linear.model, method="laplace", average=0.5), ValueError,
             ["laplace", "average="]),
            (lambda: bnn_zoo.Checkpoint(tmp_path), ValueError, ["is a folder", "fit.nc"]),
            (lambda: bnn_zoo.Checkpoint(tmp_path / "file" / "fit.nc"), ValueError, ["which is a file"])]:
        (tmp_path / "file").write_text("")
        with pytest.raises(error) as excinfo:
            call()
        check(excinfo, *words)
    with pytest.raises(ValueError) as excinfo:
        with bnn_zoo.precision("no"):
            pass
    check(excinfo, "float32=True or False", "'no'")
    with pytest.raises(ValueError) as excinfo:  # a DataTree's repr is many lines: the message names its type
        bnn_zoo.fit(linear.model, steps=10, init=bnn_zoo.sample(linear, 30), progressbar=False)
    check(excinfo, "init must be a FitResult", "got DataTree")


@pytest.mark.parametrize("build, words", [
    ("observed", ["ELBO is -inf at step 1", "'y': -inf", "observed values of 'y'", "support"]),
    ("initval", ["'s': nan", "start value of 's'", "initval"]),
])
def test_a_model_outside_its_support_is_named_when_the_elbo_is_not_finite(build, words):
    with pm.Model() as model:
        if build == "observed":
            pm.HalfNormal("y", pm.HalfNormal("s", 1), observed=np.array([-1.0, 2.0]))
        else:
            pm.Normal("y", 0, pm.HalfNormal("s", 1, initval=-1.0), observed=np.array([1.0, 2.0]))
    with pytest.raises(bnn_zoo.NonFiniteLossError) as excinfo:
        bnn_zoo.fit(model, steps=100, progressbar=False)
    check(excinfo, *words)


@pytest.mark.parametrize("method", ["advi", "laplace"])
def test_arrays_whose_shapes_do_not_fit_are_named_in_the_models_words(method):
    """JAX's "sub got incompatible shapes" from deep inside a traced log density, said as the model's
    containers and their shapes: a container of 40 rows beside 50 observed values; new columns set."""
    X, y = np.ones((50, 2)), np.ones(50)
    with pm.Model() as model:
        x = pm.Data("x", X[:40])
        pm.Normal("y", x @ pm.Normal("w", 0, 1, shape=2), 1, observed=y)
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit(model, method=method, steps=20, progressbar=False)
    check(excinfo, "do not fit together", "incompatible shapes", "x (40, 2)", "pm.set_data")
    with pm.Model() as model:
        x = pm.Data("x", X)
        pm.Normal("y", x @ pm.Normal("w", 0, 1, shape=2), 1, observed=y)
    pm.set_data({"x": np.ones((50, 3))}, model=model)
    with pytest.raises(ValueError) as excinfo:
        bnn_zoo.fit(model, method=method, steps=20, progressbar=False)
    check(excinfo, "do not fit together", "x (50, 3)")
