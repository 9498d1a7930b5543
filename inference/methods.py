"""The registry of methods: the six names ``fit``'s ``method`` takes and the values that carry their settings.

:data:`VALUES` is the one table: ``"advi"``, ``"lowrank_advi"`` and
``"fullrank_advi"`` (:class:`MeanField`, :class:`LowRank`, :class:`FullRank`:
the Gaussian families of :mod:`~bnn_zoo.inference.families`), ``"laplace"``
(:class:`Laplace`, :mod:`~bnn_zoo.inference.laplace`), ``"flow"``
(:class:`Flow`) and ``"auto"`` (:class:`Auto`, the cheapest of them that passes
its test, :mod:`~bnn_zoo.inference.auto`); :data:`METHODS` lists the names.
Each value carries its method's settings, as NumPyro's autoguides carry
``init_scale``. :func:`value` turns a name into its value,
:func:`resolve` an ADVI method into the family and its initial sd, :func:`spec`
a name and an initial sd into the value ``fit`` takes (what the command lines
hand it), and :func:`gaussian_for` says which Gaussian the library fits where
it picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bnn_zoo.inference import defaults
from bnn_zoo.inference.families import FAMILIES, Family, check_rank_setting, low_rank
from bnn_zoo.inference.families.flow import flow

__all__ = ["AUTO_DRAWS", "CURVATURES", "METHODS", "RUNGS", "SINGLE", "SMALLER", "VALUES", "WARM_STARTED", "Auto",
           "Flow", "FullRank", "Laplace", "LowRank", "MeanField", "flow_settings", "gaussian_for", "resolve", "spec",
           "value"]

#: The methods that fit one q: the Gaussians fitted by ADVI, then the Laplace approximation
#: (``bnn_zoo.fit`` alone; ``fit_many`` fits the ADVI families). What the experiments' ``--method`` takes.
SINGLE = (*FAMILIES, "laplace")
#: Every name ``bnn_zoo.fit``'s ``method`` takes: :data:`SINGLE`, then ``"flow"`` (a normalizing flow on a
#: Gaussian fit, :mod:`~bnn_zoo.inference.families.flow`) and ``"auto"`` (the cheapest of them that passes
#: its test, :mod:`~bnn_zoo.inference.auto`), both ``bnn_zoo.fit``'s alone.
METHODS = (*SINGLE, "flow", "auto")
#: The families ``bnn_zoo.fit`` starts from a mean-field fit when it is given no ``init``: from its
#: own narrow start full-rank ADVI is slow and unstable (docs/user_guide/engine.md).
WARM_STARTED = ("fullrank_advi",)
#: Above :func:`~bnn_zoo.inference.defaults.full_rank`'s size, the Gaussian the library picks in a
#: dense one's place, by its use: ``method="auto"``'s Gaussian rung keeps a low-rank factor; a flow's
#: start is mean-field, since a flow on so many values keeps only its start's sds.
SMALLER = {"auto": "lowrank_advi", "flow": "advi"}


@dataclass(frozen=True)
class MeanField:
    """Mean-field Gaussian q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"advi"``).

    q is a Gaussian with a diagonal covariance over the model's unconstrained
    values: ``z = mu + softplus(rho) * eps``.

    Parameters
    ----------
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd of every unconstrained value. PyMC's default (about
        0.7) makes wide networks produce NaN (docs/user_guide/engine.md).
    centring : bool or tuple of str, default False
        Learned centring (:mod:`~bnn_zoo.inference.families.centring`):
        ``True`` fits every hierarchical location-scale variable between its
        centred and non-centred forms, learning each element's ``lambda``
        with q; or the variables named. ``bnn_zoo.fit`` only, on the full data.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.MeanField(init_std=0.1)
    MeanField(init_std=0.1, centring=False)
    """

    init_std: float = defaults.INIT_STD
    centring: bool | tuple[str, ...] = False
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "advi"

    def __post_init__(self):
        _check_init_std(self)
        _check_centring(self)


@dataclass(frozen=True)
class FullRank:
    """Full-rank Gaussian q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"fullrank_advi"``).

    q is a Gaussian with a dense covariance ``L L^T`` over the model's
    unconstrained values: ``z = mu + L eps``, ``d (d + 3) / 2`` parameters.
    Without ``init``, ``fit`` starts it from a mean-field fit of the first
    :data:`~bnn_zoo.inference.defaults.WARM_START` of the steps.

    Parameters
    ----------
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd of every unconstrained value (of the mean-field phase).
    centring : bool or tuple of str, default False
        Learned centring (:mod:`~bnn_zoo.inference.families.centring`):
        ``True`` fits every hierarchical location-scale variable between its
        centred and non-centred forms, learning each element's ``lambda``
        with q; or the variables named. ``bnn_zoo.fit`` only, on the full data.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.FullRank(centring=True)
    FullRank(init_std=0.01, centring=True)
    """

    init_std: float = defaults.INIT_STD
    centring: bool | tuple[str, ...] = False
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "fullrank_advi"

    def __post_init__(self):
        _check_init_std(self)
        _check_centring(self)


@dataclass(frozen=True)
class LowRank:
    """Low-rank-plus-diagonal Gaussian q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"lowrank_advi"``).

    q is ``z = mu + s * (eps + W eta)`` with ``eps ~ N(0, I_dim)``,
    ``eta ~ N(0, I_rank)``: covariance ``diag(s) (I + W W^T) diag(s)``,
    ``dim (rank + 2)`` parameters. ``W`` scales with ``s`` (the noise scale
    apart from its directions, as Pyro's low-rank guide), so that its
    steps change each row's variance relative to that row's own; it starts
    at zero, q at the mean-field Gaussian of ``init_std``.

    Parameters
    ----------
    rank : int, optional
        The columns of ``W``, in ``1..dim - 1``; default ``round(sqrt(dim))``
        (NumPyro's and pymc-extras' default).
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd of every unconstrained value.
    centring : bool or tuple of str, default False
        Learned centring (:mod:`~bnn_zoo.inference.families.centring`):
        ``True`` fits every hierarchical location-scale variable between its
        centred and non-centred forms, learning each element's ``lambda``
        with q; or the variables named. ``bnn_zoo.fit`` only, on the full data.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.LowRank(rank=5)
    LowRank(rank=5, init_std=0.01, centring=False)
    """

    rank: int | None = None
    init_std: float = defaults.INIT_STD
    centring: bool | tuple[str, ...] = False
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "lowrank_advi"

    def __post_init__(self):
        _check_init_std(self)
        _check_centring(self)
        check_rank_setting(self.rank, "LowRank")


@dataclass(frozen=True)
class Flow:
    """Normalizing-flow q, as ``bnn_zoo.fit``'s ``method`` (the same as ``"flow"``).

    q is ``z = mu + A f(u)``: ``layers`` affine coupling layers ``f``
    (RealNVP) on a Gaussian fit's factor ``A``, fixed, with a standard normal
    or Student-t base ``u`` (:mod:`~bnn_zoo.inference.families.flow`). It
    starts as exactly that Gaussian: ``init``'s, or without ``init`` a
    Gaussian that ``fit`` makes first, full rank up to
    :data:`~bnn_zoo.inference.defaults.AUTO_FULL_RANK_MAX` values and
    mean-field above, in :data:`~bnn_zoo.inference.defaults.FLOW_START` of
    the steps. The gradient is the path derivative (sticking the landing)
    and the learning rate :data:`~bnn_zoo.inference.defaults.FLOW_LEARNING_RATE`,
    unless ``fit`` is given its own. ``bnn_zoo.fit`` only, on the full data.

    Parameters
    ----------
    layers : int, default bnn_zoo.inference.defaults.FLOW_LAYERS
        Coupling layers.
    hidden : int, default bnn_zoo.inference.defaults.FLOW_HIDDEN
        Units of each of the two hidden layers of each coupling layer's network.
    df : int, optional
        ``None``: a standard-normal base; an integer of at least 3: a
        multivariate Student-t base of ``df`` degrees of freedom, for heavy
        tails.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Flow(df=5)
    Flow(layers=10, hidden=16, df=5)
    """

    layers: int = defaults.FLOW_LAYERS
    hidden: int = defaults.FLOW_HIDDEN
    df: int | None = None
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "flow"

    def __post_init__(self):
        for setting in ("layers", "hidden"):
            value = getattr(self, setting)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"Flow's {setting} must be a positive integer, got {value!r}")
        if self.df is not None and (isinstance(self.df, bool) or not isinstance(self.df, (int, np.integer))
                                    or self.df < 3):
            raise ValueError(f"Flow's df must be None or an integer of at least 3 (below 3 q has no variance, "
                             f"which its moments and bnn_zoo.nuts' mass matrix need), got {self.df!r}")


#: The curvatures :class:`Laplace` takes.
CURVATURES = ("auto", "hessian", "lowrank")
#: The rungs, cheapest first.
RUNGS = ("laplace", "gaussian", "centring", "flow")
#: Draws of each rung's q for its Pareto k: two halves of 4,000.
AUTO_DRAWS = 8000


@dataclass(frozen=True)
class Laplace:
    """The Laplace approximation, as ``bnn_zoo.fit``'s ``method`` (the same as ``"laplace"``).

    Parameters
    ----------
    curvature : {"auto", "hessian", "lowrank"}, default "auto"
        The dense Hessian, or its ``rank`` largest eigenpairs plus the mean
        of the rest; ``"auto"`` takes the dense one up to
        :data:`~bnn_zoo.inference.laplace.DENSE_MAX` values.
    rank : int, optional
        The low-rank curvature's eigenpairs; default ``round(sqrt(dim))``.
    starts : int, default 1
        L-BFGS runs: the first from :func:`bnn_zoo.fit`'s initial point,
        the further ones by turns from ``uniform(-JITTER, JITTER)`` in every
        unconstrained value (Stan's and Pathfinder's initial points) and
        from the initial point jittered by as much (:data:`~bnn_zoo.inference.laplace.JITTER`). With more than one (and the dense curvature),
        ``config["modes"]`` lists the distinct strict modes they reached (a
        positive definite Hessian, the gradient's step below ``MODE_NATS``),
        highest first, each with ``z`` (the point), ``log_p``, ``log_mass``
        (its Laplace estimate of the log posterior mass there, up to a
        constant) and ``starts`` (how many ended there); q is the Laplace
        approximation at the highest. ``method="auto"`` runs
        :data:`~bnn_zoo.inference.auto.MODE_STARTS` to look for a mode its
        q does not reach.

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Laplace(curvature="lowrank", rank=20)
    Laplace(curvature='lowrank', rank=20, starts=1)
    """

    curvature: str = "auto"
    rank: int | None = None
    starts: int = 1
    #: The method's name, as ``FitResult.method`` reports it.
    name: ClassVar[str] = "laplace"

    def __post_init__(self):
        if self.curvature not in CURVATURES:
            raise ValueError(f"Laplace's curvature must be one of {', '.join(CURVATURES)}, got {self.curvature!r}")
        check_rank_setting(self.rank, "Laplace")
        if not (isinstance(self.starts, (int, np.integer)) and not isinstance(self.starts, bool) and self.starts >= 1):
            raise ValueError(f"Laplace's starts must be an integer of at least 1, got {self.starts!r}")


@dataclass(frozen=True)
class Auto:
    """Cheapest first until q passes its test, as ``bnn_zoo.fit``'s ``method`` (the same as ``"auto"``).

    Parameters
    ----------
    budget : float, optional
        Seconds: no rung starts once this much time has passed (the rung
        running then finishes). Default: no limit.
    draws : int, default 8000
        Draws of each rung's q for its Pareto k, split into two halves; at
        least 2 x 2,200 (PSIS's minimum for a k of 0.7).
    rungs : tuple of str, default RUNGS
        The rungs to climb, in :data:`RUNGS`' order (a benchmark's or a
        study's choice; the default climbs them all).

    Examples
    --------
    >>> import bnn_zoo
    >>> bnn_zoo.Auto(budget=60)
    Auto(budget=60, draws=8000, rungs=('laplace', 'gaussian', 'centring', 'flow'))
    """

    budget: float | None = None
    draws: int = AUTO_DRAWS
    rungs: tuple[str, ...] = RUNGS
    #: The method's name: ``fit``'s ``method="auto"``. The result's ``method`` is the rung's.
    name: ClassVar[str] = "auto"

    def __post_init__(self):
        if self.budget is not None and not (isinstance(self.budget, (int, float, np.integer, np.floating))
                                            and not isinstance(self.budget, bool) and self.budget > 0):
            raise ValueError(f"Auto's budget must be a positive number of seconds or None, got {self.budget!r}")
        if not (isinstance(self.draws, (int, np.integer)) and not isinstance(self.draws, bool)
                and self.draws >= 4400):
            raise ValueError(f"Auto's draws must be an integer of at least 4400 (two halves of 2,200, PSIS's "
                             f"minimum for k = 0.7), got {self.draws!r}")
        rungs = tuple(self.rungs) if isinstance(self.rungs, (tuple, list)) else None
        if not rungs or any(r not in RUNGS for r in rungs) or list(rungs) != sorted(rungs, key=RUNGS.index) \
                or len(set(rungs)) < len(rungs):
            raise ValueError(f"Auto's rungs must be some of {', '.join(RUNGS)}, in that order, got {self.rungs!r}")
        object.__setattr__(self, "rungs", rungs)  # a list given is kept as a tuple: the value stays hashable


#: The registry: each method's name and the value that carries its settings, in :data:`METHODS`' order.
#: ``fit``'s ``method`` takes either; :func:`value` turns a name into its value at the defaults.
VALUES = {kind.name: kind for kind in (MeanField, LowRank, FullRank, Laplace, Flow, Auto)}
assert tuple(VALUES) == METHODS


def value(method):
    """The value of ``method``: a name of :data:`METHODS` at its defaults, or the value itself.

    Parameters
    ----------
    method : str or MeanField or LowRank or FullRank or Laplace or Flow or Auto
        What ``bnn_zoo.fit``'s ``method`` was given.

    Returns
    -------
    MeanField or LowRank or FullRank or Laplace or Flow or Auto or None
        ``None`` for anything else (each caller refuses it in its own words).

    Examples
    --------
    >>> from bnn_zoo.inference import methods
    >>> methods.value("laplace")
    Laplace(curvature='auto', rank=None, starts=1)
    >>> methods.value(methods.LowRank(rank=3)).rank, methods.value("nuts")
    (3, None)
    """
    if isinstance(method, tuple(VALUES.values())):
        return method
    if isinstance(method, str) and method in VALUES:
        return VALUES[method]()
    return None


def flow_settings(method) -> dict:
    """A flow method's settings, as its result's ``config["flow"]`` records them.

    Parameters
    ----------
    method : "flow" or Flow
        The method.

    Returns
    -------
    dict
        ``layers``, ``hidden`` and ``df``.
    """
    spec = Flow() if method == "flow" else method
    return {"layers": int(spec.layers), "hidden": int(spec.hidden), "df": None if spec.df is None else int(spec.df)}


def _check_centring(spec) -> None:
    value = spec.centring
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        object.__setattr__(spec, "centring", tuple(value))
    elif not isinstance(value, bool):
        raise ValueError(f"{type(spec).__name__}'s centring must be True, False or variable names, got {value!r}")


def _check_init_std(spec) -> None:
    value = spec.init_std
    if not (isinstance(value, (int, float, np.number)) and value > 0 and np.isfinite(value)):
        raise ValueError(f"{type(spec).__name__}'s init_std must be positive and finite, got {value!r}")


def resolve(method, laplace: bool = False) -> tuple[Family, float]:
    """The family and initial sd that ``bnn_zoo.fit``'s ``method`` names.

    Parameters
    ----------
    method : {"advi", "lowrank_advi", "fullrank_advi"} or MeanField or LowRank or FullRank
        An ADVI method's name (at the default ``init_std`` and rank) or a family value.
    laplace : bool, default False
        Whether the caller also takes the Laplace approximation (``bnn_zoo.fit``,
        which handles it before calling this): the error then lists it.

    Returns
    -------
    family : Family
        :data:`MEAN_FIELD`, :func:`low_rank` of the value's rank, or
        :data:`FULL_RANK`.
    init_std : float
        q's initial sd.

    Raises
    ------
    ValueError
        For anything else, naming what ``method`` takes.
    """
    chosen = value(method)
    if isinstance(chosen, LowRank):  # at the default rank, the one family its compiled programs are kept by
        return (FAMILIES[chosen.name] if chosen.rank is None else low_rank(chosen.rank)), float(chosen.init_std)
    if isinstance(chosen, Flow):
        return flow(chosen.layers, chosen.hidden, chosen.df), float(defaults.INIT_STD)
    if isinstance(chosen, (MeanField, FullRank)):
        return FAMILIES[chosen.name], float(chosen.init_std)
    if isinstance(chosen, (Laplace, Auto)):
        raise ValueError(f"method={chosen.name!r} is bnn_zoo.fit's alone: fit_many and the ADVI engine fit the "
                         f"families {', '.join(FAMILIES)}")
    names, values = (METHODS, ", bnn_zoo.FullRank(...), bnn_zoo.Flow(...), bnn_zoo.Laplace(...) or "
                             "bnn_zoo.Auto(...)") if laplace else (
        tuple(FAMILIES), " or bnn_zoo.FullRank(...)")
    raise ValueError(f"unknown method {method!r}; valid: {', '.join(names)}, bnn_zoo.MeanField(...), "
                     f"bnn_zoo.LowRank(...){values} (docs/user_guide/families.md)")


def spec(name: str, init_std: float = defaults.INIT_STD):
    """The ``method`` value ``bnn_zoo.fit`` takes for a method's name and q's initial sd.

    Parameters
    ----------
    name : {"advi", "lowrank_advi", "fullrank_advi", "laplace", "auto"}
        A name of :data:`METHODS`.
    init_std : float, default bnn_zoo.inference.defaults.INIT_STD
        q's initial sd (ADVI); the Laplace approximation has none.

    Returns
    -------
    MeanField or LowRank or FullRank or str
        The family's value at ``init_std`` (``LowRank`` at its default
        rank), or ``"laplace"`` or ``"auto"``.

    Raises
    ------
    ValueError
        For a name not in :data:`METHODS`.

    Examples
    --------
    >>> from bnn_zoo.inference import methods
    >>> methods.spec("lowrank_advi", init_std=0.05)
    LowRank(rank=None, init_std=0.05, centring=False)
    >>> methods.spec("laplace")
    'laplace'
    """
    kind = VALUES.get(name) if isinstance(name, str) else None
    if kind in (Laplace, Auto):
        return name
    if kind not in (MeanField, LowRank, FullRank):
        raise ValueError(f"unknown method {name!r}; valid: {', '.join(METHODS)}")
    return kind(init_std=init_std)


def gaussian_for(model, use: str) -> str:
    """The Gaussian the library fits to ``model`` where it picks one itself, by the model's size.

    Full rank where :func:`~bnn_zoo.inference.defaults.full_rank` allows a dense factor, else
    :data:`SMALLER`'s for ``use``: the one place ``method="auto"``'s Gaussian rung and a flow's
    start are decided.

    Parameters
    ----------
    model : pymc.Model
        The model; its size is its unconstrained values.
    use : {"auto", "flow"}
        What the Gaussian is for.

    Returns
    -------
    str
        ``"fullrank_advi"``, ``"lowrank_advi"`` or ``"advi"``.

    Examples
    --------
    >>> import pymc as pm
    >>> from bnn_zoo.inference import methods
    >>> with pm.Model() as model:
    ...     w = pm.Normal("w", shape=5_000)
    >>> methods.gaussian_for(model, "auto"), methods.gaussian_for(model, "flow")
    ('lowrank_advi', 'advi')
    """
    dim = sum(int(np.size(v)) for v in model.initial_point().values())
    return "fullrank_advi" if defaults.full_rank(dim) else SMALLER[use]
