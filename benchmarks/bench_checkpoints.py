"""Checkpoint write and read times of experiments (``rfed run NAME``), for any version of rfed.

Each experiment runs in a child process with the rfed of ``--rfed DIR`` (and, with ``--compare
DIR``, first with ``DIR``'s: "base", then "this"), at its defaults or ``--set`` overrides, with
``--checkpoint-every`` (default 100, as ``rfed run``) and a wall-clock floor of 0 s, so that every
due checkpoint is written. The child times every ``RunContext._save_checkpoint`` call (CPU and wall
seconds: serializing, writing and fsyncing the checkpoint and its log) and counts the bytes
written to the checkpoint files. It keeps the results folder as a killed run leaves it (the last
checkpoint, written at the end of the last algorithm run) and times ``read_checkpoint`` on it:
what ``rfed run --resume`` reads (median of ``--repeat`` reads, CPU seconds).

Usage::

    python benchmarks/bench_checkpoints.py                        # the default experiments
    python benchmarks/bench_checkpoints.py --compare /path/to/base pca-synthetic
    python benchmarks/bench_checkpoints.py --set repetitions=2 doadp-logreg

Columns: checkpoints written, MB written to checkpoint files, CPU and wall seconds in all the
checkpoint writes, milliseconds per write (CPU), the size of the last checkpoint (its head file
plus the log) and the CPU milliseconds to read it back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: Experiments measured by default: the default one and the fast ones of each paper.
DEFAULT_EXPERIMENTS = ("pca-synthetic", "prirfed-fig5", "dpdgt-ieee14", "doadp-logreg")

#: The child: one experiment with timed checkpoint writes, then timed reads of the last one.
_CHILD = r"""
import json, os, statistics, sys, time
from pathlib import Path
import rfed.experiments.registry as reg
out, every, repeat, name = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
overrides = json.loads(sys.argv[5])
stats = {"checkpoints": 0, "bytes": 0, "cpu": 0.0, "wall": 0.0}
def counted(write):
    def wrapped(path, data, *args):
        if Path(path).name in ("checkpoint.npz", "checkpoint.pkl", "checkpoint.log"):
            stats["bytes"] += len(data)
            stats["checkpoints"] += Path(path).name != "checkpoint.log"
        return write(path, data, *args)
    return wrapped
for fn in ("atomic_write_bytes", "write_at_end"):
    setattr(reg, fn, counted(getattr(reg, fn)))
save = reg.RunContext._save_checkpoint
def timed(self, payload):
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        return save(self, payload)
    finally:
        stats["cpu"] += time.process_time() - cpu
        stats["wall"] += time.perf_counter() - wall
reg.RunContext._save_checkpoint = timed
class Stop(BaseException):
    pass
def stop(self, config, summary):   # as a kill after the last checkpoint leaves the folder
    raise Stop
reg.RunContext.finish = stop
import matplotlib.pyplot as plt
reg.RunContext.save_figure = lambda self, fig, name: plt.close(fig)
try:
    reg.run_experiment(name, overrides=overrides, out_dir=out / "run", checkpoint_every=every,
                       checkpoint_seconds=0.0)
except Stop:
    pass
folder = out / "run"
stats["last_bytes"] = sum((folder / f).stat().st_size for f in
                          ("checkpoint.npz", "checkpoint.pkl", "checkpoint.log")
                          if (folder / f).exists())
reads = []
for _ in range(repeat):
    t = time.process_time()
    reg.read_checkpoint(folder)
    reads.append(time.process_time() - t)
stats["read"] = statistics.median(reads)
(out / "stats.json").write_text(json.dumps(stats))
"""


def measure(name: str, overrides: dict, rfed_dir: Path, every: int, repeat: int) -> dict:
    """The child's numbers for ``name`` with ``rfed_dir``'s rfed."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=str(rfed_dir), RFED_CACHE_DIR="")
        subprocess.run([sys.executable, "-c", _CHILD, out, str(every), str(repeat), name,
                        json.dumps(overrides)], check=True, cwd=rfed_dir, env=env,
                       stdout=subprocess.DEVNULL)
        return json.loads((Path(out) / "stats.json").read_text())


def _parse(items: list[str]) -> dict:
    import ast

    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT_EXPERIMENTS))
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="KEY=VALUE")
    parser.add_argument("--rfed", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="measure DIR's rfed first (base), then --rfed's (this)")
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    versions = [("this", args.rfed)] if args.compare is None else [("base", args.compare),
                                                                    ("this", args.rfed)]
    print(f"checkpoint every {args.checkpoint_every} rounds, floor 0 s; overrides "
          f"{args.overrides or 'none'}; CPU seconds (read: median of {args.repeat})")
    print(f"{'experiment':<26} {'ckpts':>6} {'MB written':>10} {'write CPU s':>11} "
          f"{'write wall s':>12} {'ms/write':>9} {'last KB':>8} {'read ms':>8}")
    for name in args.names:
        for label, rfed_dir in versions:
            s = measure(name, _parse(args.overrides), rfed_dir, args.checkpoint_every,
                        args.repeat)
            tag = name if len(versions) == 1 else f"{name} [{label}]"
            print(f"{tag:<26} {s['checkpoints']:6d} {s['bytes'] / 1e6:10.2f} {s['cpu']:11.3f} "
                  f"{s['wall']:12.3f} {1e3 * s['cpu'] / max(s['checkpoints'], 1):9.2f} "
                  f"{s['last_bytes'] / 1e3:8.1f} {1e3 * s['read']:8.2f}", flush=True)


if __name__ == "__main__":
    main()
