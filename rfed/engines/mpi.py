"""MPI engine for the decentralized algorithms (mpi4py; optional extra ``rfed[mpi]``).

Every MPI rank owns a contiguous block of agents (global ids ``start .. stop - 1``, as equal as
possible) and holds only their rows; :class:`MPICommunicator` serves the
:class:`rfed.networks.comm.Communicator` calls on those rows:

* neighbour exchange: the mixing matrices are public (every rank holds the full ``W``; DP-DDA's
  per-round ``W^(t)`` comes from the public stream), so each rank computes locally which rows
  it sends to and receives from which rank; the rows travel by ``Neighbor_alltoallv`` on a
  distributed graph topology (``Create_dist_graph_adjacent(..., reorder=False)``) with explicit
  counts and displacements (implicit counts truncate on ranks without neighbours: Open MPI
  issue #14452). The topology connects the rank pairs of every matrix seen so far: a new
  matrix whose rank pairs it already covers (a static ``W``, DP-DDA's matchings on a complete
  graph after a few rounds) reuses it with zero counts on unused pairs; otherwise every rank
  (deciding from the same public ``W``) creates the union topology together;
* the block's rows of ``W`` act on ``[own rows, halo rows]`` with the stored entries in the same
  order as the one-process product, so every row is summed in the same order and the results
  are bit-identical to one process for any number of ranks;
* :meth:`MPICommunicator.send_along_arcs` moves one row per arc (DPDL's cross-gradients) on the
  same topology; rows arrive grouped by receiver in the one-process arc order;
* every agent's rows are gathered in agent order (``Allgatherv``) for outputs and metrics, which
  are then computed as in one process (no ``Allreduce`` of floats, whose summation order depends
  on the number of ranks).

Randomness is keyed (``rfed.randomness``): an agent draws the same numbers on any rank. Each rank
charges the releases of its own agents to its copy of the privacy account;
:meth:`MPICommunicator.merge_account` merges them (:func:`merge_accounts`,
:meth:`rfed.privacy.PrivacyLedger.merge` for the ledgers), so an algorithm's ``privacy(state)``
is the whole run's report on every rank.

Message accounting: ``stats`` counts the algorithm's protocol messages of the rank's agents (as
the in-process engine does); :meth:`MPICommunicator.total_stats` sums them over ranks. Public
copies (``copies=True``), which the protocol keeps in sync with :meth:`publish` and does not
count, are refreshed from their owners by a halo exchange here; that engine traffic is counted
apart, in :attr:`MPICommunicator.engine_bytes`.

Sharded data: a rank holds only its block's rows of the problem. :func:`run_mpi` runs on
:func:`shard_for_rank` of the problem it is given (``problem.shard(comm.agents, reducer=...)``,
:meth:`rfed.problems.Problem.shard`), and ``rfed run NAME --engine mpi`` hands every setting
the rank's shard (:func:`rfed.experiments._decentralized.engine_problem`), built once the
public facts (agent counts, dimensions, public bounds, the reference solution computed from
every agent's data before the run) are known; the full arrays are then dropped. A shard
raises ``ValueError`` naming the agent when asked for another rank's agent, and for whole-data
quantities; the metrics that sum over agents (cost, gradient norm, excess risk, training
accuracy) are reductions: each rank weighs its agents' local values, ``Allgatherv`` puts them
in agent order and every rank sums them in agent order
(:meth:`rfed.networks.comm.Communicator.agent_sum`), so the logged numbers have the
one-process bits. These reductions, like the gathered iterates of the metrics, are the
experimenter's evaluation, not protocol messages: they are not charged to the privacy
ledgers, so ranks that are distinct parties should not log data-dependent metrics. DP-DGT's
resource allocation shards the same way (:meth:`QuadraticResourceAllocation.shard`: a rank holds
its agents' cost functions, boxes and demands; the total demand, the strong-convexity constant
and the optimum are public facts kept from before sharding).

Computed once: what depends only on public numbers and costs time, such as calibrating the noise
to a budget and running the accountant for a privacy report, is computed by rank 0 and broadcast
(:meth:`MPICommunicator.root_computes`; the in-process engine simply calls it), while the other
ranks wait without spinning on a core.

Checkpoints resume on any number of ranks: a checkpoint is ONE :mod:`rfed.state` file (no
pickle), written by rank 0, holding every agent's state (:class:`SavedBlocks`: the ranks'
block states merged by the algorithm's ``merge_blocks``, which concatenates the per-agent rows
it declares, merges the privacy accounts and checks that the shared fields agree, see
:mod:`rfed.algorithms.decentralized._blocks`) and the message counters merged
(:func:`merge_stats`). On resume rank 0 splits it into the new job's blocks
(``split_state``, :func:`split_stats`) and scatters them. :func:`run_mpi` checkpoints a script's
run; :class:`MPIRunHook` checkpoints the runs of ``rfed run NAME --engine mpi`` into rank 0's
results folder (``--checkpoint-every``, ``--resume DIR``).

Federated calls: the server is replicated on every rank (its computation is deterministic and
its randomness public), so :meth:`MPICommunicator.gather` returns the gathered rows on every
rank and :meth:`MPICommunicator.broadcast` needs no transfer; messages are counted once, by the
rank owning the agent.

Launch (MPICH or Open MPI; the ``mpich`` wheel provides ``mpiexec``)::

    mpiexec -n 4 python -m mpi4py your_script.py
    mpiexec -n 4 python -m mpi4py -m rfed run doadp-logreg --engine mpi --out DIR
    mpiexec -n 2 python -m mpi4py -m rfed run --resume DIR --engine mpi   # after a kill

where the script builds the algorithm on ``Network(graph, weights,
communicator=MPICommunicator(n_agents))`` (or any network inside :func:`mpi_engine`) and calls
:func:`run_mpi`, which also checkpoints and resumes (on any number of ranks).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed._docstrings import sections_from
from rfed.algorithms.base import _checkpoint_path_error
from rfed.algorithms.decentralized._blocks import merge_accounts
from rfed.manifolds import as_generator
from rfed.networks.comm import (
    CommStats,
    Communicator,
    NeighborValues,
    _offdiag_arcs,
    _pattern,
    check_out,
    csr_product,
)
from rfed.networks.engine import Engine, use_engine
from rfed.state import StateFileError, load_state, save_state

__all__ = ["MPICommunicator", "MPIEngine", "MPIRunHook", "SavedBlocks", "block_bounds",
           "gather_blocks", "merge_accounts", "merge_stats", "mpi_engine", "run_mpi",
           "scatter_blocks", "shard_for_rank", "split_stats", "CHECKPOINT_FORMAT",
           "CHECKPOINT_KIND"]

#: Version of the checkpoint written by :func:`run_mpi` (2: one whole state, any rank count;
#: 3: an :mod:`rfed.state` file, no pickle).
CHECKPOINT_FORMAT = 3
#: The :mod:`rfed.state` kind of the checkpoint files of :func:`run_mpi`.
CHECKPOINT_KIND = "mpi-checkpoint"

#: Seconds between polls of a rank waiting for rank 0 (see MPICommunicator.root_computes).
_IDLE_POLL = 0.002

#: Exchange plans kept per communicator (static matrices stay; per-round ones come and go).
_PLAN_CACHE = 16


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("the MPI engine needs mpi4py and an MPI: pip install 'rfed[mpi]'"
                          ) from err
    return MPI


def block_bounds(n_agents: int, n_ranks: int) -> np.ndarray:
    """``bounds[r] .. bounds[r + 1] - 1``: the agents of rank ``r`` (contiguous, sizes differing
    by at most one), shape ``(n_ranks + 1,)``.

    Parameters
    ----------
    n_agents, n_ranks : int
        ``1 <= n_ranks <= n_agents``.

    Returns
    -------
    ndarray of int64, shape ``(n_ranks + 1,)``
    """
    if n_ranks < 1 or n_agents < n_ranks:
        raise ValueError(f"need 1 <= n_ranks <= n_agents, got n_ranks={n_ranks}, "
                         f"n_agents={n_agents}")
    return (np.arange(n_ranks + 1, dtype=np.int64) * n_agents) // n_ranks


def _displacements(counts: np.ndarray) -> list[int]:
    return np.concatenate([[0], np.cumsum(counts)])[:-1].astype(np.int64).tolist()


@dataclass
class _Topology:
    """A distributed graph topology and its neighbour ranks (ascending)."""

    comm: Any
    sources: np.ndarray
    dests: np.ndarray


@dataclass
class _Plan:
    """Exchanges of one mixing matrix for this rank's block."""

    weights: sp.csr_matrix  # kept so that the id used as cache key stays valid
    topo: _Topology
    send_rows: np.ndarray  # local rows to send, grouped by destination rank
    send_counts: np.ndarray  # rows per topology destination
    recv_counts: np.ndarray  # rows per topology source
    halo: np.ndarray  # global ids received, in order
    block: sp.csr_matrix  # (n_local, n_local + n_halo): the block's rows on [own, halo]
    outdeg: np.ndarray  # (n_local,) non-zero off-diagonal arcs leaving each local agent
    arcs: tuple  # (local receivers, senders, weights, arc ids) of the block's in-arcs
    ext_of_sender: np.ndarray  # position in [own, halo] of each in-arc's sender
    out_arcs: np.ndarray  # ids of the arcs leaving the block, arc-list order
    out_remote: np.ndarray  # positions in out_arcs of those going to other ranks
    out_local: np.ndarray  # positions in out_arcs of those staying in the block
    arc_send_counts: np.ndarray  # remote out-arcs per topology destination
    arc_recv_counts: np.ndarray  # remote in-arcs per topology source
    in_local: np.ndarray  # positions in arcs of the in-arcs sent from the block itself
    in_remote: np.ndarray  # positions in arcs of the received ones, in receive order


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
        self._plans: collections.OrderedDict[int, _Plan] = collections.OrderedDict()
        self._rank_pairs = np.zeros((self.size, self.size), dtype=bool)  # [sender, receiver]
        self._topo: _Topology | None = None
        # (values, key, [own, halo] rows) of the last gather_from_neighbors, for its chunks
        self._halo_cache: tuple | None = None
        self.engine_bytes = 0

    @property
    def agents(self) -> np.ndarray:
        return self._agents

    @property
    def n_local(self) -> int:
        return self.stop - self.start

    def __getstate__(self):
        raise TypeError("an MPICommunicator is bound to its MPI job and cannot be pickled; "
                        "checkpoint MPI runs with rfed.engines.mpi.run_mpi(checkpoint=...) or "
                        "'rfed run NAME --engine mpi' (they save the ranks' states merged)")

    # ------------------------------------------------------------------ plans
    def _owner(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.bounds, ids, side="right") - 1

    def _topology(self, pairs: np.ndarray) -> _Topology:
        """A topology covering the rank pairs ``pairs[sender, receiver]`` (every rank computes
        the same ``pairs`` from the public matrix, so all take the same branch)."""
        if self._topo is not None and not np.any(pairs & ~self._rank_pairs):
            return self._topo
        self._rank_pairs |= pairs
        sources = np.flatnonzero(self._rank_pairs[:, self.rank])
        dests = np.flatnonzero(self._rank_pairs[self.rank])
        if self._topo is not None:
            self._topo.comm.Free()
        topo = self.comm.Create_dist_graph_adjacent(sources.tolist(), dests.tolist(),
                                                    reorder=False)
        self._topo = _Topology(topo, sources, dests)
        # plans on the old topology are stale
        self._plans.clear()
        return self._topo

    def _plan(self, weights) -> tuple[sp.csr_matrix, _Plan]:
        w = _pattern(weights, self.n_agents)
        plan = self._plans.get(id(w))
        if plan is not None and plan.weights is w:
            self._plans.move_to_end(id(w))
            return w, plan
        n, me = self.n_agents, self.rank
        # every stored off-diagonal entry W[i, j] (j's row is needed by i's rank)
        rows_all = np.repeat(np.arange(n), np.diff(w.indptr))
        cols_all = w.indices
        o_recv, o_send = self._owner(rows_all), self._owner(cols_all)
        cross = o_recv != o_send
        pairs = np.zeros((self.size, self.size), dtype=bool)
        pairs[o_send[cross], o_recv[cross]] = True
        topo = self._topology(pairs)
        # rows this block sends: per destination rank, the block's ids that rank needs, sorted
        mine = cross & (o_send == me)
        keys = np.unique(o_recv[mine].astype(np.int64) * n + cols_all[mine])
        dest_of, send_ids = keys // n, keys % n
        send_counts = np.bincount(dest_of, minlength=self.size)[topo.dests].astype(np.int64)
        # rows this block receives: its halo, sorted (so grouped by ascending owner)
        rows = w[self.start:self.stop]
        cols = rows.indices
        halo = np.unique(cols[(cols < self.start) | (cols >= self.stop)]).astype(np.int64)
        recv_counts = np.bincount(self._owner(halo), minlength=self.size)[topo.sources]
        ext = np.full(n, -1, dtype=np.int64)
        ext[self.start:self.stop] = np.arange(self.n_local)
        ext[halo] = self.n_local + np.arange(halo.size)
        # same stored entries in the same order as the full matrix: same summation order
        block = sp.csr_matrix((rows.data, ext[cols], rows.indptr),
                              shape=(self.n_local, self.n_local + halo.size))
        # arcs (non-zero off-diagonal entries), in the arc-list order of one process
        full_r, full_c, _, _ = _offdiag_arcs(w)
        outdeg = np.bincount(full_c, minlength=n)[self.start:self.stop].astype(np.int64)
        r, s, v, _ = _offdiag_arcs(rows, row_offset=self.start)
        first = int(np.searchsorted(full_r, self.start))  # arcs into earlier agents
        arcs = (r - self.start, s, v, first + np.arange(r.size))
        # send_along_arcs: the block's out-arcs leave grouped by receiver rank (arc-list order
        # is by receiver, and blocks are contiguous); its in-arcs arrive grouped by sender rank
        out_arcs = np.flatnonzero(self._owner(full_c) == me)
        out_dest = self._owner(full_r[out_arcs])
        out_remote = np.flatnonzero(out_dest != me)
        out_local = np.flatnonzero(out_dest == me)
        arc_send = np.bincount(out_dest[out_remote], minlength=self.size)[topo.dests]
        in_src = self._owner(s)
        in_local = np.flatnonzero(in_src == me)
        remote = np.flatnonzero(in_src != me)
        in_remote = remote[np.argsort(in_src[remote], kind="stable")]
        arc_recv = np.bincount(in_src[remote], minlength=self.size)[topo.sources]
        plan = _Plan(w, topo, send_ids - self.start, send_counts,
                     recv_counts.astype(np.int64), halo, block, outdeg, arcs, ext[s],
                     out_arcs, out_remote, out_local, arc_send.astype(np.int64),
                     arc_recv.astype(np.int64), in_local, in_remote)
        self._plans[id(w)] = plan
        if len(self._plans) > _PLAN_CACHE:
            self._plans.popitem(last=False)
        return w, plan

    def _alltoallv(self, topo: _Topology, send: np.ndarray, send_counts: np.ndarray,
                   recv_counts: np.ndarray, width: int) -> np.ndarray:
        """One ``Neighbor_alltoallv`` of float64 rows of ``width`` values."""
        MPI = self._MPI
        send = np.ascontiguousarray(send, dtype=np.float64).reshape(-1)
        recv = np.empty(int(recv_counts.sum()) * width)
        sc, rc = send_counts * width, recv_counts * width
        topo.comm.Neighbor_alltoallv([send, (sc.tolist(), _displacements(sc)), MPI.DOUBLE],
                                     [recv, (rc.tolist(), _displacements(rc)), MPI.DOUBLE])
        self.engine_bytes += int(send.nbytes)
        return recv.reshape(-1, width)

    def _extended(self, plan: _Plan, v: np.ndarray) -> np.ndarray:
        """``[own rows, halo rows]`` (flattened rows) by one ``Neighbor_alltoallv``."""
        flat = np.ascontiguousarray(v, dtype=np.float64).reshape(self.n_local, -1)
        width = flat.shape[1]
        recv = self._alltoallv(plan.topo, flat[plan.send_rows], plan.send_counts,
                               plan.recv_counts, width)
        return np.concatenate([flat, recv])

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

    def _check_senders(self, kind: str, w: sp.csr_matrix, plan: _Plan, mask: np.ndarray):
        """A weight on the value of one of this block's non-senders is an error (as in one
        process); each rank checks the arcs leaving its own agents."""
        if mask.all():
            return
        silent = ~mask[plan.outdeg > 0]
        if not np.any(silent):
            return
        full_r, full_c, vals, _ = _offdiag_arcs(w)
        out_r, out_c = full_r[plan.out_arcs], full_c[plan.out_arcs]
        bad = ~mask[out_c - self.start]
        e = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{kind}: weights[{out_r[e]}, {out_c[e]}] = "
                         f"{vals[plan.out_arcs][e]:.6g} uses the value of agent {out_c[e]}, "
                         "which does not send this round")

    def _count(self, kind: str, counts_local: np.ndarray, v: np.ndarray, payload_bytes):
        """Record ``counts_local`` messages sent by each of the block's agents."""
        counts = np.zeros(self.n_agents, dtype=np.int64)
        counts[self.start:self.stop] = counts_local
        self._record(kind, counts, self._per_message_bytes(v, payload_bytes))

    # ------------------------------------------------------------------ operations
    def mix(self, weights, values, *, senders=None, payload_bytes=None, copies: bool = False,
            out: np.ndarray | None = None):
        v = self._local_values(values)
        if out is not None:
            check_out(out, v.shape, v)
        mask = self._local_mask(senders)
        w, plan = self._plan(weights)
        self._check_senders("mix", w, plan, mask)
        if not copies:
            self._count("mix", plan.outdeg, v, payload_bytes)
        ext = self._extended(plan, v)
        if out is None:
            return np.asarray(plan.block @ ext).reshape(v.shape)
        # scipy's kernel into ``out`` (zeroed first), as the operator computes into zeros
        csr_product(plan.block, ext.reshape(ext.shape[0], -1), out.reshape(self.n_local, -1))
        return out

    @sections_from(Communicator.gather_from_neighbors)
    def gather_from_neighbors(self, weights, values, *, senders=None, payload_bytes=None,
                              receivers=None, copies=False) -> NeighborValues:
        """As :meth:`Communicator.gather_from_neighbors`; ``receivers`` are local rows.

        Receiver chunks (``receivers=(start, stop)``, as :mod:`rfed.networks.gossip` uses to
        bound memory) of one call sequence on the same ``values`` share one halo exchange, made
        at the chunk starting at row 0: ranks holding different numbers of chunks still make
        the same collective calls. Messages are counted per arc returned, by the receiving
        rank (the sums over ranks are the one-process counts).
        """
        v = self._local_values(values)
        mask = self._local_mask(senders)
        w, plan = self._plan(weights)
        lo, hi = 0, self.n_local
        if receivers is not None:
            lo, hi = (int(r) for r in receivers)
            if not 0 <= lo <= hi <= self.n_local:
                raise ValueError(f"argument 'receivers' must be (start, stop) with 0 <= start "
                                 f"<= stop <= {self.n_local} (local rows), got {receivers!r}")
        cached = self._halo_cache
        if (lo == 0 or cached is None or cached[0] is not v or cached[1] is not plan
                or cached[2] != (senders is None)):
            flat = np.ascontiguousarray(v, dtype=np.float64).reshape(self.n_local, -1)
            if senders is not None:
                # the receivers learn who sent: one more column, 1 for a sender
                flat = np.concatenate([flat, mask[:, None].astype(np.float64)], axis=1)
            cached = self._halo_cache = (v, plan, senders is None, self._extended(plan, flat))
        ext = cached[3]
        rec, snd, wts, ids = plan.arcs
        pos = plan.ext_of_sender
        keep = (rec >= lo) & (rec < hi)
        if senders is not None:
            keep &= ext[pos, -1] == 1.0
            ext = ext[:, :-1]
        if not keep.all():
            rec, snd, wts, ids, pos = rec[keep], snd[keep], wts[keep], ids[keep], pos[keep]
        if not copies:
            counts = np.bincount(snd, minlength=self.n_agents).astype(np.int64)
            self._record("gather_from_neighbors", counts, self._per_message_bytes(
                v, payload_bytes))
        ext = ext.reshape((-1,) + v.shape[1:])
        return NeighborValues(rec, snd, wts, ext[pos].astype(v.dtype, copy=False), ids)

    @sections_from(Communicator.send_along_arcs)
    def send_along_arcs(self, weights, arc_values, *, payload_bytes=None) -> NeighborValues:
        """As :meth:`Communicator.send_along_arcs`, with ``arc_values`` holding one row per arc
        LEAVING this block's agents, in the order of :func:`rfed.networks.comm.arc_list`
        (in one process: every arc); returns the arcs entering the block."""
        w, plan = self._plan(weights)
        a = np.asarray(arc_values)
        if a.ndim < 1 or a.shape[0] != plan.out_arcs.size:
            raise ValueError(f"argument 'arc_values' must have one row per arc leaving this "
                             f"rank's agents ({plan.out_arcs.size}), got shape {a.shape}")
        self._count("send_along_arcs", plan.outdeg, a, payload_bytes)
        flat = np.ascontiguousarray(a, dtype=np.float64).reshape(a.shape[0], -1)
        recv = self._alltoallv(plan.topo, flat[plan.out_remote], plan.arc_send_counts,
                               plan.arc_recv_counts, flat.shape[1])
        rec, snd, wts, ids = plan.arcs
        out = np.empty((rec.size, flat.shape[1]))
        out[plan.in_local] = flat[plan.out_local]
        out[plan.in_remote] = recv
        return NeighborValues(rec, snd, wts, out.reshape((rec.size,) + a.shape[1:]).astype(
            a.dtype, copy=False), ids)

    def publish(self, weights, copies, delta, *, senders=None, payload_bytes=None):
        c = self._local_values(copies, "copies")
        d = self._local_values(delta, "delta")
        if d.shape != c.shape:
            raise ValueError(f"argument 'delta' has shape {d.shape}, copies have {c.shape}")
        w, plan = self._plan(weights)
        mask = self._local_mask(senders)
        self._count("publish", np.where(mask, plan.outdeg, 0), d, payload_bytes)
        shape = (self.n_local,) + (1,) * (c.ndim - 1)
        return c + np.where(mask.reshape(shape), d, 0.0)

    @sections_from(Communicator.gather)
    def gather(self, values, agents=None, *, payload_bytes=None) -> np.ndarray:
        """Agents send their rows to the (replicated) server: ``values[agents]`` of every
        agent, on every rank; ``values`` has this rank's rows."""
        v = self._local_values(values)
        idx = self._agent_index(agents)
        counts = np.bincount(idx, minlength=self.n_agents).astype(np.int64)
        self._count("gather", counts[self.start:self.stop], v, payload_bytes)
        return self.all_rows(v)[idx]

    @sections_from(Communicator.broadcast)
    def broadcast(self, value, agents=None, *, payload_bytes=None) -> np.ndarray:
        """The (replicated) server sends ``value`` to ``agents``; returns ``(len(agents),
        *shape)`` copies on every rank (as in one process); counted by the agents' owners."""
        value = np.asarray(value)
        idx = self._agent_index(agents)
        size = value.nbytes if payload_bytes is None else int(payload_bytes)
        here = int(np.count_nonzero((idx >= self.start) & (idx < self.stop)))
        self.stats.server_messages += here
        self.stats.server_bytes += here * size
        self.stats.messages += here
        self.stats.bytes += here * size
        self.stats.calls["broadcast"] = self.stats.calls.get("broadcast", 0) + 1
        return np.broadcast_to(value, (idx.size,) + value.shape).copy()

    # ------------------------------------------------------------------ engine bookkeeping
    def all_rows(self, values: np.ndarray) -> np.ndarray:
        MPI = self._MPI
        v = self._local_values(values)
        dtype = v.dtype
        v = np.ascontiguousarray(v, dtype=np.float64)
        width = int(np.prod(v.shape[1:], dtype=np.int64))
        out = np.empty((self.n_agents,) + v.shape[1:])
        counts = (np.diff(self.bounds) * width).tolist()
        displs = (self.bounds[:-1] * width).tolist()
        self.comm.Allgatherv(v.reshape(-1), [out.reshape(-1), (counts, displs), MPI.DOUBLE])
        return out.astype(dtype, copy=False)

    def total_stats(self) -> dict:
        snaps = self.comm.allgather(self.stats.snapshot())
        return {k: int(sum(s[k] for s in snaps)) for k in snaps[0]}

    def merge_account(self, account: Any) -> Any:
        return merge_accounts(self.comm.allgather(account))

    def agree(self, reason: str | None) -> str | None:
        reasons = self.comm.allgather(reason)
        for rank, r in enumerate(reasons):
            if r is not None:
                return r if self.size == 1 else f"{r} (rank {rank})"
        return None

    @sections_from(Communicator.root_computes)
    def root_computes(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` called on rank 0 only and broadcast (an exception it raises is raised on
        every rank). The other ranks wait by polling a non-blocking barrier with short sleeps,
        not in a blocking collective, which with MPICH keeps a core busy: while rank 0
        calibrates, the waiting ranks leave it the CPU."""
        value = error = None
        if self.rank == 0:
            try:
                value = fn()
            except Exception as exc:  # every rank raises it below
                error = exc
        self.wait_for_root()
        value, failure = self.comm.bcast(
            (value, None if error is None else (type(error).__name__, str(error))), root=0)
        if error is not None:
            raise error
        if failure is not None:
            raise _rebuilt_error(*failure)
        return value

    def wait_for_root(self) -> None:
        """Return once every rank has called it (:func:`_idle_barrier`)."""
        _idle_barrier(self.comm)


#: Exceptions of rank 0 that the other ranks of :meth:`MPICommunicator.root_computes` raise with
#: the same type (from rank 0's type name and message: no exception object is sent); any other
#: is raised there as a ``RuntimeError`` naming it.
_SHARED_ERRORS: dict[str, type[Exception]] = {cls.__name__: cls for cls in (
    ValueError, TypeError, RuntimeError, ArithmeticError, FloatingPointError, OverflowError,
    ZeroDivisionError, KeyError, IndexError, NotImplementedError, MemoryError,
    np.linalg.LinAlgError)}


def _rebuilt_error(name: str, message: str) -> Exception:
    cls = _SHARED_ERRORS.get(name)
    return cls(message) if cls is not None else RuntimeError(f"{name}: {message}")


def _idle_barrier(comm: Any) -> None:
    """A barrier that sleeps between polls: a rank arriving early does not keep a core busy
    (MPICH's blocking collectives spin) while rank 0 calibrates or writes a file."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(_IDLE_POLL)


def merge_stats(stats: list[CommStats]) -> CommStats:
    """The counters of a run from the ranks' counters: totals and per-agent arrays add up;
    ``calls`` (every rank makes the same calls) is the first rank's.

    Parameters
    ----------
    stats : list of CommStats
        One per rank, in rank order.

    Returns
    -------
    CommStats
    """
    out = CommStats(stats[0].n_agents, calls=dict(stats[0].calls))
    for s in stats:
        out.messages += int(s.messages)
        out.bytes += int(s.bytes)
        out.server_messages += int(s.server_messages)
        out.server_bytes += int(s.server_bytes)
        out.messages_sent = out.messages_sent + s.messages_sent
        out.bytes_sent = out.bytes_sent + s.bytes_sent
    return out


def split_stats(stats: CommStats, bounds: np.ndarray) -> list[CommStats]:
    """Counters of the blocks ``bounds[r] .. bounds[r+1]-1`` whose :func:`merge_stats` is
    ``stats``: each block gets its agents' per-agent counts and their sums; the first block
    also gets the rest of the totals (the server's traffic); ``calls`` is copied.

    Parameters
    ----------
    stats : CommStats
    bounds : ndarray of int, shape ``(n_ranks + 1,)``
        As :func:`block_bounds`.

    Returns
    -------
    list of CommStats
        One per block.
    """
    out = []
    for r in range(len(bounds) - 1):
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        s = CommStats(stats.n_agents, calls=dict(stats.calls))
        s.messages_sent[lo:hi] = stats.messages_sent[lo:hi]
        s.bytes_sent[lo:hi] = stats.bytes_sent[lo:hi]
        s.messages = int(s.messages_sent.sum())
        s.bytes = int(s.bytes_sent.sum())
        out.append(s)
    first = out[0]
    first.messages += int(stats.messages) - sum(s.messages for s in out)
    first.bytes += int(stats.bytes) - sum(s.bytes for s in out)
    first.server_messages, first.server_bytes = int(stats.server_messages), int(stats.server_bytes)
    return out


@dataclass
class SavedBlocks:
    """A distributed run's state saved whole, so that it resumes on any number of ranks.

    Attributes
    ----------
    state : object
        Every agent's state (the algorithm's :meth:`merge_blocks` of the ranks' block states),
        ``comm=None``; the one-process state at the same round.
    stats : CommStats
        The ranks' message counters, merged (:func:`merge_stats`).
    engine_bytes : int
        Engine traffic (halo refreshes) of all ranks so far.
    n_ranks : int
        Ranks that saved it (informative: any number resumes it).
    """

    state: Any
    stats: CommStats
    engine_bytes: int
    n_ranks: int


def gather_blocks(algorithm, comm: MPICommunicator, state) -> SavedBlocks | None:
    """Collective: every rank's block state and counters, merged on rank 0 (``None`` on the
    other ranks).

    Parameters
    ----------
    algorithm : DecentralizedAlgorithm
        Has ``merge_blocks``.
    comm : MPICommunicator
    state
        This rank's block state.

    Returns
    -------
    SavedBlocks or None
    """
    block = (dataclasses.replace(state, comm=None), comm.stats, comm.engine_bytes)
    blocks = comm.comm.gather(block, root=0)
    if comm.rank != 0:
        return None
    return SavedBlocks(algorithm.merge_blocks([b[0] for b in blocks], comm.bounds),
                       merge_stats([b[1] for b in blocks]),
                       int(sum(b[2] for b in blocks)), comm.size)


def scatter_blocks(algorithm, comm: MPICommunicator, saved: SavedBlocks | None):
    """Collective: rank 0 splits ``saved`` into this job's blocks; every rank gets its block
    state with ``comm`` attached, and ``comm``'s counters continue the saved ones.

    Parameters
    ----------
    algorithm : DecentralizedAlgorithm
        Has ``split_state``.
    comm : MPICommunicator
    saved : SavedBlocks or None
        Rank 0's (``None`` on the other ranks).

    Returns
    -------
    state
        This rank's block state.
    """
    parts = None
    if comm.rank == 0:
        if saved is None:
            raise ValueError("argument 'saved' (the saved blocks) is required on rank 0")
        states = algorithm.split_state(saved.state, comm.bounds)
        stats = split_stats(saved.stats, comm.bounds)
        engine = [saved.engine_bytes] + [0] * (comm.size - 1)
        parts = list(zip(states, stats, engine, strict=True))
    state, stats, engine = comm.comm.scatter(parts, root=0)
    comm.stats = stats
    comm.engine_bytes = int(engine)
    return dataclasses.replace(state, comm=comm)


class MPIEngine(Engine):
    """The MPI engine: each rank holds a block of agents; an experiment's runs are checkpointed
    by rank 0 with every rank's block.

    Inside ``use_engine(MPIEngine())`` (:func:`mpi_engine`), every
    :class:`rfed.networks.Network` (and DP-DGT run) built without an explicit communicator gets
    an :class:`MPICommunicator`, and every run of an experiment reports to an
    :class:`MPIRunHook` around this rank's :class:`rfed.experiments.RunContext`.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm, optional
        Default ``COMM_WORLD``.
    """

    name = "mpi"

    def __init__(self, comm: Any = None):
        self.comm = comm

    @sections_from(Engine.communicator)
    def communicator(self, n_agents: int) -> MPICommunicator:
        """``MPICommunicator(n_agents, comm)``: this rank's block of the agents."""
        return MPICommunicator(n_agents, self.comm)

    @sections_from(Engine.run_hook)
    def run_hook(self, hook: Any) -> MPIRunHook:
        """``MPIRunHook(hook, comm)``: rank 0's context decides and writes, the others follow."""
        return MPIRunHook(hook, self.comm)


@contextlib.contextmanager
def mpi_engine(comm: Any = None) -> Iterator[MPIEngine]:
    """The block runs on the MPI engine (:class:`MPIEngine` on ``comm``, default
    ``COMM_WORLD``): networks built without a communicator get an :class:`MPICommunicator`,
    and an experiment's runs are checkpointed across the ranks.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm, optional

    Yields
    ------
    MPIEngine
    """
    with use_engine(MPIEngine(comm)) as engine:
        yield engine


# ---------------------------------------------------------------------- experiments
class MPIRunHook:
    """Checkpoints of an experiment's runs on the MPI engine (``rfed run NAME --engine mpi``).

    The MPI engine (:meth:`MPIEngine.run_hook`) installs it on every rank around the rank's
    own :class:`rfed.experiments.RunContext`; rank 0's context has the results folder and
    decides, the others follow:

    * a run starting: rank 0's context says whether it is done (a resumed experiment replaying
      it), resumes from a checkpoint or starts afresh; every rank gets the same answer, a
      replayed result or a resumed state arriving as its own block (with its communicator,
      whose counters continue the saved ones);
    * a checkpoint (every ``--checkpoint-every`` rounds and at the end of each run): every rank
      calls it at the same round; the blocks are gathered and merged (:class:`SavedBlocks`),
      rank 0's context writes them, and no rank goes on before the file is whole.

    A checkpoint therefore resumes on any number of ranks. Algorithms whose state is not split
    into blocks (run redundantly by every rank) are saved from rank 0 and broadcast on resume.

    Parameters
    ----------
    inner : RunContext
        This rank's context (only rank 0's writes anything).
    comm : mpi4py.MPI.Intracomm, optional
        Default ``COMM_WORLD``.
    """

    def __init__(self, inner: Any, comm: Any = None):
        self.inner = inner
        self.world = _mpi().COMM_WORLD if comm is None else comm
        self.rank = self.world.Get_rank()
        self.secure = bool(getattr(inner, "secure", False))
        self._algorithm: Any = None
        self._has_saver = False
        self._inner_save: Callable[[dict], None] | None = None

    def start_run(self, algorithm, problem, n_rounds: int, eval_every: int):
        """Hook of :meth:`rfed.algorithms.base.Algorithm.run` (see its ``run_hook``).

        Parameters
        ----------
        algorithm : Algorithm
        problem : Problem
        n_rounds, eval_every : int

        Returns
        -------
        tuple
            ``(done, resume, save, every)`` as :func:`rfed.algorithms.base.run_hook` describes, the
            same on every rank.
        """
        self._algorithm = algorithm
        done = resume = save = None
        every = 0
        if self.rank == 0:
            done, resume, save, every = self.inner.start_run(algorithm, problem, n_rounds,
                                                             eval_every)
        self._inner_save = save
        kind = "done" if done is not None else "resume" if resume is not None else "fresh"
        kind, has_saver, every = self.world.bcast((kind, save is not None, every), root=0)
        # done, resume and save are rank 0's (None on the other ranks)
        if kind == "done":
            meta = self.world.bcast(
                dataclasses.replace(done, state=None) if done is not None else None, root=0)
            state = self._restore(algorithm, done.state if done is not None else None)
            return dataclasses.replace(meta, state=state), None, None, 0
        if kind == "resume":
            meta = self.world.bcast({k: v for k, v in resume.items() if k != "state"}
                                    if resume is not None else None, root=0)
            state = self._restore(algorithm, resume["state"] if resume is not None else None)
            resume = {**meta, "state": state}
        self._has_saver = has_saver
        return None, resume, _CollectiveSave(self) if has_saver else None, every

    def end_run(self, result) -> None:
        """Hook of :meth:`Algorithm.run`: rank 0's context records the finished run (its state
        gathered whole, so that a resumed experiment can replay it on any number of ranks).

        Parameters
        ----------
        result : RunResult
            This rank's result (its block state).
        """
        if not self._has_saver:   # nothing is written: no state to gather
            if self.rank == 0:
                self.inner.end_run(result)
            return
        saved = self._saved(result.state)
        if self.rank == 0:
            self.inner.end_run(dataclasses.replace(result, state=saved))
        _idle_barrier(self.world)

    def due(self) -> bool:
        """Collective: whether a periodic checkpoint is due, as rank 0's context says (its
        wall-clock floor), the same answer on every rank.

        Returns
        -------
        bool
        """
        due = getattr(self._inner_save, "due", None) if self.rank == 0 else None
        return bool(self.world.bcast(due() if due is not None else True, root=0))

    def save(self, payload: dict) -> None:
        """Collective: the ranks' blocks merged into ``payload['state']``, written by rank 0.

        Parameters
        ----------
        payload : dict
            The checkpoint payload, this rank's block state in ``payload['state']``.
        """
        saved = self._saved(payload["state"])
        if self._inner_save is not None:   # rank 0
            self._inner_save({**payload, "state": saved})
        _idle_barrier(self.world)

    # ------------------------------------------------------------------ helpers
    def _saved(self, state) -> Any:
        """Collective: ``state`` as saved on rank 0 (``SavedBlocks`` of a block state)."""
        comm = getattr(state, "comm", None)
        if isinstance(comm, MPICommunicator) and hasattr(self._algorithm, "merge_blocks"):
            return gather_blocks(self._algorithm, comm, state)
        return state   # every rank holds the same state: rank 0's is saved

    def _restore(self, algorithm, saved) -> Any:
        """Collective: this rank's state from rank 0's saved one (a whole state saved by a
        one-process run is split like a saved MPI run's)."""
        comm = getattr(saved, "comm", None)
        if (self.rank == 0 and hasattr(algorithm, "split_state") and comm is not None
                and not isinstance(comm, MPICommunicator)):
            saved = SavedBlocks(dataclasses.replace(saved, comm=None), comm.stats, 0, 1)
        is_blocks = self.world.bcast(isinstance(saved, SavedBlocks), root=0)
        if is_blocks:
            comm = _check_comm(_algorithm_comm(algorithm))
            return scatter_blocks(algorithm, comm, saved)
        return self.world.bcast(saved, root=0)



class _CollectiveSave:
    """``save(payload)`` of an :class:`MPIRunHook` (every rank calls it at the same round)."""

    collective = True

    def __init__(self, hook: MPIRunHook):
        self.hook = hook

    def __call__(self, payload: dict) -> None:
        self.hook.save(payload)

    def due(self) -> bool:
        return self.hook.due()


# ---------------------------------------------------------------------- run loop
def _binding(algorithm, comm: MPICommunicator, n_rounds: int) -> dict[str, Any]:
    """What a checkpoint of :func:`run_mpi` is bound to (another run's file is refused)."""
    return {"format": CHECKPOINT_FORMAT, "engine": "mpi", "algorithm": str(algorithm.name),
            "algorithm_class": type(algorithm).__qualname__, "n_rounds": int(n_rounds),
            "n_agents": int(comm.n_agents)}


def _save(path: Path, algorithm, comm: MPICommunicator, state, t: int, n_rounds: int) -> None:
    saved = gather_blocks(algorithm, comm, state)
    if comm.rank == 0:
        save_state(path, {"round": int(t), "n_ranks": comm.size, "saved": saved},
                   kind=CHECKPOINT_KIND, bind=_binding(algorithm, comm, n_rounds))
    comm.wait_for_root()  # the file is whole before any rank goes on


def _load(path: Path, algorithm, comm: MPICommunicator, n_rounds: int) -> tuple[Any, int]:
    """Rank 0 reads the checkpoint and hands every rank its block; all ranks raise alike."""
    payload, error = None, None
    if comm.rank == 0:
        try:
            payload = load_state(path, kind=CHECKPOINT_KIND,
                                 expect=_binding(algorithm, comm, n_rounds))
            if not isinstance(payload, dict) or not isinstance(payload.get("saved"),
                                                               SavedBlocks):
                raise StateFileError(str(path), "is malformed (no saved blocks)")
        except StateFileError as exc:
            error = str(exc.within("argument 'resume_from'"))
    error = comm.comm.bcast(error, root=0)
    if error is not None:
        raise ValueError(error)
    state = scatter_blocks(algorithm, comm, payload["saved"] if payload is not None else None)
    return state, int(state.t)


def run_mpi(algorithm, problem, n_rounds: int, *, rng, x0=None, checkpoint_every: int = 0,
            checkpoint: str | Path | None = None, resume_from: str | Path | None = None,
            callback: Callable[[int, Any], None] | None = None) -> dict | None:
    """Run ``n_rounds`` rounds of a decentralized ``algorithm`` whose communicator is an
    :class:`MPICommunicator`; every rank calls it with the same arguments.

    The run holds only this rank's rows of ``problem``: a full :class:`rfed.problems.Problem`
    is sharded first (:func:`shard_for_rank`; drop your own reference to it to free the other
    agents' rows), so nothing in the run can read another rank's agents.

    Parameters
    ----------
    problem : Problem or QuadraticResourceAllocation
        The whole problem, or this rank's shard of it (``problem.agents`` the rank's block).
    checkpoint_every : int
        Save a checkpoint every this many rounds (0: never) to ``checkpoint``.
    checkpoint : path, optional
        One file, written atomically by rank 0: the ranks' block states merged into the state
        of every agent (:meth:`merge_blocks` of the algorithm, see
        :mod:`rfed.algorithms.decentralized._blocks`) and their message counters merged, as
        :class:`SavedBlocks`, in an :mod:`rfed.state` file (checksummed, no pickle) bound to
        the run (algorithm, ``n_rounds``, number of agents). One file rather than one per rank:
        a job killed while saving leaves the previous whole checkpoint, never a mix of rounds.
        Its folder must exist on rank 0 (checked before the first round; every rank raises).
    resume_from : path, optional
        Continue from such a checkpoint (``rng`` and ``x0`` are then unused) on ANY number of
        ranks: rank 0 splits the saved state into this job's blocks. The run ends
        bit-identical to an uninterrupted one (iterates, privacy report, message counts),
        whatever the numbers of ranks before and after. A damaged file or another run's raises
        ``ValueError`` on every rank (one line naming the file) before any round runs.
    callback : callable, optional
        ``callback(round, state)`` on every rank after every round.

    Returns
    -------
    dict or None
        On rank 0: ``x`` (every agent's final output point, ``(n_agents, *point_shape)``, agent
        order), ``output`` (the algorithm's output point), ``privacy`` (the merged report,
        :meth:`~rfed.algorithms.base.Algorithm.privacy`: the same keys private or not),
        ``account`` (the merged account), ``comm`` (protocol messages and bytes summed over
        ranks) and ``engine_bytes``. ``None`` on the other ranks.
    """
    if checkpoint_every and checkpoint is None:
        raise ValueError("argument 'checkpoint' (a file path) is required with "
                         "'checkpoint_every'")
    problem = shard_for_rank(problem, _algorithm_comm(algorithm))
    if checkpoint is not None:
        # rank 0 writes the file: it checks the folder, and every rank raises alike
        world = _check_comm(_algorithm_comm(algorithm))
        error = _checkpoint_path_error(Path(checkpoint)) if world.rank == 0 else None
        error = world.comm.bcast(error, root=0)
        if error is not None:
            raise ValueError(error)
    if resume_from is not None:
        comm = _check_comm(_algorithm_comm(algorithm))
        state, start = _load(Path(resume_from), algorithm, comm, n_rounds)
    else:
        rng = as_generator(rng)
        if x0 is None:
            x0 = problem.manifold.random_point(rng)
        x0 = problem.manifold.check_point(x0, "x0")
        state = algorithm.init(problem, x0, rng)
        comm = _check_comm(state.comm)
        start = 0
    for t in range(start + 1, int(n_rounds) + 1):
        state = algorithm.step(problem, state)
        if callback is not None:
            callback(t, state)
        if checkpoint is not None and checkpoint_every and t % checkpoint_every == 0 \
                and t < n_rounds:
            _save(Path(checkpoint), algorithm, comm, state, t, n_rounds)
    x_all = comm.all_rows(algorithm._output_points(state))
    output = algorithm.output(problem, state)
    stats = comm.total_stats()
    account = comm.merge_account(state.ledger)
    # collective: the algorithm's report (the one shape, private or not), computed once
    report = algorithm.privacy(state)
    engine = comm.comm.reduce(comm.engine_bytes, root=0)
    if comm.rank != 0:
        return None
    return {"x": x_all, "output": output, "privacy": report,
            "account": account, "comm": stats, "engine_bytes": int(engine)}


def shard_for_rank(problem: Any, comm: Any) -> Any:
    """``problem`` as the rank of ``comm`` (an :class:`MPICommunicator`) holds it in a run.

    A full :class:`rfed.problems.Problem` or
    :class:`rfed.problems.QuadraticResourceAllocation` becomes
    ``problem.shard(comm.agents, reducer=...)``; a shard must hold exactly the rank's block
    (checked) and gets a reducer if it has none. The reducer is an :class:`MPICommunicator` on
    the same MPI communicator, so ``cost`` and ``grad`` (hence the algorithms' metrics) are
    reductions with the one-process bits. Anything else is returned as is.

    Parameters
    ----------
    problem : Problem or QuadraticResourceAllocation
    comm : MPICommunicator

    Returns
    -------
    Problem
        The rank's shard.
    """
    from rfed.problems.base import Problem
    from rfed.problems.dispatch import QuadraticResourceAllocation

    comm = _check_comm(comm)
    if not isinstance(problem, (Problem, QuadraticResourceAllocation)):
        return problem
    if problem.n_agents != comm.n_agents:
        raise ValueError(f"argument 'problem' has {problem.n_agents} agents, the algorithm's "
                         f"communicator {comm.n_agents}")
    if not problem.is_shard:
        return problem.shard(comm.agents, reducer=MPICommunicator(comm.n_agents, comm.comm))
    if not np.array_equal(problem.agents, comm.agents):
        raise ValueError(f"argument 'problem' is a shard of agents {problem.agents}; rank "
                         f"{comm.rank} runs agents {comm.start}..{comm.stop - 1}")
    if problem.reducer is None:
        problem.reducer = MPICommunicator(comm.n_agents, comm.comm)
    return problem


def _algorithm_comm(algorithm) -> Any:
    """The communicator an algorithm runs on: its network's, or (DP-DGT, which builds one per
    run) a new one from its factory."""
    network = getattr(algorithm, "network", None)
    if network is not None:
        return network.comm
    factory = getattr(algorithm, "communicator", None)
    graph = getattr(algorithm, "graph", None)
    return None if factory is None or graph is None else factory(graph.n_nodes)


def _check_comm(comm: Any) -> MPICommunicator:
    if not isinstance(comm, MPICommunicator):
        raise TypeError("run_mpi needs an algorithm that talks through an MPICommunicator (its "
                        "network's, or built inside mpi_engine()), got "
                        f"{type(comm).__name__}")
    return comm
