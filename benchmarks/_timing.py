"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

import time

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
