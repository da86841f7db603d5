"""Time per round and peak memory of every algorithm at 10^3 to 10^6 agents, in one process.

Run on demand: ``python benchmarks/bench_scale.py [--sizes 1000 10000 100000 1000000]
[--algorithms gossip DP-DDA ...] [--rounds 5] [--cap-gib 8]``.

Every (algorithm, size) runs in a fresh child process with one BLAS thread and an address-space
cap (``resource.setrlimit(RLIMIT_AS)``, 8 GiB by default): the child builds the problem (``d =
10``, 10 records per agent, synthetic), the network and the algorithm, times ``init``, one
first round and then ``--rounds`` more (CPU time, ``time.process_time``), and reads its peak
resident set (``VmHWM`` of ``/proc/self/status``, Linux) at the end, and the median minor page
faults and system CPU seconds of the timed rounds (``getrusage``; the records'
``page_faults_per_round`` and ``system_s_per_round``). The table prints the
median CPU seconds of the timed rounds, the peak RSS and, per algorithm, the growth exponent
``log10(t(10^6) / t(10^5))`` of the time per round (1 = linear); the records and the table go to
``benchmarks/results/bench_scale.json`` and ``.txt`` (``--out``); ``--update`` replaces only the
cells measured (each record then names its command, commit and load) and redraws the table.

CPU time counts the kernel's too: with glibc's defaults every array above 32 MiB (an ``n x 10``
float array from about 420,000 agents on) is mapped fresh and unmapped on release, so each
temporary of a round faults its pages in again. ``--malloc keep`` runs the children with
``GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=<cap>`` (every block from
the heap, never trimmed below the cap) and writes ``bench_scale_malloc_keep.*``: the same code
without that kernel time.

Settings (every run private, with the noise parametrisation each algorithm's users run at
scale, no budget calibration):

* ``gossip``: one Euclidean gossip step ``Network.gossip`` (Metropolis-Hastings weights);
* ``PriRFed``: full participation, one DP-RSGD local step, batch 5 of 10, clip 1, noise
  multiplier 1, on logistic regression (Euclidean);
* ``DO-ADP`` (p = 1, no sparsification) and ``noisy DSGD``: batch 1, ``G = 1``, noise
  multiplier 1, logistic regression;
* ``DPDL`` and ``DP-DPSGD``: batch 5, clip 1, noise multiplier 1, logistic regression;
* ``DP-DDA``: ``sampler='maximal'``, ``n_active = n / 10``, noise multiplier 1, l2-regularized
  hinge-loss SVM; ``DP-DDA K_n``: the same on the complete graph with the paper's sampler
  (``'uniform'``);
* ``DP-DGT`` and ``noisy DDGT``: Laplace scales ``0.01 * 0.995^k`` on both messages, quadratic
  resource allocation with ``m = 10``, on the directed ring with hops 1 and 2;

on the circulant graph ``circulant(n, 2)`` (degree 4) for the undirected algorithms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DIM, RECORDS = 10, 10
SIZES = (1000, 10_000, 100_000, 1_000_000)
ALGORITHMS = ("gossip", "PriRFed", "DO-ADP", "noisy DSGD", "DPDL", "DP-DPSGD", "DP-DDA",
              "DP-DDA K_n", "DP-DGT", "noisy DDGT")
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
RESULTS = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------------- what a child runs
def _linear_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Features ``(n, 10, 10)`` with rows of norm at most 1 and labels in {-1, +1}."""
    features = rng.standard_normal((n, RECORDS, DIM))
    features /= np.sqrt(DIM) * 2.0
    labels = np.where(rng.random((n, RECORDS)) < 0.5, -1.0, 1.0)
    return features, labels


def _directed_ring(n: int):
    from rfed.networks import digraph_from_edges

    src = np.repeat(np.arange(n), 2)
    return digraph_from_edges(n, np.stack([src, (src + np.tile([1, 2], n)) % n], axis=1))


def build(name: str, n: int):
    """``(step, init)`` of one algorithm at ``n`` agents: ``init()`` returns the state,
    ``step(state)`` the next one."""
    from rfed.algorithms.decentralized import (
        DOADP,
        DPDDA,
        DPDGT,
        DPDL,
        DPDPSGD,
        NoisyDDGT,
        NoisyDSGD,
    )
    from rfed.algorithms.federated import DPRSGD, PriRFed
    from rfed.manifolds import Euclidean
    from rfed.networks import Network, circulant, complete
    from rfed.privacy.mechanisms import LaplaceSchedule
    from rfed.problems.dispatch import QuadraticResourceAllocation
    from rfed.problems.linear import HingeSVM, L2Regularizer, LogisticRegression

    rng = np.random.default_rng(0)
    x0 = np.zeros(DIM)
    if name == "gossip":
        net = Network(circulant(n, 2))
        manifold = Euclidean(DIM)
        points = rng.standard_normal((n, DIM))
        return (lambda x: net.gossip(manifold, x)), (lambda: points)
    if name in ("DP-DGT", "noisy DDGT"):
        a = 1.0 + rng.random((n, DIM))
        problem = QuadraticResourceAllocation(a, rng.standard_normal((n, DIM)),
                                              np.zeros((n, DIM)), np.full((n, DIM), 10.0),
                                              rng.random((n, DIM)))
        noise = {"theta_xi": LaplaceSchedule(0.01, 0.995),
                 "theta_zeta": LaplaceSchedule(0.01, 0.995)}
        graph = _directed_ring(n)
        alg = DPDGT(graph, **noise) if name == "DP-DGT" else NoisyDDGT(graph, **noise)
        x0 = np.zeros(DIM)
    elif name.startswith("DP-DDA"):
        problem = HingeSVM(*_linear_data(n, rng), L2Regularizer(0.1), feature_bound=1.0)
        if name == "DP-DDA K_n":
            alg = DPDDA(Network(complete(n)), n_active=n // 10, gamma=1.0, noise_multiplier=1.0)
        else:
            alg = DPDDA(Network(circulant(n, 2)), n_active=n // 10, sampler="maximal",
                        gamma=1.0, noise_multiplier=1.0)
    else:
        problem = LogisticRegression(*_linear_data(n, rng), L2Regularizer(0.01),
                                     feature_bound=1.0)
        if name == "PriRFed":
            alg = PriRFed(DPRSGD(steps=1, batch_size=5, clip=1.0, noise_multiplier=1.0),
                          n_sampled=None, step_size=0.1)
        else:
            net = Network(circulant(n, 2))
            if name == "DO-ADP":
                alg = DOADP(net, alpha=0.1, p=1.0, grad_bound=1.0, noise_multiplier=1.0)
            elif name == "noisy DSGD":
                alg = NoisyDSGD(net, alpha=0.1, grad_bound=1.0, noise_multiplier=1.0)
            elif name == "DPDL":
                alg = DPDL(net, lr=0.1, batch_size=5, clip=1.0, noise_multiplier=1.0)
            elif name == "DP-DPSGD":
                alg = DPDPSGD(net, lr=0.1, batch_size=5, clip=1.0, noise_multiplier=1.0)
            else:
                raise ValueError(f"unknown algorithm {name!r}; expected one of {ALGORITHMS}")
    return (lambda state: alg.step(problem, state)), (
        lambda: alg.init(problem, x0, np.random.default_rng(1)))


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(name: str, n: int, rounds: int) -> dict:
    """One (algorithm, size): build, init, 1 + ``rounds`` rounds; times and peak RSS."""
    t0 = time.process_time()
    step, init = build(name, n)
    build_s = time.process_time() - t0
    rss_built = _status_mib("VmRSS")
    t0 = time.process_time()
    state = init()
    init_s = time.process_time() - t0
    times, faults, system = [], [], []
    for _ in range(rounds + 1):
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.process_time()
        state = step(state)
        times.append(time.process_time() - t0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        faults.append(after.ru_minflt - before.ru_minflt)
        system.append(after.ru_stime - before.ru_stime)
    return {"algorithm": name, "n_agents": n, "status": "ok", "build_s": build_s,
            "init_s": init_s, "first_round_s": times[0],
            "round_s": float(np.median(times[1:])), "rounds_s": times[1:],
            "page_faults_per_round": float(np.median(faults[1:])),
            "system_s_per_round": float(np.median(system[1:])),
            "rss_after_build_mib": rss_built, "peak_rss_mib": _status_mib("VmHWM")}


# ---------------------------------------------------------------------- the parent
def _limit(cap_bytes: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))
    return apply


#: ``--malloc keep``: glibc serves every block from its heap (no mmap) and never trims it,
#: so a freed array is reused by the next one instead of being unmapped and faulted in again
KEEP_FREED = {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold={cap}"}


def run_one(name: str, n: int, rounds: int, cap_gib: float, timeout: float,
            malloc: str = "default") -> dict:
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = "1"
    if malloc == "keep":
        env.update({k: v.format(cap=int(cap_gib * 2**30)) for k, v in KEEP_FREED.items()})
    env.setdefault("OPENBLAS_CORETYPE", "Haswell")
    repo = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--child", name, str(n), "--rounds", str(rounds)]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=_limit(int(cap_gib * 2**30)))
    except subprocess.TimeoutExpired:
        return {"algorithm": name, "n_agents": n, "status": f"timeout after {timeout:g} s"}
    wall = time.time() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"algorithm": name, "n_agents": n, "status": f"failed: {tail[:200]}",
                "returncode": proc.returncode, "wall_s": wall}
    rec = json.loads(lines[-1])
    rec["wall_s"] = wall
    return rec


def exponent(records: list[dict], name: str, lo: int, hi: int, key: str = "round_s"):
    """``log10(value(hi) / value(lo)) / log10(hi / lo)`` of one algorithm, or None."""
    by_n = {r["n_agents"]: r for r in records if r["algorithm"] == name and r["status"] == "ok"}
    if lo not in by_n or hi not in by_n or by_n[lo][key] <= 0:
        return None
    return math.log(by_n[hi][key] / by_n[lo][key]) / math.log(hi / lo)


def table(records: list[dict], algorithms, sizes) -> str:
    head = f"{'algorithm':<12}" + "".join(f"{n:>22,}" for n in sizes) + f"{'exponent':>10}"
    sub = f"{'':<12}" + "".join(f"{'s/round':>12}{'peak MiB':>10}" for _ in sizes) + \
        f"{'(time)':>10}"
    lines = [head, sub, "-" * len(head)]
    for name in algorithms:
        row = f"{name:<12}"
        for n in sizes:
            rec = next((r for r in records if r["algorithm"] == name and r["n_agents"] == n),
                       None)
            if rec is None:
                row += f"{'-':>22}"
            elif rec["status"] != "ok":
                row += f"{rec['status'][:20]:>22}"
            else:
                row += f"{rec['round_s']:>12.4g}{rec['peak_rss_mib']:>10.0f}"
        lo, hi = (sizes[-2], sizes[-1]) if len(sizes) > 1 else (None, None)
        e = exponent(records, name, lo, hi) if lo else None
        row += f"{e:>10.2f}" if e is not None else f"{'-':>10}"
        lines.append(row)
    return "\n".join(lines)


def _commit() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes under ``rfed/``)."""
    repo = Path(__file__).resolve().parents[1]

    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], cwd=repo, capture_output=True, text=True).stdout

    dirty = bool(git("status", "--porcelain", "--", "rfed").strip())
    return git("rev-parse", "--short=12", "HEAD").strip() + ("+dirty" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds after the first")
    parser.add_argument("--cap-gib", type=float, default=8.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    parser.add_argument("--malloc", choices=("default", "keep"), default="default",
                        help="glibc's allocator as is, or keeping freed blocks for reuse")
    parser.add_argument("--out", default=None,
                        help="results path without suffix (.json and .txt are written; "
                             "default benchmarks/results/bench_scale[_malloc_keep])")
    parser.add_argument("--update", action="store_true",
                        help="replace the measured (algorithm, size) cells in the existing "
                             "results (--out's .json) and rewrite its table, keeping the rest")
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.rounds)))
        return
    unknown = sorted(set(args.algorithms) - set(ALGORITHMS))
    if unknown:
        parser.error(f"argument --algorithms: unknown {unknown}; choose from {list(ALGORITHMS)}")
    sizes = sorted(args.sizes)
    out = Path(args.out or RESULTS / ("bench_scale" if args.malloc == "default"
                                      else "bench_scale_malloc_keep"))
    records = []
    for name in args.algorithms:
        for n in sizes:
            rec = run_one(name, n, args.rounds, args.cap_gib, args.timeout, args.malloc)
            records.append(rec)
            shown = (f"{rec['round_s']:.4g} s/round, peak {rec['peak_rss_mib']:.0f} MiB, init "
                     f"{rec['init_s']:.3g} s, {rec['page_faults_per_round']:,.0f} page faults "
                     f"and {rec['system_s_per_round']:.3g} s system time per round"
                     if rec["status"] == "ok" else rec["status"])
            print(f"{name:<12} n = {n:>9,}: {shown}", flush=True)
    command = " ".join([Path(sys.executable).name] + sys.argv)
    meta = {"command": command,
            "machine": platform.platform(), "cpus": os.cpu_count(),
            "load_average": os.getloadavg(), "rounds": args.rounds, "cap_gib": args.cap_gib,
            "malloc": args.malloc,
            "dim": DIM, "records_per_agent": RECORDS, "sizes": sizes}
    updated = ""
    if args.update:
        # the cells measured now replace theirs in the earlier results, each record naming
        # the command, commit and load it was measured with; the table is redrawn from all
        kept = json.loads(out.with_suffix(".json").read_text())
        if kept["meta"]["rounds"] != args.rounds or kept["meta"]["malloc"] != args.malloc:
            parser.error(f"argument --update: {out.with_suffix('.json')} was measured with "
                         f"--rounds {kept['meta']['rounds']} --malloc {kept['meta']['malloc']}; "
                         f"re-measure its cells with the same")
        stamp = {"command": command, "commit": _commit(), "date": time.strftime(
            "%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": meta["load_average"]}
        fresh = {(r["algorithm"], r["n_agents"]) for r in records}
        records = [r for r in kept["records"]
                   if (r["algorithm"], r["n_agents"]) not in fresh] + [
            dict(r, measured=stamp) for r in records]
        meta = dict(kept["meta"], updates=kept["meta"].get("updates", []) + [stamp])
        names = list(dict.fromkeys([*kept["meta"].get("algorithms", ALGORITHMS),
                                    *args.algorithms]))
        order = {name: k for k, name in enumerate(names)}
        records.sort(key=lambda r: (order.get(r["algorithm"], len(order)), r["n_agents"]))
        args.algorithms = [a for a in names if any(r["algorithm"] == a for r in records)]
        sizes = sorted({r["n_agents"] for r in records})
        for stamp_k in meta["updates"]:
            rows = sorted({r["algorithm"] for r in records if r.get("measured") == stamp_k})
            if rows:
                updated += (f"row(s) {', '.join(rows)} re-measured {stamp_k['date']} at "
                            f"{stamp_k['commit']} (1-min load "
                            f"{stamp_k['load_average'][0]:.1f}): {stamp_k['command']}\n")
    meta["algorithms"] = list(args.algorithms)
    allocator = ("glibc malloc as is" if args.malloc == "default" else
                 "glibc malloc keeping freed blocks (" + KEEP_FREED["GLIBC_TUNABLES"].format(
                     cap=int(args.cap_gib * 2**30)) + ")")
    text = (f"time per round (median CPU s of {args.rounds} rounds after the first) and peak RSS "
            f"(MiB), one process per cell, 1 BLAS thread, RLIMIT_AS {args.cap_gib:g} GiB, "
            f"{allocator}; "
            f"d = {DIM}, {RECORDS} records per agent; exponent = growth of the time per round "
            f"from {sizes[-2]:,} to {sizes[-1]:,} agents\n" if len(sizes) > 1 else "\n")
    text += table(records, args.algorithms, sizes) + ("\n" + updated if updated else "")
    print()
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {name: exponent(records, name, sizes[-2], sizes[-1]) if len(sizes) > 1 else None
               for name in args.algorithms}
    out.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "records": records, "exponent_time": summary}, indent=1) + "\n")
    out.with_suffix(".txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
