"""Hyperbolic space H^d, Poincare ball model, curvature -1."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, as_generator
from rfed.manifolds.hyperboloid import Hyperboloid

__all__ = ["PoincareBall", "mobius_add"]

#: Points are kept at Euclidean norm at most this: hyperbolic distance
#: :math:`2\,\mathrm{artanh}(1 - 10^{-10}) \approx 23.7` from the origin. Nearer the boundary
#: float64 cannot place a point well: the rounding of its norm changes the conformal factor
#: :math:`2/(1 - \|x\|^2)` by a relative :math:`\epsilon / (1 - \|x\|)` (2e-6 here; 20% at the
#: former 1 - 1e-15, where repeated transports overflowed after a few dozen round trips).
MAX_NORM = 1.0 - 1e-10
_SERIES = 1e-4


def mobius_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Mobius addition :math:`x \oplus y` on the unit ball (curvature -1), batched.

    Parameters
    ----------
    x, y : ndarray, shape ``(*batch, d)``
        Points of the open unit ball.

    Returns
    -------
    ndarray, shape ``(*batch, d)``
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xy = np.sum(x * y, axis=-1, keepdims=True)
    xx = np.sum(x * x, axis=-1, keepdims=True)
    yy = np.sum(y * y, axis=-1, keepdims=True)
    return ((1.0 + 2.0 * xy + yy) * x + (1.0 - xx) * y) / (1.0 + 2.0 * xy + xx * yy)


def _tanhc(t):
    """tanh(t)/t with its series near 0."""
    small = np.abs(t) < _SERIES
    ts = np.where(small, 1.0, t)
    tt = np.where(small, t, 0.0)  # (t * t of a huge step would overflow, with a warning)
    return np.where(small, 1.0 - tt * tt / 3.0, np.tanh(ts) / ts)


class PoincareBall(Manifold):
    r"""The Poincare ball :math:`\{x \in \mathbb{R}^d : \|x\| < 1\}` with the metric
    :math:`\lambda_x^2 \langle\cdot,\cdot\rangle`, :math:`\lambda_x = 2 / (1 - \|x\|^2)`.

    Parameters
    ----------
    dim : int
        Dimension ``d``; points and tangent vectors have shape ``(d,)``.

    Notes
    -----
    * :math:`\mathrm{Exp}_x u = x \oplus (\tanh(\lambda_x \|u\|/2)\, u/\|u\|)`, clipped to norm
      :data:`MAX_NORM` = 1 - 1e-10 (hyperbolic distance 23.7 from the origin): there every
      method stays finite and accurate to about 2e-6 relative; random points and ``exp``
      results never go further.
    * :math:`d(x, y) = 2\,\mathrm{asinh}\big(\|x - y\| / \sqrt{(1-\|x\|^2)(1-\|y\|^2)}\big)`
      (equal to the usual :math:`\mathrm{arcosh}(1 + 2\|x-y\|^2/((1-\|x\|^2)(1-\|y\|^2)))`
      without its cancellation near 0).
    * :math:`\mathrm{Log}_x y = \frac{d(x,y)}{\lambda_x} \frac{m}{\|m\|}`, with the direction of
      :math:`m = (-x) \oplus y` written in :math:`\delta = y - x` as
      :math:`(1 - \|x\|^2)\,\delta - \|\delta\|^2 x` (same direction, no cancellation); exactly
      zero when ``y == x``.
    * Parallel transport goes through :class:`~rfed.manifolds.Hyperboloid`: push u forward by the
      differential of :func:`from_hyperboloid`'s inverse, transport there in closed form, pull
      back (the maps are isometries, so this is the ball's parallel transport); the result is
      rescaled to the input's norm, which parallel transport preserves.
    * Tangent Gaussian :math:`\sigma g / \lambda_x`, :math:`g \sim N(0, I_d)` (the orthonormal
      basis of :math:`T_x` is :math:`e_i / \lambda_x`).
    """

    #: constant curvature -1
    curvature_lower_bound = -1.0

    def __init__(self, dim: int):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"PoincareBall: argument 'dim' must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self.point_shape = (self.dim,)
        self.name = f"PoincareBall({self.dim})"
        self.hyperboloid = Hyperboloid(self.dim)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _one_minus_sq(x):
        x = np.asarray(x, dtype=float)
        return 1.0 - np.sum(x * x, axis=-1)

    def conformal_factor(self, x: np.ndarray) -> np.ndarray:
        r""":math:`\lambda_x = 2 / (1 - \|x\|^2)`, shape: batch shape of x.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, d)``
            Points of the ball.

        Returns
        -------
        ndarray, shape ``batch``
        """
        return 2.0 / self._one_minus_sq(x)

    @staticmethod
    def _clip(y):
        n = np.linalg.norm(y, axis=-1, keepdims=True)
        return np.where(n > MAX_NORM, y * (MAX_NORM / np.where(n > 0, n, 1.0)), y)

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        lam = self.conformal_factor(x)
        return lam * lam * np.sum(np.asarray(u) * np.asarray(v), axis=-1)

    def norm(self, x, u):
        return self.conformal_factor(x) * np.linalg.norm(u, axis=-1)

    def dist(self, x, y):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        num = np.linalg.norm(y - x, axis=-1)
        return 2.0 * np.arcsinh(num / np.sqrt(self._one_minus_sq(x) * self._one_minus_sq(y)))

    # ------------------------------------------------------------------ maps
    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        half = 0.5 * self.conformal_factor(x)[..., None]
        # |u| scaled by its largest entry: no overflow to inf (then tanhc(inf) = 0 would
        # return x itself for a huge step instead of the boundary)
        big = np.max(np.abs(u), axis=-1, keepdims=True)
        big = np.where(big > 0, big, 1.0)
        t = half * (big * np.linalg.norm(u / big, axis=-1, keepdims=True))
        return self._clip(mobius_add(x, _tanhc(t) * half * u))

    def log(self, x, y):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        delta = y - x
        dd = np.sum(delta * delta, axis=-1, keepdims=True)
        m = self._one_minus_sq(x)[..., None] * delta - dd * x
        mn = np.linalg.norm(m, axis=-1, keepdims=True)
        lam = self.conformal_factor(x)[..., None]
        out = self.dist(x, y)[..., None] / (lam * np.where(mn > 0, mn, 1.0)) * m
        return np.where(np.all(x == y, axis=-1, keepdims=True), 0.0, out)

    def _push(self, p, u):
        """Differential of from_poincare at p applied to u (a tangent vector of the hyperboloid)."""
        q = self._one_minus_sq(p)[..., None]
        pu = np.sum(p * u, axis=-1, keepdims=True)
        return np.concatenate([4.0 * pu / q**2, 2.0 * u / q + 4.0 * pu * p / q**2], axis=-1)

    @staticmethod
    def _pull(h, w):
        """Differential of to_poincare at the hyperboloid point h applied to w."""
        return w[..., 1:] / (1.0 + h[..., :1]) - h[..., 1:] * w[..., :1] / (1.0 + h[..., :1]) ** 2

    def transport(self, x, y, u):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        hx = Hyperboloid.from_poincare(x)
        hy = Hyperboloid.from_poincare(y)
        u = np.asarray(u, dtype=float)
        out = self._pull(hy, self.hyperboloid.transport(hx, hy, self._push(x, u)))
        # parallel transport is an isometry: restore the norm the round trip through the
        # hyperboloid's large coordinates rounds away (repeated transports then cannot drift)
        n_in = self.norm(x, u)
        n_out = self.norm(y, out)
        return out * np.where(n_out > 0, n_in / np.where(n_out > 0, n_out, 1.0), 1.0)[..., None]

    def proj(self, x, v):
        shape = np.broadcast_shapes(np.shape(x), np.shape(v))
        return np.broadcast_to(np.asarray(v, dtype=float), shape).copy()

    def egrad2rgrad(self, x, g):
        lam = self.conformal_factor(x)[..., None]
        return np.asarray(g, dtype=float) / (lam * lam)

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian of the conformal metric :math:`e^{2\phi}\delta`,
        :math:`\phi = \log\lambda_x`, :math:`\nabla\phi = \lambda_x x`:

        :math:`\frac{H}{\lambda^2} + \frac{(x\cdot g)\,u - (x\cdot u)\,g - (u\cdot g)\,x}{\lambda}`,
        from :math:`\nabla_U V = DV[U] + d\phi(U) V + d\phi(V) U - \langle U, V\rangle\nabla\phi`
        applied to :math:`\mathrm{grad} f = g / \lambda^2`.

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
        g = np.asarray(egrad, dtype=float)
        u = np.asarray(u, dtype=float)
        lam = self.conformal_factor(x)[..., None]

        def dot(a, b):
            return np.sum(a * b, axis=-1, keepdims=True)

        return (
            np.asarray(ehess, float) / lam**2
            + (dot(x, g) * u - dot(x, u) * g - dot(u, g) * x) / lam
        )

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """The image of :meth:`Hyperboloid.random_point` (Exp at 0 of a standard Gaussian).

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
        return self._clip(Hyperboloid.to_poincare(self.hyperboloid.random_point(rng, size)))

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        scale = np.asarray(sigma, dtype=float) / self.conformal_factor(x)
        return scale[..., None] * as_generator(rng).standard_normal(scale.shape + self.point_shape)

    # ------------------------------------------------------------------ coordinates
    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        lam = self.conformal_factor(x)[..., None, None]
        return np.eye(self.dim) / lam

    def to_coords(self, x, u):
        return self.conformal_factor(x)[..., None] * np.asarray(u, dtype=float)

    def from_coords(self, x, coords):
        return np.asarray(coords, dtype=float) / self.conformal_factor(x)[..., None]

    # ------------------------------------------------------------------ conversions
    @staticmethod
    def to_hyperboloid(x: np.ndarray) -> np.ndarray:
        """The same point in the Lorentz model (shape ``(..., d + 1)``).

        Parameters
        ----------
        x : ndarray, shape ``(..., d)``
            Points of the ball.

        Returns
        -------
        ndarray, shape ``(..., d + 1)``
        """
        return Hyperboloid.from_poincare(x)

    @staticmethod
    def from_hyperboloid(h: np.ndarray) -> np.ndarray:
        """The same point in the ball from a point of the Lorentz model.

        Parameters
        ----------
        h : ndarray, shape ``(..., d + 1)``
            Points of the hyperboloid.

        Returns
        -------
        ndarray, shape ``(..., d)``
        """
        return Hyperboloid.to_poincare(h)

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        n = np.linalg.norm(np.asarray(x, dtype=float), axis=-1)
        return np.where(n < 1.0, 0.0, n)

    def tangent_violation(self, x, u):
        return np.zeros(np.broadcast_shapes(np.shape(x)[:-1], np.shape(u)[:-1]))

    point_violation_description = "violation is ||x|| when ||x|| >= 1 (outside the open ball)"

    def _check_map_result(self, y, method, u, x):
        """Also refuse a result clipped to :data:`MAX_NORM`: the step was longer than float64
        can place (the point returned is not ``Exp_x(u)``)."""
        super()._check_map_result(y, method, u, x)
        if np.any(np.linalg.norm(np.asarray(y, dtype=float), axis=-1) >= MAX_NORM * (1 - 1e-15)):
            raise ValueError(
                f"{self}: argument 'u' is too long: {method}(x, u) reaches the boundary of what "
                f"float64 can place in the ball (Euclidean norm {MAX_NORM!r}, hyperbolic "
                "distance ~23.7 from the origin); the result was clipped there"
            )
    tangent_violation_description = "every finite vector of shape (d,) is tangent"
