"""The unit sphere S^d in R^(d+1) with the induced (round) metric."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, as_generator

__all__ = ["Sphere", "AntipodalError"]


class AntipodalError(ValueError):
    """Raised by ``Sphere.log`` for antipodal points, where the logarithm is not unique."""


def _sinc(t):
    """sin(t)/t, exact at 0 (numpy's sinc is sin(pi t)/(pi t))."""
    return np.sinc(t / np.pi)


class Sphere(Manifold):
    r"""The sphere :math:`S^d = \{x \in \mathbb{R}^{d+1} : \|x\| = 1\}`, curvature +1.

    Parameters
    ----------
    dim : int
        Intrinsic dimension ``d``; points have shape ``(d + 1,)`` (geomstats' convention, not
        pymanopt's ``Sphere(n)`` whose points live in R^n).

    Notes
    -----
    * :math:`\mathrm{Exp}_x u = \cos(\|u\|) x + \mathrm{sinc}(\|u\|) u`, renormalized.
    * :math:`\mathrm{Log}_x y = \frac{\theta}{\|w\|} w` with :math:`w = y - \langle x, y\rangle x`
      and :math:`\theta = \mathrm{atan2}(\|w\|, \langle x, y\rangle)`; ``w`` is formed as
      :math:`(y - x) - \langle x, y - x\rangle x` so that nearby points keep their digits.
      Antipodal points raise :class:`AntipodalError`.
    * Distance :math:`\theta = \mathrm{atan2}(\|w\|, \langle x,y\rangle)`, accurate at 0 and
      :math:`\pi` (a clipped arccos returns 0 for points 1e-9 apart).
    * Parallel transport along the minimizing geodesic:
      :math:`P_{x\to y} u = u - \frac{\langle y, u\rangle}{1 + \langle x, y\rangle}(x + y)`.
    * Tangent Gaussian: orthogonal projection of ambient noise (the metric is induced).
    """

    #: log raises when :math:`\pi - d(x, y)` is below this (the cut locus).
    antipodal_tol = 1e-10

    def __init__(self, dim: int):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"Sphere: argument 'dim' must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self.point_shape = (self.dim + 1,)
        self.name = f"Sphere({self.dim})"

    def inner(self, x, u, v):
        return np.sum(np.asarray(u) * np.asarray(v), axis=-1)

    def norm(self, x, u):
        return np.linalg.norm(u, axis=-1)

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return v - np.sum(x * v, axis=-1, keepdims=True) * x

    def _chord(self, x, y):
        """Return (w, |w|, <x, y>) with w = y - <x,y> x computed without cancellation."""
        x = np.asarray(x, dtype=float)
        diff = np.asarray(y, dtype=float) - x
        c = np.sum(x * diff, axis=-1, keepdims=True)
        w = diff - c * x
        return w, np.linalg.norm(w, axis=-1), 1.0 + c[..., 0]

    def dist(self, x, y):
        _, wn, cos = self._chord(x, y)
        return np.arctan2(wn, cos)

    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        t = np.linalg.norm(u, axis=-1, keepdims=True)
        y = np.cos(t) * x + _sinc(t) * u
        return y / np.linalg.norm(y, axis=-1, keepdims=True)

    def retract(self, x, u):
        """Projective retraction (x + u) / |x + u|."""
        y = np.asarray(x, dtype=float) + np.asarray(u, dtype=float)
        return y / np.linalg.norm(y, axis=-1, keepdims=True)

    def log(self, x, y):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        w, wn, cos = self._chord(x, y)
        theta = np.arctan2(wn, cos)
        if np.any(np.pi - theta < self.antipodal_tol):
            raise AntipodalError(
                f"{self}: log(x, y) is undefined for antipodal x and y (distance within "
                f"{self.antipodal_tol:g} of pi): every direction is a minimizing geodesic"
            )
        safe = wn > 0
        factor = np.where(safe, theta / np.where(safe, wn, 1.0), 1.0)
        out = factor[..., None] * w
        # log(x, x) must be exactly zero even when |x| differs from 1 in the last bit
        return np.where(np.all(x == y, axis=-1, keepdims=True), 0.0, out)

    def transport(self, x, y, u):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        u = np.asarray(u, dtype=float)
        coef = np.sum(y * u, axis=-1, keepdims=True) / (1.0 + np.sum(x * y, axis=-1, keepdims=True))
        return u - coef * (x + y)

    def random_point(self, rng, size: int | Sequence[int] = ()):
        size = (size,) if np.isscalar(size) else tuple(size)
        z = as_generator(rng).standard_normal(size + self.point_shape)
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)[..., None]
        return self.proj(x, sigma * as_generator(rng).standard_normal(x.shape))

    def tangent_basis(self, x):
        r"""Orthonormal basis of :math:`x^\perp` from a Householder reflection.

        Rows 1..d of :math:`H = I - 2 v v^T / \|v\|^2` with
        :math:`v = x + \mathrm{sign}(x_0) e_0` (H maps x to :math:`\mp e_0`, so its other rows
        span :math:`x^\perp`), shape ``(*batch, d, d + 1)``.
        """
        x = np.asarray(x, dtype=float)
        e0 = np.zeros(self.point_shape)
        e0[0] = 1.0
        # reflect x to -sign(x_0) e_0 so that v = x + sign(x_0) e_0 never cancels
        v = x + np.where(x[..., :1] > 0, 1.0, -1.0) * e0
        v = v / np.linalg.norm(v, axis=-1, keepdims=True)
        h = np.eye(self.dim + 1) - 2.0 * v[..., :, None] * v[..., None, :]
        return h[..., 1:, :]

    def point_violation(self, x):
        return np.abs(np.linalg.norm(x, axis=-1) - 1.0)

    def tangent_violation(self, x, u):
        u = np.asarray(u, dtype=float)
        scale = np.maximum(np.linalg.norm(u, axis=-1), 1.0)
        return np.abs(np.sum(np.asarray(x) * u, axis=-1)) / scale

    point_violation_description = "violation is | ||x|| - 1 |"
    tangent_violation_description = "violation is |<x, u>| / max(1, ||u||)"
