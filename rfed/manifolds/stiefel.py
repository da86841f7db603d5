"""The Stiefel manifold St(n, p) of orthonormal n x p frames, embedded (Euclidean) metric."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rfed.manifolds._stiefel_log import shooting_log
from rfed.manifolds.base import Manifold, _entry_scaled, as_generator, size_tuple

__all__ = ["Stiefel", "StiefelLogError", "skew_expm", "skew_logm"]


class StiefelLogError(ArithmeticError):
    """Raised by :meth:`Stiefel.log` where no unique minimizing geodesic exists: on the cut
    locus (y = -x on St(n, 1), a rotation by pi on O(n), two minimizing geodesics or a
    conjugate point in general), and between the two components of O(n). The message says
    which."""


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + _mT(a))


def _skew(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a - _mT(a))


def skew_logm(v: np.ndarray) -> np.ndarray:
    r"""Principal logarithm of special orthogonal matrices, batched, shape ``(..., k, k)``.

    Through the Cayley transform :math:`Z = (V - I)(V + I)^{-1}` (skew-symmetric, eigenvalues
    :math:`i\tan(\theta/2)`): :math:`\log V = 2\,\mathrm{atanh}(Z) = -2i\,\arctan(iZ)`, the last a
    function of the Hermitian matrix :math:`iZ` evaluated with ``eigh``. Clustered rotation angles
    stay accurate (``eig`` of V itself returns ill-conditioned eigenvectors there). Defined for
    rotation angles below pi (V + I invertible); the result is skew-symmetric.

    Parameters
    ----------
    v : ndarray, shape ``(..., k, k)``
        Special orthogonal matrices.

    Returns
    -------
    ndarray, shape ``(..., k, k)``
        Skew-symmetric logarithms.
    """
    v = np.asarray(v, dtype=float)
    eye = np.eye(v.shape[-1])
    # Z = (V - I)(V + I)^{-1}, i.e. Z^T = (V + I)^{-T} (V - I)^T
    z = _skew(_mT(np.linalg.solve(_mT(v + eye), _mT(v - eye))))
    mu, w = np.linalg.eigh(1j * z)
    out = (-2j * (w * np.arctan(mu)[..., None, :]) @ np.conj(_mT(w))).real
    return _skew(out)


def _skew_logm_or_nan(v: np.ndarray) -> np.ndarray:
    """:func:`skew_logm`, with NaN for the matrices with a rotation angle of exactly pi
    (V + I singular) instead of a ``LinAlgError`` for the whole batch."""
    try:
        return skew_logm(v)
    except np.linalg.LinAlgError:
        flat = v.reshape((-1,) + v.shape[-2:])
        out = np.empty(flat.shape)
        for i, vi in enumerate(flat):
            try:
                out[i] = skew_logm(vi)
            except np.linalg.LinAlgError:
                out[i] = np.nan
        return out.reshape(v.shape)


def skew_expm(k: np.ndarray) -> np.ndarray:
    r"""Exponential of skew-symmetric matrices, batched, shape ``(..., m, m)``.

    With :math:`-K^2 = V \mathrm{diag}(\theta^2) V^T` (one real symmetric ``eigh``; K commutes
    with :math:`K^2`): :math:`e^K = \cos\Theta + K\,\mathrm{sinc}\,\Theta`,
    :math:`\Theta = \sqrt{-K^2}`, evaluated as
    :math:`I + V\mathrm{diag}(-2\sin^2(\theta/2))V^T + K\,V\mathrm{diag}(\sin\theta/
    \theta)V^T`: the deviation from I keeps its relative accuracy for tiny K (the log
    iteration needs it); orthogonal up to rounding; about 1.7x faster than the eigenvectors
    of the complex Hermitian :math:`iK` and than a Pade ``expm``.

    Parameters
    ----------
    k : ndarray, shape ``(..., m, m)``
        Skew-symmetric matrices.

    Returns
    -------
    ndarray, shape ``(..., m, m)``
        Special orthogonal matrices.
    """
    k = np.asarray(k, dtype=float)
    # matrices with entries beyond 1e100 are scaled first (K^2 would overflow)
    big = np.max(np.abs(k), axis=(-2, -1), keepdims=True, initial=0.0)
    scale = np.where(big > 1e100, big, 1.0)
    ks = k / scale
    sq = -(ks @ ks)
    lam, v = np.linalg.eigh(0.5 * (sq + _mT(sq)))
    theta = scale[..., 0] * np.sqrt(np.maximum(lam, 0.0))
    vt = _mT(v)
    dev = (v * (-2.0 * np.square(np.sin(0.5 * theta)))[..., None, :]) @ vt
    sinc = (v * (scale[..., 0] * np.sinc(theta / np.pi))[..., None, :]) @ vt
    return np.eye(k.shape[-1]) + dev + ks @ sinc


#: 1/j! for the Taylor polynomial of degree 16 of :func:`_expm_minus_identity`
_INV_FACTORIAL = tuple(1.0 / math.factorial(j) for j in range(17))
#: the 1-norm the argument is scaled below: the Taylor remainder of degree 16 is then at most
#: 0.75^17 / 17! e^0.75 < 5e-17, below half a unit in the last place of 1
_TAYLOR_NORM = 0.75


def _expm_minus_identity(k: np.ndarray) -> np.ndarray:
    r""":math:`e^K - I` of small square matrices, batched, shape ``(..., m, m)``.

    Scaling and squaring of the Taylor polynomial of degree 16 (Higham 2005, SIAM J. Matrix
    Anal. Appl. 26(4), 1179-1193, section 2; Paterson and Stockmeyer's evaluation, seven
    products): each matrix is scaled by :math:`2^{-s}` to a 1-norm of at most 0.75, where the
    truncation error is below the rounding of 1, and squared back s times in the deviation
    form :math:`D \leftarrow 2D + D^2` (:math:`(I + D)^2 = I + 2D + D^2`), so the deviation from
    I keeps its relative accuracy for tiny K. Batched matrix products only: for the 2p x 2p
    blocks of :meth:`Stiefel.exp` about three times faster than an ``eigh`` per matrix, and
    more accurate for long tangent vectors (no eigenvalues of :math:`K^2`, whose rounding grows
    with :math:`\|K\|^2`).

    Parameters
    ----------
    k : ndarray, shape ``(..., m, m)``
        Real square matrices with finite entries.

    Returns
    -------
    ndarray, shape ``(..., m, m)``
        :math:`e^K - I`.
    """
    norm = np.max(np.sum(np.abs(k), axis=-2), axis=-1)
    ratio = np.where(np.isfinite(norm), norm, 0.0) / _TAYLOR_NORM
    squarings = np.ceil(np.log2(np.maximum(ratio, 1.0))).astype(np.int64)
    ks = k * np.ldexp(1.0, -squarings)[..., None, None]
    c = _INV_FACTORIAL
    eye = np.eye(k.shape[-1])
    k2 = ks @ ks
    k3 = k2 @ ks
    k4 = k2 @ k2

    def chunk(j: int) -> np.ndarray:  # sum_{i < 4} K^i / (4j + i)!
        return c[4 * j] * eye + c[4 * j + 1] * ks + c[4 * j + 2] * k2 + c[4 * j + 3] * k3

    # sum_{1 <= i <= 16} K^i / i! = (K + K^2/2 + K^3/6) + K^4 (chunk 1 + K^4 (chunk 2 + ...))
    acc = chunk(3) + c[16] * k4
    acc = chunk(2) + k4 @ acc
    acc = chunk(1) + k4 @ acc
    dev = (ks + c[2] * k2 + c[3] * k3) + k4 @ acc
    for step in range(int(squarings.max(initial=0))):
        todo = squarings > step
        if todo.all():
            dev = 2.0 * dev + dev @ dev
        else:
            part = dev[todo]
            dev[todo] = 2.0 * part + part @ part
    return dev


class Stiefel(Manifold):
    r"""Orthonormal frames :math:`\mathrm{St}(n, p) = \{X \in \mathbb{R}^{n\times p} :
    X^T X = I_p\}` with the metric induced by the Frobenius inner product (the embedded, or
    Euclidean, metric).

    Parameters
    ----------
    n, p : int
        ``1 <= p <= n``; points and tangent vectors have shape ``(n, p)``; the intrinsic dimension
        is :math:`np - p(p+1)/2`.

    Notes
    -----
    * :math:`T_X = \{U : X^T U + U^T X = 0\}`;
      :math:`\mathrm{proj}_X V = V - X\,\mathrm{sym}(X^T V)`.
    * Exp in closed form (Edelman, Arias and Smith 1998, eq. 2.7): with :math:`A = X^T U`,
      :math:`S = U^T U`, :math:`\mathrm{Exp}_X U = [X, U]\,\mathrm{expm}\begin{pmatrix}A & -S\\
      I & A\end{pmatrix} \begin{pmatrix}\mathrm{expm}(-A)\\ 0\end{pmatrix}`, evaluated in the
      equivalent form of Zimmermann and Hueper (2022) whose 2p x 2p block is skew-symmetric
      (below); both matrix exponentials by scaling and squaring of a Taylor polynomial in
      batched matrix products, only the p columns of the block's that the map uses kept.
    * Log: the initial velocity of the **minimizing** geodesic, for every pair off the cut
      locus. O(n) (p = n): the principal logarithm :math:`X\,\mathrm{logm}(X^T Y)`
      (minimizing while every rotation angle of :math:`X^T Y` is below pi; injectivity radius
      :math:`\sqrt2\pi`). St(n, 1): the sphere's closed form. Otherwise first the fixed-point
      iteration of Zimmermann (2017, SIAM J. Matrix Anal. Appl. 38(2), 322-342) in the form
      Zimmermann and Hueper (2022, arXiv:2103.12046) give for the Euclidean metric: writing the
      geodesic as :math:`Y e^{A} = [X, Q]\,\mathrm{expm}\begin{pmatrix}2A & -B^T\\ B & 0
      \end{pmatrix}\begin{pmatrix}I\\0\end{pmatrix}` (Q an orthonormal basis of
      :math:`(I - XX^T)Y`), the orthogonal completion V of :math:`[X^T Y e^A; Q^T Y e^A]` is
      rotated until the lower-right block of :math:`\log V` vanishes and its upper-left block
      equals 2A (stops when both residuals fall below ``log_tol`` times
      :math:`\|Y - X\|_F`, at most ``log_max_iter`` iterations). A converged velocity shorter
      than the injectivity radius pi (Zimmermann and Stoye 2024, arXiv:2405.02268) is the
      unique minimizer. Every other pair goes to a globally convergent shooting method
      (``rfed/manifolds/_stiefel_log.py``): Newton on the reduced problem in span[X, Q] with
      the exact Jacobian of the matrix exponential, continued along paths from X to Y, and
      the shortest geodesic found is returned. Two distinct shortest geodesics, a conjugate
      point, y = -x on St(n, 1), a rotation by pi or different components on O(n) raise
      :class:`StiefelLogError` with the reason.
    * Transport: **not parallel**. :meth:`transport` is the projection vector transport
      :math:`\mathrm{proj}_Y(U)` (not an isometry; ``has_parallel_transport = False``, and the
      contract tests check isometry only on manifolds that set it to ``True``).
    * Retraction: polar, :math:`(X + U)(I + U^T U)^{-1/2}` (second order).
    * Tangent Gaussian: orthogonal projection of an ambient Gaussian (the metric is induced).
    * Orthonormal basis of :math:`T_X`: :math:`X (E_{ij} - E_{ji})/\sqrt2` (i < j) and
      :math:`X_\perp E_{kj}`, with :math:`X_\perp` from a complete QR of X.
    """

    #: transport() is a vector transport (projection), not parallel transport
    has_parallel_transport = False
    #: relative tolerance and iteration cap of Zimmermann's log iteration (the pairs it leaves
    #: go to the shooting method)
    log_tol = 1e-12
    log_max_iter = 100

    def __init__(self, n: int, p: int):
        for name, v in (("n", n), ("p", p)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Stiefel: argument '{name}' must be an int >= 1, got {v!r}")
        if p > n:
            raise ValueError(f"Stiefel: argument 'p' ({p}) must not exceed 'n' ({n})")
        self.n, self.p = int(n), int(p)
        self.dim = self.n * self.p - self.p * (self.p + 1) // 2
        self.point_shape = (self.n, self.p)
        self.name = f"Stiefel({self.n}, {self.p})"
        self._iu = np.triu_indices(self.p, 1)

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        return np.sum(np.asarray(u, dtype=float) * np.asarray(v, dtype=float), axis=(-2, -1))

    def norm(self, x, u):
        return np.linalg.norm(np.asarray(u, dtype=float), axis=(-2, -1))

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        a = _mT(x) @ v
        a += _mT(a)
        a *= 0.5
        return v - x @ a

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian :math:`\mathrm{proj}_X(H - U\,\mathrm{sym}(X^T G))` (Weingarten map
        of the embedded Stiefel manifold).

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
        return self.proj(x, np.asarray(ehess, dtype=float) - np.asarray(u) @ _sym(_mT(x) @ g))

    # ------------------------------------------------------------------ maps
    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        x, u = np.broadcast_arrays(x, u)
        a = _skew(_mT(x) @ u)
        # the same geodesic in Zimmermann and Hueper's form, whose block matrix is skew:
        # [X, Q] expm([[2A, -B^T], [B, 0]]) [I; 0] expm(-A), Q B = (I - X X^T) U
        q, b = np.linalg.qr(u - x @ a)
        block = np.concatenate(
            [np.concatenate([2.0 * a, -_mT(b)], axis=-1),
             np.concatenate([b, np.zeros_like(a)], axis=-1)], axis=-2
        )
        left = _expm_minus_identity(block)[..., :, : self.p]
        left[..., : self.p, :] += np.eye(self.p)
        right = left @ (_expm_minus_identity(-a) + np.eye(self.p))
        # [X, Q] @ right without forming [X, Q] (an n x 2p copy per point)
        return x @ right[..., : self.p, :] + q @ right[..., self.p :, :]

    def retract(self, x, u):
        """Polar retraction :math:`(X + U)(I + U^T U)^{-1/2}`.

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
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        w, v = np.linalg.eigh(np.eye(self.p) + _mT(u) @ u)
        return (x + u) @ ((v / np.sqrt(w)[..., None, :]) @ _mT(v))

    def log(self, x, y):
        """The initial velocity of the minimizing geodesic from ``x`` to ``y``.

        Raises :class:`StiefelLogError` only where no unique minimizing geodesic exists (the
        cut locus, and on O(n) points of different components); see the class notes for the
        method.

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
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        x, y = np.broadcast_arrays(x, y)
        if self.p == self.n:
            out = self._log_orthogonal(x, y)
        elif self.p == 1:
            out = self._log_sphere(x, y)
        else:
            out, converged = self._log_zimmermann(x, y)
            lengths = np.linalg.norm(out, axis=(-2, -1))
            # a geodesic shorter than the injectivity radius (pi) is the unique minimizer
            certified = converged & (lengths < np.pi * (1.0 - 1e-9))
            if not np.all(certified):
                out = np.array(out)
                for idx in map(tuple, np.argwhere(~certified)):
                    known = (out[idx],) if converged[idx] else ()
                    scale = max(float(np.linalg.norm(y[idx] - x[idx])), 1.0)
                    vel, reason = shooting_log(x[idx], y[idx], 1e-14 * scale, known,
                                               inj_radius=np.pi)
                    if vel is None:
                        raise StiefelLogError(f"{self}: log(x, y) at batch index {idx}: {reason}")
                    out[idx] = vel
        return np.where(np.all(x == y, axis=(-2, -1), keepdims=True), 0.0, out)

    def _log_orthogonal(self, x, y):
        """O(n) (p = n): the principal logarithm, ``X logm(X^T Y)``; minimizing while every
        rotation angle is below pi (injectivity radius sqrt(2) pi in this metric)."""
        v = _mT(x) @ y
        det = np.linalg.det(v)
        if np.any(det < 0):
            idx = tuple(int(i) for i in np.unravel_index(np.argmin(det), det.shape))
            raise StiefelLogError(
                f"{self}: log(x, y) at batch index {idx}: det(x^T y) = -1, x and y lie in the "
                "two different connected components of O(n) and no geodesic joins them"
            )
        # rotation angles from cos = eigenvalues of sym(V): the Cayley form of skew_logm is
        # accurate while every angle stays below ~3 (V + I well conditioned)
        cos_min = np.linalg.eigvalsh(_sym(v))[..., 0]
        near_pi = cos_min < np.cos(3.0)
        out = x @ skew_logm(np.where(near_pi[..., None, None], np.eye(self.n), v))
        for idx in map(tuple, np.argwhere(near_pi)):
            from rfed.manifolds._stiefel_log import _principal_log

            lg = _principal_log(v[idx])
            if lg is None or np.pi - np.max(np.abs(np.linalg.eigvalsh(1j * lg))) < 1e-10:
                raise StiefelLogError(
                    f"{self}: log(x, y) at batch index {idx}: y lies on the cut locus of x (a "
                    "rotation angle of x^T y is pi: two minimizing geodesics)"
                )
            out[idx] = x[idx] @ lg
        return out

    def _log_sphere(self, x, y):
        """St(n, 1) is the unit sphere with its round metric: the sphere's closed form."""
        from rfed.manifolds.sphere import AntipodalError, Sphere

        try:
            return Sphere(self.n - 1).log(x[..., 0], y[..., 0])[..., None]
        except AntipodalError:
            raise StiefelLogError(
                f"{self}: log(x, y) is undefined for y = -x (the cut locus of x on St(n, 1), the "
                "sphere): every unit direction starts a minimizing geodesic of length pi"
            ) from None

    def _log_zimmermann(self, x, y):
        """Zimmermann's fixed-point iteration, batched; returns ``(velocity, converged)``.

        Elements stop updating once converged; the iteration stops after
        :attr:`log_max_iter` iterations (the pairs left are handed to the shooting method).
        """
        p = self.p
        m = _mT(x) @ y
        q, nn = np.linalg.qr(y - x @ m)
        top = np.concatenate([m, nn], axis=-2)  # (2p, p), orthonormal columns
        comp = np.linalg.qr(top, mode="complete")[0][..., :, p:]
        # Procrustes: rotate the completion so that its lower block is symmetric PSD (V near I)
        us, _, vt = np.linalg.svd(comp[..., p:, :])
        comp = comp @ _mT(vt) @ _mT(us)
        v = np.concatenate([top, comp], axis=-1)
        flip = np.linalg.det(v) < 0
        v[..., -1] = np.where(flip[..., None], -v[..., -1], v[..., -1])
        a = np.zeros(m.shape)
        scale = np.linalg.norm(y - x, axis=(-2, -1))
        converged = scale == 0
        lv = np.zeros(v.shape)
        for _ in range(self.log_max_iter):
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                lv_new = _skew_logm_or_nan(v)
            lv = np.where(converged[..., None, None], lv, lv_new)
            c = lv[..., p:, p:]
            da = 0.5 * lv[..., :p, :p] - a
            res = np.sqrt(np.sum(c * c, axis=(-2, -1)) + np.sum(da * da, axis=(-2, -1)))
            converged = converged | (res <= self.log_tol * scale)
            if np.all(converged):
                break
            live = ~converged[..., None, None]
            a = np.where(live, a + da, a)
            with np.errstate(invalid="ignore", over="ignore"):
                v_new = np.concatenate([top @ skew_expm(a), v[..., :, p:] @ skew_expm(-c)],
                                       axis=-1)
            v = np.where(live, v_new, v)
        converged = converged & np.all(np.isfinite(lv), axis=(-2, -1))
        out = x @ a + q @ np.where(np.isfinite(lv), lv, 0.0)[..., p:, :p]
        return out, converged

    def transport(self, x, y, u):
        """Projection vector transport :math:`\\mathrm{proj}_Y(U)` (not parallel, not isometric).

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
        out = self.proj(y, u)
        shape = np.broadcast_shapes(np.shape(x), out.shape)
        return out if out.shape == shape else np.broadcast_to(out, shape).copy()

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """Haar-distributed frames: QR of a Gaussian matrix with the signs of diag(R) fixed.

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
        q, r = np.linalg.qr(as_generator(rng).standard_normal(size + self.point_shape))
        signs = np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
        return q * signs[..., None, :]

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        shape = np.broadcast_shapes(x.shape[:-2], sigma.shape) + self.point_shape
        z = self.proj(x, as_generator(rng).standard_normal(shape))
        return z * sigma[..., None, None]

    # ------------------------------------------------------------------ coordinates
    def _complement(self, x):
        """An orthonormal basis of the orthogonal complement of span(X), ``(*batch, n, n - p)``."""
        return np.linalg.qr(np.asarray(x, dtype=float), mode="complete")[0][..., :, self.p :]

    def to_coords(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        omega = _mT(x) @ u
        k = _mT(self._complement(x)) @ u
        upper = np.sqrt(2.0) * omega[..., self._iu[0], self._iu[1]]
        return np.concatenate([upper, k.reshape(k.shape[:-2] + (-1,))], axis=-1)

    def from_coords(self, x, coords):
        x = np.asarray(x, dtype=float)
        c = np.asarray(coords, dtype=float)
        n_skew = self.p * (self.p - 1) // 2
        omega = np.zeros(c.shape[:-1] + (self.p, self.p))
        omega[..., self._iu[0], self._iu[1]] = c[..., :n_skew] / np.sqrt(2.0)
        omega = omega - _mT(omega)
        k = c[..., n_skew:].reshape(c.shape[:-1] + (self.n - self.p, self.p))
        return x @ omega + self._complement(x) @ k

    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim)
        xb = x[..., None, :, :]
        return self.from_coords(xb, np.broadcast_to(eye, x.shape[:-2] + eye.shape))

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        x = np.asarray(x, dtype=float)
        return np.linalg.norm(_mT(x) @ x - np.eye(self.p), axis=(-2, -1))

    def tangent_violation(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        u, big = _entry_scaled(u, (-2, -1))  # huge vectors do not overflow the norms
        return np.linalg.norm(_sym(_mT(x) @ u), axis=(-2, -1)) / np.maximum(
            np.linalg.norm(u, axis=(-2, -1)), 1.0 / big)

    point_violation_description = "violation is ||X^T X - I||_F"
    tangent_violation_description = "violation is ||sym(X^T U)||_F / max(1, ||U||_F)"
