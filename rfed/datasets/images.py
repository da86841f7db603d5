"""Image data: scikit-learn's shipped digits, MNIST files, and SPD covariance descriptors.

Offline sources (nothing is downloaded):

* :func:`load_digits_images`: scikit-learn's 8x8 digits (1,797 images, shipped in its wheel), the
  stand-in for MNIST. Pixels are scaled to [0, 1] without centring, as :ref:`prirfed-pixels`
  resolves the PriRFed MNIST preprocessing (the PCA cost uses second moments, no centring).
* :func:`load_mnist_idx` reads the original MNIST IDX files (``train-images-idx3-ubyte[.gz]``,
  ``train-labels-idx1-ubyte[.gz]``) for users who have them (http://yann.lecun.com/exdb/mnist/ or
  any mirror); :func:`load_npz_images` reads MedMNIST npz files (``pathmnist.npz`` from
  https://zenodo.org/records/10519652, keys ``train_images``, ``train_labels``, ...) and Keras'
  ``mnist.npz`` (keys ``x_train``, ``y_train``, ...).
* :func:`covariance_descriptors`: region covariance descriptors (Tuzel, Porikli and Meer 2006),
  the SPD features of PriRFed's PathMNIST experiment (Sec. 6.2 of the paper;
  :ref:`prirfed-descriptors`), computed here from real images: :func:`load_sample_image_descriptors`
  (scikit-learn's two shipped photos, cut into 28x28 patches like PathMNIST's images) and
  :func:`load_digits_descriptors`.
* :func:`load_connectomes` and :func:`load_emg_covariances`: the real SPD data sets shipped in the
  geomstats wheel.

References
----------
* Oncel Tuzel, Fatih Porikli and Peter Meer. Region Covariance: A Fast Descriptor for Detection
  and Classification. European Conference on Computer Vision (ECCV), 2006.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import zlib
from pathlib import Path

import numpy as np

from rfed._checks import numeric_array
from rfed.datasets._validation import check_choice, check_file, check_float, check_int

__all__ = [
    "COVARIANCE_FEATURES_GRAY",
    "COVARIANCE_FEATURES_RGB",
    "covariance_descriptors",
    "extract_patches",
    "load_connectomes",
    "load_digits_descriptors",
    "load_digits_images",
    "load_emg_covariances",
    "load_mnist_idx",
    "load_npz_images",
    "load_sample_image_descriptors",
    "read_idx",
    "scale_pixels",
]

#: Per-pixel features of a colour descriptor, in order (SPD(9); docs/papers/prirfed.md,
#: prirfed-descriptors).
COVARIANCE_FEATURES_RGB = ("x", "y", "R", "G", "B", "|Ix|", "|Iy|", "|Ixx|", "|Iyy|")
#: Per-pixel features of a grey-level descriptor, in order (SPD(7)).
COVARIANCE_FEATURES_GRAY = ("x", "y", "I", "|Ix|", "|Iy|", "|Ixx|", "|Iyy|")

_NORMALIZATIONS = ("unit", "symmetric", "none")


def scale_pixels(images: np.ndarray, max_value: float, normalize: str = "unit") -> np.ndarray:
    """Scale raw pixel values to float64.

    Parameters
    ----------
    images : ndarray
        Raw pixel values in ``[0, max_value]``.
    max_value : float
        Largest possible raw value (255 for MNIST, 16 for scikit-learn's digits).
    normalize : {"unit", "symmetric", "none"}
        ``"unit"``: ``[0, 1]``, no centring (:ref:`prirfed-pixels`, PriRFed's PCA);
        ``"symmetric"``: ``[-1, 1]`` (``Normalize(0.5, 0.5)``, the reading of DPDL's preprocessing
        in :ref:`dpdl-preprocessing`);
        ``"none"``: raw values as float64.

    Returns
    -------
    ndarray of float64, shape of ``images``
        The scaled pixels.

    Raises
    ------
    ValueError
        A value outside ``[0, max_value]`` or NaN.
    """
    check_choice(normalize, "normalize", _NORMALIZATIONS)
    check_float(max_value, "max_value", low=0.0, low_open=True)
    x = numeric_array(images, "images", dtype=np.float64)
    if x.size and not (x.min() >= 0.0 and x.max() <= max_value):  # also False for NaN
        raise ValueError(
            f"argument 'images' must hold raw pixel values in [0, {max_value}], got values in"
            f" [{x.min()}, {x.max()}]"
        )
    if normalize == "unit":
        return x / max_value
    if normalize == "symmetric":
        return 2.0 * x / max_value - 1.0
    return x


def load_digits_images(
    normalize: str = "unit", *, flatten: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes), shipped offline.

    Parameters
    ----------
    normalize : {"unit", "symmetric", "none"}
        Pixel scaling of :func:`scale_pixels`.
    flatten : bool
        Return ``(1797, 64)`` rows instead of ``(1797, 8, 8)`` images.

    Returns
    -------
    X : ndarray, shape ``(1797, 64)`` (``flatten``) or ``(1797, 8, 8)``
        Pixels scaled by :func:`scale_pixels` (raw range 0..16).
    y : ndarray of int64, shape ``(1797,)``
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = scale_pixels(bunch.images, 16.0, normalize)
    if flatten:
        x = x.reshape(len(x), -1)
    return x, bunch.target.astype(np.int64)


# IDX type codes (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"); data are big-endian.
_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(
    path: str | os.PathLike,
    *,
    expect_type: int | None = None,
    expect_ndim: int | None = None,
) -> np.ndarray:
    """Read one IDX file (raw or gzip-compressed, detected from its first bytes).

    The header is two zero bytes, a type code, the number of dimensions ``k``, then ``k``
    big-endian uint32 sizes; the data follow, big-endian. MNIST's magic numbers are
    ``0x00000803`` (uint8, 3 dimensions: images) and ``0x00000801`` (uint8, 1 dimension: labels).

    Parameters
    ----------
    path : path
    expect_type, expect_ndim : int or None
        If given, the type code and the number of dimensions the header must declare.

    Returns
    -------
    ndarray with the file's shape, in native byte order.

    Raises
    ------
    ValueError
        Bad magic number, unexpected type or dimensions, truncated header or data, extra bytes,
        or a corrupt gzip stream; the message names the file.
    """
    p = check_file(path, "path")
    with open(p, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(
                f"argument 'path': {str(p)!r} is a truncated or corrupt gzip file ({exc})"
            ) from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES or raw[3] == 0:
        raise ValueError(
            f"argument 'path': {str(p)!r} is not an IDX file (bad magic number"
            f" 0x{raw[:4].hex() or 'empty'})"
        )
    if expect_type is not None and raw[2] != expect_type:
        raise ValueError(
            f"argument 'path': {str(p)!r} has IDX type code 0x{raw[2]:02x}; expected"
            f" 0x{expect_type:02x}"
        )
    ndim = raw[3]
    if expect_ndim is not None and ndim != expect_ndim:
        raise ValueError(
            f"argument 'path': {str(p)!r} declares {ndim} dimensions; expected {expect_ndim}"
        )
    dtype = _IDX_DTYPES[raw[2]]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"argument 'path': {str(p)!r} is truncated inside its IDX header")
    shape = tuple(int(s) for s in np.frombuffer(raw[4:header], dtype=">u4"))
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) - header != count * dtype.itemsize:
        raise ValueError(
            f"argument 'path': {str(p)!r} declares shape {shape} ({count * dtype.itemsize} data"
            f" bytes) but holds {len(raw) - header} data bytes (truncated or corrupt)"
        )
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=header)
    return data.reshape(shape).astype(dtype.newbyteorder("="))


def load_mnist_idx(
    images_path: str | os.PathLike,
    labels_path: str | os.PathLike | None = None,
    normalize: str = "unit",
    *,
    flatten: bool = True,
    n_classes: int | None = 10,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Load MNIST (or Fashion-MNIST, EMNIST) from its IDX files, raw or ``.gz``.

    Parameters
    ----------
    images_path : path
        e.g. ``train-images-idx3-ubyte.gz`` (an ``(n, rows, cols)`` uint8 IDX file).
    labels_path : path or None
        e.g. ``train-labels-idx1-ubyte.gz`` (an ``(n,)`` IDX file).
    normalize : {"unit", "symmetric", "none"}
        See :func:`scale_pixels` (raw range 0..255). ``"unit"`` is PriRFed's MNIST preprocessing.
    flatten : bool
        Return ``(n, rows * cols)`` (784 for MNIST: the sphere S^783 of PriRFed, Sec. 6.1).
    n_classes : int or None
        The labels must lie in ``0 .. n_classes - 1`` (10 for MNIST and Fashion-MNIST; give
        EMNIST's number of classes for EMNIST; None: not checked).

    Returns
    -------
    X : ndarray, shape ``(n, rows * cols)`` or ``(n, rows, cols)``
    y : ndarray of int64, shape ``(n,)``, or None without ``labels_path``

    Raises
    ------
    ValueError
        A label outside ``0 .. n_classes - 1`` (naming the file and the label).
    """
    images = read_idx(images_path)
    if images.ndim != 3:
        raise ValueError(
            f"argument 'images_path' must hold a 3-d IDX array (n, rows, cols), got shape"
            f" {images.shape}"
        )
    x = scale_pixels(images, 255.0, normalize)
    if flatten:
        x = x.reshape(len(x), -1)
    if labels_path is None:
        return x, None
    labels = read_idx(labels_path)
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(
            f"argument 'labels_path' must hold a 1-d IDX array of {len(images)} labels, got shape"
            f" {labels.shape}"
        )
    _check_labels(labels, n_classes, f"argument 'labels_path': {str(labels_path)!r}")
    return x, labels.astype(np.int64)


def _check_labels(labels: np.ndarray, n_classes: int | None, where: str) -> None:
    """Integer labels in ``0 .. n_classes - 1`` (``>= 0`` when ``n_classes`` is None)."""
    if n_classes is not None:
        check_int(n_classes, "n_classes", minimum=2)
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{where} holds labels of dtype {labels.dtype}; expected integers")
    if labels.size and labels.min() < 0:
        raise ValueError(f"{where} holds label {int(labels.min())}; expected labels >= 0")
    if labels.size and n_classes is not None and labels.max() >= n_classes:
        raise ValueError(f"{where} holds label {int(labels.max())}; expected labels in "
                         f"0..{n_classes - 1} (n_classes = {n_classes})")


def load_npz_images(
    path: str | os.PathLike,
    split: str = "train",
    normalize: str = "unit",
    *,
    flatten: bool = False,
    n_classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Load one split of an image npz file (MedMNIST or Keras MNIST layout).

    MedMNIST files (e.g. ``pathmnist.npz``: ``train_images`` of shape (89996, 28, 28, 3) uint8,
    ``train_labels`` of shape (89996, 1)) use keys ``{split}_images`` / ``{split}_labels`` with
    ``split`` in {"train", "val", "test"}; Keras' ``mnist.npz`` uses ``x_{split}`` / ``y_{split}``.
    The labels must be integers ``>= 0`` (and below ``n_classes`` when it is given).

    Parameters
    ----------
    path : path
        The npz file.
    split : str
        ``"train"``, ``"val"`` or ``"test"`` (MedMNIST); ``"train"`` or ``"test"`` (Keras).
    normalize : {"unit", "symmetric", "none"}
        Pixel scaling of :func:`scale_pixels`.
    flatten : bool
        Return one row per image.
    n_classes : int, optional
        When given, every label must lie in ``0..n_classes - 1``.

    Returns
    -------
    X : ndarray, shape ``(n, H, W[, C])`` or ``(n, H * W * C)`` with ``flatten``
        Scaled by :func:`scale_pixels` from the range 0..255.
    y : ndarray of int64, shape ``(n,)``
    """
    p = check_file(path, "path")
    with np.load(p, allow_pickle=False) as f:
        keys = set(f.files)
        for ik, lk in ((f"{split}_images", f"{split}_labels"), (f"x_{split}", f"y_{split}")):
            if ik in keys and lk in keys:
                images, labels = f[ik], f[lk]
                break
        else:
            raise ValueError(
                f"argument 'split': {split!r} not found in {str(p)!r}; it holds keys {sorted(keys)}"
            )
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(
            f"argument 'path': labels of shape {labels.shape} do not match {len(images)} images"
        )
    _check_labels(labels, n_classes, f"argument 'path': {str(p)!r}")
    x = scale_pixels(images, 255.0, normalize)
    if flatten:
        x = x.reshape(len(x), -1)
    return x, labels.astype(np.int64)


def extract_patches(images: np.ndarray, patch_size: int, stride: int | None = None) -> np.ndarray:
    """Cut images into square patches on a regular grid (partial patches at the border dropped).

    Parameters
    ----------
    images : ndarray, shape ``(n, H, W)`` or ``(n, H, W, C)``
    patch_size : int
    stride : int or None
        Default ``patch_size`` (non-overlapping).

    Returns
    -------
    ndarray, shape ``(n * n_rows * n_cols, patch_size, patch_size[, C])``, image-major order.
    """
    images = numeric_array(images, "images", dtype=None)
    if images.ndim not in (3, 4):
        raise ValueError(f"argument 'images' must have shape (n, H, W[, C]), got {images.shape}")
    patch_size = check_int(patch_size, "patch_size")
    stride = patch_size if stride is None else check_int(stride, "stride")
    if patch_size > min(images.shape[1:3]):
        raise ValueError(
            f"argument 'patch_size' ({patch_size}) exceeds the image size {images.shape[1:3]}"
        )
    # numpy's stub types 'axis' as one int; a tuple of axes is documented and supported
    win = np.lib.stride_tricks.sliding_window_view(  # type: ignore[call-overload]
        images, (patch_size, patch_size), axis=(1, 2))
    win = win[:, ::stride, ::stride]
    # sliding_window_view puts the window axes last: (n, r, c, [C,] p, p) -> (n, r, c, p, p, [C])
    if images.ndim == 4:
        win = np.moveaxis(win, 3, -1)
    return win.reshape(-1, *win.shape[3:])


def _descriptor_block(img: np.ndarray, eps: float, relative_ridge: bool) -> np.ndarray:
    """Covariance descriptors of a block of float64 images (:func:`covariance_descriptors`)."""
    if img.ndim == 4:
        gray = img @ np.array([0.299, 0.587, 0.114])
        channels = [img[..., 0], img[..., 1], img[..., 2]]
    else:
        gray = img
        channels = [img]
    n, h, w = gray.shape
    gy, gx = np.gradient(gray, axis=(1, 2))
    gyy = np.gradient(gy, axis=1)
    gxx = np.gradient(gx, axis=2)
    yy, xx = np.meshgrid(np.linspace(0.0, 1.0, h), np.linspace(0.0, 1.0, w), indexing="ij")
    feats = [np.broadcast_to(xx, gray.shape), np.broadcast_to(yy, gray.shape), *channels]
    feats += [np.abs(gx), np.abs(gy), np.abs(gxx), np.abs(gyy)]
    f = np.stack(feats, axis=-1).reshape(n, h * w, -1)
    f = f - f.mean(axis=1, keepdims=True)
    cov = np.swapaxes(f, 1, 2) @ f / (h * w)
    cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
    k = cov.shape[-1]
    ridge = eps * np.trace(cov, axis1=1, axis2=2) / k if relative_ridge else np.full(n, eps)
    return cov + ridge[:, None, None] * np.eye(k)


def _check_descriptor_images(shape: tuple[int, ...]) -> None:
    if not (len(shape) == 3 or (len(shape) == 4 and shape[-1] == 3)):
        raise ValueError(
            f"argument 'images' must have shape (n, H, W) or (n, H, W, 3), got {shape}"
        )
    if shape[1] < 3 or shape[2] < 3:
        raise ValueError(
            f"argument 'images': second derivatives need H, W >= 3, got {tuple(shape[1:3])}"
        )


def covariance_descriptors(
    images: np.ndarray,
    eps: float = 1e-6,
    *,
    relative_ridge: bool = False,
    chunk_size: int = 512,
) -> np.ndarray:
    """Region covariance descriptors of whole images, one SPD matrix per image.

    For every pixel the feature vector is (Tuzel, Porikli and Meer 2006; :ref:`prirfed-descriptors`)

    * colour images ``(n, H, W, 3)``: ``(x, y, R, G, B, |Ix|, |Iy|, |Ixx|, |Iyy|)``, SPD(9);
    * grey images ``(n, H, W)``: ``(x, y, I, |Ix|, |Iy|, |Ixx|, |Iyy|)``, SPD(7);

    with ``x, y`` the column and row coordinates scaled to [0, 1], intensities as given (scale them
    to [0, 1] first), ``I`` the grey level (ITU-R 601 luma ``0.299 R + 0.587 G + 0.114 B`` for
    colour) and its first and second derivatives by central differences (``numpy.gradient``,
    one-sided at the border), in intensity units per pixel. The descriptor is the (biased, 1/P)
    covariance of the ``P = H W`` feature vectors plus a ridge ``eps * I`` (``eps * trace / k * I``
    with ``relative_ridge``), so that it is strictly positive definite even for flat regions.

    Parameters
    ----------
    images : ndarray, shape ``(n, H, W)`` or ``(n, H, W, 3)``, finite
    eps : float > 0
        Ridge.
    relative_ridge : bool
    chunk_size : int
        Images processed at once: the per-pixel features of a block take ``chunk_size * H * W * k``
        float64 values (512 colour 28x28 patches: 29 MB), so memory stays bounded for any ``n``.
        The result does not depend on it (every image is computed independently).

    Returns
    -------
    ndarray, shape ``(n, k, k)`` with ``k = 9`` (colour) or ``7`` (grey).
    """
    eps = check_float(eps, "eps", low=0.0, low_open=True)
    chunk_size = check_int(chunk_size, "chunk_size")
    images = numeric_array(images, "images", dtype=None)
    _check_descriptor_images(images.shape)
    k = 9 if images.ndim == 4 else 7
    out = np.empty((images.shape[0], k, k))
    for start in range(0, images.shape[0], chunk_size):
        block = np.asarray(images[start : start + chunk_size], dtype=np.float64)
        if not np.isfinite(block).all():
            raise ValueError("argument 'images' contains NaN or inf")
        out[start : start + chunk_size] = _descriptor_block(block, eps, relative_ridge)
    return out


def load_sample_image_descriptors(
    patch_size: int = 28,
    stride: int | None = None,
    eps: float = 1e-3,
    *,
    relative_ridge: bool = True,
    chunk_size: int = 512,
) -> tuple[np.ndarray, np.ndarray]:
    """SPD(9) covariance descriptors of patches of scikit-learn's two shipped photos.

    ``china.jpg`` and ``flower.jpg`` (427 x 640 RGB each) are scaled to [0, 1] and cut into
    ``patch_size`` patches (default 28x28 like PathMNIST's images, non-overlapping: 15 x 22 = 330
    patches per photo; ``stride=7`` gives 10,208); each patch gives one descriptor of
    :func:`covariance_descriptors`. Patches are cut and described ``chunk_size`` at a time, so the
    peak memory does not grow with the number of patches (the result is the same bits as
    ``covariance_descriptors(extract_patches(photos, patch_size, stride), ...)``).

    The default ridge is relative (``1e-3 * trace / 9``): JPEG stores colour at reduced resolution,
    so inside a smooth patch R, G and B move together and about half of the raw descriptors are
    singular to 1e-6; the relative ridge keeps their condition numbers moderate.

    Parameters
    ----------
    patch_size : int
        Side of the square patches, in pixels.
    stride : int, optional
        Step between patches (default ``patch_size``: non-overlapping).
    eps : float
        Ridge added to each descriptor (times ``trace / 9`` with ``relative_ridge``).
    relative_ridge : bool
        Scale the ridge by each descriptor's mean eigenvalue.
    chunk_size : int
        Patches described at a time (bounds the peak memory).

    Returns
    -------
    descriptors : ndarray, shape ``(n_patches, 9, 9)``
    labels : ndarray of int64, shape ``(n_patches,)``
        0 for china.jpg, 1 for flower.jpg.
    """
    from sklearn.datasets import load_sample_images

    photos = np.stack(load_sample_images().images).astype(np.float64) / 255.0
    return _patch_descriptors(photos, patch_size, stride, eps, relative_ridge, chunk_size)


def _patch_descriptors(
    photos: np.ndarray,
    patch_size: int,
    stride: int | None,
    eps: float,
    relative_ridge: bool,
    chunk_size: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Descriptors of the grid patches of ``photos`` ``(n, H, W, 3)``, ``chunk_size`` at a time."""
    patch_size = check_int(patch_size, "patch_size")
    stride = patch_size if stride is None else check_int(stride, "stride")
    eps = check_float(eps, "eps", low=0.0, low_open=True)
    chunk_size = check_int(chunk_size, "chunk_size")
    if patch_size > min(photos.shape[1:3]):
        raise ValueError(
            f"argument 'patch_size' ({patch_size}) exceeds the image size {photos.shape[1:3]}"
        )
    # numpy's stub types 'axis' as one int; a tuple of axes is documented and supported
    win = np.lib.stride_tricks.sliding_window_view(  # type: ignore[call-overload]
        photos, (patch_size, patch_size), axis=(1, 2))
    win = win[:, ::stride, ::stride]  # (n, rows, cols, 3, p, p), a view
    grid = win.shape[:3]
    n_patches = int(np.prod(grid))
    k = 9
    out = np.empty((n_patches, k, k))
    for start in range(0, n_patches, chunk_size):
        i, r, c = np.unravel_index(np.arange(start, min(start + chunk_size, n_patches)), grid)
        # contiguous (chunk, p, p, 3) copy, laid out exactly as extract_patches lays it out
        block = np.ascontiguousarray(np.moveaxis(win[i, r, c], 1, -1))
        _check_descriptor_images(block.shape)
        out[start : start + len(block)] = _descriptor_block(block, eps, relative_ridge)
    labels = np.repeat(np.arange(len(photos), dtype=np.int64), n_patches // len(photos))
    return out, labels


def load_digits_descriptors(eps: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """SPD(7) covariance descriptors of scikit-learn's 1,797 8x8 digits (pixels in [0, 1]).

    Parameters
    ----------
    eps : float
        Ridge ``eps * I`` added to each descriptor.

    Returns
    -------
    descriptors : ndarray, shape ``(1797, 7, 7)``
    labels : ndarray of int64, shape ``(1797,)``
    """
    x, y = load_digits_images("unit", flatten=False)
    return covariance_descriptors(x, eps), y


def _geomstats_data_dir() -> Path:
    """Folder of the data shipped in the geomstats wheel, found without importing geomstats."""
    spec = importlib.util.find_spec("geomstats")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("geomstats is not installed; its shipped data sets need it")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def load_connectomes() -> tuple[np.ndarray, np.ndarray]:
    """Brain connectomes shipped with geomstats: 86 functional-connectivity correlation matrices.

    From the Kaggle MLSP 2014 schizophrenia challenge, read through
    ``geomstats.datasets.utils.load_connectomes``. Each matrix is a 28 x 28 correlation matrix
    (unit diagonal), positive definite.

    Returns
    -------
    matrices : ndarray, shape ``(86, 28, 28)``
    labels : ndarray of int64, shape ``(86,)``
        1 for patients, 0 for controls.
    """
    from geomstats.datasets.utils import load_connectomes as _gs_load

    mats, _, target = _gs_load()
    mats = np.asarray(mats, dtype=np.float64)
    return 0.5 * (mats + np.swapaxes(mats, 1, 2)), np.asarray(target, dtype=np.int64)


def load_emg_covariances(
    window: int = 100, eps: float = 1e-6
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """SPD(8) covariances of the 8-electrode EMG recordings shipped with geomstats.

    The file ``geomstats/datasets/data/emg/emg.csv`` (731,682 time steps, hand gestures "rest",
    "rock", "paper", "scissors", "ok", from 4 experiments) is cut into consecutive windows of
    ``window`` time steps inside each run of constant (experiment, gesture); each window gives the
    biased covariance of the 8 channels plus ``eps * I``.

    Parameters
    ----------
    window : int
        Time steps per window.
    eps : float
        Ridge ``eps * I`` added to each covariance.

    Returns
    -------
    covariances : ndarray, shape ``(n_windows, 8, 8)``
    labels : ndarray of int64, shape ``(n_windows,)``
        Index into ``gestures``.
    gestures : tuple of str
    """
    import pandas as pd

    window = check_int(window, "window", minimum=2)
    eps = check_float(eps, "eps", low=0.0, low_open=True)
    df = pd.read_csv(_geomstats_data_dir() / "emg" / "emg.csv")
    signal = df[[f"c{i}" for i in range(8)]].to_numpy(dtype=np.float64)
    gesture_names, gesture = np.unique(df["label"].to_numpy(dtype=str), return_inverse=True)
    _, run_key = np.unique(df["exp"].to_numpy(dtype=str), return_inverse=True)
    key = run_key * len(gesture_names) + gesture
    # a new run starts where (experiment, gesture) changes; windows never straddle two runs
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    n_win = (ends - starts) // window
    first = np.repeat(starts, n_win) + window * (
        np.arange(n_win.sum()) - np.repeat(np.cumsum(n_win) - n_win, n_win)
    )
    if len(first) == 0:
        raise ValueError(
            f"argument 'window' ({window}) is longer than every run of one gesture in one"
            f" experiment (longest: {int((ends - starts).max())} time steps)"
        )
    seg = signal[first[:, None] + np.arange(window)]
    seg = seg - seg.mean(axis=1, keepdims=True)
    cov = np.swapaxes(seg, 1, 2) @ seg / window
    cov = 0.5 * (cov + np.swapaxes(cov, 1, 2)) + eps * np.eye(8)
    return cov, gesture[first].astype(np.int64), tuple(str(g) for g in gesture_names)
