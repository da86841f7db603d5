"""Speed of one PriRFed round (PCA on Sphere(783)) against a per-agent loop and a data stream.

Run on demand: ``python benchmarks/bench_prirfed.py [--quick]``. Setting of issue 4: 100 agents
with 600 samples of dimension 784 each (uniform [0, 1] pixels, synthetic), full participation,
K = 3 DP-RSGD local steps with clipping and tangent noise, either full batch or the paper's
``b = N_i / 2``. Rows (best-of-``repeat`` wall time):

* ``rfed batched (fast)``: :meth:`PriRFed.step`, all agents in one array, with SpherePCA's
  clipped gradient sum from ``Z x`` and ``Z^T w`` (no per-sample gradient array);
* ``rfed batched (generic)``: the same round through the generic
  :meth:`Problem.clipped_grad_sum`, which materializes every per-sample gradient and clips by
  its Riemannian norm (what any problem without a structured override gets);
* ``per-agent loop``: a Python loop over the agents making the same manifold calls one agent
  at a time (sample_rgrad, norm, clip, tangent_gaussian, exp; then the tangent mean);
* ``stream data once``: one pass over the data array (``data.sum()``), the memory-bandwidth
  floor; and ``X^T (X v) per agent``, the two passes that one full-batch gradient needs.

A full-batch round with K = 3 needs at least 3 gradient evaluations, i.e. 6 passes over the data.
Ratios are reported against the fast batched round.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rfed.algorithms.federated import DPRSGD, PriRFed, tangent_mean
from rfed.problems import Problem, SpherePCA


class GenericPCA(SpherePCA):
    """SpherePCA without its structured clipping (the generic per-sample path)."""

    clipped_grad_sum = Problem.clipped_grad_sum
    masked_batches = False


def best_time(fn, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def loop_round(problem, plan, x, alpha, k_steps, batch, rng):
    """One round as a per-agent loop over the same manifold calls."""
    man = problem.manifold
    locals_ = []
    for a in range(problem.n_agents):
        xa = x.copy()
        for _ in range(k_steps):
            if batch is None:
                rows = np.arange(problem.counts[a])
            else:
                rows = rng.choice(problem.counts[a], size=batch, replace=False)
            g = problem.sample_rgrad(xa, {"z": problem.data["z"][a, rows]})
            norms = man.norm(xa, g)
            scale = np.minimum(1.0, plan.clip / np.maximum(norms, 1e-300))
            eta = np.mean(scale[:, None] * g, axis=0)
            eta = eta + man.tangent_gaussian(xa, plan.sigma[a], rng)
            xa = man.exp(xa, -alpha * eta)
        locals_.append(xa)
    w = problem.counts / problem.counts.sum()
    return tangent_mean(man, x, np.array(locals_), w)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 agents instead of 100")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n_agents = 10 if args.quick else 100
    n_per, dim, k_steps = 600, 784, 3
    rng = np.random.default_rng(0)
    z = rng.random((n_agents, n_per, dim))
    fast = SpherePCA(z)
    generic = GenericPCA(z)
    x0 = fast.manifold.random_point(rng)
    print(f"PriRFed round: {n_agents} agents x {n_per} samples, Sphere({dim - 1}), K = {k_steps},"
          f" DP-RSGD (eps 0.15, delta 1e-4), data {z.nbytes / 2**20:.0f} MiB")
    rows = []
    floor = best_time(lambda: z.sum(), args.repeat)
    v = rng.standard_normal(dim)
    xtxv = best_time(lambda: np.einsum("and,an->ad", z, np.einsum("and,d->an", z, v)),
                     args.repeat)
    for batch_label, batch in (("full batch", None), ("b = N_i/2", 0.5)):
        times = {}
        for label, prob in (("rfed batched (fast)", fast), ("rfed batched (generic)", generic)):
            # public clip: pixels in [0, 1] give ||z||^2 <= dim, the paper's tau = 2 max|z|^2
            alg = PriRFed(DPRSGD(steps=k_steps, batch_size=batch, clip=2.0 * dim,
                                 paper_epsilon=0.15, paper_delta=1e-4),
                          n_sampled=None, step_size=0.1)
            state = alg.init(prob, x0, np.random.default_rng(1))
            times[label] = best_time(lambda alg=alg, prob=prob, state=state:
                                     alg.step(prob, state), args.repeat)
        plan = DPRSGD(steps=k_steps, batch_size=batch, clip=2.0 * dim, paper_epsilon=0.15,
                      paper_delta=1e-4).plan(fast)
        b = None if batch is None else n_per // 2
        times["per-agent loop"] = best_time(
            lambda plan=plan, b=b: loop_round(fast, plan, x0, 0.1, k_steps, b,
                                              np.random.default_rng(2)), args.repeat)
        times["stream data once (sum)"] = floor
        times["X^T (X v) per agent (2 passes)"] = xtxv
        ref = times["rfed batched (fast)"]
        for label, t in times.items():
            rows.append((batch_label, label, t, t / ref))
    print(f"{'batch':<12} {'method':<32} {'seconds':>10} {'time / fast round':>18}")
    for batch_label, label, t, ratio in rows:
        print(f"{batch_label:<12} {label:<32} {t:>10.4f} {ratio:>18.2f}")


if __name__ == "__main__":
    main()
