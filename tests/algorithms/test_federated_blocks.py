"""PriRFed's round in separately callable pieces: the same seed gives the same run for any
split of the selected agents into blocks (processes, Flower clients)."""

import numpy as np
import pytest

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.streams import AgentBlockGenerator
from rfed.datasets.synthetic import make_pca_synthetic, make_wishart_spd
from rfed.privacy import PrivacyBudget
from rfed.problems import SPDFrechetMean, SpherePCA
from rfed.randomness import AgentStreams


def _pca(n_agents=8, n_per=40, dim=6, seed=0):
    return SpherePCA(make_pca_synthetic(n_agents, n_per, dim, 0.3, seed))


def test_block_generator_rows_are_each_agents_own_stream():
    agents = np.array([3, 11, 5])
    g = AgentBlockGenerator(7, agents, round=4, purpose="local")
    u = g.random((3, 10))
    z = g.standard_normal((3, 2, 2))
    k = g.integers(0, np.array([[5], [7], [2]]), size=(3, 6))
    s = AgentStreams(7, agents_per_stream=1)
    np.testing.assert_array_equal(u, s.uniform(agents, 4, "local#0", (10,)))
    np.testing.assert_array_equal(z, s.normal(agents, 4, "local#1", (2, 2)))
    # agent 11 alone, in a block of its own: the same first draw (a prefix of a longer one)
    alone = AgentBlockGenerator(7, np.array([11]), round=4)
    np.testing.assert_array_equal(alone.random((1, 4))[0], u[1, :4])
    assert np.all((k >= 0) & (k < np.array([[5], [7], [2]])))
    with pytest.raises(ValueError, match="'size' must start with the block's 3 agents"):
        g.random((2, 10))
    with pytest.raises(NotImplementedError, match="per-agent"):
        g.choice(5)


@pytest.mark.parametrize("trainer", [
    DPRSGD(steps=3, batch_size=0.5, clip=1.0, noise_multiplier=1.0),
    DPRSGD(steps=2, batch_size=7, clip=1.0, noise_multiplier=1.0),
    DPRSGD(steps=2, batch_size=0.3, clip=1.0, noise_multiplier=1.0, sampling="poisson"),
    DPRSVRG(steps=2, inner_steps=3, clip=1.0, noise_multiplier=1.0),
], ids=["rsgd-in-order", "rsgd-gather", "rsgd-poisson", "rsvrg"])
@pytest.mark.parametrize("option", [1, 2])
def test_local_points_do_not_depend_on_the_blocks(trainer, option):
    prob = _pca()
    poisson = getattr(trainer, "sampling", "") == "poisson"
    alg = PriRFed(trainer, n_sampled=6, step_size=0.05, output_option=option,
                  neighboring="add_remove_one" if poisson else None,
                  public_sizes=int(prob.counts.max()) if poisson else None)
    state = alg.init(prob, prob.manifold.random_point(1), np.random.default_rng(3))
    agents = alg.select(prob, state)
    together, info = alg.train_block(prob, state, agents)
    parts = [alg.train_block(prob, state, b) for b in (agents[:1], agents[1:4], agents[4:])]
    split = np.concatenate([p[0] for p in parts])
    np.testing.assert_allclose(split, together, rtol=0, atol=1e-14)
    assert sum(p[1]["n_clipped"] for p in parts) == info["n_clipped"]
    # and each agent alone
    for a, row in zip(agents, together, strict=True):
        np.testing.assert_allclose(alg.train_block(prob, state, [a])[0][0], row, atol=1e-14)


def test_a_run_in_blocks_equals_step_with_the_same_seed():
    """select -> train in blocks -> aggregate -> ledger, by hand, equals PriRFed.run."""
    pts = make_wishart_spd(12 * 30, 2, 1)
    prob = SPDFrechetMean(pts.reshape(12, 30, 2, 2), gradient_bound=1.0)
    x0 = np.diag([2.0, 0.5])
    for aggregation in ("tangent", "karcher"):
        alg = PriRFed(DPRSGD(steps=2, batch_size=0.5, clip=1.0), n_sampled=5, step_size=0.05,
                      aggregation=aggregation, output_option=2,
                      budget=PrivacyBudget(2.0, 1e-4), n_rounds=6)
        res = alg.run(prob, 6, rng=11, x0=x0, eval_every=6)
        state = alg.init(prob, x0, np.random.default_rng(11))
        seen = set()
        for _ in range(6):
            agents = alg.select(prob, state)
            seen.update(agents.tolist())
            blocks = [agents[:2], agents[2:]]
            outs = [alg.train_block(prob, state, b) for b in blocks]
            x_next = alg.aggregate(prob, state, agents, np.concatenate([o[0] for o in outs]))
            state = alg.finish_round(state, agents, x_next,
                                     sum(o[1]["n_clipped"] for o in outs))
        np.testing.assert_allclose(alg.output(prob, state), res.x, rtol=0, atol=1e-13)
        assert alg.privacy(state) == res.privacy
        assert res.privacy["epsilon_certified"] <= 2.0
        assert len(seen) > 5  # the selection changes with the round


def test_selection_is_the_public_stream_of_seed_and_round():
    prob = _pca()
    alg = PriRFed(DPRSGD(steps=1, clip=1.0, noise_multiplier=1.0), n_sampled=3)
    s1 = alg.init(prob, prob.manifold.random_point(0), np.random.default_rng(5))
    s2 = alg.init(prob, prob.manifold.random_point(0), np.random.default_rng(5))
    assert s1.seed == s2.seed
    np.testing.assert_array_equal(alg.select(prob, s1, 4), alg.select(prob, s2, 4))
    picks = {tuple(alg.select(prob, s1, t)) for t in range(20)}
    assert len(picks) > 5


@pytest.mark.parametrize("poisson", [False, True], ids=["full-batch", "poisson"])
@pytest.mark.parametrize("make", ["pca", "kpca"])
def test_fused_full_batch_step_equals_one_call(make, poisson, monkeypatch):
    # the fused local step (a cache-sized block of agents' records read once per step, both
    # products of the clipped sum taken while cached) against the paper's step as written
    # (one clipped_grad_sum over every agent): equal bit for bit, for blocks of 1, 2 and 3
    # agents and a ragged last block; then a whole local run through each path
    from rfed.algorithms.federated import local
    from rfed.problems import KPCA

    data = make_pca_synthetic(7, 30, 6, 0.3, 0)
    prob = SpherePCA(data) if make == "pca" else KPCA(data, 2)
    x = np.repeat(prob.manifold.random_point(np.random.default_rng(1))[None], 7, axis=0)
    x = prob.manifold.exp(x, prob.manifold.tangent_gaussian(x, 0.3, np.random.default_rng(2)))
    agents = np.arange(7)
    records, mask = local._agent_data(prob, agents)
    if poisson:
        mask = mask & (np.random.default_rng(4).random(mask.shape) < 0.5)
    whole, clipped = prob.clipped_grad_sum(x, records, 2.0, mask)
    for per_block in (1, 2, 3):
        fused, n_clipped = local._clipped_sum_by_blocks(prob, x, records, mask, 2.0, per_block)
        np.testing.assert_array_equal(fused, whole)
        np.testing.assert_array_equal(n_clipped, local._per_row(clipped))
    trainer = (DPRSGD(steps=3, batch_size=0.5, sampling="poisson", clip=2.0,
                      noise_multiplier=1.0) if poisson
               else DPRSGD(steps=3, clip=2.0, noise_multiplier=1.0))
    plan = (trainer.plan(prob, "add_remove_one", public_sizes=30) if poisson
            else trainer.plan(prob))

    def run():
        rng = AgentBlockGenerator(5, agents, round=2)
        return trainer.train(prob, plan, x, agents, 0.05, rng)

    one_call, one_info = run()
    # blocks of 2 agents' records
    monkeypatch.setattr(local, "_GATHER_BLOCK_BYTES", 2 * sum(
        v[0].nbytes for v in records.values()))
    assert local._agents_per_block(records, 7) == 2
    fused_run, fused_info = run()
    np.testing.assert_array_equal(fused_run, one_call)
    assert fused_info["n_clipped"] == one_info["n_clipped"]
