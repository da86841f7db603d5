"""One DO-ADP round, 20 agents at dimension 2,000: batched implementation vs a per-agent loop.

The batched round is :meth:`rfed.algorithms.decentralized.DOADP.step` (logistic regression,
circulant graph i+-1,2,3, p = 0.8, Top-k with k/d = 0.3, one sample per active agent, per-coordinate
clipping and Gaussian noise; the paper's Fig. 3 setting). The baseline is a straightforward
implementation of the same round (spec 000 section 2.3) with Python loops over agents and their
neighbours, written in the same run on the same data; both are timed on identical states, and the
loop's result is checked against the batched one (same activations, samples and noise).

A third row times the batched round with the privacy ledger off (same arithmetic and noise; the
loop does no privacy bookkeeping), and a per-phase breakdown of the batched round shows where the
time goes (the Gaussian draw is one phase among several, not the bulk).

Run: ``python benchmarks/bench_doadp.py [--repeats 20] [--agents 20]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rfed.algorithms.decentralized import DOADP, sparsify
from rfed.algorithms.decentralized._streams import KeyedDraws
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.gossip import consensus_direction
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.problems.base import sample_without_replacement
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.randomness import AgentStreams, public_generator


def loop_round(problem, alg, x, m, xhat, seed, t):
    """The same DO-ADP round as ``alg.step`` with loops over agents (Euclidean space); the
    activation comes from the public stream of ``(seed, t)``, each agent's minibatch and noise
    from its own keyed stream, drawn agent by agent."""
    n, d = x.shape
    w = alg.weights.toarray()
    eta = public_generator(seed, t, "activation").random(n) < alg.p
    act = np.flatnonzero(eta)
    streams = AgentStreams(seed)
    bound = alg.grad_bound / np.sqrt(d)
    g_all, noise = {}, {}
    for i in act:
        draws = KeyedDraws(streams, np.array([i]), t, "minibatch")
        sample = sample_without_replacement(problem.counts[[i]], 1, draws)[0, 0]
        noise[i] = streams.normal([i], t, "noise", (d,))[0]
        feats = problem.data["features"][i, sample]
        label = problem.data["labels"][i, sample]
        margin = label * feats @ x[i]
        g = -0.5 * (1.0 - np.tanh(0.5 * margin)) * label * feats + problem.regularizer.subgrad(x[i])
        g_all[i] = np.clip(g, -bound, bound)
    k = alg.resolved_k(d)
    x_new, m_new, xhat_new = x.copy(), alg.beta * m, xhat.copy()
    for i in range(n):
        cons = np.zeros(d)
        for j in range(n):
            if j != i and w[i, j] != 0:
                cons += w[i, j] * (xhat[j] - xhat[i])
        step = alg.gamma * cons
        if eta[i]:
            m_new[i] = m_new[i] + g_all[i] + alg.sigma * noise[i]
            step = step - alg.alpha * m_new[i]
        x_new[i] = x[i] + step
    for i in act:
        diff = x_new[i] - xhat[i]
        keep = np.argsort(-np.abs(diff), kind="stable")[:k]
        xhat_new[i, keep] += diff[keep]
    return x_new, m_new, xhat_new


def phase_times(problem, alg, state, repeats: int) -> dict[str, float]:
    """Median seconds of the main phases of one batched round (Euclidean space)."""
    man = problem.manifold
    n, d = state.x.shape
    eta = alg._activation(state.seed, state.t, n)
    act = np.flatnonzero(eta)
    k = alg.resolved_k(d)
    coords = state.x[act] - state.xhat[act]
    phases = {
        "Gaussian draw (active only)": lambda: AgentStreams(state.seed).normal(
            act, state.t, "noise", (d,)),
        "gradients + clipping + noise": lambda: alg._noisy_gradients(problem, state.x[act], act,
                                                                     state),
        "consensus on public copies": lambda: consensus_direction(
            man, alg.weights, state.xhat, comm=state.comm, copies=True),
        "Top-k (partition)": lambda: sparsify(coords, k),
        "publish (counted)": lambda: state.comm.publish(alg.weights, state.xhat,
                                                        np.zeros_like(state.xhat), senders=eta,
                                                        payload_bytes=12 * k),
        "privacy ledger": lambda: state.ledger.record_round(eta),
    }
    return {name: _median_time(fn, repeats) for name, fn in phases.items()}


def _median_time(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(repeats: int = 20, n: int = 20) -> None:
    d, q = 2000, 50
    x, y = make_epsilon_like(n * q, d, 0)
    f, lab = split_evenly(x, y, n, np.random.default_rng(0))
    problem = LogisticRegression(f, lab, L2Regularizer(1.0 / q))
    alg = DOADP(Network(circulant(n, 3)), alpha=1e-3, p=0.8, k_ratio=0.3, sigma=0.1,
                grad_bound=1.0)
    state = alg.init(problem, np.zeros(d), np.random.default_rng(1))
    for _ in range(3):  # move away from the start so that the copies differ
        state = alg.step(problem, state)

    def batched():
        return alg.step(problem, state)  # keyed streams: the state is not consumed

    def batched_no_ledger():
        return alg.step(problem, type(state)(**{**state.__dict__, "ledger": None}))

    def looped():
        return loop_round(problem, alg, state.x, state.m, state.xhat, state.seed, state.t)

    b, lp = batched(), looped()
    agree = max(np.abs(b.x - lp[0]).max(), np.abs(b.m - lp[1]).max(),
                np.abs(b.xhat - lp[2]).max())
    times = {name: _median_time(fn, repeats) for name, fn in (
        ("batched (DOADP.step)", batched), ("batched, ledger off", batched_no_ledger),
        ("per-agent loop", looped))}
    base = times["per-agent loop"]
    print(f"DO-ADP round: n = {n} agents, d = {d}, circulant +-1,2,3, p = 0.8, k/d = 0.3; "
          f"median of {repeats}; max |batched - loop| = {agree:.2e}")
    print(f"{'implementation':<28}{'ms / round':>12}{'speed-up vs loop':>20}")
    for name, t in times.items():
        print(f"{name:<28}{1e3 * t:>12.3f}{base / t:>20.1f}")
    total = times["batched (DOADP.step)"]
    print(f"\nphases of the batched round (each timed alone; % of {1e3 * total:.3f} ms)")
    print(f"{'phase':<32}{'ms':>8}{'%':>8}")
    for name, t in phase_times(problem, alg, state, repeats).items():
        print(f"{name:<32}{1e3 * t:>8.3f}{100 * t / total:>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--agents", type=int, default=20)
    args = parser.parse_args()
    main(args.repeats, args.agents)
