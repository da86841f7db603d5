"""Kernel time of dpdl-digits from glibc returning temporaries to the OS, and the allocator fix.

Run on demand: ``python benchmarks/bench_allocator.py [--rounds 20] [--pairs 2]``.

glibc serves allocations above its mmap threshold (128 KiB, raised dynamically up to 32 MiB)
with fresh ``mmap`` pages and unmaps them on ``free``, so a loop that creates and drops
multi-megabyte temporaries pays a minor page fault per 4 KiB page on every pass. Setting the
thresholds by environment keeps those blocks in the heap:

    MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=536870912

This script runs ``dpdl-digits`` (``rounds`` overridden, disk cache of RDP curves off so both
runs calibrate alike) in child processes with and without these variables, alternating, and
prints user and system CPU time, minor page faults and peak RSS of each child
(``resource.getrusage(RUSAGE_CHILDREN)`` differences).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

CHILD = ("from rfed.experiments.registry import run_experiment; "
         "run_experiment('dpdl-digits', overrides={{'rounds': {rounds}}})")
TUNED = {"MALLOC_MMAP_THRESHOLD_": "268435456", "MALLOC_TRIM_THRESHOLD_": "536870912"}


def run_child(rounds: int, extra_env: dict) -> tuple[float, float, int, float]:
    env = {**os.environ, "RFED_CACHE_DIR": "", **extra_env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", CHILD.format(rounds=rounds)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
            after.ru_minflt - before.ru_minflt, after.ru_maxrss / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    print(f"dpdl-digits, rounds = {args.rounds}; one child process per row")
    print(f"{'allocator':<22} {'user [s]':>9} {'sys [s]':>8} {'minor faults':>13} "
          f"{'max RSS of children [MB]':>25}")
    for _ in range(args.pairs):
        for label, extra in (("glibc defaults", {}), ("thresholds raised", TUNED)):
            user, system, faults, rss = run_child(args.rounds, extra)
            print(f"{label:<22} {user:>9.1f} {system:>8.1f} {faults:>13d} {rss:>25.0f}")


if __name__ == "__main__":
    main()
