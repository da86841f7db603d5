"""Would DPDL's paper-scale run fit with the paper's LeNet-5? Per-sample gradients, measured.

DPDL (Sec. 6, Table I) trains LeNet on MNIST; rfed's ``dpdl-digits`` trains an MLP (64-32-10)
on 64 public-PCA features. DPDL clips and noises per-sample gradients, so its cost is the number
of per-sample gradients it evaluates times the cost of one. This script measures both factors:

1. the CPU seconds per sample of the per-sample gradients of a LeNet-5 on 28 x 28 images
   (conv 5x5x6 pad 2, tanh, 2x2 average pool, conv 5x5x16, tanh, pool, 400-120-84-10; 61,706
   parameters) for one local batch of ``B`` records, by autograd, two ways: one reverse pass per
   sample (a loop: what a user of autograd writes first), and one reverse pass for the batch with
   respect to per-sample copies of the weights (convolutions by im2col and a batched matmul, the
   copies broadcast, not stored), checked equal to the loop; and the same for rfed's MLP
   (:meth:`rfed.problems.mlp.MLPClassifier.sample_rgrad`) at its paper-scale shape;
2. the number of per-sample gradients the paper-scale run's training evaluates (``rfed run
   dpdl-digits --set scale=paper``), counted with a counter on ``MLPClassifier.sample_rgrad``
   in runs of ``--rounds`` and twice as many rounds, each evaluated only at its start and end
   (so the evaluations cancel in the difference), and scaled to the paper scale's 1,000 rounds
   (every round of a setting evaluates the same number);

and prints their product, the extrapolated CPU time of the per-sample gradients of a LeNet run
(the evaluations of test accuracy and everything else come on top: a lower bound), beside the
measured CPU time of the MLP run (``rfed/experiments/timings.json``).

One BLAS thread. Run: ``python benchmarks/bench_lenet_per_sample.py [--batch 16] [--rounds 2]``;
the table also goes to ``benchmarks/results/bench_lenet_per_sample.txt``.
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import sys
import time

import autograd.numpy as anp
import numpy as np
from autograd import grad

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved_medians, results_file  # noqa: E402

#: LeNet-5's layers: (name, shape) of every parameter block, in the flat vector's order.
LENET = (("c1", (25, 6)), ("c1b", (6,)), ("c2", (150, 16)), ("c2b", (16,)),
         ("f1", (400, 120)), ("f1b", (120,)), ("f2", (120, 84)), ("f2b", (84,)),
         ("f3", (84, 10)), ("f3b", (10,)))
N_PARAMS = sum(int(np.prod(s)) for _, s in LENET)


def _blocks(flat):
    """The parameter blocks of ``flat`` (shape ``(..., N_PARAMS)``), each ``(..., *shape)``."""
    out, at = {}, 0
    for name, shape in LENET:
        size = int(np.prod(shape))
        out[name] = anp.reshape(flat[..., at:at + size], flat.shape[:-1] + shape)
        at += size
    return out


def _patches(img, k):
    """im2col: ``img`` (B, C, H, W) -> (B, (H-k+1)(W-k+1), C k k) (valid 5x5 windows)."""
    b, c, h, w = img.shape
    oh, ow = h - k + 1, w - k + 1
    cols = [img[:, :, i:i + oh, j:j + ow] for i in range(k) for j in range(k)]
    stacked = anp.stack(cols, axis=2)                       # (B, C, k*k, oh, ow)
    return anp.reshape(anp.transpose(stacked, (0, 3, 4, 1, 2)), (b, oh * ow, c * k * k)), oh, ow


def _pool(x, c, h, w):
    """2x2 average pooling of (B, h*w, c) -> (B, c, h/2, w/2)."""
    b = x.shape[0]
    x = anp.transpose(anp.reshape(x, (b, h, w, c)), (0, 3, 1, 2))
    return 0.25 * (x[:, :, 0::2, 0::2] + x[:, :, 1::2, 0::2] + x[:, :, 0::2, 1::2]
                   + x[:, :, 1::2, 1::2])


def lenet_losses(flat, images, onehot):
    """Per-sample cross-entropy of LeNet-5; ``flat`` is ``(N_PARAMS,)`` (shared) or
    ``(B, N_PARAMS)`` (one copy per sample), ``images`` (B, 28, 28), ``onehot`` (B, 10)."""
    p = _blocks(flat)
    per = flat.ndim == 2
    mm = (lambda a, w: anp.einsum("bpk,bkc->bpc", a, w)) if per else (lambda a, w: a @ w)
    bias = (lambda z, v: z + v[:, None, :]) if per else (lambda z, v: z + v)
    x = anp.pad(images[:, None], ((0, 0), (0, 0), (2, 2), (2, 2)))  # 1 x 32 x 32
    cols, oh, ow = _patches(x, 5)
    h1 = _pool(anp.tanh(bias(mm(cols, p["c1"]), p["c1b"])), 6, oh, ow)      # 6 x 14 x 14
    cols, oh, ow = _patches(h1, 5)
    h2 = _pool(anp.tanh(bias(mm(cols, p["c2"]), p["c2b"])), 16, oh, ow)     # 16 x 5 x 5
    z = anp.reshape(h2, (h2.shape[0], 1, 400))
    for w, v, last in (("f1", "f1b", False), ("f2", "f2b", False), ("f3", "f3b", True)):
        z = bias(mm(z, p[w]), p[v])
        z = z if last else anp.tanh(z)
    logits = z[:, 0, :]
    m = anp.max(logits, axis=1, keepdims=True)
    lse = m[:, 0] + anp.log(anp.sum(anp.exp(logits - m), axis=1))
    return lse - anp.sum(logits * onehot, axis=1)


def per_sample_loop(flat, images, onehot):
    """One reverse pass per sample: (B, N_PARAMS)."""
    g = grad(lambda w, i, y: lenet_losses(w, i, y)[0])
    return np.stack([g(flat, images[s:s + 1], onehot[s:s + 1]) for s in range(len(images))])


def per_sample_copies(flat, images, onehot):
    """One reverse pass for the batch with respect to per-sample copies of the weights."""
    copies = np.broadcast_to(flat, (len(images), flat.size))
    return grad(lambda w: anp.sum(lenet_losses(w, images, onehot)))(copies)


def _count_samples(rounds: int) -> tuple[int, int]:
    """(per-sample gradients, MLP parameters) of the paper-scale run for ``rounds`` rounds,
    evaluated at round 0 and at the end only."""
    from rfed.experiments import run_experiment
    from rfed.problems.mlp import MLPClassifier

    seen = {"samples": 0, "params": 0}
    original = MLPClassifier.sample_rgrad

    def counted(self, x, batch):
        seen["samples"] += int(np.prod(batch["features"].shape[:-1]))
        seen["params"] = self.n_params
        return original(self, x, batch)

    MLPClassifier.sample_rgrad = counted
    try:
        run_experiment("dpdl-digits", overrides={"scale": "paper", "rounds": rounds,
                                                 "eval_every": rounds})
    finally:
        MLPClassifier.sample_rgrad = original
    return seen["samples"], seen["params"]


def count_paper_scale(rounds: int) -> tuple[int, int, float]:
    """(per-sample gradients of one training round of the paper-scale run, MLP parameters,
    CPU seconds of the counting): ``rfed run dpdl-digits --set scale=paper`` for ``rounds`` and
    for ``2 rounds`` rounds, each evaluated at round 0 and at its end only, with a counter on
    ``MLPClassifier.sample_rgrad``; the difference is the training of ``rounds`` rounds (the
    evaluations, which also take per-sample gradients of every record, cancel)."""
    t0 = time.process_time()
    short, params = _count_samples(rounds)
    long, _ = _count_samples(2 * rounds)
    return (long - short) // rounds, params, time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="local batch B (dpdl-digits' 16)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of the shorter counting run (the count per round is "
                             "exact)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    b = args.batch
    images = rng.random((b, 28, 28))
    onehot = np.eye(10)[rng.integers(0, 10, b)]
    flat = 0.1 * rng.standard_normal(N_PARAMS)
    loop = per_sample_loop(flat, images, onehot)
    copies = per_sample_copies(flat, images, onehot)
    assert np.allclose(loop, copies, rtol=1e-9, atol=1e-12), "the two ways differ"

    from rfed.experiments.timings import recorded
    from rfed.problems.mlp import MLPClassifier

    mlp = MLPClassifier(rng.standard_normal((1, b, 64)), rng.integers(0, 10, (1, b)),
                        n_hidden=32)
    x = mlp.initial_point(0)
    batch = {"features": rng.standard_normal((b, 64)), "onehot": np.eye(10)[rng.integers(0, 10,
                                                                                        b)]}
    med = interleaved_medians({
        "lenet_loop": lambda: per_sample_loop(flat, images, onehot),
        "lenet_copies": lambda: per_sample_copies(flat, images, onehot),
        "mlp": lambda: mlp.sample_rgrad(x, batch)}, args.repeat)
    per_round, mlp_params, count_cpu = count_paper_scale(args.rounds)
    rounds = 1000
    total = per_round * rounds
    paper = recorded("dpdl-digits", "paper")
    budget = 30 * 60.0
    with results_file("bench_lenet_per_sample"):
        print(f"# one BLAS thread; batch B = {b}; LeNet-5 {N_PARAMS:,} parameters, "
              f"MLP {mlp_params:,}; load {os.getloadavg()[0]:.1f}")
        print(f"{'per-sample gradients':<40} {'CPU s / batch':>14} {'CPU ms / sample':>16}")
        for name, label in (("lenet_loop", "LeNet-5, autograd, a loop over samples"),
                            ("lenet_copies", "LeNet-5, autograd, per-sample copies"),
                            ("mlp", "rfed MLP (sample_rgrad)")):
            print(f"{label:<40} {med[name]:14.4f} {1e3 * med[name] / b:16.3f}")
        print(f"paper-scale run: per-sample gradients per training round {per_round:,} "
              f"(counted: runs of {args.rounds} and {2 * args.rounds} rounds, "
              f"{count_cpu:.0f} CPU s), x {rounds} rounds = {total:,}")
        best = min(med["lenet_loop"], med["lenet_copies"]) / b
        lenet_cpu = total * best
        print(f"LeNet paper-scale per-sample gradients alone: {lenet_cpu:,.0f} CPU s "
              f"({lenet_cpu / 3600:.1f} h; the faster way)")
        print(f"MLP paper-scale per-sample gradients: {total * med['mlp'] / b:,.0f} CPU s; "
              f"whole MLP run measured: "
              + (f"{paper['cpu_seconds']:,.0f} CPU s" if paper else "not measured"))
        print(f"LeNet over the 30 CPU-minute budget: {lenet_cpu / budget:.1f}x")
        print(f"fits in 30 CPU-minutes: {'yes' if lenet_cpu <= budget else 'no'}")


if __name__ == "__main__":
    main()
