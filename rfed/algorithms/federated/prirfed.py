"""PriRFed (Algorithm 1 of seed 004): private federated learning on a Riemannian manifold."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.algorithms.federated.accounting import prirfed_privacy_report, record_round
from rfed.algorithms.federated.aggregation import (
    AGGREGATIONS,
    data_size_weights,
    karcher_aggregate,
    tangent_mean,
)
from rfed.algorithms.federated.local import LocalPlan, LocalTrainer
from rfed.algorithms.federated.sampling import sample_agents
from rfed.networks.comm import InProcessCommunicator
from rfed.privacy.ledger import PrivacyLedger
from rfed.problems.base import Problem

__all__ = ["PriRFed", "PriRFedState"]


@dataclass
class PriRFedState:
    """Everything the next round needs (see :class:`rfed.algorithms.base.Algorithm`).

    Attributes
    ----------
    x : array, shape ``point_shape``
        The global parameter :math:`x^{(t)}`.
    round : int
        ``t``, the number of rounds done.
    rng : numpy.random.Generator
    plan : LocalPlan
        Resolved noise, clipping and batch sizes.
    candidate : array or None
        Output option 2: a uniform draw from :math:`\\{x^{(t)}\\}_{t=1}^{T}`, kept online by
        reservoir sampling (round ``t`` replaces it with probability ``1/t``).
    comm : InProcessCommunicator
        Counts the bytes of the broadcasts and gathers.
    n_clipped : int
        Per-sample gradients clipped so far.
    agents : int array
        The agents sampled in the last round.
    ledger : PrivacyLedger
        Per-agent record of the noisy steps performed (certified RDP, replace-one).
    """

    x: np.ndarray
    round: int
    rng: np.random.Generator
    plan: LocalPlan
    candidate: np.ndarray | None
    comm: InProcessCommunicator
    ledger: PrivacyLedger
    n_clipped: int = 0
    agents: np.ndarray | None = None


class PriRFed(Algorithm):
    r"""PriRFed: sample agents, train locally with privacy, aggregate on the manifold.

    Every round (PriRFed Alg. 1, spec section 2.1):

    * line 2: sample ``s`` agents uniformly without replacement;
    * line 3: broadcast :math:`x^{(t)}` to them;
    * lines 4-8: local training of all selected agents at once (``trainer``: :class:`DPRSGD`
      or :class:`DPRSVRG`), each from :math:`x^{(t)}`, batched in one array;
    * line 10: aggregate by the tangent mean (3.2),
      :math:`x^{(t+1)} = \mathrm{Exp}_{x^{(t)}}(\sum_i w_i \mathrm{Log}_{x^{(t)}}(\tilde x_i))`,
      :math:`w_i = N_i / \sum_{l \in S_t} N_l`, or by the exact Karcher mean (3.1);
    * lines 12-13: output option 1 (:math:`x^{(T)}`) or 2 (uniform over
      :math:`x^{(1)}, \dots, x^{(T)}`); the local trainers follow the same option.

    The history records :math:`f(x^{(t)})` at every evaluated round whatever the option (spec
    pitfall 11), plus the bytes exchanged and the clipped-gradient count. The result's
    ``privacy`` is the report of
    :func:`~rfed.algorithms.federated.accounting.prirfed_privacy_report` (Theorem 4.2 and the
    certified RDP accountant).

    Parameters
    ----------
    trainer : LocalTrainer
        Local procedure (its noise off gives the non-private PriRFed-RSGD / RSVRG).
    n_sampled : int or None
        ``s``, agents per round (``None``: all agents, full participation).
    step_size : float or callable
        :math:`\alpha_t`, a constant or a function of the round ``t`` (0-based).
    aggregation : {"tangent", "karcher"}
    output_option : {1, 2}
    delta_hat : float
        The free :math:`\hat\delta` of Theorem 4.2 (1e-3 as in Table 1).
    privacy_delta : float, optional
        Delta at which the certified epsilon is read (default: the theorem's delta').
    """

    name = "PriRFed"

    def __init__(
        self,
        trainer: LocalTrainer,
        n_sampled: int | None = 1,
        step_size: float | Callable[[int], float] = 0.1,
        *,
        aggregation: str = "tangent",
        output_option: int = 1,
        delta_hat: float = 1e-3,
        privacy_delta: float | None = None,
    ):
        if not isinstance(trainer, LocalTrainer):
            raise TypeError(
                f"argument 'trainer' must be a LocalTrainer (DPRSGD, DPRSVRG), got {trainer!r}"
            )
        if n_sampled is not None and (
            not isinstance(n_sampled, (int, np.integer)) or isinstance(n_sampled, bool)
            or n_sampled < 1
        ):
            raise ValueError(f"argument 'n_sampled' must be an int >= 1 or None, got {n_sampled!r}")
        if not callable(step_size) and not float(step_size) > 0:
            raise ValueError(f"argument 'step_size' must be > 0 or callable, got {step_size!r}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(
                f"argument 'aggregation' must be one of {AGGREGATIONS}, got {aggregation!r}"
            )
        if output_option not in (1, 2):
            raise ValueError(f"argument 'output_option' must be 1 or 2, got {output_option!r}")
        if not 0 < delta_hat < 1:
            raise ValueError(f"argument 'delta_hat' must be in (0, 1), got {delta_hat}")
        self.trainer = trainer
        self.n_sampled = n_sampled
        self.step_size = step_size
        self.aggregation = aggregation
        self.output_option = output_option
        self.delta_hat = delta_hat
        self.privacy_delta = privacy_delta
        self.name = f"PriRFed-{trainer.name}"

    def _s(self, problem: Problem) -> int:
        s = problem.n_agents if self.n_sampled is None else int(self.n_sampled)
        if s > problem.n_agents:
            raise ValueError(
                f"argument 'n_sampled' ({s}) exceeds the problem's {problem.n_agents} agents"
            )
        return s

    def _alpha(self, t: int) -> float:
        return float(self.step_size(t)) if callable(self.step_size) else float(self.step_size)

    # ------------------------------------------------------------------ Algorithm API
    def init(self, problem: Problem, x0: np.ndarray, rng: np.random.Generator) -> PriRFedState:
        plan = self.trainer.plan(problem)
        plan.extra.update(counts=problem.counts.copy(), n_sampled=self._s(problem))
        return PriRFedState(
            x=np.array(x0, dtype=float), round=0, rng=rng, plan=plan, candidate=None,
            comm=InProcessCommunicator(problem.n_agents),
            ledger=PrivacyLedger(problem.n_agents, "rdp", "replace_one", description=self.name),
        )

    def step(self, problem: Problem, state: PriRFedState) -> PriRFedState:
        man = problem.manifold
        rng = state.rng
        agents = sample_agents(problem.n_agents, self._s(problem), rng)
        x_local = state.comm.broadcast(state.x, agents)
        with np.errstate(over="ignore", invalid="ignore"):
            x_new, info = self.trainer.train(
                problem, state.plan, x_local, agents, self._alpha(state.round), rng,
                option=self.output_option,
            )
        if not np.all(np.isfinite(x_new)):
            # e.g. a noisy random walk on the hyperboloid overflowing cosh: say so, never NaN
            raise FloatingPointError(
                f"{self.name}: a local iterate left the floating-point range in round "
                f"{state.round + 1} (the run diverged; reduce the step size or the noise)"
            )
        record_round(state.ledger, state.round, self.trainer, state.plan, problem.counts, agents)
        received = _gather(state.comm, problem.n_agents, agents, x_new)
        weights = data_size_weights(problem.counts[agents])
        if agents.size == 1:
            # (3.2) with one agent is Exp_x(Log_x(x_1)) = x_1 (spec pitfall 7); skip the round trip
            x_next = received[0]
        elif self.aggregation == "tangent":
            x_next = tangent_mean(man, state.x, received, weights)
        else:
            x_next = karcher_aggregate(man, state.x, received, weights)
        t = state.round + 1
        candidate = state.candidate
        if self.output_option == 2 and (candidate is None or rng.random() < 1.0 / t):
            candidate = x_next
        return PriRFedState(
            x=x_next, round=t, rng=rng, plan=state.plan, candidate=candidate, comm=state.comm,
            ledger=state.ledger, n_clipped=state.n_clipped + info["n_clipped"], agents=agents,
        )

    def output(self, problem: Problem, state: PriRFedState) -> np.ndarray:
        if self.output_option == 2 and state.candidate is not None:
            return state.candidate
        return state.x

    def metrics(self, problem: Problem, state: PriRFedState, with_reference: bool) -> dict:
        out = evaluate_point(problem, state.x, with_reference)
        out["bytes_sent"] = int(state.comm.stats.bytes)
        out["n_clipped"] = int(state.n_clipped)
        return out

    def privacy(self, state: PriRFedState) -> dict[str, Any]:
        """The privacy report after the rounds done (Theorem 4.2 and certified RDP)."""
        counts = state.plan.extra["counts"]
        return prirfed_privacy_report(
            self.trainer, state.plan, counts, state.plan.extra["n_sampled"], state.round,
            state.ledger, delta_hat=self.delta_hat, delta=self.privacy_delta,
        )

    def privacy_after(self, problem: Problem, rounds: int) -> dict[str, Any]:
        """The report for ``rounds`` rounds on ``problem`` before (or without) running.

        Without a run there is no ledger, so only the agent-sampling bound is certified.
        """
        return prirfed_privacy_report(
            self.trainer, self.trainer.plan(problem), problem.counts, self._s(problem), rounds,
            delta_hat=self.delta_hat, delta=self.privacy_delta,
        )

    def __repr__(self) -> str:
        return (
            f"PriRFed(trainer={self.trainer!r}, n_sampled={self.n_sampled}, "
            f"step_size={self.step_size!r}, aggregation={self.aggregation!r}, "
            f"output_option={self.output_option})"
        )


def _gather(comm: InProcessCommunicator, n_agents: int, agents: np.ndarray, values: np.ndarray):
    """Agents -> server through the communicator (counts one message per sampled agent)."""
    full = np.zeros((n_agents,) + values.shape[1:])
    full[agents] = values
    return comm.gather(full, agents)
