"""Standard normal noise for the JAX engine: Threefry-2x32 in counter mode, written to vectorise.

``jax.random.normal`` uses the same generator (Threefry-2x32, 20 rounds;
Salmon et al. 2011), but on CPU JAX lowers it as a rolled loop that XLA does
not vectorise, and a large network's noise then costs more than a whole
deterministic training step of it. Here the 20 rounds are written out as
plain ``jnp`` integer ops, which XLA fuses into one vectorised loop
(docs/user_guide/engine.md).

Each number is the first output word of ``threefry2x32(key, (counter,
step))``: ``counter`` runs over the elements (offset per variable and per
Monte Carlo sample) and ``step`` is the optimisation step, so every (element,
step) pair gets its own block. The word's top 23 bits make a uniform on
(-1, 1), mapped to N(0, 1) by ``sqrt(2) * erfinv(u)`` as in
``jax.random.normal`` (in float32, then cast to the fit's dtype).
:func:`threefry2x32` reproduces
``jax.extend.random.threefry_2x32`` bit for bit (tested).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["derive", "key_words", "normal", "rademacher", "threefry2x32"]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
_PAD = 64  # sizes are padded to a multiple of this: XLA does not vectorise odd-sized loops


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds on uint32 arrays ``x0, x1`` under the key ``(k0, k1)``.

    Equal to ``jax.extend.random.threefry_2x32`` bit for bit.

    Parameters
    ----------
    k0, k1 : jax.Array
        The key's two uint32 words.
    x0, x1 : jax.Array
        The counter blocks' two uint32 words, of one shape.

    Returns
    -------
    x0, x1 : jax.Array
        The two output words of each block.
    """
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(_PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def key_words(key) -> jax.Array:
    """The two uint32 key words of the noise stream of a JAX threefry ``key``.

    Parameters
    ----------
    key : jax.Array
        A JAX threefry key (``jax.random.key(seed)``).

    Returns
    -------
    jax.Array
        ``(2,)`` uint32: the words of ``fold_in(key, 0)``.
    """
    return jax.random.key_data(jax.random.fold_in(key, 0)).astype(jnp.uint32)


def derive(words, a: int, b: int) -> jax.Array:
    """The key words of an independent stream ``(a, b)`` of the stream ``words``.

    Parameters
    ----------
    words : jax.Array
        ``(2,)`` uint32 key words.
    a, b : int
        The sub-stream's index.

    Returns
    -------
    jax.Array
        ``(2,)`` uint32 key words of the sub-stream.
    """
    x0, x1 = threefry2x32(words[0], words[1], jnp.uint32(a), jnp.uint32(b))
    return jnp.stack([x0, x1])


def _bits(words, step, offset: int, size: int) -> jax.Array:
    """``size`` random uint32 words for ``step`` (padded: the caller cuts them to ``size``)."""
    padded = -(-size // _PAD) * _PAD
    counter = jnp.arange(padded, dtype=jnp.uint32) + np.uint32(offset)
    step = jnp.full((padded,), step, dtype=jnp.uint32)
    return threefry2x32(words[0], words[1], counter, step)[0]


def normal(words, step, offset: int, shape: tuple, dtype) -> jax.Array:
    """N(0, 1) draws of ``shape`` for ``step``, from counters ``offset, offset + 1, ...``.

    Parameters
    ----------
    words : jax.Array
        ``(2,)`` uint32 key words of the stream.
    step : int or jax.Array
        The optimisation step.
    offset : int
        The first element's counter.
    shape : tuple of int
        The draws' shape.
    dtype : str or numpy.dtype
        The draws' dtype (they are made in float32, then cast).

    Returns
    -------
    jax.Array
        Standard-normal draws of ``shape``.
    """
    size = int(np.prod(shape, dtype=np.int64))
    bits = _bits(words, step, offset, size)
    # Top 23 bits as the mantissa of a float in [1, 2), then to [-1, 1) and away from -1.
    one_two = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | np.uint32(0x3F800000), jnp.float32)
    u = jnp.maximum(2.0 * (one_two - 1.0) - 1.0, np.nextafter(np.float32(-1), np.float32(0)))
    z = np.float32(np.sqrt(2)) * jax.scipy.special.erfinv(u)
    return z[:size].reshape(shape).astype(dtype)


def rademacher(words, step, offset: int, shape: tuple, dtype) -> jax.Array:
    """Random signs (+1 or -1, each with probability 1/2) of ``shape`` for ``step``.

    Parameters
    ----------
    words : jax.Array
        ``(2,)`` uint32 key words of the stream.
    step : int or jax.Array
        The optimisation step.
    offset : int
        The first element's counter.
    shape : tuple of int
        The signs' shape.
    dtype : str or numpy.dtype
        Their dtype.

    Returns
    -------
    jax.Array
        Signs of ``shape``.
    """
    size = int(np.prod(shape, dtype=np.int64))
    top = (_bits(words, step, offset, size) >> np.uint32(31)).astype(dtype)  # 0 or 1
    return (1 - 2 * top)[:size].reshape(shape)
