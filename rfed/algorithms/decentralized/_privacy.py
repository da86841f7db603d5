"""Privacy bookkeeping of the decentralized algorithms: the paper's closed form beside a
certified accountant, fed round by round with what each agent actually released.

Conventions of the certified side (stated in every report):

* record-level DP of each agent's local data set, replace-one adjacency (the papers' relation:
  every sensitivity they use is ``2 x`` a clipping bound), RDP accountant of dp-accounting;
* an agent's release in a round is a Gaussian mechanism on a clipped (mean) gradient, its local
  sample drawn uniformly **without replacement** (``b`` of ``q_i`` records), which is what the
  code does; the count is the number of rounds in which the agent actually released (activation
  is visible on the wire: a neighbour sees whether a message arrives, so the paper's amplification
  by the activation probability is not claimed);
* everything after the noisy gradient (momentum, sparsification, mixing) is post-processing.

The paper side evaluates the paper's theorem for the configured noise (documented per paper in
:class:`PrivacyTracker`'s constructors); it is only as rigorous as the paper (see the specs).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from rfed.privacy import papers
from rfed.privacy.ledger import PrivacyLedger

__all__ = ["PrivacyTracker", "DGTPrivacy"]


class PrivacyTracker:
    """Feeds a :class:`~rfed.privacy.PrivacyLedger` round by round and adds the paper's bound.

    Parameters
    ----------
    algorithm : str
    noise_multiplier : float
        Noise std over the replace-one L2 sensitivity of one release.
    local_sizes : array of int, shape ``(n_agents,)``
        ``q_i`` (records of agent ``i``).
    sample_size : int
        Records per release (``b``).
    releases_per_round : array of int, shape ``(n_agents,)``
        Gaussian releases an active agent makes per round, all on one minibatch.
    paper : callable ``(rounds) -> dict``
        The paper's closed form for a run of ``rounds`` rounds; the dict has ``epsilon`` (or
        ``epsilon_*`` entries), optionally ``delta``, and ``formula``.
    delta : float
        Delta at which the certified epsilon is reported.
    """

    def __init__(self, algorithm: str, noise_multiplier: float, local_sizes: np.ndarray,
                 sample_size: int, releases_per_round: np.ndarray, paper, delta: float = 1e-5,
                 note: str = ""):
        self.algorithm = algorithm
        self.noise_multiplier = float(noise_multiplier)
        self.local_sizes = np.asarray(local_sizes, dtype=int)
        self.sample_size = int(sample_size)
        self.releases_per_round = np.asarray(releases_per_round, dtype=int)
        self.paper = paper
        self.delta = float(delta)
        self.note = note
        self.rounds = 0
        self.ledger = PrivacyLedger(self.local_sizes.size, "rdp", "replace_one",
                                    description=f"{algorithm}: {note}" if note else algorithm)
        self._paper_added_at = -1
        self._eps_memo: dict[tuple[int, float], np.ndarray] = {}
        self._equal_sizes = bool(np.all(self.local_sizes == self.local_sizes[0]))
        self._release_counts = np.unique(self.releases_per_round)

    def record_round(self, active: np.ndarray) -> None:
        """Charge one round to the agents of the boolean mask ``active``."""
        active = np.asarray(active, dtype=bool)
        # r Gaussian releases of one sampled batch, each with noise multiplier z, compose to one
        # Gaussian mechanism with multiplier z / sqrt(r) on that batch, subsampled once (the
        # batch is shared, so amplification applies to the composite, not to each release).
        # Agents are grouped by r (a few distinct values); equal local sizes are passed as
        # scalars (the ledger then skips its grouping).
        if not active.any():
            counts = ()
        elif self._release_counts.size == 1:
            counts = self._release_counts
        else:
            counts = np.unique(self.releases_per_round[active])
        for count in counts:
            who = active & (self.releases_per_round == count)
            sizes = self.local_sizes[who]
            if self._equal_sizes:
                sizes = sizes[:1].reshape(())
            self.ledger.record(self.rounds, agents=who,
                               noise_multiplier=self.noise_multiplier / np.sqrt(count),
                               sampling="without_replacement", dataset_size=sizes,
                               sample_size=np.minimum(self.sample_size, sizes))
        self.rounds += 1

    def _paper_now(self) -> dict:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            return self.paper(max(self.rounds, 1))

    def finalize(self) -> PrivacyTracker:
        """Store the paper's bound for the rounds run so far in the ledger (once per length)."""
        if self._paper_added_at != self.rounds:
            paper = self._paper_now()
            for key, val in paper.items():
                if key.startswith("epsilon") and val is not None:
                    self.ledger.add_paper_bound(
                        f"{self.algorithm} {key}", float(val),
                        float(paper.get("delta", paper.get("delta_implied") or 0.0) or 0.0),
                        paper["formula"], note=paper.get("warning", ""))
            self._paper_added_at = self.rounds
        return self

    def certified_epsilons(self, delta: float | None = None) -> np.ndarray:
        """Per-agent certified epsilon at ``delta`` (memoized per run length)."""
        key = (self.rounds, self.delta if delta is None else float(delta))
        if key not in self._eps_memo:
            self._eps_memo[key] = self.ledger.epsilons(key[1])
        return self._eps_memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """Paper's closed form and certified accountant side by side (JSON-ready)."""
        delta = self.delta if delta is None else float(delta)
        eps = self.certified_epsilons(delta)
        return {
            "algorithm": self.algorithm,
            "rounds": self.rounds,
            "paper": self._paper_now(),
            "certified": {
                "epsilon_max": float(eps.max()) if eps.size else 0.0,
                "epsilon_mean": float(eps.mean()) if eps.size else 0.0,
                "delta": delta,
                "accountant": self.ledger.describe(),
                "noise_multiplier": self.noise_multiplier,
                "note": self.note,
            },
        }

    def text(self, delta: float | None = None) -> str:
        """The ledger's table with the paper's bound beside it."""
        return self.finalize().ledger.report(self.delta if delta is None else float(delta))

    # ------------------------------------------------------------------ per paper
    @classmethod
    def doadp(cls, alg, problem) -> PrivacyTracker:
        """DO-ADP: Theorem 1 (eq. 7) inverted for the configured sigma, and the certified side.

        A release is the mean of ``b`` per-sample gradients whose coordinates are clamped to
        ``G/sqrt(dim)`` (so each has L2 norm <= G) plus ``N(0, sigma^2 I)``: replace-one
        sensitivity ``2G/b`` over all coordinates. The paper's ``sqrt(k/d)`` gain treats the
        Top-k indices as fixed (spec P1) and is not used on the certified side.
        """
        dim = problem.manifold.dim
        k = alg.resolved_k(dim)
        b = alg.batch_size or int(problem.n_max)
        g = alg.grad_bound
        q = int(problem.counts.min())
        nm = alg.sigma * b / (2 * g)

        def paper(rounds: int) -> dict:
            # eq. (7) at equality, solved for eps (sigma^2 proportional to 1/eps^2)
            eps = math.sqrt(160 * (k / dim) * alg.p ** 2 * rounds * math.log(1.25 / alg.delta0)
                            ) * g / (q * alg.sigma)
            out = {"formula": "DO-ADP Thm 1 eq. (7): sigma^2 = 160 k p^2 T ln(1.25/delta0) G^2 "
                              "/ (q^2 d eps^2), solved for eps", "epsilon": eps,
                   "delta0": alg.delta0, "k_over_d": k / dim, "p": alg.p, "q": q}
            if eps <= 1:
                noise = papers.doadp_sigma(eps, alg.delta0, rounds, q, alg.p, k, dim, g)
                out["delta_implied"] = noise.delta
                out["t_condition_holds"] = noise.t_condition_holds
            else:
                out["delta_implied"] = None
                out["t_condition_holds"] = False
                out["warning"] = "eps > 1 lies outside Theorem 1 (eps in (0, 1])"
            return out

        return cls("DO-ADP", nm, problem.counts, b, np.ones(problem.n_agents, int), paper,
                   note="Top-k/rand-k and momentum are post-processing of the noisy gradient")

    @classmethod
    def dpdl(cls, alg, problem, closed_sizes: np.ndarray, w_min: float, w_max: float,
             delta: float) -> PrivacyTracker:
        """DPDL: Theorem 1 eq. (23) inverted for the configured sigma, and the certified side.

        Every round agent ``i`` releases ``N_i`` noisy clipped gradient sums of one minibatch (its
        ``N_i - 1`` cross-gradients and the noisy self-gradient that enters the broadcast
        momentum), each with noise std ``sigma C`` on a sum of replace-one sensitivity ``2C``:
        noise multiplier ``sigma / 2`` each, ``sigma / (2 sqrt(N_i))`` for the round. The clean
        self-gradient in the broadcast aggregate is masked only by the neighbours' noise (spec
        P8) and is *not* covered by the certified side.
        """
        n = problem.n_agents
        b = alg.batch_size
        q_global = b / (n * int(problem.counts.min()))

        def paper(rounds: int) -> dict:
            ref = papers.dpdl_sigma(1.0, delta, rounds, q_global, alg.alpha, n, w_min, w_max,
                                    int(closed_sizes.min()), h=alg.h, c2=alg.c2)
            # eq. (23): sigma proportional to 1/eps
            return {"formula": "DPDL Thm 1 eq. (23) as printed, solved for eps (c2="
                               f"{alg.c2}, h={alg.h}, paper's global rate q = B/(N min|D_i|))",
                    "epsilon": ref / alg.sigma if alg.sigma > 0 else math.inf, "delta": delta,
                    "q": q_global}

        return cls("DPDL", alg.sigma / 2, problem.counts, b, closed_sizes, paper, delta,
                   note="the clean self-gradient inside the broadcast momentum is not covered "
                        "(spec 001 P8)")

    @classmethod
    def dpsgd(cls, alg, problem, delta: float) -> PrivacyTracker:
        """DP-DPSGD: one clipped noisy gradient sum per agent and round (noise multiplier
        ``sigma/2`` under replace-one); the paper side is the certified one (A(DP)^2SGD's own
        bound is not in the specs)."""
        return cls("DP-DPSGD", alg.sigma / 2, problem.counts, alg.batch_size,
                   np.ones(problem.n_agents, int),
                   lambda rounds: {"formula": "none (baseline; certified accountant only)"},
                   delta)

    @classmethod
    def dpdda(cls, alg, problem, lipschitz: float, iota: float) -> PrivacyTracker:
        """DP-DDA: Theorem 1 inverted for sigma with the printed constant 32 and the corrected
        160 (spec 002 P0); certified: one sampled record per active round, noise multiplier
        ``sigma / (2L)``."""
        q = int(problem.counts.min())

        def paper(rounds: int) -> dict:
            out = {"formula": "DP-DDA Thm 1: sigma^2 = C iota^2 L^2 T ln(2/delta0) / (q^2 eps^2) "
                              "solved for eps", "delta0": alg.delta0, "iota": iota}
            for label, c in (("paper_32", 32.0), ("corrected_160", 160.0)):
                out[f"epsilon_{label}"] = (math.sqrt(c * rounds * math.log(2 / alg.delta0))
                                           * iota * lipschitz / (q * alg.sigma))
            return out

        return cls("DP-DDA", alg.sigma / (2 * lipschitz), problem.counts, 1,
                   np.ones(problem.n_agents, int), paper)


class DGTPrivacy:
    """DP-DGT's privacy: eq. (38), the proof's recursion (32) evaluated numerically, and the
    Laplace releases recorded in a :class:`~rfed.privacy.PrivacyLedger` round by round.

    Iteration ``k`` releases ``s_{i0,k} + xi`` and ``w~_{i0,k} + zeta``; under delta-adjacency
    (Def. 2.2, one agent's cost changes, gradient distance ``<= delta`` in l1) their l1
    sensitivities are bounded by the comparison system (32) ``(varphi_k, eta_k)``, so each is a
    Laplace mechanism with noise multiplier ``theta_k / sensitivity_k`` (pure eps-DP; the ledger
    composes them with RDP). Every agent can be the changed one, so every agent is charged.
    """

    def __init__(self, alg, problem, q_c: float):
        self.alg = alg
        self.mu = problem.strong_convexity
        self.q_c = q_c
        self.rounds = 0
        self.ledger = PrivacyLedger(problem.n_agents, "rdp", "replace_one",
                                    description="DP-DGT Laplace releases (adjacency radius "
                                                f"{alg.adjacency_delta:g})")
        self._sens = (np.zeros(0), np.zeros(0))
        self._paper_added_at = -1

    def sensitivities(self, k: int) -> tuple[float, float]:
        """``(varphi_k, eta_k)`` of the recursion (32) (:func:`rfed.privacy.papers.
        dpdgt_sensitivities`), evaluated over a horizon that doubles when ``k`` passes it."""
        if k >= self._sens[0].size:
            alg = self.alg
            horizon = max(2 * self._sens[0].size, k + 1, 64)
            self._sens = papers.dpdgt_sensitivities(
                alg.alpha0 * alg.q ** np.arange(horizon), self.mu, alg.gamma, alg.phi,
                alg.adjacency_delta)
        return float(self._sens[0][k]), float(self._sens[1][k])

    def record_round(self, k: int) -> None:
        """Charge iteration ``k``'s two releases."""
        alg = self.alg
        for sens, sched in zip(self.sensitivities(k), (alg.theta_xi, alg.theta_zeta),
                               strict=True):
            if sens > 0:
                self.ledger.record(k, None, "laplace", noise_multiplier=sched.scale(k) / sens)
        self.rounds = k + 1

    def paper(self) -> dict:
        """Eq. (38) (infinite horizon; NaN with the reason when inapplicable) and the recursion
        (32) summed over the iterations run."""
        alg = self.alg
        k = np.arange(max(self.rounds, 1))
        out = {"formula": "DP-DGT Cor. 5.14 eq. (38) and the likelihood-ratio sum of (32)",
               "delta": 0.0, "adjacency_delta": alg.adjacency_delta, "mu": self.mu}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            try:
                out["epsilon_eq38"] = papers.dpdgt_epsilon(
                    alg.alpha0, alg.q, alg.theta_xi.theta0, alg.theta_xi.q,
                    alg.theta_zeta.theta0, alg.theta_zeta.q, self.mu, alg.gamma, alg.phi,
                    alg.adjacency_delta, q_c=self.q_c)
            except ValueError as exc:
                out["epsilon_eq38"] = None
                out["warning"] = f"eq. (38) not applicable: {exc}"
        out["epsilon_recursion"] = papers.dpdgt_epsilon_recursion(
            alg.alpha0 * alg.q ** k, alg.theta_xi.scale(k), alg.theta_zeta.scale(k), self.mu,
            alg.gamma, alg.phi, alg.adjacency_delta)
        return out

    def finalize(self) -> DGTPrivacy:
        """Store the paper's bounds in the ledger (once per run length)."""
        if self._paper_added_at != self.rounds:
            paper = self.paper()
            for key in ("epsilon_eq38", "epsilon_recursion"):
                if paper.get(key) is not None:
                    self.ledger.add_paper_bound(f"DP-DGT {key}", paper[key], 0.0,
                                                paper["formula"], note=paper.get("warning", ""))
            self._paper_added_at = self.rounds
        return self

    def report(self, delta: float = 1e-5) -> dict:
        """Paper side and certified side (JSON-ready)."""
        eps = self.ledger.epsilons(delta)
        return {"algorithm": "DP-DGT", "rounds": self.rounds, "paper": self.paper(),
                "certified": {"epsilon_max": float(eps.max()), "delta": delta,
                              "accountant": self.ledger.describe()}}

    def text(self, delta: float = 1e-5) -> str:
        """The ledger's table with the paper's bounds beside it."""
        return self.finalize().ledger.report(delta)
