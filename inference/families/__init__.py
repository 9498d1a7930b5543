"""The variational families: Gaussians over the model's unconstrained values, flattened.

- mean-field (``"advi"``): ``mu`` and ``rho``, ``z = mu + softplus(rho) * eps``;
- low-rank (``"lowrank_advi"``): ``mu``, ``rho`` and ``W`` ``(dim, rank)``,
  ``z = mu + s * (eps + W eta)``, covariance ``diag(s) (I + W W^T) diag(s)``;
- full-rank (``"fullrank_advi"``): ``mu``, ``rho`` and ``T_tril``, the
  strictly lower triangle of ``T``, ``z = mu + s * (eps + T eps)``: the
  Cholesky factor ``L = diag(s) (I + T)``.

The low-rank and full-rank factors are scaled by ``s``, so that an
optimiser's step on ``W`` or ``T`` (about its learning rate in every entry,
for Adam) changes each row's variance relative to that row's own, whatever
the dimension: an unscaled Cholesky factor gains about ``dim * lr**2`` of
variance in every row, enough to ruin a fit of a few hundred dimensions
(docs/user_guide/families.md). A fitted full-rank q converts to PyMC's
``FullRank`` (``to_pymc``) and a mean-field one to ``MeanField``.

One file per family, as blackjax's ``vi/`` keeps them:
:mod:`~bnn_zoo.inference.families.meanfield`,
:mod:`~bnn_zoo.inference.families.lowrank` and
:mod:`~bnn_zoo.inference.families.fullrank`, each a :class:`Family`
(:mod:`~bnn_zoo.inference.families.base`, with what they share), and learned
centring, the reparameterisation any of them can fit on top
(:mod:`~bnn_zoo.inference.families.centring`). Beside the Gaussians,
:mod:`~bnn_zoo.inference.families.flow` makes a normalizing flow on one
(``method="flow"``, not in :data:`FAMILIES`: ``fit`` alone fits it, on a
Gaussian fit). This package names them:
:data:`FAMILIES`, :func:`get`.
"""

from __future__ import annotations

from bnn_zoo.inference.families.base import (Family, check_rank_setting, default_rank, entropy, inverse_softplus,
                                             normal_log_density, resolve_rank, softplus)
from bnn_zoo.inference.families.fullrank import FULL_RANK
from bnn_zoo.inference.families.lowrank import LOW_RANK, LOW_RANK_EIGEN, low_rank
from bnn_zoo.inference.families.meanfield import MEAN_FIELD

__all__ = ["FAMILIES", "FULL_RANK", "LOW_RANK", "LOW_RANK_EIGEN", "MEAN_FIELD", "Family",
           "check_rank_setting", "default_rank", "entropy", "get", "inverse_softplus", "low_rank", "normal_log_density",
           "resolve_rank", "softplus"]

#: The families ADVI fits, by the name ``bnn_zoo.fit``'s ``method`` takes for each.
FAMILIES = {f.name: f for f in (MEAN_FIELD, LOW_RANK, FULL_RANK)}


def get(method: str) -> Family:
    """The variational family of a method name.

    Parameters
    ----------
    method : {"advi", "lowrank_advi", "fullrank_advi"}
        The name, as ``bnn_zoo.fit``'s ``method``.

    Returns
    -------
    Family
        :data:`MEAN_FIELD`, :data:`LOW_RANK` or :data:`FULL_RANK`.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if method not in FAMILIES:
        raise ValueError(f"unknown ADVI family {method!r}; valid: {', '.join(FAMILIES)}")
    return FAMILIES[method]
