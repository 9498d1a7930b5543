"""conv2d and max_pool2d against jax.lax and plain loops, on the default and JAX backends."""

import jax
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from jax import lax
from scipy.special import expit

import bnn_zoo.inference  # noqa: F401  (applies the JAX reduction dtype fix)
from bnn_zoo.models.ops import conv2d, max_pool2d

MODES = ["NUMBA", "JAX"]
jax.config.update("jax_enable_x64", True)  # float64 references (pytensor's JAX backend sets it too)


def conv_loops(x, w):
    """Cross-correlation by explicit loops: the definition, independent of any library."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    y = np.zeros((n, h - kh + 1, wd - kw + 1, o))
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            y[:, i, j, :] = np.einsum("nabc,abco->no", x[:, i : i + kh, j : j + kw, :], w)
    return y


def lax_conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def lax_pool(x, k=2):
    return lax.reduce_window(x, -np.inf, lax.max, (1, k, k, 1), (1, k, k, 1), "VALID")


def reference_loss(x, w):
    y = lax_conv(x, w)
    return (lax_pool(jax.numpy.tanh(y)) ** 2).sum() + (0.7 * y).sum()


def graph():
    x, w = pt.tensor4("x"), pt.tensor4("w")
    y = conv2d(x, w)
    loss = (max_pool2d(pt.tanh(y)) ** 2).sum() + (0.7 * y).sum()
    return x, w, y, loss


SHAPES = [((2, 7, 7, 1), (3, 3, 1, 2)), ((3, 9, 8, 2), (2, 4, 2, 3)), ((1, 6, 5, 3), (1, 1, 3, 4))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("x_shape, w_shape", SHAPES)
def test_conv_pool_values_and_gradients_match_jax(mode, x_shape, w_shape):
    rng = np.random.default_rng(0)
    xv, wv = rng.normal(size=x_shape), rng.normal(size=w_shape)
    x, w, y, loss = graph()
    f = pytensor.function([x, w], [y, loss, *pytensor.grad(loss, [x, w])], mode=mode)
    y_val, loss_val, gx, gw = f(xv, wv)
    ref_gx, ref_gw = jax.grad(reference_loss, argnums=(0, 1))(xv, wv)
    np.testing.assert_allclose(y_val, conv_loops(xv, wv), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss_val, reference_loss(xv, wv), rtol=1e-12)
    np.testing.assert_allclose(gx, ref_gx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, ref_gw, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("x_shape, w_shape", SHAPES[:2])
def test_gradients_pass_pytensor_gradient_checker(x_shape, w_shape):
    rng = np.random.default_rng(1)
    xv, wv = rng.normal(size=x_shape), rng.normal(size=w_shape)
    pytensor.gradient.verify_grad(lambda x, w: max_pool2d(pt.tanh(conv2d(x, w))), [xv, wv], rng=rng)


@pytest.mark.parametrize("mode", MODES)
def test_max_pool_drops_incomplete_windows_and_routes_gradient_to_the_max(mode):
    x = pt.tensor4("x")
    # NHWC: 2 images of 5 rows, 7 columns, 3 channels.
    xv = np.arange(2 * 3 * 5 * 7, dtype="float64").reshape(2, 3, 5, 7)[..., ::-1].transpose(0, 2, 3, 1).copy()
    pooled = max_pool2d(x)
    f = pytensor.function([x], [pooled, pytensor.grad(pooled.sum(), x)], mode=mode)
    out, g = f(xv)
    assert out.shape == (2, 2, 3, 3)
    np.testing.assert_array_equal(out, xv[:, :4, :6].reshape(2, 2, 2, 3, 2, 3).max(axis=(2, 4)))
    # One unit of gradient per window, on the window's maximum (values grow down the
    # rows and shrink along the columns: row 1, col 0 of each window); nothing for
    # the dropped row and column.
    assert g.sum() == out.size
    expected = np.zeros_like(xv)
    expected[:, 1:4:2, 0:6:2, :] = 1
    np.testing.assert_array_equal(g, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_is_preserved(mode, dtype):
    x, w = pt.tensor4("x", dtype=dtype), pt.tensor4("w", dtype=dtype)
    out = max_pool2d(conv2d(x, w))
    grads = pytensor.grad(out.sum(dtype=dtype), [x, w])
    f = pytensor.function([x, w], [out, *grads], mode=mode)
    res = f(np.ones((1, 6, 6, 1), dtype), np.ones((3, 3, 1, 2), dtype))
    assert [r.dtype for r in res] == [dtype] * 3


def test_jax_reductions_keep_the_declared_dtype():
    # pytensor 3.3's JAX Sum returned its float64 accumulator for float32 input;
    # inference.jax_fixes casts it back (else ADVI state turns float64 after one step).
    x = pt.vector("x", dtype="float32")
    f = pytensor.function([x], [x.sum(), (x**2).sum() * x], mode="JAX")
    assert [np.asarray(r).dtype for r in f(np.ones(3, "float32"))] == ["float32", "float32"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_jax_softplus_has_a_finite_gradient_everywhere(dtype):
    # pytensor rewrites log1p(exp(x)) to Softplus, whose JAX version in pytensor 3.3
    # had a NaN gradient beyond about |x| = 710 (float64; 89 in float32), where it is
    # 0 or 1; inference.jax_fixes replaces it.
    from bnn_zoo.inference.compile.graphs import jaxify

    x = pt.vector("x", dtype=dtype)
    f = jaxify([x], [pt.log1p(pt.exp(x)).sum()])
    points = np.array([-1e4, -800.0, -100.0, -30.0, -1.0, 0.0, 2.0, 30.0, 1e4], dtype)
    value, grad = jax.value_and_grad(lambda v: f(v)[0])(points)
    expected = np.logaddexp(0.0, points.astype(float))
    np.testing.assert_allclose(float(value), expected.sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad, float), expit(points.astype(float)),
                               rtol=1e-6, atol=1e-30)


def test_jax_row_by_row_indexing_is_numpys_without_a_gather():
    # x[arange(n)[:, None], y], how PyMC's Categorical takes each row's log probability, is
    # traced as a comparison with each column index (inference.jax_fixes): values and
    # gradients are NumPy's indexing, for negative columns and fewer rows than x has; other
    # rows, rows along another axis of the result, and more than SMALL_TAKE columns stay a gather.
    from bnn_zoo.inference.compile.graphs import jaxify
    from bnn_zoo.inference.compile.jax_fixes import SMALL_TAKE

    x, y = pt.matrix("x"), pt.lvector("y")
    rows = pt.arange(y.shape[0])
    exprs = [x[rows[:, None], y[:, None]], x[rows, y], x[rows[:, None], y],
             x[pt.arange(1, y.shape[0]), y[1:]], x[rows, pt.stack([y, y[::-1]])]]
    rng = np.random.default_rng(0)
    for k in (3, SMALL_TAKE + 1):
        xv, yv = rng.normal(size=(7, k)), np.array([0, 2, -1, 1, -3, 2])  # 6 of the 7 rows
        expected = [xv[np.arange(6)[:, None], yv[:, None]], xv[np.arange(6), yv],
                    xv[np.arange(6)[:, None], yv], xv[np.arange(1, 6), yv[1:]],
                    xv[np.arange(6), np.stack([yv, yv[::-1]])]]
        f = jaxify([x, y], exprs)
        for got, want in zip(f(xv, yv), expected):
            np.testing.assert_array_equal(np.asarray(got), want)
        weights = [rng.normal(size=e.shape) for e in expected]
        grad = jax.grad(lambda v: sum((o * w).sum() for o, w in zip(f(v, yv), weights)))(xv)
        want = np.zeros_like(xv)
        for w, r, c in zip(weights, [np.arange(6)[:, None], np.arange(6), np.arange(6)[:, None],
                                     np.arange(1, 6), np.arange(6)],
                           [yv[:, None], yv, yv, yv[1:], np.stack([yv, yv[::-1]])]):
            np.add.at(want, np.broadcast_arrays(r, c), w)
        np.testing.assert_allclose(np.asarray(grad), want, rtol=1e-12)
        jaxpr = str(jax.make_jaxpr(f)(xv, yv))
        # arange(1, n), and rows along the result's last axis rather than its first: gathers
        assert jaxpr.count("gather[") == (len(exprs) if k > SMALL_TAKE else 2)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="4-D"):
        conv2d(pt.matrix("x"), pt.tensor4("w"))
    with pytest.raises(ValueError, match="4-D"):
        max_pool2d(pt.matrix("x"))
    with pytest.raises(ValueError, match="pool size"):
        max_pool2d(pt.tensor4("x"), 0)


def test_the_ops_use_pytensors_current_infer_shape_signature(tmp_path):
    # pytensor >= 3.1.1 calls infer_shape(node, shapes) and wraps, with a DeprecationWarning
    # naming the class, an Op whose infer_shape still takes fgraph first.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-W", "error:bnn_zoo:DeprecationWarning", "-c",
                           "import bnn_zoo.models.ops, bnn_zoo.inference.advi.estimators"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
