"""PriRFed (Algorithm 1 of Huang, Huang, Jawanpuria and Mishra): private federated learning on a
Riemannian manifold.

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rfed.algorithms._steps import injectivity_radius
from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.algorithms.federated.accounting import (
    LocalRunRelease,
    is_secure_rng,
    prirfed_privacy_report,
    record_round,
)
from rfed.algorithms.federated.aggregation import (
    AGGREGATIONS,
    data_size_weights,
    karcher_aggregate,
    tangent_mean,
)
from rfed.algorithms.federated.client_dp import ClientLevelDP
from rfed.algorithms.federated.local import LocalPlan, LocalTrainer
from rfed.algorithms.federated.sampling import sample_agents
from rfed.algorithms.federated.streams import AgentBlockGenerator
from rfed.algorithms.private import NoiseConfig, plan_noise
from rfed.networks.comm import InProcessCommunicator
from rfed.optim.linesearch import ArmijoLineSearch
from rfed.privacy.budget import (
    PrivacyBudget,
    check_delta_for_dataset,
    check_planned_round,
    check_public_sizes,
    default_delta,
    public_counts,
)
from rfed.privacy.ledger import PrivacyLedger
from rfed.problems.base import Problem
from rfed.randomness import public_generator

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
    rng : numpy.random.Generator or SecureRandom
        The generator given to ``run``; used only for the seed (drawn once at :meth:`PriRFed.init`)
        and, in secure mode, for every draw.
    client_ledger : PrivacyLedger or None
        With ``client_dp``: the client-level ledger (one event per round per charged client).
    client_noise_multiplier : float or None
        With ``client_dp``: the resolved ``z`` of the server's noise.
    line_search_cost : array of shape ``(n_agents,)`` or None
        With ``line_search``: each agent's cost at the start of its last line search (NaN
        before its first), the memory of the search's first trial.
    seed : int or None
        The run's seed in ``[0, 2**63)``: agent selection comes from the public stream
        ``public_generator(seed, round, 'agent-sampling')``, each agent's minibatches and noise
        from its keyed stream (:class:`AgentBlockGenerator`). ``None`` in secure mode (OS
        randomness, not replayable by design).
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
        Per-agent record of the noisy steps performed.
    delta : float
        The delta of the certified epsilon.
    calibration : dict
        The budget's calibrations (``{agent: Calibration}``), empty without a budget.
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
    delta: float = 1e-5
    calibration: dict = field(default_factory=dict)
    seed: int | None = None
    client_ledger: PrivacyLedger | None = None
    client_noise_multiplier: float | None = None
    line_search_cost: np.ndarray | None = None


class PriRFed(Algorithm):
    r"""PriRFed: sample agents, train locally with privacy, aggregate on the manifold.

    Every round (PriRFed Alg. 1):

    * line 2: sample ``s`` agents uniformly without replacement;
    * line 3: broadcast :math:`x^{(t)}` to them;
    * lines 4-8: local training of all selected agents at once (``trainer``: :class:`DPRSGD`
      or :class:`DPRSVRG`), each from :math:`x^{(t)}`, batched in one array;
    * line 10: aggregate by the tangent mean (3.2),
      :math:`x^{(t+1)} = \mathrm{Exp}_{x^{(t)}}(\sum_i w_i \mathrm{Log}_{x^{(t)}}(\tilde x_i))`,
      :math:`w_i = N_i / \sum_{l \in S_t} N_l` (under add/remove the public sizes: the true
      ones are private), or by the exact Karcher mean (3.1);
    * lines 12-13: output option 1 (:math:`x^{(T)}`) or 2 (uniform over
      :math:`x^{(1)}, \dots, x^{(T)}`); the local trainers follow the same option.

    A round is four separately callable pieces, so that an engine can split it across processes
    (:mod:`rfed.engines.flower`): :meth:`select` (public stream keyed by ``(seed, round)``),
    :meth:`train_block` (any block of the selected agents, per-agent keyed streams),
    :meth:`aggregate` and :meth:`finish_round` (ledger, output option 2). The same seed gives
    the same run whatever the split. With ``client_dp``, :meth:`aggregate` is the client-level
    release of :class:`~rfed.algorithms.federated.client_dp.ClientLevelDP`.

    The history records :math:`f(x^{(t)})` at every evaluated round whatever the option, plus
    the bytes exchanged and the clipped-gradient count (metrics outside the privacy guarantee:
    :data:`rfed.privacy.OUTSIDE_THE_GUARANTEE`). The result's
    ``privacy`` is the report of
    :func:`~rfed.algorithms.federated.accounting.prirfed_privacy_report` (the certified
    epsilon of the worst-off agent, and the paper's Theorem 4.2 beside it when the trainer uses
    the paper's calibration).

    **Budget first.** ``PriRFed(trainer, budget=PrivacyBudget(epsilon, delta), n_rounds=T)``
    calibrates the trainer's noise multiplier at :meth:`init` over the whole planned run (every
    agent charged every round, the worst case of the selection), so that the finished run
    certifies at most ``epsilon`` (and, with full participation, within 1% of it). Running more
    than ``T`` rounds raises ``RuntimeError``.

    Examples
    --------
    >>> from rfed.privacy import PrivacyBudget
    >>> alg = PriRFed(DPRSGD(steps=1, batch_size=0.5, clip=1.0), n_sampled=None,
    ...               step_size=0.1, budget=PrivacyBudget(1.0, 1e-5), n_rounds=50)
    >>> res = alg.run(problem, 50, rng=0)                      # doctest: +SKIP
    >>> res.privacy["epsilon_certified"] <= 1.0                # doctest: +SKIP
    True

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
    budget : PrivacyBudget, optional
        The whole run's target (epsilon, delta, neighbouring relation, accountant); needs
        ``n_rounds`` and public clip levels on the trainer. Without it the trainer's own noise
        setting is used (``noise_multiplier``, ``sigma`` or the paper's calibration) and its
        certified epsilon is reported the same way.
    n_rounds : int, optional
        ``T``, the planned number of rounds (required with a budget).
    delta_hat : float
        The free :math:`\hat\delta` of Theorem 4.2 (1e-3 as in Table 1).
    privacy_delta : float, optional
        Delta at which the certified epsilon is read without a budget (default
        ``min(1e-5, 1/(10 N))`` for the smallest local dataset ``N``); must be below ``1/N``.
    neighboring : {'replace_one', 'add_remove_one'}, optional
        Without a budget (default ``'replace_one'``; Poisson minibatches need
        ``'add_remove_one'``).
    public_sizes : int or tuple of int, optional
        Without a budget under ``'add_remove_one'`` (required there): the PUBLIC nominal local
        dataset sizes used in place of the private ``N_i`` (normalisers, sampling rates,
        aggregation weights, delta); with a budget they are the budget's ``public_sizes``.
    client_dp : ClientLevelDP, optional
        Server-side client-level DP on the manifold (its budget also needs ``n_rounds``);
        reported under ``privacy['client_level']``.
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
        budget: PrivacyBudget | None = None,
        n_rounds: int | None = None,
        delta_hat: float = 1e-3,
        privacy_delta: float | None = None,
        neighboring: str | None = None,
        public_sizes: int | tuple[int, ...] | None = None,
        client_dp: ClientLevelDP | None = None,
        line_search: ArmijoLineSearch | None = None,
        epsilon: None = None,
    ):
        if epsilon is not None:
            raise TypeError(
                "argument 'epsilon' is not a PriRFed argument: pass budget=PrivacyBudget(epsilon, "
                "delta) with n_rounds=T for a certified budget, or paper_epsilon= on the trainer "
                "for the paper's calibration (not a guarantee)"
            )
        # the public contract's configuration: budget and planned rounds validated once, here
        # (the trainer carries the research and paper noise settings)
        self.privacy_config = NoiseConfig(budget=budget, n_rounds=n_rounds)
        if budget is not None:
            if trainer.private:
                raise ValueError(
                    "give either a budget or the trainer's own noise (noise_multiplier, sigma, "
                    "paper_epsilon), not both: the budget sets the noise"
                )
            if privacy_delta is not None:
                raise ValueError("with a budget, give delta in the budget (PrivacyBudget(epsilon, "
                                 "delta)), not 'privacy_delta'")
            if neighboring is not None and neighboring != budget.neighboring:
                raise ValueError("with a budget, the neighbouring relation is the budget's")
            if public_sizes is not None:
                raise ValueError("with a budget, declare the public sizes in the budget "
                                 "(PrivacyBudget(..., public_sizes=N)), not 'public_sizes'")
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
        if client_dp is not None:
            if not isinstance(client_dp, ClientLevelDP):
                raise TypeError(f"argument 'client_dp' must be a ClientLevelDP or None, got "
                                f"{client_dp!r}")
            if aggregation != "tangent":
                raise ValueError("client-level DP releases one noisy tangent step (the clipped "
                                 "mean of Log_x(x_i)); use aggregation='tangent'")
            if client_dp.budget is not None and n_rounds is None:
                raise ValueError("argument 'n_rounds' is required with a client-level budget")
        if line_search is not None:
            _check_line_search(line_search, trainer, budget, client_dp)
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
        self.budget = budget
        self.n_rounds = n_rounds
        self.client_dp = client_dp
        self.line_search = line_search
        self.neighboring = (budget.neighboring if budget is not None
                            else neighboring or "replace_one")
        self.public_sizes = check_public_sizes(public_sizes)
        if budget is None and self.public_sizes is not None \
                and self.neighboring != "add_remove_one":
            raise ValueError("argument 'public_sizes' is for neighboring='add_remove_one' (under "
                             "replace-one the true sizes are public and used)")
        self.method = budget.method if budget is not None else "auto"
        # calibrations are deterministic in (problem, budget): computed once per problem
        self._plans: dict = {}
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
        self._warn_if_steps_wrap(problem)
        # one draw fixes the run's keyed streams (none in secure mode: OS randomness throughout)
        seed = None if is_secure_rng(rng) else int(rng.integers(0, 2**63))
        plan, delta, cals = self._plan(problem, rng, seed)
        client_ledger = client_z = None
        if self.client_dp is not None:
            client_z = self.client_dp.resolve(problem.n_agents, self._s(problem), self.n_rounds,
                                              secure=is_secure_rng(rng))
            client_ledger = PrivacyLedger(problem.n_agents, "rdp", "replace_one",
                                          description=f"{self.name} client-level")
        return PriRFedState(
            x=np.array(x0, dtype=float), round=0, rng=rng, plan=plan, candidate=None,
            comm=InProcessCommunicator(problem.n_agents),
            ledger=PrivacyLedger(problem.n_agents, "rdp", self.neighboring,
                                 description=self.name),
            delta=delta, calibration=cals, seed=seed, client_ledger=client_ledger,
            client_noise_multiplier=client_z,
        )

    def _warn_if_steps_wrap(self, problem: Problem) -> None:
        """Warn when one clipped local step, ``step_size * clip``, exceeds the injectivity radius.

        Beyond it the exponential map wraps around the manifold (on the unit sphere a step of
        ``2 pi k + r`` lands where one of ``r`` does), so the iterate no longer follows the
        gradient and no cost can flag it as diverged. A warning, not an error: the privacy
        guarantee does not depend on the step (DO-ADP, whose step enters its message, refuses).
        """
        clip = getattr(self.trainer, "clip", None)    # None: no clipping (non-private runs)
        if callable(self.step_size) or clip is None or not math.isfinite(float(clip)):
            return
        clip = float(clip)
        radius = injectivity_radius(problem.manifold)
        if self.step_size * clip > radius:
            warnings.warn(
                f"argument 'step_size' ({self.step_size:g}) times the trainer's 'clip' ({clip:g}) "
                f"exceeds the injectivity radius {radius:.4g} of {problem.manifold}: one clipped "
                "local step wraps around the manifold and no longer follows the gradient; "
                "reduce 'step_size'", UserWarning, stacklevel=3)

    def _plan(self, problem: Problem, rng=None, seed: int | None = None):
        """Resolved plan (noise calibrated to the budget), delta and calibrations (cached)."""
        key = (id(problem), problem.counts.tobytes(), is_secure_rng(rng), seed)
        if key not in self._plans:
            # one entry, holding the problem so that its id cannot be reused meanwhile
            self._plans = {key: (problem, self._make_plan(problem, rng, seed))}
        return self._plans[key][1]

    def planned_participation(self, problem: Problem, seed: int | None) -> np.ndarray | int:
        """Rounds each agent will train in over the planned run, shape ``(n_agents,)``.

        The selection comes from the public stream keyed by ``(seed, round)``, so it can be
        replayed before the run: calibrating for the most-selected agent spends the budget
        (rather than assuming every agent trains every round). Without a seed (secure mode: the
        selection is OS-random) or with full participation, every agent trains every round.

        Parameters
        ----------
        problem : Problem
            The federated problem.
        seed : int or None
            The run's seed (``None``: secure mode).

        Returns
        -------
        int or int array, shape ``(n_agents,)``
            One count for every agent, or each agent's own.
        """
        if self.n_rounds is None:
            raise ValueError("argument 'n_rounds' (the planned number of rounds) is required "
                             "to plan the agents' participation")
        s = self._s(problem)
        if seed is None or s == problem.n_agents:
            return int(self.n_rounds)
        counts = np.zeros(problem.n_agents, dtype=int)
        for t in range(int(self.n_rounds)):
            counts[sample_agents(problem.n_agents, s,
                                 public_generator(seed, t, "agent-sampling"))] += 1
        return counts

    def _make_plan(self, problem: Problem, rng=None, seed: int | None = None):
        public_sizes = self.budget.public_sizes if self.budget is not None else self.public_sizes
        # under add/remove the declared public sizes, never the private counts
        sizes = public_counts(problem.counts, self.neighboring, public_sizes)
        plan = self.trainer.plan(problem, self.neighboring, rng, public_sizes)
        plan.extra.update(
            n_sampled=self._s(problem),
            manifold_dim=int(problem.manifold.dim),
            coupled_records=bool(getattr(problem, "coupled_records", False)),
            problem_assumptions=list(getattr(problem, "privacy_assumptions", ())),
        )
        # the budget's one path to the noise draws: plan_noise calibrates each agent's
        # multiplier for the replayed public selection, the local plan's sigma draws it
        release = LocalRunRelease(plan)
        noise = plan_noise(self.privacy_config, release, local_sizes=sizes,
                           dim=int(problem.manifold.dim), rng=rng,
                           active_rounds=lambda: self.planned_participation(problem, seed),
                           algorithm=self.name)
        if noise is not None:
            assert noise.noise_multipliers is not None  # a LocalRunRelease's levels, per agent
            return plan.with_noise_multiplier(noise.noise_multipliers), noise.delta, \
                release.calibrations
        # the trainer's own noise (research or the paper's), read at this delta
        n_min = int(sizes.min())
        if self.privacy_delta is not None:
            delta = check_delta_for_dataset(self.privacy_delta, n_min, "privacy_delta")
        else:
            delta = default_delta(n_min)
        return plan, delta, {}

    # ------------------------------------------------------------------ the round's pieces
    def select(self, problem: Problem, state: PriRFedState, round: int | None = None
               ) -> np.ndarray:
        """Alg. 1 line 2: the agents of round ``round`` (default ``state.round``), sorted.

        Drawn from the public stream ``public_generator(seed, round, 'agent-sampling')``, so
        the server and every client compute the same set from ``(seed, round)``; secure mode
        draws from the OS.

        Parameters
        ----------
        problem : Problem
            The federated problem.
        state : PriRFedState
            The run's state.
        round : int, optional
            The round (default ``state.round``).

        Returns
        -------
        int array, shape ``(s,)``
        """
        t = state.round if round is None else int(round)
        rng = state.rng if state.seed is None else public_generator(state.seed, t,
                                                                    "agent-sampling")
        return sample_agents(problem.n_agents, self._s(problem), rng)

    def train_block(self, problem: Problem, state: PriRFedState, agents: np.ndarray,
                    round: int | None = None) -> tuple[np.ndarray, dict]:
        r"""Alg. 1 lines 3-8 for one block of the selected agents, batched.

        Each agent starts from ``state.x`` and draws its minibatches and noise from its own
        keyed stream ``(seed, agent, round, 'local#call')``: the rows returned for an agent do
        not depend on the other agents of the block, so any split of the selected agents into
        blocks (processes, Flower clients) gives the same local points.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global ids, a subset of :meth:`select`'s agents.
        round : int, optional
            Default ``state.round``.

        Returns
        -------
        x_local : array, shape ``(A, *point_shape)``
            The agents' releases :math:`\tilde x_i` (finite, else ``FloatingPointError``).
        info : dict
            ``n_clipped`` and ``grad_evals`` of the block.
        """
        t = state.round if round is None else int(round)
        return self.train_runs(problem, [state], [np.asarray(agents)], t)

    def train_runs(self, problem: Problem, states: list[PriRFedState],
                   blocks: list[np.ndarray], round: int) -> tuple[np.ndarray, dict]:
        r""":meth:`train_block` for several independent runs of this algorithm at once.

        The blocks are stacked on the agent axis (run ``r``'s rows after those of runs
        ``0..r-1``); each row starts from its run's ``x``, takes its run's noise std and draws
        from its run's keyed streams (:meth:`AgentBlockGenerator.stacked`), and the trainers
        compute every row with row-wise operations, so each run gets bit for bit what it gets
        alone. One run (``len(states) == 1``) is :meth:`train_block`; several need seeded
        runs (secure mode draws from the OS, run by run).

        Parameters
        ----------
        states : list of PriRFedState, length ``R``
            The runs, all at round ``round`` on ``problem``.
        blocks : list of int arrays, length ``R``
            Each run's agents, shape ``(A_r,)``.
        round : int

        Returns
        -------
        x_local : array, shape ``(A_0 + ... + A_{R-1}, *point_shape)``
            Finite, else ``FloatingPointError`` (the whole call: a driver redoes the round run
            by run to find which run diverged).
        info : dict
            ``n_clipped`` (total), ``n_clipped_rows`` (per row) and ``grad_evals``.
        """
        t = int(round)
        if len(states) == 1:
            st = states[0]
            rng = (st.rng if st.seed is None
                   else AgentBlockGenerator(st.seed, blocks[0], t, "local"))
        else:
            seeds = [st.seed for st in states if st.seed is not None]
            if len(seeds) != len(states):
                raise ValueError("several runs train together only with seeded runs (secure "
                                 "mode draws from the operating system: run them one by one)")
            rng = AgentBlockGenerator.stacked(seeds, blocks, t, "local")
        shape = np.shape(states[0].x)
        # C-ordered rows (a concatenation of broadcasts would come out column-ordered, and
        # einsum sums in another order over another layout)
        x_start = (np.broadcast_to(states[0].x, (blocks[0].size,) + shape) if len(states) == 1
                   else np.repeat(np.stack([st.x for st in states]),
                                  [b.size for b in blocks], axis=0))
        plan = states[0].plan
        sigma = np.concatenate([st.plan.sigma[b] for st, b in zip(states, blocks, strict=True)])
        snapshot_sigma = None
        if plan.snapshot_sigma is not None:
            # runs trained together share the trainer: all have a snapshot release or none
            snapshot_sigma = np.concatenate(
                [np.asarray(st.plan.snapshot_sigma)[b] for st, b in zip(states, blocks,
                                                                         strict=True)])
        agents = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        if self.line_search is not None:
            previous = np.concatenate([np.full(b.size, np.nan) if st.line_search_cost is None
                                       else st.line_search_cost[b]
                                       for st, b in zip(states, blocks, strict=True)])
            return self._line_search_runs(problem, x_start, agents, previous, t)
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                x_new, info = self.trainer.train(
                    problem, plan, x_start, agents, self._alpha(t), rng,
                    option=self.output_option, sigma=sigma, snapshot_sigma=snapshot_sigma,
                )
            except np.linalg.LinAlgError as exc:
                # e.g. an SPD iterate that a huge noisy step pushed out of numerical reach
                raise FloatingPointError(
                    f"{self.name}: a local iterate left the numerical range in round "
                    f"{t + 1} ({exc}; the run diverged; reduce the step size or the noise)"
                ) from exc
        if not np.all(np.isfinite(x_new)):
            # e.g. a noisy random walk on the hyperboloid overflowing cosh: say so, never NaN
            raise FloatingPointError(
                f"{self.name}: a local iterate left the floating-point range in round "
                f"{t + 1} (the run diverged; reduce the step size or the noise)"
            )
        return x_new, info

    def aggregate(self, problem: Problem, state: PriRFedState, agents: np.ndarray,
                  received: np.ndarray) -> np.ndarray:
        r"""Alg. 1 line 10: tangent (3.2) or Karcher (3.1) mean weighted by ``N_i``.

        ``received[a]`` is agent ``agents[a]``'s point; post-processing (no privacy cost).
        With ``client_dp``: the client-level release instead
        (:meth:`ClientLevelDP.release`: clipped mean of :math:`\mathrm{Log}_x x_i` with equal
        weights, tangent Gaussian noise from the stream ``(seed, round, 'client-dp-noise')``,
        mapped back by :math:`\mathrm{Exp}_x`).

        Parameters
        ----------
        problem : Problem
            The federated problem.
        state : PriRFedState
            The run's state.
        agents : int array, shape ``(A,)``
            The selected agents.
        received : array, shape ``(A, *point_shape)``
            Their local points.

        Returns
        -------
        array, shape ``point_shape``
            The next global point.
        """
        agents = np.asarray(agents)
        x = state.x
        if self.client_dp is not None:
            rng = state.rng if state.seed is None else public_generator(
                state.seed, state.round, "client-dp-noise")
            assert state.client_noise_multiplier is not None  # init sets it with client_dp
            return self.client_dp.release(problem.manifold, x, received, self._s(problem),
                                          state.client_noise_multiplier, rng)
        if agents.size == 1:
            # (3.2) with one agent is Exp_x(Log_x(x_1)) = x_1 (docs/papers/prirfed.md,
            # prirfed-aggregation); skip the round trip
            return np.array(received[0])
        # the plan's sizes: the true N_i under replace-one, the public ones under add/remove
        weights = data_size_weights(np.asarray(state.plan.counts)[agents])
        if self.aggregation == "tangent":
            return tangent_mean(problem.manifold, x, received, weights)
        return karcher_aggregate(problem.manifold, x, received, weights)

    def finish_round(self, state: PriRFedState, agents: np.ndarray, x_next: np.ndarray,
                     n_clipped: int) -> PriRFedState:
        """Ledger (every selected agent charged its noisy steps), output option 2, next state.

        Parameters
        ----------
        state : PriRFedState
            The run's state.
        agents : int array, shape ``(A,)``
            The round's agents.
        x_next : array, shape ``point_shape``
            The aggregated point.
        n_clipped : int
            Per-sample gradients clipped in the round.

        Returns
        -------
        PriRFedState
            The state after the round.
        """
        record_round(state.ledger, state.round, state.plan, agents)
        if self.client_dp is not None:
            # init sets the client-level ledger and multiplier whenever client_dp is given
            assert state.client_ledger is not None and state.client_noise_multiplier is not None
            self.client_dp.record(state.client_ledger, state.round, agents,
                                  state.plan.extra["n_sampled"], state.client_noise_multiplier)
        t = state.round + 1
        candidate = state.candidate
        if self.output_option == 2:
            # reservoir sampling over x^(1..T) from the public stream of round t
            rng = state.rng if state.seed is None else public_generator(state.seed, t,
                                                                        "output-candidate")
            if candidate is None or rng.random() < 1.0 / t:
                candidate = x_next
        return replace(state, x=x_next, round=t, candidate=candidate,
                       n_clipped=state.n_clipped + int(n_clipped), agents=agents)

    def check_round(self, state: PriRFedState) -> None:
        """Refuse a round past the planned ``n_rounds`` of a budget (record or client level).

        Parameters
        ----------
        state : PriRFedState
            The run's state.

        Raises
        ------
        RuntimeError
            The next round is past the planned run of a budget.
        """
        budget = self.budget
        if budget is None and self.client_dp is not None:
            budget = self.client_dp.budget
        if budget is not None:
            check_planned_round(self.name, state.round, self.n_rounds, budget.epsilon)

    def step(self, problem: Problem, state: PriRFedState) -> PriRFedState:
        """One round: :meth:`select`, :meth:`train_block` (everyone in one block),
        :meth:`aggregate`, :meth:`finish_round` (:meth:`step_runs` with one run).

        Parameters
        ----------
        problem : Problem
            The federated problem.
        state : PriRFedState
            The run's state.

        Returns
        -------
        PriRFedState
        """
        return self.step_runs(problem, [state])[0]

    def step_runs(self, problem: Problem, states: list[PriRFedState]) -> list[PriRFedState]:
        """One round of each of several independent runs (all at the same round), trained in
        one batched call (:meth:`train_runs`); each run's new state is bit for bit what
        :meth:`step` gives it alone.

        Raises ``FloatingPointError`` when any run's local training diverges, before any
        state changes (the byte counts included): redo the round run by run to find which.

        Parameters
        ----------
        problem : Problem
            The federated problem.
        states : list of PriRFedState
            The runs' states, all at the same round.

        Returns
        -------
        list of PriRFedState
        """
        for st in states:
            self.check_round(st)
        blocks = [self.select(problem, st) for st in states]
        x_new, info = self.train_runs(problem, states, blocks, states[0].round)
        out = []
        start = 0
        for st, agents in zip(states, blocks, strict=True):
            rows = slice(start, start + agents.size)
            start += agents.size
            # counted in the byte statistics; train_runs starts every agent from st.x itself
            st.comm.broadcast(st.x, agents)
            received = _gather(st.comm, problem.n_agents, agents, x_new[rows])
            x_next = self.aggregate(problem, st, agents, received)
            new = self.finish_round(st, agents, x_next, int(info["n_clipped_rows"][rows].sum()))
            if "line_search_cost" in info:
                memory = (np.full(problem.n_agents, np.nan) if st.line_search_cost is None
                          else st.line_search_cost.copy())
                memory[agents] = info["line_search_cost"][rows]
                new = replace(new, line_search_cost=memory)
            out.append(new)
        return out

    def _line_search_runs(self, problem: Problem, x_start: np.ndarray, agents: np.ndarray,
                          previous: np.ndarray, round: int) -> tuple[np.ndarray, dict]:
        """The local runs of a non-private round with ``line_search``: each agent's ``steps``
        steepest-descent steps on its full local cost, the step of each chosen by Armijo
        backtracking (:class:`~rfed.optim.ArmijoLineSearch`), every agent on its own.

        Parameters
        ----------
        problem : Problem
        x_start : array, shape ``(A, *point_shape)``
        agents : int array, shape ``(A,)``
        previous : array, shape ``(A,)``
            Each agent's cost at the start of its previous search (NaN: none).
        round : int

        Returns
        -------
        x_local : array, shape ``(A, *point_shape)``
        info : dict
            ``n_clipped`` (0), ``n_clipped_rows``, ``grad_evals`` and ``line_search_cost``
            (each agent's cost at the start of its last search).
        """
        assert self.line_search is not None
        manifold = problem.manifold
        if not problem.is_shard and np.array_equal(agents, np.arange(problem.n_agents)):
            data, mask = problem.data, problem.mask   # every agent: the arrays, not a copy
        else:
            data, mask = problem.agent_data(agents)
        counts = problem.counts[agents].astype(float)
        shape = (-1,) + (1,) * len(manifold.point_shape)

        def local_cost(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
            batch = data if rows.size == agents.size else {k: v[rows] for k, v in data.items()}
            losses = problem.sample_loss(points, batch)
            if not mask.all():
                losses = np.where(mask[rows], losses, 0.0)
            return losses.sum(-1) / counts[rows]

        everyone = np.arange(agents.size)
        x = np.array(x_start, dtype=float)
        cost = local_cost(x, everyone)
        for _ in range(self.trainer.steps):
            # the full local gradient (a problem's structured sum where it has one)
            grad, _ = problem.clipped_grad_sum(x, data, None, None if mask.all() else mask)
            grad /= counts.reshape(shape)
            slope = -np.asarray(manifold.inner(x, grad, grad), dtype=float).reshape(cost.shape)
            step = self.line_search.search(local_cost, manifold, x, -grad, cost, slope,
                                           previous)
            previous, x, cost = cost, step.x, step.cost
        if not np.all(np.isfinite(x)):
            raise FloatingPointError(f"{self.name}: a local iterate left the floating-point "
                                     f"range in round {round + 1} (the run diverged)")
        return x, {"n_clipped": 0, "n_clipped_rows": np.zeros(agents.size, dtype=int),
                   "grad_evals": int(self.trainer.steps * counts.sum()),
                   "line_search_cost": previous}

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
        """The privacy report after the rounds done (certified; the paper's value beside it).

        Parameters
        ----------
        state : PriRFedState
            The state after the rounds done (its ledger charges the agents each round selected).

        Returns
        -------
        dict
            The privacy report: the certified epsilon and delta of the ledger, and the paper's
            value beside it.
        """
        secure = is_secure_rng(state.rng)
        report = prirfed_privacy_report(
            self.trainer, state.plan, state.plan.extra["n_sampled"], state.round, state.delta,
            state.ledger, budget=self.budget, planned_rounds=self.n_rounds,
            # secure (discrete Gaussian) releases are certified through RDP only
            method="rdp" if secure else self.method,
            delta_hat=self.delta_hat, secure=secure,
        )
        if self.client_dp is not None:
            n_sampled = state.plan.extra["n_sampled"]
            sensitivity = None
            if secure and "manifold_dim" in state.plan.extra:
                sensitivity = self.client_dp.release_sensitivity(
                    state.plan.extra["manifold_dim"], n_sampled, state.rng)
            assert state.client_ledger is not None and state.client_noise_multiplier is not None
            report["client_level"] = self.client_dp.report(
                state.client_ledger, state.round, state.client_noise_multiplier, n_sampled,
                secure=secure, sensitivity=sensitivity,
                planned_rounds=None if self.client_dp.budget is None else self.n_rounds)
        return report

    def privacy_after(self, problem: Problem, rounds: int) -> dict[str, Any]:
        """The report for ``rounds`` rounds on ``problem`` before (or without) running.

        Without a run there is no ledger: every agent is charged every round (the worst case of
        the selection), which is what the finished run certifies with full participation.

        Parameters
        ----------
        problem : Problem
            The federated problem the rounds would run on (its agents and their public sizes).
        rounds : int
            The number of rounds.

        Returns
        -------
        dict
            The privacy report of :meth:`privacy` for that many rounds.
        """
        plan, delta, _ = self._plan(problem)
        return prirfed_privacy_report(
            self.trainer, plan, plan.extra["n_sampled"], rounds, delta, budget=self.budget,
            planned_rounds=self.n_rounds, method=self.method, delta_hat=self.delta_hat,
        )

    def __repr__(self) -> str:
        return (
            f"PriRFed(trainer={self.trainer!r}, n_sampled={self.n_sampled}, "
            f"step_size={self.step_size!r}, aggregation={self.aggregation!r}, "
            f"output_option={self.output_option}, budget={self.budget!r}, "
            f"n_rounds={self.n_rounds})"
        )


def _gather(comm: InProcessCommunicator, n_agents: int, agents: np.ndarray, values: np.ndarray):
    """Agents -> server through the communicator (counts one message per sampled agent)."""
    full = np.zeros((n_agents,) + values.shape[1:])
    full[agents] = values
    return comm.gather(full, agents)


#: Why a private run refuses ``line_search``.
LINE_SEARCH_IS_A_RELEASE = (
    "an Armijo line search chooses each step from cost values of the agent's data, so the step "
    "size (and every point it leads to) is a data-dependent release that no noise covers and "
    "no sensitivity bounds; use it for non-private runs only (no budget=, no trainer noise, "
    "no client_dp), or keep a fixed step_size"
)


def _check_line_search(line_search: Any, trainer: LocalTrainer, budget: Any,
                       client_dp: Any) -> None:
    """Refuse ``line_search`` on a private run or a trainer it does not apply to."""
    if not isinstance(line_search, ArmijoLineSearch):
        raise TypeError(f"argument 'line_search' must be an ArmijoLineSearch or None, got "
                        f"{line_search!r}")
    if budget is not None or trainer.private or client_dp is not None:
        raise ValueError(f"argument 'line_search' is refused on a private run: "
                         f"{LINE_SEARCH_IS_A_RELEASE}")
    if trainer.name != "DP-RSGD" or getattr(trainer, "batch_size", None) is not None \
            or getattr(trainer, "clip", None) is not None:
        raise ValueError("argument 'line_search' needs the full, unclipped local gradient: "
                         "a DPRSGD(batch_size=None, clip=None) trainer (the Armijo condition "
                         "is a statement about the local cost along its gradient)")
