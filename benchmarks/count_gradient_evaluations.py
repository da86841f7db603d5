"""Count the gradient evaluations of one ``rfed run`` (of any version of rfed on PYTHONPATH).

Usage (from the checkout to measure)::

    PYTHONPATH=. python benchmarks/count_gradient_evaluations.py run prirfed-fig3 --out DIR \
        --no-progress [--set KEY=VALUE ...]

Prints one line ``COUNTS {...}``: the calls of ``Problem.clipped_grad_sum``, the calls of the
Frechet-mean problems' ``sample_rgrad`` and the per-sample gradients they returned, the calls of
``FrechetMean.local_cost`` (the evaluations of the recorded cost), and the CPU seconds of the
run (``time.process_time``). Counts do not depend on the machine's load: they tell a change of
configuration (more runs, more steps) from a change of speed.
"""

import json
import sys
import time

import numpy as np

import rfed.problems.base as pb
import rfed.problems.frechet as fr

counts = {"clipped_grad_sum calls": 0, "sample_rgrad calls": 0, "per-sample gradients": 0,
          "local_cost calls": 0}


def _count(name: str, method):
    def wrapped(self, *args, **kwargs):
        counts[name] += 1
        return method(self, *args, **kwargs)
    return wrapped


def _count_samples(method):
    def wrapped(self, x, batch):
        counts["sample_rgrad calls"] += 1
        g = method(self, x, batch)
        # (*lead, b, *point_shape) with 2-d points (SPD): the per-sample gradients
        counts["per-sample gradients"] += int(np.prod(np.shape(g)[:-2])) if np.ndim(g) >= 2 else 1
        return g
    return wrapped


def main() -> None:
    pb.Problem.clipped_grad_sum = _count("clipped_grad_sum calls", pb.Problem.clipped_grad_sum)
    for cls in {c for c in vars(fr).values()
                if isinstance(c, type) and "sample_rgrad" in vars(c)}:
        cls.sample_rgrad = _count_samples(vars(cls)["sample_rgrad"])
    fr.FrechetMean.local_cost = _count("local_cost calls", fr.FrechetMean.local_cost)
    from rfed.cli import main as rfed_main

    t0 = time.process_time()
    try:
        rfed_main(sys.argv[1:])
    except SystemExit:
        pass
    counts["cpu_s"] = round(time.process_time() - t0, 1)
    print("COUNTS", json.dumps(counts))


if __name__ == "__main__":
    main()
