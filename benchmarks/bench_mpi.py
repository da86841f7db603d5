"""Strong and weak scaling of one gossip round and one DO-ADP round on the MPI engine.

Sphere S^9 Riemannian gossip (circulant graph i+-1,2,3, Metropolis-Hastings weights) and DO-ADP
(logistic regression, d = 50, p = 0.8, Top-k k = 15, Gaussian noise) on 1, 2 and 4 ranks:
strong scaling at a fixed number of agents, weak scaling at a fixed number of agents per rank.
Each row is the median over rounds of the slowest rank's wall time (a barrier before each
round) and CPU time (``process_time``).
Protocol messages and bytes per round (summed over ranks) are compared with the in-process
engine's; the engine's own halo traffic (Neighbor_alltoallv) is shown apart.

Run: ``python benchmarks/bench_mpi.py [--repeats 10]`` (launches ``mpiexec`` itself).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rfed.algorithms.decentralized import DOADP
from rfed.datasets.synthetic import make_epsilon_like
from rfed.manifolds import Sphere
from rfed.networks.gossip import riemannian_gossip
from rfed.networks.graphs import circulant
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly

D_GOSSIP, D_DOADP, Q = 9, 50, 20


def _setup(n: int, comm):
    g = circulant(n, 3)
    w = metropolis_hastings_weights(g)
    x, y = make_epsilon_like(n * Q, D_DOADP, 0)
    f, lab = split_evenly(x, y, n, np.random.default_rng(0))
    prob = LogisticRegression(f, lab, L2Regularizer(1.0 / Q))
    net = Network(g, w) if comm is None else Network(g, w, communicator=comm)
    alg = DOADP(net, alpha=1e-3, p=0.8, k=15, noise_multiplier=1.0, grad_bound=1.0)
    pts = Sphere(D_GOSSIP).random_point(np.random.default_rng(1), n)
    return w, prob, net, alg, pts


def measure(n: int, repeats: int, comm=None) -> dict:
    """Per-round times (slowest rank), protocol messages/bytes and engine bytes."""
    w, prob, net, alg, pts = _setup(n, comm)
    c = net.comm

    def barrier():
        if comm is not None:
            comm.comm.Barrier()

    def reduce_max(t: float) -> float:
        if comm is None:
            return t
        from mpi4py import MPI

        return comm.comm.allreduce(t, op=MPI.MAX)

    local = pts[c.agents]
    sphere = Sphere(D_GOSSIP)
    out = {}
    for name in ("gossip", "doadp"):
        state = alg.init(prob, np.zeros(D_DOADP), np.random.default_rng(2)) if name == "doadp" \
            else None
        times, cpus = [], []
        before = c.total_stats()
        eng0 = getattr(c, "engine_bytes", 0)
        for _ in range(repeats):
            barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "gossip":
                local = riemannian_gossip(sphere, local, w, 1.0, comm=c)
            else:
                state = alg.step(prob, state)
            cpus.append(reduce_max(time.process_time() - c0))
            times.append(reduce_max(time.perf_counter() - t0))
        after = c.total_stats()
        eng = getattr(c, "engine_bytes", 0) - eng0
        if comm is not None:
            eng = comm.comm.allreduce(eng)
        out[name] = {"ms": 1e3 * float(np.median(times)),
                     "cpu_ms": 1e3 * float(np.median(cpus)),
                     "messages": (after["messages"] - before["messages"]) / repeats,
                     "bytes": (after["bytes"] - before["bytes"]) / repeats,
                     "engine_bytes": eng / repeats}
    return out


def child(sizes: list[int], repeats: int) -> None:
    from rfed.engines.mpi import MPICommunicator

    res = {n: measure(n, repeats, MPICommunicator(n)) for n in sizes}
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps(res))


def main(repeats: int, per_rank: int, strong: int) -> None:
    mpiexec = Path(sys.executable).with_name("mpiexec")
    rows = []
    for ranks in (1, 2, 4):
        sizes = sorted({strong, per_rank * ranks})
        cmd = [str(mpiexec), "-n", str(ranks), sys.executable, "-m", "mpi4py", __file__,
               "--child", ",".join(map(str, sizes)), "--repeats", str(repeats)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        res = json.loads(done.stdout.strip().splitlines()[-1])
        for n in sizes:
            kind = ("strong" if n == strong else "") + (
                "/weak" if n == per_rank * ranks else "")
            rows.append((kind.strip("/"), ranks, n, res[str(n)]))
    print(f"MPI engine (mpich wheel), circulant +-1,2,3; median of {repeats} rounds, slowest rank")
    print(f"{'scaling':<12}{'ranks':>6}{'agents':>8}{'round':>8}{'wall ms':>10}{'cpu ms':>9}"
          f"{'messages':>10}{'bytes':>12}{'in-proc msgs':>14}{'in-proc bytes':>15}"
          f"{'halo bytes':>12}")
    base = {}
    for kind, ranks, n, res in rows:
        if n not in base:
            base[n] = measure(n, repeats)
        for name in ("gossip", "doadp"):
            r, b = res[name], base[n][name]
            print(f"{kind:<12}{ranks:>6}{n:>8}{name:>8}{r['ms']:>10.2f}{r['cpu_ms']:>9.2f}"
                  f"{r['messages']:>10.0f}{r['bytes']:>12.0f}{b['messages']:>14.0f}"
                  f"{b['bytes']:>15.0f}{r['engine_bytes']:>12.0f}")
    print("\nin-process engine (one process, same rounds):")
    for n, res in sorted(base.items()):
        print(f"  {n} agents: gossip {res['gossip']['ms']:.2f} ms (cpu "
              f"{res['gossip']['cpu_ms']:.2f}), DO-ADP {res['doadp']['ms']:.2f} ms (cpu "
              f"{res['doadp']['cpu_ms']:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--per-rank", type=int, default=256)
    parser.add_argument("--strong", type=int, default=1024)
    parser.add_argument("--child", type=str, default=None)
    args = parser.parse_args()
    if args.child:
        child([int(s) for s in args.child.split(",")], args.repeats)
    else:
        main(args.repeats, args.per_rank, args.strong)
