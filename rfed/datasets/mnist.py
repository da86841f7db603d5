"""Fashion-MNIST and MNIST from their IDX files, found on disk (never downloaded).

Both sets come as four IDX files (MNIST's format, http://yann.lecun.com/exdb/mnist/):
``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte`` (60,000 images), ``t10k-images-idx3-ubyte``
and ``t10k-labels-idx1-ubyte`` (10,000 images), each raw or gzip-compressed (``.gz``); images are
28 x 28 uint8, labels uint8 in 0..9.

Where the files are looked for, in order (the first folder holding every file of the requested
split wins):

1. the folder ``path`` given by the caller;
2. ``$RFED_DATA`` and ``$RFED_DATA/fashion-mnist`` (``$RFED_DATA/mnist`` for MNIST);
3. ``/usr/share/datasets/fashion-mnist/``, where Debian's package ``dataset-fashion-mnist``
   (``apt-get install dataset-fashion-mnist``) installs Fashion-MNIST (MIT licence), and
   ``/usr/share/datasets/mnist/`` for MNIST.

When nothing is found, :class:`DatasetNotFoundError` (a :class:`FileNotFoundError`) says in one
line how to get the files. Headers are checked against the format (magic number 0x00000803 for
images, 0x00000801 for labels, 28 x 28 images, as many labels as images, the declared size equal
to the data present), so a truncated or corrupt file is a clear error, not a short array.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rfed.datasets._validation import check_choice
from rfed.datasets.images import read_idx

__all__ = [
    "DatasetNotFoundError",
    "fashion_mnist_available",
    "find_mnist_files",
    "load_fashion_mnist",
    "load_mnist",
    "mnist_available",
]

#: File stems of the four IDX files of one split, shared by MNIST and Fashion-MNIST.
_STEMS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_SPLITS = ("train", "test", "both")
_IMAGE_SHAPE = (28, 28)
_N_CLASSES = 10

# name used in messages, sub-folder of $RFED_DATA, system folder, how to install it
_SOURCES = {
    "fashion-mnist": (
        "Fashion-MNIST",
        "fashion-mnist",
        Path("/usr/share/datasets/fashion-mnist"),
        "run `apt-get install dataset-fashion-mnist` (installs it under"
        " /usr/share/datasets/fashion-mnist/)",
    ),
    "mnist": (
        "MNIST",
        "mnist",
        Path("/usr/share/datasets/mnist"),
        "copy MNIST's IDX files (http://yann.lecun.com/exdb/mnist/ or a mirror) to"
        " /usr/share/datasets/mnist/",
    ),
}


class DatasetNotFoundError(FileNotFoundError):
    """A data set's files are in none of the folders searched; the message says how to get them."""


def _split_names(split: str) -> tuple[str, ...]:
    return ("train", "test") if split == "both" else (split,)


def _search_dirs(which: str, path: str | os.PathLike | None) -> list[Path]:
    _, subdir, system_dir, _ = _SOURCES[which]
    dirs: list[Path] = []
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"argument 'path' must be a folder (str or os.PathLike) or None, got"
                f" {type(path).__name__}"
            )
        dirs.append(Path(path))
    env = os.environ.get("RFED_DATA")
    if env:
        dirs += [Path(env), Path(env) / subdir]
    dirs.append(system_dir)
    return dirs


def _find_file(folder: Path, stem: str) -> Path | None:
    # both the usual names and the dotted variant some mirrors use (train-images.idx3-ubyte)
    dotted = stem.replace("-idx", ".idx")
    for name in (f"{stem}.gz", stem, f"{dotted}.gz", dotted):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def find_mnist_files(
    which: str = "fashion-mnist", path: str | os.PathLike | None = None, *, split: str = "both"
) -> dict[str, tuple[Path, Path]]:
    """Locate the IDX files of Fashion-MNIST or MNIST (see the module docstring for the order).

    Parameters
    ----------
    which : {"fashion-mnist", "mnist"}
    path : path or None
        A folder to look in first.
    split : {"train", "test", "both"}

    Returns
    -------
    dict
        ``{split_name: (images_path, labels_path)}`` for each requested split, all from the first
        folder that holds every requested file.

    Raises
    ------
    DatasetNotFoundError
        No folder holds the files; the one-line message lists the folders and how to get them.
    """
    check_choice(which, "which", tuple(_SOURCES))
    check_choice(split, "split", _SPLITS)
    dirs = _search_dirs(which, path)
    for folder in dirs:
        found: dict[str, tuple[Path, Path]] = {}
        for name in _split_names(split):
            images, labels = (_find_file(folder, stem) for stem in _STEMS[name])
            if images is None or labels is None:
                break
            found[name] = (images, labels)
        else:
            return found
    title, subdir, _, how = _SOURCES[which]
    needed = ", ".join(f"{stem}[.gz]" for name in _split_names(split) for stem in _STEMS[name])
    raise DatasetNotFoundError(
        f"{title} not found (looked in {', '.join(str(d) for d in dirs)}): {how}, or set"
        f" RFED_DATA to a folder holding {needed} (directly or in its {subdir}/ sub-folder), or"
        " pass path=FOLDER"
    )


def _available(which: str, path: str | os.PathLike | None, split: str) -> bool:
    try:
        find_mnist_files(which, path, split=split)
    except DatasetNotFoundError:
        return False
    return True


def fashion_mnist_available(path: str | os.PathLike | None = None, *, split: str = "both") -> bool:
    """Whether the Fashion-MNIST files of ``split`` are found (the files are not read).

    Parameters
    ----------
    path : path or None
        A folder to look in first (then ``$RFED_DATA`` and ``/usr/share/datasets/fashion-mnist``).
    split : {"train", "test", "both"}

    Returns
    -------
    bool
        ``True`` when :func:`load_fashion_mnist` with the same arguments would find its files.
    """
    return _available("fashion-mnist", path, split)


def mnist_available(path: str | os.PathLike | None = None, *, split: str = "both") -> bool:
    """Whether the MNIST files of ``split`` are found (the files are not read).

    Parameters and returns as :func:`fashion_mnist_available` (folders ``$RFED_DATA``,
    ``$RFED_DATA/mnist``, ``/usr/share/datasets/mnist``).

    Parameters
    ----------
    path : path or None
        A folder to look in first.
    split : {"train", "test", "both"}
        The files looked for.

    Returns
    -------
    bool
        ``True`` when :func:`load_mnist` with the same arguments would find its files.
    """
    return _available("mnist", path, split)


def _read_checked(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one split's images and labels, checking the header against the MNIST format."""
    images = read_idx(images_path, expect_type=0x08, expect_ndim=3)
    if len(images) == 0:
        raise ValueError(f"file {str(images_path)!r} holds no images")
    if images.shape[1:] != _IMAGE_SHAPE:
        raise ValueError(
            f"file {str(images_path)!r} holds images of size {images.shape[1:]}; expected"
            f" {_IMAGE_SHAPE}"
        )
    labels = read_idx(labels_path, expect_type=0x08, expect_ndim=1)
    if len(labels) != len(images):
        raise ValueError(
            f"file {str(labels_path)!r} holds {len(labels)} labels but {str(images_path)!r} holds"
            f" {len(images)} images"
        )
    if len(labels) and labels.max() >= _N_CLASSES:
        raise ValueError(
            f"file {str(labels_path)!r} holds label {int(labels.max())}; expected"
            f" 0..{_N_CLASSES - 1}"
        )
    return images, labels.astype(np.int64)


def _load(
    which: str, path, split: str, raw: bool, flatten: bool
) -> tuple[np.ndarray, np.ndarray] | tuple[tuple[np.ndarray, np.ndarray], ...]:
    if not isinstance(raw, bool):
        raise TypeError(f"argument 'raw' must be a bool, got {type(raw).__name__}")
    if not isinstance(flatten, bool):
        raise TypeError(f"argument 'flatten' must be a bool, got {type(flatten).__name__}")
    files = find_mnist_files(which, path, split=split)
    out = []
    for name in _split_names(split):
        images, labels = _read_checked(*files[name])
        x = images if raw else images.astype(np.float32) / np.float32(255.0)
        if flatten:
            x = x.reshape(len(x), -1)
        out.append((x, labels))
    return out[0] if split != "both" else tuple(out)


def load_fashion_mnist(
    path: str | os.PathLike | None = None,
    *,
    split: str = "train",
    raw: bool = False,
    flatten: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Fashion-MNIST (Xiao, Rasul and Vollgraf 2017; 10 clothing classes, MIT licence).

    Parameters
    ----------
    path : path or None
        A folder to look in first; then ``$RFED_DATA``, ``$RFED_DATA/fashion-mnist`` and
        ``/usr/share/datasets/fashion-mnist/`` (``apt-get install dataset-fashion-mnist``).
    split : {"train", "test", "both"}
        60,000 training or 10,000 test images, or both.
    raw : bool
        Return the uint8 pixels (0..255) instead of float32 scaled to [0, 1].
    flatten : bool
        Return ``(n, 784)`` instead of ``(n, 28, 28)``.

    Returns
    -------
    (X, y) for ``split`` "train" or "test", ``((X_train, y_train), (X_test, y_test))`` for "both":
    X : ndarray, shape ``(n, 28, 28)`` or ``(n, 784)``, float32 in [0, 1] (uint8 with ``raw``)
    y : ndarray of int64, shape ``(n,)``, values in 0..9

    Raises
    ------
    DatasetNotFoundError
        The files are not found (one line saying how to get them).
    ValueError
        A file is truncated, corrupt, or does not have the MNIST layout.
    """
    return _load("fashion-mnist", path, check_choice(split, "split", _SPLITS), raw, flatten)


def load_mnist(
    path: str | os.PathLike | None = None,
    *,
    split: str = "train",
    raw: bool = False,
    flatten: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[tuple[np.ndarray, np.ndarray], ...]:
    """MNIST handwritten digits, read exactly like :func:`load_fashion_mnist`.

    Looked for in ``path``, ``$RFED_DATA``, ``$RFED_DATA/mnist`` and ``/usr/share/datasets/mnist/``
    (no Debian package ships MNIST; copy the four IDX files there or into ``$RFED_DATA``).
    Parameters and returns as :func:`load_fashion_mnist`.

    Parameters
    ----------
    path : path or None
        A folder to look in first.
    split : {"train", "test", "both"}
        60,000 training or 10,000 test images, or both.
    raw : bool
        Return the uint8 pixels (0..255) instead of float32 scaled to [0, 1].
    flatten : bool
        Return ``(n, 784)`` instead of ``(n, 28, 28)``.

    Returns
    -------
    tuple
        ``(X, y)`` for "train" or "test", ``((X_train, y_train), (X_test, y_test))`` for "both",
        with ``X`` of shape ``(n, 28, 28)`` or ``(n, 784)`` and ``y`` int64 of shape ``(n,)``.
    """
    return _load("mnist", path, check_choice(split, "split", _SPLITS), raw, flatten)
