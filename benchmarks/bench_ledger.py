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
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import interleaved_medians

from rfed.algorithms.federated import DPRSGD, PriRFed, record_round
from rfed.privacy import PrivacyLedger
from rfed.problems import SpherePCA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
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
