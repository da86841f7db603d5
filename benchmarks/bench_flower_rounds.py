"""Wall time of a round of the rfed Flower app on a loopback deployment, against one process.

Run on demand: ``python benchmarks/bench_flower_rounds.py [--rounds 5] [--repeat 3]
[--supernodes 2]`` (needs ``rfed[flower]``; about 5 minutes with the defaults).

A :class:`~rfed.engines.flower_launch.LoopbackFederation` (a SuperLink with TLS and
authenticated SuperNodes on this machine, as a real deployment runs them) is started once; runs
of the demo problem (:func:`rfed.engines.flower.demo_problem`: 8 agents on ``Sphere(5)``, the
app's default run config) of 1 round and of ``R`` rounds then alternate ``repeat`` times, after
one warm-up run. The table prints the wall time of each kind of run (median, min, max) and the
time of a round, ``(median(R) - median(1)) / (R - 1)``, which leaves out a run's fixed cost
(``flwr run``, the ServerApp's start, the query of the nodes' agents, the result file).
``in process`` is :func:`rfed.engines.flower.run_in_process` with the same ``R``-round config:
the computation itself (the same results, bit for bit). Wall times (``time.perf_counter``): a
deployed round is bound by Flower's waiting and process starts, not by CPU (see "What a round
costs on a deployment" in ``docs/guide/flower.md``). Results:
``benchmarks/results/bench_flower_rounds.txt``.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
from _timing import results_file

from rfed.engines import flower
from rfed.engines.flower_launch import LoopbackFederation


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _row(label: str, times: list[float]) -> str:
    return (f"{label:<34} {np.median(times):>10.3f} {min(times):>10.3f} {max(times):>10.3f} "
            f"{len(times):>5}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="R, the longer run's rounds")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each length")
    parser.add_argument("--supernodes", type=int, default=2)
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error(f"argument --rounds: expected at least 2 rounds, got {args.rounds}")
    if args.repeat < 1:
        parser.error(f"argument --repeat: expected a positive number of runs, got {args.repeat}")
    if args.supernodes < 1:
        parser.error(f"argument --supernodes: expected at least 1, got {args.supernodes}")
    short, long = {"rounds": 1}, {"rounds": args.rounds}
    with results_file("bench_flower_rounds"):
        print(f"rfed Flower app, demo problem: a loopback deployment with {args.supernodes} "
              f"SuperNodes (TLS, SuperNode authentication), runs of 1 and {args.rounds} rounds "
              f"alternating {args.repeat} times, against one process; wall seconds")
        print(f"{'':<34} {'median':>10} {'min':>10} {'max':>10} {'runs':>5}")
        in_process = [_wall(lambda: flower.run_in_process(long)) for _ in range(args.repeat)]
        with tempfile.TemporaryDirectory() as workdir:
            federation = LoopbackFederation(args.supernodes, workdir=workdir, timeout=900)
            try:
                start = _wall(federation.start)
                data = flower.demo_problem()
                federation.run(short, data)   # warm-up: the nodes connect
                times: dict[int, list[float]] = {1: [], args.rounds: []}
                for _ in range(args.repeat):
                    for config in (short, long):
                        times[config["rounds"]].append(
                            _wall(lambda c=config, f=federation, d=data: f.run(c, d)))
            finally:
                federation.stop()
        print(_row(f"in process, {args.rounds} rounds", in_process))
        print(_row("deployment: start the federation", [start]))
        for rounds, ts in times.items():
            print(_row(f"deployment: run of {rounds} round{'s' * (rounds > 1)}", ts))
        per_round = (np.median(times[args.rounds]) - np.median(times[1])) / (args.rounds - 1)
        print(f"deployment: one round = {per_round:.1f} s; in process: one round = "
              f"{np.median(in_process) / args.rounds:.4f} s")


if __name__ == "__main__":
    main()
