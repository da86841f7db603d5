"""Privacy-ledger recording against the PriRFed round it accounts, at 10^4 and 10^5 agents.

Run on demand: ``python benchmarks/bench_ledger.py [--agents 100000] [--repeat 5]``.

Setting: PCA on Sphere(9) (SpherePCA), 10 samples of dimension 10 per agent, DP-RSGD with
K = 3 full-batch steps, full participation (``n_sampled=None``) and 10% participation. Rows
(interleaved in one process, median CPU time of ``repeat`` calls, ``time.process_time``):

* ``PriRFed round``: :meth:`PriRFed.step` with its ledger (the recording included);
* ``ledger recording``: :func:`rfed.algorithms.federated.record_round` alone on a fresh ledger
  over rounds 0, 1, 2, ... (the call the round makes: per-agent sigma and sensitivity arrays, all
  equal), with the round's selected agents.

The last column is recording / round: the target is under 3% at 100,000 agents.

``--decentralized``: a DO-ADP round (logistic regression, d = 100, 50 records per agent,
circulant graph i+-1,2,3, p = 0.8, Top-k with k/d = 0.3, ``noise_multiplier=1``) against its
ledger recording, :meth:`GaussianAccount.record_round` with the run's event plan (one
:meth:`PrivacyLedger.record_event` per event and round, what the round does) and through the
general per-round path (:meth:`PrivacyLedger.record` with the round's parameters, what it did
before issue 13), on fresh accounts with the same activation masks.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import interleaved_medians

from rfed.algorithms.decentralized import DOADP
from rfed.algorithms.decentralized._privacy import GaussianAccount
from rfed.algorithms.federated import DPRSGD, PriRFed, record_round
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.privacy import PrivacyLedger
from rfed.problems import SpherePCA
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.randomness import public_generator


def _fresh_account(acc: GaussianAccount, plan: bool) -> GaussianAccount:
    out = GaussianAccount("DO-ADP", acc.local_sizes, acc.sample_size, acc.releases,
                          acc.noise_multiplier, acc.sensitivity, acc.delta)
    if not plan:
        out._plan = None  # the general path: PrivacyLedger.record with the round's parameters
    return out


def _decentralized_row(n: int, repeat: int) -> None:
    q, d = 50, 100
    x, y = make_epsilon_like(n * q, d, 0)
    f, lab = split_evenly(x, y, n, np.random.default_rng(0))
    problem = LogisticRegression(f, lab, L2Regularizer(1.0 / q), feature_bound=1.0)
    alg = DOADP(Network(circulant(n, 3)), alpha=0.05, p=0.8, k_ratio=0.3, grad_bound=1.0,
                noise_multiplier=1.0)
    state = alg.init(problem, np.zeros(d), np.random.default_rng(1))
    state = alg.step(problem, state)
    accounts = {"plan": _fresh_account(state.ledger, True),
                "general": _fresh_account(state.ledger, False)}
    masks = [public_generator(state.seed, t, "activation").random(n) < alg.p for t in range(64)]

    def record(name: str) -> None:
        a = accounts[name]
        a.record_round(masks[a.rounds % len(masks)])

    times = interleaved_medians({
        "round": lambda: alg.step(problem, state),
        "plan": lambda: record("plan"),
        "general": lambda: record("general"),
    }, repeat)
    assert accounts["plan"].ledger.to_dict() == accounts["general"].ledger.to_dict()
    r, c, g = times["round"], times["plan"], times["general"]
    print(f"{n:>8} {1e3 * r:>11.3f} {1e3 * c:>10.4f} {1e3 * g:>13.4f} "
          f"{100 * c / r:>10.1f}% {100 * g / r:>13.1f}%")


def decentralized(agents: list[int], repeat: int) -> None:
    """DO-ADP round vs its ledger recording (event plan, and the general path)."""
    print(f"DO-ADP round vs its ledger recording; median CPU time of {repeat} interleaved calls")
    print(f"{'agents':>8} {'round [ms]':>11} {'plan [ms]':>10} {'general [ms]':>13} "
          f"{'plan/round':>11} {'general/round':>14}")
    for n in agents:
        _decentralized_row(n, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--decentralized", action="store_true",
                        help="DO-ADP's recording instead (default agents: 20 and 10,000)")
    args = parser.parse_args()
    if args.decentralized:
        given = args.agents != parser.get_default("agents")
        decentralized(args.agents if given else [20, 10_000], max(args.repeat, 5))
        return
    print(f"PriRFed round vs its ledger recording; median CPU time of {args.repeat} interleaved "
          f"calls")
    print(f"{'agents':>8} {'participation':>14} {'round [ms]':>11} {'record [ms]':>12} "
          f"{'record/round':>13}")
    for n in args.agents:
        rng = np.random.default_rng(0)
        problem = SpherePCA(rng.random((n, 10, 10)), norm_bound=np.sqrt(10.0))
        x0 = problem.manifold.random_point(rng)
        for label, n_sampled in (("100%", None), ("10%", n // 10)):
            alg = PriRFed(DPRSGD(steps=3, batch_size=None, clip=10.0, paper_epsilon=0.5,
                                 paper_delta=1e-5),
                          n_sampled=n_sampled, step_size=0.1)
            state = alg.init(problem, x0, np.random.default_rng(1))
            state = alg.step(problem, state)
            agents = (np.arange(n) if n_sampled is None
                      else np.sort(np.random.default_rng(2).choice(n, n_sampled, replace=False)))
            ledger = PrivacyLedger(n)
            rounds = iter(range(10**9))
            times = interleaved_medians({
                "round": lambda alg=alg, state=state, p=problem: alg.step(p, state),
                "record": lambda ledger=ledger, plan=state.plan, agents=agents, rounds=rounds:
                    record_round(ledger, next(rounds), plan, agents),
            }, args.repeat)
            r, c = times["round"], times["record"]
            print(f"{n:>8} {label:>14} {1e3 * r:>11.2f} {1e3 * c:>12.3f} {100 * c / r:>12.1f}%")


if __name__ == "__main__":
    main()
