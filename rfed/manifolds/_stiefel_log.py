r"""The globally convergent part of the Stiefel logarithm (embedded metric): shooting with
continuation on the reduced problem, for the pairs that Zimmermann's local iteration does not
certify.

**Reduction.** For :math:`X, Y \in \mathrm{St}(n, p)` let Q be an orthonormal basis of the part
of span(Y) orthogonal to span(X) (all of :math:`X^\perp` when :math:`n - p \le p`), r its number
of columns, and :math:`m = p + r`. The reflection :math:`I - 2 P_\perp` that fixes span[X, Q]
is an isometry fixing X and Y, so a unique minimizing geodesic from X to Y stays in span[X, Q]:
its velocity is :math:`U = X A + Q B` (A skew p x p, B r x p), and the problem is the same on
:math:`\mathrm{St}(m, p)` between :math:`X_0 = [I_p; 0]` and :math:`Y_0 = [X^T Y; Q^T Y]`.

**Shooting.** On the reduced problem the geodesic is (Edelman, Arias and Smith 1998, eq. 2.7, in
the skew form of Zimmermann and Hueper 2022)
:math:`G(A, B) = \mathrm{expm}(W)[:, :p]\,\mathrm{expm}(-A)`,
:math:`W = \begin{pmatrix}2A & -B^T\\ B & 0\end{pmatrix}`, and the log solves
:math:`G(A, B) = Y_0` (as many unknowns, :math:`p(p-1)/2 + rp`, as the manifold's dimension).
Gauss-Newton (Levenberg-Marquardt damped) with the exact Jacobian: the Frechet derivative of
``expm`` of a skew matrix from one eigendecomposition,
:math:`D\,\mathrm{expm}(W)[E] = P(\Phi \circ P^H E P)P^H` with the divided differences
:math:`\Phi_{jk} = (e^{\lambda_j} - e^{\lambda_k})/(\lambda_j - \lambda_k)` (Higham, *Functions
of Matrices*, SIAM 2008, Theorem 3.11).

**Continuation.** Newton alone converges only near a solution. The target is moved along a path
from :math:`X_0` to :math:`Y_0`, :math:`T(s) = \mathrm{expm}(sL)[:, :p]`, L the principal
logarithm of a completion of :math:`Y_0` to SO(m) (Allgower and Georg, *Numerical
Continuation Methods*, Springer 1990, ch. 2: predictor by secant extrapolation, Newton
corrector, adaptive step), starting from the exact solution 0 at s = 0. Several paths (the
completion closest to the identity, and random ones) and direct Newton starts give candidate
geodesics; the shortest is returned. Geodesics shorter than the injectivity radius are the
unique minimizers (pi for p < n: Zimmermann and Stoye 2024, arXiv:2405.02268); beyond, the
shortest candidate found.

**Cut locus.** Two distinct candidates of equal shortest length (two minimizing geodesics), or a
singular Jacobian at the shortest (Y conjugate to X along it), raise ``StiefelLogError``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["reduce_pair", "shooting_log"]


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def reduce_pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, Y0)``: the basis Q (n x r) of the reduction and the reduced target
    ``Y0 = [X^T Y; Q^T Y]`` (m x p). One pair (no batch axes)."""
    n, p = x.shape
    if n - p <= p:
        full = np.linalg.qr(x, mode="complete")[0]
        q = full[:, p:]
    else:
        perp = y - x @ (x.T @ y)
        q = np.linalg.qr(perp)[0]
        # a rank-deficient perp leaves QR columns with components along X: orthogonalize twice
        for _ in range(2):
            q = q - x @ (x.T @ q)
            q = np.linalg.qr(q)[0]
    return q, np.concatenate([x.T @ y, q.T @ y], axis=0)


class _Reduced:
    """The reduced shooting problem on St(m, p) from [I; 0]."""

    def __init__(self, m: int, p: int):
        self.m, self.p, self.r = m, p, m - p
        self.iu = np.triu_indices(p, 1)
        n_a = len(self.iu[0])
        self.n_a = n_a
        self.k = n_a + self.r * p
        # unit directions of the unknowns in W (m x m) and in A (p x p)
        ew = np.zeros((self.k, m, m))
        ea = np.zeros((self.k, p, p))
        idx = np.arange(n_a)
        ea[idx, self.iu[0], self.iu[1]] = 1.0
        ea[idx, self.iu[1], self.iu[0]] = -1.0
        ew[:n_a, :p, :p] = 2.0 * ea[:n_a]
        kb = np.arange(n_a, self.k)
        rows, cols = np.divmod(np.arange(self.r * p), p)
        ew[kb, p + rows, cols] = 1.0
        ew[kb, cols, p + rows] = -1.0
        self.ew, self.ea = ew, ea

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = np.zeros((self.p, self.p))
        a[self.iu] = theta[: self.n_a]
        a = a - a.T
        return a, theta[self.n_a :].reshape(self.r, self.p)

    def velocity_norm(self, theta: np.ndarray) -> float:
        """Riemannian (Frobenius) norm of U = X A + Q B."""
        a, b = self.unpack(theta)
        return float(np.sqrt(np.sum(a * a) + np.sum(b * b)))

    @staticmethod
    def _skew_eig(s: np.ndarray):
        """Eigenpairs of a real skew matrix: S = P diag(lam) P^H, lam = -i mu."""
        mu, v = np.linalg.eigh(1j * s)
        return -1j * mu, v

    @staticmethod
    def _divided(lam: np.ndarray) -> np.ndarray:
        """Phi_jk = (e^lam_j - e^lam_k) / (lam_j - lam_k) (e^lam_k where they agree)."""
        diff = lam[:, None] - lam[None, :]
        small = np.abs(diff) < 1e-12
        safe = np.where(small, 1.0, diff)
        ratio = np.where(small, 1.0 + 0.5 * diff, np.expm1(safe) / safe)
        return np.exp(lam)[None, :] * ratio

    def exp_and_jacobian(self, theta: np.ndarray, jacobian: bool = True):
        """G(theta) (m x p) and dG/dtheta (m p x k)."""
        a, b = self.unpack(theta)
        p, r = self.p, self.r
        w = np.block([[2.0 * a, -b.T], [b, np.zeros((r, r))]])
        lam_w, pw = self._skew_eig(w)
        lam_a, pa = self._skew_eig(-a)
        exp_w = ((pw * np.exp(lam_w)) @ pw.conj().T).real
        exp_a = ((pa * np.exp(lam_a)) @ pa.conj().T).real
        g = exp_w[:, :p] @ exp_a
        if not jacobian:
            return g, None
        pwh = pw.conj().T
        tw = pwh @ self.ew @ pw  # (k, m, m)
        d_exp_w = (pw @ (self._divided(lam_w) * tw) @ pwh[:, :p]).real  # (k, m, p)
        pah = pa.conj().T
        ta = pah @ (-self.ea) @ pa
        d_exp_a = (pa @ (self._divided(lam_a) * ta) @ pah).real  # (k, p, p)
        dg = d_exp_w @ exp_a + exp_w[:, :p] @ d_exp_a
        return g, dg.reshape(self.k, -1).T

    def newton(self, theta: np.ndarray, target: np.ndarray, max_iter: int, tol: float):
        """Levenberg-Marquardt on G(theta) = target. Returns (theta, residual, converged)."""
        g, jac = self.exp_and_jacobian(theta)
        res = (g - target).ravel()
        rn = float(np.linalg.norm(res))
        damping = 1e-6
        for _ in range(max_iter):
            if rn <= tol:
                return theta, rn, True
            jtj = jac.T @ jac
            rhs = -jac.T @ res
            scale = np.maximum(np.diag(jtj), 1e-300)
            step = np.linalg.solve(jtj + damping * np.diag(scale), rhs)
            trial = theta + step
            g2, jac2 = self.exp_and_jacobian(trial)
            res2 = (g2 - target).ravel()
            rn2 = float(np.linalg.norm(res2))
            if rn2 < rn:
                theta, jac, res, rn = trial, jac2, res2, rn2
                damping = max(damping / 10.0, 1e-12)
            else:
                damping *= 10.0
                if damping > 1e6:
                    break
        return theta, rn, rn <= tol

    def continuation(self, path_log: np.ndarray, target: np.ndarray, tol: float):
        """Follow the solution of G(theta) = expm(s L)[:, :p] from s = 0 to 1."""
        p = self.p
        mu, v = np.linalg.eigh(1j * path_log)
        lam = -1j * mu

        def path(s: float) -> np.ndarray:
            return ((v[:, :] * np.exp(s * lam)) @ v.conj().T[:, :p]).real

        s, h = 0.0, 0.125
        theta = np.zeros(self.k)
        prev: tuple[float, np.ndarray] | None = None
        while s < 1.0:
            h = min(h, 1.0 - s)
            s_new = s + h
            guess = theta if prev is None else theta + (theta - prev[1]) * (h / (s - prev[0]))
            cand, rn, ok = self.newton(guess, path(s_new), 12, 1e-11)
            if ok:
                prev = (s, theta)
                s, theta = s_new, cand
                h = min(1.5 * h, 0.25)
            else:
                h *= 0.5
                if h < 1e-4:
                    return None
        theta, rn, ok = self.newton(theta, target, 20, tol)
        return theta if ok else None


def _completion(y0: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """A completion of y0 (m x p) to SO(m): the one whose lower-right block is symmetric PSD
    (closest to the identity), or, with ``rng``, a random one."""
    m, p = y0.shape
    comp = np.linalg.qr(y0, mode="complete")[0][:, p:]
    if rng is None:
        us, _, vt = np.linalg.svd(comp[p:, :])
        comp = comp @ vt.T @ us.T
    else:
        comp = comp @ np.linalg.qr(rng.standard_normal((m - p, m - p)))[0]
    v = np.concatenate([y0, comp], axis=1)
    if np.linalg.det(v) < 0:
        v[:, -1] = -v[:, -1]
    return v


def _principal_log(v: np.ndarray) -> np.ndarray | None:
    """Principal logarithm of a rotation by its real Schur form (None at a rotation by pi)."""
    from scipy.linalg import schur  # type: ignore[import-untyped]

    t, z = schur(v, output="real")
    m = v.shape[0]
    out = np.zeros((m, m))
    i = 0
    while i < m:
        if i + 1 < m and abs(t[i + 1, i]) > 0:
            ang = np.arctan2(0.5 * (t[i + 1, i] - t[i, i + 1]), 0.5 * (t[i, i] + t[i + 1, i + 1]))
            out[i + 1, i], out[i, i + 1] = ang, -ang
            i += 2
        else:
            if t[i, i] < 0:
                return None
            i += 1
    return z @ out @ z.T


def shooting_log(x: np.ndarray, y: np.ndarray, tol: float, candidates=(), n_random: int = 4,
                 inj_radius: float = np.pi, seed: int = 0):
    """The minimizing geodesic's initial velocity from x to y (one pair), or a string naming
    why there is none (the cut locus).

    Parameters
    ----------
    x, y : array, shape ``(n, p)``
    tol : float
        Absolute tolerance on ``||G(theta) - Y0||_F``.
    candidates : sequence of arrays ``(n, p)``
        Tangent vectors already known to be geodesics to y (Zimmermann's iteration's).
    n_random : int
        Continuation paths through random completions, tried while the shortest geodesic found
        is not shorter than ``inj_radius``.

    Returns
    -------
    (velocity, None) or (None, reason)
    """
    n, p = x.shape
    q, y0 = reduce_pair(x, y)
    m = y0.shape[0]
    red = _Reduced(m, p)
    found: list[np.ndarray] = []
    for c in candidates:
        a = 0.5 * ((x.T @ c) - (x.T @ c).T)
        b = q.T @ c
        found.append(np.concatenate([a[red.iu], b.ravel()]))

    def add(theta):
        if theta is not None:
            theta, rn, ok = red.newton(theta, y0, 20, tol)
            if ok:
                found.append(theta)

    def shortest() -> float:
        return min((red.velocity_norm(t) for t in found), default=np.inf)

    rng = np.random.default_rng(seed)
    for i in range(n_random + 1):
        if i > 0 and shortest() < inj_radius * (1 - 1e-9):
            break
        v = _completion(y0, None if i == 0 else rng)
        lg = _principal_log(v)
        if lg is None:
            continue
        if i == 0:
            # direct Newton starts from the path's own end velocity (canonical-like guesses)
            for a_fac in (0.5, 1.0):
                add(np.concatenate([a_fac * lg[:p, :p][red.iu], lg[p:, :p].ravel()]))
        add(red.continuation(lg, y0, tol))
    for _ in range(0 if found else 8):
        # no completion had a principal logarithm (a rotation by pi: e.g. y = -x): random
        # direct starts
        start = rng.standard_normal(red.k)
        add(start * (np.pi * rng.uniform(0.5, 1.5) / red.velocity_norm(start)))
    if not found:
        return None, ("no geodesic from x to y was found by shooting with continuation (the "
                      "pair may lie on the cut locus)")
    lengths = np.array([red.velocity_norm(t) for t in found])
    order = np.argsort(lengths)
    best = found[order[0]]
    length = lengths[order[0]]
    for j in order[1:]:
        if lengths[j] - length > 1e-8 * max(length, 1.0):
            break
        if np.linalg.norm(found[j] - best) > 1e-6 * max(length, 1.0):
            return None, (f"y lies on the cut locus of x: two distinct minimizing geodesics of "
                          f"length {length:.12g}")
    _, jac = red.exp_and_jacobian(best)
    sv = np.linalg.svd(jac, compute_uv=False)
    if sv[-1] <= 1e-10 * sv[0]:
        return None, (f"y is conjugate to x along the shortest geodesic found (length "
                      f"{length:.12g}): y lies on the cut locus of x")
    a, b = red.unpack(best)
    return x @ a + q @ b, None
