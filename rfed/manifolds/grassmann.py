"""The Grassmann manifold Gr(n, p) of p-dimensional subspaces of R^n (orthonormal frames)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, _entry_scaled, as_generator
from rfed.manifolds.stiefel import Stiefel

__all__ = ["Grassmann", "principal_angles"]


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _aligned(x: np.ndarray, y: np.ndarray):
    r"""Principal angles and the horizontal direction from span(X) to span(Y).

    Returns ``(w, theta, r, y_star)`` with :math:`(I - XX^T) Y_* = W \sin\Theta R^T`,
    :math:`X^T Y_* = R \cos\Theta R^T` and :math:`Y_* = Y \Psi` the representative of span(Y)
    closest to X (orthogonal Procrustes, :math:`\Psi` orthogonal); angles descending.

    Accurate at both ends: the principal vectors R of the small angles (at most pi/4) are
    the right singular vectors of :math:`(I - XX^T)(Y_* - X)` (no cancellation between
    nearly equal frames: tiny angles keep their relative digits), those of the large angles
    the singular vectors of :math:`X^T Y` (whose singular values, the cosines, separate
    angles near pi/2 that the sines, all rounding to 1 there, cannot; a pair with no angle
    above pi/4 uses the first factorization alone, sines from its singular values). With R
    fixed, for pairs with a large angle,
    :math:`\sin\theta_i = \|(I - XX^T) Y_* r_i\|`, :math:`\cos\theta_i =
    r_i^T X^T Y_* r_i` (second order in an error of :math:`r_i`) and
    :math:`\theta = \mathrm{atan2}(\sin, \cos)`: never the ill-conditioned arccos of a
    cosine near 1 or arcsin of a sine near 1.
    """
    m = _mT(y) @ x  # (p, p)
    us, cos_sv, vt = np.linalg.svd(m)
    y_star = y @ (us @ vt)  # Y Psi with Psi = U V^T maximizes tr(X^T Y Psi)
    d = y_star - x
    perp = d - x @ (_mT(x) @ d)  # = (I - XX^T) Y_*
    # angles above pi/4 (cosines below 1/sqrt(2)) take their principal vectors from X^T Y
    large = cos_sv[..., ::-1] < np.sqrt(0.5)  # per column of R (descending angles)
    any_large = np.any(large, axis=-1)
    all_large = np.all(large, axis=-1)
    if not np.all(all_large):
        w, sin, rt = np.linalg.svd(perp, full_matrices=False)
        r = _mT(rt)
        cos = np.einsum("...ki,...kl,...li->...i", r, _mT(x) @ y_star, r)
        theta = np.arctan2(sin, np.maximum(cos, 0.0))
        if not np.any(any_large):
            return w, theta, r, y_star
    # X^T Y_* = V diag(cos) V^T: V's columns by ascending cosine are the large angles first
    r_cos = _mT(vt)[..., ::-1]
    if np.all(all_large):
        r_new = r_cos
    else:
        # the two groups come from different factorizations: restore exact orthonormality by
        # the nearest orthogonal matrix (a perturbation of order eps; R is only defined up to
        # rotations within clusters of equal angles)
        ur, _, vrt = np.linalg.svd(np.where(large[..., None, :], r_cos, r))
        r_new = np.where(all_large[..., None, None], r_cos, ur @ vrt)
    z = perp @ r_new
    sin_m = np.linalg.norm(z, axis=-2)
    cos_m = np.einsum("...ki,...kl,...li->...i", r_new, _mT(x) @ y_star, r_new)
    theta_m = np.arctan2(sin_m, np.maximum(cos_m, 0.0))
    w_m = z / np.where(sin_m > 0, sin_m, 1.0)[..., None, :]
    # descending angles (each group is sorted and large ones come first, but rounding may
    # swap neighbours at pi/4)
    order = np.argsort(-theta_m, axis=-1)
    theta_m = np.take_along_axis(theta_m, order, -1)
    w_m = np.take_along_axis(w_m, order[..., None, :], -1)
    r_new = np.take_along_axis(r_new, order[..., None, :], -1)
    if np.all(all_large):
        return w_m, theta_m, r_new, y_star
    # pairs with no large angle keep the sines' factorization (the same bits as before)
    pick = any_large[..., None, None]
    return (np.where(pick, w_m, w), np.where(any_large[..., None], theta_m, theta),
            np.where(pick, r_new, r), y_star)


def principal_angles(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Principal angles between span(X) and span(Y), ``(*batch, p)``, descending, in [0, pi/2].

    Parameters
    ----------
    x, y : ndarray, shape ``(*batch, n, p)``
        Orthonormal bases of the two subspaces.

    Returns
    -------
    ndarray, shape ``(*batch, p)``
        The angles.
    """
    return _aligned(np.asarray(x, dtype=float), np.asarray(y, dtype=float))[1]


class Grassmann(Manifold):
    r"""Subspaces :math:`\mathrm{Gr}(n, p)`, each represented by an n x p orthonormal frame X.

    The quotient metric of :math:`\mathrm{St}(n, p) / O(p)`: tangent vectors at (the
    representative) X are the horizontal n x p matrices :math:`U`, :math:`X^T U = 0`, with the
    Frobenius inner product. Intrinsic dimension :math:`p(n - p)`. A tangent vector belongs to
    the representative it is given at: for :math:`Y = X Q` (Q orthogonal), the same tangent
    vector is :math:`U Q`.

    Parameters
    ----------
    n, p : int
        ``1 <= p < n``.

    Notes
    -----
    Edelman, Arias and Smith (1998), section 2.5, with :math:`U = W \Sigma Z^T` (thin SVD):

    * :math:`\mathrm{Exp}_X U = X Z \cos\Sigma\, Z^T + W \sin\Sigma\, Z^T` (re-orthonormalized
      by one polar step, which keeps the span and the representative);
    * :math:`\mathrm{Log}_X Y = W \Theta R^T` with the principal angles :math:`\Theta` between
      the spans and :math:`(I - XX^T) Y_* = W \sin\Theta R^T` (see :func:`principal_angles`);
      defined when every principal angle is below pi/2 (the cut locus);
    * :math:`d(X, Y) = \|\Theta\|_2`;
    * parallel transport along :math:`t \mapsto \mathrm{Exp}_X(tH)`,
      :math:`H = W \Theta R^T`: :math:`\tau \Delta = (X R\,(-\sin\Theta) + W \cos\Theta) W^T
      \Delta + (I - W W^T)\Delta` at the representative
      :math:`Y_1 = X R \cos\Theta R^T + W \sin\Theta R^T`, then carried to the given
      representative Y by :math:`Y_1^T Y`.

    The tangent Gaussian is the projection :math:`(I - XX^T) G` of an ambient Gaussian; the
    orthonormal basis of :math:`T_X` is :math:`X_\perp E_{kj}` (complete QR of X).
    """

    has_parallel_transport = True

    def __init__(self, n: int, p: int):
        for name, v in (("n", n), ("p", p)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Grassmann: argument '{name}' must be an int >= 1, got {v!r}")
        if p >= n:
            raise ValueError(f"Grassmann: argument 'p' ({p}) must be below 'n' ({n})")
        self.n, self.p = int(n), int(p)
        self.dim = self.p * (self.n - self.p)
        self.point_shape = (self.n, self.p)
        self.name = f"Grassmann({self.n}, {self.p})"
        self._stiefel = Stiefel(self.n, self.p)

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        return np.sum(np.asarray(u, dtype=float) * np.asarray(v, dtype=float), axis=(-2, -1))

    def norm(self, x, u):
        return np.linalg.norm(np.asarray(u, dtype=float), axis=(-2, -1))

    def dist(self, x, y):
        r""":math:`\|\Theta\|_2`. Where every principal angle exceeds pi/4 (every cosine, a
        singular value of :math:`X^T Y`, below :math:`1/\sqrt2`: the bulk of random pairs) the
        angles are the arccos of the cosines, well conditioned there, from the singular values
        alone; other pairs go through :func:`principal_angles`.

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
        cos = np.linalg.svd(_mT(y) @ x, compute_uv=False)
        out = np.array(np.linalg.norm(np.arccos(np.minimum(cos, 1.0)), axis=-1))
        small = cos[..., 0] >= np.sqrt(0.5)
        if np.any(small):
            out[small] = np.linalg.norm(_aligned(x[small], y[small])[1], axis=-1)
        return out[()]

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return v - x @ (_mT(x) @ v)

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian :math:`(I - XX^T) H - U X^T G` (Absil, Mahony and Sepulchre).

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
        return self.proj(x, ehess) - np.asarray(u, dtype=float) @ (_mT(x) @ np.asarray(egrad))

    # ------------------------------------------------------------------ maps
    @staticmethod
    def _polar(y):
        """The orthonormal frame nearest to ``y`` (same span), by one eigh of Y^T Y."""
        w, v = np.linalg.eigh(_mT(y) @ y)
        return y @ ((v / np.sqrt(w)[..., None, :]) @ _mT(v))

    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        x, u = np.broadcast_arrays(x, u)
        w, s, zt = np.linalg.svd(u, full_matrices=False)
        z = _mT(zt)
        y = (x @ z * np.cos(s)[..., None, :] + w * np.sin(s)[..., None, :]) @ zt
        return self._polar(y)

    def retract(self, x, u):
        """Polar retraction: the frame nearest to X + U (second order).

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
        return self._polar(np.asarray(x, dtype=float) + np.asarray(u, dtype=float))

    def log(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        w, theta, r, _ = _aligned(x, y)
        out = (w * theta[..., None, :]) @ _mT(r)
        # the SVDs of an identity need not return exact identities: make log(x, x) exactly 0
        return np.where(np.all(x == y, axis=(-2, -1), keepdims=True), 0.0, out)

    def transport(self, x, y, u):
        x, y, u = np.broadcast_arrays(
            np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(u, dtype=float)
        )
        w, theta, r, _ = _aligned(x, y)
        # the geodesic's endpoint representative Y_1 = X R cos + W sin R^T, and its lift of u
        y1 = (x @ r * np.cos(theta)[..., None, :] + w * np.sin(theta)[..., None, :]) @ _mT(r)
        wu = _mT(w) @ u
        moved = (
            (-(x @ r) * np.sin(theta)[..., None, :] + w * np.cos(theta)[..., None, :]) @ wu
            + u
            - w @ wu
        )
        # the same tangent vector at the given representative Y = Y_1 (Y_1^T Y)
        out = moved @ (_mT(y1) @ y)
        return self.proj(y, out)

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """Uniform (Haar) subspaces, as Haar-distributed frames.

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
        return self._stiefel.random_point(rng, size)

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        shape = np.broadcast_shapes(x.shape[:-2], sigma.shape) + self.point_shape
        z = self.proj(x, as_generator(rng).standard_normal(shape))
        return z * sigma[..., None, None]

    # ------------------------------------------------------------------ coordinates
    def to_coords(self, x, u):
        k = _mT(self._stiefel._complement(x)) @ np.asarray(u, dtype=float)
        return k.reshape(k.shape[:-2] + (-1,))

    def from_coords(self, x, coords):
        c = np.asarray(coords, dtype=float)
        return self._stiefel._complement(x) @ c.reshape(c.shape[:-1] + (self.n - self.p, self.p))

    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim)
        return self.from_coords(x[..., None, :, :], np.broadcast_to(eye, x.shape[:-2] + eye.shape))

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        return self._stiefel.point_violation(x)

    def tangent_violation(self, x, u):
        x = np.asarray(x, dtype=float)
        u = np.asarray(u, dtype=float)
        u, big = _entry_scaled(u, (-2, -1))  # huge vectors do not overflow the norms
        return np.linalg.norm(_mT(x) @ u, axis=(-2, -1)) / np.maximum(
            np.linalg.norm(u, axis=(-2, -1)), 1.0 / big)

    point_violation_description = "violation is ||X^T X - I||_F (X an orthonormal representative)"
    tangent_violation_description = "violation is ||X^T U||_F / max(1, ||U||_F) (horizontal space)"
