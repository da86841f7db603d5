"""Every algorithm family runs on the new manifolds (oblique, SO(n), SPD log-Euclidean and
Bures-Wasserstein): PriRFed non-private and private (certifying its budget) and the
decentralized DP-DPSGD, on a Frechet mean problem, approach the Karcher mean of all samples."""

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPDPSGD
from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.manifolds import Oblique, SPDBuresWasserstein, SPDLogEuclidean, SpecialOrthogonal
from rfed.networks.graphs import ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.problems import FrechetMean

N_AGENTS, N_PER = 4, 12

MANIFOLDS = {
    "Oblique(4,3)": lambda: Oblique(4, 3),
    "SO(3)": lambda: SpecialOrthogonal(3),
    "SPDLogEuclidean(3)": lambda: SPDLogEuclidean(3),
    "SPDBuresWasserstein(3)": lambda: SPDBuresWasserstein(3),
}


def _problem(m, seed=0, spread=0.3):
    rng = np.random.default_rng(seed)
    center = m.random_point(rng)
    cs = np.broadcast_to(center, (N_AGENTS, N_PER) + m.point_shape)
    pts = m.exp(cs, m.tangent_gaussian(cs, spread, rng))
    return FrechetMean(m, pts, gradient_bound=2.0), center, pts


def _karcher(m, pts):
    return m.mean(pts.reshape((-1,) + m.point_shape), tol=1e-12, max_iter=500)


@pytest.mark.parametrize("name", list(MANIFOLDS))
def test_prirfed_non_private_reaches_the_karcher_mean(name):
    m = MANIFOLDS[name]()
    prob, center, pts = _problem(m)
    target = _karcher(m, pts)
    x0 = m.exp(center, m.tangent_gaussian(center, 0.5, 1))
    alg = PriRFed(DPRSGD(steps=2), n_sampled=None, step_size=0.2)
    res = alg.run(prob, 60, rng=0, x0=x0, eval_every=60, with_reference=False)
    assert m.belongs(res.x)
    assert m.dist(res.x, target) < 1e-2 * float(m.dist(x0, target))


@pytest.mark.parametrize("name", list(MANIFOLDS))
def test_prirfed_private_run_certifies_its_budget(name):
    m = MANIFOLDS[name]()
    prob, center, pts = _problem(m, seed=1)
    target = _karcher(m, pts)
    x0 = m.exp(center, m.tangent_gaussian(center, 0.5, 2))
    budget = PrivacyBudget(8.0, 1e-5)
    alg = PriRFed(DPRSGD(steps=2, clip=2.0), n_sampled=None, step_size=0.1, budget=budget,
                  n_rounds=30)
    res = alg.run(prob, 30, rng=3, x0=x0, eval_every=30, with_reference=False)
    assert res.privacy["epsilon_certified"] <= 8.0 + 1e-9
    assert res.privacy["epsilon_certified"] > 0.5  # the noise is real, not zero
    assert m.belongs(res.x)
    assert m.dist(res.x, target) < m.dist(x0, target)


@pytest.mark.parametrize("name", list(MANIFOLDS))
def test_decentralized_dpdpsgd_runs_on_the_new_manifold(name):
    m = MANIFOLDS[name]()
    prob, center, pts = _problem(m, seed=2)
    target = _karcher(m, pts)
    x0 = m.exp(center, m.tangent_gaussian(center, 0.5, 3))
    alg = DPDPSGD(Network(ring(N_AGENTS)), lr=0.1, beta=0.5, batch_size=N_PER, clip=1e6)
    res = alg.run(prob, 150, rng=0, x0=x0, eval_every=150, with_reference=False)
    assert np.all(m.belongs(res.x))
    assert m.dist(res.x, target) < 1e-2 * float(m.dist(x0, target))
