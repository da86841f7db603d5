"""Agent blocks of a decentralized state: merge the blocks of a run into one state, split it again.

A distributed engine (:mod:`rfed.engines.mpi`) holds the agents in contiguous blocks, one per
process, and each process keeps the state of its block. A checkpoint must resume on any number
of processes, so every decentralized algorithm declares how its state divides:

* **rows** (:attr:`BlockStates.state_rows`): arrays with one row per agent of the block, in
  agent order (iterates, momenta, public copies, duals...); merging concatenates the blocks'
  rows, splitting slices them;
* **the privacy account** (field ``ledger``): each block charges the releases of its own agents
  (:func:`merge_accounts` adds them up); a split gives the first block the whole account so far
  and every other block an empty account at the same round (:func:`split_account`), so the
  merge of the resumed blocks is again the whole run's account;
* **shared** fields: everything else (round, seed, the run's generator, noise level, public
  schedules, ``info``) is the same in every block; merging checks that it is (an error names
  the field that differs) and splitting copies it;
* ``comm`` (the engine) is not part of a saved state: merged and split states carry
  ``comm=None`` and the engine attaches its own communicator.

An algorithm whose state holds other per-agent data (DPDL's per-arc calibration weights)
extends :meth:`BlockStates._merge_extra` and :meth:`BlockStates._split_extra`.

The merge of the blocks of a run on ``K`` processes equals the one-process state at the same
round (rows bit for bit; the account gives the same reports), and the split of a state into any
``K'`` blocks continues bit-identically: an agent's randomness is keyed by its id and the round
(:mod:`rfed.randomness`), not by the process holding it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from rfed.privacy.ledger import PrivacyLedger

__all__ = ["BlockStates", "merge_accounts", "split_account"]


def merge_accounts(accounts: Sequence[Any]) -> Any:
    """One privacy account from the accounts of a run's blocks (each charged its own agents).

    Per-agent release counts add up; the ledgers are merged with
    :meth:`rfed.privacy.PrivacyLedger.merge`; rounds must agree. An account without per-agent
    charges (DP-DGT's, identical in every block) is taken from the first block.
    """
    accounts = [a for a in accounts if a is not None]
    if not accounts:
        return None
    out = copy.deepcopy(accounts[0])
    rounds = {a.rounds for a in accounts}
    if len(rounds) != 1:
        raise ValueError(f"the blocks' accounts disagree on the rounds done: {sorted(rounds)}")
    if hasattr(out, "counts") and hasattr(out, "ledger"):
        for a in accounts[1:]:
            out.counts = out.counts + a.counts
            out.ledger = out.ledger.merge(a.ledger)
    if hasattr(out, "_memo"):
        out._memo = {}
    return out


def split_account(account: Any, n_blocks: int) -> list[Any]:
    """``n_blocks`` accounts whose :func:`merge_accounts` is ``account``: the first is a copy of
    it (every charge so far), the others charge nothing yet but stand at the same round.

    An account without per-agent charges (DP-DGT's) is copied to every block.
    """
    if account is None:
        return [None] * n_blocks
    first = copy.deepcopy(account)
    if hasattr(first, "_memo"):
        first._memo = {}
    out = [first]
    for _ in range(n_blocks - 1):
        other = copy.deepcopy(first)
        if hasattr(other, "counts") and hasattr(other, "ledger"):
            other.counts = np.zeros_like(first.counts)
            led = first.ledger
            other.ledger = PrivacyLedger(led.n_agents, led.method, led.neighboring,
                                         pld_discretization=led.pld_discretization,
                                         keep_history=led.keep_history,
                                         description=led.description)
        out.append(other)
    return out


def _same(a: Any, b: Any) -> bool:
    """Equality of two shared values (arrays bit for bit, generators by their state)."""
    if a is b:
        return True
    if isinstance(a, np.random.Generator) or isinstance(b, np.random.Generator):
        return (isinstance(a, np.random.Generator) and isinstance(b, np.random.Generator)
                and a.bit_generator.state == b.bit_generator.state)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _check_bounds(bounds: Any, n_blocks: int | None = None) -> np.ndarray:
    b = np.asarray(bounds, dtype=np.int64)
    if b.ndim != 1 or b.size < 2 or b[0] != 0 or np.any(np.diff(b) < 1):
        raise ValueError(f"argument 'bounds' must be increasing block bounds 0 = b_0 < b_1 < "
                         f"... < b_K = n_agents, got {bounds!r}")
    if n_blocks is not None and b.size != n_blocks + 1:
        raise ValueError(f"argument 'bounds' has {b.size - 1} blocks, got {n_blocks} states")
    return b


class BlockStates:
    """Merge and split of a decentralized algorithm's block states (see the module docstring).

    Subclasses declare :attr:`state_rows`.
    """

    #: Fields of the state with one row per agent of the block (leading axis ``n_local``).
    state_rows: ClassVar[tuple[str, ...]] = ()
    #: Fields handled apart: the engine (``comm``) and the privacy account (``ledger``).
    _not_shared: ClassVar[tuple[str, ...]] = ("comm", "ledger")

    def _extra_fields(self) -> tuple[str, ...]:
        """Fields merged and split by :meth:`_merge_extra` / :meth:`_split_extra`."""
        return ()

    def merge_blocks(self, blocks: Sequence[Any], bounds: Any) -> Any:
        """The state of every agent from the states of blocks ``bounds[k] .. bounds[k+1]-1``.

        Parameters
        ----------
        blocks : sequence of states
            One per block, in block order (their ``comm`` is ignored).
        bounds : array of int, shape ``(K + 1,)``
            Block bounds (``bounds[-1]`` agents in all).

        Returns
        -------
        state
            With ``comm=None``: rows concatenated, accounts merged, shared fields checked equal.

        Raises
        ------
        ValueError
            A block's rows do not match its size, or the blocks disagree on a shared field.
        """
        blocks = list(blocks)
        b = _check_bounds(bounds, len(blocks))
        sizes = np.diff(b)
        first = blocks[0]
        changes: dict[str, Any] = {"comm": None,
                                   "ledger": merge_accounts([s.ledger for s in blocks])}
        for name in self.state_rows:
            values = [getattr(s, name) for s in blocks]
            if all(v is None for v in values):
                changes[name] = None
                continue
            for k, (v, size) in enumerate(zip(values, sizes, strict=True)):
                if v is None or np.shape(v)[:1] != (size,):
                    raise ValueError(f"block {k} holds {size} agents but its field '{name}' "
                                     f"has shape {None if v is None else np.shape(v)}")
            changes[name] = np.concatenate(values)
        skip = set(self.state_rows) | set(self._not_shared) | set(self._extra_fields())
        for f in dataclasses.fields(first):
            if f.name in skip:
                continue
            for k, s in enumerate(blocks[1:], start=1):
                if not _same(getattr(first, f.name), getattr(s, f.name)):
                    raise ValueError(f"the blocks disagree on the shared field '{f.name}' "
                                     f"(block 0 and block {k})")
        changes.update(self._merge_extra(blocks, b))
        return dataclasses.replace(first, **changes)

    def split_state(self, state: Any, bounds: Any) -> list[Any]:
        """The states of blocks ``bounds[k] .. bounds[k+1]-1`` (``comm=None``) of a whole state
        (:meth:`merge_blocks` inverts it; see :func:`split_account` for the accounts)."""
        b = _check_bounds(bounds)
        n_blocks = b.size - 1
        for name in self.state_rows:
            v = getattr(state, name)
            if v is not None and np.shape(v)[:1] != (b[-1],):
                raise ValueError(f"field '{name}' has shape {np.shape(v)}; a whole state of "
                                 f"{b[-1]} agents has one row per agent")
        accounts = split_account(state.ledger, n_blocks)
        extras = self._split_extra(state, b)
        out = []
        for k in range(n_blocks):
            lo, hi = int(b[k]), int(b[k + 1])
            changes: dict[str, Any] = {"comm": None, "ledger": accounts[k], **extras[k]}
            for name in self.state_rows:
                v = getattr(state, name)
                changes[name] = None if v is None else np.array(v[lo:hi])
            # shared fields are copied, so that no two blocks share a mutable object
            shared = {f.name: copy.deepcopy(getattr(state, f.name))
                      for f in dataclasses.fields(state)
                      if f.name not in changes}
            out.append(dataclasses.replace(state, **shared, **changes))
        return out

    def _merge_extra(self, blocks: list[Any], bounds: np.ndarray) -> dict[str, Any]:
        """Whole values of the fields of :meth:`_extra_fields` (none by default)."""
        return {}

    def _split_extra(self, state: Any, bounds: np.ndarray) -> list[dict[str, Any]]:
        """Per block, the values of the fields of :meth:`_extra_fields` (none by default)."""
        return [{} for _ in range(bounds.size - 1)]
