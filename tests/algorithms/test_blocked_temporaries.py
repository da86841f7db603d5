"""Blocked hot paths (small reused temporaries instead of stacked ones) give the same bits as the
stacked computation they replace."""

import numpy as np

from rfed.algorithms.baselines import pca as baselines_pca
from rfed.algorithms.baselines.oneshot import clip_rows
from rfed.algorithms.federated import local as local_module
from rfed.algorithms.federated.sampling import sample_minibatches
from rfed.privacy import PrivacyBudget
from rfed.problems import base as problems_base
from rfed.problems.pca import SpherePCA


def _unit_rows(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _problem(rng, counts=None, shape=(23, 70, 50)):
    return SpherePCA(rng.standard_normal(shape), counts=counts)


def test_local_grad_in_blocks_of_agents_is_bit_identical(monkeypatch):
    rng = np.random.default_rng(0)
    n_agents, n_max, dim = 23, 70, 50
    for counts in (None, rng.integers(30, n_max + 1, n_agents)):
        problem = _problem(rng, counts)
        one = _unit_rows(rng.standard_normal(dim))
        each = _unit_rows(rng.standard_normal((n_agents, dim)))
        sub = np.array([3, 1, 7, 9, 11])
        monkeypatch.setattr(problems_base, "_LOCAL_GRAD_BLOCK_BYTES", 10**15)
        ref = [problem.local_grad(one), problem.local_grad(each), problem.grad(one),
               problem.local_grad(each[sub], sub)]
        for agents_per_block in (1, 2, 5, 22):
            monkeypatch.setattr(problems_base, "_LOCAL_GRAD_BLOCK_BYTES",
                                agents_per_block * n_max * dim * 8)
            got = [problem.local_grad(one), problem.local_grad(each), problem.grad(one),
                   problem.local_grad(each[sub], sub)]
            for a, b in zip(got, ref, strict=True):
                assert a.tobytes() == b.tobytes()


def test_rsvrg_difference_mean_in_blocks_is_bit_identical(monkeypatch):
    rng = np.random.default_rng(1)
    n_agents, n_max, dim, b = 37, 90, 60, 40
    problem = _problem(rng, shape=(n_agents, n_max, dim))
    x = _unit_rows(rng.standard_normal((n_agents, dim)))
    snap = _unit_rows(x + 0.1 * rng.standard_normal((n_agents, dim)))
    agents = np.arange(n_agents)
    idx, valid = sample_minibatches(np.full(n_agents, n_max), np.full(n_agents, b), rng)
    sizes = np.full(n_agents, float(b))
    stacked = local_module.DPRSVRG.difference_mean
    for clip in (None, 0.5):
        ref, ref_clipped = stacked(problem, x, snap, problem.batch(agents, idx), valid, sizes,
                                   clip)
        for agents_per_block in (1, 3, 8, 100):
            monkeypatch.setattr(local_module, "_GATHER_BLOCK_BYTES",
                                agents_per_block * b * (dim + 1) * 8)
            buffers = None
            for _ in range(2):   # the second call reuses the first one's buffers
                v, n_clipped, buffers = local_module._difference_mean_blocked(
                    stacked, problem, x, snap, agents, idx, valid, sizes, clip, buffers)
                assert v.tobytes() == ref.tobytes()
                np.testing.assert_array_equal(n_clipped, ref_clipped)


def test_pca_baselines_per_agent_records_and_sum_are_bit_identical():
    rng = np.random.default_rng(2)
    problem = _problem(rng, rng.integers(40, 71, 6), shape=(6, 70, 12))
    budget = PrivacyBudget(1.0, 1e-5)
    clipped, counts = baselines_pca._clipped_pca_data(problem, budget, 3.0)
    z = clipped.stacked()
    stacked, stacked_clipped = clip_rows(np.where(problem.mask[..., None], problem.data["z"],
                                                  0.0), 3.0)
    assert z.tobytes() == stacked.tobytes() and clipped.n_clipped == stacked_clipped > 0
    np.testing.assert_array_equal(counts, problem.counts)
    # Analyze Gauss: per-agent products, releases and a sum in agent order give the estimate
    # of the stacked form (all agents' products, one draw of every agent's noise, one sum)
    result = baselines_pca.AnalyzeGauss(budget, norm_bound=3.0).run(problem, 5)
    sigma = result.info["sigma"]
    local = baselines_pca.sym_to_vec(np.swapaxes(z, -1, -2) @ z)
    noise = np.random.default_rng(5).standard_normal(local.shape)
    total = baselines_pca.vec_to_sym((local + sigma * noise).sum(axis=0), 12) / counts.sum()
    expected = baselines_pca._top_eigenvector(total)
    assert result.x.tobytes() == expected.tobytes()


def test_noisy_power_per_agent_products_are_bit_identical_to_the_stacked_form():
    rng = np.random.default_rng(3)
    problem = _problem(rng, rng.integers(40, 71, 6), shape=(6, 70, 12))
    budget = PrivacyBudget(1.0, 1e-5)
    x0 = rng.standard_normal(12)
    result = baselines_pca.NoisyPowerMethod(budget, 3, norm_bound=3.0).run(problem, 7, x0=x0)
    z, _ = clip_rows(np.where(problem.mask[..., None], problem.data["z"], 0.0), 3.0)
    draws = np.random.default_rng(7)
    x = x0 / np.linalg.norm(x0)
    for _ in range(3):
        local = np.einsum("anj,an->aj", z, np.einsum("anj,j->an", z, x))
        y = (local + result.info["sigma"] * draws.standard_normal(local.shape)).sum(axis=0)
        x = y / np.linalg.norm(y)
    x = x * np.sign(x[np.argmax(np.abs(x))])
    assert result.x.tobytes() == x.tobytes()


def test_pca_baselines_reuse_per_problem_and_follow_new_records():
    """The second run on a problem (cached clipped rows and second moments) equals a run on a
    fresh copy of the problem; new records replace the cached values."""
    def make():
        rng = np.random.default_rng(6)
        return _problem(rng, rng.integers(40, 71, 6), shape=(6, 70, 12))

    problem = make()
    budget = PrivacyBudget(2.0, 1e-5)

    def estimates(p):
        return (baselines_pca.AnalyzeGauss(budget, 3.0).run(p, 1).x.tobytes(),
                baselines_pca.NoisyPowerMethod(budget, 2, 3.0).run(p, 1).x.tobytes())

    first = estimates(problem)
    assert estimates(problem) == first
    assert estimates(make()) == first
    problem.data = {**problem.data, "z": problem.data["z"] * 0.5}
    assert estimates(problem) != first


def test_dprsgd_minibatch_sums_in_blocks_are_bit_identical(monkeypatch):
    """A DP-RSGD round whose gathered minibatches exceed the stacked limit sums them per block
    of agents: the run is bit-identical to the stacked one."""
    from rfed.algorithms.federated import DPRSGD, PriRFed
    from rfed.problems.linear import L2Regularizer, LogisticRegression

    rng = np.random.default_rng(4)
    feats = rng.standard_normal((30, 12, 6)) / 3.0
    labels = np.where(rng.random((30, 12)) < 0.5, -1.0, 1.0)
    problems = [LogisticRegression(feats, labels, L2Regularizer(0.01), feature_bound=1.0),
                _problem(rng, shape=(30, 12, 6))]
    blocked_calls = []
    blocked = local_module._clipped_sum_blocked

    def counting(*args):
        blocked_calls.append(1)
        return blocked(*args)

    monkeypatch.setattr(local_module, "_clipped_sum_blocked", counting)
    for problem in problems:
        x0 = _unit_rows(np.ones(problem.manifold.point_shape))
        runs = []
        for limit, agents_per_block in ((10**15, 1), (0, 1), (0, 7)):
            monkeypatch.setattr(local_module, "_STACKED_BYTES", limit)
            monkeypatch.setattr(local_module, "_GATHER_BLOCK_BYTES",
                                agents_per_block * 5 * 7 * 8)
            alg = PriRFed(DPRSGD(steps=2, batch_size=5, clip=0.5, noise_multiplier=1.0),
                          n_sampled=None, step_size=0.1, n_rounds=3)
            state = alg.init(problem, x0, np.random.default_rng(9))
            for _ in range(3):
                state = alg.step(problem, state)
            runs.append(state.x.tobytes())
        assert runs[1] == runs[0] and runs[2] == runs[0]
    assert blocked_calls   # the logistic problem's steps took the blocked path
