"""Issue 13: the SPD Frechet evaluation (one frame for the point, -2 applied after the sum)
gives the bits of the formula it replaces: a frame per agent and ``sum(where(mask, -2 log, 0))``.
"""

from __future__ import annotations

import numpy as np
import pytest

from rfed.datasets.synthetic import make_wishart_spd
from rfed.problems import SPDFrechetMean


def _reference(p: SPDFrechetMean, x, agents):
    """Local costs and gradients the way they were computed before issue 13."""
    agents = np.arange(p.n_agents) if agents is None else np.asarray(agents)
    a, chol, mask = p.data["a"][agents], p.data["chol"][agents], p.mask[agents]
    xb = np.broadcast_to(np.asarray(x, dtype=float), (agents.size, 3, 3))
    log, d = p.manifold.log_dist_eigh(xb[:, None], a, chol)
    count = p.counts[agents]
    cost = np.sum(np.where(mask, d**2, 0.0), axis=-1) / count
    grad = np.sum(np.where(mask[..., None, None], -2.0 * log, 0.0), axis=1) / count[:, None, None]
    return cost, grad


@pytest.mark.parametrize("sizes", [(30, 30, 30), (30, 7, 19)])
def test_local_cost_and_grad_keep_their_bits(sizes):
    """Equal local sizes (no padding: the short path) and unequal ones (padded: the masked
    path); all agents and a subset; one point for all and one point per agent."""
    pts = make_wishart_spd(sum(sizes), 3, 5)
    p = SPDFrechetMean.from_arrays(np.split(pts, np.cumsum(sizes)[:-1]))
    rng = np.random.default_rng(1)
    for agents in (None, np.array([2, 0])):
        n = p.n_agents if agents is None else agents.size
        for x in (p.manifold.random_point(rng), p.manifold.random_point(rng, n)):
            p._evaluated = None
            cost, grad = _reference(p, x, agents)
            np.testing.assert_array_equal(p.local_cost(x, agents), cost)
            np.testing.assert_array_equal(p.local_grad(x, agents), grad)
            np.testing.assert_array_equal(np.signbit(p.local_grad(x, agents)), np.signbit(grad))


@pytest.mark.parametrize("sizes", [(30, 30, 30), (30, 7, 19)])
def test_cost_only_evaluation(sizes):
    """``evaluate_grad_norm=False``: the local costs are the masked means of SPD.dist_eigvalsh's
    squared distances bit for bit (one point for all and one per agent, all agents and a subset),
    agree with the eigh evaluation's to 1e-12 relative, and are kept (a second call at the same
    point does not recompute); a run's recorded rounds then hold no ``grad_norm``; the
    gradient is still available on request. A non-bool flag is refused, naming it."""
    from rfed.algorithms.base import evaluate_point

    pts = make_wishart_spd(sum(sizes), 3, 5)
    parts = np.split(pts, np.cumsum(sizes)[:-1])
    p = SPDFrechetMean.from_arrays(parts, evaluate_grad_norm=False)
    both = SPDFrechetMean.from_arrays(parts)
    rng = np.random.default_rng(2)
    for agents in (None, np.array([2, 0])):
        ids = np.arange(p.n_agents) if agents is None else agents
        for x in (p.manifold.random_point(rng), p.manifold.random_point(rng, ids.size)):
            xb = np.broadcast_to(x, (ids.size, 3, 3))
            d = p.manifold.dist_eigvalsh(xb[:, None], p.data["a"][ids], p.data["chol"][ids])
            mask = p.mask[ids]
            expected = np.sum(np.where(mask, d**2, 0.0), axis=-1) / p.counts[ids]
            np.testing.assert_array_equal(p.local_cost(x, agents), expected)
            np.testing.assert_allclose(p.local_cost(x, agents), both.local_cost(x, agents),
                                       rtol=1e-12)
    x = p.manifold.random_point(rng)
    first = p.cost(x)
    calls = []
    original = p.manifold.dist_eigvalsh
    p.manifold.dist_eigvalsh = lambda *a: calls.append(1) or original(*a)
    assert p.cost(x.copy()) == first
    assert not calls
    assert abs(first - both.cost(x)) <= 1e-12 * both.cost(x)
    del p.manifold.dist_eigvalsh
    rec = evaluate_point(p, x)
    assert "grad_norm" not in rec and {"cost", "excess_risk", "dist_to_ref"} <= rec.keys()
    assert "grad_norm" in evaluate_point(both, x)
    np.testing.assert_array_equal(p.grad(x), both.grad(x))
    with pytest.raises(ValueError, match="evaluate_grad_norm"):
        SPDFrechetMean.from_arrays(parts, evaluate_grad_norm="no")


def test_kept_evaluations_are_never_stale():
    """The evaluations kept by (agents, point bytes) (the common start of the settings'
    repetitions is evaluated once) return what a fresh problem computes, byte for byte: after
    the point is mutated in place, for another point of the same shape, for another subset of
    agents, and after the oldest answers were dropped to stay under the byte bound."""
    pts = make_wishart_spd(60, 3, 7)
    parts = np.split(pts, [20, 40])
    kept = SPDFrechetMean.from_arrays(parts, evaluate_grad_norm=False)
    rng = np.random.default_rng(4)

    def fresh(x, agents=None):
        return SPDFrechetMean.from_arrays(parts, evaluate_grad_norm=False).local_cost(x, agents)

    x = kept.manifold.random_point(rng)
    first = kept.local_cost(x)
    assert first.tobytes() == fresh(x).tobytes()
    x[0, 0] += 0.25   # the same array, another point: not the kept answer
    x[1, 1] += 0.25
    moved = kept.local_cost(x)
    assert moved.tobytes() == fresh(x).tobytes() != first.tobytes()
    other = kept.manifold.random_point(rng)
    assert kept.local_cost(other).tobytes() == fresh(other).tobytes()
    subset = np.array([2, 0])
    assert kept.local_cost(other, subset).tobytes() == fresh(other, subset).tobytes()
    # a returned answer is the caller's: writing into it leaves the kept one alone
    answer = kept.local_cost(other)
    answer[:] = 0.0
    assert kept.local_cost(other).tobytes() == fresh(other).tobytes()
    # a bound below one entry keeps the last answer only: the oldest go, and a point
    # evaluated again is recomputed
    kept._EVALUATIONS_BYTES = 1
    points = [kept.manifold.random_point(rng) for _ in range(3)]
    for p in points:
        kept.local_cost(p)
    assert len(kept._evaluated) == 1
    assert kept.local_cost(points[0]).tobytes() == fresh(points[0]).tobytes()
