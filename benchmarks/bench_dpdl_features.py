"""DP-DPSGD, DPDL and centralized DP-SGD at large feature dimension: memory and time.

Setting of ``utility-fmnist-classify`` on scattering features: softmax regression with 3,969
features x 10 classes (39,700 parameters), 10 agents x ``--per`` records (default 5,400: the
private 90 % of the 60,000 training images split evenly), local batch ``--batch`` (default 819,
Tramer and Boneh's batch of 8,192 split over 10 agents; the centralized companion draws Poisson
batches of 10 x that from the pooled records), a circulant graph of degree 2 (DPDL: 4
neighbours, so 5 (model, data owner) pairs per agent), Gaussian noise at a fixed multiplier.
Features are synthetic (GroupNorm-like rows of norm sqrt(3969)); the arithmetic does not depend
on their values.

Paths compared, each in a fresh process (peak resident set ``VmHWM`` after the data are built,
reset through ``/proc/self/clear_refs``; CPU time ``process_time`` of ``init`` + ``rounds``
rounds, one BLAS thread), for the decentralized trainers:

* ``materialised``: eq. (9)-(10) as written, the ``(pairs, B, 39700)`` per-sample gradients
  and their clipped copy, all pairs in one chunk, float64 features (what the trainers did
  before the structured path);
* ``materialised, chunked``: the same with the byte-bounded chunks of pairs;
* ``structured``: softmax regression's closed-form clipped sum, float64 features;
* ``structured, float32``: the same with the features stored in float32 (what
  ``utility-fmnist-classify`` runs).

Centralized DP-SGD always takes the problem's clipped sum (the closed form); it is measured on
the last two paths. The table gives the CPU seconds per round and per epoch (one pass over the
average local data set: ``per / batch`` rounds), the data's resident size and the peak above it.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dpdl_features.py [--rounds 3]
[--algorithms DP-DPSGD DPDL DP-SGD] [--paths ...] [--per 5400] [--batch 819]`` (Linux only).
The iterates of the decentralized paths are checked equal (float64 paths to 1e-10, the float32
path to 1e-5 relative).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import proc_status_mb  # noqa: E402

N_AGENTS, D_IN, CLASSES = 10, 3969, 10
PATHS = ("materialised", "materialised, chunked", "structured", "structured, float32")
#: The paths of the centralized trainer (it always takes the problem's closed-form sum).
CENTRALIZED_PATHS = ("structured", "structured, float32")


def measure(path: str, algorithm: str, rounds: int, per: int, batch: int) -> dict:
    """Peak memory above the data and CPU seconds of ``rounds`` rounds of one path."""
    import rfed.algorithms.decentralized.dpdl as dpdl_mod
    from rfed.algorithms.centralized import DPSGD
    from rfed.algorithms.decentralized import DPDL, DPDPSGD
    from rfed.networks.graphs import circulant
    from rfed.networks.network import Network
    from rfed.problems.softmax import SoftmaxRegression

    rng = np.random.default_rng(0)
    dtype = np.float32 if path.endswith("float32") else np.float64
    feats = rng.standard_normal((N_AGENTS, per, D_IN)).astype(dtype)
    labels = rng.integers(0, CLASSES, (N_AGENTS, per))
    problem = SoftmaxRegression(feats, labels, CLASSES)
    del feats
    if path.startswith("materialised"):
        dpdl_mod.structured_clipping = lambda problem: False
    if path == "materialised":
        dpdl_mod.MAX_CHUNK_BYTES = 1 << 62
    if algorithm == "DP-SGD":
        alg = DPSGD(step_size=1.0, batch_size=N_AGENTS * batch, clip=0.1, momentum=0.9,
                    noise_multiplier=5.0)
    else:
        cls = DPDL if algorithm == "DPDL" else DPDPSGD
        alg = cls(Network(circulant(N_AGENTS, 2)), lr=1.0, beta=0.9, batch_size=batch,
                  clip=0.1, noise_multiplier=5.0)
    data_mb = proc_status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak (VmHWM) to the current RSS
    t0 = time.process_time()
    state = alg.init(problem, np.zeros(problem.n_params), np.random.default_rng(1))
    for _ in range(rounds):
        state = alg.step(problem, state)
    cpu = time.process_time() - t0
    x = np.atleast_2d(state.x)[:, :50]
    return {"algorithm": algorithm, "path": path, "per_agent": per, "local_batch": batch,
            "data_mb": round(data_mb),
            "round_extra_peak_mb": round(proc_status_mb("VmHWM") - data_mb),
            "cpu_s_per_round": round(cpu / rounds, 3),
            "cpu_s_per_epoch": round(cpu / rounds * per / batch, 2), "x": x.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--algorithms", nargs="+", default=["DP-DPSGD", "DPDL", "DP-SGD"],
                        choices=["DP-DPSGD", "DPDL", "DP-SGD"])
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--per", type=int, default=5400, help="records per agent")
    parser.add_argument("--batch", type=int, default=819, help="local batch")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "ALGORITHM"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], args.rounds, args.per,
                                 args.batch)))
        return
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rows = []
    for algorithm in args.algorithms:
        ref = None
        paths = [p for p in args.paths
                 if algorithm != "DP-SGD" or p in CENTRALIZED_PATHS]
        for path in paths:
            out = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds),
                                  "--per", str(args.per), "--batch", str(args.batch),
                                  "--child", path, algorithm], capture_output=True, text=True,
                                 check=True, env=env)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            x = np.array(row.pop("x"))
            if ref is None:
                ref = x
            tol = 1e-5 if path.endswith("float32") else 1e-10
            if not np.allclose(x, ref, rtol=tol, atol=tol * np.abs(ref).max()):
                raise AssertionError(f"{algorithm} {path}: iterates differ from the first path")
            rows.append(row)
            print(row, flush=True)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
