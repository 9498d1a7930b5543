"""The UCI benchmark's fits: one fit's settings, the methods, and the test scores.

The protocol is the papers': inputs and target standardised on each split's
training part; the network :func:`~bnn_zoo.models.mlp_regressor` with N(0, 1)
weights and a Gaussian likelihood whose noise precision is learned under a
Gamma prior (``--noise-prior``). The methods (:data:`METHODS`):

``advi``
    mean-field ADVI (:func:`bnn_zoo.fit`);
``local_reparam``
    the same with the local-reparameterisation gradient estimator;
``lowrank_advi``
    low-rank ADVI (``bnn_zoo.LowRank``, rank the square root of the parameters' number),
    with the same steps and rate as ``advi``;
``fullrank_advi``
    full-rank ADVI from the mean-field fit (``bnn_zoo.fit(..., init=...)``);
``dropout``
    MC dropout (:mod:`bnn_zoo.inference.alternatives.dropout`) at rate ``--dropout-rate``;
``ensemble``
    a deep ensemble of ``--members`` MAP fits of the same PyMC model
    (:func:`bnn_zoo.inference.alternatives.baselines.ensemble`).

:func:`fit_task` fits a task (one data set and method, several splits, as
:func:`tasks` cuts them) and scores each fit on its test part
(:func:`scores`: RMSE, log-likelihood, and the coverage and width of the raw and conformal
predictive intervals), in the target's own units; ``bnn-zoo uci``
(:mod:`~bnn_zoo.experiments.uci.command`) runs the tasks and stores the records. A record's columns are
:func:`columns`' of its method, and :func:`record_fault` says what keeps one from being whole.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from bnn_zoo.data import uci
from bnn_zoo.evaluation.calibration import CONFORMAL_LEVELS, LEVELS, coverage_metrics
from bnn_zoo.experiments.harness.config import RunConfig
from bnn_zoo.experiments.harness.runner import make_optimizer

__all__ = ["ADVI_MEASURES", "BATCH_SIZE", "COVERAGE", "DEFAULTS", "FINITE", "INTERVALS", "MEASURES", "METHODS",
           "UCIConfig", "columns", "fit_key", "fit_settings", "fit_task", "model", "record_fault", "score_fit",
           "scores", "tasks"]

#: The methods, in the table's order: mean-field ADVI, its local-reparameterisation estimator,
#: low-rank ADVI, full-rank ADVI, MC dropout and a deep ensemble.
METHODS = ("advi", "local_reparam", "lowrank_advi", "fullrank_advi", "dropout", "ensemble")
#: Minibatch rows on the data sets with more training rows: wine (1,439) and the four large ones
#: (kin8nm, naval, power, protein: 7,373 to 41,157); the other four are fitted full-batch. On
#: kin8nm's and naval's split 0, minibatches of 1,000 give the full batch's RMSE and
#: log-likelihood to 0.03 nats in a half to a third of the time.
BATCH_SIZE = 1000
#: The shared fit flags' defaults: 10,000 Adam steps of a cosine decay from 0.01 to 1% of it, from
#: ADVI's initial means with sd 0.01, and 500 posterior draws for the predictive. Every
#: method takes the same steps and rate (each member of an ensemble too); the full-rank phase runs
#: at 1e-6: at 1e-4 its ELBO falls over a thousand nats below its mean-field start within 200 steps
#: on yacht and boston, at 1e-6 it ends above it on both (``benchmarks.studies.uci_fullrank``).
#: Minibatches of ``--batch-size`` rows (default :data:`BATCH_SIZE`) on the data sets that have more
#: training rows; the others are fitted full-batch.
DEFAULTS = dict(steps=10_000, lr=0.01, lr_schedule="cosine", lr_final=0.01, init_std=0.01, draws=500,
                average=0.0, fullrank_lr=1e-6, pick_at=0.0)
#: The coverage columns of the records (and the table), raw then conformal: the fraction of test
#: targets inside the central 50%, 90% and 95% predictive intervals, and inside the conformal 90%
#: and 95% intervals; each has a ``width`` column beside it.
COVERAGE = tuple(f"coverage{round(100 * a)}" for a in LEVELS) + tuple(f"conf_coverage{round(100 * a)}"
                                                                       for a in CONFORMAL_LEVELS)
#: The intervals' columns of a record: each of :data:`COVERAGE` and its width.
INTERVALS = tuple(c for cov in COVERAGE for c in (cov, cov.replace("coverage", "width")))
#: The columns of every record beyond its settings and :data:`INTERVALS`: sizes, scores and seconds.
MEASURES = ("n_train", "n_test", "rmse", "ll", "sigma", "fit_seconds")
#: The columns that an ADVI method's record (all but ``dropout`` and ``ensemble``) adds.
ADVI_MEASURES = ("n_params", "converged", "elbo_final")
#: The columns that must be finite, with :data:`INTERVALS` in a scored record: every UCI test set
#: (31 points or more) holds enough points for every conformal level, so none is NaN.
FINITE = ("rmse", "ll", "sigma", "fit_seconds")


@dataclass(frozen=True)
class UCIConfig(RunConfig):
    """One fit of the benchmark: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s settings, and these.

    Parameters
    ----------
    uci : str, default "yacht"
        The data set, a key of :data:`bnn_zoo.data.uci.DATASETS`.
    split : int, default 0
        The published split.
    approach : str, default "advi"
        The method, one of :data:`METHODS`; the record's ``method``. :class:`RunConfig`'s own
        ``method`` stays ``"advi"``.
    noise_prior : tuple of float, default (1.0, 0.1)
        Shape and rate of the Gamma prior on the noise precision (of the
        standardised target).
    dropout_rate : float, default 0.05
        MC dropout's rate.
    members : int, default 5
        The deep ensemble's MAP fits.
    data_dir : str, default ""
        The data's folder (``""``: :func:`bnn_zoo.data.uci.resolve_dir`'s).
    pick_at : float, default 0.0
        No early pick: each fit is one restart (and the records' keys stay those of the
        stores written before the one set of defaults).
    """

    pick_at: float = 0.0  # one restart per fit; part of every record's key
    uci: str = "yacht"
    split: int = 0
    approach: str = "advi"
    noise_prior: tuple[float, float] = (1.0, 0.1)
    dropout_rate: float = 0.05
    members: int = 5
    data_dir: str = ""

    def __post_init__(self):
        if self.approach not in METHODS:
            raise ValueError(f"approach must be one of {', '.join(METHODS)}, got {self.approach!r}")
        if self.method != "advi":
            raise ValueError(f"a UCI fit's method is its approach; method must stay 'advi', got {self.method!r}")

    @property
    def name(self) -> str:
        """``<data set>-<method>-split<k>``."""
        return f"{self.uci}-{self.approach}-split{self.split}"

    def record(self) -> dict:
        """The settings as recorded: :class:`~bnn_zoo.experiments.harness.config.RunConfig`'s, without the
        data's folder and the fields the method does not use, and with ``method`` the method
        (``approach``), in :class:`RunConfig`'s ``method``'s place.

        Examples
        --------
        >>> record = UCIConfig(approach="dropout").record()
        >>> record["method"], "approach" in record, record["dropout_rate"]
        ('dropout', False, 0.05)
        """
        return {k: self.approach if k == "method" else v for k, v in self._hashed().items() if k != "approach"}

    def _hashed(self) -> dict:
        """The settings that :func:`fit_key` hashes: :meth:`record`'s, but with :class:`RunConfig`'s ``method``
        (``"advi"``) and ``approach`` beside it, as records were before ``method`` named the method."""
        out = {k: v for k, v in super().record().items() if k != "data_dir"}
        if self.approach != "dropout":
            out.pop("dropout_rate")
        if self.approach != "ensemble":
            out.pop("members")
        if self.approach != "fullrank_advi":
            out.pop("fullrank_lr")
        return out


def fit_key(cfg: UCIConfig) -> str:
    """The hash naming a fit's record: of every setting that changes what is fitted or measured.

    Parameters
    ----------
    cfg : UCIConfig
        The fit.

    Returns
    -------
    str
        16 hex digits.
    """
    return hashlib.sha256(json.dumps(cfg._hashed(), sort_keys=True).encode()).hexdigest()[:16]


# --- a record's columns ---------------------------------------------------------------------------


def columns(method: str) -> tuple[str, ...]:
    """The columns of a record of ``method``, as :func:`fit_task` writes it.

    Parameters
    ----------
    method : str
        One of :data:`METHODS`.

    Returns
    -------
    tuple of str
        ``key``, ``experiment``, the settings (:meth:`UCIConfig.record`), :data:`MEASURES`,
        :data:`ADVI_MEASURES` for an ADVI method, and :data:`INTERVALS`.
    """
    advi = () if method in _BASELINES else ADVI_MEASURES
    return ("key", "experiment", *UCIConfig(approach=method).record(), *MEASURES, *advi, *INTERVALS)


def record_fault(record: dict) -> str | None:
    """What keeps a record from being whole, or ``None``.

    A record is whole when it holds every column of :func:`columns` of its ``method``, and each of
    :data:`FINITE` and :data:`INTERVALS` is finite; one written before the intervals were scored
    (none of :data:`INTERVALS`, or all of them NaN) is whole too, and ``bnn-zoo uci`` fits it again
    (:func:`~bnn_zoo.experiments.uci.table.scored`). Columns beyond those (a table's other methods'
    settings) are allowed.

    Parameters
    ----------
    record : dict
        One record: column name -> value.

    Returns
    -------
    str or None
        The fault, in words (``"it lacks conf_coverage95"``, ``"its coverage90 is not finite"``).

    Examples
    --------
    >>> record = dict.fromkeys(columns("dropout"), 1.0) | {"method": "dropout"}
    >>> record_fault({k: v for k, v in record.items() if k != "conf_coverage95"})
    'it lacks conf_coverage95'
    >>> record_fault(record | {"coverage90": float("nan")})
    'its coverage90 is not finite'
    """
    method = record.get("method")
    if method not in METHODS:
        return f"its method is {method!r}, not one of {', '.join(METHODS)}"
    if "approach" in record:
        return f"it holds approach {record['approach']!r} beside method {method!r}"
    unscored = not any(_finite(record.get(c)) for c in INTERVALS)
    missing = [c for c in columns(method) if c not in record and not (unscored and c in INTERVALS)]
    if missing:
        return f"it lacks {', '.join(missing)}"
    bad = [c for c in FINITE + (() if unscored else INTERVALS) if not _finite(record[c])]
    if bad:
        return f"its {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not finite"
    return None


def _finite(value) -> bool:
    return isinstance(value, numbers.Real) and bool(np.isfinite(value))


# --- one task: one data set's splits, one method --------------------------------------------------


def model(cfg: UCIConfig, split: uci.Split):
    """The benchmark's network on a split's training part.

    Parameters
    ----------
    cfg : UCIConfig
        The fit (its noise prior).
    split : bnn_zoo.data.uci.Split
        The standardised split.

    Returns
    -------
    pymc.Model
        :func:`~bnn_zoo.models.mlp_regressor` with one hidden layer of ``split.hidden`` ReLU
        units, N(0, 1) weights, and the noise precision ``tau ~ Gamma(*cfg.noise_prior)``.
    """
    from bnn_zoo.models.mlp import mlp_regressor

    alpha, beta = cfg.noise_prior
    return mlp_regressor(split.X_train, split.y_train, hidden=(split.hidden,), activation="relu", noise="gamma",
                         noise_params={"alpha": alpha, "beta": beta})


def scores(mu: np.ndarray, sigma: np.ndarray, split: uci.Split) -> dict:
    """Test RMSE and log-likelihood in the target's units, of a predictive mixture of Gaussians.

    Parameters
    ----------
    mu : numpy.ndarray, shape (draws, n_test)
        Each draw's predicted mean of the standardised target.
    sigma : numpy.ndarray, shape (draws,)
        Each draw's noise sd, of the standardised target.
    split : bnn_zoo.data.uci.Split
        The split (its test targets, mean and sd).

    Returns
    -------
    dict
        ``rmse`` (of the predictive mean), ``ll`` (the mean over test points of
        ``log (1/S) sum_s N(y | mu_s, sigma_s)``), ``sigma`` (the mean noise sd), and the raw
        and conformal intervals' coverage and width
        (:func:`~bnn_zoo.evaluation.calibration.coverage_metrics`: ``coverage90``, ``width90``,
        ``conf_coverage90``, ...; each conformal fold of the test part calibrated on the
        others), in the target's units.
    """
    from scipy.special import logsumexp

    y = split.y_test_original
    m = split.y_mean + split.y_sd * np.asarray(mu, float)
    s = split.y_sd * np.asarray(sigma, float)[:, None]
    log_density = -0.5 * ((y - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
    ll = logsumexp(log_density, axis=0) - np.log(len(m))
    # Four noise replicas of each draw: predictive draws of y for the intervals' quantiles.
    rng = np.random.default_rng(0)
    y_rep = (m[None] + s[None] * rng.standard_normal((4, *m.shape))).reshape(-1, m.shape[1])
    return {"rmse": float(np.sqrt(np.mean((m.mean(0) - y) ** 2))), "ll": float(ll.mean()), "sigma": float(s.mean()),
            **coverage_metrics(y, y_rep)}


def _advi(cfg: UCIConfig, split: uci.Split) -> dict:
    """A mean-field or low-rank fit (and a full-rank one from the mean-field fit) of one split, and its scores."""
    import bnn_zoo

    m = model(cfg, split)
    settings = fit_settings(cfg)
    fit = bnn_zoo.fit(m, optimizer=make_optimizer(cfg, cfg.lr, cfg.steps), **settings)
    if cfg.approach == "fullrank_advi":
        settings = dict(settings, method="fullrank_advi", objective=bnn_zoo.ELBO(
            beta=cfg.beta, mc_samples=cfg.mc_samples, path_derivative=bool(cfg.path_derivative)))
        fit = bnn_zoo.fit(m, init=fit, optimizer=make_optimizer(cfg, cfg.fullrank_lr, cfg.steps), **settings)
    return {**score_fit(fit, cfg, split), "fit_seconds": fit.seconds, "n_params": fit.layout.dim,
            "converged": bool(fit.convergence.converged), "elbo_final": float(fit.elbo_final)}


def fit_settings(cfg: UCIConfig) -> dict:
    """The keyword arguments of :func:`bnn_zoo.fit` that the ADVI fit of ``cfg`` takes (the mean-field one
    of ``fullrank_advi``).

    Parameters
    ----------
    cfg : UCIConfig
        One fit's settings.

    Returns
    -------
    dict
        ``steps``, ``method`` (``bnn_zoo.LowRank`` for ``lowrank_advi``, else ``bnn_zoo.MeanField``,
        at ``cfg.init_std``), ``objective`` (the
        KL weight, Monte Carlo draws, estimator and path derivative), ``average``,
        ``batch_size``, ``random_seed`` (``cfg.fit_seed``) and ``progressbar=False``.
    """
    import bnn_zoo

    objective = bnn_zoo.ELBO(beta=cfg.beta, mc_samples=cfg.mc_samples, path_derivative=cfg.path_derivative,
                             estimator="local_reparam" if cfg.approach == "local_reparam" else "weights")
    family = bnn_zoo.LowRank if cfg.approach == "lowrank_advi" else bnn_zoo.MeanField
    return dict(steps=cfg.steps, method=family(init_std=cfg.init_std), objective=objective,
                average=cfg.average, batch_size=cfg.batch_size, random_seed=cfg.fit_seed, progressbar=False)


def score_fit(fit, cfg: UCIConfig, split: uci.Split) -> dict:
    """:func:`scores` of an ADVI fit's predictive, from ``cfg.draws`` posterior draws.

    Parameters
    ----------
    fit : bnn_zoo.FitResult
        A fit of :func:`model` for ``split``.
    cfg : UCIConfig
        Its settings (``draws`` and ``seed``).
    split : bnn_zoo.data.uci.Split
        The split, whose test part is scored.

    Returns
    -------
    dict
        ``rmse``, ``ll`` and ``sigma``, as :func:`scores` gives them.
    """
    import bnn_zoo

    idata = bnn_zoo.sample(fit, cfg.draws, random_seed=cfg.seed, log_likelihood=False, var_names=())
    pred = bnn_zoo.predict(fit, {"X": split.X_test}, idata=idata, var_names=["mu"], random_seed=cfg.seed)
    mu = pred["predictions"]["mu"].values.reshape(-1, len(split.X_test))
    return scores(mu, idata["posterior"]["tau"].values.ravel() ** -0.5, split)


def _dropout(cfg: UCIConfig, split: uci.Split) -> dict:
    from bnn_zoo.inference.alternatives import dropout

    net = dropout.fit_dropout(split.X_train, split.y_train, kind="regressor", hidden=(split.hidden,), activation="relu",
                              rate=cfg.dropout_rate, steps=cfg.steps, lr=cfg.lr, batch_size=cfg.batch_size,
                              random_seed=cfg.fit_seed)
    pred = dropout.predict_dropout(net, split.X_test, draws=cfg.draws, random_seed=cfg.seed)["predictions"]
    return {**scores(pred["mu"].values[0], pred["sigma"].values[0], split), "fit_seconds": net.seconds}


def _ensemble(cfg: UCIConfig, split: uci.Split) -> dict:
    import bnn_zoo
    from bnn_zoo.inference.alternatives.baselines import ensemble

    m = model(cfg, split)
    tree = ensemble(m, cfg.members, steps=cfg.steps, lr=cfg.lr, batch_size=cfg.batch_size, random_seed=cfg.fit_seed)
    pred = bnn_zoo.predict(m, {"X": split.X_test}, idata=tree, var_names=["mu"], random_seed=cfg.seed)
    mu = pred["predictions"]["mu"].values.reshape(-1, len(split.X_test))
    tau = tree["posterior"]["tau"].values.ravel()
    return {**scores(mu, tau**-0.5, split), "fit_seconds": float(tree.attrs["seconds"])}


#: The methods that are not ADVI, and their fits; every other method of :data:`METHODS` is :func:`_advi`'s.
_BASELINES = {"dropout": _dropout, "ensemble": _ensemble}


def fit_task(cfgs: list[UCIConfig]) -> list[dict]:
    """Fit ``cfgs`` (one data set and method, other splits) and score each on its test part.

    The splits are fitted one after another in this process, so that they share the
    model's compiled programs.

    Parameters
    ----------
    cfgs : list of UCIConfig
        Fits that differ only in their split.

    Returns
    -------
    list of dict
        One record per fit, :func:`columns` of its method: its settings (``method`` the
        method), ``key``, ``rmse``, ``ll``, ``sigma`` and the intervals (in the target's units),
        ``fit_seconds``, ``n_train``, ``n_test`` and, for ADVI, ``n_params``, ``converged`` and
        ``elbo_final``.
    """
    splits = [uci.load(c.uci, c.split, c.data_dir or None) for c in cfgs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is in the records
        one = _BASELINES.get(cfgs[0].approach, _advi)
        results = [one(c, s) for c, s in zip(cfgs, splits)]
    return [{"key": fit_key(c), "experiment": "uci", **c.record(), "n_train": len(s.y_train),
             "n_test": len(s.y_test), **r} for c, s, r in zip(cfgs, splits, results)]


def tasks(cfgs: list[UCIConfig], per_task: int) -> list[list[UCIConfig]]:
    """Fits of one data set and method, at most ``per_task`` splits each, in the order a cut-short job wants.

    Parameters
    ----------
    cfgs : list of UCIConfig
        The fits to make.
    per_task : int
        The most splits in one task.

    Returns
    -------
    list of list of UCIConfig
        The first ``per_task`` splits of every data set and method, then the next ones, and so
        on (a job cut short has some splits of every cell of the table); within those, in
        :data:`METHODS` order, and by training rows, largest first, so that the long tasks
        start early on a cluster.
    """
    groups: dict = {}
    for c in cfgs:
        groups.setdefault((c.uci, c.approach), []).append(c)
    out = [(i, g[i:i + per_task]) for g in groups.values() for i in range(0, len(g), per_task)]
    rows = {"protein": 41_000, "naval": 10_700, "power": 8_600, "kin8nm": 7_400}
    out.sort(key=lambda it: (it[0], METHODS.index(it[1][0].approach), -rows.get(it[1][0].uci, 1_000) * len(it[1])))
    return [t for _, t in out]
