"""One gossip round with 1,000 agents: rfed against what a competent user writes.

Run on demand: ``python benchmarks/bench_gossip.py [--agents 1000] [--dim 10] [--repeat 7]``.

For each graph (random 6-regular with Metropolis-Hastings weights; complete with uniform weights
1/n) and each manifold (``Euclidean(d)``, ``Sphere(d)`` with points in R^(d+1)) it times

* ``rfed``: :func:`rfed.networks.riemannian_gossip` (checks W and the points, counts messages;
  Euclidean: one sparse product; sphere: batched ``log`` over all arcs, or over all pairs on a
  dense graph, a weighted sum per receiver, one batched ``exp``), with W frozen as a
  :class:`~rfed.networks.Network` and the algorithms hold it (:func:`rfed.networks.freeze_weights`:
  what is derived from W is computed once), and on Euclidean space ``rfed, unfrozen W`` with a
  plain CSR matrix (W's checks and message counts derived at every call);
* Euclidean baselines: ``W @ X`` with W a scipy CSR matrix, and with W a dense numpy array (no
  checks, no counting);
* sphere baseline ``per-agent vectorized``: a loop over agents, each with one batched ``log`` over
  its neighbours, a weighted sum and one ``exp`` (what a user writes with a batched manifold);
* ``floor: logs of all arcs``: the batched sphere ``log`` of every arc with its inputs already
  gathered (no gather, sum, ``exp``, checks or counting): what any arc-wise method must compute;
* ``naive per-arc loop``: one ``log`` call per arc (labelled naive; timed once, it is slow).

All calls are interleaved in one process (one call of each, in turn, ``repeat`` times) and the
table gives the median CPU time (``time.process_time``) per call, the ratio baseline / rfed
(above 1: rfed is faster) and the largest difference from rfed's result.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from rfed.manifolds import Euclidean, Sphere
from rfed.networks import (
    complete,
    freeze_weights,
    metropolis_hastings_weights,
    random_regular,
    riemannian_gossip,
    uniform_weights,
)


def interleaved_medians(fns: dict, repeat: int) -> tuple[dict, dict]:
    """Median CPU seconds per call of each function, calls interleaved; and each last result.

    The order rotates every repeat: the first call of a cycle runs on caches the previous
    cycle's last call left, which otherwise always penalizes the same function."""
    out = {name: fn() for name, fn in fns.items()}  # warm-up
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            t0 = time.process_time()
            out[name] = fn()
            times[name].append(time.process_time() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}, out


def naive_arc_loop(manifold, x: np.ndarray, w: sp.csr_matrix) -> np.ndarray:
    """Naive reference: one single-point ``log`` per arc, one ``exp`` per agent."""
    out = np.empty_like(x)
    indptr, indices, data = w.indptr, w.indices, w.data
    for i in range(x.shape[0]):
        xi = x[i]
        v = np.zeros_like(xi)
        for ptr in range(indptr[i], indptr[i + 1]):
            j = indices[ptr]
            if j != i:
                v += data[ptr] * manifold.log(xi, x[j])
        out[i] = manifold.exp(xi, v)
    return out


def neighbour_vectorized(manifold, x: np.ndarray, w: sp.csr_matrix) -> np.ndarray:
    """Per agent: one batched ``log`` over its neighbours, a weighted sum, one ``exp``."""
    out = np.empty_like(x)
    indptr, indices, data = w.indptr, w.indices, w.data
    for i in range(x.shape[0]):
        nb, wt = indices[indptr[i]:indptr[i + 1]], data[indptr[i]:indptr[i + 1]]
        v = wt @ manifold.log(x[i], x[nb])  # log(x_i, x_i) = 0: the diagonal adds nothing
        out[i] = manifold.exp(x[i], v)
    return out


def sphere_points(rng: np.random.Generator, n: int, dim: int, radius: float) -> np.ndarray:
    """Points of S^dim within geodesic distance ``radius`` of a pole (no antipodal pairs)."""
    s = Sphere(dim)
    pole = np.zeros(dim + 1)
    pole[0] = 1.0
    u = s.proj(pole, rng.standard_normal((n, dim + 1)))
    u *= radius * rng.random((n, 1)) / np.linalg.norm(u, axis=1, keepdims=True)
    return s.exp(pole, u)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--degree", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-naive", action="store_true", help="skip the naive per-arc loop")
    args = parser.parse_args()
    n, d = args.agents, args.dim
    rng = np.random.default_rng(0)

    graphs = {
        f"random {args.degree}-regular (MH)": metropolis_hastings_weights(
            random_regular(n, args.degree, rng)
        ),
        "complete (1/n)": uniform_weights(complete(n)),
    }
    manifolds = {f"Euclidean({d})": Euclidean(d), f"Sphere({d})": Sphere(d)}
    points = {
        f"Euclidean({d})": rng.standard_normal((n, d)),
        f"Sphere({d})": sphere_points(rng, n, d, 1.0),
    }

    header = (f"{'graph':<26} {'manifold':<14} {'method':<24} {'ms (CPU)':>10} "
              f"{'base/rfed':>10} {'max |diff|':>11}")
    print(f"one gossip round, n = {n} agents, d = {d}; median of {args.repeat} interleaved calls")
    print(header)
    print("-" * len(header))
    for gname, w in graphs.items():
        w = sp.csr_matrix(w)
        frozen = freeze_weights(w)
        w_dense = w.toarray()
        for mname, manifold in manifolds.items():
            x = points[mname]
            # rfed with the frozen matrix a Network or an algorithm holds (its row sums,
            # finiteness and out-degrees computed once)
            fns = {"rfed": lambda m=manifold, w=frozen, x=x: riemannian_gossip(m, x, w)}
            if mname.startswith("Euclidean"):
                # and with a plain CSR matrix (on the sphere the arcs' logs dwarf the difference)
                fns["rfed, unfrozen W"] = lambda m=manifold, w=w, x=x: riemannian_gossip(m, x, w)
                fns["W @ X (scipy CSR)"] = lambda w=w, x=x: w @ x
                fns["W @ X (dense numpy)"] = lambda w=w_dense, x=x: w @ x
            else:
                fns["per-agent vectorized"] = (
                    lambda m=manifold, w=w, x=x: neighbour_vectorized(m, x, w))
                # the floor of any arc-wise method: the logs alone, inputs already gathered
                coo = sp.coo_matrix(w)
                off = coo.row != coo.col
                base, other = x[coo.row[off]], x[coo.col[off]]
                fns["floor: logs of all arcs"] = lambda m=manifold, b=base, o=other: m.log(b, o)
            times, outs = interleaved_medians(fns, args.repeat)
            if not args.no_naive:
                t0 = time.process_time()
                outs["naive per-arc loop"] = naive_arc_loop(manifold, x, w)
                times["naive per-arc loop"] = time.process_time() - t0
            ref = times["rfed"]
            for name, t in times.items():
                same_shape = outs[name].shape == outs["rfed"].shape
                diff = float(np.max(np.abs(outs[name] - outs["rfed"]))) if same_shape else np.nan
                print(f"{gname:<26} {mname:<14} {name:<24} {1e3 * t:>10.3f} {t / ref:>10.2f} "
                      f"{diff:>11.1e}")


if __name__ == "__main__":
    main()
