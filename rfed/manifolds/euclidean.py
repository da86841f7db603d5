"""Euclidean space R^shape with the standard inner product (flat: exp is addition)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, as_generator, size_tuple

__all__ = ["Euclidean"]


class Euclidean(Manifold):
    r"""Euclidean space :math:`\mathbb{R}^{n_1 \times \dots \times n_k}`.

    :math:`\langle u, v\rangle = \sum u v`, :math:`\mathrm{Exp}_x u = x + u`,
    :math:`\mathrm{Log}_x y = y - x`, transport is the identity.

    Parameters
    ----------
    *shape : int
        Shape of one point, e.g. ``Euclidean(5)`` or ``Euclidean(3, 4)``.
    """

    #: transport is a copy of ``u``
    exact_self_transport = True

    def __init__(self, *shape: int):
        if not shape:
            raise ValueError("Euclidean: argument 'shape' must name at least one dimension")
        for s in shape:
            if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 1:
                raise ValueError(
                    f"Euclidean: argument 'shape' must be positive ints, got {shape!r}"
                )
        self.point_shape = tuple(int(s) for s in shape)
        self.dim = int(np.prod(self.point_shape))
        self.name = f"Euclidean({', '.join(map(str, self.point_shape))})"

    def inner(self, x, u, v):
        return self._sum_point_axes(np.asarray(u, dtype=float) * np.asarray(v, dtype=float))

    def norm(self, x, u):
        return np.sqrt(self._sum_point_axes(np.square(np.asarray(u, dtype=float))))

    def dist(self, x, y):
        return self.norm(x, np.asarray(y, dtype=float) - np.asarray(x, dtype=float))

    def exp(self, x, u):
        return np.asarray(x, dtype=float) + np.asarray(u, dtype=float)

    def log(self, x, y):
        return np.asarray(y, dtype=float) - np.asarray(x, dtype=float)

    def transport(self, x, y, u):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(u))
        return np.broadcast_to(np.asarray(u, dtype=float), shape).copy()

    def proj(self, x, v):
        # a new array, as on every manifold (editing the result never edits the input)
        return np.array(v, dtype=float, copy=True)

    def ehess2rhess(self, x, egrad, ehess, u):
        return np.array(ehess, dtype=float, copy=True)

    def random_point(self, rng, size: int | Sequence[int] = ()):
        size = size_tuple(size)
        return as_generator(rng).standard_normal(size + self.point_shape)

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        # one independent draw per element of the broadcast batch (x's and sigma's)
        batch = np.broadcast_shapes(x.shape[: self._batch_ndim(x)], sigma.shape)
        sigma = sigma.reshape(sigma.shape + (1,) * len(self.point_shape))
        return sigma * as_generator(rng).standard_normal(batch + self.point_shape)

    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim).reshape((self.dim,) + self.point_shape)
        return np.broadcast_to(eye, x.shape[: self._batch_ndim(x)] + eye.shape)

    def to_coords(self, x, u):
        u = np.array(u, dtype=float, copy=True)
        return u.reshape(u.shape[: self._batch_ndim(u)] + (self.dim,))

    def from_coords(self, x, coords):
        c = np.array(coords, dtype=float, copy=True)
        return c.reshape(c.shape[:-1] + self.point_shape)

    def point_violation(self, x):
        return np.zeros(np.shape(x)[: self._batch_ndim(x)])

    def tangent_violation(self, x, u):
        return np.zeros(np.shape(u)[: self._batch_ndim(u)])

    point_violation_description = "every finite array is a point of Euclidean space"

    def mean(self, points, weights=None, *, tol=1e-12, max_iter=100, init=None):
        """Weighted arithmetic mean (the closed-form Frechet mean).

        Parameters
        ----------
        points : array, shape ``(*batch, n_points, *point_shape)``
            The points averaged.
        weights : array, shape ``(*batch, n_points)`` or ``(n_points,)``, optional
            Non-negative weights (uniform by default).
        tol, max_iter, init
            As in :meth:`Manifold.mean` (validated; the mean is exact).

        Returns
        -------
        array, shape ``(*batch, *point_shape)``
        """
        from rfed.manifolds.base import _normalize_weights, check_mean_options

        points = np.asarray(points, dtype=float)
        k = len(self.point_shape)
        if points.ndim < k + 1 or points.shape[points.ndim - k :] != self.point_shape:
            raise ValueError(
                f"{self}: argument 'points' has shape {points.shape}; expected "
                f"(..., n_points, {', '.join(map(str, self.point_shape))})"
            )
        check_mean_options(points.shape[-1 - k], tol, max_iter)
        w = _normalize_weights(weights, points.shape[-1 - k])
        return np.sum(w.reshape(w.shape + (1,) * k) * points, axis=-1 - k)
