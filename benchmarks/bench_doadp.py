"""One DO-ADP round, 20 agents: rfed against hand-written numpy.

The batched round is :meth:`rfed.algorithms.decentralized.DOADP.step` (logistic regression,
circulant graph i+-1,2,3, p = 0.8, Top-k with k/d = 0.3, one sample per active agent, per-coordinate
clipping and Gaussian noise; the paper's Fig. 3 setting), at d = 2,000 with 50 samples per agent
by default, or at the ``doadp-logreg`` experiment's size with ``--dim 100 --samples 300``.
Baselines, written in the same run on the same data and timed on identical states (spec 000
section 2.3), each checked against rfed's result (same activations, samples and noise from the
same keyed streams):

* ``neighbour loop + argpartition``: the active agents' draws in one call each, then a Python
  loop over agents reading each agent's neighbours from the CSR weights, Top-k by
  ``np.argpartition`` (what a competent user writes with loops);
* ``vectorized numpy``: no Python loop: ``W @ Xhat``, the active agents' gradients in one
  ``einsum``, Top-k by ``argpartition`` along rows;
* ``vectorized numpy, one generator``: the same, with the noise and minibatch drawn from one
  sequential ``numpy.random.Generator`` (PCG64) instead of per-agent keyed streams (different
  draws, so not compared; it prices the engine-independent randomness);
* ``naive loop (dense W, full sort)``: the former baseline, labelled naive.

The baselines keep their :class:`rfed.randomness.AgentStreams` across rounds, as a user would
(building one costs ~10 us). A row times rfed with the privacy ledger off, and a per-phase
breakdown of rfed's round shows where the time goes, beside the floor every implementation with
these keyed draws pays: the Philox draws themselves (the minibatch keys and the noise of the 16
columns of each group of agents the active ones belong to; ``rfed.randomness``). All rows are
interleaved in one process, in a new random order every repeat (a call runs on the caches the
previous call left); the table gives the median CPU time
(``time.process_time``) and the ratio baseline / rfed.

Run: ``python benchmarks/bench_doadp.py [--repeats 40] [--agents 20] [--dim 2000]
[--samples 50]``.
"""

# ruff: noqa: E402  (one BLAS thread is set before numpy loads)
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # one BLAS thread, set before numpy loads

import argparse
import time

import numpy as np

from rfed.algorithms.decentralized import DOADP, sparsify
from rfed.algorithms.decentralized._streams import AGENTS_PER_STREAM, KeyedDraws
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.gossip import consensus_direction
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.problems.base import sample_without_replacement
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.randomness import (
    AgentStreams,
    _open_uniform,
    _standard_normal,
    _uniform_ranks,
    public_generator,
)


def naive_loop_round(problem, alg, x, m, xhat, streams, t):
    """Naive: the same DO-ADP round as ``alg.step`` with loops over agents scanning a dense W
    and a full sort for Top-k (Euclidean space); the activation comes from the public stream of
    ``(streams.seed, t)``, each agent's minibatch and noise from its own keyed stream, agent by
    agent."""
    n, d = x.shape
    w = alg.weights.toarray()
    eta = public_generator(streams.seed, t, "activation").random(n) < alg.p
    act = np.flatnonzero(eta)
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


def _logistic_grads(problem, alg, x_act, act, sample):
    """Clipped per-coordinate logistic gradients of one sample per active agent, ``(A, d)``."""
    feats = problem.data["features"][act, sample]  # (A, d)
    label = problem.data["labels"][act, sample]  # (A,)
    margin = label * np.einsum("ad,ad->a", feats, x_act)
    g = (-0.5 * (1.0 - np.tanh(0.5 * margin)) * label)[:, None] * feats
    g += problem.regularizer.subgrad(x_act)
    bound = alg.grad_bound / np.sqrt(x_act.shape[1])
    return np.clip(g, -bound, bound, out=g)


def neighbour_loop_round(problem, alg, x, m, xhat, streams, t):
    """A loop over agents reading neighbours from CSR, Top-k by ``argpartition``."""
    n, d = x.shape
    w = alg.weights
    indptr, indices, data = w.indptr, w.indices, w.data
    eta = public_generator(streams.seed, t, "activation").random(n) < alg.p
    act = np.flatnonzero(eta)
    # the draws of all active agents at once (a keyed stream serves a group of 16 agents: one
    # call per agent would draw each group once per agent)
    samples = np.zeros(n, dtype=np.int64)
    samples[act] = sample_without_replacement(problem.counts[act], 1,
                                              KeyedDraws(streams, act, t, "minibatch"))[:, 0]
    noise = np.zeros((n, d))
    noise[act] = streams.normal(act, t, "noise", (d,))
    k = alg.resolved_k(d)
    x_new, m_new, xhat_new = np.empty_like(x), alg.beta * m, xhat.copy()
    for i in range(n):
        nb, wt = indices[indptr[i]:indptr[i + 1]], data[indptr[i]:indptr[i + 1]]
        step = alg.gamma * (wt @ xhat[nb] - wt.sum() * xhat[i])
        if eta[i]:
            ids = np.array([i])
            g = _logistic_grads(problem, alg, x[ids], ids, samples[ids])[0]
            m_new[i] += g + alg.sigma * noise[i]
            step -= alg.alpha * m_new[i]
        x_new[i] = x[i] + step
        if eta[i]:
            diff = x_new[i] - xhat[i]
            keep = np.argpartition(-np.abs(diff), k - 1)[:k]
            xhat_new[i, keep] += diff[keep]
    return x_new, m_new, xhat_new


def vectorized_round(problem, alg, x, m, xhat, streams, t, rng=None):
    """No Python loop over agents; noise and minibatches from the keyed streams, or from
    ``rng`` (one sequential generator) when given."""
    n, d = x.shape
    w = alg.weights
    act = np.flatnonzero(public_generator(streams.seed, t, "activation").random(n) < alg.p)
    if rng is None:
        sample = sample_without_replacement(problem.counts[act], 1,
                                            KeyedDraws(streams, act, t, "minibatch"))[:, 0]
        noise = streams.normal(act, t, "noise", (d,))
    else:
        sample = rng.integers(0, problem.counts[act])
        noise = rng.standard_normal((act.size, d))
    cons = w @ xhat - (w @ np.ones(n))[:, None] * xhat
    m_new = alg.beta * m
    m_new[act] += _logistic_grads(problem, alg, x[act], act, sample) + alg.sigma * noise
    x_new = x + alg.gamma * cons
    x_new[act] -= alg.alpha * m_new[act]
    k = alg.resolved_k(d)
    diff = x_new[act] - xhat[act]
    keep = np.argpartition(-np.abs(diff), k - 1, axis=1)[:, :k]
    xhat_new = xhat.copy()
    xhat_new[act[:, None], keep] += np.take_along_axis(diff, keep, axis=1)
    return x_new, m_new, xhat_new


def phase_times(problem, alg, state, repeats: int) -> dict[str, float]:
    """Median seconds of the main phases of one batched round (Euclidean space), and of the
    keyed draws' floor."""
    man = problem.manifold
    n, d = state.x.shape
    eta = alg._activation(state.seed, state.t, n)
    act = np.flatnonzero(eta)
    k = alg.resolved_k(d)
    coords = state.x[act] - state.xhat[act]
    streams = AgentStreams(state.seed, agents_per_stream=AGENTS_PER_STREAM)
    groups = sorted(set((act // AGENTS_PER_STREAM).tolist()))
    n_max = int(problem.n_max)

    def floor(sampler, m):
        def draw():
            for g in groups:
                sampler(streams._rekey(g, state.t, 7), (m, AGENTS_PER_STREAM))
        return draw

    phases = {
        "floor: minibatch keys (ranks)": floor(_uniform_ranks, n_max),
        "floor: noise (normals)": floor(_standard_normal, d),
        "  (keys as uniforms, for scale)": floor(_open_uniform, n_max),
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
        t0 = time.process_time()
        fn()
        ts.append(time.process_time() - t0)
    return float(np.median(ts))


def shuffled_medians(fns: dict, repeat: int) -> dict[str, float]:
    """Median CPU seconds per call of each function, calls interleaved.

    Every repeat calls the functions in a new random order (seeded): a call runs on the caches
    the previous one left (at d = 2,000 a round touches a few MB, and two implementations of
    the round share the state's arrays), so a fixed or rotating order would always give the
    same function the warm caches of the same predecessor. One warm-up call each comes
    first."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    names = list(fns)
    order = np.random.default_rng(0)
    for _ in range(repeat):
        for i in order.permutation(len(names)):
            t0 = time.process_time()
            fns[names[i]]()
            times[names[i]].append(time.process_time() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}


def main(repeats: int = 40, n: int = 20, d: int = 2000, q: int = 50) -> None:
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

    no_ledger = type(state)(**{**state.__dict__, "ledger": None})

    def batched_no_ledger():
        return alg.step(problem, no_ledger)

    # the baselines keep their streams across rounds, as a user's loop would
    streams = AgentStreams(state.seed, agents_per_stream=AGENTS_PER_STREAM)
    args = (problem, alg, state.x, state.m, state.xhat, streams, state.t)
    user_rng = np.random.default_rng(5)
    fns = {
        "rfed (DOADP.step)": batched,
        "rfed, ledger off": batched_no_ledger,
        "neighbour loop + argpartition": lambda: neighbour_loop_round(*args),
        "vectorized numpy": lambda: vectorized_round(*args),
        "vectorized, one generator": lambda: vectorized_round(*args, rng=user_rng),
        "naive loop (dense W, sort)": lambda: naive_loop_round(*args),
    }
    b = batched()
    agree = {}
    for name in ("neighbour loop + argpartition", "vectorized numpy",
                 "naive loop (dense W, sort)"):
        out = fns[name]()
        agree[name] = max(np.abs(b.x - out[0]).max(), np.abs(b.m - out[1]).max(),
                          np.abs(b.xhat - out[2]).max())
    times = shuffled_medians(fns, repeats)
    ref = times["rfed (DOADP.step)"]
    print(f"DO-ADP round: n = {n} agents, d = {d}, {q} samples per agent, circulant +-1,2,3, "
          f"p = 0.8, k/d = 0.3; median CPU time of {repeats} interleaved calls (shuffled)")
    print(f"{'implementation':<32}{'ms / round':>12}{'base / rfed':>13}{'max |diff|':>12}")
    for name, t in times.items():
        diff = f"{agree[name]:.1e}" if name in agree else "-"
        print(f"{name:<32}{1e3 * t:>12.3f}{t / ref:>13.2f}{diff:>12}")
    print(f"\nphases of rfed's round (each timed alone; % of {1e3 * ref:.3f} ms)")
    print(f"{'phase':<32}{'ms':>8}{'%':>8}")
    for name, t in phase_times(problem, alg, state, repeats).items():
        print(f"{name:<32}{1e3 * t:>8.3f}{100 * t / ref:>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--dim", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=50, help="samples per agent")
    args = parser.parse_args()
    from _timing import results_file

    with results_file("bench_doadp"):
        main(args.repeats, args.agents, args.dim, args.samples)
