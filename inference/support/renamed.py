"""Keywords the public functions took before, and a wrapper that names their spelling now in one line.

``fit``, ``fit_many``, ``sample``, ``predict`` and the alternatives
(``pymc_nuts``, ``sgld``, ...) wear :func:`refuse_renamed`, so that code
written for an earlier version fails with the way out
(``TypeError: fit() no longer takes seed=: use random_seed=``) rather than
with Python's "unexpected keyword argument".
"""

from __future__ import annotations

import functools

__all__ = ["RENAMED", "refuse_renamed"]

#: Keywords ``fit`` and ``fit_many`` took before, and their spelling now.
RENAMED = {
    "seed": "random_seed=",
    "seeds": "random_seed=[...]",
    "beta": "objective=bnn_zoo.ELBO(beta=...)",
    "kl_weighting": "objective=bnn_zoo.ELBO(kl_weighting=...)",
    "mc_samples": "objective=bnn_zoo.ELBO(mc_samples=...)",
    "estimator": "objective=bnn_zoo.ELBO(estimator=...)",
    "path_derivative": "objective=bnn_zoo.ELBO(path_derivative=...)",
    "init_std": "method=bnn_zoo.MeanField(init_std=...) (or bnn_zoo.FullRank(init_std=...))",
    "checkpoint_every": "checkpoint=bnn_zoo.Checkpoint(path, every=...)",
    "resume": "checkpoint=bnn_zoo.Checkpoint(path, resume=True)",
    "warm_start": "init=<a mean-field FitResult> (or no init: full rank then starts from a mean-field fit)",
}


def refuse_renamed(function):
    """Wrap ``function`` so that a keyword it took before fails in one line naming the new spelling.

    Parameters
    ----------
    function : callable
        ``fit`` or ``fit_many``.

    Returns
    -------
    callable
        The same function (and signature); a keyword of :data:`RENAMED` raises
        ``TypeError: fit() no longer takes seed=: use random_seed= (CHANGELOG.md)``.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        old = [k for k in kwargs if k in RENAMED]
        if old:
            raise TypeError(f"{function.__name__}() no longer takes {old[0]}=: use {RENAMED[old[0]]} "
                            "(CHANGELOG.md, 'What moved')")
        return function(*args, **kwargs)

    return wrapper
