import functools
import gzip
import hashlib
import http.server
import os
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from bnn_zoo.data import mnist

SHARED = Path(os.environ.get("MNIST_DIR")
              or Path(__file__).resolve().parents[2] / "shared/data/mnist")
HAVE_REAL = all((SHARED / f"{n}.gz").is_file() or (SHARED / n).is_file()
                for n in mnist.FILES.values())
needs_real = pytest.mark.skipif(not HAVE_REAL, reason=f"real MNIST not found in {SHARED}")

# The first labels of the real files (LeCun et al.), independent of this module's reader.
FIRST_TRAIN_LABELS = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4, 3, 5, 3, 6, 1, 7, 2, 8, 6, 9]
FIRST_TEST_LABELS = [7, 2, 1, 0, 4, 1, 4, 9, 5, 9, 0, 6, 9, 0, 1, 5, 9, 7, 3, 4]
GZ_NAMES = sorted(f"{n}.gz" for n in mnist.FILES.values())


def raw(path) -> bytes:
    return gzip.decompress(Path(path).read_bytes())


def copy_fixture(src, dst) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for name in GZ_NAMES:
        shutil.copyfile(src / name, dst / name)
    return dst


def corrupt(path) -> None:
    """Flip one byte (the middle one) of ``path``'s decompressed content and re-gzip it."""
    data = bytearray(raw(path))
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(gzip.compress(bytes(data)))


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def row_index(rows: np.ndarray) -> dict[bytes, int]:
    return {r.tobytes(): i for i, r in enumerate(rows)}


def indices(X: np.ndarray, lookup: dict[bytes, int]) -> np.ndarray:
    """The file row of each image of ``X`` (normalised with "255")."""
    u8 = np.rint(X[:, 0] * 255).astype(np.uint8)
    return np.array([lookup[r.tobytes()] for r in u8])


# --- loading the fixture


@pytest.mark.parametrize("normalize", mnist.NORMALIZATIONS)
def test_tiny_shapes_dtypes_and_ranges(mnist_tiny_dir, tiny_checksums, normalize):
    d = mnist.load(mnist_tiny_dir, normalize=normalize, checksums=tiny_checksums, download=False)
    assert d.X_train.shape == (500, 1, 28, 28) and d.y_train.shape == (500,)
    assert d.X_val.shape == (100, 1, 28, 28) and d.y_val.shape == (100,)
    assert d.X_test.shape == (200, 1, 28, 28) and d.y_test.shape == (200,)
    for X, y in [(d.X_train, d.y_train), (d.X_val, d.y_val), (d.X_test, d.y_test)]:
        assert X.dtype == np.float32 and y.dtype == np.int64
        assert y.min() >= 0 and y.max() <= 9
    assert d.normalize == normalize and d.source == mnist_tiny_dir
    assert d.flat(d.X_test).shape == (200, 784)
    X = np.concatenate([d.X_train, d.X_val, d.X_test])
    if normalize == "255":
        assert X.min() == 0 and X.max() == 1
        np.testing.assert_array_equal(X * 255, np.rint(X * 255))  # exact k/255 values
    elif normalize == "126":
        assert X.min() == 0 and X.max() == np.float32(255 / 126)
    else:
        assert abs(d.X_train.mean()) < 1e-5 and abs(d.X_train.std() - 1) < 1e-5
        # the statistics are the training split's, applied unchanged to val and test
        p = mnist.load(mnist_tiny_dir, checksums=tiny_checksums, download=False)
        m, s = p.X_train.astype(np.float64).mean(), p.X_train.astype(np.float64).std()
        np.testing.assert_allclose(d.X_test, (p.X_test - m) / s, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(d.X_val, (p.X_val - m) / s, rtol=1e-5, atol=1e-5)
        assert abs(d.X_test.mean()) > 1e-3  # not re-standardised on its own


def test_split_is_a_seeded_partition_of_the_training_file(mnist_tiny_dir, tiny_checksums):
    images = mnist.read_idx(mnist_tiny_dir / "train-images-idx3-ubyte.gz")
    labels = mnist.read_idx(mnist_tiny_dir / "train-labels-idx1-ubyte.gz")
    assert labels[:20].tolist() == FIRST_TRAIN_LABELS
    lookup = row_index(images)
    assert len(lookup) == 600  # the 600 images are distinct, so rows identify them

    def load(seed):
        return mnist.load(mnist_tiny_dir, seed=seed, checksums=tiny_checksums, download=False)

    a, b, c = load(0), load(0), load(1)
    tr, va = indices(a.X_train, lookup), indices(a.X_val, lookup)
    assert not set(tr) & set(va)
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(600))
    assert (np.diff(tr) > 0).all() and (np.diff(va) > 0).all()  # both keep the file order
    np.testing.assert_array_equal(a.y_train, labels[tr])
    np.testing.assert_array_equal(a.y_val, labels[va])
    for f in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert set(indices(c.X_val, lookup).tolist()) != set(va.tolist())
    # the test split is the test file, whole and in order
    assert a.y_test[:20].tolist() == FIRST_TEST_LABELS
    test_images = mnist.read_idx(mnist_tiny_dir / "t10k-images-idx3-ubyte.gz")
    np.testing.assert_array_equal(np.rint(a.X_test[:, 0] * 255), test_images)


@needs_real
def test_fixture_is_the_head_of_the_real_files(mnist_tiny_dir):
    real = mnist.fetch(SHARED, mirrors=())
    for key, name in mnist.FILES.items():
        tiny = mnist.read_idx(mnist_tiny_dir / f"{name}.gz")
        n = 600 if key.startswith("train") else 200
        assert len(tiny) == n
        np.testing.assert_array_equal(tiny, mnist.read_idx(real[key])[:n])


def test_gz_and_raw_files_both_read(mnist_tiny_dir, tiny_checksums, tmp_path):
    for name in GZ_NAMES:
        (tmp_path / name.removesuffix(".gz")).write_bytes(raw(mnist_tiny_dir / name))
    paths = mnist.fetch(tmp_path, mirrors=(), checksums=tiny_checksums)
    assert all(p.suffix != ".gz" for p in paths.values())
    a = mnist.load(mnist_tiny_dir, checksums=tiny_checksums, download=False)
    b = mnist.load(tmp_path, checksums=tiny_checksums, download=False)
    for f in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    # with both present the .gz is the one used
    shutil.copyfile(mnist_tiny_dir / GZ_NAMES[0], tmp_path / GZ_NAMES[0])
    assert mnist.fetch(tmp_path, mirrors=(), checksums=tiny_checksums)["test_images"] == \
        tmp_path / "t10k-images-idx3-ubyte.gz"


# --- corrupt, truncated and malformed files


def test_corrupt_content_names_the_file_and_expected_hash(mnist_tiny_dir, tiny_checksums, tmp_path):
    d = copy_fixture(mnist_tiny_dir, tmp_path / "d")
    bad = d / "train-images-idx3-ubyte.gz"
    corrupt(bad)
    expected = tiny_checksums["train-images-idx3-ubyte"]
    got = hashlib.sha256(raw(bad)).hexdigest()
    with pytest.raises(mnist.MNISTError) as e:
        mnist.load(d, checksums=tiny_checksums, download=False)
    msg = str(e.value)
    assert str(bad) in msg and expected in msg and got in msg and "\n" not in msg
    assert isinstance(e.value, ValueError)
    with pytest.raises(mnist.MNISTError, match=expected):
        mnist.verify(bad, expected)
    mnist.verify(mnist_tiny_dir / "train-images-idx3-ubyte.gz", expected)  # the original passes


def test_truncated_gzip(mnist_tiny_dir, tiny_checksums, tmp_path):
    d = copy_fixture(mnist_tiny_dir, tmp_path / "d")
    bad = d / "train-labels-idx1-ubyte.gz"
    bad.write_bytes(bad.read_bytes()[:150])
    expected = tiny_checksums["train-labels-idx1-ubyte"]
    with pytest.raises(mnist.MNISTError) as e:
        mnist.load(d, checksums=tiny_checksums, download=False)
    msg = str(e.value)
    assert str(bad) in msg and expected in msg and "\n" not in msg
    with pytest.raises(mnist.MNISTError, match="not a valid gzip file"):
        mnist.read_idx(bad)


def test_read_idx_checks_the_header(mnist_tiny_dir, tmp_path):
    data = raw(mnist_tiny_dir / "t10k-labels-idx1-ubyte.gz")
    np.testing.assert_array_equal(mnist.read_idx(mnist_tiny_dir / "t10k-labels-idx1-ubyte.gz"),
                                  np.frombuffer(data[8:], np.uint8))
    p = tmp_path / "t10k-labels-idx1-ubyte"
    p.write_bytes(data[:-1])
    with pytest.raises(mnist.MNISTError, match=f"{p}: truncated: 207 bytes"):
        mnist.read_idx(p)
    p.write_bytes(b"\x00\x00\x08\x02" + data[4:])
    with pytest.raises(mnist.MNISTError, match="IDX magic 0x00000802"):
        mnist.read_idx(p)


def test_label_and_image_counts_must_match(mnist_tiny_dir, tiny_checksums, tmp_path):
    d = copy_fixture(mnist_tiny_dir, tmp_path / "d")
    labels = mnist.read_idx(d / "train-labels-idx1-ubyte.gz")[:599]
    content = (0x0801).to_bytes(4, "big") + (599).to_bytes(4, "big") + labels.tobytes()
    (d / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(content))
    sums = {**tiny_checksums, "train-labels-idx1-ubyte": hashlib.sha256(content).hexdigest()}
    with pytest.raises(mnist.MNISTError, match="has 600 images but .* has 599 labels"):
        mnist.load(d, checksums=sums, download=False)


# --- missing files and downloads


def test_a_data_dir_that_is_a_file_is_refused_before_any_download(tmp_path, tiny_checksums):
    afile = tmp_path / "afile"
    afile.write_text("")
    for folder, words in [(afile, "is a file, not a folder"), (afile / "sub", "lies under")]:
        with pytest.raises(mnist.MNISTError) as e:
            mnist.fetch(folder, mirrors=(closed_port_url(),), checksums=tiny_checksums)
        assert words in str(e.value) and "--data-dir" in str(e.value) and "\n" not in str(e.value)


def test_missing_files_offline(tmp_path, tiny_checksums, monkeypatch):
    d = tmp_path / "empty"
    with pytest.raises(mnist.MNISTError) as e:
        mnist.fetch(d, mirrors=(closed_port_url(),), checksums=tiny_checksums)
    msg = str(e.value)
    assert str(d) in msg and "(.gz) not found" in msg and "no mirror reachable" in msg
    assert "MNIST_DIR" in msg and "\n" not in msg
    assert not d.exists()  # the folder made for the download is not left behind
    with pytest.raises(mnist.MNISTError, match="downloads disabled"):
        mnist.load(d, checksums=tiny_checksums, download=False)
    monkeypatch.setattr(mnist, "MIRRORS", (closed_port_url(),))
    with pytest.raises(mnist.MNISTError, match="no mirror reachable"):
        mnist.load(d, checksums=tiny_checksums)


@pytest.fixture
def mirrors(mnist_tiny_dir, tmp_path, monkeypatch):
    """A local HTTP server: ``base + "good/"`` serves the fixture, ``"bad/"`` a corrupted copy.

    Yields ``(base_url, requested_paths)``.
    """
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    root = tmp_path / "www"
    copy_fixture(mnist_tiny_dir, root / "good")
    copy_fixture(mnist_tiny_dir, root / "bad")
    for name in GZ_NAMES:
        corrupt(root / "bad" / name)
    requested = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, *args):
            requested.append(self.path)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requested
    finally:
        server.shutdown()
        server.server_close()


def test_download_skips_a_corrupt_mirror(mirrors, mnist_tiny_dir, tiny_checksums, tmp_path):
    base, requested = mirrors
    d = tmp_path / "cache"
    paths = mnist.fetch(d, mirrors=(base + "missing/", base + "bad", base + "good/"),
                        checksums=tiny_checksums)
    assert sorted(p.name for p in d.iterdir()) == GZ_NAMES  # nothing partial or corrupt left
    for key, name in mnist.FILES.items():
        assert paths[key] == d / f"{name}.gz"
        assert paths[key].read_bytes() == (mnist_tiny_dir / f"{name}.gz").read_bytes()
        mnist.verify(paths[key], tiny_checksums[name])
        for mirror in ("missing", "bad", "good"):  # each mirror was tried, in order
            assert f"/{mirror}/{name}.gz" in requested
    assert [r.split("/")[1] for r in requested][:3] == ["missing", "bad", "good"]
    n = len(requested)
    mnist.fetch(d, mirrors=(base + "good/",), checksums=tiny_checksums)
    assert len(requested) == n  # present files are not downloaded again


def test_download_from_only_a_corrupt_mirror_fails_cleanly(mirrors, tiny_checksums, tmp_path):
    base, _ = mirrors
    d = tmp_path / "cache"
    with pytest.raises(mnist.MNISTError) as e:
        mnist.fetch(d, mirrors=(base + "bad/",), checksums=tiny_checksums)
    msg = str(e.value)
    assert str(d) in msg and "content sha256 mismatch" in msg and "\n" not in msg
    assert not d.exists()
    d.mkdir()  # a folder the user made stays, empty
    with pytest.raises(mnist.MNISTError):
        mnist.fetch(d, mirrors=(base + "bad/",), checksums=tiny_checksums)
    assert list(d.iterdir()) == []


def test_load_downloads_into_the_folder(mirrors, tiny_checksums, tmp_path, monkeypatch):
    base, _ = mirrors
    monkeypatch.setattr(mnist, "MIRRORS", (base + "good/",))
    d = mnist.load(tmp_path / "cache", checksums=tiny_checksums)
    assert d.X_train.shape == (500, 1, 28, 28) and d.source == tmp_path / "cache"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == GZ_NAMES


# --- arguments


def test_resolve_dir_precedence(tmp_path, monkeypatch, mnist_tiny_dir, tiny_checksums):
    monkeypatch.delenv("MNIST_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert mnist.resolve_dir() == mnist.cache_dir() == tmp_path / "cache" / "bnn-zoo" / "mnist"
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "env"))
    assert mnist.resolve_dir() == tmp_path / "env"
    assert mnist.resolve_dir(tmp_path / "arg") == tmp_path / "arg"
    assert mnist.resolve_dir(str(tmp_path / "arg")) == tmp_path / "arg"
    monkeypatch.setenv("MNIST_DIR", str(mnist_tiny_dir))
    assert mnist.load(checksums=tiny_checksums, download=False).source == mnist_tiny_dir


def test_checksums_default_to_the_module_table(mnist_tiny_dir, tiny_checksums, monkeypatch):
    with pytest.raises(mnist.MNISTError, match="sha256 of its content is"):
        mnist.load(mnist_tiny_dir, download=False)  # the real MNIST hashes
    monkeypatch.setattr(mnist, "CHECKSUMS", tiny_checksums)
    assert mnist.load(mnist_tiny_dir, download=False).X_test.shape == (200, 1, 28, 28)


def test_bad_arguments(mnist_tiny_dir, tiny_checksums):
    kw = dict(checksums=tiny_checksums, download=False)
    with pytest.raises(mnist.MNISTError, match="unknown normalize 'minmax'; valid: 255, standardize, 126"):
        mnist.load(mnist_tiny_dir, normalize="minmax", **kw)
    for f in (0, 1, -0.1, 1.5):
        with pytest.raises(mnist.MNISTError, match=r"validation_fraction must be in \(0, 1\)"):
            mnist.load(mnist_tiny_dir, validation_fraction=f, **kw)
    with pytest.raises(mnist.MNISTError, match="leaves an empty split"):
        mnist.load(mnist_tiny_dir, validation_fraction=1e-4, **kw)
    d = mnist.load(mnist_tiny_dir, validation_fraction=0.25, **kw)
    assert len(d.X_train) == 450 and len(d.X_val) == 150


# --- the real data


@needs_real
def test_full_mnist_splits_and_class_counts():
    d = mnist.load(SHARED, download=False)
    assert (len(d.X_train), len(d.X_val), len(d.X_test)) == (50000, 10000, 10000)
    assert d.X_train.shape[1:] == (1, 28, 28) and d.X_train.dtype == np.float32
    assert np.bincount(d.y_test, minlength=10).tolist() == \
        [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert np.bincount(np.concatenate([d.y_train, d.y_val]), minlength=10).tolist() == \
        [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
