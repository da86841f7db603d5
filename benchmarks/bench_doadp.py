"""One DO-ADP round, 20 agents at dimension 2,000: batched implementation vs a per-agent loop.

The batched round is :meth:`rfed.algorithms.decentralized.DOADP.step` (logistic regression,
circulant graph i+-1,2,3, p = 0.8, Top-k with k/d = 0.3, one sample per active agent, per-coordinate
clipping and Gaussian noise; the paper's Fig. 3 setting). The baseline is a straightforward
implementation of the same round (spec 000 section 2.3) with Python loops over agents and their
neighbours, written in the same run on the same data; both are timed on identical states, and the
loop's result is checked against the batched one (same activations, samples and noise).

Run: ``python benchmarks/bench_doadp.py [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rfed.algorithms.decentralized import DOADP
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly


def loop_round(problem, alg, x, m, xhat, rng):
    """The same DO-ADP round as ``alg.step`` with loops over agents (Euclidean space)."""
    n, d = x.shape
    w = alg.weights.toarray()
    eta = rng.random(n) < alg.p
    act = np.flatnonzero(eta)
    idx = problem.sample_batches(act, 1, rng)
    bound = alg.grad_bound / np.sqrt(d)
    g_all = {}
    for a, i in enumerate(act):
        feats = problem.data["features"][i, idx[a, 0]]
        label = problem.data["labels"][i, idx[a, 0]]
        margin = label * feats @ x[i]
        g = -0.5 * (1.0 - np.tanh(0.5 * margin)) * label * feats + problem.regularizer.subgrad(x[i])
        g_all[i] = np.clip(g, -bound, bound)
    noise = alg.sigma * rng.standard_normal((act.size, d))
    k = alg.resolved_k(d)
    x_new, m_new, xhat_new = x.copy(), alg.beta * m, xhat.copy()
    for i in range(n):
        cons = np.zeros(d)
        for j in range(n):
            if j != i and w[i, j] != 0:
                cons += w[i, j] * (xhat[j] - xhat[i])
        step = alg.gamma * cons
        if eta[i]:
            a = int(np.searchsorted(act, i))
            m_new[i] = m_new[i] + g_all[i] + noise[a]
            step = step - alg.alpha * m_new[i]
        x_new[i] = x[i] + step
    for i in act:
        diff = x_new[i] - xhat[i]
        keep = np.argsort(-np.abs(diff), kind="stable")[:k]
        xhat_new[i, keep] += diff[keep]
    return x_new, m_new, xhat_new


def main(repeats: int = 20) -> None:
    n, d, q = 20, 2000, 50
    x, y = make_epsilon_like(n * q, d, 0)
    f, lab = split_evenly(x, y, n, np.random.default_rng(0))
    problem = LogisticRegression(f, lab, L2Regularizer(1.0 / q))
    alg = DOADP(Network(circulant(n, 3)), alpha=1e-3, p=0.8, k_ratio=0.3, sigma=0.1,
                grad_bound=1.0)
    state = alg.init(problem, np.zeros(d), np.random.default_rng(1))
    for _ in range(3):  # move away from the start so that the copies differ
        state = alg.step(problem, state)
    seed = 12345

    def batched():
        s = type(state)(**{**state.__dict__, "rng": np.random.default_rng(seed)})
        return alg.step(problem, s)

    def looped():
        return loop_round(problem, alg, state.x, state.m, state.xhat, np.random.default_rng(seed))

    b, lp = batched(), looped()
    agree = max(np.abs(b.x - lp[0]).max(), np.abs(b.m - lp[1]).max(),
                np.abs(b.xhat - lp[2]).max())
    times = {}
    for name, fn in (("batched (DOADP.step)", batched), ("per-agent loop", looped)):
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        times[name] = np.median(ts)
    base = times["per-agent loop"]
    print(f"DO-ADP round: n = {n} agents, d = {d}, circulant +-1,2,3, p = 0.8, k/d = 0.3; "
          f"median of {repeats}; max |batched - loop| = {agree:.2e}")
    print(f"{'implementation':<24}{'ms / round':>12}{'speed-up vs loop':>20}")
    for name, t in times.items():
        print(f"{name:<24}{1e3 * t:>12.2f}{base / t:>20.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    main(parser.parse_args().repeats)
