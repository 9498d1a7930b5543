import numpy as np
import pytest

from bnn_zoo.data import toy


@pytest.mark.parametrize("name", toy.DATASETS)
def test_split_sizes_labels_and_reproducibility(name):
    a = toy.load(name, n_train=70, n_test=30, noise=0.1, seed=5)
    b = toy.load(name, n_train=70, n_test=30, noise=0.1, seed=5)
    assert a.X_train.shape == (70, 2) and a.X_test.shape == (30, 2)
    assert set(np.unique(a.y_train)) == {0, 1}
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.X_train, toy.load(name, n_train=70, n_test=30, seed=6).X_train)


def test_grid_covers_the_data():
    s = toy.load("moons")
    xx, yy, pts = s.grid(50, margin=0.5)
    assert pts.shape == (2500, 2)
    X = np.vstack([s.X_train, s.X_test])
    assert (pts.min(0) <= X.min(0) - 0.5 + 1e-12).all() and (pts.max(0) >= X.max(0) + 0.5 - 1e-12).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown dataset 'spirals'; valid: moons, circles"):
        toy.load("spirals")
    with pytest.raises(ValueError, match="noise must be >= 0"):
        toy.load("moons", noise=-1)
    with pytest.raises(ValueError, match="n_train >= 2"):
        toy.load("moons", n_train=1)
