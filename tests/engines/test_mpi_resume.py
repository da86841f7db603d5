"""MPI checkpoints resume on another number of ranks, bit-identically; the noise is calibrated by
rank 0 alone (``MPICommunicator.root_computes``).

Four ``mpiexec`` launches form a chain: 2 ranks save a checkpoint after round 3 of every case
and stop; 3 ranks resume it (2 -> 3) and save their own; 1 rank resumes that (3 -> 1) and saves;
4 ranks resume the last (1 -> 4). Every resumed run must end exactly as the uninterrupted
one-process run: iterates, output, privacy report, message counts. Each launch also counts, per
rank, the calls of the accountant (``certify``): only rank 0 may call it.

Run as a script under ``mpiexec``: ``--child OUT RESUME SAVE`` resumes every case from the files
``RESUME.<case>`` (``-``: none) and writes rank 0's results to ``OUT``, and runs every case afresh
saving ``SAVE.<case>`` after round 3 (``-``: none).
"""

from __future__ import annotations

import dataclasses
import pickle
import sys

import numpy as np
import pytest
from test_mpi_engine import (
    N_AGENTS,
    N_ROUNDS,
    SEED,
    _cases,
    _launch,
    _mpi_cases,
    needs_mpi,
    run_in_process,
)

from rfed.networks.comm import CommStats, InProcessCommunicator
from rfed.networks.network import Network
from rfed.state import load_state

#: Every decentralized algorithm (with DP-DPSGD and noisy DDGT), on 16 agents.
CASES = ("doadp-budget-topk", "dpdl", "dpdpsgd", "dpdda", "dpdgt-budget", "ddgt")
SAVE_AT = 3


class _Stop(Exception):
    pass


def _count_accountant_calls() -> list[int]:
    """Count every call of the certified accountant in this process (``certify``, which
    ``calibrate`` and every report go through)."""
    import rfed.algorithms.decentralized._privacy as dec_privacy
    import rfed.algorithms.private as contract
    import rfed.privacy.budget as budget

    calls = [0]
    original = budget.certify

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    budget.certify = counted
    dec_privacy.certify = counted
    contract.certify = counted
    return calls


def run_child(out: str, resume: str, save: str) -> None:
    from mpi4py import MPI

    from rfed.engines.mpi import run_mpi

    calls = _count_accountant_calls()
    world = MPI.COMM_WORLD
    results, rounds_saved = {}, {}

    def stop(t, state):   # the job fails in the round after the checkpoint
        if t == SAVE_AT + 1:
            raise _Stop

    # the counters are the network's (absolute): the resumed and the saving run of a case get
    # networks of their own
    for (name, alg, prob, x0), again in zip(_mpi_cases(), _mpi_cases(), strict=True):
        if name not in CASES:
            continue
        if resume != "-":
            res = run_mpi(alg, prob, N_ROUNDS, rng=None, resume_from=f"{resume}.{name}")
            if res is not None:
                results[name] = {"x": res["x"], "output": res["output"],
                                 "privacy": res["privacy"], "messages": res["comm"]}
        if save != "-":
            _, alg, prob, x0 = again
            file = f"{save}.{name}"
            try:
                run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0,
                        checkpoint_every=SAVE_AT, checkpoint=file, callback=stop)
            except _Stop:
                pass
            if world.Get_rank() == 0:
                payload = load_state(file, kind="mpi-checkpoint")
                rounds_saved[name] = (payload["round"], payload["n_ranks"])
    per_rank = world.gather(calls[0], root=0)
    # root_computes: rank 0's value on every rank; rank 0's exception raised on every rank
    from rfed.engines.mpi import MPICommunicator

    comm = MPICommunicator(N_AGENTS)
    value = comm.root_computes(lambda: 41 + world.Get_rank())
    try:
        comm.root_computes(lambda: 1 / world.Get_rank())
        raised = None
    except ZeroDivisionError as exc:
        raised = type(exc).__name__
    root = world.gather((value, raised), root=0)
    if world.Get_rank() == 0:
        with open(out, "wb") as fh:
            pickle.dump({"results": results, "saved": rounds_saved, "calls": per_rank,
                         "root_computes": root}, fh)


@pytest.fixture(scope="module")
def reference():
    return run_in_process()


def _assert_same(got: dict, reference: dict) -> None:
    assert set(got) == set(CASES)
    for name in CASES:
        ref = reference[name]
        np.testing.assert_array_equal(got[name]["x"], ref["x"], err_msg=name)
        np.testing.assert_array_equal(got[name]["output"], ref["output"], err_msg=name)
        assert got[name]["privacy"] == ref["privacy"], name
        assert got[name]["messages"] == ref["messages"], name


@needs_mpi
def test_checkpoints_resume_on_other_rank_counts(reference, tmp_path):
    """2 -> 3, 3 -> 1 and 1 -> 4 ranks: each resumed run ends as the uninterrupted one-process
    run; only rank 0 calls the accountant (the budget cases calibrate at init)."""
    chain = [(2, "-", "ck2"), (3, "ck2", "ck3"), (1, "ck3", "ck1"), (4, "ck1", "-")]
    for ranks, resume, save in chain:
        out = tmp_path / f"out{ranks}.pkl"
        _launch(ranks, "--child-resume", str(out),
                "-" if resume == "-" else str(tmp_path / resume),
                "-" if save == "-" else str(tmp_path / save), script=__file__)
        got = pickle.loads(out.read_bytes())
        if resume != "-":
            _assert_same(got["results"], reference)
        if save != "-":
            assert got["saved"] == {name: (SAVE_AT, ranks) for name in CASES}
        # rank 0 calibrates (fresh budget runs) and reports; the other ranks never account
        assert got["calls"][0] > 0 and got["calls"][1:] == [0] * (ranks - 1), got["calls"]
        assert got["root_computes"] == [(41, "ZeroDivisionError")] * ranks


def _stepped(name: str, rounds: int):
    cases = {c[0]: c for c in _cases(lambda g, w: Network(g, w), InProcessCommunicator)}
    _, alg, prob, x0 = cases[name]
    state = alg.init(prob, x0, np.random.default_rng(SEED))
    for _ in range(rounds):
        state = alg.step(prob, state)
    return alg, prob, state


@pytest.mark.parametrize("name", CASES)
def test_split_then_merge_gives_the_state_back(name):
    """Splitting a one-process state into blocks of 5, 6 and 5 agents and merging them gives
    every field back bit for bit (rows, shared fields, the account's charges and report)."""
    alg, _, state = _stepped(name, 2)
    bounds = [0, 5, 11, N_AGENTS]
    blocks = alg.split_state(state, bounds)
    for lo, hi, block in zip(bounds[:-1], bounds[1:], blocks, strict=True):
        assert block.comm is None
        for field in alg.state_rows:
            np.testing.assert_array_equal(getattr(block, field), getattr(state, field)[lo:hi])
    whole = alg.merge_blocks(blocks, bounds)
    for f in dataclasses.fields(state):
        a, b = getattr(state, f.name), getattr(whole, f.name)
        if f.name == "comm":
            assert b is None
        elif f.name == "ledger":
            assert b.report() == a.report()
            if hasattr(a, "counts"):
                np.testing.assert_array_equal(b.counts, a.counts)
                np.testing.assert_array_equal(b.ledger.rounds_participated,
                                              a.ledger.rounds_participated)
        elif f.name == "rng":
            assert b.bit_generator.state == a.bit_generator.state
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a)
        else:
            assert b == a, f.name


def test_account_split_charges_the_past_once():
    """The first block keeps every past charge, the others start empty at the same round:
    their merge after more charges equals one account charged throughout."""
    from rfed.algorithms.decentralized._blocks import merge_accounts, split_account

    alg, prob, state = _stepped("dpdda", 2)
    parts = split_account(state.ledger, 3)
    assert [int(p.counts.sum()) for p in parts[1:]] == [0, 0]
    assert {p.rounds for p in parts} == {state.ledger.rounds}
    active = np.arange(N_AGENTS) % 3 == 0
    whole = merge_accounts(parts)
    whole.record_round(active)
    blocks = [np.zeros(N_AGENTS, bool) for _ in range(3)]
    for k, (lo, hi) in enumerate([(0, 5), (5, 11), (11, N_AGENTS)]):
        blocks[k][lo:hi] = active[lo:hi]
        parts[k].record_round(blocks[k])
    merged = merge_accounts(parts)
    np.testing.assert_array_equal(merged.counts, whole.counts)
    assert merged.report() == whole.report()


def test_blocks_that_disagree_on_a_shared_field_are_refused():
    alg, _, state = _stepped("doadp-budget-topk", 1)
    blocks = alg.split_state(state, [0, 8, N_AGENTS])
    blocks[1] = dataclasses.replace(blocks[1], seed=blocks[1].seed + 1)
    with pytest.raises(ValueError, match="shared field 'seed'"):
        alg.merge_blocks(blocks, [0, 8, N_AGENTS])
    with pytest.raises(ValueError, match="field 'x' has shape"):
        alg.merge_blocks(alg.split_state(state, [0, 8, N_AGENTS]), [0, 7, N_AGENTS])
    with pytest.raises(ValueError, match="argument 'bounds'"):
        alg.split_state(state, [0, 9, 9, N_AGENTS])


def test_counters_split_and_merge_back():
    from rfed.engines.mpi import merge_stats, split_stats

    stats = CommStats(6, messages=40, bytes=400, server_messages=3, server_bytes=30,
                      messages_sent=np.array([1, 2, 3, 4, 5, 22]),
                      bytes_sent=np.array([10, 20, 30, 40, 50, 220]), calls={"mix": 7})
    parts = split_stats(stats, np.array([0, 2, 3, 6]))
    assert [p.messages for p in parts] == [6, 3, 31]   # rank 0: its agents' 3 + the server's 3
    merged = merge_stats(parts)
    assert merged.snapshot() == stats.snapshot() and merged.calls == stats.calls
    np.testing.assert_array_equal(merged.messages_sent, stats.messages_sent)
    np.testing.assert_array_equal(merged.bytes_sent, stats.bytes_sent)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child-resume"]:
        run_child(*sys.argv[2:5])
