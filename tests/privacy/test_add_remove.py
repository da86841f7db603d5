"""Add/remove-one neighbours: no private dataset size shapes a release.

Under ``neighboring='add_remove_one'`` two neighbouring datasets differ in their SIZE, so a
normaliser, a sampling rate, a noise scale, an aggregation weight or a default delta computed
from the true size ``N_i`` differs between them and leaks. The reviewer's case: one agent on
S^99, a full batch, ``N = 4`` against ``N = 5`` (one extra zero-gradient record), budget eps 1:
the report certified 1.000 for both while the noise std was 0.933 against 0.746 (so the two
output laws are far apart: their exact epsilon, below, is about 25).

The tests here: the exact epsilon of that pair (the two Gaussian output laws, computed by
:func:`rfed.privacy.audit.gaussian_pair_epsilon`, which tests/privacy/test_audit.py checks
against a numerical integration of the two densities) never exceeds the reported epsilon; every
algorithm that accepts add/remove computes the same plan, noise and delta for ``N`` and
``N + 1`` records; every other one refuses add/remove with its reason.
"""

import numpy as np
import pytest

import rfed.algorithms.federated.local as local_module
from rfed.algorithms.baselines import AnalyzeGauss, LogEuclideanPrivateMean, NoisyPowerMethod
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL, DPDPSGD, NoisyDDGT, NoisyDSGD
from rfed.algorithms.federated import DPRSGD, DPRSVRG, ClientLevelDP, PriRFed
from rfed.manifolds import SPD
from rfed.networks import Network, ring
from rfed.privacy import PrivacyBudget
from rfed.privacy.audit import gaussian_pair_epsilon
from rfed.problems import FrechetMean, LogisticRegression, SpherePCA

DELTA = 1e-5


def _sphere_pair():
    """S^99: 4 random records, and the same 4 plus a zero record (zero gradient everywhere)."""
    z4 = np.random.default_rng(7).standard_normal((1, 4, 100))
    z5 = np.concatenate([z4, np.zeros((1, 1, 100))], axis=1)
    return SpherePCA(z4), SpherePCA(z5)


def _release_of_one_round(problem, trainer, budget, monkeypatch):
    """Run one PriRFed round of one agent from a fixed public start; return the released
    tangent value (before the noise), its noise std and the run's privacy report."""
    captured = []
    honest = local_module.gaussian_mechanism

    def spy(manifold, x, value, sigma, rng):
        captured.append((np.array(value), float(np.asarray(sigma).ravel()[0])))
        return honest(manifold, x, value, sigma, rng)

    monkeypatch.setattr(local_module, "gaussian_mechanism", spy)
    x0 = np.zeros(100)
    x0[0] = 1.0
    alg = PriRFed(trainer, n_sampled=1, step_size=0.1, budget=budget, n_rounds=1)
    res = alg.run(problem, 1, rng=0, x0=x0, with_reference=False)
    assert len(captured) == 1
    return captured[0][0][0], captured[0][1], res.privacy


def test_reviewers_pair_exact_epsilon_never_above_the_reported_one(monkeypatch):
    """N = 4 vs N = 5 (one more zero-gradient record), full batch, eps 1, add/remove."""
    small, large = _sphere_pair()
    budget = PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes=4)
    trainer = DPRSGD(steps=1, batch_size=None, clip=1.0)
    v0, s0, rep0 = _release_of_one_round(small, trainer, budget, monkeypatch)
    v1, s1, rep1 = _release_of_one_round(large, trainer, budget, monkeypatch)
    # the noise std is a function of public numbers only
    assert s0 == s1
    # the two releases: N(v0, s0^2 I_99) and N(v1, s1^2 I_99) in the tangent space at x0
    exact = gaussian_pair_epsilon(float(np.linalg.norm(v0 - v1)), s0, s1, 99, rep0["delta"])
    for rep in (rep0, rep1):
        assert rep["neighboring"] == "add_remove_one"
        assert exact <= rep["epsilon_certified"] <= 1.0
    # the pair is a real add/remove pair (the extra record is absent from the sum, the
    # normaliser is the public 4): the two means coincide, so this pair alone spends nothing
    assert np.linalg.norm(v0 - v1) < 1e-12


def test_worst_case_add_remove_pair_reaches_the_sensitivity(monkeypatch):
    """The extra record's clipped gradient has the full norm tau: the pair's exact epsilon is
    the Gaussian mechanism's at sensitivity tau / N^pub, and stays below the certificate."""
    small, _ = _sphere_pair()
    x0 = np.zeros(100)
    x0[0] = 1.0
    canary = 3.0 * (x0 + np.eye(100)[1]) / np.sqrt(2.0)   # gradient of norm 9 at x0, clipped to 1
    large = SpherePCA(np.concatenate([small.data["z"], canary[None, None]], axis=1))
    budget = PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes=4)
    trainer = DPRSGD(steps=1, batch_size=None, clip=1.0)
    v0, s0, rep0 = _release_of_one_round(small, trainer, budget, monkeypatch)
    v1, s1, _ = _release_of_one_round(large, trainer, budget, monkeypatch)
    shift = float(np.linalg.norm(v0 - v1))
    assert shift == pytest.approx(1.0 / 4, rel=1e-12)        # tau / N^pub
    exact = gaussian_pair_epsilon(shift, s0, s1, 99, rep0["delta"])
    assert 0.95 <= exact <= rep0["epsilon_certified"] <= 1.0


def test_add_remove_without_declared_public_sizes_is_refused():
    small, _ = _sphere_pair()
    alg = PriRFed(DPRSGD(steps=1, clip=1.0), n_sampled=1, step_size=0.1,
                  budget=PrivacyBudget(1.0, DELTA, neighboring="add_remove_one"), n_rounds=1)
    with pytest.raises(ValueError, match="public_sizes.*local dataset size"):
        alg.init(small, small.manifold.random_point(0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="public_sizes' is for neighboring='add_remove_one'"):
        PrivacyBudget(1.0, DELTA, public_sizes=4)
    with pytest.raises(ValueError, match="public_sizes"):
        PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes=0)
    with pytest.raises(TypeError, match="public_sizes"):
        PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes="4")
    bad = PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes=(4, 5))
    with pytest.raises(ValueError, match="2 sizes for 1 agents"):
        bad.public_counts(np.array([4]))


# ---------------------------------------------------------------------- N vs N + 1
def _pca_pair(n_agents=3, n=12, dim=6):
    """SpherePCA with n records per agent, and the same with one more record at agent 0."""
    z = np.random.default_rng(11).standard_normal((n_agents, n + 1, dim)) / np.sqrt(dim)
    counts = np.full(n_agents, n)
    more = counts.copy()
    more[0] += 1
    return SpherePCA(z, counts=counts), SpherePCA(z, counts=more)


def _spd_pair(n_agents=3, n=8):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((n_agents, n + 1, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    counts = np.full(n_agents, n)
    more = counts.copy()
    more[1] += 1
    return FrechetMean(SPD(3), spd, counts=counts), FrechetMean(SPD(3), spd, counts=more)


def _logreg_pair(n_agents=3, n=20):
    rng = np.random.default_rng(3)
    feats = rng.standard_normal((n_agents, n + 1, 2))
    labels = rng.choice([-1.0, 1.0], size=(n_agents, n + 1))
    counts = np.full(n_agents, n)
    more = counts.copy()
    more[2] += 1
    return (LogisticRegression(feats, labels, counts=counts),
            LogisticRegression(feats, labels, counts=more))


def _prirfed_plan(trainer, budget):
    def plan(problem):
        alg = PriRFed(trainer, n_sampled=None, step_size=0.1, budget=budget, n_rounds=3)
        st = alg.init(problem, problem.manifold.random_point(0), np.random.default_rng(0))
        p = st.plan
        return {"sigma": p.sigma, "sizes": p.sizes, "counts": p.counts, "rate":
                np.asarray(p.sizes / p.counts), "sensitivity": p.sensitivity, "delta": st.delta,
                "z": p.noise_multiplier, "report": alg.privacy_after(problem, 3)}
    return plan


AR = dict(neighboring="add_remove_one", method="rdp")
ACCEPTING = {
    "DP-RSGD full batch": (_pca_pair, _prirfed_plan(
        DPRSGD(steps=2, batch_size=None, clip=0.5), PrivacyBudget(1.0, **AR, public_sizes=12))),
    "DP-RSGD Poisson, fraction": (_pca_pair, _prirfed_plan(
        DPRSGD(steps=2, batch_size=0.5, clip=0.5, sampling="poisson"),
        PrivacyBudget(1.0, **AR, public_sizes=12))),
    "DP-RSGD Poisson, expected size": (_pca_pair, _prirfed_plan(
        DPRSGD(steps=2, batch_size=4, clip=0.5, sampling="poisson"),
        PrivacyBudget(1.0, **AR, public_sizes=(12, 12, 10)))),
    "DP-RSVRG (paper's Alg. 3)": (_pca_pair, _prirfed_plan(
        DPRSVRG(steps=1, inner_steps=2, clip=0.2, clip_full=0.5),
        PrivacyBudget(1.0, **AR, public_sizes=12))),
}


@pytest.mark.parametrize("name", sorted(ACCEPTING))
def test_nothing_depends_on_a_private_count_prirfed(name):
    make, plan = ACCEPTING[name]
    small, large = make()
    a, b = plan(small), plan(large)
    for key in ("sigma", "sizes", "counts", "rate", "sensitivity", "z"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["delta"] == b["delta"]
    ra, rb = a["report"], b["report"]
    for key in ("epsilon_certified", "delta", "noise_multiplier", "assumptions", "accountant"):
        assert ra[key] == rb[key], key
    assert not any("N_i public" in line for line in ra["assumptions"])
    assert any("private" in line and "public nominal sizes" in line
               for line in ra["assumptions"])


def test_prirfed_aggregation_weights_are_the_public_sizes():
    small, large = _pca_pair()
    budget = PrivacyBudget(1.0, **AR, public_sizes=(12, 20, 12))
    alg = PriRFed(DPRSGD(steps=1, clip=0.5), n_sampled=None, step_size=0.1, budget=budget,
                  n_rounds=1)
    x = small.manifold.random_point(0)
    points = np.stack([small.manifold.random_point(s) for s in (1, 2, 3)])
    out = [alg.aggregate(p, alg.init(p, x, np.random.default_rng(0)), np.arange(3), points)
           for p in (small, large)]
    np.testing.assert_array_equal(out[0], out[1])


def test_nothing_depends_on_a_private_count_centralized_dpsgd():
    small, large = _logreg_pair()
    out = []
    for prob in (small, large):
        alg = DPSGD(step_size=0.1, batch_size=6, clip=1.0, sampling="poisson", n_rounds=4,
                    budget=PrivacyBudget(1.0, **AR, public_sizes=20))
        st = alg.init(prob, np.zeros(2), 0)
        out.append((st.ledger.noise_multiplier, st.ledger.sensitivity, st.ledger.sampling_rate,
                    st.ledger.delta, alg.privacy(alg.step(prob, st))))
    assert out[0][:4] == out[1][:4]
    assert out[0][2] == 6 / 60
    for key in ("epsilon_certified", "assumptions"):
        assert out[0][4][key] == out[1][4][key]


@pytest.mark.parametrize("cls", [AnalyzeGauss, NoisyPowerMethod, LogEuclideanPrivateMean])
def test_nothing_depends_on_a_private_count_baselines(cls):
    make = _spd_pair if cls is LogEuclideanPrivateMean else _pca_pair
    small, large = make()
    budget = PrivacyBudget(1.0, **AR, public_sizes=12)
    kwargs = {"log_norm_bound": 2.0} if cls is LogEuclideanPrivateMean else {}
    res = [cls(budget, **kwargs).run(p, np.random.default_rng(0)) for p in (small, large)]
    for key in ("epsilon_certified", "delta", "noise_multiplier", "assumptions"):
        assert res[0].privacy[key] == res[1].privacy[key], key
    sig = "sigma_max" if cls is LogEuclideanPrivateMean else "sigma"
    assert res[0].info[sig] == res[1].info[sig]
    with pytest.raises(ValueError, match="public_sizes"):
        cls(PrivacyBudget(1.0, **AR), **kwargs).run(small, np.random.default_rng(0))


# ---------------------------------------------------------------------- refusals
def _net():
    return Network(ring(4))


AR_BUDGET = PrivacyBudget(1.0, DELTA, neighboring="add_remove_one", public_sizes=10)
REFUSING = {
    "DO-ADP": lambda: DOADP(_net(), alpha=0.1, grad_bound=1.0, budget=AR_BUDGET, n_rounds=3),
    "noisy DSGD": lambda: NoisyDSGD(_net(), alpha=0.1, grad_bound=1.0, budget=AR_BUDGET,
                                    n_rounds=3),
    "DPDL": lambda: DPDL(_net(), lr=0.1, clip=1.0, batch_size=2, budget=AR_BUDGET, n_rounds=3),
    "DP-DPSGD": lambda: DPDPSGD(_net(), lr=0.1, clip=1.0, batch_size=2, budget=AR_BUDGET,
                                n_rounds=3),
    "DP-DDA": lambda: DPDDA(_net(), n_active=2, clip=1.0, budget=AR_BUDGET, n_rounds=3),
    "DP-DGT": lambda: DPDGT(ring(4), budget=AR_BUDGET, n_rounds=3),
    "noisy DDGT": lambda: NoisyDDGT(ring(4), budget=AR_BUDGET, n_rounds=3),
    "ClientLevelDP": lambda: ClientLevelDP(clip=1.0, budget=AR_BUDGET),
    "DP-RSGD without replacement": lambda: DPRSGD(steps=1, batch_size=0.5, clip=1.0).plan(
        _pca_pair()[0], "add_remove_one", public_sizes=12),
    "DP-RSVRG released snapshot": lambda: DPRSVRG(
        steps=1, inner_steps=2, clip=1.0, variant="released_snapshot").plan(
        _pca_pair()[0], "add_remove_one", public_sizes=12),
    "DP-SGD without replacement": lambda: DPSGD(
        step_size=0.1, batch_size=4, clip=1.0, sampling="without_replacement",
        budget=AR_BUDGET, n_rounds=3),
}
REASONS = {
    "DO-ADP": "without replacement", "noisy DSGD": "without replacement",
    "DPDL": "without replacement", "DP-DPSGD": "without replacement",
    "DP-DDA": "without replacement", "DP-DGT": "cost-function adjacency",
    "noisy DDGT": "cost-function adjacency", "ClientLevelDP": "one client's whole dataset",
    "DP-RSGD without replacement": "no add/remove bound",
    "DP-RSVRG released snapshot": "no add/remove bound",
    "DP-SGD without replacement": "no add/remove bound",
}


@pytest.mark.parametrize("name", sorted(REFUSING))
def test_algorithms_that_cannot_account_add_remove_refuse_it_with_the_reason(name):
    with pytest.raises(ValueError, match=REASONS[name]):
        REFUSING[name]()
