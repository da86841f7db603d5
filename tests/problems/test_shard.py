"""Sharded problems: a block's rows only, the same bits for its agents, errors for the rest."""

import pickle

import autograd.numpy as anp
import numpy as np
import pytest

from rfed.manifolds import Euclidean, Hyperboloid, Sphere
from rfed.networks.comm import Communicator, InProcessCommunicator
from rfed.problems import (
    KPCA,
    AutogradProblem,
    FrechetMean,
    HingeSVM,
    HyperbolicPrediction,
    L1Regularizer,
    L2Regularizer,
    LogisticRegression,
    MLPClassifier,
    QuadraticResourceAllocation,
    SoftmaxRegression,
    SPDFrechetMean,
    SpherePCA,
)

N_AGENTS, N_MAX = 6, 9
# unequal counts: the padding rows must stay out of every per-agent value
COUNTS = np.array([9, 4, 7, 9, 5, 8])


def _pca_loss(x, batch):
    zx = anp.einsum("...bd,...d->...b", batch["z"], x)
    return -(zx ** 2)


def _features(rng, d=5):
    return rng.standard_normal((N_AGENTS, N_MAX, d))


def _signs(rng):
    return np.where(rng.random((N_AGENTS, N_MAX)) < 0.5, -1.0, 1.0)


def _classes(rng, k=3):
    return rng.integers(0, k, (N_AGENTS, N_MAX))


def _spd(rng, n=3):
    a = rng.standard_normal((N_AGENTS, N_MAX, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


BUILDERS = {
    "sphere-pca": lambda r: SpherePCA(_features(r), counts=COUNTS, norm_bound=4.0),
    "kpca-grassmann": lambda r: KPCA(_features(r), 2, counts=COUNTS, norm_bound=4.0),
    "kpca-stiefel": lambda r: KPCA(_features(r), 2, "stiefel", counts=COUNTS),
    "spd-frechet": lambda r: SPDFrechetMean(_spd(r), counts=COUNTS, gradient_bound=1.0),
    "frechet-sphere": lambda r: FrechetMean(
        Sphere(3), Sphere(3).random_point(r, (N_AGENTS, N_MAX)), counts=COUNTS),
    "hyperbolic-ridge": lambda r: HyperbolicPrediction(
        _features(r, 3), Hyperboloid(2).random_point(r, (N_AGENTS, N_MAX)),
        r.standard_normal(3), counts=COUNTS, gamma=1e-2, bandwidth=1.0),
    "hyperbolic-kernel": lambda r: HyperbolicPrediction(
        _features(r, 3), Hyperboloid(2).random_point(r, (N_AGENTS, N_MAX)),
        r.standard_normal(3), counts=COUNTS, weights="kernel"),
    "autograd": lambda r: AutogradProblem(Sphere(4), _pca_loss, {"z": _features(r)},
                                          counts=COUNTS),
    "logistic": lambda r: LogisticRegression(_features(r), _signs(r), L2Regularizer(0.1),
                                             counts=COUNTS, feature_bound=1.0),
    "svm-l1": lambda r: HingeSVM(_features(r), _signs(r), L1Regularizer(0.01), counts=COUNTS),
    "softmax": lambda r: SoftmaxRegression(_features(r), _classes(r), 3, counts=COUNTS,
                                           feature_bound=1.0),
    "softmax-l2": lambda r: SoftmaxRegression(_features(r), _classes(r), 3, l2=0.1,
                                              counts=COUNTS),
    "mlp": lambda r: MLPClassifier(_features(r), _classes(r), n_hidden=4, n_classes=3,
                                   counts=COUNTS),
}

BLOCKS = [np.array([1, 2]), np.array([0, 3, 5]), np.array([4])]


@pytest.fixture(params=sorted(BUILDERS))
def full(request):
    return BUILDERS[request.param](np.random.default_rng(len(request.param)))


def _point(problem, rng, n=None):
    size = () if n is None else (n,)
    if isinstance(problem.manifold, Euclidean):
        # small weights: the models' losses stay away from saturation
        return 0.3 * rng.standard_normal(size + problem.manifold.point_shape)
    return problem.manifold.random_point(rng, size)


def _equal(a, b):
    assert np.array_equal(np.asarray(a), np.asarray(b)), (a, b)


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_shard_gives_the_full_problems_bits(full, block):
    rng = np.random.default_rng(1)
    part = full.shard(block)
    assert part.is_shard and type(part) is type(full)
    _equal(part.agents, block)
    # public facts of the whole problem
    assert part.n_agents == full.n_agents and part.n_max == full.n_max
    _equal(part.counts, full.counts)
    _equal(part.agent_weights, full.agent_weights)
    _equal(part.mask, full.mask)
    assert part.gradient_bound == full.gradient_bound
    assert part.privacy_assumptions == full.privacy_assumptions
    assert part.manifold.point_shape == full.manifold.point_shape
    # memory: only the block's rows
    for key, arr in part._data.items():
        full_arr = full.data[key]
        assert arr.shape == (block.size,) + full_arr.shape[1:]
        assert arr.nbytes == full_arr.nbytes * block.size // N_AGENTS
        assert not np.shares_memory(arr, full_arr)
    # every per-agent call, in a scrambled agent order with repeats
    agents = np.array([block[-1], block[0], block[-1]])
    x = _point(full, rng, agents.size)
    idx = full.sample_batches(agents, 3, np.random.default_rng(5))
    _equal(part.sample_batches(agents, 3, np.random.default_rng(5)), idx)
    for key in full.data:
        _equal(part.batch(agents, idx)[key], full.batch(agents, idx)[key])
    _equal(part.per_sample_grad(x, agents, idx), full.per_sample_grad(x, agents, idx))
    _equal(part.per_sample_loss(x, agents, idx), full.per_sample_loss(x, agents, idx))
    _equal(part.local_cost(x, agents), full.local_cost(x, agents))
    _equal(part.local_grad(x, agents), full.local_grad(x, agents))
    data_p, mask_p = part.agent_data(agents)
    data_f, mask_f = full.agent_data(agents)
    _equal(mask_p, mask_f)
    for key in data_f:
        _equal(data_p[key], data_f[key])
    _equal(part.clipped_grad_sum(x, part.batch(agents, idx), 0.5)[0],
           full.clipped_grad_sum(x, full.batch(agents, idx), 0.5)[0])


def test_foreign_agent_and_whole_data_calls_raise(full):
    part = full.shard(np.array([1, 2]))
    x1 = _point(full, np.random.default_rng(2))
    idx = np.zeros((1, 2), dtype=int)
    for call in (lambda: part.batch(np.array([3]), idx),
                 lambda: part.per_sample_grad(x1[None], np.array([0]), idx),
                 lambda: part.local_cost(x1, np.array([1, 5])),
                 lambda: part.agent_data(np.array([4]))):
        with pytest.raises(ValueError, match=r"agent [0345] is not held here"):
            call()
    for call in (lambda: part.data, lambda: part.local_cost(x1), lambda: part.local_grad(x1)):
        with pytest.raises(ValueError, match="shard holding agents 1..2 of 6"):
            call()
    with pytest.raises(ValueError, match=r"cost\(x\) needs every agent's data"):
        part.cost(x1)
    with pytest.raises(ValueError, match=r"grad\(x\) needs every agent's data"):
        part.grad(x1)
    with pytest.raises(ValueError, match=r"reference_point\(\) is computed from every agent"):
        part.reference_point()


@pytest.mark.parametrize("name", ["sphere-pca", "kpca-grassmann", "logistic", "softmax",
                                  "spd-frechet", "hyperbolic-ridge"])
def test_pooled_quantities_raise_on_a_shard(name):
    part = BUILDERS[name](np.random.default_rng(3)).shard(np.array([0]))
    pooled = {"sphere-pca": "covariance", "kpca-grassmann": "eigenvalues", "logistic": "pooled",
              "softmax": "accuracy", "spd-frechet": "pooled_points",
              "hyperbolic-ridge": "pooled_weights"}[name]
    args = (np.zeros(part.manifold.point_shape),) if pooled == "accuracy" else ()
    with pytest.raises(ValueError, match="'.data'"):
        getattr(part, pooled)(*args)


class _Block(InProcessCommunicator):
    """Three in-process 'ranks': each block's all_rows sees the rows the other two hold."""

    def __init__(self, n_agents, agents, table):
        super().__init__(n_agents)
        self._agents, self.table = agents, table

    @property
    def agents(self):
        return self._agents

    @property
    def n_local(self):
        return self._agents.size

    def all_rows(self, values):
        values = np.asarray(values)
        self.table[tuple(self._agents)] = values
        out = np.full((self.n_agents,) + values.shape[1:], np.nan)
        for block, rows in self.table.items():
            out[list(block)] = rows
        return out


def test_reduced_cost_and_grad_are_the_one_process_bits(full):
    x = _point(full, np.random.default_rng(4))
    table = {}
    shards = [full.shard(b, reducer=_Block(N_AGENTS, np.sort(b), table)) for b in BLOCKS]
    # every block first posts its rows; the last one to reduce sees them all
    for part in shards:
        part.cost(x)
    for part in shards:
        assert part.cost(x) == full.cost(x)
    table.clear()
    for part in shards:
        part.grad(x)
    for part in shards:
        _equal(part.grad(x), full.grad(x))
        assert part.grad_norm(x) == full.grad_norm(x)


def test_agent_sum_in_process_is_numpys_sum():
    v = np.random.default_rng(0).standard_normal((300, 2))
    comm = InProcessCommunicator(300)
    _equal(comm.agent_sum(v), np.sum(v, axis=0))
    _equal(comm.agent_sum(v[:, 0]), np.sum(v[:, 0]))
    assert isinstance(comm, Communicator)


def test_reference_kept_from_before_sharding_and_reducer_checked():
    full = BUILDERS["sphere-pca"](np.random.default_rng(6))
    ref, ref_cost = full.reference_point(), full.reference_cost()
    part = full.shard(np.array([2, 0]))
    _equal(part.reference_point(), ref)
    assert part.reference_cost() == ref_cost
    assert part.distance_to_reference(ref) == 0.0
    with pytest.raises(ValueError, match="argument 'reducer' serves agents"):
        full.shard(np.array([0, 2]), reducer=InProcessCommunicator(N_AGENTS))
    with pytest.raises(ValueError, match="argument 'agents' must hold distinct ids"):
        full.shard(np.array([0, 0]))
    with pytest.raises(ValueError, match="argument 'agents' must hold distinct ids"):
        full.shard(np.array([6]))


def test_a_shard_pickles_without_its_reducer(full):
    one = InProcessCommunicator(N_AGENTS)
    part = full.shard(np.arange(N_AGENTS), reducer=one)
    x = _point(full, np.random.default_rng(7))
    assert part.cost(x) == full.cost(x)
    back = pickle.loads(pickle.dumps(part.shard(np.array([3, 4]))))
    assert back.is_shard and back.reducer is None
    agents = np.array([4, 3])
    xs = _point(full, np.random.default_rng(8), 2)
    _equal(back.local_cost(xs, agents), full.local_cost(xs, agents))
    with pytest.raises(ValueError, match="agent 1 is not held here"):
        back.local_grad(xs, np.array([1, 3]))


def test_as_shard_builds_from_the_blocks_rows_only():
    rng = np.random.default_rng(9)
    z = _features(rng)
    full = SpherePCA(z, counts=COUNTS, norm_bound=4.0)
    block = np.array([2, 3])
    local = SpherePCA(z[block], counts=COUNTS[block], norm_bound=4.0)
    part = local.as_shard(block, COUNTS)
    assert part is local and part.n_agents == N_AGENTS
    _equal(part.mask, full.mask)
    x = Sphere(4).random_point(rng, (2,))
    _equal(part.local_grad(x, block), full.local_grad(x, block))
    with pytest.raises(ValueError, match="argument 'counts' disagrees"):
        SpherePCA(z[block], counts=COUNTS[block]).as_shard(block, COUNTS[::-1].copy())
    with pytest.raises(ValueError, match="argument 'agents' must be 2 increasing ids"):
        SpherePCA(z[block], counts=COUNTS[block]).as_shard(block[::-1], COUNTS)


def test_training_accuracy_of_a_linear_shard_is_a_reduction():
    full = BUILDERS["logistic"](np.random.default_rng(10))
    x = 0.3 * np.random.default_rng(11).standard_normal(5)
    table = {}
    shards = [full.shard(b, reducer=_Block(N_AGENTS, np.sort(b), table)) for b in BLOCKS]
    for part in shards:
        part.accuracy(x)
    for part in shards:
        assert part.accuracy(x) == full.accuracy(x)
    with pytest.raises(ValueError, match=r"accuracy\(x\) needs every agent's data"):
        full.shard(np.array([1])).accuracy(x)


def test_an_empty_shard_holds_the_public_facts_only():
    full = BUILDERS["sphere-pca"](np.random.default_rng(12))
    public = full.shard(np.array([], dtype=int))
    assert public._data["z"].shape == (0, N_MAX, 5) and public.n_agents == N_AGENTS
    _equal(public.agent_weights, full.agent_weights)
    assert public.gradient_bound == full.gradient_bound
    with pytest.raises(ValueError, match="agent 0 is not held here"):
        public.local_cost(np.eye(5)[0], np.array([0]))


def _dispatch_problem():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.02, 0.1, (N_AGENTS, 2))
    a[1] = 0.0   # a bus without a generator: W_i = {0}
    hi = rng.uniform(40.0, 80.0, (N_AGENTS, 2))
    hi[1] = 0.0
    return QuadraticResourceAllocation(a, rng.uniform(1.0, 3.0, (N_AGENTS, 2)),
                                       np.zeros_like(a), hi, 0.4 * hi)


def test_resource_allocation_shards_hold_their_agents_costs_only():
    full = _dispatch_problem()
    w_star = full.optimum()
    price = np.random.default_rng(8).uniform(0.0, 10.0, (N_AGENTS, 2))
    w = full.primal(price)
    table = {}
    shards = [full.shard(b, reducer=_Block(N_AGENTS, np.sort(b), table)) for b in BLOCKS]
    for part in shards:
        held = part.agents
        for name in ("a", "b", "lo", "hi", "demand", "free"):
            assert part._rows[name].shape == (held.size, 2)
            with pytest.raises(ValueError, match=f"'.{name}'"):
                getattr(part, name)
        _equal(part.primal_rows(held, price[held]), w[held])
        _equal(part.demand_rows(held), full.demand[held])
        _equal(part.optimum(), w_star)
        _equal(part.imbalance(w), full.imbalance(w))
        assert part.strong_convexity == full.strong_convexity
        other = np.setdiff1d(np.arange(N_AGENTS), held)[0]
        with pytest.raises(ValueError, match=f"agent {other} is not held here"):
            part.primal_rows(np.array([other]), price[:1])
        part.cost(w)   # each block posts its cost terms; the last one sees them all
    for part in shards:
        assert part.cost(w) == full.cost(w)
    fresh = _dispatch_problem().shard(np.array([0, 1]))
    with pytest.raises(ValueError, match="optimum"):
        fresh.optimum()
    with pytest.raises(ValueError, match="needs every agent's costs"):
        fresh.cost(w)
    restored = pickle.loads(pickle.dumps(shards[0]))
    assert restored.reducer is None and restored.is_shard
    _equal(restored.primal_rows(restored.agents, price[restored.agents]), w[restored.agents])
    with pytest.raises(ValueError, match="argument 'agents' must hold distinct ids"):
        full.shard(np.array([0, 0]))


@pytest.mark.parametrize("per_block", [1, 2, 5])
def test_batch_blocks_gather_what_batch_gathers(full, per_block):
    # Problem._batch_blocks (the ids and indices checked once for a trainer's blocks) gives
    # each block what batch() gives it, on the full problem and on a shard (global ids mapped
    # to its rows), and refuses what batch() refuses
    rng = np.random.default_rng(per_block)
    block = np.array([1, 2, 4])
    part = full.shard(block)
    agents = np.array([4, 1, 4, 2, 1])
    idx = full.sample_batches(agents, 3, rng)
    for prob in (full, part):
        buffers = {k: np.empty((per_block * 3,) + v.shape[2:], v.dtype)
                   for k, v in prob._data.items()}
        starts = []
        for start, stop, got in prob._batch_blocks(agents, idx, per_block, buffers):
            starts.append(start)
            want = full.batch(agents[start:stop], idx[start:stop])
            assert sorted(got) == sorted(want)
            for key in want:
                _equal(got[key], want[key])
        assert starts == list(range(0, agents.size, per_block))
    buffers = {k: np.empty((per_block * 3,) + v.shape[2:], v.dtype) for k, v in part._data.items()}
    with pytest.raises(ValueError, match=r"agent 3 is not held here"):
        next(part._batch_blocks(np.array([1, 3]), idx[:2], per_block, buffers))
    with pytest.raises(ValueError, match=r"argument 'idx' must hold row indices in \[0, 9\)"):
        next(full._batch_blocks(agents, idx + N_MAX, per_block, buffers))
