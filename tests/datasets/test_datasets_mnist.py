"""Fashion-MNIST / MNIST loader on small IDX files written here (the real files are optional)."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

import rfed.datasets.mnist as mnist_mod
from rfed.datasets import (
    DatasetNotFoundError,
    fashion_mnist_available,
    find_mnist_files,
    load_fashion_mnist,
    load_mnist,
    mnist_available,
)

SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")


def _idx_bytes(array: np.ndarray) -> bytes:
    """IDX encoding written from the format description: 0, 0, 0x08 (ubyte), ndim, sizes, data."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.asarray(array, dtype=np.uint8).tobytes()


def _write(path: Path, array: np.ndarray, compress: bool) -> None:
    data = _idx_bytes(array)
    path.write_bytes(gzip.compress(data) if compress else data)


def _write_set(folder: Path, seed: int, n_train: int = 12, n_test: int = 5, compress=True):
    """Four MNIST-layout files; returns the arrays written."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = {}
    suffix = ".gz" if compress else ""
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        _write(folder / f"{split}-images-idx3-ubyte{suffix}", images, compress)
        _write(folder / f"{split}-labels-idx1-ubyte{suffix}", labels, compress)
        out[split] = (images, labels)
    return out


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No $RFED_DATA and a system folder that does not exist: only what a test writes is found."""
    monkeypatch.delenv("RFED_DATA", raising=False)
    for which in ("fashion-mnist", "mnist"):
        title, sub, _, how = mnist_mod._SOURCES[which]
        monkeypatch.setitem(mnist_mod._SOURCES, which, (title, sub, tmp_path / "nowhere", how))
    return tmp_path


@pytest.mark.parametrize("compress", [True, False])
def test_reads_given_folder_float32_unit_and_raw(isolated, compress):
    written = _write_set(isolated / "fm", 0, compress=compress)
    x, y = load_fashion_mnist(isolated / "fm")
    images, labels = written["train"]
    assert x.shape == (12, 28, 28) and x.dtype == np.float32
    assert y.dtype == np.int64
    np.testing.assert_array_equal(x, images.astype(np.float32) / np.float32(255))
    assert x.min() >= 0.0 and x.max() <= 1.0
    np.testing.assert_array_equal(y, labels)
    raw, _ = load_fashion_mnist(isolated / "fm", raw=True, flatten=True)
    assert raw.dtype == np.uint8 and raw.shape == (12, 784)
    np.testing.assert_array_equal(raw, images.reshape(12, 784))
    xt, yt = load_fashion_mnist(isolated / "fm", split="test")
    assert xt.shape == (5, 28, 28)
    np.testing.assert_array_equal(yt, written["t10k"][1])
    (a, b), (c, d) = load_fashion_mnist(isolated / "fm", split="both", flatten=True)
    assert a.shape == (12, 784) and c.shape == (5, 784)
    np.testing.assert_array_equal(b, labels)
    np.testing.assert_array_equal(d, written["t10k"][1])


def test_search_order_path_then_env_then_env_subfolder(isolated, monkeypatch):
    given = _write_set(isolated / "given", 1)
    env = _write_set(isolated / "env", 2)
    monkeypatch.setenv("RFED_DATA", str(isolated / "env"))
    np.testing.assert_array_equal(load_fashion_mnist(raw=True)[0], env["train"][0])
    np.testing.assert_array_equal(
        load_fashion_mnist(isolated / "given", raw=True)[0], given["train"][0]
    )
    # a given folder without the files falls through to the next place
    np.testing.assert_array_equal(
        load_fashion_mnist(isolated / "empty", raw=True)[0], env["train"][0]
    )
    sub = _write_set(isolated / "env2" / "fashion-mnist", 3)
    monkeypatch.setenv("RFED_DATA", str(isolated / "env2"))
    np.testing.assert_array_equal(load_fashion_mnist(raw=True)[0], sub["train"][0])
    files = find_mnist_files(split="train")
    assert files["train"][0] == isolated / "env2" / "fashion-mnist" / "train-images-idx3-ubyte.gz"
    # MNIST uses its own sub-folder and the same machinery
    assert not mnist_available()
    digits = _write_set(isolated / "env2" / "mnist", 4)
    np.testing.assert_array_equal(load_mnist(split="test", raw=True)[1], digits["t10k"][1])
    assert mnist_available()


def test_not_found_is_one_clear_line(isolated):
    with pytest.raises(DatasetNotFoundError) as info:
        load_fashion_mnist(isolated / "empty")
    assert isinstance(info.value, FileNotFoundError)
    msg = str(info.value)
    assert "\n" not in msg
    assert "apt-get install dataset-fashion-mnist" in msg and "RFED_DATA" in msg
    assert str(isolated / "empty") in msg
    assert not fashion_mnist_available(isolated / "empty")
    # a folder with only the test split serves split="test" but not "train" or "both"
    _write_set(isolated / "half", 5)
    for f in (isolated / "half").glob("train-*"):
        f.unlink()
    assert fashion_mnist_available(isolated / "half", split="test")
    assert not fashion_mnist_available(isolated / "half")
    with pytest.raises(DatasetNotFoundError, match="train-images-idx3-ubyte"):
        load_fashion_mnist(isolated / "half", split="train")
    with pytest.raises(DatasetNotFoundError, match="MNIST"):
        load_mnist(isolated / "half")


def test_argument_errors(isolated):
    _write_set(isolated / "fm", 0)
    with pytest.raises(ValueError, match="split"):
        load_fashion_mnist(isolated / "fm", split="validation")
    with pytest.raises(TypeError, match="path"):
        load_fashion_mnist(3)
    with pytest.raises(TypeError, match="raw"):
        load_fashion_mnist(isolated / "fm", raw="yes")


def _corrupt(folder: Path, name: str, payload: bytes) -> None:
    (folder / f"{name}.gz").write_bytes(payload)


@pytest.mark.parametrize(
    "name,make,match",
    [
        # gzip stream cut short
        ("train-images-idx3-ubyte",
         lambda: gzip.compress(_idx_bytes(np.zeros((12, 28, 28))))[:-40], "gzip"),
        # data section one image short of the declared count
        ("train-images-idx3-ubyte",
         lambda: gzip.compress(_idx_bytes(np.zeros((12, 28, 28)))[:-784]), "declares shape"),
        # a labels file where the images belong (magic 0x00000801, not 0x00000803)
        ("train-images-idx3-ubyte", lambda: gzip.compress(_idx_bytes(np.zeros(12))), "dimensions"),
        ("train-images-idx3-ubyte",
         lambda: gzip.compress(_idx_bytes(np.zeros((12, 27, 28)))), "size"),
        ("train-images-idx3-ubyte", lambda: gzip.compress(b"\x00\x00\x08\x03\x00\x00"), "header"),
        ("train-images-idx3-ubyte", lambda: gzip.compress(b"PK\x03\x04junk"), "magic"),
        ("train-labels-idx1-ubyte", lambda: gzip.compress(_idx_bytes(np.zeros(11))), "labels"),
        ("train-labels-idx1-ubyte",
         lambda: gzip.compress(_idx_bytes(np.full(12, 10))), "label 10"),
        ("train-images-idx3-ubyte",
         lambda: gzip.compress(_idx_bytes(np.zeros((0, 28, 28)))), "no images"),
    ],
)
def test_corrupt_files_are_clear_errors(isolated, name, make, match):
    _write_set(isolated / "fm", 0)
    _corrupt(isolated / "fm", name, make())
    with pytest.raises(ValueError, match=match) as info:
        load_fashion_mnist(isolated / "fm")
    assert name in str(info.value)


@pytest.mark.skipif(
    not (SYSTEM_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason="Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)",
)
def test_installed_fashion_mnist_if_present(monkeypatch):
    monkeypatch.delenv("RFED_DATA", raising=False)
    (x, y), (xt, yt) = load_fashion_mnist(SYSTEM_DIR, split="both", raw=True)
    assert x.shape == (60000, 28, 28) and xt.shape == (10000, 28, 28)
    # Fashion-MNIST is balanced: 6,000 training and 1,000 test images per class (Xiao et al. 2017)
    np.testing.assert_array_equal(np.bincount(y), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(yt), np.full(10, 1000))
    assert x.max() == 255 and x.min() == 0
