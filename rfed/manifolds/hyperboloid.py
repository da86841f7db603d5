"""Hyperbolic space H^d, Lorentz (hyperboloid) model, curvature -1."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed._einsum import einsum
from rfed.manifolds.base import Manifold, as_generator, size_tuple

__all__ = ["Hyperboloid", "minkowski_inner", "sinhc"]

#: Below this argument the series branches of sinh(t)/t and t/sinh(t) are used.
_SERIES = 1e-4


def minkowski_inner(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Lorentz inner product :math:`\langle u, v\rangle_L = -u_0 v_0 + \sum_{i>0} u_i v_i`.

    Parameters
    ----------
    u, v : ndarray, shape ``(*batch, d + 1)``
        Vectors of Minkowski space.

    Returns
    -------
    ndarray, shape ``batch``
    """
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    return einsum("...i,...i->...", u, v) - 2.0 * u[..., 0] * v[..., 0]


def sinhc(t: np.ndarray) -> np.ndarray:
    """sinh(t)/t, with its Taylor series near 0 (exact 1 at 0).

    Parameters
    ----------
    t : ndarray
        Arguments.

    Returns
    -------
    ndarray, shape of ``t``
    """
    t = np.asarray(t, dtype=float)
    small = np.abs(t) < _SERIES
    ts = np.where(small, 1.0, t)
    return np.where(small, 1.0 + t * t / 6.0, np.sinh(ts) / ts)


def _inv_sinhc(t: np.ndarray) -> np.ndarray:
    """t/sinh(t), with its Taylor series near 0."""
    t = np.asarray(t, dtype=float)
    small = np.abs(t) < _SERIES
    ts = np.where(small, 1.0, t)
    return np.where(small, 1.0 - t * t / 6.0, ts / np.sinh(ts))


class Hyperboloid(Manifold):
    r"""The hyperboloid :math:`H^d = \{x \in \mathbb{R}^{d+1} : \langle x, x\rangle_L = -1,
    x_0 > 0\}` with the metric induced by the Lorentz form (curvature -1).

    Parameters
    ----------
    dim : int
        Intrinsic dimension ``d``; points have shape ``(d + 1,)``, coordinate 0 is time-like.

    Notes
    -----
    * :math:`\mathrm{Exp}_x u = \cosh(\|u\|_L) x + \mathrm{sinhc}(\|u\|_L) u`, after which the time
      coordinate is recomputed as :math:`\sqrt{1 + \|x_{1:}\|^2}` so the result lies on the
      hyperboloid to rounding even for :math:`\|u\| = 30` (coordinates of order 1e13).
    * Distance: for :math:`d < 1` from the Lorentz chord,
      :math:`d = 2\,\mathrm{asinh}(\|y - x\|_L / 2)`, with the chord written from the
      spatial coordinates as a ratio of non-negative terms (:meth:`_chord_sq`): relative
      accuracy about 1e-15 down to d = 1e-15, since a point is determined by its spatial
      coordinates and nothing cancels; beyond, the projective form
      :math:`d = 2\,\mathrm{asinh}\sqrt{w/2}`, :math:`w = \cosh d - 1` written as a sum of
      non-negative terms and evaluated in log space (see :meth:`_log_half_gap`), accurate for
      points hundreds of units apart with coordinates up to the float64 limit. ``dist``
      equals the norm of ``log`` to rounding at every distance from base points near the
      origin (next item).
    * Float64 range: exp raises ``FloatingPointError`` when its result is not representable
      (:math:`\cosh\|u\| x_0 > 1.8\cdot 10^{308}`, e.g. :math:`\|u\| > 710` from the origin);
      dist and log accept every representable pair; proj raises likewise when
      :math:`\langle x, v\rangle_L\, x` overflows; no method returns inf or NaN silently.
    * Tangent vectors far from the origin: a tangent vector u at x is stored by its ambient
      coordinates, whose radial part is of order :math:`x_0 \|u\|`, so its component across
      the radius is resolved only to about :math:`\epsilon_{\mathrm{mach}}\, x_0 \|u\|`. Norms
      and logs at base points within about 20 units of the origin (:math:`x_0 < 10^8`) are
      accurate to a few ulps; beyond, that across error adds in quadrature to the radial
      part, and the relative error of ``norm(x, log(x, y))`` against ``dist(x, y)`` is of order
      :math:`(\epsilon_{\mathrm{mach}}\, x_0)^2` (about 1e-6 at 30 units from the origin,
      :math:`x_0 = \cosh 30`) and of order :math:`\epsilon_{\mathrm{mach}}\, x_0` once that
      exceeds 1 (beyond about 36 units): a limit of the model in float64, not of the formulas
      (the Poincare ball has the same limit near its boundary). Points themselves, ``dist``
      and ``exp`` keep their accuracy out to the float64 range.
    * :math:`\mathrm{Log}_x y = \frac{d}{\sinh d}\,w`, :math:`w = (y - x) + \langle x, y - x
      \rangle_L\, x` (the projection of ``y - x`` onto :math:`T_x`, equal to
      :math:`y - z x`); exactly zero when ``y == x``.
    * Parallel transport along the geodesic:
      :math:`P_{x\to y} u = u + \frac{\langle y, u\rangle_L}{1 + z}(x + y)`.
    * Tangent Gaussian: :math:`(0, \sigma g)`, :math:`g \sim N(0, I_d)`, at the origin
      :math:`o = (1, 0, \dots, 0)`, transported to x (:ref:`neighbours-tangent-gaussian`).
      The orthonormal tangent basis is the transported standard basis of :math:`T_o`.
    """

    #: constant curvature -1
    curvature_lower_bound = -1.0

    def __init__(self, dim: int):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"Hyperboloid: argument 'dim' must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self.point_shape = (self.dim + 1,)
        self.name = f"Hyperboloid({self.dim})"

    @property
    def origin(self) -> np.ndarray:
        """The point (1, 0, ..., 0)."""
        o = np.zeros(self.point_shape)
        o[0] = 1.0
        return o

    # ------------------------------------------------------------------ metric
    @staticmethod
    def _split(x, u):
        r"""(component of u_s across x_s, component of u_s along x_s / x_0): for u in T_x,
        :math:`\langle u, u\rangle_L = \|u_\perp\|^2 + (u_s\cdot \hat x_s)^2 / x_0^2`, a sum of
        squares (the Lorentz form :math:`\|u_s\|^2 - u_0^2` cancels by a factor x_0^2 at far
        base points: 1e-4 relative error at x_0 = 1e6)."""
        xs = x[..., 1:]
        nx = np.sqrt(einsum("...i,...i->...", xs, xs))
        xhat = xs / np.where(nx > 0, nx, 1.0)[..., None]
        along = einsum("...i,...i->...", u[..., 1:], xhat)
        perp = u[..., 1:] - along[..., None] * xhat
        return perp, along / x[..., 0]

    def inner(self, x, u, v):
        x = np.asarray(x, dtype=float)
        pu, au = self._split(x, np.asarray(u, dtype=float))
        pv, av = self._split(x, np.asarray(v, dtype=float))
        return einsum("...i,...i->...", pu, pv) + au * av

    def norm(self, x, u):
        pu, au = self._split(np.asarray(x, dtype=float), np.asarray(u, dtype=float))
        return np.sqrt(einsum("...i,...i->...", pu, pu) + au * au)

    @staticmethod
    def _log_half_gap(x, y):
        r""":math:`\log w` with :math:`w = \cosh d(x, y) - 1`, without cancellation or overflow.

        On the hyperboloid (:math:`x_0^2 = 1 + \|x_s\|^2`),
        :math:`w = -\langle x, y\rangle_L - 1 = \tfrac12 x_0 y_0 \big(\|x_s/x_0 - y_s/y_0\|^2
        + (1/y_0 - 1/x_0)^2\big)`: a sum of non-negative terms (nothing cancels, unlike
        :math:`x_0 y_0 - x_s\cdot y_s - 1` or the Lorentz chord), evaluated in log space so that
        points with coordinates near the float64 limit do not overflow. ``-inf`` when y == x.
        """
        x0 = x[..., 0]
        y0 = y[..., 0]
        dn = x[..., 1:] / x0[..., None] - y[..., 1:] / y0[..., None]
        s = einsum("...i,...i->...", dn, dn) + np.square(1.0 / y0 - 1.0 / x0)
        with np.errstate(divide="ignore"):
            return np.log(0.5) + np.log(x0) + np.log(y0) + np.log(s)

    @staticmethod
    def _chord_sq(x, y):
        r"""Squared Lorentz chord :math:`\|y - x\|_L^2 = 2(\cosh d - 1)` from the spatial
        coordinates alone (the time coordinates are functions of them), without
        cancellation for near pairs.

        With :math:`\delta = y_s - x_s`, :math:`\sigma = x_s + y_s`, :math:`\sigma_0 = x_0 + y_0`,
        :math:`\alpha = \delta\cdot\hat\sigma` and :math:`\delta_\perp = \delta - \alpha\hat\sigma`:
        :math:`y_0 - x_0 = \alpha\|\sigma\|/\sigma_0` and
        :math:`\sigma_0^2 - \|\sigma\|^2 = 2(1 + \cosh d)`, which give
        :math:`c^2 = (\|\delta_\perp\|^2 + 4 a^2) / (1 - a^2)`, :math:`a = \alpha/\sigma_0`:
        a ratio of non-negative terms (the textbook :math:`\|\delta\|^2 - (y_0 - x_0)^2`
        cancels, and :math:`y_0 - x_0` itself carries the rounding of the time coordinates,
        relative 1e-4 at d = 1e-12). Used for :math:`d < 1`, where :math:`a^2 < 1/2`.
        """
        xs, ys = x[..., 1:], y[..., 1:]
        delta = ys - xs
        sigma = xs + ys
        big = np.max(np.abs(sigma), axis=-1, initial=0.0)
        sig = sigma / np.where(big > 0, big, 1.0)[..., None]
        sig /= np.where(big > 0, np.sqrt(einsum("...i,...i->...", sig, sig)), 1.0)[..., None]
        alpha = einsum("...i,...i->...", delta, sig)
        perp = delta - alpha[..., None] * sig
        a = alpha / (x[..., 0] + y[..., 0])
        return (einsum("...i,...i->...", perp, perp) + 4.0 * a * a) / (1.0 - a * a)

    #: below this distance :meth:`dist` and :meth:`log` use the Lorentz chord (in the
    #: cancellation-free form of :meth:`_chord_sq`), above it the projective form
    NEAR = 1.0

    def _dist(self, x, y):
        """d(x, y): ``2 asinh(sqrt(w / 2))`` with :math:`w = \\cosh d - 1` from the sum of
        non-negative terms of :meth:`_log_half_gap` (formed directly, and in log space only for
        the pairs where it would overflow, where ``log(2 w)`` is d to rounding); the pairs
        nearer than :attr:`NEAR` then take ``2 asinh(c / 2)`` from the Lorentz chord c
        (:meth:`_chord_sq`), which keeps their relative digits."""
        x0 = x[..., 0]
        y0 = y[..., 0]
        dn = x[..., 1:] / x0[..., None] - y[..., 1:] / y0[..., None]
        s = einsum("...i,...i->...", dn, dn) + np.square(1.0 / y0 - 1.0 / x0)
        with np.errstate(over="ignore", invalid="ignore"):
            w = (0.5 * x0) * y0 * s
            out = np.array(2.0 * np.arcsinh(np.sqrt(0.5 * w)))
        big = ~(w <= 2e17)  # w > 2e17 (or overflowed): asinh(sqrt(w/2)) = log(2 w) to rounding
        if np.any(big):
            out[big] = np.log(2.0) + self._log_half_gap(x[big], y[big])
        near = out < self.NEAR
        if np.any(near):
            out[near] = 2.0 * np.arcsinh(0.5 * np.sqrt(self._chord_sq(x[near], y[near])))
        return out[()]

    def dist(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        return self._dist(x, y)

    # ------------------------------------------------------------------ maps
    @staticmethod
    def _lift(spatial):
        """The point with spatial part ``spatial`` (time coordinate recomputed, scaled so that
        its square cannot overflow)."""
        out = np.empty(spatial.shape[:-1] + (spatial.shape[-1] + 1,))
        out[..., 1:] = spatial
        with np.errstate(over="ignore", invalid="ignore"):
            sq = einsum("...i,...i->...", spatial, spatial)
        if np.all(sq < 1e300):
            # the usual case: nothing near the float64 limit
            out[..., 0] = np.sqrt(1.0 + sq)
            return out
        big = np.max(np.abs(spatial), axis=-1, initial=0.0)
        scale = np.where(big > 1e150, big, 1.0)[..., None]
        t = spatial / scale
        out[..., 0] = scale[..., 0] * np.sqrt(
            np.square(1.0 / scale[..., 0]) + einsum("...i,...i->...", t, t)
        )
        return out

    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        t = self.norm(x, u)[..., None]
        with np.errstate(over="ignore", invalid="ignore"):
            out = self._lift(np.cosh(t) * x[..., 1:] + sinhc(t) * u[..., 1:])
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(
                f"{self}: exp(x, u) is not representable in float64 (its coordinates exceed "
                f"1.8e308): |u| = {float(np.max(t)):.4g} from x with x_0 = "
                f"{float(np.max(x[..., 0])):.4g}; cosh(|u|) x_0 must stay below ~1e308"
            )
        return out

    def log(self, x, y):
        r"""Log map :math:`\frac{d}{\sinh d}(y - z x)`, :math:`z = \cosh d`.

        For :math:`d < 20` as :math:`\frac{d}{\sinh d}\,((y - x) - (z - 1) x)` with
        :math:`z - 1 = 2\sinh^2(d/2)` from the accurate distance, the spatial part first and
        the time part from tangency (:math:`w_0 = w_s\cdot x_s / x_0`): no cancellation for
        nearby points, its norm equals :meth:`dist` to rounding, exactly zero when y == x.
        For far points :math:`(y - z x) / y_0` is formed from :math:`y / y_0` (no overflow for
        coordinates up to
        the float64 limit) and scaled by :math:`d\, y_0 / \sinh d` in log space.

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
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        d = self._dist(x, y)
        far = d >= 20.0
        # w = y - z x = (y - x) - (z - 1) x, with z - 1 = 2 sinh^2(d / 2) from the accurate d
        # (not <x, y - x>_L, which carries the rounding of the time coordinates), spatial part
        # first; the time part then follows from tangency, w_0 = w_s . x_s / x_0
        with np.errstate(over="ignore", invalid="ignore"):
            gap = 2.0 * np.square(np.sinh(0.5 * np.where(far, 0.0, d)))
            ws = (y[..., 1:] - x[..., 1:]) - gap[..., None] * x[..., 1:]
            out = np.empty(ws.shape[:-1] + (ws.shape[-1] + 1,))
            out[..., 1:] = ws
            out[..., 0] = einsum("...i,...i->...", ws, x[..., 1:]) / x[..., 0]
            out *= _inv_sinhc(np.where(far, 1.0, d))[..., None]
        out = np.where(np.all(x == y, axis=-1, keepdims=True), 0.0, out)
        if np.any(far):
            t = y[far] / y[far][..., :1]
            xf = x[far]
            direction = t + minkowski_inner(xf, t)[..., None] * xf  # (y - z x) / y_0
            # |y - z x|_L = sinh d on the manifold: scale by d y_0 / sinh d in log space (the
            # Lorentz norm of ``direction`` itself cancels badly at far base points)
            df = d[far]
            log_sinh = df + np.log1p(-np.exp(-2.0 * df)) - np.log(2.0)
            out[far] = (df * np.exp(np.log(y[far][..., 0]) - log_sinh))[..., None] * direction
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(
                f"{self}: log(x, y) overflowed (x_0 = {float(np.max(x[..., 0])):.3g}): the "
                "tangent vector at such a far base point is not representable in float64"
            )
        return out

    def transport(self, x, y, u):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        u = np.asarray(u, dtype=float)
        z = -minkowski_inner(x, y)
        coef = minkowski_inner(y, u) / (1.0 + z)
        return u + coef[..., None] * (x + y)

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            out = v + minkowski_inner(x, v)[..., None] * x
        if not np.all(np.isfinite(out)):
            # the projection's coordinates grow like x_0^2 |v|: a diverged iterate gets there
            # first, and the algorithms record a FloatingPointError as divergence
            raise FloatingPointError(
                f"{self}: proj(x, v) is not representable in float64 (x_0 = "
                f"{float(np.max(x[..., 0])):.4g}, max |v| = {float(np.max(np.abs(v))):.4g}); "
                "<x, v>_L x must stay below ~1e308"
            )
        return out

    @staticmethod
    def _flip(g):
        g = np.array(g, dtype=float, copy=True)
        g[..., 0] *= -1.0
        return g

    def egrad2rgrad(self, x, g):
        r"""Riemannian gradient :math:`\mathrm{proj}_x(J g)`, :math:`J = \mathrm{diag}(-1, 1,
        \dots, 1)` (the Lorentz metric's inverse applied to the Euclidean gradient).

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        g : ndarray, shape ``(*batch, *point_shape)``
            Euclidean gradient(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Riemannian gradients, tangent at ``x``.
        """
        return self.proj(x, self._flip(g))

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian :math:`\mathrm{proj}_x(J H) + (x \cdot g)\, u`.

        Differentiating :math:`\mathrm{grad} f = Jg + \langle x, Jg\rangle_L x` along u and
        projecting onto :math:`T_x` (the Levi-Civita connection of a semi-Riemannian
        submanifold); :math:`\langle x, Jg\rangle_L = x \cdot g` (Euclidean dot product).

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
        return self.proj(x, self._flip(ehess)) + xg * np.asarray(u, dtype=float)

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """``Exp_o`` of a standard Gaussian tangent vector at the origin.

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
        size = size_tuple(size)
        v = as_generator(rng).standard_normal(size + (self.dim,))
        r = np.linalg.norm(v, axis=-1, keepdims=True)
        return self._lift(sinhc(r) * v)

    def _from_origin(self, x, spatial):
        """Parallel transport of the origin tangent vector (0, spatial) to x."""
        x = np.asarray(x, dtype=float)
        xs = x[..., 1:]
        time = einsum("...i,...i->...", spatial, xs)  # <(0, s), x>_L
        coef = (time / (1.0 + x[..., 0]))[..., None]
        out = np.empty(np.broadcast_shapes(x.shape, spatial.shape[:-1] + x.shape[-1:]))
        out[..., 0] = time
        out[..., 1:] = spatial + coef * xs
        return out

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        shape = np.broadcast_shapes(x.shape[:-1], np.shape(sigma)) + (self.dim,)
        g = np.asarray(sigma, dtype=float)[..., None] * as_generator(rng).standard_normal(shape)
        return self._from_origin(x, g)

    # ------------------------------------------------------------------ coordinates
    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim)
        return self._from_origin(x[..., None, :], eye)

    def to_coords(self, x, u):
        """Spatial part of the transport of u back to the origin: u_s - u_0 x_s / (1 + x_0).

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, dim)``
            Orthonormal coordinates.
        """
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        return u[..., 1:] - u[..., :1] * x[..., 1:] / (1.0 + x[..., :1])

    def from_coords(self, x, coords):
        return self._from_origin(x, np.asarray(coords, dtype=float))

    # ------------------------------------------------------------------ poincare
    @staticmethod
    def to_poincare(x: np.ndarray) -> np.ndarray:
        r"""Map to the Poincare ball: :math:`x_{1:} / (1 + x_0)`, shape ``(..., d)``.

        Parameters
        ----------
        x : ndarray, shape ``(..., d + 1)``
            Points of the hyperboloid.

        Returns
        -------
        ndarray, shape ``(..., d)``
        """
        x = np.asarray(x, dtype=float)
        return x[..., 1:] / (1.0 + x[..., :1])

    @staticmethod
    def from_poincare(p: np.ndarray) -> np.ndarray:
        r"""Inverse of :meth:`to_poincare`: :math:`(1 + |p|^2, 2p) / (1 - |p|^2)`.

        Parameters
        ----------
        p : ndarray, shape ``(..., d)``
            Points of the open unit ball.

        Returns
        -------
        ndarray, shape ``(..., d + 1)``
        """
        p = np.asarray(p, dtype=float)
        sq = np.sum(p * p, axis=-1, keepdims=True)
        return np.concatenate([1.0 + sq, 2.0 * p], axis=-1) / (1.0 - sq)

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        x = np.asarray(x, dtype=float)
        # |<x, x>_L + 1| / (1 + |x|^2) with x scaled by its largest coordinate first, so that
        # points far out (coordinates above 1e154, whose squares overflow) are measured too
        big = np.maximum(np.max(np.abs(x), axis=-1), 1.0)
        xn = x / big[..., None]
        with np.errstate(under="ignore"):  # 1 / big^2 is 0 to rounding there
            inv_sq = np.square(1.0 / big)
        violation = np.abs(minkowski_inner(xn, xn) + inv_sq) / (inv_sq + np.sum(xn * xn, axis=-1))
        return violation + np.where(x[..., 0] > 0, 0.0, 1.0)

    def tangent_violation(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        scale = np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(u, axis=-1), 1e-300)
        return np.abs(minkowski_inner(x, u)) / scale

    point_violation_description = (
        "violation is |<x, x>_L + 1| / (1 + ||x||^2), plus 1 when x_0 <= 0 (lower sheet)"
    )
    tangent_violation_description = "violation is |<x, u>_L| / (||x|| ||u||) (Euclidean norms)"
