"""MNIST from its four IDX files: find or download them, verify, split, normalise.

The files are looked for in ``data_dir``, else ``$MNIST_DIR``, else the user's cache
(:func:`cache_dir`: ``~/.cache/bnn-zoo/mnist`` on Linux),
each as ``<name>.gz`` or raw ``<name>``. Missing ones are downloaded (gzip) from
:data:`MIRRORS` with pooch. Every file is checked against the sha256 of its
*decompressed* content (:data:`CHECKSUMS`), so a copy compressed differently still
verifies.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CHECKSUMS", "FILES", "MIRRORS", "MNIST", "MNISTError", "NORMALIZATIONS", "cache_dir", "fetch",
           "load", "read_idx", "resolve_dir", "verify"]

#: The four IDX files' names by role (the keys of :func:`fetch`'s result), which
#: :func:`fetch` and :func:`load` look for.
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
#: The SHA-256 of each file's decompressed IDX bytes; every file read or downloaded is checked.
CHECKSUMS = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
#: Where missing files are downloaded from, in order (the first copy that verifies is kept).
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
#: The pixel scalings :func:`load` offers (``normalize=``): divide by 255, standardize
#: with the training split's pixel mean and sd, or divide by 126.
NORMALIZATIONS = ("255", "standardize", "126")


def cache_dir() -> Path:
    """Where MNIST is downloaded by default.

    Returns
    -------
    pathlib.Path
        ``mnist/`` in :func:`bnn_zoo.cache.user_cache`.
    """
    from bnn_zoo.cache import user_cache

    return user_cache() / "mnist"


_IDX_NDIM = {0x0801: 1, 0x0803: 3}  # magic -> ndim; both hold uint8


class MNISTError(ValueError):
    """A bad argument, or an MNIST file that is missing, corrupt or malformed.

    A ``ValueError`` so that callers validating input catch it; the message is one line.
    """


@dataclass(frozen=True)
class MNIST:
    """The three splits: ``X_*`` float32 ``(n, 1, 28, 28)`` (NCHW), ``y_*`` int64 in 0..9.

    What :func:`load` returns; :meth:`flat` turns images into rows for an MLP.

    Parameters
    ----------
    X_train, y_train : numpy.ndarray
        The training split: images ``(n_train, 1, 28, 28)`` and their labels.
    X_val, y_val : numpy.ndarray
        The validation split (held out of the 60,000 training images).
    X_test, y_test : numpy.ndarray
        The 10,000 test images and their labels.
    normalize : str
        The scaling applied, one of :data:`NORMALIZATIONS`.
    source : pathlib.Path
        The folder the files were read from.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    normalize: str
    source: Path

    @staticmethod
    def flat(X: np.ndarray) -> np.ndarray:
        """Images as rows of pixels, for an MLP.

        Parameters
        ----------
        X : numpy.ndarray, shape (n, 1, 28, 28)
            Images.

        Returns
        -------
        numpy.ndarray, shape (n, 784)
            A view of ``X``.
        """
        return X.reshape(len(X), -1)


def resolve_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The MNIST folder: ``data_dir``, else ``$MNIST_DIR`` if set, else :func:`cache_dir`.

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
    env = os.environ.get("MNIST_DIR")
    return Path(env) if env else cache_dir()


def _content(path: Path, expected: str | None = None) -> bytes:
    """The decompressed bytes of ``path`` (gzip detected by its magic bytes)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        want = f", expected content sha256 {expected}" if expected else ""
        raise MNISTError(f"{path}: not a valid gzip file ({type(e).__name__}: "
                         f"{_one_line(e)}){want}; the file is corrupt or truncated, "
                         "delete it and retry") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _check(data: bytes, path: Path, expected: str) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != expected.lower():
        raise MNISTError(f"{path}: sha256 of its content is {got}, expected {expected}; "
                         "the file is corrupt or truncated, delete it and retry")


def _parse(data: bytes, path: Path) -> np.ndarray:
    if len(data) < 4:
        raise MNISTError(f"{path}: {len(data)} bytes, too short for an IDX header")
    magic = int.from_bytes(data[:4], "big")
    if magic not in _IDX_NDIM:
        raise MNISTError(f"{path}: IDX magic 0x{magic:08x}, expected 0x00000801 (labels) "
                         "or 0x00000803 (images)")
    ndim = _IDX_NDIM[magic]
    start = 4 + 4 * ndim
    if len(data) < start:
        raise MNISTError(f"{path}: truncated IDX header ({len(data)} bytes)")
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    want = start + int(np.prod(shape))
    if len(data) != want:
        what = "truncated" if len(data) < want else "has trailing bytes"
        raise MNISTError(f"{path}: {what}: {len(data)} bytes, header {shape} needs {want}")
    return np.frombuffer(data, np.uint8, offset=start).reshape(shape)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (gzip or raw) of uint8: labels ``(n,)`` or images ``(n, rows, cols)``.

    The array is read-only (a view of the file's bytes).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    numpy.ndarray of uint8
        Labels ``(n,)`` or images ``(n, rows, cols)``.

    Raises
    ------
    MNISTError
        If the file is a corrupt or truncated gzip, the header is not a uint8 IDX1/IDX3
        header, or the byte count does not match it.
    FileNotFoundError
        If the file is missing (the ``OSError`` of opening it is not wrapped).
    """
    path = Path(path)
    return _parse(_content(path), path)


def verify(path: str | os.PathLike, expected_sha256: str) -> None:
    """Check the SHA-256 of a file's decompressed content.

    Parameters
    ----------
    path : str or os.PathLike
        The file (gzip or raw).
    expected_sha256 : str
        The hex digest it must have.

    Raises
    ------
    MNISTError
        If the file is a corrupt or truncated gzip or its digest differs.
    FileNotFoundError
        If the file is missing (the ``OSError`` of opening it is not wrapped).
    """
    path = Path(path)
    _check(_content(path, expected_sha256), path, expected_sha256)


def _checksums(checksums: dict[str, str] | None) -> dict[str, str]:
    checksums = CHECKSUMS if checksums is None else checksums
    missing = [n for n in FILES.values() if n not in checksums]
    if missing:
        raise MNISTError(f"no sha256 given for {', '.join(missing)}")
    return checksums


@contextlib.contextmanager
def _quiet_pooch():
    import pooch

    log = pooch.get_logger()
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield pooch
    finally:
        log.setLevel(level)


def _download(name: str, folder: Path, mirrors, expected: str) -> tuple[Path | None, str]:
    """Fetch ``<name>.gz`` from the first mirror whose copy verifies: (path, "") or (None, why)."""
    import requests

    final = folder / f"{name}.gz"
    failures = []
    with _quiet_pooch() as pooch:
        for mirror in mirrors:
            url = mirror.rstrip("/") + f"/{name}.gz"
            # pooch streams to a temporary file and renames it when complete; this name
            # is hidden and unique, and becomes ``final`` only once verified.
            tmp = folder / f".{name}.gz.{uuid.uuid4().hex}.part"
            try:
                pooch.retrieve(url, known_hash=None, fname=tmp.name, path=folder,
                               progressbar=False)
                verify(tmp, expected)
                os.replace(tmp, final)
                return final, ""
            except MNISTError:
                failures.append(f"{url}: content sha256 mismatch")
            except requests.HTTPError as e:
                failures.append(f"{url}: HTTP {e.response.status_code}")
            except requests.RequestException:
                failures.append(f"{url}: unreachable")
            except Exception as e:  # noqa: BLE001 - any other failure: try the next mirror
                failures.append(f"{url}: {type(e).__name__}: {_one_line(e)}")
            finally:
                tmp.unlink(missing_ok=True)
    if not failures:
        return None, "no mirrors given"
    if all(f.endswith(": unreachable") for f in failures):
        return None, "no mirror reachable"
    return None, "; ".join(failures)


def _fetch(data_dir, mirrors, checksums) -> tuple[dict[str, Path], set[str]]:
    """:func:`fetch`, plus the keys of the files it downloaded (and so verified)."""
    folder = resolve_dir(data_dir)
    above = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise MNISTError(f"the MNIST folder {folder} {'is' if above == folder else f'lies under {above}, which is'} "
                         f"a file, not a folder: pass --data-dir (or set MNIST_DIR to) a folder of the four IDX files")
    checksums = _checksums(checksums)
    mirrors = (mirrors,) if isinstance(mirrors, str) else tuple(mirrors)
    paths, downloaded, made = {}, set(), []
    for key, name in FILES.items():
        for candidate in (folder / f"{name}.gz", folder / name):
            if candidate.is_file():
                paths[key] = candidate
                break
        else:
            if not folder.exists() and mirrors:
                try:
                    made = [p for p in (folder, *folder.parents) if not p.exists()]
                    folder.mkdir(parents=True)
                except OSError as err:
                    raise MNISTError(f"cannot make the MNIST folder {folder} ({err.strerror}): pass --data-dir "
                                     f"(or set MNIST_DIR to) a folder you can write") from None
            got, why = (_download(name, folder, mirrors, checksums[name]) if mirrors
                        else (None, "downloads disabled"))
            if got is None:
                for p in made:  # the folders made for the download, left as they were found
                    with contextlib.suppress(OSError):
                        p.rmdir()
                raise MNISTError(f"MNIST file {name}(.gz) not found in {folder} and could not "
                                 f"be downloaded ({why}); put the four IDX files there, or "
                                 "pass --data-dir / set MNIST_DIR")
            paths[key] = got
            downloaded.add(key)
    return paths, downloaded


def fetch(data_dir: str | os.PathLike | None = None, *, mirrors=MIRRORS,
          checksums: dict[str, str] | None = None) -> dict[str, Path]:
    """The path of each of the four files, downloading the missing ones.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        Folder of the files (default: :func:`resolve_dir`'s); created if a download is
        needed.
    mirrors : str or sequence of str, default MIRRORS
        Base URLs tried in turn for each missing ``<name>.gz`` (one string: a single
        mirror); empty: never download.
    checksums : dict of str to str, optional
        Raw file name -> sha256 of its decompressed content (default :data:`CHECKSUMS`);
        needed for every file of :data:`FILES`.

    Returns
    -------
    dict of str to pathlib.Path
        :data:`FILES` key -> path (``<name>.gz`` preferred over raw ``<name>``). Files
        already present are *not* verified here (:func:`load` does); a downloaded one
        is, and one that fails is deleted before the next mirror is tried, so nothing
        unverified or partial is ever left under a final name.

    Raises
    ------
    MNISTError
        If ``checksums`` lacks a file, or a missing file cannot be downloaded from any
        mirror (or ``mirrors`` is empty).
    """
    return _fetch(data_dir, mirrors, checksums)[0]


def load(data_dir: str | os.PathLike | None = None, *, normalize: str = "255",
         validation_fraction: float = 1 / 6, seed: int = 0,
         checksums: dict[str, str] | None = None, download: bool = True) -> MNIST:
    """Load, verify, split and normalise MNIST.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        Folder of the IDX files (default: :func:`resolve_dir`'s).
    normalize : {"255", "standardize", "126"}, default "255"
        ``x / 255`` in [0, 1]; ``(x - m) / s`` with the scalar pixel mean ``m`` and
        std ``s`` of the *training split* (so mean 0 and std 1 on it); or ``x / 126``
        (Blundell et al. 2015).
    validation_fraction : float, default 1/6
        In (0, 1): ``round(n * fraction)`` training images, chosen by a permutation
        seeded with ``seed``, form the validation split (1/6: 50,000 / 10,000). Both
        splits keep the files' order.
    seed : int, default 0
        Seeds the validation split.
    checksums : dict of str to str, optional
        Raw file name -> content sha256; default :data:`CHECKSUMS` (read at call time).
    download : bool, default True
        Download missing files from :data:`MIRRORS`; if False, a missing file is an
        error.

    Returns
    -------
    MNIST
        The three splits as float32 ``(n, 1, 28, 28)`` images and int64 labels, with
        the scaling and the folder.

    Raises
    ------
    MNISTError
        For an unknown ``normalize``, a ``validation_fraction`` outside (0, 1) or one
        that leaves a split empty, a file that is missing and cannot be downloaded,
        fails its checksum or is malformed, images that are not 28 x 28 or do not match
        their labels in number, a label above 9, or training pixels all equal (with
        ``"standardize"``).
    """
    if normalize not in NORMALIZATIONS:
        raise MNISTError(f"unknown normalize {normalize!r}; valid: {', '.join(NORMALIZATIONS)}")
    if not 0 < validation_fraction < 1:
        raise MNISTError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
    checksums = _checksums(checksums)
    paths, downloaded = _fetch(data_dir, MIRRORS if download else (), checksums)

    arrays = {}
    for key, path in paths.items():
        expected = checksums[FILES[key]]
        data = _content(path, expected)
        if key not in downloaded:
            _check(data, path, expected)
        arrays[key] = _parse(data, path)
    for split in ("train", "test"):
        X, y = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if X.ndim != 3 or X.shape[1:] != (28, 28) or y.ndim != 1:
            raise MNISTError(f"{paths[f'{split}_images']}: images {X.shape}, labels {y.shape}; "
                             "expected (n, 28, 28) and (n,)")
        if len(X) != len(y):
            raise MNISTError(f"{paths[f'{split}_images']} has {len(X)} images but "
                             f"{paths[f'{split}_labels']} has {len(y)} labels")
        if y.size and y.max() > 9:
            raise MNISTError(f"{paths[f'{split}_labels']}: label {y.max()} outside 0..9")

    n = len(arrays["train_images"])
    n_val = round(n * validation_fraction)
    if not 0 < n_val < n:
        raise MNISTError(f"validation_fraction {validation_fraction} of {n} training images "
                         f"leaves an empty split ({n_val} for validation)")
    perm = np.random.default_rng(seed).permutation(n)
    val, train = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    Xtr, Xte = arrays["train_images"], arrays["test_images"]
    ytr, yte = arrays["train_labels"], arrays["test_labels"]

    X_train = Xtr[train]
    if normalize == "standardize":  # exact scalar stats from the pixel histogram, no float copy
        counts = np.bincount(X_train.ravel(), minlength=256).astype(np.float64)
        v = np.arange(256.0)
        mean = counts @ v / counts.sum()
        shift, scale = mean, np.sqrt(counts @ (v - mean) ** 2 / counts.sum())
        if scale == 0:
            raise MNISTError("cannot standardize: every training pixel has the same value")
    else:
        shift, scale = 0.0, float(normalize)

    def prep(X):
        out = X.astype(np.float32)[:, None]
        if shift:
            out -= np.float32(shift)
        out /= np.float32(scale)
        return out

    return MNIST(prep(X_train), ytr[train].astype(np.int64),
                 prep(Xtr[val]), ytr[val].astype(np.int64),
                 prep(Xte), yte.astype(np.int64),
                 normalize, resolve_dir(data_dir))
