"""Hyperbolic space H^d, Lorentz (hyperboloid) model, curvature -1."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from rfed._einsum import einsum
from rfed.manifolds.base import (
    ConvergenceWarning,
    Manifold,
    _normalize_weights,
    as_generator,
    karcher_mean,
    size_tuple,
)

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
      dist accepts every pair of representable points (:attr:`HUGE`), log every pair whose
      tangent vector, of coordinates about :math:`x_0 d`, is representable, and raises
      otherwise; inner and norm square their terms after scaling by powers of two where a
      square could overflow or underflow (beyond :math:`x_0 \approx 10^{154}`, about 355
      units out, or for vectors above :math:`2^{500}` or below :math:`2^{-500}`; the same
      bits as before elsewhere) and raise only when the result itself exceeds
      :math:`1.8\cdot 10^{308}`; to_coords and tangent_violation rescale likewise; proj,
      ehess2rhess and transport raise when their result overflows (transport also when its
      Lorentz products, of order :math:`x_0 y_0 \|u\|`, do: beyond :math:`x_0 y_0 \approx
      10^{308}`); from_poincare refuses :math:`|p| \ge 1`. From finite inputs no method
      returns inf or NaN silently or warns of an overflow on the way.
    * Tangent vectors far from the origin: a tangent vector u at x is stored by its ambient
      coordinates, whose radial part is of order :math:`x_0 \|u\|`, so its component across
      the radius is resolved only to about :math:`\epsilon_{\mathrm{mach}}\, x_0 \|u\|`, and
      no formula returning ambient coordinates can do better. ``log`` attains that limit at
      every pair of points, wherever they lie (the same side of the origin, across, opposite):
      with :math:`\epsilon = \epsilon_{\mathrm{mach}} = 2.2\cdot 10^{-16}`,

      - :math:`\|\mathrm{log}(x, y) - \mathrm{Log}_x y\|_x \le (16 + x_0)\,\epsilon\, d(x, y)`
        (against 60-digit references; measured at most about 14 eps near the origin and
        0.8 eps x_0 beyond): relative 1e-8 at 20 units from the origin,
        :math:`x_0 = \cosh 20 = 2.4\cdot 10^8`;
      - :math:`|\,\|\mathrm{log}(x, y)\|_x / d(x, y) - 1| \le (16 + x_0)\,\epsilon`; the first
        order term comes from the across error times the across part of the log, so it is
        only :math:`16\,\epsilon + 4 (\epsilon x_0)^2` when the log is radial (y on the line
        through the origin and x, or a target far from x in most directions: geodesics
        from far out leave towards the origin);
      - once :math:`\epsilon x_0 \sim 1` (beyond about 36 units from the origin) tangent
        vectors at x carry no direction across the radius: a limit of the model in float64,
        not of the formulas (the Poincare ball has the same limit near its boundary). The
        across part of a vector is then rounding of size :math:`\epsilon x_0 \|u\|`, and the
        two bounds above hold only up to a small factor (they bound nothing useful there);
        where the split across and along the radius is exact (:math:`x_s` on a coordinate
        axis) ``norm(log(x, y))`` still equals ``dist`` to a few eps at every :math:`x_0`.

      Points, ``dist`` and ``exp`` keep their accuracy out to the float64 range, relative to
      the points' own resolution (a point at :math:`x_0` is resolved to
      :math:`\epsilon x_0` across the radius: spatial coordinates have metric factor 1
      there); ``exp(x, u)`` magnifies the across error of u by :math:`\sinh\|u\|`, so
      ``exp(x, log(x, y))`` returns y only to about :math:`\epsilon x_0 \sinh d` when y is
      nearer the origin than x. :meth:`mean` warns where these limits matter.
    * :math:`\mathrm{Log}_x y = \frac{d}{\sinh d}\,w`, :math:`w = (y - x) + \langle x, y - x
      \rangle_L\, x` (the projection of ``y - x`` onto :math:`T_x`, equal to
      :math:`y - z x`); exactly zero when ``y == x``.
    * Parallel transport along the geodesic:
      :math:`P_{x\to y} u = u + \frac{\langle y, u\rangle_L}{1 + z}(x + y)`. The Lorentz
      products :math:`z = -\langle x, y\rangle_L` and :math:`\langle y, u\rangle_L` cancel
      by up to :math:`\min(x_0, y_0)` times the float64 limit (all digits lost at 20 and 30
      units out on one side); where both :math:`x_0, y_0 >` :attr:`TRANSPORT_FAR` (= 64,
      about 4.9 units from the origin) they are taken from :meth:`_lorentz_gap` instead.
      Against 60-digit references, :math:`\|P u - P_{x\to y} u\|_y \le 4\,\epsilon\,(x_0 +
      y_0)\,\|u\|` there and :math:`\le 8 \min(x_0, y_0)\,\epsilon\,(x_0 + y_0)\,\|u\|`
      nearer (measured at most 1.6 and 4.3 times :math:`\epsilon (x_0 + y_0)`, resp. that
      times :math:`\min(x_0, y_0)`): :math:`\epsilon (x_0 + y_0)` is the resolution of the
      points and of tangent vectors at them across the radius.
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

    @staticmethod
    def _split_scaled(x, u):
        r"""The vector :math:`(u_\perp, u_s\cdot\hat x_s / x_0)` of :meth:`_split` as
        :math:`2^k c`, with the largest entry of c in [1/2, 1) (0 when u is), for any finite x
        and u: every scaling is by a power of two (exact), so no square or intermediate
        overflows or underflows and :math:`\|c\|` keeps its relative digits (a component
        below :math:`2^{-1022}` times the largest is rounded to subnormals: negligible).

        Returns
        -------
        c : ndarray, shape ``(*batch, d + 1)``
        k : ndarray of int, shape ``batch``
        """
        def exponent(a):  # a = m 2^e, m in [1/2, 1); a large negative sentinel for 0
            return np.where(a > 0, np.frexp(a)[1], -(2**20))

        xs = x[..., 1:]
        xs = np.ldexp(xs, -exponent(np.max(np.abs(xs), axis=-1, initial=0.0))[..., None])
        nx = np.sqrt(einsum("...i,...i->...", xs, xs))
        xhat = xs / np.where(nx > 0, nx, 1.0)[..., None]
        ku = exponent(np.max(np.abs(u[..., 1:]), axis=-1, initial=0.0))
        us = np.ldexp(u[..., 1:], -np.maximum(ku, -1074)[..., None])  # max |us| in [1/2, 1)
        along = einsum("...i,...i->...", us, xhat)
        perp = us - along[..., None] * xhat
        # along / x_0 = (along / f_0) 2^-e_0, x_0 = f_0 2^e_0: scaled apart so that it keeps
        # its digits when x_0 is near the float64 limit
        f0, e0 = np.frexp(x[..., 0])
        a = along / f0
        k = np.maximum(
            exponent(np.max(np.abs(perp), axis=-1, initial=0.0)), exponent(np.abs(a)) - e0
        )
        k = np.where(k > -(2**19), k, 0)  # u = 0
        c = np.empty(perp.shape[:-1] + (perp.shape[-1] + 1,))
        c[..., :-1] = np.ldexp(perp, -k[..., None])
        c[..., -1] = np.ldexp(a, -e0 - k)
        return c, np.maximum(ku, -1074) + k

    #: :meth:`inner` and :meth:`norm` square the components of :meth:`_split` directly while
    #: they lie within [2^-500, 2^500] (and x_0 <= 2^500, where |x_s|^2 cannot overflow), and
    #: otherwise rescale them by powers of two first (:meth:`_split_scaled`)
    _SQUARE_SAFE = 2.0**500

    def _unsafe(self, x, pu, au, out):
        """``None`` when no row is suspect (the common case), else the rows where squaring
        the plain :meth:`_split` components overflowed, underflowed or could have (and where
        x_0 is so large that |x_s|^2 overflowed inside the split). Screened on the result
        ``out`` first: a finite result of at least 2^-500 from x_0 <= 2^500 had no overflow
        and no harmful underflow; only the other rows have their components examined."""
        safe = self._SQUARE_SAFE
        # the common case: in three reductions, or for one point on Python floats (numpy's
        # reductions of a 0-d array cost more than the norm itself); a NaN fails the first
        # comparison
        if out.ndim == 0 and x.ndim == 1:
            if 1.0 / safe <= abs(float(out)) < np.inf and float(x[0]) <= safe:
                return None
        elif out.size and 1.0 / safe <= np.abs(out).min() and np.abs(out).max() < np.inf \
                and x[..., 0].max() <= safe:
            return None
        size = np.abs(out)
        x0 = np.broadcast_to(x[..., 0], out.shape)
        with np.errstate(invalid="ignore"):
            suspect = np.array(~np.isfinite(out) | ~(size >= 1.0 / safe) | (x0 > safe))
        if not np.any(suspect):
            return suspect
        pu = np.broadcast_to(pu, out.shape + pu.shape[-1:])[suspect]
        au = np.broadcast_to(au, out.shape)[suspect]
        m = np.maximum(np.max(np.abs(pu), axis=-1, initial=0.0), np.abs(au))
        ok = (m <= safe) & ((m >= 1.0 / safe) | (m == 0.0)) & (x0[suspect] <= safe)
        # a non-finite result from components that look safe (e.g. |u| near 2^500 in a very
        # high dimension) is rescaled too
        ok &= np.isfinite(out[suspect])
        suspect[suspect] = ~ok
        return suspect

    def _refuse(self, method, what):
        raise FloatingPointError(
            f"{self}: {method} is not representable in float64 ({what} exceeds 1.8e308)"
        )

    def inner(self, x, u, v):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        v = np.asarray(v, dtype=float)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            pu, au = self._split(x, u)
            pv, av = self._split(x, v)
            out = np.array(einsum("...i,...i->...", pu, pv) + au * av)
        bad = self._unsafe(x, pu, au, out)
        if bad is not None:  # (the screen reads out and x_0 only: None for u is None for v)
            bad = bad | self._unsafe(x, pv, av, out)
        if bad is not None and np.any(bad):
            # (rows with a non-finite input keep the NaN or inf they give)
            bad &= np.all(np.isfinite(x) & np.isfinite(u) & np.isfinite(v), axis=-1)
            x, u, v = (np.broadcast_to(a, bad.shape + x.shape[-1:])[bad] for a in (x, u, v))
            cu, ku = self._split_scaled(x, u)
            cv, kv = self._split_scaled(x, v)
            with np.errstate(over="ignore"):
                out[bad] = np.ldexp(einsum("...i,...i->...", cu, cv), ku + kv)
            if not np.all(np.isfinite(out[bad])):
                self._refuse("inner(x, u, v)", "|<u, v>_x|")
        return out[()]

    def norm(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            pu, au = self._split(x, u)
            out = np.array(np.sqrt(einsum("...i,...i->...", pu, pu) + au * au))
        bad = self._unsafe(x, pu, au, out)
        if bad is not None and np.any(bad):
            bad &= np.all(np.isfinite(x) & np.isfinite(u), axis=-1)
            x, u = (np.broadcast_to(a, bad.shape + x.shape[-1:])[bad] for a in (x, u))
            c, k = self._split_scaled(x, u)
            with np.errstate(over="ignore"):
                out[bad] = np.ldexp(np.sqrt(einsum("...i,...i->...", c, c)), k)
            if not np.all(np.isfinite(out[bad])):
                self._refuse("norm(x, u)", "|u|_x")
        return out[()]

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

    #: pairs with :math:`x_0 y_0` above this (about 8e270) take the scaled forms of
    #: :meth:`_half_gap_scaled` in :meth:`dist` and :meth:`log`: the terms of
    #: :meth:`_log_half_gap` underflow beyond it (and :math:`1 / (x_0 y_0)` with them)
    HUGE = 2.0**900

    @staticmethod
    def _half_gap_scaled(x, y):
        r""":math:`w = \cosh d(x, y) - 1` as :math:`c\, 4^e` (c in [1/2, 2 (d + 1)), e an int;
        c = 0 when y == x) for any pair of representable points, without underflow or
        overflow.

        :math:`w = \tfrac12 x_0 y_0 \big(\|\delta\|^2 + (1/y_0 - 1/x_0)^2\big) = 2 \|V\|^2`,
        :math:`\delta = x_s/x_0 - y_s/y_0`, with :math:`V = \big(\tfrac12 t \delta,
        \tfrac12 (x_0 - y_0)/t\big)`, :math:`t = \sqrt{x_0}\sqrt{y_0}` (the sum of
        non-negative terms of :meth:`_log_half_gap`, whose second term underflows for points
        beyond :math:`x_0 = 10^{154}` on one ray); V is scaled by a power of two before it is
        squared.
        """
        x0 = x[..., 0]
        y0 = y[..., 0]
        t = np.sqrt(x0) * np.sqrt(y0)
        v = np.empty(x.shape)
        dn = x[..., 1:] / x0[..., None] - y[..., 1:] / y0[..., None]
        v[..., :-1] = dn * (0.5 * t)[..., None]
        v[..., -1] = 0.5 * ((x0 - y0) / t)
        top = np.max(np.abs(v), axis=-1)
        e = np.where(top > 0, np.frexp(top)[1], 0)
        v = np.ldexp(v, -e[..., None])
        return 2.0 * einsum("...i,...i->...", v, v), e

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
        (:meth:`_chord_sq`), which keeps their relative digits. Pairs with :math:`x_0 y_0 >`
        :attr:`HUGE` take w from :meth:`_half_gap_scaled` (its terms underflow there), and a
        chord whose square overflows :meth:`_dist_across`."""
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
        with np.errstate(over="ignore"):
            huge = ~(x0 * y0 <= self.HUGE)
        if np.any(huge):  # the terms of w underflow (same ray far out): scaled, w = c 4^e
            c, e = self._half_gap_scaled(x[huge], y[huge])
            with np.errstate(over="ignore", divide="ignore"):
                wh = np.ldexp(c, 2 * e)
                out[huge] = np.where(
                    wh <= 2e17,
                    2.0 * np.arcsinh(np.sqrt(0.5 * wh)),
                    np.log(2.0 * c) + (2.0 * np.log(2.0)) * e,
                )
        near = out < self.NEAR
        if np.any(near):
            with np.errstate(over="ignore", invalid="ignore"):
                out[near] = 2.0 * np.arcsinh(0.5 * np.sqrt(self._chord_sq(x[near], y[near])))
            lost = near & ~np.isfinite(out)
            if np.any(lost):  # far out, the rounding of x_s and y_s across the radius
                out[lost] = self._dist_across(x[lost], y[lost])
        return out[()]

    @staticmethod
    def _dist_across(x, y):
        r"""d for pairs whose :math:`\delta_\perp` in :meth:`_chord_sq` overflows when squared:
        far out (:math:`x_0 > 10^{154}`) the spatial coordinates' rounding across the radius,
        :math:`\epsilon x_0`, is itself a distance of order :math:`2 \log(\epsilon x_0)`
        (metric factor 1 there), which the projective form's :math:`\delta` cannot see. The
        chord's terms scaled by a power of two; :math:`2\,\mathrm{asinh}(c/2) = 2 \log c` to
        rounding for :math:`c > 2^{500}`."""
        xs, ys = x[..., 1:], y[..., 1:]
        delta = ys - xs
        sigma = xs + ys
        big = np.max(np.abs(sigma), axis=-1)
        sig = sigma / big[..., None]
        sig /= np.sqrt(einsum("...i,...i->...", sig, sig))[..., None]
        alpha = einsum("...i,...i->...", delta, sig)
        perp = delta - alpha[..., None] * sig
        a = alpha / (x[..., 0] + y[..., 0])
        k = np.frexp(np.max(np.abs(perp), axis=-1))[1]
        perp = np.ldexp(perp, -k[..., None])
        c2 = (einsum("...i,...i->...", perp, perp) + 4.0 * np.square(np.ldexp(a, -k))) / (
            1.0 - a * a
        )
        return np.log(c2) + (2.0 * np.log(2.0)) * k

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
        For far points (:math:`d \ge 20`) :math:`(y - z x) / (x_0 y_0) = y / (x_0 y_0) - (h +
        1 / (x_0 y_0))\, x` with :math:`h = (z - 1) / (x_0 y_0) = \tfrac12 \big(\|x_s / x_0 -
        y_s / y_0\|^2 + (1 / y_0 - 1 / x_0)^2\big)`, the sum of non-negative terms of
        :meth:`_log_half_gap` (the Lorentz product :math:`-\langle x, y\rangle_L / y_0`
        cancels: all digits lost when y is farther out on the same side as x, e.g. 20 and 40
        units from the origin), scaled by :math:`d\, x_0 y_0 / \sinh d`,
        :math:`\sinh(d) / (x_0 y_0) = \sqrt{h (h + 2 / (x_0 y_0))}`; beyond
        :math:`x_0 y_0 =` :attr:`HUGE` the scale-free forms of :meth:`_log_huge`. Accuracy:
        see the class notes
        (:math:`(16 + x_0)\,\epsilon_{\mathrm{mach}}` relative).

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
        same = np.all(x == y, axis=-1)
        out = np.where(same[..., None], 0.0, out)
        with np.errstate(over="ignore"):
            huge = ~(x[..., 0] * y[..., 0] <= self.HUGE) & ~same
        if np.any(huge):
            out[huge] = self._log_huge(x[huge], y[huge], d[huge])
        far &= ~huge
        if np.any(far):
            xf, yf = x[far], y[far]
            x0, y0 = xf[..., 0], yf[..., 0]
            # (y - z x) / (x_0 y_0) = y / (x_0 y_0) - (h + 1 / (x_0 y_0)) x with
            # h = (z - 1) / (x_0 y_0) half the sum of non-negative terms of _log_half_gap, not
            # from the Lorentz product: -<x, y / y_0>_L cancels (absolute error eps x_0, against
            # its value cosh(d) / y_0 ~ 1 / x_0 when y is farther out on the same side as x),
            # and cosh d or sinh d from d carry d's rounding times d
            dn = xf[..., 1:] / x0[..., None] - yf[..., 1:] / y0[..., None]
            h = 0.5 * (np.einsum("...i,...i->...", dn, dn) + np.square(1.0 / y0 - 1.0 / x0))
            inv = 1.0 / x0 / y0
            ws = (yf[..., 1:] / y0[..., None]) / x0[..., None] - (h + inv)[..., None] * xf[..., 1:]
            direction = np.empty_like(xf)
            direction[..., 1:] = ws
            direction[..., 0] = np.einsum("...i,...i->...", ws, xf[..., 1:] / x0[..., None])
            # |y - z x|_L = sinh d on the manifold, sinh(d) / (x_0 y_0) = sqrt(h (h + 2 inv)), as
            # a product of roots (h^2 underflows beyond x_0 = 1e77)
            # (the Lorentz norm of ``direction`` itself cancels badly at far base points)
            out[far] = (d[far] / (np.sqrt(h) * np.sqrt(h + 2.0 * inv)))[..., None] * direction
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(
                f"{self}: log(x, y) overflowed (x_0 = {float(np.max(x[..., 0])):.3g}): the "
                "tangent vector at such a far base point is not representable in float64"
            )
        return out

    def _log_huge(self, x, y, d):
        r"""Log map for pairs with :math:`x_0 y_0 >` :attr:`HUGE` (where :math:`1 / (x_0 y_0)`
        and the terms of :meth:`_log_half_gap` underflow, and :math:`(z - 1)\, x` overflows).

        Beyond 20 units apart, with :math:`q = 1 / (z - 1) = 1 / w` from
        :meth:`_half_gap_scaled`: :math:`y - z x = (z - 1)(q y - (1 + q) x)` and
        :math:`\sinh d = (z - 1)\sqrt{1 + 2 q}`, so
        :math:`\mathrm{Log}_x y = \frac{d}{\sqrt{1 + 2q}} (q y - (1 + q) x)`: no term
        larger than the result. Nearer, the form of :meth:`log` on x and y scaled by the same
        power of two :math:`2^{-k}`, :math:`x_0 \in [1/2, 1) 2^k` (exact), then scaled back.
        The time coordinate follows from tangency, :math:`w_0 = w_s\cdot x_s / x_0`.
        """
        x0 = x[..., 0]
        out = np.empty(x.shape)
        far = d >= 20.0
        if np.any(far):
            c, e = self._half_gap_scaled(x[far], y[far])
            q = np.ldexp(1.0 / c, -2 * e)  # underflows to 0 once w > 1e308: then Log = -d x
            ws = q[..., None] * y[far][..., 1:] - (1.0 + q)[..., None] * x[far][..., 1:]
            with np.errstate(over="ignore"):
                ws *= (d[far] / np.sqrt(1.0 + 2.0 * q))[..., None]
            out[far, 1:] = ws
            out[far, 0] = einsum("...i,...i->...", ws, x[far][..., 1:] / x0[far][..., None])
        near = ~far
        if np.any(near):
            k = np.frexp(x0[near])[1][..., None]
            xs, ys = np.ldexp(x[near][..., 1:], -k), np.ldexp(y[near][..., 1:], -k)
            gap = 2.0 * np.square(np.sinh(0.5 * d[near]))
            ws = ((ys - xs) - gap[..., None] * xs) * _inv_sinhc(d[near])[..., None]
            with np.errstate(over="ignore"):
                out[near, 1:] = np.ldexp(ws, k)
            xhat0 = xs / np.ldexp(x0[near], -k[..., 0])[..., None]  # x_s / x_0
            out[near, 0] = einsum("...i,...i->...", out[near, 1:], xhat0)
        return out

    #: :meth:`mean` warns when its error estimate exceeds this fraction of the mean distance
    #: to the points (or this much, when that distance is below 1)
    MEAN_ACCURACY = 1e-8

    def mean(self, points, weights=None, *, tol=1e-12, max_iter=100, init=None):
        r"""Weighted Frechet (Karcher) mean, started nearest the origin, with an accuracy check.

        The iteration is that of :meth:`Manifold.mean`; two things differ:

        * the default start is, per batch element, the point nearest the origin (smallest
          :math:`x_0`) among those of positive weight, not the first point: logs at a base
          point are accurate to about :math:`(16 + x_0)\,\epsilon_{\mathrm{mach}}` relative
          (class notes), so the gradient is best resolved there;
        * after the iteration the result's accuracy is estimated from the class notes' law:
          the gradient :math:`\sum_i w_i \mathrm{Log}_x p_i` carries an error up to
          :math:`e_{\log} = (16 + x_0)\,\epsilon \sum_i w_i d(x, p_i)` at the returned x, which
          moves the stationary point by as much (the Frechet function's Hessian is at least 1
          on H^d), and the points themselves are resolved only to
          :math:`e_{\mathrm{pts}} = \epsilon \sum_i w_i p_{i,0}` across the radius (their
          spatial coordinates of size :math:`p_{i,0}` have metric factor 1 there; the
          input's own uncertainty, reported, not checked). When :math:`e_{\log}` exceeds
          :attr:`MEAN_ACCURACY` times :math:`\max(1, \sum_i w_i d(x, p_i))`, i.e. when the
          mean lies beyond :math:`x_0 \approx 4.5\cdot 10^7` (about 18 units from the
          origin), a :class:`~rfed.manifolds.ConvergenceWarning` gives both terms for the
          worst batch element. A gradient error above ``tol`` can stop the iteration at a
          wrong point that looks converged; this check does not depend on ``tol``.

        Parameters
        ----------
        points : array, shape ``(*batch, n_points, d + 1)``
            Points of the hyperboloid.
        weights : array, shape ``(*batch, n_points)`` or ``(n_points,)``, optional
            Non-negative; normalized to sum to one. Uniform when omitted.
        tol : float
            Stop when the Riemannian gradient norm falls below ``tol`` for every batch element.
        max_iter : int
            Iteration budget (see :meth:`Manifold.mean`).
        init : array, shape ``(*batch, d + 1)``, optional
            Starting point; by default the positive-weight point nearest the origin.

        Returns
        -------
        array, shape ``(*batch, d + 1)``
            The means.

        Warns
        -----
        ConvergenceWarning
            ``tol`` not reached (as :meth:`Manifold.mean`), or the estimated error above
            :attr:`MEAN_ACCURACY` (far from the origin).
        """
        pts = np.asarray(points, dtype=float)
        usable = (
            pts.ndim >= 2 and pts.shape[-1] == self.dim + 1 and pts.shape[-2] >= 1
            and bool(np.all(np.isfinite(pts)))
        )
        if not usable:  # karcher_mean refuses it, naming the argument
            return karcher_mean(self, pts, weights, tol=tol, max_iter=max_iter, init=init)
        w = np.broadcast_to(_normalize_weights(weights, pts.shape[-2]), pts.shape[:-1])
        if init is None:
            key = np.where(w > 0, pts[..., 0], np.inf)
            first = np.argmin(key, axis=-1)[..., None, None]
            init = np.take_along_axis(pts, first, axis=-2)[..., 0, :]
        x = karcher_mean(self, pts, weights, tol=tol, max_iter=max_iter, init=init)
        eps = np.finfo(float).eps
        spread = np.sum(w * self.dist(x[..., None, :], pts), axis=-1)
        e_log = (16.0 + x[..., 0]) * eps * spread
        e_pts = eps * np.sum(w * pts[..., 0], axis=-1)
        ratio = e_log / (self.MEAN_ACCURACY * np.maximum(spread, 1.0))
        if np.any(ratio > 1.0):
            k = np.unravel_index(np.argmax(ratio), np.shape(ratio))
            warnings.warn(
                f"{self}: the Karcher mean is resolved only to about {float(e_log[k]):.2e} in "
                f"distance (mean distance to the points {float(spread[k]):.4g}; "
                f"{float(ratio[k]):.3g} times what MEAN_ACCURACY = {self.MEAN_ACCURACY:g} "
                f"allows): float64 logs at the mean (x_0 = {float(x[k][0]):.3g}) err by up to "
                "(16 + x_0) eps relative; besides, the points (x_0 up to "
                f"{float(np.max(pts[k][..., 0])):.3g}) are themselves resolved only to eps x_0 "
                f"({float(e_pts[k]):.2e}); move the data nearer the origin (an isometry) "
                "for an accurate mean",
                ConvergenceWarning,
                stacklevel=2,
            )
        return x

    #: :meth:`transport` takes the cancellation-free form where both points are beyond this
    #: x_0 (the Lorentz-product form errs by about min(x_0, y_0) times the float64 limit)
    TRANSPORT_FAR = 64.0

    def transport(self, x, y, u):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        u = np.asarray(u, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            z = -minkowski_inner(x, y)
            coef = minkowski_inner(y, u) / (1.0 + z)
            out = u + coef[..., None] * (x + y)
        far = np.minimum(x[..., 0], y[..., 0]) > self.TRANSPORT_FAR
        if far.any():
            # (beyond x_0 y_0 = 1e150 its squares would overflow, and eps x_0 > 1e59 there)
            with np.errstate(over="ignore"):
                far = np.broadcast_to(far & (x[..., 0] * y[..., 0] < 1e150), out.shape[:-1])
            xb, yb, ub = (np.broadcast_to(a, out.shape)[far] for a in (x, y, u))
            out[far] = self._transport_far(xb, yb, ub)
        finite_in = np.all(np.isfinite(x) & np.isfinite(y) & np.isfinite(u))
        if finite_in and not np.all(np.isfinite(out)):
            # beyond x_0 y_0 = 1e150 the Lorentz products themselves (of order x_0 y_0 |u|)
            # overflow before the result does
            raise FloatingPointError(
                f"{self}: transport(x, y, u) overflowed (x_0 = {float(np.max(x[..., 0])):.3g}, "
                f"y_0 = {float(np.max(y[..., 0])):.3g}): x_0 y_0 |u|_x must stay below ~1e308"
            )
        return out

    @staticmethod
    def _lorentz_gap(x, y):
        r"""(:math:`D = x_0 y_s - y_0 x_s`, :math:`x_0 - y_0`) without cancellation.

        With :math:`\hat x = x_s / \|x_s\|` and :math:`y_s = y_\perp + (y_s\cdot\hat x)\,\hat
        x`: :math:`D = x_0 y_\perp + D_\parallel \hat x`, where :math:`D_\parallel = x_0
        (y_s\cdot\hat x) - y_0 \|x_s\|` is, when :math:`y_s\cdot\hat x > 0`, the ratio
        :math:`\big((\delta\cdot\hat x)(y_s\cdot\hat x + \|x_s\|) - \|x_s\|^2
        \|y_\perp\|^2\big) / (x_0\, y_s\cdot\hat x + y_0 \|x_s\|)` (from :math:`x_0^2 = 1 +
        \|x_s\|^2`), :math:`\delta = y_s - x_s`, and :math:`x_0 - y_0 = -\delta\cdot(x_s +
        y_s) / (x_0 + y_0)`. Both products of the direct form are about :math:`x_0 y_0`, and
        their difference can be as small as :math:`\sinh d` (points on one ray). The rounding of
        :math:`y_\perp` along :math:`\hat x` (:math:`\epsilon \|y_s\|`, amplified by
        :math:`x_0`) is projected out.
        """
        x0, y0 = x[..., 0], y[..., 0]
        xs, ys = x[..., 1:], y[..., 1:]
        nx = np.sqrt(np.einsum("...i,...i->...", xs, xs))
        xh = xs / np.where(nx > 0, nx, 1.0)[..., None]
        yx = np.einsum("...i,...i->...", ys, xh)
        yperp = ys - yx[..., None] * xh
        yperp -= np.einsum("...i,...i->...", yperp, xh)[..., None] * xh
        delta = ys - xs
        dx = np.einsum("...i,...i->...", delta, xh)
        p2 = np.einsum("...i,...i->...", yperp, yperp)
        pos = yx > 0
        den = np.where(pos, x0 * yx + y0 * nx, 1.0)
        dpar = np.where(pos, (dx * (yx + nx) - nx * nx * p2) / den, x0 * yx - y0 * nx)
        gap = -np.einsum("...i,...i->...", delta, xs + ys) / (x0 + y0)
        return x0[..., None] * yperp + dpar[..., None] * xh, gap

    def _transport_far(self, x, y, u):
        r"""Transport with :math:`\langle y, u\rangle_L = u_s\cdot D / x_0` (u tangent at x, its
        time coordinate :math:`u_s\cdot x_s / x_0`) and :math:`1 + z = 2 + (\|D\|^2 + (x_0 -
        y_0)^2) / (2 x_0 y_0)` from :meth:`_lorentz_gap`, where the Lorentz products cancel."""
        d, gap = self._lorentz_gap(x, y)
        x0, y0 = x[..., 0], y[..., 0]
        r = 1.0 / (np.sqrt(x0) * np.sqrt(y0))
        dr = d * r[..., None]
        half_gap = 0.5 * (np.einsum("...i,...i->...", dr, dr) + np.square(gap * r))  # z - 1
        yu = np.einsum("...i,...i->...", u[..., 1:], d / x0[..., None])
        coef = yu / (2.0 + half_gap)
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
        with np.errstate(over="ignore", invalid="ignore"):
            xg = np.sum(x * np.asarray(egrad, dtype=float), axis=-1, keepdims=True)
            out = self.proj(x, self._flip(ehess)) + xg * np.asarray(u, dtype=float)
        if not np.all(np.isfinite(out)):
            self._refuse("ehess2rhess(x, egrad, ehess, u)",
                         f"(x . egrad) u (of order x_0^2 |egrad| |u|_x, x_0 = "
                         f"{float(np.max(x[..., 0])):.4g})")
        return out

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
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.array(u[..., 1:] - u[..., :1] * x[..., 1:] / (1.0 + x[..., :1]))
        bad = ~np.all(np.isfinite(out), axis=-1)
        if np.any(bad):  # u_0 x_s overflows beyond x_0 |u| ~ 1e154: x_s / (1 + x_0) first
            bad &= np.all(np.isfinite(x) & np.isfinite(u), axis=-1)
            xb, ub = (np.broadcast_to(a, bad.shape + x.shape[-1:])[bad] for a in (x, u))
            out[bad] = ub[..., 1:] - ub[..., :1] * (xb[..., 1:] / (1.0 + xb[..., :1]))
        return out

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

        Raises
        ------
        FloatingPointError
            When some :math:`|p| \ge 1` (the image would be inf or on the wrong sheet).
        """
        p = np.asarray(p, dtype=float)
        sq = np.sum(p * p, axis=-1, keepdims=True)
        if np.any(sq >= 1.0):
            raise FloatingPointError(
                "Hyperboloid.from_poincare(p): |p| >= 1 (up to "
                f"{float(np.sqrt(np.max(sq))):.17g}): not a point of the open ball; the ball "
                "resolves points only out to x_0 ~ 1e16 (1 - |p| ~ 1 / x_0), and to_poincare "
                "rounds farther points onto its boundary"
            )
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
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(u, axis=-1), 1e-300)
            out = np.array(np.abs(minkowski_inner(x, u)) / scale)
        bad = ~(np.isfinite(out) & np.isfinite(scale))
        if np.any(bad):  # far out: x_0 |u| beyond 1.8e308; both scaled by powers of two first
            bad &= np.all(np.isfinite(x) & np.isfinite(u), axis=-1)
            xb, ub = (np.broadcast_to(a, bad.shape + x.shape[-1:])[bad] for a in (x, u))
            xb, ub = (np.ldexp(a, -np.frexp(np.max(np.abs(a), axis=-1))[1][..., None])
                      for a in (xb, ub))
            den = np.linalg.norm(xb, axis=-1) * np.linalg.norm(ub, axis=-1)
            out[bad] = np.abs(minkowski_inner(xb, ub)) / np.where(den > 0, den, 1.0)
        return out[()]

    point_violation_description = (
        "violation is |<x, x>_L + 1| / (1 + ||x||^2), plus 1 when x_0 <= 0 (lower sheet)"
    )
    tangent_violation_description = "violation is |<x, u>_L| / (||x|| ||u||) (Euclidean norms)"
