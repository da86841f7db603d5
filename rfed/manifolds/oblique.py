r"""The oblique manifold OB(n, k): n x k matrices with unit-norm columns.

A product of k unit spheres :math:`S^{n-1}` with the product (Frobenius) metric: Absil and
Gallivan, "Joint diagonalization on the oblique manifold for independent component analysis",
ICASSP 2006; Absil, Mahony and Sepulchre, *Optimization Algorithms on Matrix Manifolds*,
Princeton 2008, section 3.6. Every map is the sphere's (:class:`rfed.manifolds.Sphere`), column
by column; pymanopt's ``Oblique(m, n)`` has the same points and metric.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, _entry_scaled, as_generator, size_tuple
from rfed.manifolds.sphere import Sphere

__all__ = ["Oblique"]


def _cols(a: np.ndarray) -> np.ndarray:
    """``(..., n, k) -> (..., k, n)``: the columns as the last axis (the sphere's layout)."""
    return np.swapaxes(np.asarray(a, dtype=float), -1, -2)


class Oblique(Manifold):
    r"""Matrices :math:`X \in \mathbb{R}^{n \times k}` with :math:`\|X_{:, j}\| = 1` for every
    column, the product :math:`(S^{n-1})^k` with the Frobenius metric.

    Parameters
    ----------
    n : int
        Column length, ``n >= 2``; points and tangent vectors have shape ``(n, k)``.
    k : int
        Number of columns, ``k >= 1``; intrinsic dimension :math:`k(n - 1)`.

    Notes
    -----
    Column j of every map is the sphere's map on column j (:class:`~rfed.manifolds.Sphere`):
    :math:`\mathrm{Exp}_x u = \cos\|u_j\| x_j + \mathrm{sinc}\|u_j\| u_j`, the log from
    :math:`\mathrm{atan2}`, the parallel transport as the rotation in the plane of
    :math:`x_j` and the geodesic (a product of parallel transports is the product's parallel
    transport), :math:`d(x, y)^2 = \sum_j d_{S}(x_j, y_j)^2`. The log raises
    :class:`~rfed.manifolds.AntipodalError` when a column pair is antipodal (the cut locus).
    Curvature in [0, 1]; the tangent Gaussian projects an ambient Gaussian column by column.
    """

    def __init__(self, n: int, k: int):
        for name, v, low in (("n", n, 2), ("k", k, 1)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
                raise ValueError(f"Oblique: argument '{name}' must be an int >= {low}, got {v!r}")
        self.n, self.k = int(n), int(k)
        self.dim = self.k * (self.n - 1)
        self.point_shape = (self.n, self.k)
        self.name = f"Oblique({self.n}, {self.k})"
        self.sphere = Sphere(self.n - 1)

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        return np.sum(np.asarray(u, dtype=float) * np.asarray(v, dtype=float), axis=(-2, -1))

    def norm(self, x, u):
        return np.linalg.norm(np.asarray(u, dtype=float), axis=(-2, -1))

    def dist(self, x, y):
        d = self.sphere.dist(_cols(x), _cols(y))
        return np.sqrt(np.sum(d * d, axis=-1))

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return v - x * np.sum(x * v, axis=-2, keepdims=True)

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Column by column, the sphere's :math:`\mathrm{proj}_x(H) - (x_j\cdot g_j)\, u_j`.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        egrad, ehess : ndarray, shape ``(*batch, *point_shape)``
            Euclidean gradient and Hessian-vector product at ``x``.
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent direction of the Hessian-vector product.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            The Riemannian Hessian applied to ``u``, tangent at ``x``.
        """
        x = np.asarray(x, dtype=float)
        xg = np.sum(x * np.asarray(egrad, dtype=float), axis=-2, keepdims=True)
        return self.proj(x, ehess) - xg * np.asarray(u, dtype=float)

    # ------------------------------------------------------------------ maps
    def exp(self, x, u):
        return _cols(self.sphere.exp(_cols(x), _cols(u)))

    def retract(self, x, u):
        """Column-wise projective retraction :math:`(x_j + u_j) / \\|x_j + u_j\\|`.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            The retracted points.
        """
        y = np.asarray(x, dtype=float) + np.asarray(u, dtype=float)
        return y / np.linalg.norm(y, axis=-2, keepdims=True)

    def log(self, x, y):
        return _cols(self.sphere.log(_cols(x), _cols(y)))

    def transport(self, x, y, u):
        return _cols(self.sphere.transport(_cols(x), _cols(y), _cols(u)))

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """Independent uniform columns.

        Parameters
        ----------
        rng : numpy.random.Generator or int
            Generator or seed.
        size : int or sequence of int
            Batch shape (``()``: one point).

        Returns
        -------
        ndarray, shape ``(*size, *point_shape)``
        """
        z = as_generator(rng).standard_normal(size_tuple(size) + self.point_shape)
        return z / np.linalg.norm(z, axis=-2, keepdims=True)

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        shape = np.broadcast_shapes(x.shape[:-2], sigma.shape) + self.point_shape
        return self.proj(x, as_generator(rng).standard_normal(shape)) * sigma[..., None, None]

    # ------------------------------------------------------------------ coordinates
    def tangent_basis(self, x):
        """Column j's sphere basis (Householder, :meth:`Sphere.tangent_basis`) placed in column
        j, shape ``(*batch, k (n - 1), n, k)``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).

        Returns
        -------
        ndarray, shape ``(*batch, dim, *point_shape)``
            ``dim`` orthonormal tangent vectors per batch element.
        """
        x = np.asarray(x, dtype=float)
        per = self.sphere.tangent_basis(_cols(x))  # (*batch, k, n - 1, n)
        batch = x.shape[:-2]
        out = np.zeros(batch + (self.k, self.n - 1, self.n, self.k))
        j = np.arange(self.k)
        out[..., j, :, :, j] = np.moveaxis(per, -3, 0)
        return out.reshape(batch + (self.dim, self.n, self.k))

    def to_coords(self, x, u):
        c = self.sphere.to_coords(_cols(x), _cols(u))  # (*batch, k, n - 1)
        return c.reshape(c.shape[:-2] + (self.dim,))

    def from_coords(self, x, coords):
        c = np.asarray(coords, dtype=float)
        c = c.reshape(c.shape[:-1] + (self.k, self.n - 1))
        return _cols(self.sphere.from_coords(_cols(x), c))

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        x = np.asarray(x, dtype=float)
        return np.max(np.abs(np.linalg.norm(x, axis=-2) - 1.0), axis=-1)

    def tangent_violation(self, x, u):
        us, big = _entry_scaled(np.asarray(u, dtype=float), (-2, -1))  # norms cannot overflow
        scale = np.maximum(np.linalg.norm(us, axis=(-2, -1)), 1.0 / big)
        return np.linalg.norm(np.sum(np.asarray(x, dtype=float) * us, axis=-2), axis=-1) / scale

    point_violation_description = "violation is max_j | ||x_j|| - 1 | over the columns"
    tangent_violation_description = (
        "violation is ||(x_j . u_j)_j|| / max(1, ||u||_F) (each column tangent to its sphere)"
    )
