"""Two q's of one model on the same base draws: which is the better approximation.

A flow starts as exactly its Gaussian start and trains from there; the
ELBO's noise can hide that training moved it away from an exact start (on
a conjugate regression, a trained flow can end with ``q_pareto_k`` 0.45
where its start's is 0.09, their ELBO estimates equal within noise). :func:`paired` puts
the two on the same footing: the same base draws (common random numbers,
so the difference of their ELBO estimates has a small standard error) and
the same diagnostics, the ELBO and ``q_pareto_k`` of each.
"""

from __future__ import annotations

import numpy as np

from bnn_zoo.inference.diagnostics import qcheck
from bnn_zoo.inference.posterior.draws import draw_z, evaluate_z
from bnn_zoo.inference.posterior.restarts import draws_elbo
from bnn_zoo.inference.posterior.result import FitResult

__all__ = ["ELBO_SES", "K_MARGIN", "paired"]

#: ELBO estimates that differ by at most this many standard errors of their paired difference are
#: equal, as far as the draws tell.
ELBO_SES = 2.0
#: ``q_pareto_k`` values that differ by at most this are equal (k from 4,000 draws varies by about this
#: much between seeds where it is small).
K_MARGIN = 0.05


def paired(a: FitResult, b: FitResult, draws: int = qcheck.VERDICT_DRAWS, seed: int = 0) -> dict:
    """The ELBO and ``q_pareto_k`` of ``a`` and of ``b`` on the same base draws, and whether ``a`` is worse.

    Parameters
    ----------
    a, b : FitResult
        Fits of one model by one family (the same noise size: the same
        base draws make draws of each).
    draws : int, default :data:`~bnn_zoo.inference.diagnostics.qcheck.VERDICT_DRAWS`
        Draws of each.
    seed : int, default 0
        Seeds the base draws, the same for both.

    Returns
    -------
    dict
        ``elbo`` (``[a, b]``: each :func:`~bnn_zoo.inference.posterior.restarts.draws_elbo`, NaN
        where a draw's density is not finite), ``elbo_se`` (the standard error of their paired
        difference), ``q_pareto_k`` (``[a, b]``; an undefined k counts as
        infinite), ``draws``, and ``a_worse``:

        - where one of them passes PSIS's test (k at most
          :data:`~bnn_zoo.inference.diagnostics.qcheck.K_WARN`) and the other does not, the one
          that fails is worse, whatever the ELBOs: only the other's reweighted estimates are
          reliable;
        - else ``a`` is worse where its ELBO is lower than ``b``'s (by more than :data:`ELBO_SES`
          standard errors: a larger KL divergence from the posterior), or where the ELBOs are
          equal and its k is higher (by more than :data:`K_MARGIN`: the same fit, with a heavier
          tail of importance ratios).
    """
    ratios, elbo, ks = [], [], []
    for fit in (a, b):
        z, log_q = draw_z(fit, draws, seed)
        log_p = evaluate_z(fit, z, ("logp",))["logp"].astype("float64")
        ratios.append(log_p - log_q)
        elbo.append(draws_elbo(log_p, log_q)[0])
        k = qcheck.q_pareto_k(log_p, log_q)[0]
        ks.append(float("inf") if np.isnan(k) else float(k))  # -inf: q is the posterior to round-off
    se = draws_elbo(*ratios)[1]  # of the mean of a's ratio minus b's, draw by draw
    lower = not np.isfinite(elbo[0]) and np.isfinite(elbo[1]) or elbo[0] < elbo[1] - ELBO_SES * se
    equal = not lower and not elbo[0] > elbo[1] + ELBO_SES * se
    passes = [k <= qcheck.K_WARN for k in ks]
    worse = passes[1] if passes[0] != passes[1] else bool(lower or equal and ks[0] > ks[1] + K_MARGIN)
    return {"elbo": elbo, "elbo_se": se, "q_pareto_k": ks, "draws": int(draws), "a_worse": worse}
