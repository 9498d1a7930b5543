"""A prior sweep's fits: every combination its flags ask for, their keys and their tasks.

:func:`specs` turns ``bnn-zoo sweep``'s flags into the toy configurations of
its fits, :func:`fit_key` names each fit's record by a hash of its settings
(:data:`KEY_FIELDS`), and :func:`tasks` groups fits of one
:func:`structure` into the tasks that run as one vmapped program each
(:mod:`~bnn_zoo.experiments.sweep.fits`); :func:`split_settings` are what
make a fit's data set (:data:`SPLIT_FIELDS`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json

import numpy as np

from bnn_zoo.experiments.harness.fit_flags import build_parser
from bnn_zoo.experiments.toy import priors as toy
from bnn_zoo.models.layers import HYPERPRIOR_INDEX, PRIOR_INDEX
from bnn_zoo.models.priors import SCALE_FREE

__all__ = ["KEY_FIELDS", "SPLIT_FIELDS", "choices", "fit_identity", "fit_key", "indices", "scale_variables",
           "specs", "split_settings", "structure", "tasks"]


#: The toy config's fields that change what a fit fits or measures: :func:`fit_key` hashes them to
#: name the fit's record, and all but the data's (data set, noise, seeds) and the prior pair's make
#: its :func:`structure`.
KEY_FIELDS = ("dataset", "noise", "seed", "init_seed", "prior", "hyperprior", "n_train", "n_test", "hidden", "method",
              "steps", "optimizer", "lr", "lr_schedule", "lr_final", "init_std", "mc_samples", "beta",
              "average", "restarts", "pick", "pick_at", "draws", "float32")
#: The toy config's fields that make a data set (:func:`split_settings`): fits that share them
#: share one Bayes-optimal reference (:func:`~bnn_zoo.experiments.sweep.fits.bayes_task`).
SPLIT_FIELDS = ("dataset", "noise", "seed", "n_train", "n_test")  # what makes a data set


def fit_key(cfg: toy.ToyConfig, kfold: int = 0) -> str:
    """The hash naming a fit's record: of every setting that changes what is fitted or measured
    (and of ``--kfold``, when given: such a record holds more).

    The settings are the config's :data:`KEY_FIELDS`, and the hyperprior's
    parameters where the toy experiment sets its own
    (:func:`~bnn_zoo.experiments.toy.priors.hyperprior_params`).

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings (:class:`bnn_zoo.experiments.toy.priors.ToyConfig`).
    kfold : int, default 0
        The K of the record's K-fold cross-validation; 0: none.

    Returns
    -------
    str
        The SHA-256 of the settings as JSON, its first 20 hex digits.
    """
    settings = {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(cfg).items() if k in KEY_FIELDS}
    params = toy.hyperprior_params(cfg.hyperprior)
    if params:  # only there: the other pairs' keys do not depend on it
        settings["hyperprior_params"] = params
    if kfold:
        settings["kfold"] = kfold
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]


def scale_variables(cfg: toy.ToyConfig) -> bool:
    """Whether the fit's model has a scale variable per layer: a prior with a scale under a
    hyperprior that is not fixed (the other pairs' models have the weights' variables only)."""
    return cfg.prior not in SCALE_FREE and cfg.hyperprior != "fixed"


def structure(cfg: toy.ToyConfig) -> tuple:
    """Fits with the same structure run in one vmapped program: all settings but the data's and
    the prior pair's, and whether the model has scale variables.

    A structure's pairs share one model, their prior a choice selected by
    data (:func:`choices`, :func:`indices`), so that the sweep compiles one
    fit program and one evaluation program per structure, not per pair.

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.

    Returns
    -------
    tuple
        The values of :data:`KEY_FIELDS` but the data set, noise, seed,
        ``init_seed``, prior and hyperprior, in that order, and
        :func:`scale_variables`.
    """
    return (*(getattr(cfg, k) for k in KEY_FIELDS if k not in _NOT_STRUCTURE), scale_variables(cfg))


_NOT_STRUCTURE = ("dataset", "noise", "seed", "init_seed", "prior", "hyperprior")


def choices(cfgs: list[toy.ToyConfig]) -> dict[tuple, tuple | None]:
    """The priors and hyperpriors each structure's model chooses among: the sweep's own pairs.

    Made from all of a sweep's fits (not those left to fit), so that a
    resumed sweep builds the models the first run built.

    Parameters
    ----------
    cfgs : list of ToyConfig
        The sweep's fits (:func:`specs`).

    Returns
    -------
    dict of tuple to (tuple of (list of str, list of str)) or None
        By :func:`structure`: its priors and hyperpriors, each sorted by name
        (``["fixed"]`` without scale variables: a prior without a scale ignores
        its hyperprior); ``None`` where the structure has one model, which is
        then built as its pair alone.
    """
    out = {}
    for key, group in _groups(cfgs).items():
        priors = sorted({c.prior for c in group})
        hyperpriors = sorted({c.hyperprior for c in group}) if scale_variables(group[0]) else ["fixed"]
        out[key] = (priors, hyperpriors) if len(priors) > 1 or len(hyperpriors) > 1 else None
    return out


def indices(cfg: toy.ToyConfig, choice: tuple | None) -> dict[str, int]:
    """The data that select the fit's pair in its structure's model.

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.
    choice : tuple of (list of str, list of str) or None
        Its structure's :func:`choices`.

    Returns
    -------
    dict of str to int
        ``prior_index`` where the prior is a choice and ``hyperprior_index``
        where the hyperprior is (:data:`bnn_zoo.models.layers.PRIOR_INDEX`);
        empty for a model of one pair.
    """
    if choice is None:
        return {}
    priors, hyperpriors = choice
    out = {PRIOR_INDEX: priors.index(cfg.prior)} if len(priors) > 1 else {}
    if len(hyperpriors) > 1:
        out[HYPERPRIOR_INDEX] = hyperpriors.index(cfg.hyperprior)
    return out


def fit_identity(cfg: toy.ToyConfig, choice: tuple | None) -> tuple:
    """What a fit computes from: its settings but the pair's names, and the data that select its pair
    in its structure's model (:func:`indices`).

    Fits of one identity are one fit under several names: a prior without a scale ignores its
    hyperprior, so the flat prior's four pairs are one model with one index (their records are
    the same, bit for bit). ``bnn-zoo sweep`` fits each identity once and records it under every
    key that has it
    (:func:`~bnn_zoo.experiments.sweep.fits.shared_record`).

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.
    choice : tuple of (list of str, list of str) or None
        Its structure's :func:`choices`.

    Returns
    -------
    tuple
        Hashable; equal for two fits exactly when they compute the same numbers.
    """
    settings = tuple(getattr(cfg, k) for k in KEY_FIELDS if k not in ("prior", "hyperprior"))
    return (*settings, structure(cfg), tuple(sorted(indices(cfg, choice).items())))


def _groups(cfgs: list[toy.ToyConfig]) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for cfg in cfgs:
        groups.setdefault(structure(cfg), []).append(cfg)
    return groups


def split_settings(cfg) -> dict:
    """The settings that make a fit's data set.

    Parameters
    ----------
    cfg : ToyConfig
        The fit's settings.

    Returns
    -------
    dict
        Its :data:`SPLIT_FIELDS`, by name.
    """
    return {k: getattr(cfg, k) for k in SPLIT_FIELDS}


def specs(args) -> list[toy.ToyConfig]:
    """Every fit of the sweep, in a stable order.

    Each is the toy experiment's configuration at its defaults (as
    ``bnn-zoo moons`` with no flags), with the sweep's flags: every
    combination of data set, noise, seed, prior pair and the listed fit
    settings.

    Parameters
    ----------
    args : argparse.Namespace
        The sweep's parsed flags (:func:`bnn_zoo.experiments.sweep.command.build_parser`).

    Returns
    -------
    list of ToyConfig
        One configuration per fit.
    """
    exp = toy.experiment("moons")
    base = toy.configs(build_parser(exp, "bnn-zoo moons").parse_args([]), "moons")[0]
    base = dataclasses.replace(base, n_test=args.n_test, draws=args.draws, hidden=args.hidden,
                               progress=False, uncertainty_map=False, grid=False, keep_draws=args.keep_draws,
                               float32=args.float32)
    pairs = (list(itertools.product(toy.GRID_PRIORS, sorted(toy.HYPERPRIORS))) if args.all_priors
             else list(itertools.product(args.priors, args.hyperpriors)))
    out = []
    for (dataset, noise, seed, (prior, hyper), steps, lr, n_train, restarts, pick_at, init_std) in (
            itertools.product(args.datasets, args.noise, range(args.seeds), pairs, args.steps, args.lr,
                              args.n_train, args.restarts, args.pick_at, args.init_std)):
        out.append(dataclasses.replace(base, dataset=dataset, noise=noise, seed=seed, prior=prior,
                                       hyperprior=hyper, steps=steps, lr=lr, n_train=n_train,
                                       restarts=restarts, pick_at=pick_at if restarts > 1 else 0.0,
                                       init_std=init_std,
                                       init_seed=seed + args.init_offset if args.init_offset else None))
    return out


def tasks(cfgs: list[toy.ToyConfig], per_task: int) -> list[list[toy.ToyConfig]]:
    """Fits grouped by structure, at most ``per_task`` (times their restarts' share) a task.

    A group of one :func:`structure` is cut into as few tasks of even sizes
    as allow at most ``per_task // restarts`` fits each (at least one).

    Parameters
    ----------
    cfgs : list of ToyConfig
        The fits.
    per_task : int
        The most fits a task vmaps, restarts counted (``--fits-per-task``).

    Returns
    -------
    list of list of ToyConfig
        The tasks, each of one structure, in the order of ``cfgs``' first
        appearances.
    """
    out = []
    for group in _groups(cfgs).values():
        size = max(1, per_task // group[0].restarts)
        n = -(-len(group) // size)  # as few tasks as that allows, of even sizes
        out += [list(part) for part in np.array_split(np.array(group, dtype=object), n)]
    return out
