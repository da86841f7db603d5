"""Empirical privacy audits of the decentralized algorithms (issue 8, "Must show").

For each algorithm, on a tiny configuration with a canary record, many trials are run batched
(agents are independent trials in the first round: their releases depend only on the common
public start and their own data) and :func:`rfed.privacy.audit.epsilon_lower_bound` turns the
scores on the two neighbouring data sets into a Clopper-Pearson lower bound on epsilon. The
honest algorithm's bound must stay below its certified epsilon; a deliberately broken variant
(noise four times smaller than the ledger records, monkeypatched in the TEST on the mechanism
the algorithm calls) must be caught (bound above the certified epsilon).

Canary (linear problems, d = 1, at x = 0): ordinary records ``(a, b) = (1, +1)`` and the canary
``(1, -1)``: their clipped per-sample gradients are ``-c`` and ``+c`` at the clip level ``c``, so
the replace-one sensitivity the ledger assumes is attained.
"""

import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL, DPDPSGD, NoisyDDGT, NoisyDSGD
from rfed.algorithms.decentralized import base as contract
from rfed.algorithms.decentralized import dpdda as dpdda_module
from rfed.algorithms.decentralized import dpdgt as dpdgt_module
from rfed.networks.comm import arc_list
from rfed.networks.graphs import complete, digraph_from_edges, ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.privacy.audit import epsilon_lower_bound
from rfed.problems.dispatch import QuadraticResourceAllocation
from rfed.problems.linear import HingeSVM, L2Regularizer, LogisticRegression

DELTA = 1e-5
TRIALS = 3000  # per neighbouring data set; half of them choose the threshold
EPS = 1.5  # certified budget of the audited runs


def _canary_data(n_agents: int, q: int, canary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features ``(n_agents, q, 1)`` all ones; labels +1, and -1 on record 0 where ``canary``."""
    feats = np.ones((n_agents, q, 1))
    labels = np.ones((n_agents, q))
    labels[canary, 0] = -1.0
    return feats, labels


def _halves(n: int) -> np.ndarray:
    """Agents ``n/2 ..`` hold the canary (D1), the others D0."""
    return np.arange(n) >= n // 2


def _scores(stat: np.ndarray, canary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return stat[~canary], stat[canary]


def _broken(monkeypatch, module, name: str, factor: float = 4.0, sigma_pos: int = -2) -> None:
    """Monkeypatch ``module.name`` (a mechanism) to add noise ``factor`` times smaller."""
    real = getattr(module, name)

    def smaller(*args):
        args = list(args)
        args[sigma_pos] = np.asarray(args[sigma_pos]) / factor
        return real(*args)

    monkeypatch.setattr(module, name, smaller)


# ---------------------------------------------------------------------- DO-ADP, noisy DSGD
def _doadp_scores(cls):
    n, q = 2 * TRIALS, 4
    canary = _halves(n)
    prob = LogisticRegression(*_canary_data(n, q, canary))
    # full local batches, G = 0.5 (at x = 0 the logistic gradient is -b a / 2): one noisy step
    kw = {"alpha": 1.0, "grad_bound": 0.5, "batch_size": None,
          "budget": PrivacyBudget(EPS, DELTA), "n_rounds": 1}
    if cls is DOADP:
        kw.update(p=1.0, beta=0.0)
    alg = cls(Network(ring(n)), **kw)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(0)))
    # x_new = x0 - alpha (noisy gradient): the model the agent goes on to publish
    return _scores(state.x[:, 0], canary), alg.privacy(state)["epsilon_certified"]


@pytest.mark.parametrize("cls", [DOADP, NoisyDSGD])
def test_audit_doadp_family(monkeypatch, cls):
    (s0, s1), eps = _doadp_scores(cls)
    assert 0.9 * EPS <= eps <= EPS
    honest = epsilon_lower_bound(s0, s1, DELTA)
    assert honest.epsilon_lower < eps
    _broken(monkeypatch, contract, "gaussian_release")  # the private gradient's noise
    (s0, s1), eps_b = _doadp_scores(cls)
    assert eps_b == eps  # the ledger is unchanged: only the noise shrank
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


# ---------------------------------------------------------------------- DPDL, DP-DPSGD
def _spy_on_releases(monkeypatch) -> list:
    """Every noisy value the private gradient's Gaussian mechanism releases, appended to the
    returned list."""
    released: list = []
    real = contract.gaussian_mechanism

    def spy(manifold, x, value, sigma, rng):
        out = real(manifold, x, value, sigma, rng)
        released.append(out)
        return out

    monkeypatch.setattr(contract, "gaussian_mechanism", spy)
    return released


def _dpdl_scores(cls, monkeypatch):
    n, q = 2 * TRIALS, 3
    canary = _halves(n)
    prob = LogisticRegression(*_canary_data(n, q, canary))
    released = _spy_on_releases(monkeypatch)
    alg = cls(Network(ring(n)), lr=1.0, batch_size=q, clip=0.5,
              budget=PrivacyBudget(EPS, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(1)))
    # every release of agent j's data in round 1 (all models are the public start, so each is
    # the same clipped sum plus fresh noise): the cross-gradients j computed for its
    # neighbours (arcs in CSR order, data owner = receiver of the model) and its self-gradient;
    # their sum is the optimal statistic for the composed mechanism the ledger accounts
    receivers = arc_list(alg.weights)[0] if cls is DPDL else np.zeros(0, int)
    owners = np.concatenate([receivers, np.arange(n)])
    rel = np.concatenate(released)  # the round's releases, in chunks of pairs, in pair order
    assert owners.size == rel.shape[0]
    total = np.bincount(owners, weights=rel[:, 0], minlength=n)
    return _scores(total, canary), alg.privacy(state)["epsilon_certified"]


@pytest.mark.parametrize("cls", [DPDL, DPDPSGD])
def test_audit_dpdl_family(monkeypatch, cls):
    (s0, s1), eps = _dpdl_scores(cls, monkeypatch)
    assert 0.9 * EPS <= eps <= EPS
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, contract, "gaussian_mechanism")
    (s0, s1), eps_b = _dpdl_scores(cls, monkeypatch)
    assert eps_b == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


def _poisson_scores(monkeypatch):
    # DP-DPSGD with Poisson minibatches: each agent holds the canary slot and two ordinary
    # records, B = 2 of 3 (rate 2/3); the released noisy sum shifts by 2c when the canary is
    # drawn, so the trials are draws of the subsampled mechanism the PLD ledger accounts
    n, q = 2 * TRIALS, 3
    canary = _halves(n)
    prob = LogisticRegression(*_canary_data(n, q, canary))
    released = _spy_on_releases(monkeypatch)
    alg = DPDPSGD(Network(ring(n)), lr=1.0, batch_size=2, clip=0.5, sampling="poisson",
                  budget=PrivacyBudget(EPS, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(4)))
    rel = np.concatenate(released)[:, 0]
    return _scores(rel, canary), alg.privacy(state)


def test_audit_dpdpsgd_poisson(monkeypatch):
    (s0, s1), report = _poisson_scores(monkeypatch)
    eps = report["epsilon_certified"]
    assert 0.9 * EPS <= eps <= EPS and "PLD" in report["accountant"]
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, contract, "gaussian_mechanism")
    (s0, s1), report_b = _poisson_scores(monkeypatch)
    assert report_b["epsilon_certified"] == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


def _poisson_add_remove_scores(monkeypatch):
    # add/remove: agents of D1 hold one more record, the canary; the ordinary records have
    # a zero feature (zero gradient), the canary's clipped gradient is c, so the released sum
    # is c times "the canary was drawn" plus noise; rates B / N^pub from the declared size
    n, q = 2 * TRIALS, 3
    canary = _halves(n)
    feats = np.zeros((n, q + 1, 1))
    labels = np.ones((n, q + 1))
    feats[canary, q, 0] = 1.0
    labels[canary, q] = -1.0
    counts = np.where(canary, q + 1, q)
    prob = LogisticRegression(feats, labels, counts=counts)
    released = _spy_on_releases(monkeypatch)
    budget = PrivacyBudget(EPS, DELTA, neighboring="add_remove_one", public_sizes=q + 1)
    alg = DPDPSGD(Network(ring(n)), lr=1.0, batch_size=3, clip=0.5, sampling="poisson",
                  budget=budget, n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(1), np.random.default_rng(5)))
    rel = np.concatenate(released)[:, 0]
    return _scores(rel, canary), alg.privacy(state)


def test_audit_dpdpsgd_poisson_add_remove(monkeypatch):
    (s0, s1), report = _poisson_add_remove_scores(monkeypatch)
    eps = report["epsilon_certified"]
    assert report["neighboring"] == "add_remove_one" and 0.9 * EPS <= eps <= EPS
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, contract, "gaussian_mechanism")
    (s0, s1), report_b = _poisson_add_remove_scores(monkeypatch)
    assert report_b["epsilon_certified"] == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


# ---------------------------------------------------------------------- DP-DDA
def _dpdda_scores(monkeypatch, z: float):
    # 20 nodes, all active, one record each; every round's release of a node is one trial of
    # the single-release mechanism (hinge subgradient -b a = -+1 while the margin is < 1,
    # which the large gamma keeps; clipped to L = 1, sensitivity 2)
    n, rounds = 20, 2 * TRIALS // 20
    canary = _halves(n)
    prob = HingeSVM(*_canary_data(n, 1, canary), L2Regularizer(0.1), feature_bound=1.0)
    released = []
    real = dpdda_module.gaussian_release

    def spy(value, sigma, rng):
        out = real(value, sigma, rng)
        released.append(out[:, 0].copy())  # the round reuses the release's array
        return out

    monkeypatch.setattr(dpdda_module, "gaussian_release", spy)
    alg = DPDDA(Network(complete(n)), n_active=n, gamma=1e6, noise_multiplier=z)
    res = alg.run(prob, rounds, rng=2, x0=np.zeros(1), eval_every=rounds, with_reference=False)
    stat = np.stack(released)  # (rounds, n): all nodes active, in node order
    return stat[:, ~canary].ravel(), stat[:, canary].ravel(), res.privacy


def test_audit_dpdda(monkeypatch):
    # the noise multiplier of a one-round run at the budget; each trial is one release
    prob1 = HingeSVM(*_canary_data(20, 1, _halves(20)), L2Regularizer(0.1), feature_bound=1.0)
    one = DPDDA(Network(complete(20)), n_active=20, budget=PrivacyBudget(EPS, DELTA),
                n_rounds=1)
    acc = one.init(prob1, np.zeros(1), np.random.default_rng(0)).ledger
    z = acc.noise_multiplier
    acc.record_round(np.ones(20, bool))
    eps = acc.report()["epsilon_certified"]  # one release: the certified epsilon of a trial
    assert 0.9 * EPS <= eps <= EPS
    s0, s1, rep = _dpdda_scores(monkeypatch, z)
    assert rep["noise_multiplier"] == z
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, dpdda_module, "gaussian_release")
    s0, s1, _ = _dpdda_scores(monkeypatch, z)
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


# ---------------------------------------------------------------------- DP-DGT, noisy DDGT
RADIUS = 1.0


def _pairs_problem(shifted: bool) -> QuadraticResourceAllocation:
    """TRIALS disjoint 2-agent systems; agent 2t's linear cost moves by RADIUS when shifted
    (the gradient distance of the relation, attained everywhere; the box never binds)."""
    n = 2 * TRIALS
    a = np.full(n, 0.03)  # mu = 0.06, as the 14-bus system
    b = np.full(n, 2.0)
    if shifted:
        b[0::2] += RADIUS
    return QuadraticResourceAllocation(a, b, np.full(n, -1e6), np.full(n, 1e6), np.zeros(n))


def _pairs_graph():
    n = 2 * TRIALS
    src = np.arange(0, n, 2)
    arcs = np.concatenate([np.stack([src, src + 1], 1), np.stack([src + 1, src], 1)])
    return digraph_from_edges(n, arcs)


def _dgt_scores(cls, monkeypatch, rounds: int):
    graph = _pairs_graph()
    scores = []
    real = dpdgt_module.laplace_mechanism
    for shifted in (False, True):
        prob = _pairs_problem(shifted)
        released = []

        def spy(value, scale, rng, real=real, released=released):
            out = real(value, scale, rng)
            released.append(out[:, 0])
            return out

        monkeypatch.setattr(dpdgt_module, "laplace_mechanism", spy)
        alg = cls(graph, budget=PrivacyBudget(EPS, DELTA), n_rounds=rounds,
                  adjacency_radius=RADIUS)
        state = alg.init(prob, np.zeros(1), np.random.default_rng(3 + shifted))
        for _ in range(rounds):
            state = alg.step(prob, state)
        if cls is DPDGT:
            # iteration 1's pushed tracker of the changed agent, minus what the earlier
            # (public) messages explain: -alpha_0 (w_0 - d) + xi_1 (sensitivity varphi_1)
            mixed = alg.c @ released[0]
            stat = released[2] - alg.gamma * mixed
        else:
            # iteration 0's pushed tracker z_0 + xi_0 = -iota (w_0 - d) + xi_0
            stat = released[0]
        scores.append(stat[0::2])
    return scores, alg.privacy(state)["epsilon_certified"]


@pytest.mark.parametrize("cls, rounds", [(DPDGT, 2), (NoisyDDGT, 1)])
def test_audit_dgt_family(monkeypatch, cls, rounds):
    (s0, s1), eps = _dgt_scores(cls, monkeypatch, rounds)
    assert 0.9 * EPS <= eps <= EPS
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    monkeypatch.undo()
    _broken(monkeypatch, dpdgt_module, "laplace_mechanism")
    (s0, s1), eps_b = _dgt_scores(cls, monkeypatch, rounds)
    assert eps_b == pytest.approx(eps)
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps
