"""Random seeds: the one check of what a public function's ``random_seed`` takes.

Every fit and draw is reproducible from its seed, so ``random_seed`` is an
integer (NumPy's generators and JAX's keys both take it), not PyMC's ``None``
or a generator: :func:`check_seed` says so in one line, naming the way out,
before NumPy or JAX would fail on it deep inside a call.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["SEED_LIMIT", "check_seed", "check_seeds"]

#: Seeds lie in ``[0, SEED_LIMIT)``: NumPy's generators take any, but a JAX key in 32-bit mode keeps a
#: seed's low 32 bits alone, so that ``2**32 + 5`` would draw what ``5`` draws.
SEED_LIMIT = 2**32


def check_seed(value, name: str = "random_seed") -> int:
    """``value`` as a seed, or a ``ValueError`` that names ``name`` and the way out.

    Parameters
    ----------
    value : int
        The seed as given.
    name : str, default "random_seed"
        The argument's name, for the message.

    Returns
    -------
    int
        The seed, in ``[0, SEED_LIMIT)``.

    Raises
    ------
    ValueError
        For anything but an integer in that range (``None``, a NumPy
        generator, a float, a bool, a string, a negative number).

    Examples
    --------
    >>> check_seed(np.int64(3))
    3
    >>> check_seed(None)
    Traceback (most recent call last):
    ...
    ValueError: random_seed must be an integer in [0, 2**32), got None: every fit and draw is reproducible from its seed; pass one (random_seed=0), or int(np.random.default_rng().integers(2**31)) for a fresh one
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and 0 <= value < SEED_LIMIT:
        return int(value)
    shown = type(value).__name__ if isinstance(value, np.random.Generator) else repr(value)
    raise ValueError(f"{name} must be an integer in [0, 2**{SEED_LIMIT.bit_length() - 1}), got {shown}: every fit "
                     f"and draw is reproducible from its seed; pass one ({name}=0), or "
                     f"int(np.random.default_rng().integers(2**31)) for a fresh one")


def check_seeds(values: Sequence, name: str = "random_seed") -> list[int]:
    """Each of ``values`` as a seed (:func:`check_seed`), naming the first bad one by its place.

    Parameters
    ----------
    values : sequence of int
        The seeds as given.
    name : str, default "random_seed"
        The argument's name, for the message.

    Returns
    -------
    list of int
        The seeds.

    Raises
    ------
    ValueError
        For a bad seed (``random_seed[2] must be ...``), or ``values`` that
        is not a sequence.
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        check_seed(values, name)  # raises: neither a seed (the caller handles one) nor a sequence
    return [check_seed(v, f"{name}[{i}]") for i, v in enumerate(values)]
