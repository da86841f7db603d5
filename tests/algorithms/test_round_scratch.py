"""The decentralized rounds that write temporaries into per-run reused arrays
(:class:`rfed.algorithms.decentralized._common.ScratchArrays`) never let one escape: every
state a round returns keeps its values while later rounds run, and shares no memory with the
reused arrays. (That the rounds keep their bits is the pinned digests' job.)"""

import copy
import dataclasses

import numpy as np
import pytest

from rfed.algorithms.decentralized import (
    DOADP,
    DPDDA,
    DPDGT,
    DPDL,
    DPDPSGD,
    NoisyDDGT,
    NoisyDSGD,
    calibration_weights,
)
from rfed.algorithms.decentralized._common import ScratchArrays, scratch_of
from rfed.networks import Network, circulant, digraph_from_edges
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import QuadraticResourceAllocation
from rfed.problems.linear import HingeSVM, L2Regularizer, LogisticRegression

N, DIM, RECORDS = 40, 3, 6


def _linear_data(rng):
    features = rng.standard_normal((N, RECORDS, DIM)) / (2.0 * np.sqrt(DIM))
    labels = np.where(rng.random((N, RECORDS)) < 0.5, -1.0, 1.0)
    return features, labels


def _build(name):
    rng = np.random.default_rng(3)
    if name in ("DP-DGT", "noisy DDGT"):
        problem = QuadraticResourceAllocation(1.0 + rng.random((N, DIM)),
                                              rng.standard_normal((N, DIM)), np.zeros((N, DIM)),
                                              np.full((N, DIM), 10.0), rng.random((N, DIM)))
        src = np.repeat(np.arange(N), 2)
        graph = digraph_from_edges(N, np.stack([src, (src + np.tile([1, 2], N)) % N], axis=1))
        noise = {"theta_xi": LaplaceSchedule(0.01, 0.995),
                 "theta_zeta": LaplaceSchedule(0.01, 0.995)}
        alg = DPDGT(graph, **noise) if name == "DP-DGT" else NoisyDDGT(graph, **noise)
        return alg, problem
    net = Network(circulant(N, 2))
    if name == "DP-DDA":
        problem = HingeSVM(*_linear_data(rng), L2Regularizer(0.1), feature_bound=1.0)
        return DPDDA(net, n_active=N // 10, sampler="maximal", gamma=1.0,
                     noise_multiplier=1.0), problem
    problem = LogisticRegression(*_linear_data(rng), L2Regularizer(0.01), feature_bound=1.0)
    if name == "DO-ADP":
        return DOADP(net, alpha=0.1, p=1.0, grad_bound=1.0, noise_multiplier=1.0), problem
    if name == "DPDL":
        return DPDL(net, lr=0.1, batch_size=3, clip=1.0, noise_multiplier=1.0), problem
    if name == "DP-DPSGD":
        return DPDPSGD(net, lr=0.1, batch_size=3, clip=1.0, noise_multiplier=1.0), problem
    if name == "DO-ADP p=0.5 top-k":
        return DOADP(net, alpha=0.1, p=0.5, k=2, grad_bound=1.0, noise_multiplier=1.0), problem
    return NoisyDSGD(net, alpha=0.1, grad_bound=1.0, noise_multiplier=1.0), problem


def _arrays(state):
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)
            if type(getattr(state, f.name)) is np.ndarray}


ALGORITHMS = ["DO-ADP", "DO-ADP p=0.5 top-k", "noisy DSGD", "DP-DGT", "noisy DDGT", "DP-DDA",
              "DPDL", "DP-DPSGD"]
#: Those whose rounds write the next state into the arrays of a state two rounds old.
RECYCLING = ["DP-DGT", "noisy DDGT", "DPDL", "DP-DPSGD", "DP-DDA", "DO-ADP", "noisy DSGD"]


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_returned_state_is_never_written_by_a_later_round(name):
    alg, problem = _build(name)
    state = alg.init(problem, np.zeros(DIM), np.random.default_rng(0))
    kept, snapshots = [], []
    for _ in range(4):
        state = alg.step(problem, state)
        kept.append(state)
        snapshots.append({k: v.copy() for k, v in _arrays(state).items()})
    reused = list(scratch_of(alg)._arrays.values())
    # every state was kept: no array was taken back for a later state
    for key in scratch_of(alg)._recycled:
        held = [id(_arrays(st)[key]) for st in kept]
        assert len(held) == len(set(held)), key
    # partial activation takes the readable gathers, which reuse nothing
    assert bool(reused) == (name != "DO-ADP p=0.5 top-k")
    for state, snapshot in zip(kept, snapshots, strict=True):
        for key, value in _arrays(state).items():
            assert value.tobytes() == snapshot[key].tobytes(), key
            assert not any(np.may_share_memory(value, r) for r in reused), key


def test_the_reused_arrays_stay_with_their_algorithm():
    scratch = ScratchArrays()
    a = scratch.take("x", (3, 2))
    assert scratch.take("x", (3, 2)) is a
    assert scratch.take("x", (4, 2)).shape == (4, 2)
    assert scratch.take("x", (4, 2), np.int64).dtype == np.int64
    # a copy of an algorithm (e.g. a checkpoint's) carries no buffer
    alg, problem = _build("DO-ADP")
    alg.step(problem, alg.init(problem, np.zeros(DIM), np.random.default_rng(0)))
    assert scratch_of(alg)._arrays
    assert not scratch_of(copy.deepcopy(alg))._arrays


@pytest.mark.parametrize("name", RECYCLING)
def test_a_dropped_state_lends_its_arrays_to_a_later_round_with_the_same_bits(name,
                                                                              monkeypatch):
    """A loop that drops each state writes round t + 2 into round t's arrays (double
    buffering), and ends with the bits of a run that kept every state (fresh arrays)."""
    if name == "DP-DDA":   # DP-DDA recycles from REUSE_MIN_ROWS agents on: here, always
        import rfed.algorithms.decentralized.dpdda as dpdda_module

        monkeypatch.setattr(dpdda_module, "REUSE_MIN_ROWS", 1)
    alg, problem = _build(name)
    kept = [alg.init(problem, np.zeros(DIM), np.random.default_rng(0))]
    for _ in range(5):
        kept.append(alg.step(problem, kept[-1]))
    alg, problem = _build(name)
    state = alg.init(problem, np.zeros(DIM), np.random.default_rng(0))
    addresses = []
    for _ in range(5):
        state = alg.step(problem, state)
        addresses.append({k: v.__array_interface__["data"][0]
                          for k, v in _arrays(state).items()})
    for key, value in _arrays(kept[-1]).items():
        assert _arrays(state)[key].tobytes() == value.tobytes(), key
    recycled = set(scratch_of(alg)._recycled)
    assert recycled and recycled <= set(addresses[0])
    for key in recycled:
        assert addresses[4][key] == addresses[2][key] != addresses[3][key], key


def test_a_recycled_array_held_by_a_view_is_not_taken_back():
    scratch = ScratchArrays()
    first = scratch.recycled("x", (4, 2))
    second = scratch.recycled("x", (4, 2))
    assert second is not first
    view = first[1:]
    del first
    third = scratch.recycled("x", (4, 2))   # the first is held by the view, the second by us
    assert not np.may_share_memory(third, view) and third is not second
    del view
    assert scratch.recycled("x", (4, 2)).shape == (4, 2)


def test_calibration_weights_do_not_depend_on_the_chunk():
    from rfed.manifolds import Euclidean, Sphere

    rng = np.random.default_rng(5)
    for manifold in (Euclidean(4), Sphere(4)):
        shape = (37,) + manifold.point_shape
        x = manifold.random_point(rng, 37) if isinstance(manifold, Sphere) else \
            rng.standard_normal(shape)
        received = manifold.proj(x, rng.standard_normal(shape))
        reference = manifold.proj(x, rng.standard_normal(shape))
        reference[3] = 0.0
        whole = calibration_weights(manifold, x, received, reference)
        norms = manifold.norm(x, reference)
        for chunk in (1, 5, 36):
            for got, want in zip(calibration_weights(manifold, x, received, reference,
                                                     chunk_rows=chunk),
                                 whole, strict=True):
                assert got.tobytes() == want.tobytes()
            got = calibration_weights(manifold, x, received, reference, norms, chunk_rows=chunk)
            assert got[1].tobytes() == whole[1].tobytes()
    with pytest.raises(ValueError, match="chunk_rows"):
        calibration_weights(manifold, x, received, reference, chunk_rows=0)


@pytest.mark.parametrize("sampler", ["maximal", "uniform"])
def test_dpdda_gathers_into_reused_arrays_with_the_same_bits(monkeypatch, sampler):
    """DP-DDA gathers its active rows and records into arrays kept for the run from
    ``REUSE_MIN_ROWS`` active nodes on, and writes its next state into recycled arrays from
    ``REUSE_MIN_ROWS`` agents on (fresh arrays below): both ways give the same bits."""
    import rfed.algorithms.decentralized.dpdda as dpdda_module

    def run():
        rng = np.random.default_rng(3)
        problem = HingeSVM(*_linear_data(rng), L2Regularizer(0.1), feature_bound=1.0)
        alg = DPDDA(Network(circulant(N, 2)), n_active=N // 4, sampler=sampler, gamma=1.0,
                    noise_multiplier=1.0)
        state = alg.init(problem, np.zeros(DIM), np.random.default_rng(0))
        for _ in range(6):
            state = alg.step(problem, state)
        return _arrays(state), alg

    fresh, fresh_alg = run()
    assert not scratch_of(fresh_alg)._recycled   # N = 40 < REUSE_MIN_ROWS: fresh arrays
    monkeypatch.setattr(dpdda_module, "REUSE_MIN_ROWS", 1)
    reused, alg = run()
    assert any(k.startswith("gathered rows") for k in scratch_of(alg)._arrays)
    assert "minibatch keys" in scratch_of(alg)._arrays
    assert {"x", "z", "xtilde"} <= set(scratch_of(alg)._recycled)
    for key, value in fresh.items():
        assert reused[key].tobytes() == value.tobytes(), key
