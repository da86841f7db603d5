"""Empirical privacy audits of the baselines (MUFFLIATO, DPDO, DP-CGA), as test_audit_decentralized
audits the papers' algorithms.

Agents are independent trials of the first round (their releases read only the common public
start and their own data); half of them hold the canary record. For each algorithm the statistic
is the released value (captured by a spy on the mechanism the algorithm calls, or read from the
message), the honest run's Clopper-Pearson lower bound on epsilon must stay below the certified
epsilon, and a deliberately broken variant (noise four times smaller than the ledger records,
monkeypatched in the test on the mechanism the algorithm calls, with test_audit_decentralized's
helper) must be caught.
"""

import numpy as np

from rfed.algorithms.decentralized import DPCGA, DPDO, Muffliato
from rfed.algorithms.decentralized import base as contract
from rfed.algorithms.decentralized import dpdo as dpdo_module
from rfed.networks.comm import arc_list
from rfed.networks.graphs import ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.privacy.audit import epsilon_lower_bound
from rfed.problems.linear import LogisticRegression
from tests.privacy.test_audit_decentralized import _broken

DELTA = 1e-5
TRIALS = 3000
EPS = 1.5


def _halves(n: int) -> np.ndarray:
    return np.arange(n) >= n // 2


def _canary_problem(n: int, q: int, canary: np.ndarray, feature: float = 1.0):
    """Features all ones, labels +1; where ``canary``, record 0 becomes ``(feature, -1)``."""
    feats = np.ones((n, q, 1))
    labels = np.ones((n, q))
    feats[canary, 0, 0] = feature
    labels[canary, 0] = -1.0
    return LogisticRegression(feats, labels)


def _spy(monkeypatch, module, name: str, out_list: list) -> None:
    real = getattr(module, name)

    def spy(*args):
        out = real(*args)
        out_list.append(out)
        return out

    monkeypatch.setattr(module, name, spy)


# ---------------------------------------------------------------------- MUFFLIATO
def _muffliato_scores(monkeypatch):
    # at x = 0 the logistic gradient of (1, b) is -b/2: clipped to C = 0.5, an ordinary record
    # gives -0.5 and the canary +0.5, so the sum's replace-one sensitivity 2C is attained
    n, q = 2 * TRIALS, 4
    canary = _halves(n)
    prob = _canary_problem(n, q, canary)
    released: list = []
    _spy(monkeypatch, contract, "gaussian_mechanism", released)
    alg = Muffliato(Network(ring(n)), lr=1.0, batch_size=None, clip=0.5, gossip_steps=2,
                    omega=1.2, budget=PrivacyBudget(EPS, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(0)))
    stat = released[-1][:, 0]   # the noisy clipped sum of every agent
    return (stat[~canary], stat[canary]), alg.privacy(state)["epsilon_certified"]


def test_audit_muffliato(monkeypatch):
    (s0, s1), eps = _muffliato_scores(monkeypatch)
    assert 0.9 * EPS <= eps <= EPS
    honest = epsilon_lower_bound(s0, s1, DELTA)
    assert honest.epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, contract, "gaussian_mechanism")
    (s0, s1), eps_b = _muffliato_scores(monkeypatch)
    assert eps_b == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


# ---------------------------------------------------------------------- DPDO
def _dpdo_scores():
    n, q = 2 * TRIALS, 4
    canary = _halves(n)
    prob = _canary_problem(n, q, canary)
    alg = DPDO(Network(ring(n)), lr=1.0, clip=0.5, budget=PrivacyBudget(EPS, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(1)))
    # the message minus the averaged point v (a function of the public initial messages):
    # -gamma_0 g + Lap(M_1), the L1 sensitivity 2C gamma_0 / q attained
    stat = (state.x - state.z)[:, 0]
    return (stat[~canary], stat[canary]), alg.privacy(state)["epsilon_certified"]


def test_audit_dpdo(monkeypatch):
    (s0, s1), eps = _dpdo_scores()
    assert 0.9 * EPS <= eps <= EPS
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    _broken(monkeypatch, dpdo_module, "laplace_mechanism")
    (s0, s1), eps_b = _dpdo_scores()
    assert eps_b == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


# ---------------------------------------------------------------------- DP-CGA
def _dpcga_scores(monkeypatch):
    # batch-level clipping: the canary (100, -1) has gradient +50 at x = 0, so its batch mean
    # ((-0.5) * 2 + 50) / 3 clips to +C while an ordinary batch's is -C: sensitivity 2C attained
    n, q = 2 * TRIALS, 3
    canary = _halves(n)
    prob = _canary_problem(n, q, canary, feature=100.0)
    released: list = []
    _spy(monkeypatch, contract, "gaussian_mechanism", released)
    alg = DPCGA(Network(ring(n)), lr=1.0, batch_size=q, clip=0.5,
                budget=PrivacyBudget(EPS, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(2)))
    # all of agent j's releases of the round (cross-gradients it computed, then its own): their
    # sum is the optimal statistic for the composed mechanism the ledger accounts
    owners = np.concatenate([arc_list(alg.weights)[0], np.arange(n)])
    rel = np.concatenate(released)
    assert owners.size == rel.shape[0]
    total = np.bincount(owners, weights=rel[:, 0], minlength=n)
    return (total[~canary], total[canary]), alg.privacy(state)["epsilon_certified"]


def test_audit_dpcga(monkeypatch):
    (s0, s1), eps = _dpcga_scores(monkeypatch)
    assert 0.9 * EPS <= eps <= EPS
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, contract, "gaussian_mechanism")
    (s0, s1), eps_b = _dpcga_scores(monkeypatch)
    assert eps_b == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps

