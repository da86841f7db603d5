"""Privacy of a PriRFed run: the paper's Theorem 4.2 beside certified RDP accounting.

Two kinds of number for every run (both in :func:`prirfed_privacy_report`):

* **paper** (PriRFed Theorem 4.2, :func:`rfed.privacy.papers.prirfed_privacy`): from the local
  budget ``(epsilon, delta)`` that the paper's sigma formulas are said to give one local run, with
  agent subsampling (Lemma 4.1), sequential composition of the ``s`` agents of a round and the
  better of sequential and advanced composition over ``T`` rounds. Its inputs are heuristic
  (the formulas' constants are set to one, spec pitfall 3), so it is not a certificate.
* **certified** (dp-accounting RDP, record-level, replace-one adjacency as in the paper's
  Def. 2.4; the agents' sizes ``N_i`` public). One record lives in one agent, so in a round only
  that agent's local run depends on it (the other agents' runs are independent of it and the
  aggregation is post-processing). Two valid upper bounds; the smaller is reported:

  - *ledger* (:class:`rfed.privacy.PrivacyLedger`): every round charges each selected agent the
    events its local run performed (DP-RSGD: ``K`` Gaussian steps on minibatches drawn without
    replacement ``b_i / N_i``); agent selection treated as public, no amplification claimed;
    overall = max over agents;
  - *agent sampling*: a local run of ``S`` noisy steps, each a Gaussian mechanism with noise
    multiplier ``z`` (std / replace-one sensitivity), has the RDP curve of one Gaussian with
    multiplier ``z / sqrt(S)`` (Gaussian RDP adds up over adaptive composition; sampling inside
    the run can only lower it). A round samples ``s`` of ``N`` agents without replacement, so a
    round is that Gaussian subsampled without replacement at ``s / N`` (Wang, Balle and
    Kasiviswanathan 2019, whose bound depends only on the base mechanism's RDP curve), composed
    over ``T`` rounds, with the worst agent's ``z``.

  Replace-one sensitivities: DP-RSGD's mean of ``b_i`` clipped gradients moves by at most
  ``2 tau / b_i``; a DP-RSVRG inner step ``clip(g_l(x)) - PT(clip(g_l(xs)) - g)`` by at most
  ``4 tau_1 + 2 tau_0 / N_i`` (the record may be the drawn ``l`` and is in the full gradient
  ``g``); no amplification is claimed for DP-RSVRG's single-sample draws (with replacement).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rfed.algorithms.federated.local import DPRSGD, DPRSVRG, LocalPlan, LocalTrainer
from rfed.privacy.accountants import CertifiedAccountant
from rfed.privacy.ledger import PrivacyLedger
from rfed.privacy.papers import prirfed_privacy

__all__ = [
    "sensitivities",
    "record_round",
    "agent_sampling_epsilon",
    "prirfed_privacy_report",
    "MAX_MEANINGFUL_DELTA",
]

#: The largest theorem delta' at which the certified epsilon is read by default; above it the
#: report reads the certified epsilon at the trainer's local delta instead.
MAX_MEANINGFUL_DELTA = 1e-2


def sensitivities(trainer: LocalTrainer, plan: LocalPlan, counts: np.ndarray) -> np.ndarray:
    """Replace-one L2 sensitivity of one noisy step of each agent, shape ``(n_agents,)``.

    ``inf`` when there is no clipping (no finite sensitivity).
    """
    counts = np.asarray(counts, dtype=float)
    if isinstance(trainer, DPRSGD):
        if plan.clip is None:
            return np.full(counts.shape, np.inf)
        return 2.0 * plan.clip / plan.sizes
    if isinstance(trainer, DPRSVRG):
        if plan.clip is None or plan.clip_full is None:
            return np.full(counts.shape, np.inf)
        return 4.0 * plan.clip + 2.0 * plan.clip_full / counts
    raise TypeError(f"no sensitivity analysis for trainer {type(trainer).__name__}")


def record_round(
    ledger: PrivacyLedger,
    round_index: int,
    trainer: LocalTrainer,
    plan: LocalPlan,
    counts: np.ndarray,
    agents: np.ndarray,
) -> None:
    """Charge the selected agents the noisy steps of their local runs in this round."""
    if not plan.private:
        return
    sens = sensitivities(trainer, plan, counts)[agents]
    if not np.all(np.isfinite(sens)):
        return
    kwargs: dict[str, Any] = {}
    if isinstance(trainer, DPRSGD) and np.any(plan.sizes[agents] < counts[agents]):
        kwargs = {"sampling": "without_replacement", "dataset_size": counts[agents],
                  "sample_size": plan.sizes[agents]}
    ledger.record(round_index, agents, sigma=plan.sigma[agents], sensitivity=sens,
                  count=trainer.total_steps, **kwargs)


def agent_sampling_epsilon(
    trainer: LocalTrainer,
    plan: LocalPlan,
    counts: np.ndarray,
    n_sampled: int,
    rounds: int,
    delta: float,
) -> tuple[float, float]:
    """Certified epsilon with amplification by agent sampling (module doc), and the worst ``z``.

    Returns
    -------
    epsilon : float
        ``inf`` without noise or clipping, 0 after zero rounds.
    noise_multiplier : float
        The worst agent's per-step multiplier ``z``.
    """
    counts = np.asarray(counts, dtype=int)
    sens = sensitivities(trainer, plan, counts)
    z = np.where(np.isfinite(sens), plan.sigma / sens, 0.0)
    worst = float(z.min())
    if rounds == 0:
        return 0.0, worst
    if worst == 0.0:
        return math.inf, worst
    acc = CertifiedAccountant("rdp", "replace_one")
    acc.add_gaussian(worst / math.sqrt(trainer.total_steps), sampling="without_replacement",
                     dataset_size=counts.size, sample_size=n_sampled, count=rounds)
    return acc.epsilon(delta), worst


def prirfed_privacy_report(
    trainer: LocalTrainer,
    plan: LocalPlan,
    counts: np.ndarray,
    n_sampled: int,
    rounds: int,
    ledger: PrivacyLedger | None = None,
    *,
    delta_hat: float = 1e-3,
    delta: float | None = None,
) -> dict[str, Any]:
    """The privacy report of a PriRFed run after ``rounds`` rounds.

    Parameters
    ----------
    trainer, plan
        The local trainer and its resolved plan (noise, clipping, batch sizes).
    counts : int array, shape ``(n_agents,)``
    n_sampled : int
        ``s``.
    rounds : int
        ``T`` (rounds performed).
    ledger : PrivacyLedger, optional
        The run's ledger (events recorded by :func:`record_round`); without it only the
        agent-sampling bound is certified.
    delta_hat : float
        The free ``delta_hat`` of Theorem 4.2 (1e-3 in the paper's Table 1).
    delta : float, optional
        The delta at which the certified epsilon is read; default: the theorem's ``delta'``
        (like for like) when it is at most :data:`MAX_MEANINGFUL_DELTA`; otherwise (a
        ``delta'`` that large guarantees little, e.g. 0.32 after 2000 rounds of full
        participation) the local ``delta`` of the trainer, or ``1e-5`` when the theorem does
        not apply.

    Returns
    -------
    dict
        ``epsilon_paper`` (or ``None``), ``epsilon_certified``, ``delta`` and the details under
        ``paper`` and ``certified`` (accountant name and assumptions included).
    """
    counts = np.asarray(counts, dtype=int)
    paper = None
    eps_local = getattr(trainer, "epsilon", None)
    if eps_local is not None and rounds > 0:
        res = prirfed_privacy(counts.size, n_sampled, eps_local, trainer.delta, rounds, delta_hat)
        paper = {
            "theorem": "PriRFed Theorem 4.2 (seed 004, L250-266)",
            "epsilon": res.epsilon,
            "delta": res.delta,
            "branch": res.branch,
            "local_epsilon": eps_local,
            "local_delta": trainer.delta,
            "delta_hat": delta_hat,
            "note": "from the paper's heuristic sigma calibration with o_i = 1: not a certificate",
        }
    if delta is None:
        if paper is not None and paper["delta"] <= MAX_MEANINGFUL_DELTA:
            delta = paper["delta"]
        else:
            delta = trainer.delta if getattr(trainer, "delta", None) else 1e-5
    eps_agent, z = agent_sampling_epsilon(trainer, plan, counts, n_sampled, rounds, delta)
    eps_ledger = None
    if ledger is not None and plan.private and math.isfinite(eps_agent):
        eps_ledger = ledger.epsilon(delta)
    candidates = {"agent sampling": eps_agent}
    if eps_ledger is not None:
        candidates["ledger (per-agent events, selection public)"] = eps_ledger
    bound = min(candidates, key=candidates.get)
    accountant = (
        "dp-accounting RDP, record-level, replace-one adjacency (sizes public); min of the "
        "agent-sampling bound (WOR subsampled Gaussian) and the per-agent ledger"
    )
    cert = {
        "epsilon": candidates[bound],
        "delta": delta,
        "bound": bound if plan.private else "not private (no noise)",
        "epsilon_agent_sampling": eps_agent,
        "epsilon_ledger": eps_ledger,
        "noise_multiplier": z,
        "steps_per_round": trainer.total_steps,
        "accountant": accountant,
    }
    return {
        "private": bool(plan.private),
        "rounds": rounds,
        "sigma": {"min": float(plan.sigma.min()), "max": float(plan.sigma.max())},
        "clip": plan.clip,
        "paper": paper,
        "certified": cert,
        "delta": delta,
        "delta_paper": paper["delta"] if paper is not None else None,
        "epsilon_paper": paper["epsilon"] if paper is not None else None,
        "epsilon_certified": cert["epsilon"],
        "accountant": accountant,
    }
