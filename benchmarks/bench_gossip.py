"""One gossip round: rfed against the strongest code a competent user writes, in the same run.

Run on demand: ``python benchmarks/bench_gossip.py [--agents 1000 10000] [--dim 10]
[--repeat 9] [--no-sphere] [--out benchmarks/results/bench_gossip]``.

For each size, graph (random 6-regular with Metropolis-Hastings weights; complete with uniform
weights 1/n) and manifold (``Euclidean(d)``; ``Sphere(d)`` with points in R^(d+1) at the first
size) it times

* ``rfed gossip``: :func:`rfed.networks.riemannian_gossip` with W frozen as a
  :class:`~rfed.networks.Network` and the algorithms hold it (:func:`rfed.networks.
  freeze_weights`: what is derived from W, its checks included, is computed once), points
  checked at every call; ``rfed Network.gossip``: the same through a Network's communicator
  (messages and bytes counted); ``rfed, unfrozen W``: a plain CSR matrix (W's checks redone at
  every call);
* Euclidean baselines, no checks and no counting: ``W @ X`` with W a scipy CSR matrix, with W a
  dense numpy array (BLAS), and ``hand-vectorized numpy``: on the regular graph, the neighbours
  gathered as an ``(n, degree)`` index array and summed with their weights
  (``einsum``); on the complete graph with equal weights, the mean broadcast to every row
  (``x.sum(0) / n``, a read-only view: no output array is written);
* sphere baselines: ``per-agent vectorized`` (a loop over agents, each with one batched ``log``
  over its neighbours, a weighted sum and one ``exp``) and ``floor: logs of all arcs`` (the
  batched ``log`` of every arc with its inputs already gathered: what any arc-wise method must
  compute).

One BLAS thread (set before numpy loads). All calls of one configuration are interleaved in one
process (one sample of each in turn, in a shuffled order, ``repeat`` times), so load on a shared
machine affects every method alike; the table gives the median CPU time (``time.process_time``)
per call, ``rfed/base`` (rfed gossip's time over the method's; below 1 rfed is faster) and the
largest difference from rfed's result. The closing lines give, per configuration, rfed gossip
over the better of the two BLAS products and over the best baseline. Records go to
``--out`` (``.json`` and ``.txt``).
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from rfed.manifolds import Euclidean, Sphere
from rfed.networks import (
    Network,
    complete,
    freeze_weights,
    random_regular,
    riemannian_gossip,
    uniform_weights,
)

RESULTS = Path(__file__).resolve().parent / "results"
BLAS = ("W @ X (scipy CSR)", "W @ X (dense BLAS)")


def interleaved_medians(fns: dict, repeat: int) -> tuple[dict, dict]:
    """Median CPU seconds per call of each function, calls interleaved; and each last result.

    Each timed sample is as many calls as take about two milliseconds (so the clock's
    resolution does not matter); the order is shuffled every repeat (seeded), so no method
    always runs on the caches one other method left."""
    out = {name: fn() for name, fn in fns.items()}  # warm-up
    calls = {}
    for name, fn in fns.items():
        once = []
        for _ in range(3):
            t0 = time.process_time()
            fn()
            once.append(time.process_time() - t0)
        calls[name] = max(1, int(2e-3 / max(float(np.median(once)), 1e-7)))
    times = {name: [] for name in fns}
    names = list(fns)
    order = np.random.default_rng(12345)
    for _ in range(repeat):
        for name in order.permutation(names):
            fn = fns[name]
            t0 = time.process_time()
            for _ in range(calls[name]):
                out[name] = fn()
            times[name].append((time.process_time() - t0) / calls[name])
    return {name: float(np.median(ts)) for name, ts in times.items()}, out


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


def _regular_gather(w: sp.csr_matrix):
    """``x -> W x`` by a gather of each row's (equally many) stored entries, einsum-summed."""
    n = w.shape[0]
    per_row = np.diff(w.indptr)
    if not np.all(per_row == per_row[0]):
        return None
    idx = w.indices.reshape(n, per_row[0])
    wts = w.data.reshape(n, per_row[0])
    return lambda x: np.einsum("ij,ijk->ik", wts, x[idx])


def euclidean_methods(graph_name, graph, w, x, manifold):
    frozen = freeze_weights(w)
    net = Network(graph, frozen)
    fns = {"rfed gossip": lambda: riemannian_gossip(manifold, x, frozen),
           "rfed Network.gossip": lambda: net.gossip(manifold, x),
           "rfed, unfrozen W": lambda: riemannian_gossip(manifold, x, w),
           "W @ X (scipy CSR)": lambda: w @ x}
    n = x.shape[0]
    if n <= 8192:
        dense = w.toarray()
        fns["W @ X (dense BLAS)"] = lambda: dense @ x
    if graph_name.startswith("complete"):
        fns["hand-vectorized numpy"] = lambda: np.broadcast_to(x.sum(0) / n, x.shape)
    else:
        gather = _regular_gather(w)
        if gather is not None:
            fns["hand-vectorized numpy"] = lambda: gather(x)
    return fns


def sphere_methods(w, x, manifold):
    frozen = freeze_weights(w)
    fns = {"rfed gossip": lambda: riemannian_gossip(manifold, x, frozen),
           "per-agent vectorized": lambda: neighbour_vectorized(manifold, x, w)}
    coo = sp.coo_matrix(w)
    off = coo.row != coo.col
    base, other = x[coo.row[off]], x[coo.col[off]]
    fns["floor: logs of all arcs"] = lambda: manifold.log(base, other)
    return fns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--degree", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--complete-max", type=int, default=4096,
                        help="largest size at which the complete graph is timed")
    parser.add_argument("--no-sphere", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "bench_gossip"))
    parser.add_argument("--label", default="", help="a note stored with the results")
    args = parser.parse_args()
    d = args.dim
    records, lines, summary = [], [], []
    header = (f"{'agents':>7} {'graph':<22} {'manifold':<14} {'method':<24} {'ms (CPU)':>10} "
              f"{'rfed/base':>10} {'max |diff|':>11}")
    lines.append(f"one gossip round, d = {d}; median CPU time of {args.repeat} interleaved "
                 f"samples, 1 BLAS thread")
    lines += [header, "-" * len(header)]
    for size_index, n in enumerate(args.agents):
        rng = np.random.default_rng(0)
        graphs = {f"random {args.degree}-regular (MH)": random_regular(n, args.degree, rng)}
        if n <= args.complete_max:
            graphs["complete (1/n)"] = complete(n)
        for gname, graph in graphs.items():
            # a writable copy: what a user's own matrix is (a frozen one is read-only)
            if gname.startswith("complete"):
                w = sp.csr_matrix(uniform_weights(graph), copy=True)
            else:
                w = sp.csr_matrix(Network(graph).weights, copy=True)
            cases = [(f"Euclidean({d})", Euclidean(d), rng.standard_normal((n, d)))]
            if size_index == 0 and not args.no_sphere:
                cases.append((f"Sphere({d})", Sphere(d), sphere_points(rng, n, d, 1.0)))
            for mname, manifold, x in cases:
                fns = (euclidean_methods(gname, graph, w, x, manifold)
                       if mname.startswith("Euclidean") else sphere_methods(w, x, manifold))
                times, outs = interleaved_medians(fns, args.repeat)
                ref = times["rfed gossip"]
                for name, t in times.items():
                    got = np.asarray(outs[name])
                    same = got.shape == outs["rfed gossip"].shape
                    diff = float(np.max(np.abs(got - outs["rfed gossip"]))) if same else None
                    records.append({"agents": n, "graph": gname, "manifold": mname,
                                    "method": name, "seconds": t, "rfed_over_base": ref / t,
                                    "max_abs_diff": diff})
                    lines.append(f"{n:>7} {gname:<22} {mname:<14} {name:<24} {1e3 * t:>10.4f} "
                                 f"{ref / t:>10.2f} "
                                 f"{'-' if diff is None else format(diff, '.1e'):>11}")
                blas = [times[k] for k in BLAS if k in times]
                if blas:
                    best = min(t for k, t in times.items() if not k.startswith("rfed"))
                    summary.append({"agents": n, "graph": gname, "manifold": mname,
                                    "rfed_over_csr": ref / times[BLAS[0]],
                                    "rfed_over_best_blas": ref / min(blas),
                                    "rfed_over_best_baseline": ref / best,
                                    "network_gossip_over_csr":
                                        times["rfed Network.gossip"] / times[BLAS[0]]})
    lines.append("")
    lines.append(f"{'agents':>7} {'graph':<22} {'manifold':<14} {'rfed/CSR':>9} "
                 f"{'Network/CSR':>12} {'rfed/best BLAS':>15} {'rfed/best':>10}")
    for s in summary:
        lines.append(f"{s['agents']:>7} {s['graph']:<22} {s['manifold']:<14} "
                     f"{s['rfed_over_csr']:>9.2f} {s['network_gossip_over_csr']:>12.2f} "
                     f"{s['rfed_over_best_blas']:>15.2f} {s['rfed_over_best_baseline']:>10.2f}")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join([Path(sys.executable).name] + sys.argv), "label": args.label,
            "machine": platform.platform(), "cpus": os.cpu_count(),
            "load_average": os.getloadavg(), "repeat": args.repeat, "dim": d}
    out.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "records": records, "summary": summary}, indent=1) + "\n")
    out.with_suffix(".txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
