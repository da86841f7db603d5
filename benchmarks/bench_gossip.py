"""One gossip round with 1,000 agents: rfed's arc-batched gossip against a per-agent Python loop.

Run on demand: ``python benchmarks/bench_gossip.py [--agents 1000] [--dim 10] [--repeat 5]``.

For each graph (random 6-regular with Metropolis-Hastings weights; complete with uniform weights
1/n) and each manifold (``Euclidean(d)``, ``Sphere(d)`` with points in R^(d+1)) it times

* rfed: :func:`rfed.networks.riemannian_gossip` (Euclidean: one sparse product ``W @ X``;
  otherwise one batched ``log`` over all arcs, a sparse segment sum, one batched ``exp``);
* loop: for each agent, loop over its neighbours calling ``manifold.log`` on single points,
  accumulate the weighted sum, then one ``manifold.exp`` -- the straightforward per-agent code.

Both run in the same process on the same points; the table gives the best-of-``repeat`` time of
rfed, the time of one loop round, their ratio (loop / rfed: above 1 means rfed is faster) and the
largest difference between the two results.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from rfed.manifolds import Euclidean, Sphere
from rfed.networks import (
    complete,
    metropolis_hastings_weights,
    random_regular,
    riemannian_gossip,
    uniform_weights,
)


def best_time(fn, repeat: int) -> tuple[float, object]:
    """Best wall time of ``repeat`` calls (seconds) and the last result."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def loop_gossip(manifold, x: np.ndarray, w: sp.csr_matrix, gamma: float = 1.0) -> np.ndarray:
    """Per-agent reference: neighbours one by one, single-point log and exp."""
    out = np.empty_like(x)
    indptr, indices, data = w.indptr, w.indices, w.data
    for i in range(x.shape[0]):
        xi = x[i]
        v = np.zeros_like(xi)
        for ptr in range(indptr[i], indptr[i + 1]):
            j = indices[ptr]
            if j != i:
                v += data[ptr] * manifold.log(xi, x[j])
        out[i] = manifold.exp(xi, gamma * v)
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
    parser.add_argument("--repeat", type=int, default=5)
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

    header = (
        f"{'graph':<26} {'manifold':<14} {'arcs':>9} {'rfed [ms]':>10} {'loop [ms]':>11} "
        f"{'loop/rfed':>10} {'max |diff|':>11}"
    )
    print(f"one gossip round, n = {n} agents, d = {d}")
    print(header)
    print("-" * len(header))
    for gname, w in graphs.items():
        arcs = w.nnz - int(np.count_nonzero(w.diagonal()))
        for mname, manifold in manifolds.items():
            x = points[mname]
            t_fast, y_fast = best_time(
                lambda m=manifold, w=w, x=x: riemannian_gossip(m, x, w), args.repeat
            )
            t_loop, y_loop = best_time(lambda m=manifold, w=w, x=x: loop_gossip(m, x, w), 1)
            diff = float(np.max(np.abs(y_fast - y_loop)))
            print(
                f"{gname:<26} {mname:<14} {arcs:>9d} {1e3 * t_fast:>10.2f} {1e3 * t_loop:>11.1f} "
                f"{t_loop / t_fast:>10.0f} {diff:>11.1e}"
            )


if __name__ == "__main__":
    main()
