"""Speed and accuracy of rfed's batched manifold maps against the peers' batched forms.

Run on demand: ``python benchmarks/bench_manifolds.py [--quick] [--json FILE]`` (the table also
goes to ``benchmarks/results/bench_manifolds.txt``; ``--suites stiefel`` writes
``bench_manifolds_stiefel.txt``, ``--quick`` adds ``_quick``). One BLAS and
one torch thread (set here before numpy loads). Each row times one batched call on ``n`` points
(median CPU time of ``--repeat`` interleaved calls) of

* rfed;
* geomstats 2.8 (``Hypersphere``, ``Hyperboloid``, ``SPDMatrices`` with their default metrics);
* geoopt (torch on the CPU, float64, one thread: ``Sphere``, ``Lorentz``,
  ``SymmetricPositiveDefinite``, ``EuclideanStiefelExact``), if torch and geoopt are installed
  (they are not rfed dependencies);
* pymanopt 2.2's batched forms: ``Oblique(d + 1, n)`` for the sphere (the n points as
  columns; its ``dist`` returns the norm of the n distances), ``SymmetricPositiveDefinite(9,
  k=n)``, ``Stiefel(100, 5, k=n)``, ``Grassmann(100, 5, k=n)``.

The accuracy column is each implementation's worst relative error on a separate set of hard
cases (near pairs down to 1e-9 apart, near-antipodal or near-right-angle pairs, far or
ill-conditioned points: the row's note says which) against 40-digit mpmath, the error of the
outputs in the Frobenius (or absolute, for distances) norm relative to the reference's.
``rfed/best`` is rfed's time over the fastest peer's, ``rfed/best acc.`` over the fastest
peer at least as accurate as rfed (within 10x, or below 1e-13); a peer faster only by being
less accurate shows both numbers and rfed keeps the accurate map.

Memory: at start the script asks glibc's ``malloc`` to keep freed memory in the process
(``mallopt``: blocks up to 32 MiB come from the heap, and the heap is trimmed only past 1 GiB
free). Without it, what a row costs depends on what ran before in the same process: glibc
raises its mmap threshold only after a large block has been freed, so in a fresh process every
large temporary is a new ``mmap`` whose pages fault on first touch on each call, and after the
sphere suite's 20 MB arrays they come from the heap without a fault (Stiefel(100,5) exp alone:
rfed about 400 and geoopt about 3500 minor faults per call; after the earlier suites neither
faults). The setting applies to every library of the table alike (numpy, torch and geoopt all
allocate through the same ``malloc``), so a row no longer depends on the suites run before it;
the header line says whether it was applied (on another C library it is not).

``--spd-floor``: SPD(9)'s maps against the bare LAPACK calls they are built from.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import ctypes.util  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import mpmath as mp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import results_file  # noqa: E402  (benchmarks/ is on the path of a script run)

from rfed.manifolds import SPD, Grassmann, Hyperboloid, Sphere, Stiefel  # noqa: E402

try:
    import geoopt
    import torch

    torch.set_num_threads(1)
except ImportError:  # geoopt is an optional peer
    torch = geoopt = None

mp.mp.dps = 40

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to serve blocks up to 32 MiB (its largest mmap threshold) from the heap
    and to keep up to 1 GiB of freed heap, for every library of the process alike (see the module
    docstring). Returns False where the C library has no ``mallopt`` or refuses."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


KEPT_FREED_MEMORY = keep_freed_memory()


def best_times(fns, repeat: int) -> list[float]:
    """Median CPU time (``time.process_time``) of ``repeat`` interleaved calls of each function
    (one warm-up call each first): a burst of load hits every contender alike."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            times[i].append(time.process_time() - t0)
    return [float(np.median(ts)) for ts in times]


def _t(a):
    return torch.tensor(np.ascontiguousarray(a), dtype=torch.float64)


def _np(a):
    return a.detach().numpy() if torch is not None and isinstance(a, torch.Tensor) else a


def rel_errors(got, ref, scalar: bool) -> float:
    """Worst relative error over the points (``got``, ``ref``: arrays of the points' outputs)."""
    got = np.asarray(got, dtype=float)
    ref = np.asarray(ref, dtype=float)
    if scalar:
        return float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)))
    axes = tuple(range(1, ref.ndim))
    num = np.sqrt(np.sum(np.square(got - ref), axis=axes))
    den = np.maximum(np.sqrt(np.sum(np.square(ref), axis=axes)), 1e-300)
    return float(np.max(num / den))


# ---------------------------------------------------------------- mpmath references
def _mpv(a):
    return [mp.mpf(float(v)) for v in np.ravel(a)]


def _mpmat(a):
    return mp.matrix(np.asarray(a, dtype=float).tolist())


def _tofloat(m):
    return np.array([[float(m[i, j]) for j in range(m.cols)] for i in range(m.rows)])


def ref_sphere(op, x, y, u):
    out = []
    for xi, yi, ui in zip(x, y, u, strict=True):
        xv, yv = _mpv(xi), _mpv(yi)
        nx = mp.sqrt(mp.fsum(v * v for v in xv))
        ny = mp.sqrt(mp.fsum(v * v for v in yv))
        xv = [v / nx for v in xv]
        yv = [v / ny for v in yv]
        if op == "exp":
            uv = _mpv(ui)
            dot = mp.fsum(a * b for a, b in zip(xv, uv, strict=True))
            uv = [b - dot * a for a, b in zip(xv, uv, strict=True)]
            t = mp.sqrt(mp.fsum(v * v for v in uv))
            out.append([float(mp.cos(t) * a + mp.sin(t) / t * b)
                        for a, b in zip(xv, uv, strict=True)])
            continue
        dm = mp.sqrt(mp.fsum((a - b) ** 2 for a, b in zip(xv, yv, strict=True)))
        dp = mp.sqrt(mp.fsum((a + b) ** 2 for a, b in zip(xv, yv, strict=True)))
        theta = 2 * mp.atan2(dm, dp)
        if op == "dist":
            out.append(float(theta))
            continue
        dot = mp.fsum(a * b for a, b in zip(xv, yv, strict=True))
        w = [b - dot * a for a, b in zip(xv, yv, strict=True)]
        wn = mp.sqrt(mp.fsum(v * v for v in w))
        out.append([float(theta / wn * v) for v in w])
    return np.array(out)


def _lift_mp(p):
    s = _mpv(p[1:])
    return [mp.sqrt(1 + mp.fsum(v * v for v in s))] + s


def _lorentz(a, b):
    return -a[0] * b[0] + mp.fsum(p * q for p, q in zip(a[1:], b[1:], strict=True))


def ref_hyperboloid(op, x, y, u):
    out = []
    for xi, yi, ui in zip(x, y, u, strict=True):
        xv, yv = _lift_mp(xi), _lift_mp(yi)
        if op == "exp":
            uv = _mpv(ui)
            c = _lorentz(xv, uv)
            uv = [b + c * a for a, b in zip(xv, uv, strict=True)]
            t = mp.sqrt(_lorentz(uv, uv))
            out.append([float(mp.cosh(t) * a + mp.sinh(t) / t * b)
                        for a, b in zip(xv, uv, strict=True)])
            continue
        z = -_lorentz(xv, yv)
        d = mp.acosh(z)
        if op == "dist":
            out.append(float(d))
            continue
        out.append([float(d / mp.sinh(d) * (b - z * a)) for a, b in zip(xv, yv, strict=True)])
    return np.array(out)


def _mp_sym_fun(a, fun):
    """fun of a symmetric mpmath matrix through its eigendecomposition."""
    e, q = mp.eigsy(a)
    return q * mp.diag([fun(v) for v in e]) * q.T


def ref_spd(op, x, y, u):
    out = []
    for xi, yi, ui in zip(x, y, u, strict=True):
        p = _mpmat(xi)
        half = _mp_sym_fun(p, mp.sqrt)
        inv_half = _mp_sym_fun(p, lambda v: 1 / mp.sqrt(v))
        if op == "exp":
            inner = inv_half * _mpmat(ui) * inv_half
            out.append(_tofloat(half * _mp_sym_fun((inner + inner.T) / 2, mp.exp) * half))
            continue
        inner = inv_half * _mpmat(yi) * inv_half
        inner = (inner + inner.T) / 2
        if op == "dist":
            e, _ = mp.eigsy(inner)
            out.append(float(mp.sqrt(mp.fsum(mp.log(v) ** 2 for v in e))))
            continue
        out.append(_tofloat(half * _mp_sym_fun(inner, mp.log) * half))
    return np.array(out)


def ref_stiefel_exp(x, u):
    out = []
    for xi, ui in zip(x, u, strict=True):
        p = xi.shape[1]
        xm, um = _mpmat(xi), _mpmat(ui)
        a = xm.T * um
        s = um.T * um
        blk = mp.zeros(2 * p, 2 * p)
        for i in range(p):
            for j in range(p):
                blk[i, j] = a[i, j]
                blk[i, p + j] = -s[i, j]
                blk[p + i, p + j] = a[i, j]
            blk[p + i, i] = 1
        e = mp.expm(blk)
        ea = mp.expm(-a)
        top = mp.matrix(p, p)
        bot = mp.matrix(p, p)
        for i in range(p):
            for j in range(p):
                top[i, j] = e[i, j]
                bot[i, j] = e[p + i, j]
        out.append(_tofloat((xm * top + um * bot) * ea))
    return np.array(out)


def ref_grassmann(op, x, y, u):
    """Edelman, Arias and Smith (1998), section 2.5.4: Log_X Y = U atan(S) V^T with
    U S V^T = (I - XX^T) Y (X^T Y)^{-1}; d = ||atan(S)||; Exp via the SVD of U (projectors
    compared, the representatives differ)."""
    out = []
    for xi, yi, ui in zip(x, y, u, strict=True):
        xm = _mpmat(xi)
        if op == "exp":
            w, s, vt = mp.svd_r(_mpmat(ui))
            yv = (xm * vt.T * mp.diag([mp.cos(v) for v in s]) * vt
                  + w * mp.diag([mp.sin(v) for v in s]) * vt)
            q, _ = mp.qr(yv)
            q = q[:, : xi.shape[1]]
            out.append(_tofloat(q * q.T))
            continue
        ym = _mpmat(yi)
        xty = xm.T * ym
        m = (ym - xm * xty) * mp.inverse(xty)
        w, s, vt = mp.svd_r(m)
        ang = [mp.atan(v) for v in s]
        if op == "dist":
            out.append(float(mp.sqrt(mp.fsum(a * a for a in ang))))
            continue
        out.append(_tofloat(w * mp.diag(ang) * vt))
    return np.array(out)


# ---------------------------------------------------------------- accuracy sets
def near_far_pairs(m, rng, k, near_dists, far_dists):
    """k random pairs, plus pairs at each of ``near_dists`` and ``far_dists`` (along random
    tangent directions)."""
    x = m.random_point(rng, k)
    y = m.random_point(rng, k)
    xs, ys = [x], [y]
    for d in list(near_dists) + list(far_dists):
        b = m.random_point(rng, 2)
        u = m.tangent_gaussian(b, 1.0, rng)
        shape = (-1,) + (1,) * len(m.point_shape)
        u = u * (d / np.reshape(m.norm(b, u), shape))
        xs.append(b)
        ys.append(m.exp(b, u))
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    u = m.tangent_gaussian(x, 1.0, rng)
    norms = np.reshape(m.norm(x, u), (-1,) + (1,) * len(m.point_shape))
    return x, y, u * (rng.uniform(0.05, 2.0, len(x)).reshape(norms.shape) / norms)


# ---------------------------------------------------------------- rows
def sphere_rows(n, rng):
    import geomstats.geometry.hypersphere as gh
    import pymanopt.manifolds as pm

    m = Sphere(24)
    x, y = m.random_point(rng, (2, n))
    u = m.tangent_gaussian(x, 0.5, rng)
    gs = gh.Hypersphere(24)
    ob = pm.Oblique(25, n)
    xc, yc, uc = x.T.copy(), y.T.copy(), u.T.copy()
    ax, ay, au = near_far_pairs(m, rng, 20, [1e-9, 1e-6, 1e-3], [np.pi - 1e-4, 3.0])

    def ob_cols(fn, *arrays):
        obk = pm.Oblique(25, len(arrays[0]))
        return fn(obk, *(a.T.copy() for a in arrays))

    rows = []
    peers_t = {"geomstats": {}, "geoopt": {}, "pymanopt": {}}
    if geoopt is not None:
        g = geoopt.Sphere()
        tx, ty, tu = _t(x), _t(y), _t(u)
        peers_t["geoopt"] = {"exp": lambda: g.expmap(tx, tu), "log": lambda: g.logmap(tx, ty),
                             "dist": lambda: g.dist(tx, ty)}
    peers_t["geomstats"] = {"exp": lambda: gs.metric.exp(u, x), "log": lambda: gs.metric.log(y, x),
                            "dist": lambda: gs.metric.dist(x, y)}
    peers_t["pymanopt"] = {"exp": lambda: ob.exp(xc, uc), "log": lambda: ob.log(xc, yc),
                           "dist": lambda: ob.dist(xc, yc)}
    acc = {
        "rfed": {"exp": lambda: m.exp(ax, au), "log": lambda: m.log(ax, ay),
                 "dist": lambda: m.dist(ax, ay)},
        "geomstats": {"exp": lambda: gs.metric.exp(au, ax), "log": lambda: gs.metric.log(ay, ax),
                      "dist": lambda: gs.metric.dist(ax, ay)},
        # Oblique.dist returns the norm of all distances: per pair with one column each
        "pymanopt": {"exp": lambda: ob_cols(lambda o, a, b: o.exp(a, b), ax, au).T,
                     "log": lambda: ob_cols(lambda o, a, b: o.log(a, b), ax, ay).T,
                     "dist": lambda: np.array([pm.Oblique(25, 1).dist(a[:, None], b[:, None])
                                               for a, b in zip(ax, ay, strict=True)])},
    }
    if geoopt is not None:
        acc["geoopt"] = {"exp": lambda: _np(g.expmap(_t(ax), _t(au))),
                         "log": lambda: _np(g.logmap(_t(ax), _t(ay))),
                         "dist": lambda: _np(g.dist(_t(ax), _t(ay)))}
    for op in ("exp", "log", "dist"):
        ours = {"exp": lambda: m.exp(x, u), "log": lambda: m.log(x, y),
                "dist": lambda: m.dist(x, y)}[op]
        rows.append(("Sphere(24)", op, n, ours, {k: v[op] for k, v in peers_t.items() if v},
                     {k: v[op] for k, v in acc.items()},
                     lambda op=op: ref_sphere(op, ax, ay, au), op == "dist",
                     "hard cases: pairs 1e-9..1e-3 apart and within 1e-4 of antipodal"))
    return rows


def hyperboloid_rows(n, rng):
    import geomstats.geometry.hyperboloid as gh

    m = Hyperboloid(2)
    x, y = m.random_point(rng, (2, n))
    u = m.tangent_gaussian(x, 0.5, rng)
    gs = gh.Hyperboloid(2)
    ax, ay, au = near_far_pairs(m, rng, 20, [1e-9, 1e-6, 1e-3], [8.0])
    peers_t = {"geomstats": {"exp": lambda: gs.metric.exp(u, x),
                             "log": lambda: gs.metric.log(y, x),
                             "dist": lambda: gs.metric.dist(x, y)}}
    acc = {"rfed": {"exp": lambda: m.exp(ax, au), "log": lambda: m.log(ax, ay),
                    "dist": lambda: m.dist(ax, ay)},
           "geomstats": {"exp": lambda: gs.metric.exp(au, ax), "log": lambda: gs.metric.log(ay, ax),
                         "dist": lambda: gs.metric.dist(ax, ay)}}
    if geoopt is not None:
        g = geoopt.Lorentz()
        tx, ty, tu = _t(x), _t(y), _t(u)
        peers_t["geoopt"] = {"exp": lambda: g.expmap(tx, tu), "log": lambda: g.logmap(tx, ty),
                             "dist": lambda: g.dist(tx, ty)}
        acc["geoopt"] = {"exp": lambda: _np(g.expmap(_t(ax), _t(au))),
                         "log": lambda: _np(g.logmap(_t(ax), _t(ay))),
                         "dist": lambda: _np(g.dist(_t(ax), _t(ay)))}
    rows = []
    for op in ("exp", "log", "dist"):
        ours = {"exp": lambda: m.exp(x, u), "log": lambda: m.log(x, y),
                "dist": lambda: m.dist(x, y)}[op]
        rows.append(("Hyperboloid(2)", op, n, ours, {k: v[op] for k, v in peers_t.items()},
                     {k: v[op] for k, v in acc.items()},
                     lambda op=op: ref_hyperboloid(op, ax, ay, au), op == "dist",
                     "hard cases: pairs 1e-9..1e-3 apart, and 8 apart"))
    return rows


def spd_rows(n, rng):
    import geomstats.geometry.spd_matrices as gspd
    import pymanopt.manifolds as pm

    m = SPD(9)
    x, y = m.random_point(rng, (2, n))
    u = m.tangent_gaussian(x, 0.5, rng)
    gs = gspd.SPDMatrices(9)
    pym = pm.SymmetricPositiveDefinite(9, k=n)
    ax, ay, au = near_far_pairs(m, rng, 8, [1e-8, 1e-5], [])
    # ill-conditioned pairs: condition numbers 1e6 to 1e9
    q = np.linalg.qr(rng.standard_normal((6, 9, 9)))[0]
    ill = (q * np.geomspace(1.0, 1.0, 9)[None, None, :] * np.geomspace(
        np.full(6, 1e-3), np.array([1e3, 1e4, 1e5, 1e6, 1e6, 1e6]), 9).T[:, None, :]) @ np.swapaxes(
        q, -1, -2)
    ill = 0.5 * (ill + np.swapaxes(ill, -1, -2))
    ax = np.concatenate([ax, ill[:3]])
    ay = np.concatenate([ay, ill[3:]])
    au = np.concatenate([au, m.tangent_gaussian(ill[:3], 0.5, rng)])
    pyk = pm.SymmetricPositiveDefinite(9, k=len(ax))
    peers_t = {"geomstats": {"exp": lambda: gs.metric.exp(u, x), "log": lambda: gs.metric.log(y, x),
                             "dist": lambda: gs.metric.dist(x, y)},
               "pymanopt": {"exp": lambda: pym.exp(x, u), "log": lambda: pym.log(x, y),
                            "dist": lambda: pym.dist(x, y)}}
    acc = {"rfed": {"exp": lambda: m.exp(ax, au), "log": lambda: m.log(ax, ay),
                    "dist": lambda: m.dist(ax, ay)},
           "geomstats": {"exp": lambda: gs.metric.exp(au, ax), "log": lambda: gs.metric.log(ay, ax),
                         "dist": lambda: gs.metric.dist(ax, ay)},
           "pymanopt": {"exp": lambda: pyk.exp(ax, au), "log": lambda: pyk.log(ax, ay),
                        "dist": lambda: np.array([pm.SymmetricPositiveDefinite(9).dist(a, b)
                                                  for a, b in zip(ax, ay, strict=True)])}}
    if geoopt is not None:
        g = geoopt.SymmetricPositiveDefinite()
        tx, ty, tu = _t(x), _t(y), _t(u)
        peers_t["geoopt"] = {"exp": lambda: g.expmap(tx, tu), "log": lambda: g.logmap(tx, ty),
                             "dist": lambda: g.dist(tx, ty)}
        acc["geoopt"] = {"exp": lambda: _np(g.expmap(_t(ax), _t(au))),
                         "log": lambda: _np(g.logmap(_t(ax), _t(ay))),
                         "dist": lambda: _np(g.dist(_t(ax), _t(ay)))}
    rows = []
    for op in ("exp", "log", "dist"):
        ours = {"exp": lambda: m.exp(x, u), "log": lambda: m.log(x, y),
                "dist": lambda: m.dist(x, y)}[op]
        rows.append(("SPD(9)", op, n, ours, {k: v[op] for k, v in peers_t.items()},
                     {k: v[op] for k, v in acc.items()},
                     lambda op=op: ref_spd(op, ax, ay, au), op == "dist",
                     "hard cases: pairs 1e-8, 1e-5 apart; condition numbers 1e6-1e9"))
    return rows


def stiefel_rows(n, rng):
    import pymanopt.manifolds as pm

    m = Stiefel(100, 5)
    x = m.random_point(rng, n)
    u = m.tangent_gaussian(x, 1.0, rng)
    pym = pm.Stiefel(100, 5, k=n)
    ax = m.random_point(rng, 12)
    au = m.tangent_gaussian(ax, 1.0, rng)
    au *= np.geomspace(1e-6, 3.0, 12)[:, None, None] / m.norm(ax, au)[:, None, None]
    pyk = pm.Stiefel(100, 5, k=len(ax))
    peers_t = {"pymanopt": {"exp": lambda: pym.exp(x, u)}}
    acc = {"rfed": {"exp": lambda: m.exp(ax, au)}, "pymanopt": {"exp": lambda: pyk.exp(ax, au)}}
    if geoopt is not None:
        g = geoopt.EuclideanStiefelExact()
        tx, tu = _t(x), _t(u)
        peers_t["geoopt"] = {"exp": lambda: g.expmap(tx, tu)}
        acc["geoopt"] = {"exp": lambda: _np(g.expmap(_t(ax), _t(au)))}
    return [("Stiefel(100,5)", "exp", n, lambda: m.exp(x, u),
             {k: v["exp"] for k, v in peers_t.items()}, {k: v["exp"] for k, v in acc.items()},
             lambda: ref_stiefel_exp(ax, au), False, "hard cases: |u| from 1e-6 to 3")]


def grassmann_rows(n, rng):
    import pymanopt.manifolds as pm

    m = Grassmann(100, 5)
    x, y = m.random_point(rng, (2, n))
    u = m.tangent_gaussian(x, 0.5, rng)
    pym = pm.Grassmann(100, 5, k=n)
    ax, ay, au = near_far_pairs(m, rng, 6, [1e-9, 1e-6, 1e-3], [1.5])
    pyk = pm.Grassmann(100, 5, k=len(ax))
    peers_t = {"pymanopt": {"exp": lambda: pym.exp(x, u), "log": lambda: pym.log(x, y),
                            "dist": lambda: pym.dist(x, y)}}

    def proj(a):
        return a @ np.swapaxes(a, -1, -2)

    acc = {"rfed": {"exp": lambda: proj(m.exp(ax, au)), "log": lambda: m.log(ax, ay),
                    "dist": lambda: m.dist(ax, ay)},
           "pymanopt": {"exp": lambda: proj(pyk.exp(ax, au)), "log": lambda: pyk.log(ax, ay),
                        "dist": lambda: np.array([pm.Grassmann(100, 5).dist(a, b)
                                                  for a, b in zip(ax, ay, strict=True)])}}
    rows = []
    for op in ("exp", "log", "dist"):
        ours = {"exp": lambda: m.exp(x, u), "log": lambda: m.log(x, y),
                "dist": lambda: m.dist(x, y)}[op]
        rows.append(("Grassmann(100,5)", op, n, ours, {k: v[op] for k, v in peers_t.items()},
                     {k: v[op] for k, v in acc.items()},
                     lambda op=op: ref_grassmann(op, ax, ay, au), op == "dist",
                     "hard cases: subspaces 1e-9..1e-3 apart (exp: projectors compared)"))
    return rows


SUITES = {
    "sphere": (sphere_rows, 100_000),
    "hyperboloid": (hyperboloid_rows, 100_000),
    "spd": (spd_rows, 10_000),
    "stiefel": (stiefel_rows, 2_000),
    "grassmann": (grassmann_rows, 2_000),
}

PEERS = ("geomstats", "geoopt", "pymanopt")


def run_table(suites, div, repeat, rng):
    """Time and check every row; returns the rows as dicts."""
    out = []
    for name in suites:
        fn, size = SUITES[name]
        for manifold, op, n, ours, peers, acc, ref_fn, scalar, note in fn(max(1, size // div),
                                                                           rng):
            names = list(peers)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                times = best_times([ours] + [peers[k] for k in names], repeat)
                ref = ref_fn()
                errs = {k: rel_errors(_np(f()), ref, scalar) for k, f in acc.items()}
            row = {"manifold": manifold, "op": op, "n": n, "note": note,
                   "rfed_ms": 1e3 * times[0], "rfed_err": errs["rfed"],
                   "peers": {k: {"ms": 1e3 * t, "err": errs.get(k)}
                             for k, t in zip(names, times[1:], strict=True)}}
            fastest = min(names, key=lambda k: row["peers"][k]["ms"])
            row["best_peer"] = fastest
            row["ratio_best"] = row["rfed_ms"] / row["peers"][fastest]["ms"]
            bound = max(10.0 * row["rfed_err"], 1e-13)
            accurate = [k for k in names if row["peers"][k]["err"] is not None
                        and row["peers"][k]["err"] <= bound]
            if accurate:
                best_acc = min(accurate, key=lambda k: row["peers"][k]["ms"])
                row["best_accurate_peer"] = best_acc
                row["ratio_best_accurate"] = row["rfed_ms"] / row["peers"][best_acc]["ms"]
            else:
                row["best_accurate_peer"], row["ratio_best_accurate"] = None, None
            out.append(row)
            print_row(row)
    return out


def print_header():
    cols = "".join(f" {p + ' ms':>14} {'err':>8}" for p in PEERS)
    line = (f"{'manifold':<16} {'op':<5} {'n':>7} {'rfed ms':>9} {'err':>8}{cols} "
            f"{'rfed/best':>10} {'rfed/best acc.':>15}")
    print(line)
    print("-" * len(line))


def print_row(row):
    cells = []
    for p in PEERS:
        if p in row["peers"]:
            e = row["peers"][p]["err"]
            cells.append(f" {row['peers'][p]['ms']:>14.2f} {e:>8.1e}" if e is not None
                         else f" {row['peers'][p]['ms']:>14.2f} {'-':>8}")
        else:
            cells.append(f" {'-':>14} {'-':>8}")
    acc = (f"{row['ratio_best_accurate']:>6.2f} ({row['best_accurate_peer']})"
           if row["ratio_best_accurate"] is not None else "no peer")
    print(f"{row['manifold']:<16} {row['op']:<5} {row['n']:>7} {row['rfed_ms']:>9.2f} "
          f"{row['rfed_err']:>8.1e}{''.join(cells)} {row['ratio_best']:>5.2f} "
          f"({row['best_peer'][:4]}) {acc:>15}", flush=True)


def spd_floor_table(n: int, rng, repeat: int) -> list[str]:
    """rfed's SPD(9) maps against the bare batched LAPACK calls they are built from.

    Interleaved, median CPU time of ``max(repeat, 5)`` calls each. The maps work in the Cholesky
    frame (one ``cholesky`` and one triangular inverse per base point): exp is one ``eigh`` of
    the whitened tangent vector; log takes the whitened pencil's eigenvalues as squared
    singular values (one ``svd``), which keeps their digits up to a condition number of 1e24
    where an ``eigh`` of the whitened matrix keeps them to 1e16; dist needs the singular values
    only. ``log_dist`` (the pencil) and ``log_dist_eigh`` (one ``eigh`` per pair with
    Rayleigh-quotient eigenvalues, the pencil past a whitened condition of 1e7), both with the
    Cholesky factors of y given, as a Frechet problem holds them; the Frechet mean's cost and
    gradient of photo patch descriptors, and its cost alone (``SPD.dist_eigvalsh``).
    """
    from rfed.datasets import load_sample_image_descriptors
    from rfed.problems import SPDFrechetMean

    m = SPD(9)
    x, y = m.random_point(rng, (2, n))
    u = m.tangent_gaussian(x, 0.5, rng)
    chol_y = np.linalg.cholesky(y)
    b = np.linalg.inv(np.linalg.cholesky(x)) @ chol_y
    desc, _ = load_sample_image_descriptors(stride=7)
    desc = desc[rng.permutation(desc.shape[0])[: n - n % 50]]
    frechet = SPDFrechetMean(desc.reshape(50, -1, 9, 9))
    at = desc.mean(axis=0)
    whitened_b = np.linalg.inv(np.linalg.cholesky(at)) @ frechet.data["chol"]
    whitened = whitened_b @ np.swapaxes(whitened_b, -1, -2)

    def evaluation():
        frechet._evaluated = None  # no kept answer: a new point each time
        return frechet._local_cost_and_grad(at, None)

    def cost_evaluation():
        frechet._evaluated = None
        return frechet._local_cost_only(at, None)

    fns = {
        "rfed log_dist": lambda: m.log_dist(x, y, chol_y),
        "rfed log_dist_eigh": lambda: m.log_dist_eigh(x, y, chol_y),
        "rfed Frechet eval": evaluation,
        "floor: eigh of M": lambda: np.linalg.eigh(whitened),
        "rfed Frechet cost": cost_evaluation,
        "floor: eigvalsh of M": lambda: np.linalg.eigvalsh(whitened),
        "rfed exp": lambda: m.exp(x, u),
        "rfed log": lambda: m.log(x, y),
        "rfed dist": lambda: m.dist(x, y),
        "floor: eigh": lambda: np.linalg.eigh(x),
        "floor: eigvalsh": lambda: np.linalg.eigvalsh(x),
        "floor: svd": lambda: np.linalg.svd(b),
        "floor: svd values": lambda: np.linalg.svd(b, compute_uv=False),
        "floor: cholesky + inv": lambda: np.linalg.inv(np.linalg.cholesky(x)),
    }
    med = dict(zip(fns, best_times(list(fns.values()), max(repeat, 5)), strict=True))
    eigh = med["floor: eigh"]
    lines = [f"SPD(9), n = {n}: median CPU time of {max(repeat, 5)} interleaved calls",
             f"{'call':<24} {'ms':>8} {'/ eigh':>8}"]
    lines += [f"{name:<24} {1e3 * t:>8.2f} {t / eigh:>8.2f}" for name, t in med.items()]
    frame = med["floor: cholesky + inv"]
    lines.append(
        f"exp floor (cholesky + inv + eigh) = {1e3 * (frame + eigh):.2f} ms: rfed exp is "
        f"{med['rfed exp'] / (frame + eigh):.2f}x it; log floor (2 cholesky + inv + svd) "
        f"~ {1e3 * (frame + med['floor: svd']):.2f} ms: rfed log "
        f"{med['rfed log'] / (frame + med['floor: svd']):.2f}x; dist floor (2 cholesky + inv + "
        f"svd values) ~ {1e3 * (frame + med['floor: svd values']):.2f} ms: rfed dist "
        f"{med['rfed dist'] / (frame + med['floor: svd values']):.2f}x")
    pencil, by_eigh = med["rfed log_dist"], med["rfed log_dist_eigh"]
    lines.append(
        f"evaluation (log and dist of a pair): pencil {1e3 * pencil:.2f} ms, eigh "
        f"{1e3 * by_eigh:.2f} ms ({pencil / by_eigh:.2f}x faster)")
    lines.append(
        f"Frechet cost and gradient of {frechet.n_samples} descriptors at one point: "
        f"{1e3 * med['rfed Frechet eval']:.2f} ms = "
        f"{med['rfed Frechet eval'] / med['floor: eigh of M']:.2f}x the eigh of the whitened "
        f"matrices; cost alone {1e3 * med['rfed Frechet cost']:.2f} ms = "
        f"{med['rfed Frechet cost'] / med['floor: eigvalsh of M']:.2f}x their eigvalsh")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer points")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES),
                        help="which manifolds to time (default: all)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--spd-floor", action="store_true",
                        help="only the table of SPD(9)'s maps against their LAPACK floors")
    args = parser.parse_args(argv)
    div = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    if args.spd_floor:
        for line in spd_floor_table(max(1, SUITES["spd"][1] // div), rng, args.repeat):
            print(line)
        return
    # the table also goes to benchmarks/results/bench_manifolds[_quick].txt (the docs' source)
    name = "bench_manifolds" + ("" if list(args.suites) == list(SUITES)
                                else "_" + "_".join(args.suites))
    with results_file(name + ("_quick" if args.quick else "")):
        _print_table(args, div, rng)


def _print_table(args, div: int, rng: np.random.Generator) -> None:
    print(f"CPU time, median of {args.repeat} interleaved calls, one thread"
          + ("; malloc keeps freed memory (every library)" if KEPT_FREED_MEMORY
             else "; malloc defaults (mallopt unavailable)")
          + "; err: worst relative error on the hard cases (40-digit mpmath)"
          + ("" if geoopt is not None else "; geoopt not installed: no geoopt column"))
    print_header()
    rows = run_table(args.suites, div, args.repeat, rng)
    worst = max(rows, key=lambda r: r["ratio_best_accurate"] or 0.0)
    if worst["ratio_best_accurate"] is not None:
        print(f"\nworst rfed/best-accurate-peer: {worst['ratio_best_accurate']:.2f} "
              f"({worst['manifold']} {worst['op']})")
    slower = [r for r in rows if r["ratio_best"] > 1.0]
    for r in slower:
        p = r["peers"][r["best_peer"]]
        print(f"note: {r['manifold']} {r['op']}: {r['best_peer']} is {r['ratio_best']:.2f}x "
              f"faster with error {p['err']:.1e} against rfed's {r['rfed_err']:.1e}")
    for r in rows:
        if r["op"] == "exp" or r is rows[0]:
            print(f"note: {r['manifold']}: {r['note']}")
    print("note: pymanopt Oblique.dist returns the norm of the n distances (its accuracy is "
          "measured per pair); geomstats' and geoopt's Stiefel exponentials are for other "
          "metrics or absent (geoopt EuclideanStiefelExact is rfed's map)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
