"""Issue 13: SPD's maps after the pass-cutting rewrite give the bits of the formulas they replace.

The references below are the previous arithmetic written out (``0.5 * (A + A^T)``, an explicit
symmetrization of ``B B^T`` before ``eigh``, ``np.where`` over a full ``x == y`` comparison, the
Karcher iteration through the public ``log``/``norm``/``inner``); every comparison is exact
(``assert_array_equal``, with the sign of zeros), never a tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from rfed.manifolds import SPD, Manifold
from rfed.manifolds.spd import _mT, _sym


def _sym_ref(a):
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def _zeroed_ref(out, x, y):
    return np.where(np.all(x == y, axis=(-2, -1), keepdims=True), 0.0, out)


def _log_dist_eigh_ref(m: SPD, x, y, chol_y=None):
    """The evaluation map before issue 13, written out."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    chol, inv = m._frame(x)
    b = inv @ (np.linalg.cholesky(y) if chol_y is None else chol_y)
    w, v = np.linalg.eigh(_sym_ref(b @ _mT(b)))
    resolved = w[..., 0] * m.EIGH_MAX_CONDITION > w[..., -1]
    mu = np.sum(np.square(_mT(v) @ b), axis=-1)
    logw = np.log(np.where(resolved[..., None], mu, 1.0))
    mm = chol @ v
    out = _sym_ref((mm * logw[..., None, :]) @ _mT(mm))
    dist = np.sqrt(np.sum(np.square(logw), axis=-1))
    if not np.all(resolved):
        xb, yb = np.broadcast_arrays(x, y)
        out = np.array(np.broadcast_to(out, xb.shape))
        dist = np.array(np.broadcast_to(dist, xb.shape[:-2]))
        redo = ~np.broadcast_to(resolved, xb.shape[:-2])
        r = None if chol_y is None else np.broadcast_to(chol_y, yb.shape)[redo]
        out[redo], dist[redo] = _log_dist_ref(m, xb[redo], yb[redo], r)
    return _zeroed_ref(out, x, y), dist


def _log_dist_ref(m: SPD, x, y, chol_y=None):
    """The pencil map (log and dist) before issue 13, written out."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    chol, w, v = m._pencil(x, y, chol_y)
    logw = np.log(w)
    mm = chol @ v
    out = _sym_ref((mm * logw[..., None, :]) @ _mT(mm))
    return _zeroed_ref(out, x, y), np.sqrt(np.sum(np.square(logw), axis=-1))


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


def _spread_points(m: SPD, rng, shape, decades: float, even: bool = False):
    """SPD matrices with eigenvalues spread over ``decades`` orders of magnitude (random, or
    ``even``: evenly in log scale, from the smallest to the largest)."""
    q = np.linalg.qr(rng.standard_normal(shape + (m.n, m.n)))[0]
    lam = (np.broadcast_to(np.logspace(-decades / 2, decades / 2, m.n), shape + (m.n,)) if even
           else 10.0 ** rng.uniform(-decades / 2, decades / 2, shape + (m.n,)))
    return _sym_ref((q * lam[..., None, :]) @ _mT(q))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 12])
def test_gram_matrix_is_exactly_symmetric(n):
    """``B @ B^T`` is symmetric to the bit when B is a matmul's product (C-contiguous, as in
    ``log_dist_eigh``; numpy forms it by syrk and mirrors the triangle), for single matrices,
    stacks and broadcast products: the symmetrization before ``eigh`` can go. (A B with
    negative strides takes numpy's non-BLAS loop, which is not symmetric for n = 9: the code
    never passes one.)"""
    rng = np.random.default_rng(n)
    for shape in [(), (7,), (3, 40)]:
        r = rng.standard_normal(shape + (n, n)) * 10.0 ** rng.uniform(-3, 3, shape + (n, 1))
        inv = rng.standard_normal(shape[:-1] + (1, n, n)) if shape else np.eye(n)
        for b in (r, _mT(r), inv @ r, inv @ r[..., ::-1, :]):
            g = b @ _mT(b)
            np.testing.assert_array_equal(g, _mT(g))
            _same_bits(_sym(g), g)


def test_sym_is_the_reference_symmetrization():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 6, 4, 4))
    _same_bits(_sym(a), _sym_ref(a))
    _same_bits(_sym(a[:, ::2]), _sym_ref(a[:, ::2]))


@pytest.mark.parametrize("n", [2, 4, 9])
def test_evaluation_and_pencil_maps_keep_their_bits(n):
    """log_dist_eigh, log_dist and log against the previous arithmetic: random pairs, pairs
    past EIGH_MAX_CONDITION (the pencil fallback), equal pairs (exact zero), pairs whose (0, 0)
    entries agree but not the rest, a single base point and a precomputed Cholesky factor."""
    m = SPD(n)
    rng = np.random.default_rng(10 + n)
    x = _spread_points(m, rng, (3, 1), 2.0)
    y = _spread_points(m, rng, (3, 60), 2.0)
    y[:, 5] = _spread_points(m, rng, (3,), 12.0, even=True)  # whitened ~1e12: fallback
    y[1, 7] = x[1, 0]                                   # an equal pair
    y[2, 9] = x[2, 0] + 1e-3 * np.eye(n)
    y[2, 9, 0, 0] = x[2, 0, 0, 0]                       # (0, 0) agrees, the rest does not
    chol_y = np.linalg.cholesky(y)
    for args in ((x, y), (x, y, chol_y), (x[0, 0], y[0]), (x[1, 0], y[1], chol_y[1])):
        new_e, ref_e = m.log_dist_eigh(*args), _log_dist_eigh_ref(m, *args)
        new_p, ref_p = m.log_dist(*args), _log_dist_ref(m, *args)
        for a, b in zip(new_e + new_p, ref_e + ref_p, strict=True):
            _same_bits(a, b)
        _same_bits(m.log(*args), ref_p[0])
    assert np.all(m.log(x, y)[1, 7] == 0.0)
    assert np.any(m.log(x, y)[2, 9] != 0.0)
    # the fallback did run (whitened condition number above the threshold)
    mu = np.linalg.eigvalsh(m._whiten(m._frame(x)[1], y))
    assert np.any(mu[..., -1] > m.EIGH_MAX_CONDITION * mu[..., 0])


def test_log_of_single_equal_pair_is_zero():
    """One pair (no batch axes) with x == y: the log is exactly zero (the distance is the
    arithmetic's, as before: ~1e-16, not forced to zero)."""
    m = SPD(3)
    x = m.random_point(np.random.default_rng(2))
    _same_bits(m.log(x, x), np.zeros((3, 3)))
    log, d = m.log_dist_eigh(x, x)
    _same_bits(log, np.zeros((3, 3)))
    _same_bits(d, _log_dist_eigh_ref(m, x, x)[1])


def test_karcher_mean_keeps_its_bits(monkeypatch):
    """SPD's Karcher mean (points' Cholesky factors once, logs whitened once per iteration)
    against the same iteration through the generic log/norm/inner, with the generic log being
    SPD's eigh log (the one the Karcher mean uses): the same point, bit for bit."""
    m = SPD(4)
    rng = np.random.default_rng(3)
    pts = _spread_points(m, rng, (2, 80), 3.0)
    fast = m.mean(pts, tol=1e-12, max_iter=200)
    monkeypatch.setattr(SPD, "_logs_to", Manifold._logs_to)
    monkeypatch.setattr(SPD, "log", SPD.log_eigh)
    monkeypatch.setattr(SPD, "_norm_inner", Manifold._norm_inner)
    _same_bits(fast, m.mean(pts, tol=1e-12, max_iter=200))
