"""CPU seconds of each default experiment (``rfed run NAME``), at its defaults or overridden.

Each experiment runs in its own child process (``python -m rfed run NAME --out TMP
--no-progress``); its CPU time (user + system, the child's ``resource.getrusage``) and peak
RSS are printed, then the total. CPU time, not wall time: the machine may be shared.

Usage::

    python benchmarks/bench_experiments.py                       # the default experiments
    python benchmarks/bench_experiments.py prirfed-fig1 prirfed-fig2
    python benchmarks/bench_experiments.py --set repetitions=2 --set rounds=20 prirfed-fig3
    python benchmarks/bench_experiments.py --rfed /path/to/other/checkout   # another version

``--rfed DIR`` runs the ``rfed`` package found in ``DIR`` (e.g. a checkout of ``main``) so that
two versions can be measured in the same session.

The on-disk RDP curve cache is OFF in the children by default (``RFED_CACHE_DIR=''``): a
shared, warm cache would make whichever version runs second look faster. ``--rdp-cache DIR``
uses (and fills) the cache in ``DIR`` instead.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The experiments that need no downloaded data set and are not the utility companions.
DEFAULT_EXPERIMENTS = (
    "pca-synthetic", "prirfed-fig1", "prirfed-fig2", "prirfed-fig3", "prirfed-fig4",
    "prirfed-fig5", "doadp-digits", "doadp-logreg", "dpdda-svm", "dpdgt-ieee14", "dpdl-digits",
)


def run_one(name: str, overrides: list[str], rfed_dir: Path, rdp_cache: str = ""
            ) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS in MB) of ``rfed run name`` in a child process."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "rfed", "run", name, "--out", str(Path(out) / "run"),
               "--no-progress"]
        for o in overrides:
            cmd += ["--set", o]
        env = dict(os.environ, PYTHONPATH=str(rfed_dir), RFED_CACHE_DIR=rdp_cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=rfed_dir, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of the children is the largest child so far (KB on Linux)
    return cpu, wall, after.ru_maxrss / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT_EXPERIMENTS))
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="KEY=VALUE", help="override a setting of every experiment run")
    parser.add_argument("--rfed", type=Path, default=Path(__file__).resolve().parents[1],
                        help="directory holding the rfed package to measure (default: this "
                             "checkout)")
    parser.add_argument("--rdp-cache", default="", metavar="DIR",
                        help="on-disk RDP curve cache of the runs (default: off)")
    args = parser.parse_args()
    total = 0.0
    print(f"rfed from {args.rfed}; overrides {args.overrides or 'none'}; RDP disk cache "
          f"{args.rdp_cache or 'off'}")
    print(f"{'experiment':<16} {'CPU s':>8} {'wall s':>8} {'max RSS MB (so far)':>20}")
    for name in args.names:
        cpu, wall, rss = run_one(name, args.overrides, args.rfed, args.rdp_cache)
        total += cpu
        print(f"{name:<16} {cpu:8.1f} {wall:8.1f} {rss:20.0f}", flush=True)
    print(f"{'total':<16} {total:8.1f}")


if __name__ == "__main__":
    main()
