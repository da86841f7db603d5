"""Symmetric positive definite matrices SPD(n) with the affine-invariant metric."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rfed.manifolds.base import Manifold, _entry_scaled, as_generator, size_tuple

__all__ = ["SPD"]


def _sym(a: np.ndarray) -> np.ndarray:
    """(A + A^T) / 2 as a new array: the sum is halved in place (the bits of
    ``0.5 * (A + A^T)``, one temporary fewer)."""
    s = a + np.swapaxes(a, -1, -2)
    s *= 0.5
    return s


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _zero_where_equal(out: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``out`` (shape: the broadcast of x and y) with the matrices of the pairs ``x == y``
    set to exactly zero, in place: ``np.where(np.all(x == y, axis=(-2, -1)), 0.0, out)``.

    The whole matrices are compared only when some pair's (0, 0) entries agree: the usual
    case (no equal pair) reads one entry per pair instead of two whole stacks.
    """
    if np.any(x[..., 0, 0] == y[..., 0, 0]):
        same = np.all(x == y, axis=(-2, -1))
        out[np.broadcast_to(same, out.shape[:-2])] = 0.0
    return out


def _eig_apply(a: np.ndarray, fun) -> np.ndarray:
    """``fun`` applied to a symmetric matrix through its eigendecomposition (one ``eigh``)."""
    w, v = np.linalg.eigh(_sym(a))
    return (v * fun(w)[..., None, :]) @ _mT(v)


class SPD(Manifold):
    r"""Symmetric positive definite n x n matrices with the affine-invariant metric.

    :math:`\langle U, V\rangle_P = \mathrm{tr}(P^{-1} U P^{-1} V)`, intrinsic dimension
    :math:`n(n+1)/2`, points and tangent vectors (symmetric matrices) of shape ``(n, n)``.

    Parameters
    ----------
    n : int
        Matrix size, ``n >= 1``.

    Notes
    -----
    Every map works in the Cholesky frame of the base point, :math:`P = L L^T` (one Cholesky
    and one triangular inverse per base point). :math:`U \mapsto \tilde U = L^{-1} U L^{-T}` is an
    isometry from :math:`(T_P, \langle\cdot,\cdot\rangle_P)` onto symmetric matrices with the
    Frobenius inner product, and, writing :math:`L = P^{1/2} R` with R orthogonal,
    :math:`\tilde Q = L^{-1} Q L^{-T} = R^T (P^{-1/2} Q P^{-1/2}) R`. Since matrix functions
    commute with orthogonal conjugation, the textbook formulas

    * :math:`\mathrm{Exp}_P U = P^{1/2} \mathrm{expm}(P^{-1/2} U P^{-1/2}) P^{1/2}
      = L\,\mathrm{expm}(\tilde U) L^T`,
    * :math:`\mathrm{Log}_P Q = P^{1/2} \mathrm{logm}(P^{-1/2} Q P^{-1/2}) P^{1/2}
      = L\,\mathrm{logm}(\tilde Q) L^T`,
    * :math:`d(P, Q) = \|\log \lambda(\tilde Q)\|_2`,
    * parallel transport :math:`E U E^T`, :math:`E = P^{1/2} (P^{-1/2} Q P^{-1/2})^{1/2}
      P^{-1/2} = L \tilde Q^{1/2} L^{-1}`,

    need one ``eigh`` each, of the symmetrized whitened matrix (``eigvalsh`` for the distance),
    and never ``expm``/``logm`` or :math:`P^{\pm 1/2}`. This is the same arithmetic as the
    :math:`P^{\pm1/2}` form with half the eigendecompositions; exp/log round trips keep 1e-8
    relative (Frobenius) accuracy for condition numbers up to 1e8. In the metric's own norm
    the attainable accuracy is about ``eps * cond(Q)``: storing Q in float64 already perturbs
    :math:`\mathrm{Log}_P Q` that much.

    The tangent Gaussian is :math:`\xi = L S L^T` with S symmetric,
    :math:`S_{ii} \sim N(0, \sigma^2)`, :math:`S_{ij} = S_{ji} \sim N(0, \sigma^2/2)`, so that
    :math:`\tilde\xi = S` is :math:`N(0, \sigma^2 I)` in orthonormal coordinates of
    :math:`T_P`. It has the same law as :math:`P^{1/2} S P^{1/2}`
    (:ref:`neighbours-tangent-gaussian`), because the law of S is invariant under
    :math:`S \mapsto R S R^T`. The orthonormal basis is :math:`L B_k L^T` for the
    Frobenius-orthonormal basis :math:`B_k` of Sym(n), and coordinates are those of
    :math:`\tilde U` in :math:`B_k`.
    """

    #: affine-invariant sectional curvatures lie in [-1/2, 0]
    curvature_lower_bound = -0.5

    def __init__(self, n: int):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"SPD: argument 'n' must be an int >= 1, got {n!r}")
        self.n = int(n)
        self.dim = self.n * (self.n + 1) // 2
        self.point_shape = (self.n, self.n)
        self.name = f"SPD({self.n})"
        self._iu = np.triu_indices(self.n, 1)

    # ------------------------------------------------------------------ frames
    @staticmethod
    def _frame(p):
        """Cholesky frame of P: (L, L^{-1}) with P = L L^T (Cholesky reads the lower triangle)."""
        chol = np.linalg.cholesky(np.asarray(p, dtype=float))
        return chol, np.linalg.inv(chol)

    @staticmethod
    def _whiten(inv, a):
        """L^{-1} A L^{-T}: an isometry from (T_P, AI metric) onto (Sym(n), Frobenius)."""
        return _sym(inv @ np.asarray(a, dtype=float) @ _mT(inv))

    @staticmethod
    def _unwhiten(chol, b):
        """Inverse of :meth:`_whiten`: L B L^T."""
        return _sym(chol @ b @ _mT(chol))

    # ------------------------------------------------------------------ metric
    def inner(self, x, u, v):
        _, inv = self._frame(x)
        return np.sum(self._whiten(inv, u) * self._whiten(inv, v), axis=(-2, -1))

    def norm(self, x, u):
        _, inv = self._frame(x)
        return np.linalg.norm(self._whiten(inv, u), axis=(-2, -1))

    def _norm_inner(self, x, u, v):
        """``(norm(x, u), inner(x, u, v))`` with u whitened once (the same bits)."""
        _, inv = self._frame(x)
        ut = self._whiten(inv, u)
        return (np.linalg.norm(ut, axis=(-2, -1)),
                np.sum(ut * self._whiten(inv, v), axis=(-2, -1)))

    def _check_resolved(self, mu, x, y, method):
        r"""Raise when the whitened matrix's eigenvalues ``mu`` are beyond float64's resolution.

        From :meth:`_pencil` the eigenvalues of :math:`L^{-1} Q L^{-T}` are known to about
        :math:`(n\,\epsilon)^2 \mu_{\max}` in absolute terms (they are squared singular values);
        a smallest eigenvalue below :math:`(100 n \epsilon)^2 \mu_{\max}` (condition number above
        ~1e22) has no correct digit left, and its log is meaningless.
        """
        lo = mu[..., 0]
        hi = mu[..., -1]
        bad = ~(lo > (100.0 * self.n * np.finfo(float).eps) ** 2 * hi)
        if np.any(bad):
            x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
            idx = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
            cond_w = float(hi[idx] / lo[idx]) if lo[idx] > 0 else np.inf
            raise ValueError(
                f"{self}: {method} is beyond float64: the whitened matrix x^(-1/2) y x^(-1/2) "
                f"has condition number {cond_w:.2e} > ~1e22 (cond(x) = "
                f"{float(np.linalg.cond(x[idx])):.2e}, cond(y) = "
                f"{float(np.linalg.cond(y[idx])):.2e}); its smallest eigenvalues have no correct "
                "digit in float64"
            )

    def _pencil(self, x, y, chol_y=None):
        r"""Eigenpairs of the whitened :math:`M = L^{-1} Q L^{-T}` as the squared singular values
        and left singular vectors of :math:`B = L^{-1} R`, :math:`Q = R R^T` (Cholesky): the SVD
        resolves singular values down to :math:`\epsilon\,\sigma_{\max}`, i.e. eigenvalues of M
        down to :math:`\epsilon^2 \mu_{\max}` instead of :math:`\epsilon\,\mu_{\max}`, so pairs of
        condition number 1e12 each (M up to 1e24) keep their digits.

        Returns ``(chol, mu, v)`` with mu ascending, shape ``(..., n)``, v ``(..., n, n)``.
        ``chol_y``: R if known (the same bits as computing it here).
        """
        chol, inv = self._frame(x)
        r = np.linalg.cholesky(np.asarray(y, dtype=float)) if chol_y is None else chol_y
        b = inv @ r
        v, sv, _ = np.linalg.svd(b)
        return chol, np.square(sv[..., ::-1]), v[..., :, ::-1]

    def dist(self, x, y, chol_y=None):
        """``d(x, y) = ||log mu||``, mu the squared singular values of the pencil's
        :math:`B = L^{-1} R` (values only: the pencil's accuracy at half an SVD's cost);
        ``chol_y``, optional: the Cholesky factor R of ``y`` if known (the same bits).

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        ndarray, shape ``batch``
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        _, inv = self._frame(x)
        r = np.linalg.cholesky(y) if chol_y is None else chol_y
        mu = np.square(np.linalg.svd(inv @ r, compute_uv=False)[..., ::-1])
        self._check_resolved(mu, x, y, "dist(x, y)")
        return np.sqrt(np.sum(np.square(np.log(mu)), axis=-1))

    # ------------------------------------------------------------------ maps
    @staticmethod
    def _unwhiten_fun(chol, a, fun):
        """L fun(A) L^T for symmetric A = V diag(w) V^T, as (LV) diag(fun(w)) (LV)^T."""
        w, v = np.linalg.eigh(a)
        m = chol @ v
        return _sym((m * fun(w)[..., None, :]) @ _mT(m))

    def exp(self, x, u):
        chol, inv = self._frame(x)
        return self._unwhiten_fun(chol, self._whiten(inv, u), np.exp)

    def log(self, x, y, chol_y=None):
        """``Log_x(y)``; ``chol_y``, optional: the Cholesky factor of ``y`` if known (e.g.
        precomputed once for a data set; the result is the same bit for bit).

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        ndarray, shape ``(*batch, n, n)``
            Symmetric tangent vectors at ``x``.
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        chol, w, v = self._pencil(x, y, chol_y)
        self._check_resolved(w, x, y, "log(x, y)")
        m = chol @ v
        return _zero_where_equal(_sym((m * np.log(w)[..., None, :]) @ _mT(m)), x, y)

    def _logs_to(self, points):
        """``x -> Log_x(points)`` for the Karcher mean's iterations: the points' Cholesky
        factors computed once, and each log by :meth:`log_eigh`."""
        points = np.asarray(points, dtype=float)
        chol = np.linalg.cholesky(points)
        return lambda x: self.log_eigh(x, points, chol)

    def log_dist(self, x, y, chol_y=None):
        """``(log(x, y), dist(x, y))`` from one pencil: the arithmetic of :meth:`log` and
        :meth:`dist` (bit for bit) with half the factorizations, for a cost and its gradient;
        ``chol_y`` as in :meth:`log`.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        log : ndarray, shape ``(*batch, n, n)``
        dist : ndarray, shape ``batch``
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        chol, w, v = self._pencil(x, y, chol_y)
        self._check_resolved(w, x, y, "log(x, y)")
        logw = np.log(w)
        m = chol @ v
        log = _zero_where_equal(_sym((m * logw[..., None, :]) @ _mT(m)), x, y)
        return log, np.sqrt(np.sum(np.square(logw), axis=-1))

    #: whitened condition number above which :meth:`log_dist_eigh` hands a pair to the pencil
    EIGH_MAX_CONDITION = 1e7

    def log_dist_eigh(self, x, y, chol_y=None):
        r"""``(log(x, y), dist(x, y))`` from one ``eigh`` per pair: for the Frechet mean's
        evaluations, per-sample gradients and Karcher iterations, where the pencil's SVD
        was the bulk of the time.

        With :math:`Q = R R^T` (Cholesky) and :math:`B = L^{-1} R`, the eigenvectors V of
        :math:`M = B B^T` come from ``eigh`` and each eigenvalue is taken as the Rayleigh
        quotient :math:`\mu_k = \|B^T v_k\|^2`, computed from B without forming M: its
        error is second order in the eigenvector's, so the small eigenvalues keep the
        pencil's relative accuracy (``eigh``'s own eigenvalues are only good to
        :math:`n\,\epsilon\,\mu_{\max}` absolute). About 1.4x faster than :meth:`log_dist` for
        9 x 9 matrices (a symmetric eigensolver instead of an SVD), but a different
        arithmetic, not bit for bit: the eigenvectors, hence the logs, are only good to about
        :math:`\epsilon\,\mathrm{cond}(M)` over the eigengaps (measured on covariance
        descriptors: Frechet gradient norms to 1e-11 relative at cond(M) up to 1e9, to 1e-15
        up to 1e7; distances to 1e-15). Pairs with :math:`\mathrm{cond}(M)` above
        :attr:`EIGH_MAX_CONDITION` are therefore computed by :meth:`log_dist` (which raises
        beyond float64). ``chol_y``, optional: the Cholesky factor of ``y`` if known.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        log : ndarray, shape ``(*batch, n, n)``
        dist : ndarray, shape ``batch``
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        chol, inv = self._frame(x)
        b = inv @ (np.linalg.cholesky(y) if chol_y is None else chol_y)
        # numpy forms B B^T by syrk and mirrors the triangle: it is exactly symmetric, so it
        # is its own symmetrization (eigh reads one triangle; test_spd_bits checks this)
        w, v = np.linalg.eigh(b @ _mT(b))
        resolved = w[..., 0] * self.EIGH_MAX_CONDITION > w[..., -1]
        vb = _mT(v) @ b
        mu = np.sum(np.square(vb, out=vb), axis=-1)
        all_resolved = bool(np.all(resolved))
        logw = np.log(mu if all_resolved else np.where(resolved[..., None], mu, 1.0))
        m = chol @ v
        out = _sym((m * logw[..., None, :]) @ _mT(m))
        dist = np.sqrt(np.sum(np.square(logw), axis=-1))
        if not all_resolved:
            out, dist = self._redo_unresolved((out, dist), resolved, x, y, chol_y,
                                              self.log_dist)
        return _zero_where_equal(out, x, y), dist

    @staticmethod
    def _redo_unresolved(results, resolved, x, y, chol_y, accurate):
        """``results`` (arrays whose leading axes are the pairs' broadcast shape) with the pairs
        not ``resolved`` recomputed by ``accurate(x, y, chol_y)`` (which returns one array, or
        a tuple like ``results``)."""
        xb, yb = np.broadcast_arrays(x, y)
        batch = xb.shape[:-2]
        results = [np.array(np.broadcast_to(a, batch + a.shape[len(np.shape(resolved)):]))
                   for a in results]
        redo = ~np.broadcast_to(resolved, batch)
        r = None if chol_y is None else np.broadcast_to(chol_y, yb.shape)[redo]
        # one point for every pair (an evaluation's): its frame once, not once per pair (the
        # same bits: every factorization and product is per matrix)
        x_redo = x.reshape(x.shape[-2:]) if x.size == x.shape[-1] * x.shape[-2] else xb[redo]
        again = accurate(x_redo, yb[redo], r)
        for a, b in zip(results, again if isinstance(again, tuple) else (again,), strict=True):
            a[redo] = b
        return tuple(results)

    #: whitened condition number above which :meth:`dist_eigvalsh` hands a pair to :meth:`dist`
    EIGVALSH_MAX_CONDITION = 1e4
    #: ratio of the largest to the smallest diagonal entry of the whitened matrix above which
    #: :meth:`dist_eigvalsh` hands a pair to :meth:`dist` without its eigenvalues (twice
    #: :attr:`EIGVALSH_MAX_CONDITION`: a margin far above eigvalsh's error)
    _DIAGONAL_SPAN = 2 * EIGVALSH_MAX_CONDITION

    def dist_eigvalsh(self, x, y, chol_y=None):
        r"""``dist(x, y)`` from the eigenvalues alone of :math:`M = B B^T`,
        :math:`B = L^{-1} R` (``eigvalsh``: about 0.6x the time of the singular values of B
        for 9 x 9): for the Frechet mean's cost-only evaluations.

        ``eigvalsh``'s eigenvalues are good to about :math:`n\,\epsilon\,\mu_{\max}`
        absolute, i.e. :math:`n\,\epsilon\,\mathrm{cond}(M)` relative for the smallest. Up
        to :attr:`EIGVALSH_MAX_CONDITION` each :math:`\log\mu` is then good to about 2e-11
        (n = 9), and the squared distance to about :math:`4\cdot10^{-11}\sum|\log\mu|`;
        pairs beyond go through :meth:`dist` (singular values: the pencil's accuracy, and its
        refusal beyond float64). A pair whose :math:`M` has diagonal entries further apart
        than :attr:`_DIAGONAL_SPAN` (twice the threshold) goes to :meth:`dist` without
        ``eigvalsh``: its extreme eigenvalues enclose the diagonal, so ``eigvalsh`` would put
        it past the threshold too (the same bits, less work at a point far from the data).
        ``chol_y``, optional: the Cholesky factor of ``y`` if known (the same bits).

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        ndarray, shape ``batch``
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        _, inv = self._frame(x)
        b = inv @ (np.linalg.cholesky(y) if chol_y is None else chol_y)
        # B B^T is exactly symmetric (syrk, mirrored): eigvalsh reads one triangle
        m = b @ _mT(b)
        # a pair whose diagonal alone spans more than twice the threshold has a whitened
        # condition, and eigenvalues as eigvalsh computes them, beyond it (the extreme
        # eigenvalues enclose the diagonal, up to eigvalsh's n eps mu_max): it would be handed
        # to dist() anyway, so it skips eigvalsh (random starts of fig3/fig4: most pairs)
        diag = np.diagonal(m, axis1=-2, axis2=-1)
        hopeless = np.max(diag, axis=-1) > self._DIAGONAL_SPAN * np.min(diag, axis=-1)
        if not bool(np.any(hopeless)):
            mu = np.linalg.eigvalsh(m)
        else:
            mu = np.ones(m.shape[:-1])
            hopeful = ~hopeless
            if bool(np.any(hopeful)):
                mu[hopeful] = np.linalg.eigvalsh(m[hopeful])
        resolved = mu[..., 0] * self.EIGVALSH_MAX_CONDITION > mu[..., -1]
        resolved &= ~hopeless
        if bool(np.all(resolved)):
            return np.sqrt(np.sum(np.square(np.log(mu)), axis=-1))
        dist = np.sqrt(np.sum(np.square(np.log(np.where(resolved[..., None], mu, 1.0))),
                              axis=-1))
        return self._redo_unresolved((dist,), resolved, x, y, chol_y, self.dist)[0]

    def log_eigh(self, x, y, chol_y=None):
        """``Log_x(y)`` by :meth:`log_dist_eigh`'s arithmetic (one ``eigh`` per pair, the pencil
        beyond :attr:`EIGH_MAX_CONDITION`); the same map as :meth:`log`, not the same bits.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, n, n)``
            SPD matrices (broadcast against each other).
        chol_y : ndarray, shape ``(*batch, n, n)``, optional
            The lower Cholesky factor of ``y``.

        Returns
        -------
        ndarray, shape ``(*batch, n, n)``
            Symmetric tangent vectors at ``x``.
        """
        return self.log_dist_eigh(x, y, chol_y)[0]

    def retract(self, x, u):
        r"""Second-order retraction :math:`P + U + \tfrac12 U P^{-1} U`, computed in the
        Cholesky frame: :math:`L S L^T` with :math:`S = I + \tilde U + \tfrac12 \tilde U^2 =
        \tfrac12 (I + (I + \tilde U)^2) \succeq \tfrac12 I`, formed as the Gram matrix
        :math:`B B^T`, :math:`B = L V \mathrm{diag}(\sqrt{s})` from the eigenpairs
        :math:`(s, V)` of S. It is then positive definite in floating point too (the
        unwhitened :math:`P + U + \frac12 U P^{-1} U` loses that for ill-conditioned P).

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
        chol, inv = self._frame(x)
        ut = self._whiten(inv, u)
        s = np.eye(self.n) + ut + 0.5 * ut @ ut
        return self._unwhiten_fun(chol, _sym(s), lambda w: np.maximum(w, 0.5))

    def transport(self, x, y, u):
        chol, inv = self._frame(x)
        r = _eig_apply(self._whiten(inv, y), np.sqrt)
        return self._unwhiten(chol, r @ self._whiten(inv, u) @ r)

    def proj(self, x, v):
        return _sym(np.asarray(v, dtype=float))

    def egrad2rgrad(self, x, g):
        x = np.asarray(x, dtype=float)
        return _sym(x @ _sym(np.asarray(g, dtype=float)) @ x)

    def ehess2rhess(self, x, egrad, ehess, u):
        r"""Riemannian Hessian :math:`P\,\mathrm{sym}(H)\,P + \mathrm{sym}(U\,\mathrm{sym}(G)\,P)`.

        From :math:`\nabla_U V = DV[U] - \mathrm{sym}(U P^{-1} V)` (the affine-invariant
        Levi-Civita connection) applied to :math:`\mathrm{grad} f = P\,\mathrm{sym}(G)\,P`.

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
        u = np.asarray(u, dtype=float)
        g = _sym(np.asarray(egrad, dtype=float))
        return _sym(x @ _sym(np.asarray(ehess, dtype=float)) @ x) + _sym(u @ g @ x)

    # ------------------------------------------------------------------ random
    def random_point(self, rng, size: int | Sequence[int] = ()):
        """``expm(S)`` for S symmetric with standard Gaussian coordinates.

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
        z = as_generator(rng).standard_normal(size + self.point_shape)
        return _eig_apply(z, np.exp)

    def tangent_gaussian(self, x, sigma, rng):
        chol = np.linalg.cholesky(np.asarray(x, dtype=float))
        sigma = np.asarray(sigma, dtype=float)
        shape = np.broadcast_shapes(chol.shape, sigma.shape + self.point_shape)
        z = as_generator(rng).standard_normal(shape)
        # L sym(Z) L^T = sym(L Z L^T); sym(Z) has diagonal N(0, 1), off-diagonal N(0, 1/2)
        a = chol @ z @ _mT(chol)
        a += _mT(a)
        a *= 0.5 * sigma[..., None, None]
        return a

    # ------------------------------------------------------------------ coordinates
    def _sym_basis(self):
        """Frobenius-orthonormal basis of Sym(n): E_ii, then (E_ij + E_ji)/sqrt(2), i < j."""
        n = self.n
        b = np.zeros((self.dim, n, n))
        b[np.arange(n), np.arange(n), np.arange(n)] = 1.0
        k = np.arange(n, self.dim)
        b[k, self._iu[0], self._iu[1]] = b[k, self._iu[1], self._iu[0]] = 1.0 / np.sqrt(2.0)
        return b

    def tangent_basis(self, x):
        """``L B_k L^T`` for the Frobenius-orthonormal basis ``B_k`` of Sym(n), ``P = L L^T``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).

        Returns
        -------
        ndarray, shape ``(*batch, dim, *point_shape)``
            ``dim`` orthonormal tangent vectors per batch element.
        """
        chol = np.linalg.cholesky(np.asarray(x, dtype=float))[..., None, :, :]
        return chol @ self._sym_basis() @ _mT(chol)

    def _sym_coords(self, a: np.ndarray) -> np.ndarray:
        """Coordinates of symmetric matrices in the Frobenius-orthonormal basis of Sym(n)
        (:meth:`_sym_basis`), shape ``(..., dim)``."""
        diag = np.diagonal(a, axis1=-2, axis2=-1)
        return np.concatenate([diag, np.sqrt(2.0) * a[..., self._iu[0], self._iu[1]]], axis=-1)

    def _sym_from_coords(self, c: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`_sym_coords`."""
        n = self.n
        s = np.zeros(c.shape[:-1] + (n, n))
        s[..., np.arange(n), np.arange(n)] = c[..., :n]
        off = c[..., n:] / np.sqrt(2.0)
        s[..., self._iu[0], self._iu[1]] = off
        s[..., self._iu[1], self._iu[0]] = off
        return s

    def to_coords(self, x, u):
        _, inv = self._frame(x)
        return self._sym_coords(self._whiten(inv, u))

    def from_coords(self, x, coords):
        s = self._sym_from_coords(np.asarray(coords, dtype=float))
        chol = np.linalg.cholesky(np.asarray(x, dtype=float))
        return _sym(chol @ s @ _mT(chol))

    # ------------------------------------------------------------------ membership
    def point_violation(self, x):
        # scaled by its largest entry first (the violation is scale-free): the norm of a huge
        # non-symmetric matrix would overflow to inf and give asymmetry 0
        x, _ = _entry_scaled(np.asarray(x, dtype=float), (-2, -1))
        scale = np.maximum(np.linalg.norm(x, axis=(-2, -1)), np.finfo(float).tiny)
        asym = np.linalg.norm(x - _mT(x), axis=(-2, -1)) / scale
        lam_min = np.linalg.eigvalsh(_sym(x))[..., 0]
        return asym + np.where(lam_min > 0, 0.0, 1.0 - lam_min / scale)

    def tangent_violation(self, x, u):
        u, _ = _entry_scaled(np.asarray(u, dtype=float), (-2, -1))  # scale-free, as above
        scale = np.maximum(np.linalg.norm(u, axis=(-2, -1)), np.finfo(float).tiny)
        return np.linalg.norm(u - _mT(u), axis=(-2, -1)) / scale

    point_violation_description = (
        "violation is ||P - P^T||_F / ||P||_F, plus 1 + |lambda_min| / ||P||_F when P is not "
        "positive definite"
    )
    tangent_violation_description = (
        "tangent vectors are symmetric matrices; violation is ||U - U^T||_F / ||U||_F"
    )
