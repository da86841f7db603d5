"""Speed of rfed's batched manifold maps against geomstats (batched) and a pymanopt loop.

Run on demand: ``python benchmarks/bench_manifolds.py [--quick]``. Prints one table row per
(manifold, operation) with the median CPU time of ``repeat`` interleaved calls of

* rfed: one batched call on all points;
* geomstats 2.8.0: one batched call (``Hypersphere(24)``, ``Hyperboloid(2)``, ``SPDMatrices(9)``
  with their default metrics; argument order ``metric.exp(v, x)``); geomstats has no tangent
  Gaussian, so its ``random_tangent_vec`` is the comparison for ``tangent_gaussian``;
* Stiefel(100, 5) (200 points) and Grassmann(100, 5) (30 points) against geomstats' ``Stiefel`` and
  ``Grassmannian`` (projector representation) and pymanopt's ``Stiefel`` / ``Grassmann``;
* a per-point Python loop over pymanopt 2.2.1 (``Sphere(25)``, ``SymmetricPositiveDefinite(9)``;
  pymanopt has no hyperboloid, so its ``PoincareBall(2)`` stands in, and since that has no
  transport the hyperboloid transport loop calls geomstats point by point; pymanopt's SPD
  transport is the identity, so the SPD transport loop calls geomstats point by point too);
  ``tangent_gaussian``
  is compared with ``random_tangent_vector``. The loop runs on a subsample (``--loop-points``,
  2,000 by default) and its time is scaled linearly to the full point count.

Ratios are baseline time / rfed time (above 1: rfed is faster). Targets (issue 2): ratio >= 1
against geomstats on every row, >= 30 against the loop.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from rfed.manifolds import SPD, Grassmann, Hyperboloid, PoincareBall, Sphere, Stiefel


def best_times(fns, repeat: int) -> list[float]:
    """Median CPU time (``time.process_time``) of ``repeat`` calls of each function, seconds.

    The calls are interleaved (round robin), so a burst of load on the machine hits every
    contender alike instead of one of them; CPU time is not inflated by other processes' load
    (the machine is shared) as wall time is.
    """
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            times[i].append(time.process_time() - t0)
    return [float(np.median(ts)) for ts in times]


def best_time(fn, repeat: int) -> float:
    """Median CPU time of ``repeat`` calls, in seconds."""
    return best_times([fn], repeat)[0]


def loop_time(fn, n_loop: int, n_full: int, repeat: int) -> float:
    """Time of a per-point loop over ``n_loop`` points, scaled to ``n_full`` points."""
    return best_time(lambda: [fn(i) for i in range(n_loop)], repeat) * n_full / n_loop


def sample_pairs(m, n, rng):
    """``n`` point pairs ``x, y`` and tangent vectors ``u`` (std 0.5), ``v`` (std 1) at ``x``."""
    x = m.random_point(rng, n)
    y = m.random_point(rng, n)
    return x, y, m.tangent_gaussian(x, 0.5, rng), m.tangent_gaussian(x, 1.0, rng)


def suite(name, m, gs, pts, loop):
    """Rows of one manifold: rfed and geomstats batched on ``pts``, with the given loop column.

    ``pts = (x, y, u, v)`` from :func:`sample_pairs`; ``loop`` maps each operation to a
    per-point callable ``i -> result``.
    """
    x, y, u, v = pts
    n = len(x)
    g = np.random.default_rng(1)
    batched = {
        "exp": (lambda: m.exp(x, u), lambda: gs.metric.exp(u, x)),
        "log": (lambda: m.log(x, y), lambda: gs.metric.log(y, x)),
        "dist": (lambda: m.dist(x, y), lambda: gs.metric.dist(x, y)),
        "transport": (
            lambda: m.transport(x, y, v),
            lambda: gs.metric.parallel_transport(v, x, end_point=y),
        ),
        "tangent_gaussian": (
            lambda: m.tangent_gaussian(x, 1.0, g),
            lambda: gs.random_tangent_vec(x, n_samples=n),
        ),
    }
    return name, n, {op: (ours, theirs, loop[op]) for op, (ours, theirs) in batched.items()}


def pymanopt_loop(pym, x, y, u, transport):
    """Per-point pymanopt calls on ``x, y, u``, with the given per-point ``transport``."""
    return {
        "exp": lambda i: pym.exp(x[i], u[i]),
        "log": lambda i: pym.log(x[i], y[i]),
        "dist": lambda i: pym.dist(x[i], y[i]),
        "transport": transport,
        "tangent_gaussian": lambda i: pym.random_tangent_vector(x[i]),
    }


def geomstats_transport_loop(gs, pts):
    """Per-point geomstats parallel transport (for manifolds where pymanopt has none)."""
    x, y, _, v = pts
    return lambda i: gs.metric.parallel_transport(v[i], x[i], end_point=y[i])


def sphere_rows(n, rng):
    import geomstats.geometry.hypersphere as gh
    import pymanopt.manifolds as pm

    m = Sphere(24)
    pts = x, y, u, v = sample_pairs(m, n, rng)
    pym = pm.Sphere(25)
    loop = pymanopt_loop(pym, x, y, u, lambda i: pym.transport(x[i], y[i], v[i]))
    return suite("Sphere(24)", m, gh.Hypersphere(24), pts, loop)


def hyperboloid_rows(n, rng):
    import geomstats.geometry.hyperboloid as gh
    import pymanopt.manifolds as pm

    m = Hyperboloid(2)
    pts = x, y, _, _ = sample_pairs(m, n, rng)
    gs = gh.Hyperboloid(2)
    ball = PoincareBall(2)
    px, py = ball.from_hyperboloid(x), ball.from_hyperboloid(y)
    pu = ball.tangent_gaussian(px, 0.5, rng)
    pym = pm.PoincareBall(2)
    loop = pymanopt_loop(pym, px, py, pu, geomstats_transport_loop(gs, pts))
    return suite("Hyperboloid(2)", m, gs, pts, loop)


def spd_rows(n, rng):
    import geomstats.geometry.spd_matrices as gspd
    import pymanopt.manifolds as pm

    m = SPD(9)
    pts = x, y, u, _ = sample_pairs(m, n, rng)
    gs = gspd.SPDMatrices(9)
    pym = pm.SymmetricPositiveDefinite(9)
    loop = pymanopt_loop(pym, x, y, u, geomstats_transport_loop(gs, pts))
    return suite("SPD(9)", m, gs, pts, loop)


def spd_floor_table(n: int, rng, repeat: int) -> list[str]:
    """rfed's SPD(9) maps against the bare batched LAPACK calls they are built from.

    Interleaved, median CPU time (``time.process_time``) of ``max(repeat, 5)`` calls each. The
    maps work in the Cholesky frame (one ``cholesky`` and one triangular inverse per base
    point): exp is one ``eigh`` of the whitened tangent vector; log takes the whitened
    pencil's eigenvalues as squared singular values (one ``svd``), which keeps their digits up
    to a condition number of 1e24 where an ``eigh`` of the whitened matrix keeps them to 1e16;
    dist needs the singular values only. ``rfed log_dist`` (the pencil) and ``rfed
    log_dist_eigh`` (one ``eigh`` per pair with Rayleigh-quotient eigenvalues, the pencil past
    a whitened condition of 1e7: what the Frechet mean's gradients, Karcher iterations and
    evaluations with a gradient norm use), both with the Cholesky factors of y given, as a
    Frechet problem holds them. prirfed-fig3/fig4 evaluate the cost alone (their figures plot
    no gradient norm): the squared distances, from singular values.
    """
    from rfed.datasets import load_sample_image_descriptors
    from rfed.problems import SPDFrechetMean

    m = SPD(9)
    x, y, u, _ = sample_pairs(m, n, rng)
    chol = np.linalg.cholesky(x)
    chol_y = np.linalg.cholesky(y)
    b = np.linalg.inv(chol) @ chol_y
    # prirfed-fig4's evaluation: the Frechet cost and gradient of n photo patch descriptors
    # (50 agents) at their arithmetic mean, against the eigh of the n whitened matrices
    desc, _ = load_sample_image_descriptors(stride=7)
    desc = desc[rng.permutation(desc.shape[0])[: n - n % 50]]
    frechet = SPDFrechetMean(desc.reshape(50, -1, 9, 9))
    at = desc.mean(axis=0)
    whitened_b = np.linalg.inv(np.linalg.cholesky(at)) @ frechet.data["chol"]
    whitened = whitened_b @ np.swapaxes(whitened_b, -1, -2)

    def evaluation():
        frechet._evaluated = None   # no kept answer: a new point each time
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
        "floor: svd values of B": lambda: np.linalg.svd(whitened_b, compute_uv=False),
        "rfed exp": lambda: m.exp(x, u),
        "rfed log": lambda: m.log(x, y),
        "rfed dist": lambda: m.dist(x, y),
        "floor: eigh": lambda: np.linalg.eigh(x),
        "floor: eigvalsh": lambda: np.linalg.eigvalsh(x),
        "floor: svd": lambda: np.linalg.svd(b),
        "floor: svd values": lambda: np.linalg.svd(b, compute_uv=False),
        "floor: cholesky + inv": lambda: np.linalg.inv(np.linalg.cholesky(x)),
    }
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(max(repeat, 5)):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    med = {name: float(np.median(ts)) for name, ts in times.items()}
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
        f"{1e3 * by_eigh:.2f} ms ({pencil / by_eigh:.2f}x faster; floor cholesky + inv + eigh "
        f"= {1e3 * (frame + eigh):.2f} ms)")
    lines.append(
        f"Frechet cost and gradient of {frechet.n_samples} descriptors at one point: "
        f"{1e3 * med['rfed Frechet eval']:.2f} ms = "
        f"{med['rfed Frechet eval'] / med['floor: eigh of M']:.2f}x its floor, the eigh of the "
        f"{frechet.n_samples} whitened matrices M = L^-1 A L^-T "
        f"({1e3 * med['floor: eigh of M']:.2f} ms)")
    lines.append(
        f"Frechet cost alone (fig3/fig4's evaluations): "
        f"{1e3 * med['rfed Frechet cost']:.2f} ms = "
        f"{med['rfed Frechet cost'] / med['floor: svd values of B']:.2f}x its floor, the "
        f"singular values of the {frechet.n_samples} B = L^-1 R "
        f"({1e3 * med['floor: svd values of B']:.2f} ms); "
        f"{med['rfed Frechet eval'] / med['rfed Frechet cost']:.2f}x faster than cost and "
        f"gradient")
    return lines


def near_pairs(m, n, rng, radius=1.0):
    """Like :func:`sample_pairs`, but ``y = Exp_x(w)`` with ``|w| = radius`` (Stiefel's log
    iteration converges within a distance of about 2; random frames are further apart)."""
    x = m.random_point(rng, n)
    w = m.tangent_gaussian(x, 1.0, rng)
    y = m.exp(x, radius * w / m.norm(x, w)[:, None, None])
    return x, y, m.tangent_gaussian(x, 0.5, rng), m.tangent_gaussian(x, 1.0, rng)


def stiefel_rows(n, rng):
    import geomstats.geometry.stiefel as gst
    import pymanopt.manifolds as pm

    m = Stiefel(100, 5)
    pts = x, y, u, v = near_pairs(m, n, rng)
    gs = gst.Stiefel(100, 5)
    pym = pm.Stiefel(100, 5)
    loop = {
        "exp": lambda i: pym.exp(x[i], u[i]),
        "log": None,  # pymanopt's Stiefel has no log
        "dist": None,  # nor a distance
        "transport": lambda i: pym.transport(x[i], y[i], v[i]),
        "tangent_gaussian": lambda i: pym.random_tangent_vector(x[i]),
    }
    name, n_pts, rows = suite("Stiefel(100,5)", m, gs, pts, loop)
    # geomstats' Stiefel has no parallel transport (and rfed's is the projection vector
    # transport): compare with geomstats' projection to the tangent space instead
    rows["transport"] = (rows["transport"][0], lambda: gs.to_tangent(v, y), loop["transport"])
    return name, n_pts, rows


def grassmann_rows(n, rng):
    import geomstats.geometry.grassmannian as ggr
    import pymanopt.manifolds as pm

    m = Grassmann(100, 5)
    x, y, u, v = sample_pairs(m, n, rng)
    gs = ggr.Grassmannian(100, 5)
    # geomstats represents a subspace by its n x n projector and a tangent vector by the
    # symmetric n x n matrix H X^T + X H^T
    px, py = x @ np.swapaxes(x, -1, -2), y @ np.swapaxes(y, -1, -2)
    pu = u @ np.swapaxes(x, -1, -2) + x @ np.swapaxes(u, -1, -2)
    pv = v @ np.swapaxes(x, -1, -2) + x @ np.swapaxes(v, -1, -2)
    pym = pm.Grassmann(100, 5)
    loop = pymanopt_loop(pym, x, y, u, lambda i: pym.transport(x[i], y[i], v[i]))
    g = np.random.default_rng(1)
    rows = {
        "exp": (lambda: m.exp(x, u), lambda: gs.metric.exp(pu, px), loop["exp"]),
        "log": (lambda: m.log(x, y), lambda: gs.metric.log(py, px), loop["log"]),
        "dist": (lambda: m.dist(x, y), lambda: gs.metric.dist(px, py), loop["dist"]),
        "transport": (
            lambda: m.transport(x, y, v),
            lambda: gs.metric.parallel_transport(pv, px, end_point=py),
            loop["transport"],
        ),
        "tangent_gaussian": (
            lambda: m.tangent_gaussian(x, 1.0, g),
            lambda: gs.random_tangent_vec(px, n_samples=n),
            loop["tangent_gaussian"],
        ),
    }
    return "Grassmann(100,5)", n, rows


#: name -> (rows function, number of points). geomstats' Stiefel log (iterative, about 0.14 s a
#: point) and its Grassmannian (100 x 100 projectors, about 0.4 s a point) set the small counts.
SUITES = {
    "sphere": (sphere_rows, 100_000),
    "hyperboloid": (hyperboloid_rows, 100_000),
    "spd": (spd_rows, 10_000),
    "stiefel": (stiefel_rows, 200),
    "grassmann": (grassmann_rows, 30),
}

NOTES = [
    "geomstats tangent_gaussian column: random_tangent_vec (no tangent Gaussian in geomstats; on "
    "SPD it is sqrtm(P) (2U - 1 + transpose) sqrtm(P) with U uniform, elsewhere a projected "
    "normal)",
    "loop tangent_gaussian column: pymanopt random_tangent_vector (unit norm, not Gaussian)",
    "Sphere loop transport: pymanopt's Sphere.transport is a projection, not parallel transport",
    "SPD loop transport: pymanopt's SymmetricPositiveDefinite.transport is the identity (no "
    "work), so the loop calls geomstats SPDMatrices(9) parallel_transport per point instead",
    "Hyperboloid loop: pymanopt has no hyperboloid; exp/log/dist/tangent use pymanopt "
    "PoincareBall(2) on the same points, transport calls geomstats Hyperboloid(2) per point",
    "Stiefel(100,5): rfed uses the embedded (Euclidean) metric, geomstats its canonical metric "
    "(exp closed form, log iterative in both); points are 1 apart; geomstats and rfed have no "
    "parallel transport there, so the transport row times rfed's projection vector transport "
    "against geomstats' to_tangent and pymanopt's transport (also a projection); pymanopt has "
    "no Stiefel log or dist ('-')",
    "Grassmann(100,5): geomstats works on 100 x 100 projectors (its exp/log/transport take "
    "projectors and symmetric tangent matrices); pymanopt's transport is a projection, rfed's "
    "is the closed-form parallel transport",
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer points")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loop-points", type=int, default=2000)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES),
                        help="which manifolds to time (default: all)")
    parser.add_argument("--spd-floor", action="store_true",
                        help="only the table of SPD(9)'s maps against their LAPACK floors")
    args = parser.parse_args(argv)
    div = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    if args.spd_floor:
        for line in spd_floor_table(max(1, SUITES["spd"][1] // div), rng, args.repeat):
            print(line)
        return
    suites = [SUITES[name][0](max(1, SUITES[name][1] // div), rng) for name in args.suites]
    header = (
        f"{'manifold':<16} {'n':>7} {'operation':<17} {'rfed ms':>9} {'geomstats ms':>13} "
        f"{'gs/rfed':>8} {'loop ms':>10} {'loop/rfed':>10}"
    )
    print(header)
    print("-" * len(header))
    worst_gs, worst_loop = np.inf, np.inf
    for name, n, rows in suites:
        n_loop = min(args.loop_points, n)
        for op, (ours, theirs, loop) in rows.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_ours, t_gs = best_times([ours, theirs], args.repeat)
                t_loop = (np.nan if loop is None
                          else loop_time(loop, n_loop, n, max(1, args.repeat - 1)))
            worst_gs = min(worst_gs, t_gs / t_ours)
            if loop is not None:
                worst_loop = min(worst_loop, t_loop / t_ours)
            loop_cols = (f"{'-':>10} {'-':>10}" if loop is None
                         else f"{1e3 * t_loop:>10.1f} {t_loop / t_ours:>10.0f}")
            print(
                f"{name:<16} {n:>7} {op:<17} {1e3 * t_ours:>9.2f} {1e3 * t_gs:>13.2f} "
                f"{t_gs / t_ours:>8.1f} {loop_cols}"
            )
    print(f"\nworst ratio vs geomstats: {worst_gs:.2f} (target >= 1)")
    print(f"worst ratio vs per-point loop: {worst_loop:.0f} (target >= 30)")
    print(f"loop times measured on {args.loop_points} points per row and scaled linearly")
    for note in NOTES:
        print("note:", note)
    if "spd" in args.suites:
        print()
        for line in spd_floor_table(max(1, SUITES["spd"][1] // div), rng, args.repeat):
            print(line)


if __name__ == "__main__":
    main()
