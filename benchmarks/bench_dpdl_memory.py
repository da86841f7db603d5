"""Peak memory of one DPDL round: chunks of (model, data owner) pairs bound it (issue 13).

DPDL evaluates every agent's model on each neighbour's minibatch: ``arcs + agents`` pairs of
``B`` per-sample gradients. Computed at once they take ``O((arcs + agents) B dim)`` memory;
``max_chunk_pairs`` bounds that part to ``O(max_chunk_pairs B dim)``, leaving
``O((arcs + agents) dim)`` for the per-pair results (the messages themselves).

Setting: logistic regression on Euclidean(100) with unit-norm synthetic features, ``q = 32``
records per agent, ``B = 32``, a ring (two neighbours: three pairs per agent), Gaussian noise.
Each configuration runs in a fresh process; the peak resident set of ``init`` + one ``step`` is
read from ``VmHWM`` after resetting it (``/proc/self/clear_refs``) once the data are built, so
the data set (``n q dim`` floats, the same for every setting) is reported apart.

A second table times one round in one pass and in chunks, interleaved in one process (median
CPU time, ``process_time``, of 7 rounds each; the iterates are checked equal).

Run: ``python benchmarks/bench_dpdl_memory.py [--agents 100000] [--small 10000]``
(Linux only; the unchunked run is measured at ``--small`` agents, where it fits).
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # one BLAS thread, set before numpy loads (children too)

import argparse
import json
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import proc_status_mb  # noqa: E402

DIM, Q, B = 100, 32, 32


def measure(n_agents: int, max_chunk_pairs: int) -> dict:
    """One DPDL round at ``n_agents``: peak RSS above the data, and timings."""
    problem, algs = _problem_and_algorithms(n_agents, (max_chunk_pairs,))
    alg = algs[max_chunk_pairs]
    data_mb = proc_status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak (VmHWM) to the current RSS
    t0 = time.process_time()
    state = alg.init(problem, np.zeros(DIM), np.random.default_rng(1))
    state = alg.step(problem, state)
    cpu = time.process_time() - t0
    peak = proc_status_mb("VmHWM")
    return {"n_agents": n_agents, "max_chunk_pairs": max_chunk_pairs,
            "pairs": int(3 * n_agents), "rss_before_round_mb": round(data_mb),
            "peak_rss_mb": round(peak), "round_extra_mb": round(peak - data_mb),
            "round_cpu_s": round(cpu, 1), "digest": float(np.abs(state.x).sum())}


def _problem_and_algorithms(n_agents: int, chunks: tuple[int, ...]):
    from rfed.algorithms.decentralized import DPDL
    from rfed.networks.graphs import ring
    from rfed.networks.mixing import metropolis_hastings_weights
    from rfed.networks.network import Network
    from rfed.problems.linear import L2Regularizer, LogisticRegression

    rng = np.random.default_rng(0)
    feats = rng.standard_normal((n_agents, Q, DIM))
    feats /= np.linalg.norm(feats, axis=-1, keepdims=True)
    labels = np.where(rng.random((n_agents, Q)) < 0.5, -1.0, 1.0)
    problem = LogisticRegression(feats, labels, L2Regularizer(1.0 / Q), feature_bound=1.0)
    g = ring(n_agents)
    algs = {c: DPDL(Network(g, metropolis_hastings_weights(g)), lr=0.05, batch_size=B,
                    clip=1.0, noise_multiplier=1.0, max_chunk_pairs=c) for c in chunks}
    return problem, algs


def speed(n_agents: int, repeats: int = 7) -> dict:
    """Median CPU ms of a round in one pass and in chunks of 2048, interleaved."""
    problem, algs = _problem_and_algorithms(n_agents, (10 ** 9, 2048))
    states = {c: a.init(problem, np.zeros(DIM), np.random.default_rng(1))
              for c, a in algs.items()}
    times: dict[int, list[float]] = {c: [] for c in algs}
    for _ in range(repeats):
        for c, a in algs.items():
            t0 = time.process_time()
            states[c] = a.step(problem, states[c])
            times[c].append(time.process_time() - t0)
    if not np.array_equal(states[10 ** 9].x, states[2048].x):
        raise AssertionError("chunked and one-pass rounds differ")
    one, chunked = (1e3 * float(np.median(times[c])) for c in (10 ** 9, 2048))
    return {"n_agents": n_agents, "one_pass_cpu_ms": round(one, 1),
            "chunks_2048_cpu_ms": round(chunked, 1), "ratio": round(chunked / one, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--child", nargs=2, type=int, metavar=("N", "CHUNK"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    from _timing import results_file

    with results_file("bench_dpdl_memory"):
        report(args)


def report(args) -> None:
    """The memory table of the three configurations and the speed lines."""
    rows = []
    for n, chunk in ((args.small, 10 ** 9), (args.small, 2048), (args.agents, 2048)):
        out = subprocess.run([sys.executable, __file__, "--child", str(n), str(chunk)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    print()
    for n in (20, 2000):
        print(speed(n), flush=True)


if __name__ == "__main__":
    main()
