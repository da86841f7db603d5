"""IEEE 14-bus economic dispatch: the paper's optimum recomputed independently."""

import dataclasses

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.sparse.csgraph import connected_components

from rfed.datasets import dispatch_optimum, ieee14_dispatch

W_STAR = [76.7398, 85.6530, 59.1311, 68.9863, 70.4898]


def test_numbers_as_printed():
    p = ieee14_dispatch()
    assert p.n_buses == 14 and p.total_demand == 361.0
    np.testing.assert_array_equal(p.generators, [0, 1, 2, 5, 7])
    np.testing.assert_array_equal(p.w_star, W_STAR)
    assert p.w_star_full.sum() == pytest.approx(361.0, abs=1e-3)
    np.testing.assert_array_equal(p.a[p.generators], [0.04, 0.03, 0.035, 0.03, 0.04])
    np.testing.assert_array_equal(p.upper[p.generators], [80, 90, 70, 70, 80])
    off = np.setdiff1d(np.arange(14), p.generators)
    assert not p.a[off].any() and not p.upper[off].any()


def test_scipy_optimum_matches_paper():
    p = ieee14_dispatch()
    g = p.generators
    a, b = p.a[g], p.b[g]
    res = minimize(
        lambda w: np.sum(a * w**2 + b * w),
        x0=np.full(5, 361.0 / 5),
        jac=lambda w: 2 * a * w + b,
        bounds=list(zip(p.lower[g], p.upper[g], strict=True)),
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 361.0, "jac": lambda w: np.ones(5)}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert res.success
    np.testing.assert_allclose(res.x, W_STAR, atol=1e-3)
    assert res.x.sum() == pytest.approx(361.0, abs=1e-8)


def test_bisection_optimum_matches_paper_and_closed_form_price():
    p = ieee14_dispatch()
    w, lam = dispatch_optimum(p)
    np.testing.assert_allclose(w[p.generators], W_STAR, atol=1e-3)
    assert w.sum() == pytest.approx(361.0, abs=1e-8)
    g = p.generators
    # interior optimum: lam* = (D + sum b/(2a)) / sum 1/(2a)  (spec 003 section 5.1)
    closed = (361.0 + np.sum(p.b[g] / (2 * p.a[g]))) / np.sum(1 / (2 * p.a[g]))
    assert lam == pytest.approx(closed, abs=1e-9)
    assert lam == pytest.approx(8.139180, abs=1e-6)
    assert p.cost(w) <= p.cost(p.w_star_full) + 1e-9


def test_box_constraint_becomes_active_when_demand_rises():
    p = ieee14_dispatch()
    demand = p.demand.copy()
    demand[3] += 20.0  # 381 MW: price 8.41, bus 1 would make 80.2 MW > its 80 MW cap
    q = dataclasses.replace(p, demand=demand)
    w, lam = dispatch_optimum(q)
    assert w.sum() == pytest.approx(381.0, abs=1e-8)
    assert np.all(w <= q.upper + 1e-12)
    assert w[0] == 80.0
    free = (w[q.generators] > q.lower[q.generators]) & (w[q.generators] < q.upper[q.generators])
    np.testing.assert_allclose((2 * q.a * w + q.b)[q.generators][free], lam, atol=1e-8)
    too_much = dataclasses.replace(p, demand=p.demand + 100.0)
    with pytest.raises(ValueError, match="problem"):
        dispatch_optimum(too_much)


def test_directed_graph():
    p = ieee14_dispatch()
    assert p.edges.shape == (35, 2)
    assert len({tuple(e) for e in p.edges}) == 35
    assert not np.any(p.edges[:, 0] == p.edges[:, 1])
    adj = p.adjacency()
    # in- and out-degrees under the paper's convention (spec 003 section 5.3)
    np.testing.assert_array_equal(adj.sum(1), [3, 3, 4, 3, 4, 3, 2, 2, 2, 2, 2, 2, 2, 1])
    np.testing.assert_array_equal(adj.sum(0), [2, 3, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 2, 2])
    assert connected_components(adj, directed=True, connection="strong")[0] == 1
    # printed pair (i, j) is the edge j -> i
    np.testing.assert_array_equal(p.edges[0], [1, 0])
    np.testing.assert_array_equal(p.edges_paper[0], [1, 2])


def test_frozen():
    p = ieee14_dispatch()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "x"
    with pytest.raises(ValueError):
        p.a[0] = 1.0
    with pytest.raises(ValueError, match="'w'"):
        p.cost(np.zeros(5))
