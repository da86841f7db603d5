r"""The special orthogonal group SO(n) with its bi-invariant metric.

:math:`\langle U, V\rangle_X = \mathrm{tr}(U^T V)` (the metric induced by the Frobenius inner
product, which is bi-invariant on SO(n)); geodesics are :math:`X \mathrm{expm}(t\Omega)`. The
formulas are those of a compact Lie group with a bi-invariant metric: Absil, Mahony and
Sepulchre, *Optimization Algorithms on Matrix Manifolds*, Princeton 2008, section 3.6, and
do Carmo, *Riemannian Geometry*, 1992, ch. 3 (parallel transport along
:math:`X e^{t\Omega}`: :math:`\xi(t) = e^{-t\Omega/2}\xi_0 e^{t\Omega/2}` in the
left-trivialization, from :math:`\nabla_{X\xi} X\eta = \tfrac12 X[\xi, \eta]`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, as_generator, size_tuple
from rfed.manifolds.stiefel import Stiefel, StiefelLogError, skew_expm

__all__ = ["SpecialOrthogonal"]


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


class SpecialOrthogonal(Manifold):
    r"""Rotations :math:`\mathrm{SO}(n) = \{X : X^T X = I, \det X = 1\}`, bi-invariant metric
    :math:`\langle U, V\rangle = \mathrm{tr}(U^T V)`.

    Parameters
    ----------
    n : int
        ``n >= 2``; points and tangent vectors have shape ``(n, n)``; intrinsic dimension
        :math:`n(n-1)/2`.

    Notes
    -----
    Tangent vectors are :math:`U = X\Omega`, :math:`\Omega` skew-symmetric.

    * :math:`\mathrm{Exp}_X U = X\,\mathrm{expm}(X^T U)`; :math:`\mathrm{Log}_X Y =
      X\,\mathrm{logm}(X^T Y)`, the principal logarithm (the minimizing geodesic while every
      rotation angle of :math:`X^T Y` is below pi: injectivity radius :math:`\sqrt2\pi`; a
      rotation by pi, the cut locus, raises :class:`~rfed.manifolds.StiefelLogError`);
      :math:`d(X, Y) = \|\mathrm{logm}(X^T Y)\|_F`. The maps are those of
      :class:`~rfed.manifolds.Stiefel` with p = n (the same metric).
    * Parallel transport along the geodesic from X to :math:`Y = X e^{\Omega}`:
      :math:`P(U) = X e^{\Omega/2} (X^T U) e^{\Omega/2}` (an isometry).
    * Tangent Gaussian :math:`X\Omega`, :math:`\Omega` skew with independent
      :math:`N(0, \sigma^2/2)` entries above the diagonal: coordinates
      :math:`N(0, \sigma^2 I)` in the orthonormal basis :math:`X(E_{ij} - E_{ji})/\sqrt2`.
    * Sectional curvature :math:`\tfrac14\|[\xi, \eta]\|^2 \ge 0`: the Karcher mean takes
      unit steps.
    """

    def __init__(self, n: int):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 2:
            raise ValueError(f"SpecialOrthogonal: argument 'n' must be an int >= 2, got {n!r}")
        self.n = int(n)
        self.dim = self.n * (self.n - 1) // 2
        self.point_shape = (self.n, self.n)
        self.name = f"SpecialOrthogonal({self.n})"
        self._stiefel = Stiefel(self.n, self.n)
        self._iu = np.triu_indices(self.n, 1)

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        return np.sum(np.asarray(u, dtype=float) * np.asarray(v, dtype=float), axis=(-2, -1))

    def norm(self, x, u):
        return np.linalg.norm(np.asarray(u, dtype=float), axis=(-2, -1))

    def dist(self, x, y):
        return np.linalg.norm(self.log(x, y), axis=(-2, -1))

    def proj(self, x, v):
        x = np.asarray(x, dtype=float)
        a = _mT(x) @ np.asarray(v, dtype=float)
        return x @ (0.5 * (a - _mT(a)))

    def ehess2rhess(self, x, egrad, ehess, u):
        r""":math:`\mathrm{proj}_X(H - U\,\mathrm{sym}(X^T G))` (SO(n) is an open part of
        St(n, n), with the same embedded metric).

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
        return self._stiefel.ehess2rhess(x, egrad, ehess, u)

    # ------------------------------------------------------------------ maps
    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        a = _mT(x) @ np.asarray(u, dtype=float)
        return x @ skew_expm(0.5 * (a - _mT(a)))

    def retract(self, x, u):
        """Polar retraction (the rotation nearest to X + U; det stays +1 for ``||U|| < 1``).

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
        return self._stiefel.retract(x, u)

    def log(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        if np.any(np.linalg.det(x) < 0) or np.any(np.linalg.det(y) < 0):
            raise StiefelLogError(f"{self}: log(x, y) needs rotations (det +1) for both points")
        return self._stiefel.log(x, y)

    def transport(self, x, y, u):
        x, y, u = np.broadcast_arrays(
            np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(u, dtype=float)
        )
        omega = _mT(x) @ self.log(x, y)
        half = skew_expm(0.5 * (0.5 * (omega - _mT(omega))))
        xi = _mT(x) @ u
        return x @ (half @ (0.5 * (xi - _mT(xi))) @ half)

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """Haar-distributed rotations (Haar on O(n), one column flipped where det = -1).

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
        q = self._stiefel.random_point(rng, size_tuple(size))
        flip = np.linalg.det(q) < 0
        q[..., :, 0] = np.where(flip[..., None], -q[..., :, 0], q[..., :, 0])
        return q

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        shape = np.broadcast_shapes(x.shape[:-2], sigma.shape) + self.point_shape
        z = as_generator(rng).standard_normal(shape)
        # (Z - Z^T) / 2 has entries N(0, 1/2) above the diagonal
        return x @ (0.5 * (z - _mT(z))) * sigma[..., None, None]

    # ------------------------------------------------------------------ coordinates
    def to_coords(self, x, u):
        omega = _mT(np.asarray(x, dtype=float)) @ np.asarray(u, dtype=float)
        return np.sqrt(2.0) * omega[..., self._iu[0], self._iu[1]]

    def from_coords(self, x, coords):
        c = np.asarray(coords, dtype=float)
        omega = np.zeros(c.shape[:-1] + self.point_shape)
        omega[..., self._iu[0], self._iu[1]] = c / np.sqrt(2.0)
        return np.asarray(x, dtype=float) @ (omega - _mT(omega))

    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim)
        return self.from_coords(x[..., None, :, :], np.broadcast_to(eye, x.shape[:-2] + eye.shape))

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        x = np.asarray(x, dtype=float)
        orth = np.linalg.norm(_mT(x) @ x - np.eye(self.n), axis=(-2, -1))
        return orth + np.where(np.linalg.det(x) > 0, 0.0, 1.0)

    def tangent_violation(self, x, u):
        return self._stiefel.tangent_violation(x, u)

    point_violation_description = "violation is ||X^T X - I||_F, plus 1 when det X <= 0"
    tangent_violation_description = "violation is ||sym(X^T U)||_F / max(1, ||U||_F)"
