import itertools

import numpy as np
import optax
import pytest

import bnn_zoo
from bnn_zoo.data import toy
from bnn_zoo.evaluation.metrics import accuracy
from bnn_zoo.models import HYPERPRIORS, WEIGHT_PRIORS, mlp_classifier


@pytest.fixture(scope="module")
def moons():
    return toy.load("moons", n_train=700, n_test=300, noise=0.2, seed=0)


def test_model_has_named_coords_and_dims(moons):
    model = mlp_classifier(moons.X_train, moons.y_train, hidden=(5, 4))
    assert model.named_vars_to_dims["W_0"] == ("feature", "unit_0")
    assert model.named_vars_to_dims["W_1"] == ("unit_0", "unit_1")
    assert model.named_vars_to_dims["W_2"] == ("unit_1", "class")
    assert model.named_vars_to_dims["p"] == ("obs", "class")
    assert len(model.coords["unit_1"]) == 4 and len(model.coords["class"]) == 2
    assert {v.name for v in model.free_RVs} == {
        "W_0", "b_0", "W_1", "b_1", "W_2", "b_2", "scale_0", "scale_1", "scale_2"}


def test_scale_free_and_fixed_models_have_no_scale_variables(moons):
    for prior, hyper in [("flat", "halfcauchy"), ("normal", "fixed")]:
        model = mlp_classifier(moons.X_train, moons.y_train, prior=prior, hyperprior=hyper)
        assert not [v for v in model.free_RVs if v.name.startswith("scale")]


def test_bad_data_is_rejected():
    with pytest.raises(ValueError, match=r"X must be \(n, d\)"):
        mlp_classifier(np.zeros((5, 2)), np.zeros(4, int))
    with pytest.raises(ValueError, match="labels must lie in 0..1"):
        mlp_classifier(np.zeros((3, 2)), np.array([0, 1, 2]), n_classes=2)
    with pytest.raises(ValueError, match="unknown activation"):
        mlp_classifier(np.zeros((3, 2)), np.array([0, 1, 1]), activation="gelu")


@pytest.mark.parametrize("prior, hyperprior",
                         list(itertools.product(sorted(WEIGHT_PRIORS), sorted(HYPERPRIORS))))
def test_every_combination_fits_without_nan(moons, prior, hyperprior):
    model = mlp_classifier(moons.X_train, moons.y_train, prior=prior, hyperprior=hyperprior)
    result = bnn_zoo.fit(model, steps=150, optimizer=optax.adam(0.05), progressbar=False)
    assert np.isfinite(result.elbo).all()
    assert result.elbo[-20:].mean() > result.elbo[:20].mean()  # it is learning


def test_moons_accuracy_after_a_short_fit(moons):
    model = mlp_classifier(moons.X_train, moons.y_train)
    result = bnn_zoo.fit(model, steps=3000, optimizer=optax.adam(0.05), progressbar=False)
    pred = bnn_zoo.predict(result, {"X": moons.X_test}, var_names=["p"], draws=200)
    proba = pred["predictions"]["p"].values[0]
    assert accuracy(proba, moons.y_test) >= 0.9
