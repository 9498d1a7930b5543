"""Convolution and max-pooling Ops for pytensor, with gradients.

pytensor 3 has no CNN layers, so these are four small Ops:

- :func:`conv2d` (NHWC input, HWIO kernel, "valid", stride 1) and the two Ops
  of its gradient;
- :func:`max_pool2d` (non-overlapping ``k x k`` windows) and its gradient.

Each runs everywhere pytensor does (``perform`` in NumPy; the numba backend
calls it in object mode) and is registered with pytensor's JAX dispatcher,
where it becomes the matching ``jax.lax`` primitive, so a PyMC model built
from them compiles whole to JAX (``backend="jax"``).

Activations are NHWC (channels last), the layout in which XLA's CPU
convolutions run fastest (a CNN step in NCHW takes longer in plain JAX too). Kernels are HWIO ``(kh, kw, in, out)`` so that, as
for dense ``(in, out)`` weights, the fan-in is the product of all but the
last axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytensor.tensor as pt
from jax import lax
from numpy.lib.stride_tricks import sliding_window_view
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.scalar import upcast

__all__ = ["Conv2d", "MaxPool2d", "conv2d", "max_pool2d"]

_DIMS = ("NHWC", "HWIO", "NHWC")


def _out_dim(size, k):
    return None if size is None else size - k + 1


# --------------------------------------------------------------------- conv2d
class Conv2d(Op):
    """The valid, stride-1 2-D convolution as a pytensor Op.

    ``y[n, i, j, o] = sum_{a, b, c} x[n, i + a, j + b, c] * w[a, b, c, o]`` for an NHWC input
    ``x`` and an HWIO kernel ``w``. Its gradients are two Ops of their own; on the JAX backend all
    three become ``jax.lax.conv_general_dilated`` and its transpose. Models call it through
    :func:`conv2d`.
    """

    __props__ = ()

    def make_node(self, x, w):
        x, w = pt.as_tensor_variable(x), pt.as_tensor_variable(w)
        if x.ndim != 4 or w.ndim != 4:
            raise ValueError(f"conv2d needs a 4-D input and kernel, got {x.ndim}-D and {w.ndim}-D")
        n, h, wd, _ = x.type.shape
        kh, kw, _, o = w.type.shape
        shape = (n, _out_dim(h, kh) if kh else None, _out_dim(wd, kw) if kw else None, o)
        dtype = upcast(x.dtype, w.dtype)
        return Apply(self, [x, w], [pt.tensor(dtype=dtype, shape=shape)])

    def perform(self, node, inputs, outputs):
        x, w = inputs
        kh, kw = w.shape[:2]
        windows = sliding_window_view(x, (kh, kw), axis=(1, 2))  # (n, oh, ow, c, kh, kw)
        y = np.einsum("nijcab,abco->nijo", windows, w, optimize=True)
        outputs[0][0] = y.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, node, shapes):
        (n, h, wd, _), (kh, kw, _, o) = shapes
        return [(n, h - kh + 1, wd - kw + 1, o)]

    def pullback(self, inputs, outputs, cotangents):
        x, w = inputs
        gy = pt.cast(cotangents[0], outputs[0].dtype)  # upstream may have upcast
        return [Conv2dGradInput()(gy, w, x.shape), Conv2dGradKernel()(x, gy, w.shape)]


class Conv2dGradInput(Op):
    """Gradient of :class:`Conv2d` with respect to its input (a full convolution)."""

    __props__ = ()

    def make_node(self, gy, w, x_shape):
        gy, w = pt.as_tensor_variable(gy), pt.as_tensor_variable(w)
        x_shape = pt.as_tensor_variable(x_shape, dtype="int64")
        n = gy.type.shape[0]
        c = w.type.shape[2]
        out = pt.tensor(dtype=upcast(gy.dtype, w.dtype), shape=(n, None, None, c))
        return Apply(self, [gy, w, x_shape], [out])

    def perform(self, node, inputs, outputs):
        gy, w, _ = inputs
        kh, kw = w.shape[:2]
        padded = np.pad(gy, ((0, 0), (kh - 1, kh - 1), (kw - 1, kw - 1), (0, 0)))
        windows = sliding_window_view(padded, (kh, kw), axis=(1, 2))  # (n, h, w, o, kh, kw)
        gx = np.einsum("nijoab,abco->nijc", windows, w[::-1, ::-1], optimize=True)
        outputs[0][0] = gx.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, node, shapes):
        _, _, x_shape = node.inputs
        return [tuple(x_shape[i] for i in range(4))]


class Conv2dGradKernel(Op):
    """Gradient of :class:`Conv2d` with respect to its kernel (a correlation)."""

    __props__ = ()

    def make_node(self, x, gy, w_shape):
        x, gy = pt.as_tensor_variable(x), pt.as_tensor_variable(gy)
        w_shape = pt.as_tensor_variable(w_shape, dtype="int64")
        out = pt.tensor(dtype=upcast(x.dtype, gy.dtype), shape=(None, None, x.type.shape[3], gy.type.shape[3]))
        return Apply(self, [x, gy, w_shape], [out])

    def perform(self, node, inputs, outputs):
        x, gy, w_shape = inputs
        kh, kw = int(w_shape[0]), int(w_shape[1])
        windows = sliding_window_view(x, (kh, kw), axis=(1, 2))  # (n, oh, ow, c, kh, kw)
        gw = np.einsum("nijcab,nijo->abco", windows, gy, optimize=True)
        outputs[0][0] = gw.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, node, shapes):
        _, _, w_shape = node.inputs
        return [tuple(w_shape[i] for i in range(4))]


def _jax_conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=_DIMS)


# pytensor 3.3's JAX reductions return float64 for float32 graphs (fixed for
# fits by inference/compile/jax_fixes.py, which these Ops do not import), and lax.conv
# refuses mixed dtypes: so every implementation casts its inputs to the dtype
# the graph declares, which is free when they already have it.
#
# Both gradients are JAX's own transpose of the convolution (jax.vjp), so XLA
# picks their convolutions as it does for any JAX CNN. Shapes inside a jitted
# function are static, so the missing operand's shape comes from the other two;
# the forward convolution the vjp traces is unused and removed by XLA.


@jax_funcify.register(Conv2d)
def _jax_conv2d(op, node, **kwargs):
    dtype = node.outputs[0].dtype
    return lambda x, w: _jax_conv(x.astype(dtype), w.astype(dtype))


@jax_funcify.register(Conv2dGradInput)
def _jax_conv2d_grad_input(op, node, **kwargs):
    dtype = node.outputs[0].dtype

    def grad_input(gy, w, x_shape):
        n, oh, ow, _ = gy.shape
        kh, kw, c, _ = w.shape
        w = w.astype(dtype)
        _, vjp = jax.vjp(lambda x: _jax_conv(x, w), jnp.zeros((n, oh + kh - 1, ow + kw - 1, c), dtype))
        return vjp(gy.astype(dtype))[0]

    return grad_input


@jax_funcify.register(Conv2dGradKernel)
def _jax_conv2d_grad_kernel(op, node, **kwargs):
    dtype = node.outputs[0].dtype

    def grad_kernel(x, gy, w_shape):
        (_, h, wd, c), (_, oh, ow, o) = x.shape, gy.shape
        x = x.astype(dtype)
        _, vjp = jax.vjp(lambda w: _jax_conv(x, w), jnp.zeros((h - oh + 1, wd - ow + 1, c, o), dtype))
        return vjp(gy.astype(dtype))[0]

    return grad_kernel


def conv2d(x, w):
    """Valid 2-D convolution with stride 1, for a PyMC model.

    Like every deep-learning "convolution" this is a cross-correlation (the
    kernel is not flipped), which is what ``jax.lax.conv_general_dilated`` does.

    Parameters
    ----------
    x : tensor-like, shape (N, H, W, C)
        The input, channels last (NHWC).
    w : tensor-like, shape (kh, kw, C, O)
        The kernel (HWIO).

    Returns
    -------
    TensorVariable, shape (N, H - kh + 1, W - kw + 1, O)
        The convolution, in the input's and kernel's common dtype.

    Raises
    ------
    ValueError
        If ``x`` or ``w`` is not 4-D.
    """
    return Conv2d()(x, w)


# ----------------------------------------------------------------- max pooling
def _pool_windows(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` (n, h, w, c) as (n, h//k, k, w//k, k, c) windows, incomplete ones dropped."""
    n, h, w, c = x.shape
    return x[:, : h - h % k, : w - w % k].reshape(n, h // k, k, w // k, k, c)


class MaxPool2d(Op):
    """Max over non-overlapping ``k x k`` windows of an NHWC tensor, as a pytensor Op.

    Rows and columns that do not fill a window are dropped. On the JAX backend it becomes
    ``jax.lax.reduce_window``; its gradient sends each window's gradient to the window's first
    maximum. Models call it through :func:`max_pool2d`.

    Parameters
    ----------
    k : int, default 2
        The window's side and stride.

    Raises
    ------
    ValueError
        If ``k`` is below 1.
    """

    __props__ = ("k",)

    def __init__(self, k: int = 2):
        if int(k) < 1:
            raise ValueError(f"pool size must be >= 1, got {k}")
        self.k = int(k)

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        if x.ndim != 4:
            raise ValueError(f"max_pool2d needs a 4-D NHWC input, got {x.ndim}-D")
        n, h, w, c = x.type.shape
        shape = (n, None if h is None else h // self.k, None if w is None else w // self.k, c)
        return Apply(self, [x], [pt.tensor(dtype=x.dtype, shape=shape)])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = _pool_windows(inputs[0], self.k).max(axis=(2, 4))

    def infer_shape(self, node, shapes):
        n, h, w, c = shapes[0]
        return [(n, h // self.k, w // self.k, c)]

    def pullback(self, inputs, outputs, cotangents):
        gy = pt.cast(cotangents[0], outputs[0].dtype)  # upstream may have upcast
        return [MaxPool2dGrad(self.k)(inputs[0], gy)]


class MaxPool2dGrad(Op):
    """Gradient of :class:`MaxPool2d`: each window's gradient goes to its (first) maximum."""

    __props__ = ("k",)

    def __init__(self, k: int = 2):
        self.k = int(k)

    def make_node(self, x, gy):
        x, gy = pt.as_tensor_variable(x), pt.as_tensor_variable(gy)
        return Apply(self, [x, gy], [x.type()])

    def perform(self, node, inputs, outputs):
        x, gy = inputs
        k = self.k
        n, h, w, c = x.shape
        win = _pool_windows(x, k)  # (n, h/k, k, w/k, k, c)
        win = win.transpose(0, 1, 3, 5, 2, 4).reshape(n, h // k, w // k, c, k * k)
        first = win.argmax(axis=-1)  # ties: the first maximum, as XLA's select-and-scatter
        onehot = np.arange(k * k) == first[..., None]
        g = (onehot * gy[..., None]).reshape(n, h // k, w // k, c, k, k)
        gx = np.zeros_like(x)
        gx[:, : h - h % k, : w - w % k] = g.transpose(0, 1, 4, 2, 5, 3).reshape(
            n, (h // k) * k, (w // k) * k, c
        )
        outputs[0][0] = gx

    def infer_shape(self, node, shapes):
        return [shapes[0]]


def _jax_max_pool(x, k):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, k, k, 1), "VALID")


@jax_funcify.register(MaxPool2d)
def _jax_max_pool2d(op, node, **kwargs):
    k, dtype = op.k, node.outputs[0].dtype
    return lambda x: _jax_max_pool(x.astype(dtype), k)


@jax_funcify.register(MaxPool2dGrad)
def _jax_max_pool2d_grad(op, node, **kwargs):
    k, dtype = op.k, node.outputs[0].dtype

    def grad(x, gy):
        _, vjp = jax.vjp(lambda x: _jax_max_pool(x, k), x.astype(dtype))
        return vjp(gy.astype(dtype))[0]

    return grad


def max_pool2d(x, k: int = 2):
    """Max pooling over non-overlapping ``k x k`` windows (stride ``k``, "valid"), for a PyMC model.

    Parameters
    ----------
    x : tensor-like, shape (N, H, W, C)
        The input, channels last (NHWC).
    k : int, default 2
        The window's side and stride.

    Returns
    -------
    TensorVariable, shape (N, H // k, W // k, C)
        The maximum of each window; rows and columns that do not fill a window are dropped.

    Raises
    ------
    ValueError
        If ``x`` is not 4-D or ``k`` is below 1.
    """
    return MaxPool2d(k)(x)
