"""Keyed streams: engine independence, independence across keys, distributions."""

import numpy as np
import pytest
from scipy import stats

from rfed.randomness import AgentStreams, StackedStreams, public_generator, purpose_code

#: The two layouts rfed's algorithms use (agents per Philox stream): every property of the
#: streams is tested for both, and 4 for a layout neither uses.
LAYOUTS = [1, 16]
layouts = pytest.mark.parametrize("per", LAYOUTS)


@pytest.mark.parametrize("per", [*LAYOUTS, 4])
def test_an_agents_draws_do_not_depend_on_its_block(per):
    s = AgentStreams(seed=123, agents_per_stream=per)
    everyone = s.normal(np.arange(16), round=5, purpose="noise", shape=(3, 7))
    for block in (np.arange(0, 5), np.arange(5, 11), np.array([15, 2, 9]), np.array([7])):
        np.testing.assert_array_equal(s.normal(block, 5, "noise", (3, 7)), everyone[block])
    # another instance with the same seed (another process) draws the same
    other = AgentStreams(123, agents_per_stream=per)
    np.testing.assert_array_equal(other.normal(np.arange(16), 5, "noise", (3, 7)), everyone)


@layouts
def test_streams_differ_by_seed_round_purpose_and_agent(per):
    s = AgentStreams(seed=1, agents_per_stream=per)
    base = s.uniform([0, 1], 0, "noise", 64)
    assert not np.array_equal(base[0], base[1])
    for other in (AgentStreams(2, agents_per_stream=per).uniform([0, 1], 0, "noise", 64),
                  s.uniform([0, 1], 1, "noise", 64),
                  s.uniform([0, 1], 0, "minibatch", 64)):
        assert not np.any(other == base)


@layouts
def test_uniforms_are_uniform_and_open(per):
    u = AgentStreams(seed=9, agents_per_stream=per).uniform(np.arange(50), 0, "u", 2000).ravel()
    assert u.min() > 0.0 and u.max() < 1.0
    # Kolmogorov-Smirnov at a fixed seed: the statistic is below the 1e-4 critical value
    assert stats.kstest(u, "uniform").pvalue > 1e-4


@layouts
def test_normals_have_the_standard_moments_and_no_cross_correlation(per):
    z = AgentStreams(seed=11, agents_per_stream=per).normal(np.arange(200), 3, "noise", 5000)
    n = z.size
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * np.sqrt(2.0 / n)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-4
    # neighbouring agents' streams are uncorrelated
    r = np.corrcoef(z[:-1].ravel(), z[1:].ravel())[0, 1]
    assert abs(r) < 5 / np.sqrt(z[:-1].size)


@layouts
def test_integers_cover_the_range_evenly_per_agent(per):
    high = np.array([3, 10, 7])
    k = AgentStreams(seed=4, agents_per_stream=per).integers(np.arange(3), 0, "batch", high, 30000)
    for row, h in zip(k, high, strict=True):
        assert row.min() == 0 and row.max() == h - 1
        counts = np.bincount(row, minlength=h)
        assert stats.chisquare(counts).pvalue > 1e-4


def test_public_generator_is_keyed_by_seed_round_and_purpose():
    a = public_generator(5, 2, "agent-sampling").random(8)
    np.testing.assert_array_equal(a, public_generator(5, 2, "agent-sampling").random(8))
    assert not np.array_equal(a, public_generator(5, 3, "agent-sampling").random(8))
    assert not np.array_equal(a, public_generator(5, 2, "activation").random(8))


def test_bad_keys_are_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="'seed'"):
        AgentStreams(-1, agents_per_stream=1)
    with pytest.raises(TypeError, match="'seed'"):
        AgentStreams(1.5, agents_per_stream=1)
    with pytest.raises(ValueError, match="'round'"):
        public_generator(1, -2, "x")
    with pytest.raises(TypeError, match="'purpose'"):
        purpose_code("")
    with pytest.raises(ValueError, match="'agents'"):
        AgentStreams(1, agents_per_stream=16).normal([[0, 1]], 0, "x", 2)
    with pytest.raises(ValueError, match="'high'"):
        AgentStreams(1, agents_per_stream=16).integers([0], 0, "x", 0, 2)


@pytest.mark.parametrize("bad", [0, 3, 12, -16, 2**17, 16.0, True, "16", None])
def test_a_layout_that_is_not_a_power_of_two_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="'agents_per_stream'.*power of two"):
        AgentStreams(1, agents_per_stream=bad)
    with pytest.raises(ValueError, match="'agents_per_stream'"):
        StackedStreams([1], [np.array([0])], agents_per_stream=bad)
    with pytest.raises(TypeError, match="agents_per_stream"):
        AgentStreams(1)  # type: ignore[call-arg]  # the layout has no default


def test_a_block_planned_for_one_layout_is_refused_by_the_other():
    block = AgentStreams(1, agents_per_stream=16).block([0, 1])
    with pytest.raises(ValueError, match="agents_per_stream=16"):
        AgentStreams(1, agents_per_stream=1).normal(block, 0, "x", 2)


@layouts
def test_near_and_far_ids_are_served_in_one_call(per):
    s = AgentStreams(seed=5, agents_per_stream=per)
    agents = np.array([3, 17, 167, 2**31 + 3])
    together = s.uniform(agents, 2, "batch", (2, 3))
    assert together.shape == (4, 2, 3)
    for i, a in enumerate(agents):
        np.testing.assert_array_equal(s.uniform([a], 2, "batch", (2, 3))[0], together[i])


@pytest.mark.parametrize("method", ["normal", "uniform"])
@layouts
def test_an_agents_first_values_do_not_depend_on_the_length_asked(method, per):
    # a block padded to a longer row (its largest local dataset) must agree with a shorter one
    s = AgentStreams(seed=8, agents_per_stream=per)
    long = getattr(s, method)(np.arange(20), 1, "batch", 50)
    short = getattr(s, method)(np.array([17, 3]), 1, "batch", 7)
    np.testing.assert_array_equal(short, long[[17, 3], :7])


def _digest_of_many_draws(per: int) -> str:
    import hashlib

    h = hashlib.sha256()
    for seed in (0, 7, 2**63 - 1):
        s = AgentStreams(seed, agents_per_stream=per)
        for agents in ([0], [3, 5, 9], list(range(40)), [15, 16, 17, 1000, 2**32 - 1], [7, 2, 7]):
            for rnd, purpose in ((0, "noise"), (5, "minibatch"), (2**32 - 1, 12345)):
                for shape in ((), (3,), (4, 5), (33,)):
                    h.update(s.normal(agents, rnd, purpose, shape).tobytes())
                    h.update(s.uniform(agents, rnd, purpose, shape).tobytes())
                    h.update(s.integers(agents, rnd, purpose, 7, shape).tobytes())
    return h.hexdigest()


#: SHA-256 of _digest_of_many_draws per layout: a run's randomness is part of its definition
#: and must not change by accident (seeds below 2**63; larger seeds were mapped through a
#: float and collided, see the test below). 16: the digest recorded on main (be015c8, kept
#: through 8799f6e) for the one layout main had, groups of 16 agents per stream; 1: the digest
#: recorded when every agent got its own stream (one key per agent).
LAYOUT_DIGESTS = {
    16: "e2f1b19df870ba1c539076b8f08cba22423a5ed3faf202a371d83a5a8e2f7d9c",
    1: "f8a127ceb44622ec8b40cdcd593225b55f520a2da863e93c280c06422983723b",
}


@layouts
def test_draws_are_bit_identical_to_the_recorded_definition(per):
    assert _digest_of_many_draws(per) == LAYOUT_DIGESTS[per]


@pytest.mark.parametrize("per", [*LAYOUTS, 4])
@pytest.mark.parametrize("agent", [0, 21, 2**32 - 1])
def test_an_agents_draws_follow_the_documented_philox_construction(agent, per):
    # independent re-derivation from the module docstring: stream g = agent // P draws from
    # Philox4x64 with key (seed, "AGEN") and counter (0, g, round, purpose); agent r = agent % P
    # of the stream takes draws r, r + P, ... (P = 1: agent a's own first m values), alone or
    # in a block with other agents
    seed, rnd, code, m = 11, 4, purpose_code("noise"), 9
    g, r = divmod(agent, per)
    bits = np.random.Philox(counter=[0, g, rnd, code], key=[seed, 0x4147454E])
    expected = np.random.Generator(bits).standard_normal(m * per)[r::per]
    streams = AgentStreams(seed, agents_per_stream=per)
    np.testing.assert_array_equal(streams.normal([agent], rnd, "noise", (m,))[0], expected)
    in_block = streams.normal([5, agent, 2**31], rnd, "noise", (m,))[1]
    np.testing.assert_array_equal(in_block, expected)
    raw = np.random.Philox(counter=[0, g, rnd, code], key=[seed, 0x4147454E]).random_raw(
        m * per)[r::per]
    uniforms = streams.uniform([agent, 3], rnd, "noise", (m,))[0]
    np.testing.assert_array_equal(uniforms, ((raw >> np.uint64(11)) + 0.5) * 2.0**-53)


@pytest.mark.parametrize(("per", "drawn"), [(1, 40), (16, 16 * 40)])
def test_a_draw_for_one_agent_costs_its_streams_values(per, drawn):
    # per agent: the stream of agent a is consumed by a's m normals only; groups of 16: the
    # whole group's 16 m normals are drawn. The generator's counter after a one-agent draw is
    # what drawing that many normals from the stream leaves
    s, m = AgentStreams(seed=3, agents_per_stream=per), 40
    s.normal([21], 0, "noise", (m,))
    alone = np.random.Philox(counter=[0, 21 // per, 0, purpose_code("noise")],
                             key=[3, 0x4147454E])
    np.random.Generator(alone).standard_normal(drawn)
    assert s._bits.state["state"]["counter"].tolist() == alone.state["state"]["counter"].tolist()


def test_the_layouts_draw_different_values():
    # the layout is part of a run's definition: the same key gives other values
    one = AgentStreams(5, agents_per_stream=1).normal([3, 40], 0, "noise", (8,))
    sixteen = AgentStreams(5, agents_per_stream=16).normal([3, 40], 0, "noise", (8,))
    assert not np.any(one == sixteen)


@layouts
def test_stacked_runs_draw_each_runs_own_rows(per):
    seeds, blocks = [5, 9, 5], [np.array([3, 20]), np.array([3]), np.array([40, 2, 17])]
    stacked = StackedStreams(seeds, blocks, agents_per_stream=per)
    for kind in ("normal", "uniform"):
        want = np.concatenate([getattr(AgentStreams(s, agents_per_stream=per), kind)(
            b, 4, "local#1", (2, 3)) for s, b in zip(seeds, blocks, strict=True)])
        np.testing.assert_array_equal(stacked.draw(4, "local#1", (2, 3), kind), want)


@layouts
@pytest.mark.parametrize("seed", [2**63 + 1, 2**64 - 2, 2**64 - 1])
def test_seeds_above_2_63_have_their_own_streams(seed, per):
    # they were once rounded through a float64, so 2**64 - 1 drew seed 0's stream
    draws = AgentStreams(seed, agents_per_stream=per).normal([0], 0, "noise", (8,))
    for other in (0, 2**63, seed - 1):
        others = AgentStreams(other, agents_per_stream=per)
        assert not np.any(draws == others.normal([0], 0, "noise", (8,)))


@layouts
def test_increasing_and_unordered_blocks_agree_with_single_agents(per):
    s = AgentStreams(seed=9, agents_per_stream=per)
    for agents in (np.array([1, 2, 17, 18, 40]), np.array([40, 2, 17, 2, 1, 18])):
        together = s.normal(agents, 3, "noise", (4,))
        for i, a in enumerate(agents):
            np.testing.assert_array_equal(s.normal([a], 3, "noise", (4,))[0], together[i])
    assert s.normal(np.zeros(0, dtype=int), 3, "noise", (4,)).shape == (0, 4)


def test_open_uniforms_are_the_bounded_integer_formula_bit_for_bit():
    """The uniforms read from the raw Philox outputs equal their definition
    ``(Generator.integers(0, 2**53) + 1/2) 2^-53`` exactly, including the keys whose
    ``k + 1/2`` rounds (k >= 2^52), and written into a given array."""
    from rfed.randomness import _open_uniform

    for key in range(20):
        ref_gen = np.random.Generator(np.random.Philox(key=key))
        gen = np.random.Generator(np.random.Philox(key=key))
        k = ref_gen.integers(0, 2**53, size=(257, 16))
        expected = (k.astype(np.float64) + 0.5) * 2.0**-53
        out = np.empty((257, 16))
        got = _open_uniform(gen, (257, 16), out=out)
        assert got is out and np.array_equal(got, expected)
        assert np.any(k >= 2**52) and np.all((got > 0) & (got < 1))


def test_each_algorithm_family_draws_from_its_layout():
    # the decentralized algorithms' keyed draws come from the 16-agent groups, the federated
    # trainers' from one stream per agent; the streams cache is keyed by (seed, layout)
    from rfed.algorithms.decentralized._streams import _streams_of, agent_draws
    from rfed.algorithms.federated.streams import AgentBlockGenerator

    ids = np.array([3, 40])
    decentralized = agent_draws(np.random.default_rng(0), 5, ids, 2, "noise")
    np.testing.assert_array_equal(
        decentralized.standard_normal((2, 4)),
        AgentStreams(5, agents_per_stream=16).normal(ids, 2, "noise", (4,)))
    federated = AgentBlockGenerator(5, ids, 2, "local")
    np.testing.assert_array_equal(
        federated.standard_normal((2, 4)),
        AgentStreams(5, agents_per_stream=1).normal(ids, 2, "local#0", (4,)))
    assert _streams_of(5).agents_per_stream == 16
    assert _streams_of(5, 1).agents_per_stream == 1 and _streams_of(5, 1) is not _streams_of(5)


@pytest.mark.parametrize("per", [1, 16])
@pytest.mark.parametrize("start, size", [(0, 1), (0, 16), (0, 40), (5, 3), (5, 11), (7, 60),
                                         (32, 600)])
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_draws_written_into_a_given_array_are_the_fresh_draws(per, start, size, kind):
    """``block_rows(..., out=)`` (a run's reused array) gives the fresh call's values, for
    consecutive blocks starting anywhere in a group (the copy of the groups' columns) and for
    a scattered block, whose rows are copied."""
    from rfed.randomness import _SAMPLERS

    streams = AgentStreams(11, agents_per_stream=per)
    sampler = _SAMPLERS[kind]
    for agents in (np.arange(start, start + size), np.arange(start, start + 3 * size, 3)):
        block = streams.block(agents)
        fresh = streams.block_rows(block, 2, purpose_code("noise"), 7, sampler)
        out = np.full((agents.size, 7), np.nan)
        got = streams.block_rows(block, 2, purpose_code("noise"), 7, sampler, out=out)
        assert got is out
        assert got.tobytes() == fresh.tobytes()
    with pytest.raises(ValueError, match="argument 'out'"):
        streams.block_rows(block, 2, 0, 7, sampler, out=np.empty((agents.size, 6)))


@pytest.mark.parametrize("per_stream", [1, 16])
def test_direct_counter_writes_draw_what_the_state_setter_draws(monkeypatch, per_stream):
    """The re-keying by direct counter writes (chosen once per process after a layout check)
    gives the bits of numpy's state setter, for every sampler, after copies and pickles."""
    import copy
    import pickle

    import rfed.randomness as randomness
    ids = np.array([0, 3, 17, 2**32 - 1, 5])

    def draws(streams):
        return (streams.normal(ids, 4, "noise", (7,)), streams.uniform(ids, 4, "keys", (3,)),
                streams.normal(ids[:1], 2**31, 2**32 - 1, (5,)))

    fast = AgentStreams(11, agents_per_stream=per_stream)
    assert fast._counter_writer() is not None
    got = draws(fast)
    monkeypatch.setattr(randomness, "_PHILOX_LAYOUT_OK", False)
    slow = AgentStreams(11, agents_per_stream=per_stream)
    assert slow._counter_writer() is None
    want = draws(slow)
    monkeypatch.undo()
    for streams in (fast, copy.deepcopy(fast), pickle.loads(pickle.dumps(fast))):
        for a, b in zip(draws(streams), want, strict=True):
            assert np.array_equal(a, b)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)


def test_stacked_streams_reuse_the_threads_instances_with_the_same_draws():
    from rfed.randomness import shared_streams

    ids = np.array([4, 9, 2])
    first = StackedStreams([3], [ids], agents_per_stream=1)
    again = StackedStreams([3], [ids], agents_per_stream=1)
    assert first.streams[0] is again.streams[0] is shared_streams(3, 1)
    fresh = AgentStreams(3, agents_per_stream=1)
    for _ in range(2):
        assert np.array_equal(first.draw(2, "noise", (5,)), fresh.normal(ids, 2, "noise", (5,)))
    assert np.array_equal(again.draw(2, "keys", (3,), "uniform"),
                          fresh.uniform(ids, 2, "keys", (3,)))



@pytest.mark.parametrize("per", [1, 16])
def test_unverified_numpy_uses_the_state_setter_with_the_same_draws(monkeypatch, per):
    """On a numpy outside the verified range the direct counter writes are not even probed,
    and the per-agent draws are those of the state setter (the same bits)."""
    import rfed.randomness as randomness

    agents = np.arange(20)
    reference = AgentStreams(seed=11, agents_per_stream=per).normal(agents, 3, "noise", (2, 7))
    monkeypatch.setattr(randomness, "_PHILOX_LAYOUT_OK", None)
    monkeypatch.setattr(randomness.np, "__version__", "9.9.0")
    assert not randomness._numpy_layout_known()
    again = AgentStreams(seed=11, agents_per_stream=per).normal(agents, 3, "noise", (2, 7))
    assert randomness._PHILOX_LAYOUT_OK is False
    np.testing.assert_array_equal(again, reference)
