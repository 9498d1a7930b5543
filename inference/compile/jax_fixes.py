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
"""

from __future__ import annotations

import jax
import pytensor
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.scalar import Softplus
from pytensor.tensor.elemwise import CAReduce

__all__ = []

if not pytensor.config.generated_src_dir:  # a user's own setting stays
    from bnn_zoo.cache import user_cache

    pytensor.config.generated_src_dir = str(user_cache() / "generated-src")

_careduce_acc_dtype = jax_funcify.dispatch(CAReduce)


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
