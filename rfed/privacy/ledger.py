"""A privacy ledger: what each agent spent, in which round, and the (epsilon, delta) it adds up to.

An algorithm calls :meth:`PrivacyLedger.record` as it runs (once per round or per step, for all
agents at once); the ledger aggregates identical events into counts, so recording is cheap, and
answers ``epsilon(delta)`` per agent and overall at any time, with the certified accountant of
:mod:`rfed.privacy.accountants`. An algorithm that charges the same event every round builds it
once (:meth:`rfed.privacy.accountants.EventSpec.make`) and charges it with
:meth:`PrivacyLedger.record_event` and a mask of agents: the same ledger state without
re-validating the parameters each round.

* **Per agent**: the events that touched the agent's own records, composed adaptively.
* **Overall**: the maximum over agents. Agents hold disjoint data and every recorded event is
  attributed to the agent whose records it reads, so a change of one record changes only that
  agent's events (parallel composition).
* **Subsampling of agents** (PriRFed's server sampling, DO-ADP's activation, DP-DDA's node
  sampling) is recorded as it happened: an agent is charged for the rounds it took part in and
  nothing else. This treats the selection as public and claims no amplification from it (the
  papers' closed forms do claim it and can be stored beside the certified value with
  :meth:`PrivacyLedger.add_paper_bound`).

Example
-------
>>> import numpy as np
>>> led = PrivacyLedger(n_agents=4, method="rdp", neighboring="replace_one")
>>> for t in range(10):
...     led.record(t, agents=np.array([t % 4]), sigma=2.0, sensitivity=0.1,
...                sampling="without_replacement", dataset_size=70, sample_size=35, count=5)
>>> print(led.report(1e-5))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from rfed.privacy._checks import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonneg,
    check_positive,
    check_real,
)
from rfed.privacy.accountants import (
    DEFAULT_PLD_DISCRETIZATION,
    METHODS,
    NEIGHBORING,
    EventSpec,
    assumptions_text,
    compose_delta,
    compose_epsilon,
)

__all__ = ["PrivacyLedger", "OUTSIDE_THE_GUARANTEE"]

#: The assumption every privacy report of rfed states about what a run logs besides its
#: releases (the report dicts' ``assumptions``, the ledger's text and dict, ``rfed run``).
OUTSIDE_THE_GUARANTEE = (
    "outside the guarantee: the metrics a run logs for evaluation (cost, gradient norm, excess "
    "risk, distance to the reference, clipped-gradient counts, allocations and imbalance, "
    "bytes sent, ...) are computed exactly from all agents' private data; only the noisy "
    "releases recorded in the ledger are covered, so keep those metrics inside a trusted "
    "environment (or do not log them)"
)


def _same_agents(a: str | np.ndarray, b: str | np.ndarray) -> bool:
    """Equal agent sets of two history entries (``'all'`` or sorted id arrays)."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    # equal shapes: an element-wise test is np.array_equal without its conversions
    return a.shape == b.shape and bool((a == b).all())


def _agents_out(agents: str | np.ndarray) -> str | list[int]:
    """A history entry's agents as shown and saved: ``'all'`` or a list of ids."""
    return agents if isinstance(agents, str) else agents.tolist()


def _agents_in(agents: str | list[int]) -> str | np.ndarray:
    return agents if isinstance(agents, str) else np.asarray(agents, dtype=np.int64)


def group_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of per-agent event parameters and each agent's row.

    Parameters
    ----------
    cols : list of float arrays, each shape ``(n,)``
        Noise multiplier, sampling rate, dataset size and sample size per agent (``-1``:
        no size).

    Returns
    -------
    combos : ndarray, shape ``(k, len(cols))``
        The distinct rows in lexicographic order (the order :meth:`PrivacyLedger.record`
        charges them in).
    inverse : int ndarray, shape ``(n,)``
        Each agent's row of ``combos``.
    """
    n = cols[0].size
    if n == 0 or all(bool(np.all(c == c[0])) for c in cols):
        # common case: one event for every agent (scalars, or per-agent arrays that are all
        # equal), no sort needed
        combos = np.array([[c[0] for c in cols]]) if n else np.zeros((0, len(cols)))
        return combos, np.zeros(n, dtype=int)
    combos, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    return combos, np.asarray(inverse).reshape(-1)


def row_event(mechanism: str, sampling: str, row) -> EventSpec:
    """The event of one row of :func:`group_rows` (``EventSpec.make``, which validates).

    Parameters
    ----------
    mechanism : {'gaussian', 'laplace'}
        The mechanism of the events.
    sampling : {'none', 'poisson', 'without_replacement'}
        How each release samples the records.
    row : array, shape ``(4,)``
        Noise multiplier, sampling rate, dataset size and sample size (``-1``: unused).

    Returns
    -------
    EventSpec
        The validated event.
    """
    nm, rate, n, m = row
    return EventSpec.make(mechanism, nm, sampling, rate, None if n < 0 else int(n),
                          None if m < 0 else int(m))


class PrivacyLedger:
    """Record privacy events per agent and round; report (epsilon, delta) per agent and overall.

    Parameters
    ----------
    n_agents : int
        Agents are ids ``0 .. n_agents-1``.
    method : {'rdp', 'pld'}
        Certified accountant (dp-accounting).
    neighboring : {'replace_one', 'add_remove_one'}
        The relation the sensitivities and noise multipliers refer to. ``'replace_one'`` (the
        default) is the papers' adjacency and the one sampling without replacement needs.
    pld_discretization : float
        PLD value discretization interval.
    keep_history : bool
        Keep a run-length encoded history ``(first_round, last_round, event, agents, count)``;
        consecutive identical records extend one entry.
    description : str
        Free text printed in the report (e.g. the algorithm and its configuration).
    """

    def __init__(
        self,
        n_agents: int,
        method: str = "rdp",
        neighboring: str = "replace_one",
        *,
        pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
        keep_history: bool = True,
        description: str = "",
    ):
        self.n_agents = check_int(n_agents, "n_agents")
        self.method = check_choice(method, "method", METHODS)
        self.neighboring = check_choice(neighboring, "neighboring", NEIGHBORING)
        self.pld_discretization = check_positive(pld_discretization, "pld_discretization")
        self.keep_history = bool(keep_history)
        self.description = str(description)
        self._specs: list[EventSpec] = []
        self._index: dict[EventSpec, int] = {}
        self._counts = np.zeros((0, self.n_agents), dtype=np.int64)
        self._rounds = np.zeros(self.n_agents, dtype=np.int64)
        self._last_round = np.full(self.n_agents, np.iinfo(np.int64).min, dtype=np.int64)
        self._first_round: int | None = None
        self._max_round: int | None = None
        self._history: list[dict[str, Any]] = []
        self._paper: list[dict[str, Any]] = []
        self._cache: dict[tuple, float] = {}

    # ------------------------------------------------------------------ recording
    def _agent_ids(self, agents) -> np.ndarray:
        if agents is None:
            return np.arange(self.n_agents)
        a = np.asarray(agents)
        if a.dtype == bool:
            if a.shape != (self.n_agents,):
                raise ValueError(
                    f"argument 'agents' as a mask must have shape ({self.n_agents},), got {a.shape}"
                )
            return np.flatnonzero(a)
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError("argument 'agents' must be an int, an int array, a bool mask or None")
        a = a.reshape(-1)
        if a.size and (a.min() < 0 or a.max() >= self.n_agents):
            raise ValueError(
                f"argument 'agents' must hold ids in [0, {self.n_agents}), got min {a.min()} "
                f"max {a.max()}"
            )
        return a

    def _one_agent(self, agent: int) -> int:
        a = check_int(agent, "agent", minimum=0)
        if a >= self.n_agents:
            raise ValueError(f"argument 'agent' must be < n_agents = {self.n_agents}, got {a}")
        return a

    def _key(self, spec: EventSpec) -> int:
        idx = self._index.get(spec)
        if idx is None:
            spec.check_supported(self.method, self.neighboring)
            idx = len(self._specs)
            self._specs.append(spec)
            self._index[spec] = idx
            self._counts = np.vstack([self._counts, np.zeros((1, self.n_agents), np.int64)])
        return idx

    def record(
        self,
        round: int,
        agents: int | np.ndarray | None = None,
        mechanism: str = "gaussian",
        *,
        noise_multiplier: float | np.ndarray | None = None,
        sigma: float | np.ndarray | None = None,
        sensitivity: float | np.ndarray | None = None,
        sampling: str = "none",
        sampling_rate: float | np.ndarray = 1.0,
        dataset_size: int | np.ndarray | None = None,
        sample_size: int | np.ndarray | None = None,
        count: int = 1,
    ) -> None:
        """Charge ``count`` invocations of one mechanism to each of ``agents`` in ``round``.

        Parameters
        ----------
        round : int
            Round (or iteration) index, >= 0, not before the last round recorded.
        agents : int, int array, bool mask of shape ``(n_agents,)``, or None
            The agents whose records the mechanism read (None: all agents).
        mechanism : {'gaussian', 'laplace'}
        noise_multiplier : float or array, optional
            Noise std (Laplace: scale) over the sensitivity under the ledger's relation.
            Give either this or ``sigma`` and ``sensitivity``.
        sigma, sensitivity : float or array, optional
            Noise std (Laplace scale) and L2 (Laplace: L1) sensitivity; e.g. a mean of ``b``
            samples clipped to ``tau`` has sensitivity ``2 tau / b`` under replace-one
            (:func:`rfed.privacy.accountants.clipped_mean_sensitivity`).
        sampling : {'none', 'poisson', 'without_replacement'}
            How the records fed to the mechanism were sampled from the agent's data.
        sampling_rate : float or array
        dataset_size, sample_size : int or array, optional
            For ``'without_replacement'``: the agent's data size and the batch size.
        count : int
            Number of invocations in this round (e.g. local steps).

        Arrays are per agent (aligned with ``agents``); agents with identical parameters share
        one aggregated counter.
        """
        rnd = check_int(round, "round", minimum=0)
        self._check_round_order(rnd)
        count = check_int(count, "count", minimum=0)
        ids = self._agent_ids(agents)
        if noise_multiplier is not None:
            if sigma is not None or sensitivity is not None:
                raise ValueError(
                    "give either 'noise_multiplier' or 'sigma' and 'sensitivity', not both"
                )
            nm = np.asarray(noise_multiplier, dtype=float)
        else:
            if sigma is None or sensitivity is None:
                raise ValueError(
                    "argument 'noise_multiplier' (or both 'sigma' and 'sensitivity') is required"
                )
            sig = np.asarray(sigma, dtype=float)
            sens = np.asarray(sensitivity, dtype=float)
            if np.any(sig < 0) or not np.all(np.isfinite(sig)):
                raise ValueError("argument 'sigma' must be finite and >= 0")
            if np.any(sens <= 0) or not np.all(np.isfinite(sens)):
                raise ValueError("argument 'sensitivity' must be finite and > 0")
            nm = sig / sens
        n = ids.size
        per_agent = {
            "noise_multiplier" if noise_multiplier is not None else "sigma": nm,
            "sampling_rate": sampling_rate,
            "dataset_size": -1.0 if dataset_size is None else dataset_size,
            "sample_size": -1.0 if sample_size is None else sample_size,
        }
        cols = []
        for name, v in per_agent.items():
            try:
                cols.append(np.broadcast_to(np.asarray(v, dtype=float), (n,)))
            except (TypeError, ValueError):
                raise ValueError(
                    f"argument '{name}' must be a number or one value per agent ({n} agents), "
                    f"got {v!r}"
                ) from None
        combos, inverse = group_rows(cols)
        # sorted distinct ids (the usual call: an arange, a mask, a sorted selection) need no
        # np.unique, whose hashing cost ~10% of a round at 10^5 agents
        distinct = ids.size < 2 or bool(np.all(ids[1:] > ids[:-1]))
        for c, (nm_c, rate_c, n_c, m_c) in enumerate(combos):
            idx = self._key(row_event(mechanism, sampling, (nm_c, rate_c, n_c, m_c)))
            members = ids if combos.shape[0] == 1 else ids[inverse == c]
            if count and distinct:
                self._counts[idx, members] += count
            elif count:
                np.add.at(self._counts[idx], members, count)
            if self.keep_history:
                self._append_history(rnd, idx, members, agents is None, count, distinct)
        if n:
            uniq = ids if distinct else np.unique(ids)
            new = self._last_round[uniq] != rnd
            self._rounds[uniq[new]] += 1
            self._last_round[uniq] = rnd
        self._close_record(rnd)

    def _check_round_order(self, rnd: int) -> None:
        """Refuse a round before the last one recorded (a ledger is written as the run goes:
        an earlier round means a replayed or misnumbered charge)."""
        if self._max_round is not None and rnd < self._max_round:
            raise ValueError(f"argument 'round' ({rnd}) is before the last round recorded "
                             f"({self._max_round}): a ledger records rounds in order; merge "
                             "the ledgers of separate processes with PrivacyLedger.merge")

    def _close_record(self, rnd: int) -> None:
        self._first_round = rnd if self._first_round is None else min(self._first_round, rnd)
        self._max_round = rnd if self._max_round is None else max(self._max_round, rnd)
        self._cache.clear()

    def record_event(self, round: int, event: EventSpec, agents: np.ndarray,
                     count: int = 1) -> None:
        """Charge ``count`` invocations of a built ``event`` to the agents of a boolean mask
        or of an increasing array of ids.

        The same charge as :meth:`record` with the event's parameters (counts, rounds
        participated, history: identical state), for a caller that charges fixed events
        every round: the event was validated once by :meth:`EventSpec.make`, and is checked
        against the ledger's accountant and relation when it is first charged.

        Parameters
        ----------
        round : int
            Round (or iteration) index, >= 0.
        event : EventSpec
        agents : bool array, shape ``(n_agents,)``, or int array, shape ``(A,)``
            The agents whose records the mechanism read: a mask (e.g. the active agents of a
            decentralized round), or their ids in strictly increasing order (a few agents of
            many: the cost is then ``O(A)``, not ``O(n_agents)``).
        count : int
            Invocations in this round.
        """
        if type(round) is not int or round < 0:  # the common case skips check_int's coercion
            round = check_int(round, "round", minimum=0)
        if self._max_round is not None and round < self._max_round:
            self._check_round_order(round)
        if type(count) is not int or count < 0:
            count = check_int(count, "count", minimum=0)
        if not isinstance(event, EventSpec):
            raise TypeError(f"argument 'event' must be an EventSpec, got {event!r}")
        a = np.asarray(agents)
        if a.dtype == bool:
            if a.shape != (self.n_agents,):
                raise ValueError(f"argument 'agents' must be a bool mask of shape "
                                 f"({self.n_agents},) or increasing int ids, got a mask of "
                                 f"shape {a.shape}")
            mask, members, owned = a, np.flatnonzero(a), True  # sorted, distinct, new
        elif a.dtype.kind in "iu" and a.ndim == 1:
            if a.size and (a[0] < 0 or a[-1] >= self.n_agents
                           or (a.size > 1 and not bool(np.all(a[1:] > a[:-1])))):
                raise ValueError(f"argument 'agents' as ids must be strictly increasing and in "
                                 f"[0, {self.n_agents}), got {a!r}")
            mask, members, owned = None, a, False
        else:
            raise ValueError(f"argument 'agents' must be a bool mask of shape ({self.n_agents},) "
                             f"or a 1-d array of increasing int ids, got dtype {a.dtype} shape "
                             f"{a.shape}")
        if not members.size:  # as record() with no agent: no event is registered
            self._close_record(round)
            return
        idx = self._index.get(event)
        if idx is None:
            idx = self._key(event)
        if count:
            row = self._counts[idx]
            if mask is None:
                row[members] += count
            elif count == 1:  # the bool mask adds as 0/1 in place: no count * mask temporary
                np.add(row, mask, out=row)
            else:
                row += count * mask
        if self.keep_history:
            self._append_history(round, idx, members, False, count, True, owned=owned)
        # a round is counted once per agent, however many events it is charged in it; a few
        # members are updated by index, many by whole-array mask operations
        if mask is None or 8 * members.size < self.n_agents:
            fresh = members[self._last_round[members] != round]
            self._rounds[fresh] += 1
            self._last_round[members] = round
        else:
            self._rounds += mask & (self._last_round != round)
            self._last_round[mask] = round
        self._close_record(round)

    def _append_history(self, rnd, idx, members, all_agents, count, distinct, owned=False):
        """Extend the last history entry or append one; ``owned``: ``members`` is a new
        array nobody else holds (kept without a copy)."""
        if not all_agents and members.size == self.n_agents:
            all_agents = distinct or np.unique(members).size == self.n_agents
        # kept as a sorted array (a list only when shown or saved: building a Python list of
        # every selected agent each round cost more than the rest of the recording)
        agents_repr: str | np.ndarray = (
            "all" if all_agents else members if distinct else np.sort(members))
        if self._history:
            last = self._history[-1]
            if (  # the integers first: the agents are compared only when they match
                last["event"] == idx
                and last["count"] == count
                and last["last_round"] + 1 == rnd
                and _same_agents(last["agents"], agents_repr)
            ):
                last["last_round"] = rnd
                return
        self._history.append(
            {
                "first_round": rnd,
                "last_round": rnd,
                "event": idx,
                # a copy: the caller's id array may change after the call
                "agents": (agents_repr if isinstance(agents_repr, str)
                           or (owned and agents_repr is members) else agents_repr.copy()),
                "count": count,
            }
        )

    def add_paper_bound(
        self,
        name: str,
        epsilon: float,
        delta: float,
        source: str,
        agent: int | None = None,
        note: str = "",
    ) -> None:
        """Store a paper's closed-form (epsilon, delta) to print beside the certified value.

        Parameters
        ----------
        name : str
            E.g. ``'PriRFed Thm 4.2'``.
        epsilon, delta : float
            The closed form's values (``delta`` may be 0 for pure DP, or vacuous: say so in
            ``note``).
        source : str
            The theorem or equation of the paper (or the docs page) the entry rests on.
        agent : int, optional
            Agent the bound is for (None: the whole run).
        note : str
            Caveats (violated hypotheses, heuristic constants...).
        """
        eps = check_real(epsilon, "epsilon")
        if not eps >= 0:
            raise ValueError(f"argument 'epsilon' must be >= 0 (inf allowed), got {epsilon!r}")
        delta = check_nonneg(delta, "delta")
        if delta > 1:
            raise ValueError(f"argument 'delta' must lie in [0, 1], got {delta!r}")
        if agent is not None:
            agent = self._one_agent(agent)
        self._paper.append(
            {
                "name": str(name),
                "epsilon": eps,
                "delta": delta,
                "source": str(source),
                "agent": agent,
                "note": str(note),
            }
        )

    # ------------------------------------------------------------------ queries
    def _events_of_column(self, column: np.ndarray) -> list[tuple[EventSpec, int]]:
        return [(self._specs[i], int(c)) for i, c in enumerate(column) if c]

    def _per_agent(self, compose, value: float) -> np.ndarray:
        """``compose`` (:func:`compose_epsilon` or :func:`compose_delta`) of every agent's events.

        Agents with identical counts share one accountant call; results are cached until the
        next record.
        """
        out = np.zeros(self.n_agents)
        if not self._specs:
            return out
        cols, inverse = np.unique(self._counts.T, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(-1)
        vals = np.empty(len(cols))
        for u, col in enumerate(cols):
            key = (compose.__name__, value, col.tobytes(), len(self._specs))
            if key not in self._cache:
                self._cache[key] = compose(
                    self._events_of_column(col),
                    value,
                    self.method,
                    self.neighboring,
                    pld_discretization=self.pld_discretization,
                )
            vals[u] = self._cache[key]
        return vals[inverse]

    def _one_or_max(self, values: np.ndarray, agent: int | None) -> float:
        if agent is None:
            return float(values.max())
        return float(values[self._one_agent(agent)])

    def epsilons(self, delta: float) -> np.ndarray:
        """Epsilon of every agent at ``delta``, shape ``(n_agents,)``.

        Parameters
        ----------
        delta : float
            The delta of the guarantee.

        Returns
        -------
        ndarray, shape ``(n_agents,)``
        """
        return self._per_agent(compose_epsilon, check_delta(delta))

    def epsilon(self, delta: float, agent: int | None = None) -> float:
        """Epsilon at ``delta`` of one agent, or overall (max over agents) if ``agent`` is None.

        Parameters
        ----------
        delta : float
            The delta of the guarantee.
        agent : int, optional
            The agent (default: the maximum over agents).

        Returns
        -------
        float
        """
        return self._one_or_max(self.epsilons(delta), agent)

    def deltas(self, epsilon: float) -> np.ndarray:
        """Delta of every agent at ``epsilon``, shape ``(n_agents,)``.

        Parameters
        ----------
        epsilon : float
            The epsilon of the guarantee.

        Returns
        -------
        ndarray, shape ``(n_agents,)``
        """
        return self._per_agent(compose_delta, check_epsilon(epsilon))

    def delta(self, epsilon: float, agent: int | None = None) -> float:
        """Delta at ``epsilon`` of one agent, or overall (max over agents).

        Parameters
        ----------
        epsilon : float
            The epsilon of the guarantee.
        agent : int, optional
            The agent (default: the maximum over agents).

        Returns
        -------
        float
        """
        return self._one_or_max(self.deltas(epsilon), agent)

    @property
    def rounds_participated(self) -> np.ndarray:
        """Number of distinct rounds each agent was charged in, shape ``(n_agents,)``."""
        return self._rounds.copy()

    def spent(self, agent: int) -> list[tuple[EventSpec, int]]:
        """The events charged to ``agent`` with their counts.

        Parameters
        ----------
        agent : int
            The agent.

        Returns
        -------
        list of (EventSpec, int)
        """
        a = self._one_agent(agent)
        return self._events_of_column(self._counts[:, a])

    @property
    def history(self) -> list[dict[str, Any]]:
        """Run-length encoded records (event given as its description)."""
        return [dict(h, event=self._specs[h["event"]].describe(), agents=_agents_out(h["agents"]))
                for h in self._history]

    def describe(self) -> str:
        """The accountant and its assumptions, plus the ledger's composition rule.

        Returns
        -------
        str
        """
        return (
            assumptions_text(self.method, self.neighboring, self.pld_discretization)
            + " Per agent: events that read the agent's records. Overall: max over agents "
            "(disjoint data, parallel composition). Agent selection is treated as public: no "
            "amplification by agent subsampling is claimed. " + OUTSIDE_THE_GUARANTEE[0].upper()
            + OUTSIDE_THE_GUARANTEE[1:] + "."
        )

    def report(self, delta: float, max_rows: int = 20) -> str:
        """A plain-text table: accountant, assumptions, events, per-agent and overall epsilon.

        Paper closed forms stored with :meth:`add_paper_bound` are listed beside the certified
        value. Agents are listed one per row up to ``max_rows``; beyond that, a summary.

        Parameters
        ----------
        delta : float
            The delta of the guarantee.
        max_rows : int
            Agents listed one per row up to this many.

        Returns
        -------
        str
        """
        delta = check_delta(delta)
        max_rows = check_int(max_rows, "max_rows", minimum=0)
        eps = self.epsilons(delta)
        lines = ["Privacy report"]
        if self.description:
            lines.append(f"run: {self.description}")
        lines.append(f"accountant: {self.describe()}")
        if self._max_round is None:
            lines.append("nothing recorded yet: epsilon = 0")
        else:
            lines.append(
                f"rounds recorded: {self._first_round}..{self._max_round}; agents: {self.n_agents}"
            )
        lines.append(
            f"overall (certified, {self.method.upper()}, {self.neighboring}): "
            f"epsilon = {eps.max():.6g} at delta = {delta:g} (max over agents)"
        )
        if self._specs:
            lines.append("events (count per agent: min / max / total):")
            for i, spec in enumerate(self._specs):
                c = self._counts[i]
                lines.append(
                    f"  {spec.describe():<48} {c.min():>8d} / {c.max():>8d} / {c.sum():>10d}"
                )
        if self.n_agents <= max_rows:
            lines.append(f"{'agent':>6} {'rounds':>8} {'epsilon':>12}")
            for a in range(self.n_agents):
                lines.append(f"{a:>6d} {self._rounds[a]:>8d} {eps[a]:>12.6g}")
        else:
            order = np.argsort(eps)
            lines.append(
                f"per-agent epsilon: min {eps[order[0]]:.6g} (agent {order[0]}), median "
                f"{np.median(eps):.6g}, max {eps[order[-1]]:.6g} (agent {order[-1]})"
            )
        if self._paper:
            lines.append("paper closed forms (as supplied by the algorithm; not certified here):")
            for p in self._paper:
                who = "run" if p["agent"] is None else f"agent {p['agent']}"
                certified = eps.max() if p["agent"] is None else eps[p["agent"]]
                note = f"  [{p['note']}]" if p["note"] else ""
                lines.append(
                    f"  {p['name']} ({p['source']}), {who}: epsilon = {p['epsilon']:.6g}, "
                    f"delta = {p['delta']:.3g}  | certified: epsilon = {certified:.6g} at delta "
                    f"= {delta:g}{note}"
                )
        return "\n".join(lines)

    def report_dict(self, delta: float) -> dict[str, Any]:
        """The report as a JSON-serializable dict (to save beside a run's results).

        Keys: ``delta``, ``epsilon`` (overall), ``epsilon_per_agent``, ``rounds_participated``,
        ``method``, ``neighboring``, ``accountant`` (the assumptions text), ``assumptions``
        (what the guarantee does not cover: :data:`OUTSIDE_THE_GUARANTEE`), ``events`` (each
        event with its per-agent count min / max / total) and ``paper_bounds`` (as stored by
        :meth:`add_paper_bound`).

        Parameters
        ----------
        delta : float
            The delta of the guarantee.

        Returns
        -------
        dict
        """
        delta = check_delta(delta)
        eps = self.epsilons(delta)
        return {
            "delta": delta,
            "epsilon": float(eps.max()),
            "epsilon_per_agent": [float(e) for e in eps],
            "rounds_participated": self._rounds.tolist(),
            "method": self.method,
            "neighboring": self.neighboring,
            "accountant": self.describe(),
            "assumptions": [OUTSIDE_THE_GUARANTEE],
            "events": [
                {
                    "event": spec.describe(),
                    "count_min": int(self._counts[i].min()),
                    "count_max": int(self._counts[i].max()),
                    "count_total": int(self._counts[i].sum()),
                }
                for i, spec in enumerate(self._specs)
            ],
            "paper_bounds": [dict(p) for p in self._paper],
        }

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(n_agents={self.n_agents}, method={self.method!r}, "
            f"neighboring={self.neighboring!r}, events={len(self._specs)})"
        )

    # ------------------------------------------------------------------ combining
    def merge(self, other: PrivacyLedger) -> PrivacyLedger:
        """A new ledger holding the events of ``self`` and ``other`` (neither is changed).

        For ledgers kept by separate processes that each recorded the events of their own block
        of agents (an MPI rank, a Flower client group): events compose by adding their counts, so
        every agent's epsilon after the merge is that of all its events. Both ledgers must use the
        same agent set, accountant, relation and discretization. Rounds participated add up, so
        ledgers that charged the same agent in the same round count that round twice (the
        events, and so the epsilons, are right either way).

        Parameters
        ----------
        other : PrivacyLedger

        Returns
        -------
        PrivacyLedger
        """
        if not isinstance(other, PrivacyLedger):
            raise TypeError(f"argument 'other' must be a PrivacyLedger, got {other!r}")
        for attr in ("n_agents", "method", "neighboring", "pld_discretization"):
            if getattr(self, attr) != getattr(other, attr):
                raise ValueError(
                    f"cannot merge ledgers with different {attr}: {getattr(self, attr)!r} and "
                    f"{getattr(other, attr)!r}"
                )
        out = PrivacyLedger.from_dict(self.to_dict())
        remap = np.array([out._key(spec) for spec in other._specs], dtype=int)
        if remap.size:
            out._counts[remap] += other._counts
        out._rounds = self._rounds + other._rounds
        out._last_round = np.maximum(self._last_round, other._last_round)
        firsts = [r for r in (self._first_round, other._first_round) if r is not None]
        lasts = [r for r in (self._max_round, other._max_round) if r is not None]
        out._first_round = min(firsts) if firsts else None
        out._max_round = max(lasts) if lasts else None
        if out.keep_history and other.keep_history:
            moved = [dict(h, event=int(remap[h["event"]])) for h in other._history]
            out._history = sorted(out._history + moved, key=lambda h: h["first_round"])
        else:
            out.keep_history = False
            out._history = []
        out._paper.extend(p for p in other._paper if p not in out._paper)
        out._cache.clear()
        return out

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable state (``json.dumps(ledger.to_dict())`` works).

        Returns
        -------
        dict
        """
        return {
            "format": "rfed.PrivacyLedger/1",
            "n_agents": self.n_agents,
            "method": self.method,
            "neighboring": self.neighboring,
            "pld_discretization": self.pld_discretization,
            "keep_history": self.keep_history,
            "description": self.description,
            "events": [s.to_dict() for s in self._specs],
            "counts": self._counts.tolist(),
            "rounds": self._rounds.tolist(),
            "last_round": self._last_round.tolist(),
            "first_round": self._first_round,
            "max_round": self._max_round,
            "history": [dict(h, agents=_agents_out(h["agents"])) for h in self._history],
            "paper": [dict(p) for p in self._paper],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyLedger:
        """Rebuild a ledger from :meth:`to_dict` (to resume a run).

        Parameters
        ----------
        data : mapping
            The output of :meth:`to_dict`.

        Returns
        -------
        PrivacyLedger

        Raises
        ------
        ValueError
            ``data`` is not a saved ledger or is inconsistent.
        """
        if data.get("format") != "rfed.PrivacyLedger/1":
            raise ValueError(
                f"argument 'data' is not a saved PrivacyLedger (format {data.get('format')!r})"
            )
        led = cls(
            data["n_agents"],
            data["method"],
            data["neighboring"],
            pld_discretization=data["pld_discretization"],
            keep_history=data["keep_history"],
            description=data.get("description", ""),
        )
        for spec in data["events"]:
            led._key(EventSpec.from_dict(spec))
        counts = np.asarray(data["counts"], dtype=np.int64).reshape(len(led._specs), led.n_agents)
        led._counts = counts
        led._rounds = np.asarray(data["rounds"], dtype=np.int64)
        led._last_round = np.asarray(data["last_round"], dtype=np.int64)
        led._first_round = data["first_round"]
        led._max_round = data["max_round"]
        led._history = [dict(h, agents=_agents_in(h["agents"])) for h in data["history"]]
        led._paper = [dict(p) for p in data["paper"]]
        return led

    def to_json(self) -> str:
        """``json.dumps(self.to_dict())``.

        Returns
        -------
        str
        """
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> PrivacyLedger:
        """Inverse of :meth:`to_json`.

        Parameters
        ----------
        text : str
            The output of :meth:`to_json`.

        Returns
        -------
        PrivacyLedger
        """
        return cls.from_dict(json.loads(text))
