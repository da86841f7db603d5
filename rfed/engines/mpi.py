"""MPI engine for the decentralized algorithms (mpi4py; optional extra ``rfed[mpi]``).

Every MPI rank owns a contiguous block of agents (global ids ``start .. stop - 1``, as equal as
possible) and holds only their rows; :class:`MPICommunicator` serves the
:class:`rfed.networks.comm.Communicator` calls on those rows:

* neighbour exchange: for each mixing matrix, the ranks holding in-neighbours of the block form a
  distributed graph topology (``Create_dist_graph_adjacent(..., reorder=False)``) and the rows
  the block needs (its halo) travel by ``Neighbor_alltoallv`` with explicit counts and
  displacements (implicit counts truncate on ranks without neighbours: Open MPI issue #14452);
* the block's rows of ``W`` act on ``[own rows, halo rows]`` with the stored entries in the same
  order as the one-process product, so every row is summed in the same order and the results
  are bit-identical to one process for any number of ranks;
* every agent's rows are gathered in agent order (``Allgatherv``) for outputs and metrics, which
  are then computed as in one process (no ``Allreduce`` of floats, whose summation order depends
  on the number of ranks).

Randomness is keyed (``rfed.randomness``): an agent draws the same numbers on any rank. Each rank
charges the releases of its own agents to its copy of the privacy account; :func:`merge_accounts`
merges them on rank 0 (:meth:`rfed.privacy.PrivacyLedger.merge` for the ledgers).

Message accounting: ``stats`` counts the algorithm's protocol messages of the rank's agents (as
the in-process engine does); :meth:`MPICommunicator.total_stats` sums them over ranks. Public
copies (``copies=True``), which the protocol keeps in sync with :meth:`publish` and does not
count, are refreshed from their owners by a halo exchange here; that engine traffic is counted
apart, in :attr:`MPICommunicator.engine_bytes`.

Served: ``mix``, ``gather_from_neighbors`` and ``publish`` without a ``senders`` restriction on
mixing (DO-ADP, DSGD, Riemannian gossip). ``send_along_arcs``, ``gather`` and ``broadcast``
raise ``NotImplementedError``.

Launch (MPICH or Open MPI; the ``mpich`` wheel provides ``mpiexec``)::

    mpiexec -n 4 python -m mpi4py your_script.py

where the script builds the algorithm on ``Network(graph, weights,
communicator=MPICommunicator(n_agents))`` and calls :func:`run_mpi`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.manifolds import as_generator
from rfed.networks.comm import (
    Communicator,
    NeighborValues,
    _offdiag_arcs,
    _pattern,
)

__all__ = ["MPICommunicator", "block_bounds", "merge_accounts", "run_mpi"]


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("the MPI engine needs mpi4py and an MPI: pip install 'rfed[mpi]'"
                          ) from err
    return MPI


def block_bounds(n_agents: int, n_ranks: int) -> np.ndarray:
    """``bounds[r] .. bounds[r + 1] - 1``: the agents of rank ``r`` (contiguous, sizes differing
    by at most one), shape ``(n_ranks + 1,)``."""
    if n_ranks < 1 or n_agents < n_ranks:
        raise ValueError(f"need 1 <= n_ranks <= n_agents, got n_ranks={n_ranks}, "
                         f"n_agents={n_agents}")
    return (np.arange(n_ranks + 1, dtype=np.int64) * n_agents) // n_ranks


@dataclass
class _Plan:
    """Halo exchange of one mixing matrix for this rank's block."""

    weights: sp.csr_matrix  # kept so that the id used as cache key stays valid
    topo: Any
    send_rows: np.ndarray  # local rows to send, grouped by destination rank
    send_counts: np.ndarray  # rows per destination
    recv_counts: np.ndarray  # rows per source
    halo: np.ndarray  # global ids received, in order
    block: sp.csr_matrix  # (n_local, n_local + n_halo): the block's rows on [own, halo]
    outdeg: np.ndarray  # (n_agents,) off-diagonal non-zero arcs leaving each agent
    arcs: tuple  # (local receivers, senders, weights, arc ids) of the block's in-arcs
    ext_of_sender: np.ndarray  # position in [own, halo] of each arc's sender


class MPICommunicator(Communicator):
    """A rank's block of agents on MPI (see the module docstring).

    Parameters
    ----------
    n_agents : int
    comm : mpi4py.MPI.Intracomm, optional
        Default ``MPI.COMM_WORLD``; needs at most ``n_agents`` ranks.
    """

    def __init__(self, n_agents: int, comm: Any = None):
        super().__init__(n_agents)
        self._MPI = _mpi()
        self.comm = self._MPI.COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.bounds = block_bounds(self.n_agents, self.size)
        self.start, self.stop = int(self.bounds[self.rank]), int(self.bounds[self.rank + 1])
        self._agents = np.arange(self.start, self.stop)
        self._plans: dict[int, _Plan] = {}
        self.engine_bytes = 0

    @property
    def agents(self) -> np.ndarray:
        return self._agents

    @property
    def n_local(self) -> int:
        return self.stop - self.start

    def __getstate__(self):
        raise TypeError("an MPICommunicator is bound to its MPI job and cannot be pickled")

    # ------------------------------------------------------------------ plans
    def _plan(self, weights) -> tuple[sp.csr_matrix, _Plan]:
        w = _pattern(weights, self.n_agents)
        plan = self._plans.get(id(w))
        if plan is not None and plan.weights is w:
            return w, plan
        rows = w[self.start:self.stop]
        cols = rows.indices
        outside = (cols < self.start) | (cols >= self.stop)
        halo = np.unique(cols[outside]).astype(np.int64)
        owner = np.searchsorted(self.bounds, halo, side="right") - 1
        want = [halo[owner == r] for r in range(self.size)]
        asked = self.comm.alltoall(want)  # ids each rank needs from this block (set-up only)
        sources = [r for r in range(self.size) if want[r].size]
        dests = [r for r in range(self.size) if len(asked[r])]
        topo = self.comm.Create_dist_graph_adjacent(sources, dests, reorder=False)
        send_rows = (np.concatenate([asked[r] for r in dests]) - self.start if dests
                     else np.zeros(0, np.int64)).astype(np.int64)
        ext = np.full(self.n_agents, -1, dtype=np.int64)
        ext[self.start:self.stop] = np.arange(self.n_local)
        ext[halo] = self.n_local + np.arange(halo.size)
        # same stored entries in the same order as the full matrix: same summation order
        block = sp.csr_matrix((rows.data, ext[cols], rows.indptr),
                              shape=(self.n_local, self.n_local + halo.size))
        full_r, full_c, _, _ = _offdiag_arcs(w)
        outdeg = np.bincount(full_c, minlength=self.n_agents).astype(np.int64)
        r, s, v, _ = _offdiag_arcs(rows, row_offset=self.start)
        first = int(np.searchsorted(full_r, self.start))  # arcs into earlier agents
        arcs = (r - self.start, s, v, first + np.arange(r.size))
        plan = _Plan(w, topo, send_rows,
                     np.array([len(asked[q]) for q in dests], dtype=np.int64),
                     np.array([want[q].size for q in sources], dtype=np.int64),
                     halo, block, outdeg, arcs, ext[s])
        self._plans[id(w)] = plan
        return w, plan

    def _extended(self, plan: _Plan, v: np.ndarray) -> np.ndarray:
        """``[own rows, halo rows]`` by one ``Neighbor_alltoallv``."""
        MPI = self._MPI
        flat = np.ascontiguousarray(v, dtype=np.float64).reshape(self.n_local, -1)
        width = flat.shape[1]
        send = np.ascontiguousarray(flat[plan.send_rows]).reshape(-1)
        recv = np.empty(plan.halo.size * width)
        sc, rc = plan.send_counts * width, plan.recv_counts * width
        sd = np.concatenate([[0], np.cumsum(sc)])[:-1].astype(np.int64)
        rd = np.concatenate([[0], np.cumsum(rc)])[:-1].astype(np.int64)
        plan.topo.Neighbor_alltoallv([send, (sc.tolist(), sd.tolist()), MPI.DOUBLE],
                                     [recv, (rc.tolist(), rd.tolist()), MPI.DOUBLE])
        self.engine_bytes += int(send.nbytes)
        return np.concatenate([flat, recv.reshape(plan.halo.size, width)])

    def _local_values(self, values, name: str = "values") -> np.ndarray:
        v = np.asarray(values)
        if v.ndim < 1 or v.shape[0] != self.n_local:
            raise ValueError(f"argument '{name}' must have this rank's {self.n_local} agent rows "
                             f"(agents {self.start}..{self.stop - 1}), got shape {v.shape}")
        return v

    def _local_mask(self, senders) -> np.ndarray:
        if senders is None:
            return np.ones(self.n_local, dtype=bool)
        s = np.asarray(senders)
        if s.dtype != bool or s.shape != (self.n_local,):
            raise ValueError(f"argument 'senders' must be a boolean mask of this rank's "
                             f"{self.n_local} agents, got {senders!r}")
        return s

    def _count(self, kind: str, plan: _Plan, v: np.ndarray, mask: np.ndarray, payload_bytes):
        counts = np.zeros(self.n_agents, dtype=np.int64)
        counts[self._agents] = np.where(mask, plan.outdeg[self._agents], 0)
        if payload_bytes is None:
            size = int(np.prod(v.shape[1:], dtype=np.int64)) * v.dtype.itemsize
        else:
            size = int(payload_bytes)
        self._record(kind, counts, np.full(self.n_agents, size, dtype=np.int64))

    # ------------------------------------------------------------------ operations
    def mix(self, weights, values, *, senders=None, payload_bytes=None, copies: bool = False):
        if senders is not None:
            raise NotImplementedError("MPICommunicator.mix does not take 'senders' yet")
        v = self._local_values(values)
        w, plan = self._plan(weights)
        if not copies:
            self._count("mix", plan, v, np.ones(self.n_local, bool), payload_bytes)
        ext = self._extended(plan, v)
        return np.asarray(plan.block @ ext).reshape(v.shape)

    def gather_from_neighbors(self, weights, values, *, senders=None, payload_bytes=None,
                              receivers=None, copies=False) -> NeighborValues:
        if senders is not None:
            raise NotImplementedError("MPICommunicator.gather_from_neighbors does not take "
                                      "'senders' yet")
        v = self._local_values(values)
        w, plan = self._plan(weights)
        if not copies:
            self._count("gather_from_neighbors", plan, v, np.ones(self.n_local, bool),
                        payload_bytes)
        ext = self._extended(plan, v).reshape((-1,) + v.shape[1:])
        rec, snd, wts, ids = plan.arcs
        pos = plan.ext_of_sender
        if receivers is not None:
            lo, hi = (int(r) for r in receivers)
            keep = (rec >= lo) & (rec < hi)
            rec, snd, wts, ids, pos = rec[keep], snd[keep], wts[keep], ids[keep], pos[keep]
        return NeighborValues(rec, snd, wts, ext[pos], ids)

    def send_along_arcs(self, weights, arc_values, *, payload_bytes=None) -> NeighborValues:
        raise NotImplementedError("MPICommunicator does not serve send_along_arcs yet (DPDL)")

    def publish(self, weights, copies, delta, *, senders=None, payload_bytes=None):
        c = self._local_values(copies, "copies")
        d = self._local_values(delta, "delta")
        if d.shape != c.shape:
            raise ValueError(f"argument 'delta' has shape {d.shape}, copies have {c.shape}")
        w, plan = self._plan(weights)
        mask = self._local_mask(senders)
        self._count("publish", plan, d, mask, payload_bytes)
        shape = (self.n_local,) + (1,) * (c.ndim - 1)
        return c + np.where(mask.reshape(shape), d, 0.0)

    def gather(self, values, agents=None, *, payload_bytes=None) -> np.ndarray:
        raise NotImplementedError("MPICommunicator does not serve gather (federated) yet")

    def broadcast(self, value, agents=None, *, payload_bytes=None) -> np.ndarray:
        raise NotImplementedError("MPICommunicator does not serve broadcast (federated) yet")

    # ------------------------------------------------------------------ engine bookkeeping
    def all_rows(self, values: np.ndarray) -> np.ndarray:
        MPI = self._MPI
        v = np.ascontiguousarray(self._local_values(values), dtype=np.float64)
        width = int(np.prod(v.shape[1:], dtype=np.int64))
        out = np.empty((self.n_agents,) + v.shape[1:])
        counts = (np.diff(self.bounds) * width).tolist()
        displs = (self.bounds[:-1] * width).tolist()
        self.comm.Allgatherv(v.reshape(-1), [out.reshape(-1), (counts, displs), MPI.DOUBLE])
        return out

    def total_stats(self) -> dict:
        snaps = self.comm.allgather(self.stats.snapshot())
        return {k: int(sum(s[k] for s in snaps)) for k in snaps[0]}


def merge_accounts(accounts: list) -> Any:
    """One privacy account from the per-rank accounts of a run (each charged its own agents).

    Per-agent release counts add up; the ledgers are merged with
    :meth:`rfed.privacy.PrivacyLedger.merge`; rounds must agree.
    """
    accounts = [a for a in accounts if a is not None]
    if not accounts:
        return None
    out = copy.deepcopy(accounts[0])
    rounds = {a.rounds for a in accounts}
    if len(rounds) != 1:
        raise ValueError(f"ranks' accounts disagree on the rounds done: {sorted(rounds)}")
    for a in accounts[1:]:
        out.counts = out.counts + a.counts
        out.ledger = out.ledger.merge(a.ledger)
    if hasattr(out, "_memo"):
        out._memo = {}
    return out


def run_mpi(algorithm, problem, n_rounds: int, *, rng, x0=None) -> dict | None:
    """Run ``n_rounds`` rounds of a decentralized ``algorithm`` whose network's communicator is
    an :class:`MPICommunicator`; every rank calls it with the same arguments.

    Returns
    -------
    dict or None
        On rank 0: ``x`` (every agent's final iterate, ``(n_agents, *point_shape)``, agent
        order), ``output`` (the algorithm's output point), ``privacy`` (the merged report, or
        None without noise), ``account`` (the merged account), ``comm`` (protocol messages and
        bytes summed over ranks) and ``engine_bytes``. ``None`` on the other ranks.
    """
    comm = algorithm.network.comm
    if not isinstance(comm, MPICommunicator):
        raise TypeError("run_mpi needs an algorithm whose network uses an MPICommunicator, got "
                        f"{type(comm).__name__}")
    rng = as_generator(rng)
    if x0 is None:
        x0 = problem.manifold.random_point(rng)
    x0 = problem.manifold.check_point(x0, "x0")
    state = algorithm.init(problem, x0, rng)
    for _ in range(int(n_rounds)):
        state = algorithm.step(problem, state)
    x_all = comm.all_rows(algorithm._output_points(state))
    output = algorithm.output(problem, state)
    stats = comm.total_stats()
    accounts = comm.comm.gather(state.ledger, root=0)
    engine = comm.comm.reduce(comm.engine_bytes, root=0)
    if comm.rank != 0:
        return None
    account = merge_accounts(accounts)
    return {"x": x_all, "output": output,
            "privacy": None if account is None else account.report(),
            "account": account, "comm": stats, "engine_bytes": int(engine)}
