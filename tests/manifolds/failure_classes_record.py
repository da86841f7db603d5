# ruff: noqa: B023, E402, E501
# (a measurement script: its lambdas run at once inside safe(), its lines print records)
"""Issue 11's record: the worst error per failure class over the tested range.

Not a test (nothing asserted; tests/manifolds/test_failure_classes.py asserts the fixed
behaviour). Prints one line per class for the rfed found first on ``sys.path``; to compare with
an older tree, run it with ``PYTHONPATH=<that tree>`` from outside the repository, e.g.
``git archive <commit> rfed | tar -x -C /tmp/old && cd /tmp && PYTHONPATH=/tmp/old python
<repo>/tests/manifolds/failure_classes_record.py``.
"""

import warnings

import mpmath as mp
import numpy as np

warnings.simplefilter("ignore")
from rfed.manifolds import SPD, Euclidean, Hyperboloid, PoincareBall, Sphere

mp.mp.dps = 60
out = {}


def safe(f):
    try:
        with np.errstate(all="ignore"):
            return f()
    except Exception as e:
        return e


# 1/2 hyperboloid far / overflow: y = exp(o, u), |u| in range; reference d = |u| (exact by construction via mpmath lift)
h = Hyperboloid(3)
o = h.origin
worst1 = 0.0
worst2 = 0.0
raised2 = []
for r in [1, 5, 10, 20, 30, 50, 100, 200, 300, 350]:
    # exact far point from mpmath, rounded to float64
    dirv = np.array([0.6, 0.0, 0.8])
    ys = [mp.sinh(r) * mp.mpf(float(c)) for c in dirv]
    y = np.array([float(mp.sqrt(1 + sum(c**2 for c in ys)))] + [float(c) for c in ys])
    d = safe(lambda: h.dist(o, y))
    lg = safe(lambda: h.log(o, y))
    e = np.inf if isinstance(d, Exception) or not np.isfinite(d) else abs(d - r) / r
    el = (
        np.inf
        if isinstance(lg, Exception) or not np.all(np.isfinite(lg))
        else abs(np.linalg.norm(lg[1:]) - r) / r
    )
    worst1 = max(worst1, e, el)
for r in [400, 600, 700, 705]:
    ys = [mp.sinh(r) * c for c in (mp.mpf(0.6), 0, mp.mpf(0.8))]
    y = np.array([float(mp.sqrt(1 + sum(c**2 for c in ys)))] + [float(c) for c in ys])
    d = safe(lambda: h.dist(o, y))
    lg = safe(lambda: h.log(o, y))
    e = np.inf if isinstance(d, Exception) or not np.isfinite(d) else abs(d - r) / r
    el = (
        np.inf
        if isinstance(lg, Exception) or not np.all(np.isfinite(lg))
        else abs(np.linalg.norm(lg[1:]) - r) / r
    )
    worst2 = max(worst2, e, el)
    u = np.array([0.0, 0.6 * r, 0.0, 0.8 * r])
    ex = safe(lambda: h.exp(o, u))
    if isinstance(ex, Exception):
        raised2.append(type(ex).__name__)
    elif not np.all(np.isfinite(ex)):
        worst2 = np.inf
    else:
        worst2 = max(worst2, abs(float(ex[0]) / float(mp.cosh(r)) - 1))
out["1 hyperboloid far |u|<=350 (rel err dist/log norm)"] = worst1
out["2 hyperboloid 400<=|u|<=705 (rel err exp/dist/log; inf = silent inf/NaN)"] = (worst2, raised2)
# 3 SPD ill conditioned pairs
spd = SPD(4)
rng = np.random.default_rng(0)
w3 = 0.0
nan3 = 0
err3 = []
for c in [1e2, 1e4, 1e6, 1e8, 1e10, 1e12]:
    for _ in range(5):
        q1 = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        q2 = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        ev = np.logspace(0, np.log10(c), 4)
        P = (q1 * ev) @ q1.T
        P = (P + P.T) / 2
        Q = (q2 * ev[::-1]) @ q2.T
        Q = (Q + Q.T) / 2
        Pm, Qm = mp.matrix(P.tolist()), mp.matrix(Q.tolist())
        L = mp.cholesky(Pm)
        Li = L**-1
        M = Li * Qm * Li.T
        ev_ref = mp.eigsy(M)[0]
        dref = float(mp.sqrt(sum(mp.log(e) ** 2 for e in ev_ref)))
        d = safe(lambda: spd.dist(P, Q))
        if isinstance(d, Exception):
            err3.append(f"{type(d).__name__} at cond {c:.0e}")
            continue
        if not np.isfinite(d):
            nan3 += 1
            w3 = np.inf
            continue
        w3 = max(w3, abs(d - dref) / dref)
out["3 SPD dist cond 1e2..1e12 (rel err vs mpmath; inf = NaN)"] = (w3, nan3, sorted(set(err3))[:3])
# 4 SPD retraction
w4 = np.inf
neg = 0
for c in [1e2, 1e4, 1e6, 1e8, 1e10, 1e12, 1e14]:
    for _ in range(20):
        q1 = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        ev = np.logspace(0, -np.log10(c), 4)
        P = (q1 * ev) @ q1.T
        P = (P + P.T) / 2
        U = spd.tangent_gaussian(P, 1.0, rng)
        U = 3 * U / spd.norm(P, U)
        Rr = safe(lambda: spd.retract(P, U))
        if isinstance(Rr, Exception):
            neg += 1
            continue
        lm = np.linalg.eigvalsh(Rr)[0] / np.linalg.eigvalsh(Rr)[-1]
        w4 = min(w4, lm)
        neg += int(lm <= 0)
out["4 SPD retraction cond 1e2..1e14 (non-SPD results of 140; min lam_min/lam_max)"] = (neg, w4)
# 5 sphere transport near antipodal
s = Sphere(2)
x = np.array([1.0, 0, 0])
w5 = 0.0
for k in range(1, 10):
    th = np.pi - 10.0**-k
    y = np.array([np.cos(th), np.sin(th), 0.0])
    u = np.array([0.0, 0.3, 0.7])
    t = safe(lambda: s.transport(x, y, u))
    if isinstance(t, Exception) or not np.all(np.isfinite(t)):
        w5 = np.inf
        continue
    # closed form: e = (0,1,0); P u = u - <e,u>((1-cos)e + sin x)
    ref = u - 0.3 * ((1 - np.cos(th)) * np.array([0, 1.0, 0]) + np.sin(th) * x)
    w5 = max(
        w5, np.linalg.norm(t - ref) / np.linalg.norm(u), abs(np.linalg.norm(t) - np.linalg.norm(u))
    )
out["5 sphere transport d = pi - 1e-1..1e-9 (err vs closed form; inf = NaN)"] = w5
# 6 Karcher mean spread data: the midpoint of exp(c, +-h e) is c (closed form)
w6 = 0.0
warned = False
exc6 = []
for man, half in [(SPD(3), 15.0), (Hyperboloid(2), 10.0), (Hyperboloid(2), 15.0)]:
    rng6 = np.random.default_rng(1)
    for _ in range(3):
        c = man.random_point(rng6)
        e = man.tangent_gaussian(c, 1.0, rng6)
        e = e / man.norm(c, e)
        pts = np.stack([man.exp(c, half * e), man.exp(c, -half * e)])
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            mean = safe(lambda: man.mean(pts))
            warned = warned or any("converge" in str(r.message) for r in rec)
        if isinstance(mean, Exception):
            exc6.append(type(mean).__name__)
            continue
        w6 = max(w6, float(man.dist(mean, c)))
out["6 Karcher mean of 2 points 20-30 apart (dist to the midpoint; warned?; errors)"] = (
    w6,
    warned,
    exc6,
)
# 7 dtypes
s24 = Sphere(24)
x32 = s24.random_point(3, (1000,)).astype(np.float32)
hh = Hyperboloid(5)
h32 = hh.random_point(4, (1000,)).astype(np.float32)
e32 = Euclidean(3).exp(np.zeros(3, np.float32), np.ones(3, np.float32)).dtype
out["7 float32 points accepted (sphere, hyperboloid of 1000), Euclidean exp dtype"] = (
    float(np.mean(s24.belongs(x32))),
    float(np.mean(hh.belongs(h32))),
    str(e32),
)
# 8 checked
ok8 = []
sp = Sphere(2)
xx = sp.random_point(0)
r = safe(lambda: sp.checked().log(xx, y=3 * xx))
ok8.append(isinstance(r, ValueError))
pts = sp.random_point(0, (3,))
pts[0] *= 5
r = safe(lambda: sp.checked().mean(pts))
ok8.append(isinstance(r, ValueError))
r = safe(lambda: sp.is_tangent(xx, np.zeros(5)))
ok8.append(not isinstance(r, Exception) and not np.any(r))
pts = sp.random_point(0, (3,))
pts[1, 0] = np.nan
r = safe(lambda: sp.mean(pts))
ok8.append(isinstance(r, ValueError) and "points" in str(r))
out["8 checked kw / checked mean / is_tangent shape / mean NaN -> clear"] = ok8
# 9 poincare near boundary: round trips of transport between clipped points
ball = PoincareBall(2)
x9 = ball.exp(np.zeros(2), np.array([60.0, 0]))
y9 = ball.exp(np.zeros(2), np.array([0.0, 60.0]))
u9 = ball.from_coords(x9, np.array([1.0, 0.5]))
n0 = ball.norm(x9, u9)
worst9 = 0.0
with np.errstate(all="ignore"):
    v = u9
    for _ in range(100):
        v = ball.transport(y9, x9, ball.transport(x9, y9, v))
        nn = ball.norm(x9, v)
        worst9 = max(worst9, abs(nn - n0) / n0 if np.isfinite(nn) else np.inf)
out["9 poincare 100 transport round trips at the clip radius (rel norm drift)"] = worst9
# 10 views / identical draws
e = Euclidean(3)
a = np.ones(3)
views = [np.shares_memory(f(a, a), a) for f in (e.proj, e.egrad2rgrad, e.to_coords, e.from_coords)]
draws = e.tangent_gaussian(np.zeros(3), np.array([1.0, 1.0]), 0)
out["10 Euclidean views (proj, egrad2rgrad, to/from_coords); identical draws"] = (
    views,
    bool(draws.shape == (3,) or np.allclose(draws[0], draws[-1]) if draws.ndim > 1 else True),
)
for k, v in out.items():
    print(f"{k}: {v}")
