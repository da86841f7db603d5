"""The unit sphere S^d in R^(d+1) with the induced (round) metric."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed._einsum import einsum
from rfed.manifolds.base import Manifold, _entry_scaled, as_generator, size_tuple

__all__ = ["Sphere", "AntipodalError"]


class AntipodalError(ValueError):
    """Raised by ``Sphere.log`` for antipodal points, where the logarithm is not unique."""


def _dot(a, b):
    """Batched dot product over the last axis (einsum: no temporary, faster than sum(a * b);
    numpy's C einsum, without the wrapper's per-call cost, :mod:`rfed._einsum`)."""
    return einsum("...i,...i->...", a, b)


#: below this cosine magnitude the angle is taken as arccos of the dot product (condition
#: 1/sin(theta) <= 2/sqrt(3)); at larger ones, from the chord to x or -x (no cancellation)
_ARCCOS_SAFE = 0.5

#: Sphere.exp renormalizes a result whose squared norm is further than this from 1 (a few
#: roundings of the closed form stay below it; a drifted base point or a non-tangent u do not)
_EXP_NORM_TOL = 8 * np.finfo(float).eps

#: Sphere.exp and tangent_gaussian work on a batch in blocks of at least this many rows: a
#: block of a few hundred kB and its scratch stay in cache across the block's passes (fewer,
#: cheaper passes over memory; the arithmetic of every row is the unblocked one)
_EXP_BLOCK_ROWS = 4096
#: ... and of at most about this many elements (long rows: fewer rows per block)
_BLOCK_ELEMENTS = 4096 * 16


def _block_rows(row_length: int) -> int:
    """Rows per cache-sized block of rows of ``row_length`` elements."""
    return max(16, min(_EXP_BLOCK_ROWS, _BLOCK_ELEMENTS // max(row_length, 1)))


def _exp_closed_form(x, u, out=None, scratch=None):
    """``cos(t) x + (sin(t) / t) u`` with ``t = |u|``, row by row.

    Parameters
    ----------
    x, u : ndarray, shape ``(*batch, d + 1)``
        Base points and tangent vectors (broadcast against each other when ``out`` is None).
    out, scratch : ndarray, shape ``(*batch, d + 1)``, optional
        Where to write the result, and a buffer for the term in ``x`` (overwritten); both
        or neither (then new arrays).

    Returns
    -------
    ndarray, shape ``(*batch, d + 1)``
        ``out``, or a new array.
    """
    t = np.sqrt(_dot(u, u))
    # sin(t) / t, 1 at t = 0 (np.sinc(t / pi) rounds t / pi and pi (t / pi) on the way); the
    # mask only where some t is 0 (a NaN t gives a NaN row either way: cos(t) multiplies x)
    if t.all():
        sinc_t = np.sin(t) / t
    else:
        sinc_t = np.divide(np.sin(t), t, out=np.ones_like(t), where=t > 0)
    if out is None:
        out = np.multiply(u, sinc_t[..., None])
        out += np.cos(t)[..., None] * x
        return out
    np.multiply(u, sinc_t[..., None], out=out)
    np.multiply(x, np.cos(t)[..., None], out=scratch)
    out += scratch
    return out


class Sphere(Manifold):
    r"""The sphere :math:`S^d = \{x \in \mathbb{R}^{d+1} : \|x\| = 1\}`, curvature +1.

    Parameters
    ----------
    dim : int
        Intrinsic dimension ``d``; points have shape ``(d + 1,)`` (geomstats' convention, not
        pymanopt's ``Sphere(n)`` whose points live in R^n).

    Notes
    -----
    * :math:`\mathrm{Exp}_x u = \cos(\|u\|) x + \mathrm{sinc}(\|u\|) u`, renormalized where its
      squared norm is more than ``8 eps`` from 1 (so iterated steps do not drift off the sphere).
      A batch of more than 4,096 points is computed in row blocks that stay in cache, every
      row bit for bit as alone.
    * :math:`\mathrm{Log}_x y = \frac{\theta}{\|w\|} w` with :math:`w = y - \langle x, y\rangle x`
      and :math:`\theta = \mathrm{atan2}(\|w\|, \langle x, y\rangle)`; ``w`` is formed as
      :math:`(y - x) - \langle x, y - x\rangle x` so that nearby points keep their digits.
      Antipodal points raise :class:`AntipodalError`.
    * Distance from the chord to the nearer of :math:`\pm x` (see :meth:`dist`), accurate at 0
      and :math:`\pi` (a clipped arccos returns 0 for points 1e-9 apart).
    * Parallel transport along the minimizing geodesic, as a rotation in the plane of x and the
      geodesic's direction (see :meth:`transport`), isometric up to rounding near the antipode.
    * Tangent Gaussian: orthogonal projection of ambient noise (the metric is induced).
    """

    #: log raises when :math:`\pi - d(x, y)` is below this (the cut locus).
    antipodal_tol = 1e-10
    #: ``transport(x, x, u)``: ``y - x`` is exactly zero, hence the direction ``e``, the
    #: coefficient ``<e, u>`` and the correction subtracted from ``u`` are zeros
    exact_self_transport = True

    def __init__(self, dim: int):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"Sphere: argument 'dim' must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self.point_shape = (self.dim + 1,)
        self.name = f"Sphere({self.dim})"

    def inner(self, x, u, v):
        return _dot(np.asarray(u, dtype=float), np.asarray(v, dtype=float))

    def norm(self, x, u):
        u = np.asarray(u, dtype=float)
        return np.sqrt(_dot(u, u))

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return v - _dot(x, v)[..., None] * x

    def dist(self, x, y):
        r"""Geodesic distance, accurate at 0 and :math:`\pi` (a clipped arccos returns 0 for
        points 1e-9 apart). Where :math:`|\langle x, y\rangle| < 1/2` (the bulk of random
        pairs in high dimension), :math:`\arccos\langle x, y\rangle` is well conditioned
        (relative condition at most :math:`2/\sqrt3`) and needs one dot product; elsewhere the
        chord: :math:`2\arcsin(\|y - x\|/2)`, or :math:`\pi - 2\arcsin(\|y + x\|/2)` where
        :math:`\langle x, y\rangle < -1/2` (there the chord to :math:`-x` is the short one).
        arcsin is then only evaluated where it is well conditioned, so distances near 0 and
        near :math:`\pi` keep their relative digits.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, *point_shape)``
            Points (broadcast against each other).

        Returns
        -------
        ndarray, shape ``batch``
            The geodesic distances.
        """
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        c = _dot(x, y)
        out = np.array(np.arccos(np.clip(c, -1.0, 1.0)))
        near = c >= _ARCCOS_SAFE
        far = c <= -_ARCCOS_SAFE
        if near.any():
            diff = y[near] - x[near]
            out[near] = 2.0 * np.arcsin(np.minimum(0.5 * np.sqrt(_dot(diff, diff)), 1.0))
        if far.any():
            chord = y[far] + x[far]
            out[far] = np.pi - 2.0 * np.arcsin(np.minimum(0.5 * np.sqrt(_dot(chord, chord)), 1.0))
        return out[()]

    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        per_block = _block_rows(x.shape[-1]) if x.ndim else 0
        if (x.shape == u.shape and x.ndim > 1 and x.size > per_block * x.shape[-1]
                and x.flags.c_contiguous and u.flags.c_contiguous):
            # a large batch: row blocks that stay in cache, the same arithmetic row by row
            y = np.empty_like(u)
            norm_sq = np.empty(u.shape[:-1])
            rows_x = x.reshape(-1, x.shape[-1])
            rows_u = u.reshape(-1, u.shape[-1])
            rows_y = y.reshape(-1, y.shape[-1])
            rows_norm_sq = norm_sq.reshape(-1)
            scratch = np.empty((per_block, rows_y.shape[-1]))
            for start in range(0, len(rows_y), per_block):
                stop = min(start + per_block, len(rows_y))
                block = rows_y[start:stop]
                _exp_closed_form(rows_x[start:stop], rows_u[start:stop], block,
                                 scratch[: stop - start])
                rows_norm_sq[start:stop] = _dot(block, block)
        else:
            y = _exp_closed_form(x, u)
            norm_sq = _dot(y, y)
        # renormalized where the norm strayed past _EXP_NORM_TOL: on the sphere the closed
        # form does not amplify the norm error of x (cos^2 t <= 1), so iterated steps stay
        # within the tolerance of the sphere without a scaling pass over every result
        strayed = np.abs(norm_sq - 1.0) > _EXP_NORM_TOL
        if strayed.any():
            y *= np.where(strayed, 1.0 / np.sqrt(norm_sq), 1.0)[..., None]
        return y

    def retract(self, x, u):
        """Projective retraction ``(x + u) / |x + u|``.

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
        return y / np.sqrt(_dot(y, y))[..., None]

    def log(self, x, y):
        r"""Where :math:`|\langle x, y\rangle| < 1/2`: :math:`\frac{\theta}{\sin\theta}(y -
        \cos\theta\, x)` with :math:`\cos\theta = \langle x, y\rangle`,
        :math:`\sin\theta = \sqrt{1 - \cos^2\theta}` (no cancellation there: one dot
        product). Elsewhere the tangential part is formed as :math:`(y - x) - \langle x, y -
        x\rangle x` (twice, for the antipodal side) so that nearby points keep their digits,
        and :math:`\theta = \mathrm{atan2}(\|w\|, \langle x, y\rangle)`.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        y : ndarray, shape ``(*batch, *point_shape)``
            Target point(s).

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``x``.
        """
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        c = _dot(x, y)
        careful = np.abs(c) >= _ARCCOS_SAFE
        if careful.all():
            # near pairs only (the points an average's log takes, near its base point): the
            # careful form alone, on every row (the same floats as on the rows taken out; its
            # operations broadcast x and y as broadcast_arrays would)
            return self._log_careful(x, y)
        x, y = np.broadcast_arrays(x, y)
        w = np.multiply(x, c[..., None])
        np.subtract(y, w, out=w)
        with np.errstate(invalid="ignore", divide="ignore"):
            # rows at |c| >= 1/2 (where sin may vanish) are recomputed below
            sin = np.sqrt(1.0 - np.square(c))
            w *= (np.arccos(np.clip(c, -1.0, 1.0)) / sin)[..., None]
        if careful.any():
            w[careful] = self._log_careful(x[careful], y[careful])
        return w

    def _log_careful(self, x, y):
        """The log where the dot product is not small (near pairs, near antipodes)."""
        w = y - x
        # w = (y - x) - <x, y - x> x, the tangential part of y, without cancellation
        c = _dot(x, w)
        w -= c[..., None] * x
        w -= _dot(x, w)[..., None] * x  # second pass, as in transport (antipodal accuracy)
        wn = np.sqrt(_dot(w, w))
        theta = np.arctan2(wn, 1.0 + c)
        if (np.pi - theta < self.antipodal_tol).any():
            raise AntipodalError(
                f"{self}: log(x, y) is undefined for antipodal x and y (distance within "
                f"{self.antipodal_tol:g} of pi): every direction is a minimizing geodesic"
            )
        # y == x gives w == 0 exactly, hence an exactly zero log
        w *= (theta / np.where(wn > 0, wn, 1.0))[..., None]
        return w

    def transport(self, x, y, u):
        r"""Parallel transport along the minimizing geodesic, in the rotation form
        :math:`P u = u - \langle e, u\rangle\big((1 - \cos\theta) e + \sin\theta\, x\big)`
        with the unit direction :math:`e = w/\|w\|` of :meth:`log`, :math:`\sin\theta = \|w\|`
        and :math:`1 - \cos\theta = -\langle x, y - x\rangle` (no cancellation). Exactly an
        isometry up to rounding even next to the antipode, where the usual
        :math:`u - \frac{\langle y, u\rangle}{1 + \langle x, y\rangle}(x + y)` divides by a
        vanishing :math:`1 + \langle x, y\rangle`. Antipodal points (within
        :attr:`antipodal_tol` of pi) raise :class:`AntipodalError`, as :meth:`log` does.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, *point_shape)``
            Start and end points.
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``y``.
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        u = np.asarray(u, dtype=float)
        w = y - x
        c = _dot(x, w)  # <x, y> - 1 = cos(theta) - 1
        w = w - c[..., None] * x
        # second Gram-Schmidt pass: near the antipode |w| = sin(theta) is tiny and the first
        # pass leaves a component along x of relative size eps / sin(theta)
        w -= _dot(x, w)[..., None] * x
        wn = np.sqrt(_dot(w, w))
        # the angle atan2(|w|, 1 + c) exceeds pi / 2 only where 1 + c < 0, i.e. c < -1: the
        # check of the cut locus runs only when some pair is that far apart (same outcome)
        if (c < -1.0).any() and (np.pi - np.arctan2(wn, 1.0 + c) < self.antipodal_tol).any():
            raise AntipodalError(
                f"{self}: transport(x, y, u) is undefined for antipodal x and y (distance within "
                f"{self.antipodal_tol:g} of pi): every direction is a minimizing geodesic"
            )
        e = w / np.where(wn > 0, wn, 1.0)[..., None]
        eu = _dot(e, u)[..., None]
        return u - eu * ((-c)[..., None] * e + wn[..., None] * x)

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian :math:`\mathrm{proj}_x(H) - (x \cdot g)\, u` (the Weingarten term
        of the unit sphere).

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
        xg = np.sum(x * np.asarray(egrad, dtype=float), axis=-1, keepdims=True)
        return self.proj(x, ehess) - xg * np.asarray(u, dtype=float)

    def random_point(self, rng, size: int | Sequence[int] = ()):
        size = size_tuple(size)
        z = as_generator(rng).standard_normal(size + self.point_shape)
        return z / np.sqrt(_dot(z, z))[..., None]

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        shape = x.shape if (sigma.shape == x.shape[:-1]
                            and x.shape[-1:] == self.point_shape) else (
            np.broadcast_shapes(x.shape[:-1], sigma.shape) + self.point_shape)
        z = as_generator(rng).standard_normal(shape)
        per_block = _block_rows(shape[-1])
        if (z.shape == x.shape and z.ndim == 2 and len(z) > per_block
                and x.flags.c_contiguous and z.flags.c_contiguous):
            # a large batch: row blocks that stay in cache (no batch-sized temporary), the same
            # arithmetic row by row
            scale = np.broadcast_to(sigma, z.shape[:1])
            scratch = np.empty((per_block, z.shape[1]))
            for start in range(0, len(z), per_block):
                stop = min(start + per_block, len(z))
                zb, xb, sb = z[start:stop], x[start:stop], scratch[: stop - start]
                zb -= np.multiply(_dot(xb, zb)[:, None], xb, out=sb)
                zb *= scale[start:stop, None]
            return z
        z -= _dot(x, z)[..., None] * x
        z *= sigma[..., None]
        return z

    def tangent_basis(self, x):
        r"""Orthonormal basis of :math:`x^\perp` from a Householder reflection.

        Rows 1..d of :math:`H = I - 2 v v^T / \|v\|^2` with
        :math:`v = x + \mathrm{sign}(x_0) e_0` (H maps x to :math:`\mp e_0`, so its other rows
        span :math:`x^\perp`), shape ``(*batch, d, d + 1)``.

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
        e0 = np.zeros(self.point_shape)
        e0[0] = 1.0
        # reflect x to -sign(x_0) e_0 so that v = x + sign(x_0) e_0 never cancels
        v = x + np.where(x[..., :1] > 0, 1.0, -1.0) * e0
        v = v / np.linalg.norm(v, axis=-1, keepdims=True)
        h = np.eye(self.dim + 1) - 2.0 * v[..., :, None] * v[..., None, :]
        return h[..., 1:, :]

    def point_violation(self, x):
        x = np.asarray(x, dtype=float)
        return np.abs(np.sqrt(_dot(x, x)) - 1.0)

    def tangent_violation(self, x, u):
        # scaled by its largest entry first: the norm of a huge normal vector 1e300 x would
        # overflow to inf and pass it as tangent (violation 1e300 / inf = 0)
        u, big = _entry_scaled(np.asarray(u, dtype=float), (-1,))
        scale = np.maximum(np.linalg.norm(u, axis=-1), 1.0 / big)
        return np.abs(np.sum(np.asarray(x) * u, axis=-1)) / scale

    point_violation_description = "violation is | ||x|| - 1 |"
    tangent_violation_description = "violation is |<x, u>| / max(1, ||u||)"
