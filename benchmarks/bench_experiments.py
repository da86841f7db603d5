"""CPU seconds of each default experiment (``rfed run NAME``), at its defaults or overridden.

Each experiment runs in its own child process (``python -m rfed run NAME --out TMP
--no-progress``); its CPU time (user + system) and peak RSS, from that child's own resource
usage (``os.wait4``), are printed, then the total. CPU time, not wall time: the machine may be
shared. Each child runs with one BLAS and OpenMP thread (:data:`BLAS_THREADS`) unless the caller
set those variables, so that idle pool threads spinning do not count as the experiment's CPU.

Usage::

    python benchmarks/bench_experiments.py                       # the default experiments
    python benchmarks/bench_experiments.py prirfed-fig1 prirfed-fig2
    python benchmarks/bench_experiments.py --set repetitions=2 --set rounds=20 prirfed-fig3
    python benchmarks/bench_experiments.py --rfed /path/to/other/checkout   # another version
    python benchmarks/bench_experiments.py --compare /path/to/base --concurrent   # base vs this

``--rfed DIR`` runs the ``rfed`` package found in ``DIR`` (e.g. a checkout of ``main``) so that
two versions can be measured in the same session; ``--compare DIR`` runs each experiment with
``DIR``'s rfed and then with this checkout's (interleaved, so that both see similar load) and
prints the ratio of their CPU times. With ``--concurrent`` the two run at the same time, one
process per core: both see the same load for the whole run and the comparison takes half the
wall time (a base-against-base comparison of the default experiments so gave ratios of
1.00-1.01 on 2 cores). Two processes sharing the caches and memory bandwidth each take more CPU
time than one alone, so quote totals from a run without ``--concurrent`` on an idle machine.

``--record`` merges each experiment's measured CPU seconds into the timings file
(``--timings FILE``, default ``rfed/experiments/timings.json``, which ``rfed list`` and ``rfed
show`` read), under the
experiment's scale (``quick``, or ``paper`` with ``--set scale=paper``; no other override is
allowed, so that the file times the configurations users run), with the date, the commit and the
command. ``--keep DIR`` keeps what each run wrote in ``DIR/NAME`` (e.g. a paper-scale run timed and
then imported into the documentation with ``docs/generate_results.py import``).

``--out FILE`` also writes the printed table to ``FILE``, under a header that holds the command,
the commit of each version compared, the date and the 1-minute load before and after.

``--pairs N`` (with ``--compare``) runs each experiment's pair of versions ``N`` times (the
base first in odd repetitions, the measured version first in even ones), prints every pair's
rows and ratio, then per experiment the median ratio and its range, and at the end each
repetition's totals and ratio and the median and range of those ratios: on a machine whose
speed moves by a third between runs (``docs/guide/performance.md``), a single pair cannot
decide a ratio within a few percent of 1, the spread of several can say whether it is.

``--this-set KEY=VALUE`` (with ``--compare``) overrides a setting of the measured version's
runs only: the same work as the base when an experiment gained runs since (e.g. ``--this-set
non_private=false`` leaves out the non-private reference runs prirfed-fig3 and prirfed-fig4
added), so that the ratio compares the cost of the same computation.

``--rusage`` adds each run's user and system CPU seconds, the system share of its CPU time and
its minor page faults (the same ``os.wait4`` usage): what a run spends in the kernel faulting
in large temporaries.

``--checkpoints`` also counts, in the child, the checkpoints written (``checkpoint.npz``
replacements; ``checkpoint.pkl`` in releases that pickled), the bytes written to checkpoint
files (those and, from format 2 on, ``checkpoint.log``) and the CPU and wall seconds spent in
``RunContext._save_checkpoint`` (serializing, writing, fsync), for any version of rfed.

The on-disk RDP curve cache is OFF in the children by default (``RFED_CACHE_DIR=''``): a
shared, warm cache would make whichever version runs second look faster. ``--rdp-cache DIR``
uses (and fills) the cache in ``DIR`` instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
        if Path(path).name in ("checkpoint.npz", "checkpoint.pkl", "checkpoint.log"):
            stats["bytes"] += len(data)
            stats["checkpoints"] += Path(path).name != "checkpoint.log"
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


#: Thread counts of the BLAS and OpenMP pools, set to 1 in every child unless the caller set
#: them: an idle OpenBLAS thread spins and its CPU time would count as the experiment's (the
#: reduced utility-pca-fmnist grid took 1.40x the filing commit's CPU with the default pools
#: under load and 0.75x with one thread; benchmarks/results/bench_utility_pca_fmnist_*.txt).
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _blas_threads() -> str:
    """The BLAS thread settings the children run with, for the output's header."""
    return " ".join(f"{k}={os.environ.get(k, v)}" for k, v in BLAS_THREADS.items())


#: The timings file ``rfed list`` / ``rfed show`` read (``--record``'s default).
TIMINGS = Path(__file__).resolve().parents[1] / "rfed" / "experiments" / "timings.json"


def _start(name: str, overrides: list[str], rfed_dir: Path, out: str, rdp_cache: str,
           checkpoints: bool, keep: Path | None = None
           ) -> tuple[subprocess.Popen, Path, float]:
    """Start ``rfed run name`` with ``rfed_dir``'s rfed in a child writing under ``out`` (or in
    ``keep/name`` when given)."""
    run_dir = keep / name if keep is not None else Path(out) / "run"
    args = ["run", name, "--out", str(run_dir), "--no-progress"]
    if keep is not None:
        args.append("--overwrite")
    for o in overrides:
        args += ["--set", o]
    stats_file = Path(out) / "checkpoints.json"
    cmd = ([sys.executable, "-c", _COUNTING_CHILD, str(stats_file), *args] if checkpoints
           else [sys.executable, "-m", "rfed", *args])
    env = dict(BLAS_THREADS, **os.environ)   # the caller's own settings win
    env.update(PYTHONPATH=str(rfed_dir), RFED_CACHE_DIR=rdp_cache)
    proc = subprocess.Popen(cmd, cwd=rfed_dir, env=env, stdout=subprocess.DEVNULL)
    proc.run_dir = run_dir  # type: ignore[attr-defined]  # where its summary.json goes
    return proc, stats_file, time.perf_counter()


def _finish(proc: subprocess.Popen, stats_file: Path, t0: float, checkpoints: bool
            ) -> tuple[float, float, float, dict | None, tuple[int, str] | None, dict]:
    """(CPU seconds, wall seconds, peak RSS in MB, checkpoint stats or None, (algorithm runs,
    SHA-256 of the settings) or None, ``{"user", "system", "minor_faults", "major_faults"}``)
    of a child of :func:`_start`, from its own resource usage (``os.wait4``: that child alone)
    and its ``summary.json`` (the number of algorithm runs the experiment made, and its
    settings)."""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    stats = json.loads(stats_file.read_text()) if checkpoints else None
    try:
        summary = json.loads((Path(proc.run_dir) / "summary.json").read_text())
        runs = summary.get("algorithm_runs")
        # the settings it ran, as rfed.experiments.timings.settings_digest hashes them
        config = json.dumps(summary["config"], sort_keys=True)
        runs = (runs, hashlib.sha256(config.encode("utf-8")).hexdigest())
    except (OSError, ValueError, KeyError, AttributeError):
        runs = None   # a version of rfed that did not record it
    # ru_maxrss is in KB on Linux
    kernel = {"user": usage.ru_utime, "system": usage.ru_stime,
              "minor_faults": usage.ru_minflt, "major_faults": usage.ru_majflt}
    return (usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0, stats,
            runs if runs is not None and isinstance(runs[0], int) else None, kernel)


def run_versions(name: str, overrides: list[str], rfed_dirs: list[Path], rdp_cache: str = "",
                 checkpoints: bool = False, concurrent: bool = False, keep: Path | None = None,
                 this_overrides: Sequence[str] = (), measured: int = -1
                 ) -> list[tuple[float, float, float, dict | None, tuple[int, str] | None,
                                 dict]]:
    """:func:`_finish`'s numbers of ``rfed run name`` with each of ``rfed_dirs``' rfed: one after
    the other, or all at the same time (``concurrent``: one process per core, so that every
    version sees the same load for the whole run). ``keep``: one version only, its results
    kept in ``keep/name``. ``this_overrides``: further overrides of the run of
    ``rfed_dirs[measured]`` only (the measured version against a base; default the last)."""
    per_version = [list(overrides) for _ in rfed_dirs]
    per_version[measured] += list(this_overrides)
    with tempfile.TemporaryDirectory() as out:
        outs = [str(Path(out) / str(i)) for i in range(len(rfed_dirs))]
        for o in outs:
            os.mkdir(o)
        if not concurrent:
            return [_finish(*_start(name, ov, d, o, rdp_cache, checkpoints, keep),
                            checkpoints)
                    for ov, d, o in zip(per_version, rfed_dirs, outs, strict=True)]
        started = [_start(name, ov, d, o, rdp_cache, checkpoints)
                   for ov, d, o in zip(per_version, rfed_dirs, outs, strict=True)]
        try:
            return [_finish(*s, checkpoints) for s in started]
        finally:
            for proc, _, _ in started:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()


def _row(label: str, cpu: float, wall: float, rss: float, stats: dict | None,
         kernel: dict | None = None) -> str:
    row = f"{label:<24} {cpu:8.1f} {wall:8.1f} {rss:12.0f}"
    if kernel is not None:
        share = 100.0 * kernel["system"] / cpu if cpu > 0 else 0.0
        row += (f" {kernel['user']:8.1f} {kernel['system']:8.1f} {share:6.1f}"
                f" {kernel['minor_faults']:12,d}")
    if stats is not None:
        row += (f" {stats['checkpoints']:6d} {stats['bytes'] / 1e6:10.1f} "
                f"{stats['cpu']:9.2f} {stats['wall']:9.2f}")
    return row


def scale_of(overrides: list[str]) -> str:
    """The scale a run of ``overrides`` measures: ``quick`` (none) or the named scale of one
    ``scale=NAME`` override (``paper``, or an experiment's other named scale such as
    ``paper-ring``; the experiment itself refuses a name it does not declare); any other
    override is refused (``SystemExit``)."""
    scales = [o.replace(" ", "").split("=", 1)[1] for o in overrides
              if o.replace(" ", "").startswith("scale=")]
    rest = [o for o in overrides if not o.replace(" ", "").startswith("scale=")]
    if rest or len(scales) > 1 or any(not s for s in scales):
        raise SystemExit(f"--record times the configurations users run: no override but "
                         f"one scale=NAME is allowed, got {overrides}")
    return scales[0] if scales else "quick"


def record_timing(path: Path, name: str, scale: str, cpu: float, wall: float, rss: float,
                  rfed_dir: Path, runs: tuple[int, str] | None = None) -> None:
    """Merge one measured run into the timings file ``path`` (replaced atomically); ``runs``:
    the algorithm runs it made and the SHA-256 of its settings (what a run of the same
    settings multiplies for its time estimate)."""
    data = json.loads(path.read_text()) if path.is_file() else {"format": 1, "experiments": {}}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=rfed_dir,
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # an exported snapshot (git archive) names its commit in COMMIT
        stamp = rfed_dir / "COMMIT"
        commit = stamp.read_text().strip()[:12] if stamp.is_file() else "unknown"
    command = ("python benchmarks/bench_experiments.py --record"
               + (f" --set scale={scale}" if scale != "quick" else "") + f" {name}")
    data["experiments"].setdefault(name, {})[scale] = {
        "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
        "peak_rss_mb": round(rss), "date": time.strftime("%Y-%m-%d"), "commit": commit,
        "command": command, **({"algorithm_runs": runs[0], "config_sha256": runs[1]}
                               if runs is not None else {})}
    data["experiments"] = dict(sorted(data["experiments"].items()))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT_EXPERIMENTS))
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="KEY=VALUE", help="override a setting of every experiment run")
    parser.add_argument("--this-set", action="append", default=[], dest="this_overrides",
                        metavar="KEY=VALUE",
                        help="with --compare: override a setting of the measured version's "
                             "runs only (the same work as the base: e.g. non_private=false "
                             "leaves out runs an experiment added since the base)")
    parser.add_argument("--rfed", type=Path, default=Path(__file__).resolve().parents[1],
                        help="directory holding the rfed package to measure (default: this "
                             "checkout)")
    parser.add_argument("--rdp-cache", default="", metavar="DIR",
                        help="on-disk RDP curve cache of the runs (default: off)")
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="run each experiment with DIR's rfed, then with --rfed's, and "
                             "print the CPU ratio")
    parser.add_argument("--concurrent", action="store_true",
                        help="with --compare: run the two versions at the same time, one "
                             "process per core (both see the same load; a base-against-base "
                             "run measured ratios of 1.00-1.01 on 2 cores)")
    parser.add_argument("--pairs", type=int, default=1, metavar="N",
                        help="with --compare: run each pair of versions N times and print the "
                             "median and range of the ratios (default 1)")
    parser.add_argument("--rusage", action="store_true",
                        help="also print each run's user and system CPU seconds, the system "
                             "share and its minor page faults")
    parser.add_argument("--checkpoints", action="store_true",
                        help="count the checkpoints, their bytes and their CPU / wall seconds")
    parser.add_argument("--record", action="store_true",
                        help="merge the measured CPU seconds into the timings file (--timings)")
    parser.add_argument("--timings", type=Path, default=TIMINGS, metavar="FILE",
                        help="the timings file of --record (default "
                        "rfed/experiments/timings.json, read by rfed list / show)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep what each run wrote in DIR/NAME")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="also write the table to FILE, with the command, the commits and "
                             "the load in its header")
    args = parser.parse_args()
    lines: list[str] = []
    load_before = os.getloadavg()[0]

    def write_out(done: int) -> None:
        """The table so far to --out (after every experiment: a stopped run keeps its rows)."""
        if args.out is None:
            return
        commits = ", ".join(f"{'base' if len(versions) == 2 and i == 0 else 'this'} = "
                            f"{_commit(d)}" for i, d in enumerate(versions))
        header = ["$ python " + " ".join(sys.argv),
                  f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {commits}; "
                  f"1-min load {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} now; "
                  f"python {sys.version.split()[0]}; children: {_blas_threads()}"]
        if done < len(args.names):
            header.append(f"# PARTIAL: {done} of {len(args.names)} experiments done")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(f".{args.out.name}.{os.getpid()}.tmp")
        tmp.write_text("\n".join(header + lines) + "\n")
        os.replace(tmp, args.out)

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)
    versions = [args.rfed] if args.compare is None else [args.compare, args.rfed]
    if (args.record or args.keep) and args.compare is not None:
        parser.error("--record and --keep measure one version (not with --compare)")
    scale = scale_of(args.overrides) if args.record else ""
    if args.this_overrides and args.compare is None:
        parser.error("--this-set needs --compare DIR (it overrides the measured version only)")
    if args.concurrent and args.compare is None:
        parser.error("--concurrent needs --compare DIR (two versions to run at the same time)")
    if args.pairs < 1:
        parser.error(f"argument --pairs must be an int >= 1, got {args.pairs}")
    if args.pairs > 1 and args.compare is None:
        parser.error("--pairs needs --compare DIR (it repeats a pair of versions)")
    # totals[r][i]: repetition r's total of version i (base, this)
    totals = [[0.0] * len(versions) for _ in range(args.pairs)]
    order = " and ".join(map(str, versions)) if args.concurrent else " then ".join(
        map(str, versions))
    emit(f"rfed from {order}{' (concurrently)' if args.concurrent else ''}; overrides "
         f"{args.overrides or 'none'}"
         + (f"; the measured version's only {args.this_overrides}" if args.this_overrides
            else "") + f"; RDP disk cache {args.rdp_cache or 'off'}")
    head = f"{'experiment':<24} {'CPU s':>8} {'wall s':>8} {'peak RSS MB':>12}"
    if args.rusage:
        head += f" {'user s':>8} {'sys s':>8} {'sys %':>6} {'minor faults':>12}"
    if args.checkpoints:
        head += f" {'ckpts':>6} {'ckpt MB':>10} {'ckpt CPU':>9} {'ckpt wall':>9}"
    emit(head)
    write_out(0)
    for done, name in enumerate(args.names):
        ratios = []
        for rep in range(args.pairs):
            # the base first in odd repetitions, the measured version first in even ones
            order = list(range(len(versions)))[::1 if rep % 2 == 0 else -1]
            got = run_versions(name, args.overrides, [versions[i] for i in order],
                               args.rdp_cache, args.checkpoints, args.concurrent, args.keep,
                               args.this_overrides, order.index(len(versions) - 1))
            results = [got[order.index(i)] for i in range(len(versions))]
            if args.record:
                record_timing(args.timings, name, scale, *results[0][:3], args.rfed,
                              runs=results[0][4])
            tag = f" #{rep + 1}" if args.pairs > 1 else ""
            for i, (cpu, wall, rss, stats, _, kernel) in enumerate(results):
                totals[rep][i] += cpu
                label = (name if len(versions) == 1
                         else f"{name} [{'base' if i == 0 else 'this'}]{tag}")
                emit(_row(label, cpu, wall, rss, stats, kernel if args.rusage else None))
            if len(versions) == 2:
                ratios.append(results[1][0] / results[0][0])
                emit(f"{name + ' this/base' + tag:<24} {ratios[-1]:8.3f}")
        if args.pairs > 1:
            emit(_spread(name + " this/base", ratios))
        if done + 1 < len(args.names):
            # the totals of the experiments done so far, in the file only until the next row
            tags = [""] if len(versions) == 1 else [" [base]", " [this]"]
            so_far = []
            for rep, rep_totals in enumerate(totals):
                pair = f" #{rep + 1}" if args.pairs > 1 else ""
                so_far += [f"{'total so far' + tag + pair:<24} {t:8.1f}"
                           for tag, t in zip(tags, rep_totals, strict=True)]
                if len(versions) == 2:
                    so_far.append(f"{'total so far this/base' + pair:<24} "
                                  f"{rep_totals[1] / rep_totals[0]:8.3f}")
            lines.extend(so_far)
            write_out(done + 1)
            del lines[-len(so_far):]
    for rep, rep_totals in enumerate(totals):
        tag = f" #{rep + 1}" if args.pairs > 1 else ""
        for i, total in enumerate(rep_totals):
            label = ("total" if len(versions) == 1
                     else f"total [{'base' if i == 0 else 'this'}]{tag}")
            emit(f"{label:<24} {total:8.1f}")
        if len(versions) == 2:
            emit(f"{'total this/base' + tag:<24} {rep_totals[1] / rep_totals[0]:8.3f}")
    if args.pairs > 1:
        emit(_spread("total this/base", [t[1] / t[0] for t in totals]))
    write_out(len(args.names))


def _spread(label: str, ratios: list[float]) -> str:
    """``label``, then the median and range of the pairs' ``ratios`` (``--pairs``)."""
    return (f"{label:<24} {statistics.median(ratios):8.3f} median of {len(ratios)} pairs, "
            f"range {min(ratios):.3f}-{max(ratios):.3f}")


def _commit(rfed_dir: Path) -> str:
    """The short commit of the checkout ``rfed_dir`` (``unknown`` outside git), ``+`` when its
    tracked files differ from it."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=rfed_dir,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=rfed_dir, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # an exported snapshot (git archive) names its commit in COMMIT
        stamp = rfed_dir / "COMMIT"
        return stamp.read_text().strip()[:12] if stamp.is_file() else "unknown"
    return commit + ("+" if dirty else "")


if __name__ == "__main__":
    main()
