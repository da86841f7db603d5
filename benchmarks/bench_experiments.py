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
two versions can be measured in the same session; ``--compare DIR`` runs each experiment with
``DIR``'s rfed and then with this checkout's (interleaved, so that both see the same load) and
prints the ratio of their CPU times.

``--checkpoints`` also counts, in the child, the checkpoints written (``checkpoint.pkl``
replacements), the bytes written to checkpoint files (``checkpoint.pkl`` and, from format 2 on,
``checkpoint.log``) and the CPU and wall seconds spent in ``RunContext._save_checkpoint``
(pickling, writing, fsync), for any version of rfed.

The on-disk RDP curve cache is OFF in the children by default (``RFED_CACHE_DIR=''``): a
shared, warm cache would make whichever version runs second look faster. ``--rdp-cache DIR``
uses (and fills) the cache in ``DIR`` instead.
"""

from __future__ import annotations

import argparse
import json
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


#: The child of ``--checkpoints``: ``rfed run`` with the checkpoint writes counted and timed.
_COUNTING_CHILD = r"""
import json, sys, time
from pathlib import Path
import rfed.experiments.registry as reg
stats = {"checkpoints": 0, "bytes": 0, "cpu": 0.0, "wall": 0.0}
def counted(write):
    def wrapped(path, data, *args):
        if Path(path).name in ("checkpoint.pkl", "checkpoint.log"):
            stats["bytes"] += len(data)
            stats["checkpoints"] += Path(path).name == "checkpoint.pkl"
        return write(path, data, *args)
    return wrapped
for name in ("atomic_write_bytes", "write_at_end"):
    if hasattr(reg, name):
        setattr(reg, name, counted(getattr(reg, name)))
save = reg.RunContext._save_checkpoint
def timed(self, payload):
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        return save(self, payload)
    finally:
        stats["cpu"] += time.process_time() - cpu
        stats["wall"] += time.perf_counter() - wall
reg.RunContext._save_checkpoint = timed
from rfed.cli import main
status = main(sys.argv[2:])
Path(sys.argv[1]).write_text(json.dumps(stats))
sys.exit(status)
"""


def run_one(name: str, overrides: list[str], rfed_dir: Path, rdp_cache: str = "",
            checkpoints: bool = False) -> tuple[float, float, float, dict | None]:
    """(CPU seconds, wall seconds, peak RSS in MB, checkpoint stats or None) of ``rfed run
    name`` in a child process."""
    with tempfile.TemporaryDirectory() as out:
        args = ["run", name, "--out", str(Path(out) / "run"), "--no-progress"]
        for o in overrides:
            args += ["--set", o]
        stats_file = Path(out) / "checkpoints.json"
        cmd = ([sys.executable, "-c", _COUNTING_CHILD, str(stats_file), *args] if checkpoints
               else [sys.executable, "-m", "rfed", *args])
        env = dict(os.environ, PYTHONPATH=str(rfed_dir), RFED_CACHE_DIR=rdp_cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=rfed_dir, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = json.loads(stats_file.read_text()) if checkpoints else None
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of the children is the largest child so far (KB on Linux)
    return cpu, wall, after.ru_maxrss / 1024.0, stats


def _row(label: str, cpu: float, wall: float, rss: float, stats: dict | None) -> str:
    row = f"{label:<24} {cpu:8.1f} {wall:8.1f} {rss:20.0f}"
    if stats is not None:
        row += (f" {stats['checkpoints']:6d} {stats['bytes'] / 1e6:10.1f} "
                f"{stats['cpu']:9.2f} {stats['wall']:9.2f}")
    return row


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
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="run each experiment with DIR's rfed, then with --rfed's, and "
                             "print the CPU ratio")
    parser.add_argument("--checkpoints", action="store_true",
                        help="count the checkpoints, their bytes and their CPU / wall seconds")
    args = parser.parse_args()
    versions = [args.rfed] if args.compare is None else [args.compare, args.rfed]
    totals = [0.0] * len(versions)
    print(f"rfed from {' then '.join(map(str, versions))}; overrides "
          f"{args.overrides or 'none'}; RDP disk cache {args.rdp_cache or 'off'}")
    head = f"{'experiment':<24} {'CPU s':>8} {'wall s':>8} {'max RSS MB (so far)':>20}"
    if args.checkpoints:
        head += f" {'ckpts':>6} {'ckpt MB':>10} {'ckpt CPU':>9} {'ckpt wall':>9}"
    print(head)
    for name in args.names:
        cpus = []
        for i, rfed_dir in enumerate(versions):
            cpu, wall, rss, stats = run_one(name, args.overrides, rfed_dir, args.rdp_cache,
                                            args.checkpoints)
            totals[i] += cpu
            cpus.append(cpu)
            label = name if len(versions) == 1 else f"{name} [{'base' if i == 0 else 'this'}]"
            print(_row(label, cpu, wall, rss, stats), flush=True)
        if len(versions) == 2:
            print(f"{name + ' this/base':<24} {cpus[1] / cpus[0]:8.3f}", flush=True)
    for i, total in enumerate(totals):
        label = "total" if len(versions) == 1 else f"total [{'base' if i == 0 else 'this'}]"
        print(f"{label:<24} {total:8.1f}")


if __name__ == "__main__":
    main()
