"""Image loaders (on files the tests write), covariance descriptors and shipped SPD sets."""

import gzip
import struct

import numpy as np
import pytest

from rfed.datasets import (
    COVARIANCE_FEATURES_GRAY,
    COVARIANCE_FEATURES_RGB,
    covariance_descriptors,
    extract_patches,
    load_connectomes,
    load_digits_descriptors,
    load_digits_images,
    load_emg_covariances,
    load_mnist_idx,
    load_npz_images,
    load_sample_image_descriptors,
    read_idx,
)


def _is_spd(m):
    sym = np.allclose(m, np.swapaxes(m, -1, -2), atol=1e-12)
    return sym and np.all(np.linalg.eigvalsh(m) > 0)


def _write_idx(path, array, code, compress):
    """IDX writer written from the format description: 0, 0, type, ndim, big-endian sizes, data."""
    dt = {0x08: ">u1", 0x0B: ">i2", 0x0D: ">f4"}[code]
    payload = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload += np.asarray(array, dtype=dt).tobytes()
    (gzip.open if compress else open)(path, "wb").write(payload)


def test_digits_unit_scaling():
    x, y = load_digits_images()
    assert x.shape == (1797, 64) and y.shape == (1797,)
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(np.unique(y)) == set(range(10))
    xs, _ = load_digits_images("symmetric", flatten=False)
    assert xs.shape == (1797, 8, 8)
    np.testing.assert_allclose(xs.reshape(1797, 64), 2 * x - 1)
    with pytest.raises(ValueError, match="normalize"):
        load_digits_images("zscore")


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_idx_round_trip(tmp_path, compress):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 7, dtype=np.uint8)
    suffix = ".gz" if compress else ""
    ip, lp = tmp_path / f"imgs-idx3-ubyte{suffix}", tmp_path / f"lbls-idx1-ubyte{suffix}"
    _write_idx(ip, images, 0x08, compress)
    _write_idx(lp, labels, 0x08, compress)
    x, y = load_mnist_idx(ip, lp)
    assert x.shape == (7, 784)
    np.testing.assert_array_equal(x, images.reshape(7, -1) / 255.0)
    np.testing.assert_array_equal(y, labels)
    raw, none = load_mnist_idx(ip, normalize="none", flatten=False)
    assert none is None
    np.testing.assert_array_equal(raw, images)


def test_read_idx_other_types_and_errors(tmp_path):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    _write_idx(tmp_path / "f.idx", a, 0x0D, False)
    np.testing.assert_array_equal(read_idx(tmp_path / "f.idx"), a)
    b = np.array([-3, 500, 7], dtype=np.int16)
    _write_idx(tmp_path / "s.idx", b, 0x0B, True)
    np.testing.assert_array_equal(read_idx(tmp_path / "s.idx"), b)

    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04rubbish")
    with pytest.raises(ValueError, match="path"):
        read_idx(tmp_path / "bad")
    # truncated data section
    _write_idx(tmp_path / "t.idx", np.zeros((3, 2, 2), np.uint8), 0x08, False)
    (tmp_path / "t.idx").write_bytes((tmp_path / "t.idx").read_bytes()[:-1])
    with pytest.raises(ValueError, match="path"):
        read_idx(tmp_path / "t.idx")
    with pytest.raises(ValueError, match="path"):
        read_idx(tmp_path / "missing")
    _write_idx(tmp_path / "i.idx", np.zeros((3, 2, 2), np.uint8), 0x08, False)
    _write_idx(tmp_path / "l.idx", np.zeros(4, np.uint8), 0x08, False)
    with pytest.raises(ValueError, match="labels_path"):
        load_mnist_idx(tmp_path / "i.idx", tmp_path / "l.idx")
    with pytest.raises(ValueError, match="images_path"):
        load_mnist_idx(tmp_path / "l.idx")


def test_npz_medmnist_and_keras_layouts(tmp_path):
    rng = np.random.default_rng(1)
    tr = rng.integers(0, 256, (6, 28, 28, 3), dtype=np.uint8)
    te = rng.integers(0, 256, (4, 28, 28, 3), dtype=np.uint8)
    np.savez(tmp_path / "pathmnist.npz", train_images=tr, train_labels=np.arange(6)[:, None] % 9,
             test_images=te, test_labels=np.arange(4)[:, None])
    x, y = load_npz_images(tmp_path / "pathmnist.npz", "test")
    np.testing.assert_array_equal(x, te / 255.0)
    np.testing.assert_array_equal(y, np.arange(4))
    xf, _ = load_npz_images(tmp_path / "pathmnist.npz", flatten=True)
    assert xf.shape == (6, 28 * 28 * 3)

    g = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=g, y_train=np.arange(5), x_test=g, y_test=np.arange(5))
    x, y = load_npz_images(tmp_path / "mnist.npz", "train", normalize="symmetric")
    np.testing.assert_allclose(x, 2.0 * (g / 255.0) - 1)
    with pytest.raises(ValueError, match="split"):
        load_npz_images(tmp_path / "mnist.npz", "val")


def test_extract_patches_matches_slicing():
    img = np.arange(2 * 10 * 12 * 3).reshape(2, 10, 12, 3)
    p = extract_patches(img, 4, 3)
    # rows 0,3,6 and cols 0,3,6 fit a 4x4 window: 3 x 3 patches per image
    assert p.shape == (18, 4, 4, 3)
    np.testing.assert_array_equal(p[0], img[0, :4, :4])
    np.testing.assert_array_equal(p[4], img[0, 3:7, 3:7])
    np.testing.assert_array_equal(p[9 + 8], img[1, 6:10, 6:10])
    assert extract_patches(img[..., 0], 5).shape == (8, 5, 5)
    with pytest.raises(ValueError, match="patch_size"):
        extract_patches(img, 11)


def test_covariance_descriptor_definition():
    rng = np.random.default_rng(2)
    img = rng.random((3, 6, 5, 3))
    d = covariance_descriptors(img, eps=1e-6)
    assert d.shape == (3, 9, 9) and len(COVARIANCE_FEATURES_RGB) == 9
    assert _is_spd(d)
    # feature covariance recomputed with numpy.cov for image 1, features in the documented order
    im = img[1]
    gray = im @ [0.299, 0.587, 0.114]
    gy, gx = np.gradient(gray)
    feats = [
        np.tile(np.linspace(0, 1, 5), (6, 1)),
        np.tile(np.linspace(0, 1, 6)[:, None], (1, 5)),
        im[..., 0], im[..., 1], im[..., 2],
        np.abs(gx), np.abs(gy),
        np.abs(np.gradient(gx, axis=1)), np.abs(np.gradient(gy, axis=0)),
    ]
    ref = np.cov(np.stack([f.ravel() for f in feats]), bias=True) + 1e-6 * np.eye(9)
    np.testing.assert_allclose(d[1], ref, atol=1e-12)
    # x coordinate of a w-point uniform grid on [0, 1]: variance (w + 1) / (12 (w - 1))
    np.testing.assert_allclose(d[:, 0, 0], 6 / 48 + 1e-6)
    # an intensity offset changes nothing (derivatives and variances are shift-invariant)
    np.testing.assert_allclose(covariance_descriptors(img + 0.25), d, atol=1e-12)


def test_covariance_descriptor_flat_region_is_spd_by_ridge():
    flat = np.full((1, 8, 8), 0.5)
    d = covariance_descriptors(flat, eps=1e-4)
    assert d.shape == (1, 7, 7) and len(COVARIANCE_FEATURES_GRAY) == 7
    assert _is_spd(d)
    assert np.linalg.eigvalsh(d).min() == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="images"):
        covariance_descriptors(np.zeros((2, 8, 8, 4)))
    with pytest.raises(ValueError, match="eps"):
        covariance_descriptors(flat, eps=0.0)


def test_sample_photo_descriptors():
    d, labels = load_sample_image_descriptors()
    assert d.shape == (660, 9, 9)
    assert np.array_equal(np.bincount(labels), [330, 330])
    assert _is_spd(d)
    # relative ridge: smallest eigenvalue at least 1e-3 * trace / 9 of the raw covariance
    lam = np.linalg.eigvalsh(d)
    assert np.all(lam[:, 0] >= 1e-3 * (np.trace(d, axis1=1, axis2=2) / 9) / (1 + 1e-3) * 0.999)
    # the two photos are distinguishable: mean colour (R, G, B variance) descriptors differ
    assert not np.allclose(d[labels == 0].mean(0), d[labels == 1].mean(0), atol=1e-3)


def test_digit_descriptors_spd():
    d, y = load_digits_descriptors()
    assert d.shape == (1797, 7, 7) and y.shape == (1797,)
    assert _is_spd(d)


def test_geomstats_connectomes():
    mats, labels = load_connectomes()
    assert mats.shape == (86, 28, 28)
    assert _is_spd(mats)
    np.testing.assert_allclose(np.diagonal(mats, axis1=1, axis2=2), 1.0)
    assert set(np.unique(labels)) == {0, 1}


def test_geomstats_emg_covariances():
    cov, labels, gestures = load_emg_covariances(window=200)
    assert cov.ndim == 3 and cov.shape[1:] == (8, 8)
    assert _is_spd(cov)
    assert gestures == ("ok", "paper", "rest", "rock", "scissors")
    assert set(np.unique(labels)) == set(range(5))
    # 731,682 time steps in windows of 200 that never straddle a run: at most 3658 windows
    assert 3000 < len(cov) <= 731_682 // 200
    with pytest.raises(ValueError, match="window"):
        load_emg_covariances(window=10**6)


def test_covariance_descriptors_chunked_equal_unchunked_bit_for_bit():
    rng = np.random.default_rng(3)
    colour = rng.random((37, 9, 8, 3))
    grey = rng.random((23, 7, 6))
    for img in (colour, grey):
        whole = covariance_descriptors(img, 1e-3, relative_ridge=True, chunk_size=len(img))
        for chunk in (1, 5, 16):
            np.testing.assert_array_equal(
                covariance_descriptors(img, 1e-3, relative_ridge=True, chunk_size=chunk), whole
            )
    with pytest.raises(ValueError, match="NaN"):
        covariance_descriptors(np.where(colour > 0.99, np.nan, colour))
    with pytest.raises(ValueError, match="chunk_size"):
        covariance_descriptors(grey, chunk_size=0)


def test_sample_photo_descriptors_chunked_match_whole_patch_stack():
    # the photo loader cuts patches chunk by chunk from a window view; on a crop of the photos
    # it must give the bits of describing the whole patch stack at once
    from sklearn.datasets import load_sample_images

    from rfed.datasets.images import _patch_descriptors

    photos = np.stack(load_sample_images().images)[:, :90, :110].astype(np.float64) / 255.0
    patches = extract_patches(photos, 28, 7)
    whole = covariance_descriptors(patches, 1e-3, relative_ridge=True, chunk_size=len(patches))
    chunked, labels = _patch_descriptors(photos, 28, 7, 1e-3, True, 13)
    np.testing.assert_array_equal(chunked, whole)
    assert np.array_equal(np.bincount(labels), [len(patches) // 2] * 2)


def test_read_idx_strict_header_checks(tmp_path):
    _write_idx(tmp_path / "a.gz", np.zeros((4, 3, 3), np.uint8), 0x08, True)
    with pytest.raises(ValueError, match="type code"):
        read_idx(tmp_path / "a.gz", expect_type=0x0D)
    with pytest.raises(ValueError, match="dimensions"):
        read_idx(tmp_path / "a.gz", expect_ndim=1)
    (tmp_path / "cut.gz").write_bytes((tmp_path / "a.gz").read_bytes()[:-10])
    with pytest.raises(ValueError, match="gzip"):
        read_idx(tmp_path / "cut.gz")
    (tmp_path / "head").write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x04")
    with pytest.raises(ValueError, match="header"):
        read_idx(tmp_path / "head")
    (tmp_path / "extra").write_bytes(
        bytes([0, 0, 8, 1]) + (2).to_bytes(4, "big") + b"\x01\x02\x03"
    )
    with pytest.raises(ValueError, match="declares shape"):
        read_idx(tmp_path / "extra")


def test_scale_pixels_refuses_out_of_range_values():
    from rfed.datasets import scale_pixels

    np.testing.assert_array_equal(scale_pixels(np.array([0, 51, 255]), 255.0), [0, 0.2, 1.0])
    with pytest.raises(ValueError, match="images"):
        scale_pixels(np.array([0.0, 300.0]), 255.0)
    with pytest.raises(ValueError, match="images"):
        scale_pixels(np.array([np.nan, 1.0]), 255.0)
