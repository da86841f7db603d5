r"""SPD(n) under the log-Euclidean and the Bures-Wasserstein metrics (beside the
affine-invariant :class:`rfed.manifolds.SPD`).

* Log-Euclidean: Arsigny, Fillard, Pennec and Ayache, "Geometric means in a novel vector space
  structure on symmetric positive-definite matrices", SIAM J. Matrix Anal. Appl. 29(1),
  328-347, 2007. ``logm`` is an isometry onto the symmetric matrices with the Frobenius metric:
  the space is flat, geodesics are :math:`\mathrm{expm}((1-t)\log P + t\log Q)`.
* Bures-Wasserstein: Bhatia, Jain and Lim, "On the Bures-Wasserstein distance between positive
  definite matrices", Expositiones Mathematicae 37(2), 165-191, 2019 (arXiv:1712.01504); the
  Riemannian formulas as in Malago, Montrucchio and Pistone, "Wasserstein Riemannian geometry of
  Gaussian densities", Information Geometry 1, 137-179, 2018 (arXiv:1801.09269), and Han, Mishra,
  Jawanpuria and Gao, "On Riemannian optimization over positive definite matrices with the
  Bures-Wasserstein geometry", NeurIPS 2021 (arXiv:2106.00286).

Both work in the eigenbasis of the base point, :math:`P = V\mathrm{diag}(\lambda)V^T`, where
the Frechet derivatives of the matrix functions are Hadamard products (Daleckii-Krein:
:math:`Df(P)[U] = V(F \circ V^T U V)V^T`, :math:`F_{ij} = (f(\lambda_i) - f(\lambda_j)) /
(\lambda_i - \lambda_j)`; Bhatia, *Matrix Analysis*, Springer 1997, Theorem V.3.3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, _normalize_weights, as_generator, check_mean_options
from rfed.manifolds.spd import SPD

__all__ = ["SPDLogEuclidean", "SPDBuresWasserstein"]


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + _mT(a))


def _eig(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.linalg.eigh(_sym(np.asarray(p, dtype=float)))


def _in_basis(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """V^T A V."""
    return _mT(v) @ np.asarray(a, dtype=float) @ v


def _from_basis(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """V A V^T, symmetrized."""
    return _sym(v @ a @ _mT(v))


def _log_divided(lam: np.ndarray) -> np.ndarray:
    r"""First divided differences of log at the eigenvalues, :math:`F_{ij} =
    \log(\lambda_i/\lambda_j)/(\lambda_i - \lambda_j)` (:math:`1/\lambda_i` on the diagonal),
    from ``log1p(r) / r``, :math:`r = (\lambda_i - \lambda_j)/\lambda_j` (no cancellation for
    close eigenvalues)."""
    lj = lam[..., None, :]
    r = (lam[..., :, None] - lj) / lj
    small = np.abs(r) < 1e-8
    safe = np.where(small, 1.0, r)
    ratio = np.where(small, 1.0 - 0.5 * r, np.log1p(safe) / safe)
    return ratio / lj


class _SPDPoints(Manifold):
    """What the SPD metrics share: points, symmetric tangent vectors, membership."""

    def __init__(self, n: int, cls: str):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{cls}: argument 'n' must be an int >= 1, got {n!r}")
        self.n = int(n)
        self.dim = self.n * (self.n + 1) // 2
        self.point_shape = (self.n, self.n)
        self.name = f"{cls}({self.n})"
        self._ai = SPD(self.n)

    def proj(self, x, v):
        shape = np.broadcast_shapes(np.shape(x), np.shape(v))
        return np.broadcast_to(_sym(np.asarray(v, dtype=float)), shape).copy()

    def random_point(self, rng, size: int | Sequence[int] = ()):
        """``expm(S)`` for S symmetric with standard Gaussian coordinates (as :class:`SPD`)."""
        return self._ai.random_point(rng, size)

    def point_violation(self, x):
        return self._ai.point_violation(x)

    def tangent_violation(self, x, u):
        return self._ai.tangent_violation(x, u)

    point_violation_description = SPD.point_violation_description
    tangent_violation_description = SPD.tangent_violation_description

    def _sym_coords(self, a: np.ndarray) -> np.ndarray:
        """Coordinates of symmetric matrices in the Frobenius-orthonormal basis of Sym(n)."""
        return self._ai._sym_coords(a)

    def _sym_from_coords(self, c: np.ndarray) -> np.ndarray:
        return self._ai._sym_from_coords(np.asarray(c, dtype=float))

    def _sym_gaussian(self, batch: tuple[int, ...], sigma: np.ndarray, rng) -> np.ndarray:
        """Symmetric matrices with N(0, sigma^2) coordinates in the Frobenius-orthonormal
        basis: diagonal N(0, sigma^2), off-diagonal N(0, sigma^2 / 2)."""
        z = as_generator(rng).standard_normal(batch + self.point_shape)
        return _sym(z) * sigma[..., None, None]

    def tangent_basis(self, x):
        x = np.asarray(x, dtype=float)
        eye = np.eye(self.dim)
        return self.from_coords(x[..., None, :, :], np.broadcast_to(eye, x.shape[:-2] + eye.shape))


class SPDLogEuclidean(_SPDPoints):
    r"""SPD(n) with the log-Euclidean metric
    :math:`\langle U, V\rangle_P = \langle D\log_P[U], D\log_P[V]\rangle_F` (Arsigny et al.
    2007).

    Parameters
    ----------
    n : int
        Matrix size; points and tangent vectors (symmetric matrices) have shape ``(n, n)``.

    Notes
    -----
    With :math:`L = \log P` and :math:`D\exp_L = (D\log_P)^{-1}`:

    * :math:`\mathrm{Exp}_P U = \mathrm{expm}(L + D\log_P[U])`;
    * :math:`\mathrm{Log}_P Q = D\exp_L[\log Q - \log P]`;
    * :math:`d(P, Q) = \|\log P - \log Q\|_F`;
    * parallel transport :math:`D\exp_{\log Q}[D\log_P[U]]` (the space is flat: transport
      is path-independent and isometric);
    * tangent Gaussian :math:`D\exp_L[S]`, S symmetric with N(0, sigma^2) coordinates in a
      Frobenius-orthonormal basis of Sym(n) (isotropic: :math:`D\log_P` is an isometry);
    * Frechet mean in closed form, :math:`\mathrm{expm}(\sum_i w_i \log P_i)`;
    * :math:`\mathrm{grad} f = D\exp_L[D\exp_L[\mathrm{sym}\,\nabla f]]` (the Daleckii-Krein
      derivatives are self-adjoint). ``ehess2rhess`` is not implemented (first-order solvers).

    The divided differences of log and exp at the same eigenvalues are reciprocals, so every map
    costs one ``eigh`` of the base point (and of the other point for log, dist, transport).
    """

    curvature_lower_bound = 0.0

    def __init__(self, n: int):
        super().__init__(n, "SPDLogEuclidean")

    @staticmethod
    def _frame(p):
        """(eigenvalues, eigenvectors, divided differences of log) of P."""
        lam, v = _eig(p)
        return lam, v, _log_divided(lam)

    def _dlog(self, p, u):
        """D log_P[U] (symmetric), with P's frame."""
        lam, v, f = self._frame(p)
        return _from_basis(v, f * _in_basis(v, u))

    def inner(self, x, u, v):
        lam, vec, f = self._frame(x)
        a = f * _in_basis(vec, u)
        b = f * _in_basis(vec, v)
        return np.sum(a * b, axis=(-2, -1))

    def norm(self, x, u):
        lam, vec, f = self._frame(x)
        return np.linalg.norm(f * _in_basis(vec, u), axis=(-2, -1))

    def dist(self, x, y):
        return np.linalg.norm(self._logm(x) - self._logm(y), axis=(-2, -1))

    @staticmethod
    def _logm(p):
        lam, v = _eig(p)
        return _from_basis(v, np.log(lam)[..., None] * np.eye(lam.shape[-1]))

    def exp(self, x, u):
        lam, v, f = self._frame(x)
        s = np.log(lam)[..., None] * np.eye(self.n) + f * _in_basis(v, u)
        w, e = np.linalg.eigh(_sym(s))
        return _from_basis(v @ e, np.exp(w)[..., None] * np.eye(self.n))

    def retract(self, x, u):
        return self.exp(x, u)

    def log(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        lam, v, f = self._frame(x)
        diff = _in_basis(v, self._logm(y)) - np.log(lam)[..., None] * np.eye(self.n)
        out = _from_basis(v, diff / f)
        return np.where(np.all(x == y, axis=(-2, -1), keepdims=True), 0.0, out)

    def transport(self, x, y, u):
        x, y, u = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                                      np.asarray(u, dtype=float))
        w = self._dlog(x, u)
        lam, v, f = self._frame(y)
        return _from_basis(v, _in_basis(v, w) / f)

    def egrad2rgrad(self, x, g):
        lam, v, f = self._frame(x)
        return _from_basis(v, _in_basis(v, _sym(np.asarray(g, dtype=float))) / (f * f))

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        batch = np.broadcast_shapes(x.shape[:-2], sigma.shape)
        s = self._sym_gaussian(batch, sigma, rng)
        lam, v, f = self._frame(x)
        return _from_basis(v, _in_basis(v, s) / f)

    def to_coords(self, x, u):
        return self._sym_coords(self._dlog(x, u))

    def from_coords(self, x, coords):
        s = self._sym_from_coords(np.asarray(coords, dtype=float))
        lam, v, f = self._frame(x)
        return _from_basis(v, _in_basis(v, s) / f)

    def mean(self, points, weights=None, *, tol=1e-12, max_iter=100, init=None):
        """The closed-form log-Euclidean mean :math:`\\mathrm{expm}(\\sum_i w_i \\log P_i)`
        (``tol``, ``max_iter`` and ``init`` are validated and otherwise unused).

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
        points = np.asarray(points, dtype=float)
        if points.ndim < 3 or points.shape[-2:] != self.point_shape:
            raise ValueError(
                f"{self}: argument 'points' has shape {points.shape}; expected "
                f"(..., n_points, {self.n}, {self.n})"
            )
        check_mean_options(points.shape[-3], tol, max_iter)
        w = _normalize_weights(weights, points.shape[-3])
        s = np.sum(w[..., None, None] * self._logm(points), axis=-3)
        lam, e = np.linalg.eigh(_sym(s))
        return _from_basis(e, np.exp(lam)[..., None] * np.eye(self.n))


class SPDBuresWasserstein(_SPDPoints):
    r"""SPD(n) with the Bures-Wasserstein metric
    :math:`\langle U, V\rangle_P = \tfrac12\mathrm{tr}(\mathcal{L}_P[U]\, V)`, where
    :math:`\mathcal{L}_P[U]` solves the Lyapunov equation :math:`P\mathcal{L} + \mathcal{L}P = U`
    (Bhatia, Jain and Lim 2019): the 2-Wasserstein geometry of centred Gaussians.

    Parameters
    ----------
    n : int
        Matrix size; points and tangent vectors (symmetric matrices) have shape ``(n, n)``.

    Notes
    -----
    In the eigenbasis of :math:`P = V\mathrm{diag}(\lambda)V^T`,
    :math:`\tilde{\mathcal{L}}_{ij} = \tilde U_{ij}/(\lambda_i + \lambda_j)`. With
    :math:`L = \mathcal{L}_P[U]`:

    * :math:`\mathrm{Exp}_P U = (I + L) P (I + L) = P + U + L P L`, the geodesic while
      :math:`I + L \succ 0` (the metric is not complete; beyond, this is the formula's value,
      a point of the manifold while :math:`I + L` is invertible);
    * :math:`\mathrm{Log}_P Q = (T - I)P + P(T - I)`, with the optimal transport map
      :math:`T = P^{-1/2}(P^{1/2} Q P^{1/2})^{1/2} P^{-1/2}` (:math:`T P T = Q`);
    * :math:`d(P, Q) = \|(T - I)P^{1/2}\|_F`, equal to the closed form
      :math:`(\mathrm{tr}P + \mathrm{tr}Q - 2\,\mathrm{tr}(P^{1/2}QP^{1/2})^{1/2})^{1/2}`
      without its cancellation (absolute accuracy about eps times the scale of P and Q);
    * **transport**: the identity map of Sym(n) (every tangent space is Sym(n): it is the
      projection onto :math:`T_Q`), a vector transport, not parallel transport and not an
      isometry (``has_parallel_transport = False``); the parallel transport of this metric has
      no closed form;
    * tangent Gaussian :math:`V\tilde U V^T` with :math:`\tilde U_{ii} = 2\sqrt{\lambda_i}\,
      \sigma z_{ii}`, :math:`\tilde U_{ij} = \sqrt{\lambda_i + \lambda_j}\,\sigma z_{ij}`
      (i < j), z standard normal: N(0, sigma^2 I) in the orthonormal basis with those scales;
    * :math:`\mathrm{grad} f = 2(GP + PG)`, :math:`G = \mathrm{sym}\,\nabla f`;
    * curvature :math:`\ge 0`: the Karcher mean's unit-step iteration is the fixed point of
      Alvarez-Esteban, del Barrio, Cuesta-Albertos and Matran (2016) for Wasserstein
      barycentres. ``ehess2rhess`` is not implemented (first-order solvers).
    """

    has_parallel_transport = False
    curvature_lower_bound = 0.0

    def __init__(self, n: int):
        super().__init__(n, "SPDBuresWasserstein")

    @staticmethod
    def _weights(lam):
        """1 / (lambda_i + lambda_j)."""
        return 1.0 / (lam[..., :, None] + lam[..., None, :])

    def inner(self, x, u, v):
        lam, e = _eig(x)
        return 0.5 * np.sum(self._weights(lam) * _in_basis(e, u) * _in_basis(e, v),
                            axis=(-2, -1))

    def norm(self, x, u):
        return np.sqrt(np.maximum(self.inner(x, u, u), 0.0))

    def _lyap(self, x, u):
        """(L_P[U], P's eigenpairs)."""
        lam, e = _eig(x)
        return _from_basis(e, self._weights(lam) * _in_basis(e, u)), lam, e

    def exp(self, x, u):
        x = np.asarray(x, dtype=float)
        lyap, _, _ = self._lyap(x, u)
        a = np.eye(self.n) + lyap
        return _sym(a @ x @ a)

    def retract(self, x, u):
        return self.exp(x, u)

    def _transport_map_minus_identity(self, x, y):
        """(T - I, P^(1/2)) with T the optimal transport map from x to y."""
        lam, e = _eig(x)
        root = np.sqrt(lam)
        half = _from_basis(e, root[..., None] * np.eye(self.n))
        inv_half = e / root[..., None, :]
        mu, f = _eig(half @ np.asarray(y, dtype=float) @ half)
        m_half = _from_basis(f, np.sqrt(np.maximum(mu, 0.0))[..., None] * np.eye(self.n))
        t = inv_half @ _mT(e) @ m_half @ e @ _mT(inv_half)
        return _sym(t) - np.eye(self.n), half

    def log(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        tm, _ = self._transport_map_minus_identity(x, y)
        out = _sym(2.0 * (tm @ x))
        return np.where(np.all(x == y, axis=(-2, -1), keepdims=True), 0.0, out)

    def dist(self, x, y):
        x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        tm, half = self._transport_map_minus_identity(x, y)
        out = np.linalg.norm(tm @ half, axis=(-2, -1))
        return np.where(np.all(x == y, axis=(-2, -1)), 0.0, out)

    def transport(self, x, y, u):
        """The identity vector transport (the projection onto :math:`T_Q = \\mathrm{Sym}(n)`;
        not parallel, not isometric).

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            Start and end points.
        u : ndarray, shape ``(*batch, n, n)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, n, n)``
            ``u``, broadcast.
        """
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(u))
        return np.broadcast_to(np.asarray(u, dtype=float), shape).copy()

    def egrad2rgrad(self, x, g):
        x = np.asarray(x, dtype=float)
        gs = _sym(np.asarray(g, dtype=float))
        return _sym(2.0 * (gs @ x + x @ gs))

    @staticmethod
    def _scales(lam):
        r"""Entrywise factor from a symmetric S with Frobenius-orthonormal coordinates c to the
        tangent vector (in P's eigenbasis) with the same coordinates in the BW-orthonormal
        basis: :math:`\sqrt{2(\lambda_i + \lambda_j)}` (:math:`\frac12\sum_{ij}
        \tilde U_{ij}^2/(\lambda_i + \lambda_j) = \|S\|_F^2`)."""
        return np.sqrt(2.0 * (lam[..., :, None] + lam[..., None, :]))

    def tangent_gaussian(self, x, sigma, rng):
        x = np.asarray(x, dtype=float)
        sigma = np.asarray(sigma, dtype=float)
        batch = np.broadcast_shapes(x.shape[:-2], sigma.shape)
        s = self._sym_gaussian(batch, sigma, rng)
        lam, e = _eig(x)
        return _from_basis(e, self._scales(lam) * s)

    def to_coords(self, x, u):
        lam, e = _eig(x)
        return self._sym_coords(_in_basis(e, u) / self._scales(lam))

    def from_coords(self, x, coords):
        lam, e = _eig(x)
        return _from_basis(e, self._scales(lam) * self._sym_from_coords(np.asarray(coords)))
