"""Where the gap between decentralized and centralized DP-SGD on Fashion-MNIST comes from.

Setting of ``utility-fmnist-classify`` (scattering J = 2, L = 8 + GroupNorm(27), all 3,969
features, 90 % of the training images private, split IID among 10 agents on a circulant graph
of degree 2, the same public split and partition as the experiment's seed 0), one set of
hyperparameters for every row (``--step`` = lr x clip, ``--clip``, ``--batch-fraction`` of the
local data set, ``--epochs``, ``--momentum``, ``--tail``; default: the public tuning's choice
for DP-DPSGD at replace-one, ``docs/results/utility-fmnist-classify/tuning.csv``).

Both trainers draw Poisson minibatches at the same rate ``q`` (local batch ``B`` over the local
size; the centralized one ``n B`` from the pooled records) for the same rounds, so the budget
gives both the same noise multiplier ``z`` at eps 3 (replace-one, certified in the run). They
differ in where the noise goes: centralized DP-SGD adds one draw of std ``z s`` to the pooled
clipped sum of ``n B`` gradients (``z s / (n B)`` on the mean), DP-DPSGD has no trusted
aggregator, so each agent adds its own draw to its own sum of ``B`` (``z s / B`` on each local
mean, ``z s / (B sqrt(n))`` on the network average): ``sqrt(n)`` times the centralized noise.
The rows swap that factor between the two trainers, which separates the noise from the rest
(local steps and gossip instead of one exact average):

* DP-DPSGD at ``z`` (the certified run) and at ``z / sqrt(n)`` (the noise a trusted
  aggregator would add: a diagnostic, NOT a private run of the decentralized protocol);
* centralized DP-SGD at ``z`` (certified) and at ``z sqrt(n)`` (the decentralized noise);
* both with clipping and no noise (``--no-noiseless`` skips them).

``--no-certified-decentralized`` skips the first row (``utility-fmnist-classify`` measures it).

Test accuracy on the 10,000 test images, ``--repetitions`` runs each (seeds 0, 1, ...). Run:
``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_decentralized_gap.py`` (needs the
Fashion-MNIST files and the scattering cache; about 1-3 CPU minutes per row).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from rfed.experiments._classify import (
    CENTRALIZED,
    local_batch,
    make_trainer,
    noise_multiplier,
    partition,
    rounds_for,
    scattering_data,
    softmax_problem,
    tail_averaged,
)
from rfed.privacy import PrivacyBudget

N_AGENTS = 10
CFG = {"data_path": "", "n_test": 0, "n_train": 0, "scatter_J": 2, "scatter_L": 8,
       "groups": 27, "cache_dir": "", "public_fraction": 0.1, "graph_degree": 2,
       "decentralized_sampling": "poisson", "doadp_gamma": 0.5}


def main() -> None:
    """Print the table (markdown) of test accuracies, one row per trainer and noise level."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step", type=float, default=3.2)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--batch-fraction", type=float, default=0.5)
    p.add_argument("--epochs", type=float, default=40.0)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--tail", type=float, default=0.0)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--repetitions", type=int, default=1)
    p.add_argument("--no-noiseless", action="store_true")
    p.add_argument("--no-certified-decentralized", action="store_true",
                   help="skip DP-DPSGD's certified row (the experiment's own run measures it)")
    args = p.parse_args()
    seed = 0
    # the experiment's streams under seed 0: rng(900) draws the public split, rng(910) the
    # IID partition (rfed.experiments.utility_decentralized)
    data = scattering_data(CFG, np.random.default_rng([seed, 900]))
    parts = partition(data["y_priv"], N_AGENTS, "iid", 1.0, np.random.default_rng([seed, 910]))
    problem = softmax_problem(data["x_priv"], data["y_priv"], parts, 10, data["feature_bound"])
    counts = problem.counts
    hp = {"step": args.step, "clip": args.clip, "momentum": args.momentum}
    batch = local_batch(args.batch_fraction, int(counts.min()))
    rounds = rounds_for(args.epochs, problem.n_samples, N_AGENTS, batch)
    budget = {"budget": PrivacyBudget(args.epsilon, 1e-5), "n_rounds": rounds}
    z = {name: noise_multiplier(make_trainer(name, hp, batch, budget, N_AGENTS, CFG), counts)
         for name in ("DP-DPSGD", CENTRALIZED)}
    root_n = math.sqrt(N_AGENTS)
    rows = [("DP-DPSGD", "certified: local noise, no trusted aggregator", budget,
             z["DP-DPSGD"], root_n),
            ("DP-DPSGD", "diagnostic: z / sqrt(n), a trusted aggregator's noise",
             {"noise_multiplier": z["DP-DPSGD"] / root_n}, z["DP-DPSGD"] / root_n, 1.0),
            (CENTRALIZED, "certified: one noise on the pooled sum", budget, z[CENTRALIZED], 1.0),
            (CENTRALIZED, "diagnostic: z sqrt(n), the decentralized noise",
             {"noise_multiplier": z[CENTRALIZED] * root_n}, z[CENTRALIZED] * root_n, root_n)]
    if args.no_certified_decentralized:
        rows = rows[1:]
    if not args.no_noiseless:
        rows += [("DP-DPSGD", "clipping, no noise", {}, 0.0, 0.0),
                 (CENTRALIZED, "clipping, no noise", {}, 0.0, 0.0)]
    print(f"hyperparameters: step={args.step:g} clip={args.clip:g} "
          f"batch_fraction={args.batch_fraction:g} (local batch {batch}) epochs={args.epochs:g} "
          f"({rounds} rounds) momentum={args.momentum:g} tail={args.tail:g}; eps={args.epsilon:g}"
          f" (replace-one, delta 1e-5) gives z = {z['DP-DPSGD']:.4f} (DP-DPSGD), "
          f"{z[CENTRALIZED]:.4f} (centralized)")
    print()
    print("| trainer | noise | noise multiplier | noise on the mean gradient (x centralized) "
          "| certified eps | test accuracy (%) | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for name, label, noise, mult, factor in rows:
        accs, eps, t0 = [], "-", time.process_time()
        for rep in range(args.repetitions):
            alg = tail_averaged(make_trainer(name, hp, batch, noise, N_AGENTS, CFG), rounds,
                                args.tail)
            res = alg.run(problem, rounds, rng=np.random.default_rng([seed, 77, rep]),
                          x0=np.zeros(problem.n_params), eval_every=rounds,
                          with_reference=False)
            accs.append(100.0 * problem.accuracy(res.x, data["x_test"], data["y_test"]))
            if "budget" in noise and res.privacy:
                eps = f"{res.privacy['epsilon_certified']:.3f}"
        cpu = time.process_time() - t0
        acc = f"{np.mean(accs):.2f}" + (f" +- {np.std(accs):.2f}" if len(accs) > 1 else "")
        print(f"| {name} | {label} | {mult:.4f} | {factor:.2f} | {eps} | {acc} | {cpu:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
