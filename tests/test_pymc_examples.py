"""PyMC's own example BNN (pymc-examples, "Variational Inference: Bayesian Neural Networks"),
written as that page writes it, full-batch and with ``pm.Minibatch``: bnn_zoo fits, samples and
predicts it, and PyMC's own ``pm.set_data`` + ``pm.sample_posterior_predictive`` work on the draws."""

import numpy as np
import pymc as pm
import pytensor
import pytest
from sklearn.datasets import make_moons
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import scale

import bnn_zoo

floatX = pytensor.config.floatX
X, Y = make_moons(noise=0.2, random_state=0, n_samples=1000)
X = scale(X).astype(floatX)
Y = Y.astype(floatX)
X_train, X_test, Y_train, Y_test = train_test_split(X, Y, test_size=0.5, random_state=0)
STEPS = 3000


def construct_nn(ann_input=None, ann_output=None, seed=9927):
    """The page's network; with ``pm.Minibatch`` tensors given, built on them, as the page's
    minibatch section does; otherwise on ``pm.Data`` containers named as the page names them."""
    rng = np.random.default_rng(seed)
    n_hidden = 5
    init_1 = rng.standard_normal(size=(X_train.shape[1], n_hidden)).astype(floatX)
    init_2 = rng.standard_normal(size=(n_hidden, n_hidden)).astype(floatX)
    init_out = rng.standard_normal(size=n_hidden).astype(floatX)
    coords = {"hidden_layer_1": np.arange(n_hidden), "hidden_layer_2": np.arange(n_hidden),
              "train_cols": np.arange(X_train.shape[1])}
    with pm.Model(coords=coords) as neural_network:
        if ann_input is None:
            ann_input = pm.Data("ann_input", X_train)
            ann_output = pm.Data("ann_output", Y_train)
        weights_in_1 = pm.Normal("w_in_1", 0, sigma=1, initval=init_1, dims=("train_cols", "hidden_layer_1"))
        weights_1_2 = pm.Normal("w_1_2", 0, sigma=1, initval=init_2, dims=("hidden_layer_1", "hidden_layer_2"))
        weights_2_out = pm.Normal("w_2_out", 0, sigma=1, initval=init_out, dims="hidden_layer_2")
        act_1 = pm.math.tanh(pm.math.dot(ann_input, weights_in_1))
        act_2 = pm.math.tanh(pm.math.dot(act_1, weights_1_2))
        act_out = pm.math.sigmoid(pm.math.dot(act_2, weights_2_out))
        pm.Bernoulli("out", act_out, observed=ann_output, total_size=Y_train.shape[0])
    return neural_network


def accuracy(draws) -> float:
    return float(((np.asarray(draws).reshape(-1, len(Y_test)).mean(0) > 0.5) == Y_test).mean())


def test_the_full_batch_example_fits_and_predicts_the_pymc_way():
    model = construct_nn()
    result = bnn_zoo.fit(model, steps=STEPS, progressbar=False)
    trace = bnn_zoo.sample(result, 200, random_seed=1)
    with model:
        pm.set_data(new_data={"ann_input": X_test, "ann_output": np.zeros(len(X_test), floatX)})
        ppc = pm.sample_posterior_predictive(trace, random_seed=2, progressbar=False)
    assert ppc.posterior_predictive["out"].shape == (1, 200, len(X_test))
    assert accuracy(ppc.posterior_predictive["out"]) > 0.9
    pred = bnn_zoo.predict(result, {"ann_input": X_test}, idata=trace, var_names=["out"], random_seed=3)
    assert accuracy(pred["predictions"]["out"]) > 0.9


def test_the_minibatch_example_is_the_engines_minibatch_fit_over_the_full_data():
    """``pm.Minibatch(X_train, Y_train, batch_size=50)`` is fitted as the same network on data
    containers of the full arrays, cut 50 rows at a time by the engine: the ELBO trace equals the
    ``batch_size=50, minibatch=[...]`` fit of that network, step for step."""
    minibatch_x, minibatch_y = pm.Minibatch(X_train, Y_train, batch_size=50)
    written = construct_nn(minibatch_x, minibatch_y)
    result = bnn_zoo.fit(written, steps=STEPS, progressbar=False)
    containers = construct_nn()
    reference = bnn_zoo.fit(containers, steps=STEPS, batch_size=50, minibatch=["ann_input", "ann_output"],
                            progressbar=False)
    np.testing.assert_array_equal(result.elbo, reference.elbo)
    assert [v.name for v in result.model.free_RVs] == [v.name for v in written.free_RVs]
    assert sorted(v.name for v in result.model.data_vars) == ["minibatch_0", "minibatch_1"]
    assert result.model.named_vars_to_dims["w_in_1"] == ("train_cols", "hidden_layer_1")
    # draws on the full training data (the log likelihood of all 500 points), predictions on new data
    trace = bnn_zoo.sample(result, 200, random_seed=1)
    assert trace["log_likelihood"]["out"].shape == (1, 200, len(X_train))
    pred = bnn_zoo.predict(result, {"minibatch_0": X_test}, idata=trace, var_names=["out"], random_seed=3)
    assert accuracy(pred["predictions"]["out"]) > 0.9
    # the user's model is left as it was
    assert not written.data_vars


def test_a_batch_size_other_than_the_minibatchs_is_refused():
    minibatch_x, minibatch_y = pm.Minibatch(X_train, Y_train, batch_size=50)
    model = construct_nn(minibatch_x, minibatch_y)
    with pytest.raises(ValueError, match=r"pm.Minibatch\(\.\.\., batch_size=50\); leave fit's batch_size"):
        bnn_zoo.fit(model, batch_size=20, steps=10, progressbar=False)
    with pytest.raises(ValueError, match="leave fit's batch_size and minibatch out"):
        bnn_zoo.fit(model, minibatch=["minibatch_0"], steps=10, progressbar=False)
