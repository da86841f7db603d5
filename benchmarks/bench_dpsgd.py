"""One centralized DP-SGD step: rfed against a hand-vectorized numpy step, in the same run.

Run on demand: ``python benchmarks/bench_dpsgd.py [--repeat 9] [--steps 20]
[--out benchmarks/results/bench_dpsgd]``.

For each configuration (logistic regression ``d = 50`` on 100 agents x 100 records, batch 100;
softmax regression on 64 scattering-sized features, 10 classes, 16 agents x 3,750 records,
batch 512: the shape of the private Fashion-MNIST experiments' centralized companion) it times
``--steps`` consecutive steps of

* ``rfed DPSGD.step``: :class:`rfed.algorithms.DPSGD` with Poisson sampling, clip 1, noise
  multiplier 1 and momentum 0.9 (the privacy ledger's per-step bookkeeping included);
* ``hand-vectorized numpy``: the same step written directly on the pooled ``(N, d)`` arrays
  (built once): the Poisson draw, the batch gathered, the per-sample gradients' norms from a
  closed form, the clipped sum by one matrix product, the Gaussian noise and the momentum step;
  no checks and no account.

Both draw from their own generator with the same seed, so they take the same minibatches and the
same noise: the column ``max |diff|`` is the largest difference of the final iterates (rounding
only). The steps are timed apart from the run's setup (rfed's ``DPSGD.init``, which builds the
privacy account once per run, and the pooled index and the records' squared norms once per
problem; numpy's generator, its pooled arrays and norms being built once before): the last
column is the CPU seconds of ``init``, paid once per run however many steps follow.

One BLAS thread (set before numpy loads). The two methods are interleaved in one process (one
sample of each in turn, ``repeat`` times), so load on a shared machine affects both alike; the
table gives the median CPU time per step and ``rfed/numpy``. Records go to ``--out`` (``.json``
and ``.txt``).
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from rfed.algorithms.centralized import DPSGD
from rfed.problems import LogisticRegression
from rfed.problems.softmax import SoftmaxRegression

SEED = 7
CLIP, NOISE, MOMENTUM, LR = 1.0, 1.0, 0.9, 0.1


def _logistic(n_agents: int, n_per: int, d: int) -> LogisticRegression:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n_agents, n_per, d)) / np.sqrt(d)
    y = np.where(rng.random((n_agents, n_per)) < 0.5, -1.0, 1.0)
    return LogisticRegression(a, y)


def _softmax(n_agents: int, n_per: int, d: int, classes: int) -> SoftmaxRegression:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n_agents, n_per, d)) / np.sqrt(d)
    y = rng.integers(0, classes, (n_agents, n_per))
    return SoftmaxRegression(a, y, classes)


def _numpy_logistic(problem: LogisticRegression, batch: int, steps: int):
    """The hand-vectorized step on the pooled arrays (built once, outside the timed steps)."""
    feats, labels = problem.pooled()
    n, d = feats.shape
    row_norms = np.sqrt(np.einsum("ij,ij->i", feats, feats))
    rate = batch / n

    def start():
        rng = np.random.default_rng(SEED)
        return lambda: steps_from(rng)

    def steps_from(rng):
        x, m = np.zeros(d), np.zeros(d)
        for _ in range(steps):
            sel = np.flatnonzero(rng.random(n) < rate)
            a, y = feats[sel], labels[sel]
            margin = y * (a @ x)
            coef = -y / (1.0 + np.exp(margin))             # dloss/dmargin * label
            norms = np.abs(coef) * row_norms[sel]
            scale = np.minimum(1.0, CLIP / np.maximum(norms, 1e-300))
            g = a.T @ (coef * scale) / batch
            sens = 2.0 * CLIP / batch                        # replace-one, as DPSGD's default
            g = g + NOISE * sens * rng.standard_normal(d)
            m = MOMENTUM * m + g
            x = x - LR * m
        return x
    return start


def _numpy_softmax(problem: SoftmaxRegression, batch: int, steps: int):
    feats, labels = problem.pooled()
    n, d_in = feats.shape
    c = problem.n_classes
    sq = np.einsum("ij,ij->i", feats, feats) + 1.0
    rate = batch / n
    dim = problem.manifold.dim

    def start():
        rng = np.random.default_rng(SEED)
        return lambda: steps_from(rng)

    def steps_from(rng):
        x, m = np.zeros(dim), np.zeros(dim)
        for _ in range(steps):
            sel = np.flatnonzero(rng.random(n) < rate)
            a, y = feats[sel], labels[sel]
            w, b = x[: d_in * c].reshape(d_in, c), x[d_in * c:]
            z = a @ w + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(sel.size), y] -= 1.0               # residual softmax - onehot
            norms = np.sqrt(np.einsum("ij,ij->i", p, p) * sq[sel])
            scale = np.minimum(1.0, CLIP / np.maximum(norms, 1e-300))
            p *= scale[:, None]
            g = np.concatenate([(a.T @ p).ravel(), p.sum(axis=0)]) / batch
            g = g + NOISE * (2.0 * CLIP / batch) * rng.standard_normal(dim)
            m = MOMENTUM * m + g
            x = x - LR * m
        return x
    return start


def _rfed(problem, batch: int, steps: int):
    alg = DPSGD(step_size=LR, batch_size=batch, clip=CLIP, momentum=MOMENTUM,
                noise_multiplier=NOISE)

    def start():
        state = alg.init(problem, np.zeros(problem.manifold.point_shape), SEED)
        return lambda: steps_from(state)

    def steps_from(state):
        for _ in range(steps):
            state = alg.step(problem, state)
        return state.x
    return start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"
                                            / "bench_dpsgd"))
    args = parser.parse_args()
    configs = [
        ("logistic d=50, 100x100, B=100", _logistic(100, 100, 50), 100, _numpy_logistic),
        ("softmax 64->10, 16x3750, B=512", _softmax(16, 3750, 64, 10), 512, _numpy_softmax),
    ]
    lines = [f"# centralized DP-SGD step, CPU seconds per step (median of {args.repeat}, "
             f"{args.steps} steps a sample, interleaved), one BLAS thread; "
             f"python {platform.python_version()}, numpy {np.__version__}, "
             f"load {os.getloadavg()[0]:.2f}",
             f"{'configuration':34s} {'rfed':>10s} {'numpy':>10s} {'rfed/numpy':>10s} "
             f"{'max |diff|':>10s} {'rfed init':>10s}"]
    print(lines[0])
    print(lines[1])
    records = []
    for label, problem, batch, baseline in configs:
        starts = {"rfed": _rfed(problem, batch, args.steps),
                  "numpy": baseline(problem, batch, args.steps)}
        diff = float(np.max(np.abs(starts["rfed"]()() - starts["numpy"]()())))
        times: dict[str, list[float]] = {k: [] for k in starts}
        setup: dict[str, list[float]] = {k: [] for k in starts}
        for _ in range(args.repeat):
            for name, start in starts.items():
                t0 = time.process_time()
                steps = start()          # rfed: DPSGD.init (the privacy account); numpy: the rng
                t1 = time.process_time()
                steps()
                times[name].append((time.process_time() - t1) / args.steps)
                setup[name].append(t1 - t0)
        med = {k: float(np.median(v)) for k, v in times.items()}
        init = float(np.median(setup["rfed"]))
        ratio = med["rfed"] / med["numpy"]
        line = (f"{label:34s} {med['rfed']:10.3e} {med['numpy']:10.3e} {ratio:10.2f} "
                f"{diff:10.1e} {init:10.3e}")
        print(line)
        lines.append(line)
        records.append({"configuration": label, "rfed_s": med["rfed"], "numpy_s": med["numpy"],
                        "ratio": ratio, "max_abs_diff": diff, "rfed_init_s": init})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text(
        "$ " + " ".join([Path(sys.executable).name] + sys.argv) + "\n" + "\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"command": sys.argv, "repeat": args.repeat, "steps": args.steps,
         "load": os.getloadavg()[0], "results": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()
