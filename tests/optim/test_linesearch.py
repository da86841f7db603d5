"""The Armijo line search (rfed.optim.ArmijoLineSearch) and non-private PriRFed with it."""

from __future__ import annotations

import numpy as np
import pytest

from rfed.algorithms.federated import DPRSGD, DPRSVRG, ClientLevelDP, PriRFed
from rfed.manifolds import Sphere
from rfed.optim import ArmijoLineSearch
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA
from rfed.state import dumps_state, loads_state


def _pca(n_agents=1, n=400, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return SpherePCA(rng.standard_normal((n_agents, n, d)) * np.linspace(1.0, 0.3, d))


def _top_eigenvector(problem):
    z = problem.data["z"].reshape(-1, problem.data["z"].shape[-1])
    return np.linalg.eigh(z.T @ z)[1][:, -1]


def _run(problem, rounds, **kw):
    alg = PriRFed(DPRSGD(steps=kw.pop("steps", 1), batch_size=None), None, 0.1,
                  line_search=ArmijoLineSearch(**kw))
    x0 = np.full(problem.manifold.point_shape, 1.0 / np.sqrt(problem.manifold.dim + 1))
    return alg, alg.run(problem, rounds, rng=0, x0=x0, eval_every=rounds, with_reference=False)


class _Checked(ArmijoLineSearch):
    """Records every search and checks the Armijo condition on each accepted step."""

    def search(self, cost, manifold, x, direction, f0, slope, previous_cost=None):
        step = super().search(cost, manifold, x, direction, f0, slope, previous_cost)
        moved = step.alpha > 0
        # the condition on every accepted step, the cost at the accepted point recomputed
        recomputed = cost(step.x, np.arange(len(f0)))
        np.testing.assert_allclose(recomputed, step.cost, rtol=1e-12, atol=1e-15)
        assert np.all(step.cost[moved] <= f0[moved]
                      + self.sufficient_decrease * step.alpha[moved] * slope[moved])
        assert np.all(step.cost <= f0)
        self.log.append((f0.copy(), step.cost.copy(), step.alpha.copy()))
        return step


def test_every_accepted_step_meets_armijo_and_the_cost_decreases_monotonically():
    problem = _pca(n_agents=3)
    searcher = _Checked()
    object.__setattr__(searcher, "log", [])
    alg = PriRFed(DPRSGD(steps=2, batch_size=None), None, 0.1, line_search=searcher)
    x0 = np.full(8, 1.0 / np.sqrt(8))
    alg.run(problem, 15, rng=0, x0=x0, eval_every=15, with_reference=False)
    assert len(searcher.log) == 30 and any(np.any(a > 0) for _, _, a in searcher.log)
    # one agent: the global cost, round after round, never increases
    one = _pca(n_agents=1)
    alg, _ = _run(one, 1)
    state = alg.init(one, x0, np.random.default_rng(0))
    costs = [one.cost(state.x)]
    for _ in range(40):
        state = alg.step(one, state)
        costs.append(one.cost(state.x))
    assert np.all(np.diff(costs) <= 1e-15 * np.abs(costs[1:]))
    assert costs[-1] < costs[0] - 0.1


def test_it_converges_to_the_top_eigenvector():
    """The closed form: the minimiser of -x^T Z^T Z x / n on the sphere is the top
    eigenvector (up to sign), reached to 1e-6 in angle."""
    problem = _pca(n_agents=1)
    _, res = _run(problem, 300)
    v = _top_eigenvector(problem)
    assert abs(abs(float(res.x @ v)) - 1.0) < 1e-10
    assert np.linalg.norm(res.x - np.sign(res.x @ v) * v) < 1e-5


def test_the_steps_are_pymanopts_backtracking_steps():
    """With pymanopt's retraction in place of the exponential map, every search picks the
    step pymanopt's BackTrackingLineSearcher picks on the same iterates."""
    pytest.importorskip("pymanopt")
    from pymanopt.manifolds import Sphere as PSphere
    from pymanopt.optimizers.line_search import BackTrackingLineSearcher

    z = _pca(n_agents=1).data["z"][0]
    n, d = z.shape
    sphere = PSphere(d)

    def cost(x):
        zx = z @ x
        return -(zx @ zx) / n

    def rgrad(x):
        g = -2.0 * z.T @ (z @ x) / n
        return g - (x @ g) * x

    class Retracted:
        def norm(self, x, u):
            return np.linalg.norm(u, axis=-1)

        def exp(self, x, u):
            y = x + u
            return y / np.linalg.norm(y, axis=-1, keepdims=True)

    ours, theirs = ArmijoLineSearch(), BackTrackingLineSearcher()
    x = np.full(d, 1.0 / np.sqrt(d))
    previous = np.array([np.nan])
    for _ in range(25):
        f0, g = cost(x), rgrad(x)
        slope = -(g @ g)
        size, x_theirs = theirs.search(cost, sphere, x, -g, f0, slope)
        step = ours.search(lambda p, rows: np.array([cost(q) for q in p]), Retracted(),
                           x[None], -g[None], np.array([f0]), np.array([slope]), previous)
        np.testing.assert_allclose(step.alpha[0] * np.linalg.norm(g), size, rtol=1e-12)
        np.testing.assert_allclose(step.x[0], x_theirs, rtol=0, atol=1e-14)
        previous, x = np.array([f0]), x_theirs


def test_a_decrease_without_sufficient_decrease_is_backtracked():
    """f(x) = (x - 1)^2 from 0 along d = -f'(0) = 2 (slope -4), c = 1/2, first trial
    alpha = 1.9 / |d| = 0.95: f(1.9) = 0.81 decreases the cost but not by c alpha 4 = 1.9, so
    the search contracts once, to alpha = 0.475 (f(0.95) = 0.0025 <= 1 - 0.95)."""
    from rfed.manifolds import Euclidean

    def cost(p, rows):
        return ((p - 1.0) ** 2)[:, 0]

    step = ArmijoLineSearch(sufficient_decrease=0.5, initial_step=1.9).search(
        cost, Euclidean(1), np.zeros((1, 1)), np.full((1, 1), 2.0), np.ones(1), np.full(1, -4.0))
    assert step.alpha[0] == 0.475 and step.evaluations == 2
    np.testing.assert_allclose(step.x, [[0.95]])
    np.testing.assert_allclose(step.cost, [0.0025])


def test_a_rejected_step_stays_and_the_next_search_restarts():
    """A direction of ascent (a wrong sign) is never accepted: the point stays, alpha 0."""
    sphere = Sphere(3)
    x = np.array([[1.0, 0.0, 0.0, 0.0]])
    up = np.array([[0.0, 1.0, 0.0, 0.0]])

    def cost(p, rows):
        return -p[:, 0]    # minimised at e_0: every move away raises it

    step = ArmijoLineSearch().search(cost, sphere, x, up, np.array([-1.0]), np.array([-1.0]))
    np.testing.assert_array_equal(step.x, x)
    assert step.alpha[0] == 0.0 and step.cost[0] == -1.0 and step.evaluations == 26


def test_a_private_run_refuses_the_line_search_and_says_why():
    ls = ArmijoLineSearch()
    for kw in ({"budget": PrivacyBudget(1.0, 1e-5), "n_rounds": 3},
               {"client_dp": ClientLevelDP(clip=1.0, noise_multiplier=1.0)}):
        with pytest.raises(ValueError, match="'line_search'.*release"):
            PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1, line_search=ls, **kw)
    with pytest.raises(ValueError, match="'line_search'.*release"):
        PriRFed(DPRSGD(steps=1, batch_size=None, clip=1.0, noise_multiplier=1.0), None, 0.1,
                line_search=ls)
    for trainer in (DPRSGD(steps=1, batch_size=5), DPRSGD(steps=1, batch_size=None, clip=1.0),
                    DPRSVRG(steps=1)):
        with pytest.raises(ValueError, match="'line_search' needs the full, unclipped"):
            PriRFed(trainer, None, 0.1, line_search=ls)
    with pytest.raises(TypeError, match="'line_search'"):
        PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1, line_search="armijo")


@pytest.mark.parametrize("name, value", [("contraction", 1.0), ("sufficient_decrease", 0.0),
                                         ("optimism", -1.0), ("initial_step", 0.0),
                                         ("max_backtracks", -1)])
def test_bad_constants_are_refused_naming_them(name, value):
    with pytest.raises(ValueError, match=f"'{name}'"):
        ArmijoLineSearch(**{name: value})


def test_a_resumed_line_search_run_is_bit_identical():
    problem = _pca(n_agents=2)
    alg = PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1,
                  line_search=ArmijoLineSearch())
    x0 = np.full(8, 1.0 / np.sqrt(8))
    saved = []
    full = alg.run(problem, 8, rng=0, x0=x0, eval_every=8, checkpoint_every=4,
                   checkpoint=lambda p: saved.append(dumps_state(p, kind="k")))
    resumed = alg.run(problem, 8, rng=0, x0=x0, eval_every=8,
                      resume_from=loads_state(saved[-1], kind="k"))
    np.testing.assert_array_equal(resumed.x, full.x)
    np.testing.assert_array_equal(resumed.state.line_search_cost, full.state.line_search_cost)


def test_a_flower_federation_refuses_it_rather_than_dropping_it():
    from rfed.engines.flower_config import algorithm_spec

    alg = PriRFed(DPRSGD(steps=1, batch_size=None), None, 0.1, line_search=ArmijoLineSearch())
    with pytest.raises(ValueError, match="'line_search'"):
        algorithm_spec(alg)
