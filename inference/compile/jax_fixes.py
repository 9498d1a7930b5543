"""Fixes to pytensor's JAX backend, applied on import.

Importing :mod:`bnn_zoo.inference.compile.jaxmodel` imports this module, so every
model the engine compiles has them; there is nothing to call.

pytensor 3.3's JAX implementation of reductions (``Sum``, ``Prod``, ...)
returns the *accumulator* dtype: a float32 ``Sum{acc=float64}`` hands back
float64. Under ``jax_enable_x64`` (which pytensor turns on) the float64 then
spreads: after one ADVI step the float32 variational parameters are float64
and every later step runs in double precision. Here each reduction's result
is cast to the dtype the graph declares.

pytensor's JAX ``Softplus`` (what ``log1p(exp(x))`` is rewritten to) picks
one of four formulas with nested ``jnp.where``; JAX differentiates every
branch, and beyond about ``abs(x) = 710`` (float64; 89 in float32) an unused
branch overflows (``x + exp(-x)`` far below zero, ``exp(x)`` far above), so
its zero cotangent times an infinite derivative makes the gradient NaN
where the answer is 0 or 1. Here it is ``jax.nn.softplus``, whose gradient
is the sigmoid everywhere (the engine differentiates the jaxified graph with
JAX, not with pytensor's ``grad``).

pytensor's linkers write the Python source of each function they generate to
a file, which PyTensor keeps (tracebacks and Numba read it back); without
``config.generated_src_dir`` each one is a new file in ``$TMPDIR`` that
nothing removes, and they pile up by the hundred. Unless the user has set
that directory, it is set here to ``generated-src`` in bnn-zoo's user cache
(:func:`bnn_zoo.cache.user_cache`), where each source is one content-addressed
file, reused by every later run, and PyTensor prunes the ones unused for weeks.

Indexing each row of a matrix at one column, ``x[arange(n)[:, None], y]``
(how PyMC's ``Categorical`` takes each observation's log probability of its
class), is a gather in XLA, and its gradient a scatter; on a CPU both run
element by element. Where the matrix has at most ``SMALL_TAKE`` columns (a
classifier's classes), the column is picked by comparing ``y`` with each
column index instead, which fuses with the log-softmax around it
(``python -m benchmarks.sweep_speed``, docs/benchmarks.md).

Within :func:`elementwise_dots`, a product of two matrices whose right
factor is small (``SMALL_DOT`` entries at most, such as a toy network's 2x5
and 5x5 weights) is traced as a broadcast multiply and sum rather than
pytensor's ``jnp.dot``. On a CPU, XLA runs a tiny ``dot`` as a call of its
own per product, while the elementwise form fuses with the activations
around it: a sweep's evaluation program, which evaluates a 2-5-5-2 network
at each draw, takes about half the time (``python -m
benchmarks.sweep_speed``, docs/benchmarks.md). Under a ``vmap`` over a
task's rows, as in a sweep's fit program, XLA's ``dot`` is the faster form,
so the form is chosen where a program is traced, not for every model: the
sweep's evaluation programs trace within it.
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp
import pytensor
from pytensor.graph.basic import Constant
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.scalar import Softplus
from pytensor.tensor.basic import ARange
from pytensor.tensor.elemwise import CAReduce, DimShuffle
from pytensor.tensor.math import Dot
from pytensor.tensor.subtensor import AdvancedSubtensor
from pytensor.tensor.type import float_dtypes, integer_dtypes

__all__ = ["SMALL_DOT", "SMALL_TAKE", "elementwise_dots"]

#: The most entries of a right factor that :func:`elementwise_dots` multiplies elementwise.
SMALL_DOT = 64
#: The most columns of a matrix whose row-by-row indexing ``x[arange(n)[:, None], y]`` compares
#: ``y`` with each column index rather than gathering.
SMALL_TAKE = 16

_ELEMENTWISE_DOTS = contextvars.ContextVar("elementwise_dots", default=False)

if not pytensor.config.generated_src_dir:  # a user's own setting stays
    from bnn_zoo.cache import user_cache

    pytensor.config.generated_src_dir = str(user_cache() / "generated-src")

_careduce_acc_dtype = jax_funcify.dispatch(CAReduce)
_advanced_subtensor = jax_funcify.dispatch(AdvancedSubtensor)


@jax_funcify.register(CAReduce)
def _careduce_declared_dtype(op, node=None, **kwargs):
    fn = _careduce_acc_dtype(op, node=node, **kwargs)
    if node is None:
        return fn
    dtype = node.outputs[0].dtype
    return lambda x: fn(x).astype(dtype)


@jax_funcify.register(Softplus)
def _softplus_with_finite_gradient(op, **kwargs):
    return jax.nn.softplus


@contextlib.contextmanager
def elementwise_dots():
    """Within it, jaxified models trace each small matrix product elementwise (the module's note).

    A program traced within it keeps that form wherever it later runs; one
    traced outside it has pytensor's ``jnp.dot``. Both give the product up to
    round-off.

    Examples
    --------
    >>> import jax, numpy as np, pytensor.tensor as pt
    >>> from pytensor.link.jax.dispatch import jax_funcify
    >>> x, w = pt.matrix("x"), pt.matrix("w")
    >>> dot = jax_funcify(pt.dot(x, w).owner.op)
    >>> a, b = np.ones((700, 2)), np.ones((2, 5))
    >>> "dot_general" in str(jax.make_jaxpr(lambda a, b: dot(a, b))(a, b))
    True
    >>> with elementwise_dots():  # a function traced anew (JAX keeps a function's traces)
    ...     "dot_general" in str(jax.make_jaxpr(lambda a, b: dot(a, b))(a, b))
    False
    """
    token = _ELEMENTWISE_DOTS.set(True)
    try:
        yield
    finally:
        _ELEMENTWISE_DOTS.reset(token)


@jax_funcify.register(Dot)
def _dot_small_elementwise(op, **kwargs):
    def dot(x, y):
        if _ELEMENTWISE_DOTS.get() and x.ndim == 2 and y.ndim == 2 and y.size <= SMALL_DOT:
            return (y.T[:, :, None] * x.T[None, :, :]).sum(axis=1).T
        return jax.numpy.dot(x, y)

    return dot


def _counts_rows(var) -> bool:
    """Whether ``var`` is ``arange(0, n, 1)``, possibly with broadcastable axes after its one."""
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle):
        if node.op.new_order[:1] != (0,) or any(o != "x" for o in node.op.new_order[1:]):
            return False
        node = node.inputs[0].owner
    if node is None or not isinstance(node.op, ARange):
        return False
    start, _, step = node.inputs
    return all(isinstance(v, Constant) and v.data.ndim == 0 and v.data == c for v, c in ((start, 0), (step, 1)))


@jax_funcify.register(AdvancedSubtensor)
def _row_by_row_take(op, node=None, **kwargs):
    """pytensor's ``AdvancedSubtensor``, but ``x[arange(n)[:, None], y]`` of a float matrix with few
    columns compares ``y`` with each column index (the module's note)."""
    general = _advanced_subtensor(op, node=node, **kwargs)
    if (node is None or tuple(getattr(op, "idx_list", ())) != (0, 1) or node.inputs[0].type.ndim != 2
            or node.inputs[0].type.dtype not in float_dtypes or not _counts_rows(node.inputs[1])
            or node.inputs[2].type.dtype not in integer_dtypes):
        return general

    def take(x, rows, cols):
        m, k = rows.shape[0], x.shape[1]
        shape = jnp.broadcast_shapes(rows.shape, cols.shape)
        if k > SMALL_TAKE or m > x.shape[0] or rows.ndim != len(shape):  # rows on another axis of the result
            return general(x, rows, cols)
        cols = jnp.broadcast_to(jnp.where(cols < 0, cols + k, cols), shape)
        x = x[:m].reshape((m,) + (1,) * (len(shape) - 1) + (k,))
        return jnp.where(cols[..., None] == jnp.arange(k), x, 0).sum(axis=-1)

    return take
