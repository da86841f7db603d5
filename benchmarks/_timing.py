"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

import contextlib
import sys
import time
from pathlib import Path

import numpy as np


def interleaved_medians(fns: dict, repeat: int) -> dict[str, float]:
    """Median CPU seconds per call of each function, one call of each in turn.

    Interleaving puts every function under the same load of a shared machine; one warm-up
    call each comes first (caches, lazy imports).
    """
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}


@contextlib.contextmanager
def results_file(name: str):
    """Within the block, what the script prints also goes to ``benchmarks/results/<name>.txt``
    (written anew; the first line is the command)."""
    path = Path(__file__).resolve().parent / "results" / f"{name}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fh.write("$ " + " ".join([Path(sys.executable).name] + sys.argv) + "\n")
        real = sys.stdout

        class _Tee:
            def write(self, text):
                fh.write(text)
                return real.write(text)

            def flush(self):
                fh.flush()
                real.flush()

        sys.stdout = _Tee()
        try:
            yield path
        finally:
            sys.stdout = real


def proc_status_mb(field: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``, ...), in MB (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")
