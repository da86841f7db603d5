"""Products of manifolds: tuple-valued (:class:`Product`) and flattened (:class:`FlatProduct`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rfed.manifolds.base import (
    DEFAULT_ATOL,
    Manifold,
    _normalize_weights,
    as_generator,
    check_mean_options,
)

__all__ = ["Product", "FlatProduct"]


class Product(Manifold):
    r"""The Riemannian product :math:`M_1 \times \dots \times M_k` (metric: the sum).

    Points and tangent vectors are tuples of arrays, one per block, each with that block's
    ``point_shape`` and the same (broadcastable) leading batch axes. Every method works
    blockwise; scalar-valued ones (``inner``, ``norm``, ``dist``, violations) combine the blocks
    (sum of squares for ``norm``/``dist``, maximum for violations). ``tangent_basis`` returns a
    tuple of blocks of shape ``(*batch, dim, *point_shape_i)`` (block-diagonal overall), and
    coordinates are the concatenation of the blocks' coordinates.

    Generic algorithms that need array arithmetic on tangent vectors should use
    :meth:`as_flat`, an array-valued view of the same manifold.

    Parameters
    ----------
    *manifolds : Manifold
        The factors (at least one).
    """

    def __init__(self, *manifolds: Manifold):
        if not manifolds:
            raise ValueError("Product: argument 'manifolds' must contain at least one manifold")
        for i, m in enumerate(manifolds):
            if not isinstance(m, Manifold):
                raise ValueError(
                    f"Product: argument 'manifolds[{i}]' must be an rfed Manifold, got "
                    f"{type(m).__name__}"
                )
        self.manifolds = tuple(manifolds)
        self.dim = sum(m.dim for m in manifolds)
        #: one ``point_shape`` per block (a tuple of tuples)
        self.point_shape = tuple(m.point_shape for m in manifolds)  # type: ignore[misc]
        self.name = f"Product({', '.join(m.name for m in manifolds)})"

    @property
    def has_parallel_transport(self) -> bool:  # type: ignore[override]
        """True only when every factor's transport is parallel transport (the product's
        transport is blockwise: one projection factor makes it a vector transport)."""
        return all(m.has_parallel_transport for m in self.manifolds)

    # ------------------------------------------------------------------ blockwise helpers
    def _map(self, method: str, *args, **kwargs) -> tuple:
        return tuple(
            getattr(m, method)(*(a[i] for a in args), **kwargs)
            for i, m in enumerate(self.manifolds)
        )

    def _split_coords(self, c):
        c = np.asarray(c, dtype=float)
        bounds = np.cumsum([0] + [m.dim for m in self.manifolds])
        return tuple(c[..., bounds[i] : bounds[i + 1]] for i in range(len(self.manifolds)))

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        return sum(self._map("inner", x, u, v))

    def norm(self, x, u):
        return np.sqrt(sum(np.square(n) for n in self._map("norm", x, u)))

    def dist(self, x, y):
        return np.sqrt(sum(np.square(d) for d in self._map("dist", x, y)))

    # ------------------------------------------------------------------ maps
    def exp(self, x, u):
        return self._map("exp", x, u)

    def log(self, x, y):
        return self._map("log", x, y)

    def retract(self, x, u):
        return self._map("retract", x, u)

    def transport(self, x, y, u):
        return self._map("transport", x, y, u)

    def proj(self, x, v):
        return self._map("proj", x, v)

    def egrad2rgrad(self, x, g):
        return self._map("egrad2rgrad", x, g)

    def ehess2rhess(self, x, egrad, ehess, u):
        return self._map("ehess2rhess", x, egrad, ehess, u)

    def zero_vector(self, x):
        return self._map("zero_vector", x)

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        rng = as_generator(rng)
        return tuple(m.random_point(rng, size) for m in self.manifolds)

    def tangent_gaussian(self, x, sigma, rng):
        rng = as_generator(rng)
        return tuple(
            m.tangent_gaussian(xi, sigma, rng) for m, xi in zip(self.manifolds, x, strict=True)
        )

    # ------------------------------------------------------------------ coordinates
    def tangent_basis(self, x):
        blocks = self._map("tangent_basis", x)
        batch = np.broadcast_shapes(
            *(
                np.shape(b)[: np.ndim(b) - len(m.point_shape) - 1]
                for b, m in zip(blocks, self.manifolds, strict=True)
            )
        )
        out = []
        offset = 0
        for b, m in zip(blocks, self.manifolds, strict=True):
            full = np.zeros(batch + (self.dim,) + m.point_shape)
            full[
                (Ellipsis, slice(offset, offset + m.dim)) + (slice(None),) * len(m.point_shape)
            ] = b
            out.append(full)
            offset += m.dim
        return tuple(out)

    def to_coords(self, x, u):
        parts = self._map("to_coords", x, u)
        batch = np.broadcast_shapes(*(p.shape[:-1] for p in parts))
        return np.concatenate([np.broadcast_to(p, batch + p.shape[-1:]) for p in parts], axis=-1)

    def from_coords(self, x, coords):
        return self._map("from_coords", x, self._split_coords(coords))

    # ------------------------------------------------------------------ membership
    def _as_tuple(self, x: Any, name: str) -> tuple:
        if not isinstance(x, (tuple, list)) or len(x) != len(self.manifolds):
            raise ValueError(
                f"{self}: argument '{name}' must be a tuple of {len(self.manifolds)} arrays "
                f"(one per factor), got {type(x).__name__}"
                + (f" of length {len(x)}" if isinstance(x, (tuple, list)) else "")
            )
        return tuple(x)

    def point_violation(self, x):
        x = self._as_tuple(x, "x")
        return np.maximum.reduce(np.broadcast_arrays(*self._map("point_violation", x)))

    def tangent_violation(self, x, u):
        x = self._as_tuple(x, "x")
        u = self._as_tuple(u, "u")
        return np.maximum.reduce(np.broadcast_arrays(*self._map("tangent_violation", x, u)))

    def belongs(self, x, atol: float = DEFAULT_ATOL):
        x = self._as_tuple(x, "x")
        return np.logical_and.reduce(np.broadcast_arrays(*self._map("belongs", x, atol=atol)))

    def is_tangent(self, x, u, atol: float = DEFAULT_ATOL):
        x = self._as_tuple(x, "x")
        u = self._as_tuple(u, "u")
        return np.logical_and.reduce(np.broadcast_arrays(*self._map("is_tangent", x, u, atol=atol)))

    def check_point(self, x, name: str = "x", atol: float = DEFAULT_ATOL):
        x = self._as_tuple(x, name)
        return tuple(
            m.check_point(xi, f"{name}[{i}]", atol)
            for i, (m, xi) in enumerate(zip(self.manifolds, x, strict=True))
        )

    def check_tangent(self, x, u, name: str = "u", atol: float = DEFAULT_ATOL):
        x = self._as_tuple(x, "x")
        u = self._as_tuple(u, name)
        return tuple(
            m.check_tangent(xi, ui, f"{name}[{i}]", atol)
            for i, (m, xi, ui) in enumerate(zip(self.manifolds, x, u, strict=True))
        )

    def _check_map_result(self, y, method, u, x):
        for i, m in enumerate(self.manifolds):
            try:
                m._check_map_result(y[i], method, u[i], x[i])
            except ValueError as exc:
                raise ValueError(str(exc).replace("argument 'u'", f"argument 'u[{i}]'")) from None

    # ------------------------------------------------------------------ mean
    def mean(self, points, weights=None, *, tol=1e-12, max_iter=100, init=None):
        """Blockwise Karcher mean (the product metric decouples the blocks).

        ``points`` is a tuple of blocks of shape ``(*batch, n_points, *point_shape_i)``.

        Parameters
        ----------
        points : tuple of arrays, shapes ``(*batch, n_points, *point_shape_i)``
            The points averaged, block by block.
        weights : array, shape ``(*batch, n_points)`` or ``(n_points,)``, optional
            Non-negative weights (uniform by default).
        tol, max_iter, init
            As in :meth:`Manifold.mean` (``init`` a tuple of blocks).

        Returns
        -------
        tuple of arrays, shapes ``(*batch, *point_shape_i)``
        """
        points = self._as_tuple(points, "points")
        k0 = len(self.manifolds[0].point_shape)
        if np.ndim(points[0]) < k0 + 1:
            raise ValueError(
                f"{self}: argument 'points[0]' has shape {np.shape(points[0])}; expected "
                f"(..., n_points, {', '.join(map(str, self.manifolds[0].point_shape))})"
            )
        n_points = np.shape(points[0])[np.ndim(points[0]) - k0 - 1]
        check_mean_options(n_points, tol, max_iter)
        w = _normalize_weights(weights, n_points)
        inits = (None,) * len(self.manifolds) if init is None else self._as_tuple(init, "init")
        return tuple(
            m.mean(p, w, tol=tol, max_iter=max_iter, init=i0)
            for m, p, i0 in zip(self.manifolds, points, inits, strict=True)
        )

    # ------------------------------------------------------------------ flat view
    def as_flat(self) -> FlatProduct:
        """The array-valued view of this product (see :class:`FlatProduct`).

        Returns
        -------
        FlatProduct
        """
        return FlatProduct(*self.manifolds)


class FlatProduct(Manifold):
    """A product manifold whose points are flat arrays: the concatenation of the raveled blocks.

    ``point_shape`` is ``(total,)`` with ``total`` the sum of the blocks' point sizes; tangent
    vectors are flat the same way, so generic algorithms can add and scale them like any other
    array-valued manifold. Every method splits its arguments into blocks, delegates to
    :class:`Product`, and concatenates the results.

    Parameters
    ----------
    *manifolds : Manifold
        The factors (at least one).
    """

    def __init__(self, *manifolds: Manifold):
        self.product = Product(*manifolds)
        self.manifolds = self.product.manifolds
        self.sizes = tuple(int(np.prod(m.point_shape)) for m in self.manifolds)
        self.bounds = tuple(int(b) for b in np.cumsum((0,) + self.sizes))
        self.dim = self.product.dim
        self.point_shape = (self.bounds[-1],)
        self.name = f"FlatProduct({', '.join(m.name for m in self.manifolds)})"

    @property
    def has_parallel_transport(self) -> bool:  # type: ignore[override]
        """The AND of the factors' flags (see :attr:`Product.has_parallel_transport`)."""
        return self.product.has_parallel_transport

    def split(self, a: np.ndarray) -> tuple:
        """Blocks of a flat array ``(*batch, total)``: a tuple of ``(*batch, *point_shape_i)``.

        Parameters
        ----------
        a : ndarray, shape ``(*batch, total)``
            Flat points or tangent vectors.

        Returns
        -------
        tuple of ndarray, shapes ``(*batch, *point_shape_i)``
        """
        a = np.asarray(a, dtype=float)
        return tuple(
            a[..., lo:hi].reshape(a.shape[:-1] + m.point_shape)
            for m, lo, hi in zip(self.manifolds, self.bounds[:-1], self.bounds[1:], strict=True)
        )

    def join(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """Inverse of :meth:`split`; the blocks' batch shapes are broadcast.

        Parameters
        ----------
        blocks : sequence of ndarray, shapes ``(*batch_i, *point_shape_i)``
            One block per factor.

        Returns
        -------
        ndarray, shape ``(*batch, total)``
        """
        flat = [  # each block's point size spelled out: -1 cannot be inferred for an empty batch
            np.reshape(b, np.shape(b)[: np.ndim(b) - len(m.point_shape)]
                       + (int(np.prod(m.point_shape)),))
            for b, m in zip(blocks, self.manifolds, strict=True)
        ]
        batch = np.broadcast_shapes(*(f.shape[:-1] for f in flat))
        return np.concatenate([np.broadcast_to(f, batch + f.shape[-1:]) for f in flat], axis=-1)

    def _call(self, method, *args, **kwargs):
        return getattr(self.product, method)(*(self.split(a) for a in args), **kwargs)

    def inner(self, x, u, v):
        return self._call("inner", x, u, v)

    def norm(self, x, u):
        return self._call("norm", x, u)

    def dist(self, x, y):
        return self._call("dist", x, y)

    def exp(self, x, u):
        return self.join(self._call("exp", x, u))

    def log(self, x, y):
        return self.join(self._call("log", x, y))

    def retract(self, x, u):
        return self.join(self._call("retract", x, u))

    def transport(self, x, y, u):
        return self.join(self._call("transport", x, y, u))

    def proj(self, x, v):
        return self.join(self._call("proj", x, v))

    def egrad2rgrad(self, x, g):
        return self.join(self._call("egrad2rgrad", x, g))

    def ehess2rhess(self, x, egrad, ehess, u):
        return self.join(self._call("ehess2rhess", x, egrad, ehess, u))

    def random_point(self, rng, size: int | Sequence[int] = ()):
        return self.join(self.product.random_point(rng, size))

    def tangent_gaussian(self, x, sigma, rng):
        return self.join(self.product.tangent_gaussian(self.split(x), sigma, rng))

    def tangent_basis(self, x):
        return self.join(self.product.tangent_basis(self.split(x)))

    def to_coords(self, x, u):
        return self._call("to_coords", x, u)

    def from_coords(self, x, coords):
        return self.join(self.product.from_coords(self.split(x), coords))

    def point_violation(self, x):
        return self._call("point_violation", x)

    def tangent_violation(self, x, u):
        return self._call("tangent_violation", x, u)

    def _check_map_result(self, y, method, u, x):
        self.product._check_map_result(self.split(y), method, self.split(u), self.split(x))

    @property
    def point_violation_description(self):
        """What :meth:`point_violation` measures: the maximum of the blocks' measures."""
        return "maximum over the blocks: " + "; ".join(
            f"block {i} ({m}): {m.point_violation_description}"
            for i, m in enumerate(self.manifolds)
        )

    @property
    def tangent_violation_description(self):
        """What :meth:`tangent_violation` measures: the maximum of the blocks' measures."""
        return "maximum over the blocks: " + "; ".join(
            f"block {i} ({m}): {m.tangent_violation_description}"
            for i, m in enumerate(self.manifolds)
        )

    def mean(self, points, weights=None, *, tol=1e-12, max_iter=100, init=None):
        init_b = None if init is None else self.split(init)
        return self.join(
            self.product.mean(self.split(points), weights, tol=tol, max_iter=max_iter, init=init_b)
        )
