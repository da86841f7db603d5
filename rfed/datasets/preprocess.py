"""Preprocessing for the image experiments: flatten, unit-norm rows, binary tasks, a public split.

Privacy note. A differentially private run may rely on a bound on the data, e.g. ``||x||_2 <= 1``
for the sensitivity of a clipped-free mean or of a Lipschitz loss. Such a bound must be a *public*
property of the data domain, enforced by a transformation that does not look at the other
samples. :func:`normalize_l2` is one (each row is divided by its own norm), and so is pixel
scaling by the fixed maximum 255. Statistics of the data set (its mean, its largest norm, a
standardisation by the data's standard deviation) are not public: they would have to be released
privately and accounted.

Hyperparameters of private runs (clip, step size, batch, rounds) are chosen on public data: a
stand-in, or the public part of :func:`public_split`, never by looking at results on the private
part.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rfed._checks import numeric_array
from rfed.datasets._validation import check_float
from rfed.manifolds import as_generator

__all__ = ["PublicSplit", "binary_task", "flatten_images", "normalize_l2", "public_split"]


def flatten_images(images: np.ndarray) -> np.ndarray:
    """Flatten every image to one row: ``(n, H, W[, C]) -> (n, H * W * C)`` (a view if possible).

    Parameters
    ----------
    images : ndarray, shape ``(n, ...)`` with at least one axis after the first

    Returns
    -------
    ndarray, shape ``(n, prod(images.shape[1:]))``, same dtype
    """
    images = numeric_array(images, "images", dtype=None)
    if images.ndim < 2:
        raise ValueError(f"argument 'images' must have shape (n, ...) with ndim >= 2, got"
                         f" {images.shape}")
    return images.reshape(images.shape[0], -1)


def normalize_l2(x: np.ndarray) -> np.ndarray:
    """Scale every sample to unit Euclidean norm: ``x_j / ||x_j||_2`` (zero samples stay zero).

    The norm is over all axes after the first (a 28 x 28 image is one vector of 784 values).
    Each sample is scaled by its own norm only, so the bound ``||x_j||_2 <= 1`` (equality except
    for all-zero samples) is a PUBLIC property of the data domain after this step: privacy
    sensitivities (a Lipschitz constant, a mean's sensitivity ``2 / n``) may rely on it without
    any privacy cost. Pixel values in [0, 1] alone only give ``||x_j||_2 <= sqrt(784) = 28``.

    Parameters
    ----------
    x : ndarray of float, shape ``(n, ...)``, finite

    Returns
    -------
    ndarray, same shape and float dtype (float32 stays float32; integers become float64)
    """
    x = numeric_array(x, "x", dtype=None)
    if x.ndim < 2:
        raise ValueError(f"argument 'x' must have shape (n, ...) with ndim >= 2, got {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    flat = x.reshape(x.shape[0], -1)
    if not np.isfinite(flat).all():
        raise ValueError("argument 'x' contains NaN or inf")
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    return (flat / np.where(norms > 0, norms, 1.0)).reshape(x.shape)


def binary_task(
    x: np.ndarray, y: np.ndarray, positive: int, negative: int
) -> tuple[np.ndarray, np.ndarray]:
    """The samples of two classes, labelled +1 (``positive``) and -1 (``negative``).

    E.g. Fashion-MNIST "T-shirt/top" (0) against "Shirt" (6) for the SVMs of DP-DDA.

    Parameters
    ----------
    x : ndarray, shape ``(n, ...)``
    y : ndarray of int, shape ``(n,)``
    positive, negative : int
        Two different class labels, each present in ``y``.

    Returns
    -------
    x_ab : ndarray, shape ``(n_a + n_b, ...)``, rows in their original order
    y_pm1 : ndarray of float64, shape ``(n_a + n_b,)``, values in {-1.0, +1.0}
    """
    x = numeric_array(x, "x", dtype=None)
    y = numeric_array(y, "y", dtype=None)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"argument 'y' must be a 1-d integer array, got shape {y.shape} and"
                         f" dtype {y.dtype}")
    if x.shape[:1] != y.shape:
        raise ValueError(f"argument 'x' has {x.shape[:1]} rows, 'y' has {y.shape}")
    for name, c in (("positive", positive), ("negative", negative)):
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise TypeError(f"argument '{name}' must be an int class label, got {c!r}")
        if not np.any(y == c):
            raise ValueError(f"argument '{name}': class {c} does not occur in 'y'")
    if positive == negative:
        raise ValueError(f"arguments 'positive' and 'negative' must differ, both are {positive}")
    keep = (y == positive) | (y == negative)
    return x[keep], np.where(y[keep] == positive, 1.0, -1.0)


class PublicSplit(NamedTuple):
    """A declared split into a public part (for choosing hyperparameters) and a private part."""

    x_public: np.ndarray
    y_public: np.ndarray
    x_private: np.ndarray
    y_private: np.ndarray
    public_index: np.ndarray
    private_index: np.ndarray


def public_split(
    x: np.ndarray, y: np.ndarray, fraction: float, rng: np.random.Generator | int
) -> PublicSplit:
    """Split a data set at random into a declared public part and the private rest.

    The public part (``round(fraction * n)`` samples, at least one) is treated as public data:
    hyperparameters of a private run (clip, step, batch size, rounds) are chosen on it, and it is
    never part of the private training set. The private part is what the private run trains on
    and what its privacy guarantee covers. The split is a seeded random permutation: the same
    ``rng`` gives the same split, and it does not depend on the data values.

    Parameters
    ----------
    x : ndarray, shape ``(n, ...)``
    y : ndarray, shape ``(n,)``
    fraction : float in (0, 1)
        Share of the samples made public.
    rng : numpy.random.Generator or int

    Returns
    -------
    PublicSplit
        ``(x_public, y_public, x_private, y_private, public_index, private_index)``; the index
        arrays (sorted int64, disjoint, covering ``range(n)``) record which rows went where.
    """
    x = numeric_array(x, "x", dtype=None)
    y = numeric_array(y, "y", dtype=None)
    if x.ndim < 1 or x.shape[:1] != y.shape[:1] or y.ndim != 1:
        raise ValueError(f"arguments 'x' {x.shape} and 'y' {y.shape} must have the same number"
                         " of rows and 'y' must be 1-d")
    fraction = check_float(fraction, "fraction", low=0.0, high=1.0, low_open=True, high_open=True)
    n = len(y)
    n_public = int(round(fraction * n))
    if n_public < 1 or n_public > n - 1:
        raise ValueError(
            f"argument 'fraction' ({fraction}) gives {n_public} public samples out of {n}; both"
            " parts must be non-empty"
        )
    perm = as_generator(rng).permutation(n)
    pub = np.sort(perm[:n_public]).astype(np.int64)
    priv = np.sort(perm[n_public:]).astype(np.int64)
    return PublicSplit(x[pub], y[pub], x[priv], y[priv], pub, priv)
