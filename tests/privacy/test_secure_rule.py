"""One rule for every secure release: grid-rounding term in the sensitivity, RDP accountant.

Secure mode rounds a release to the grid ``grid * Z`` before adding discrete noise; the rounding
moves each of the ``dim`` coordinates by up to ``grid / 2``, so the sensitivity the noise is
calibrated to is ``Delta + grid sqrt(dim)`` (L2; :func:`rfed.privacy.mechanisms.
release_sensitivity`), and the discrete Gaussian is certified through Renyi divergences (RDP),
not the continuous Gaussian's privacy-loss distribution (PLD). Every private release path is
run here in secure mode with the grid released values are rounded to captured; the noise std
it draws with must be its noise multiplier times ``Delta + grid sqrt(dim)``, and its report
must name RDP.
"""

import math

import numpy as np
import pytest

import rfed.privacy.mechanisms as mechanisms
from rfed.algorithms.baselines import AnalyzeGauss, LogEuclideanPrivateMean
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.decentralized import DOADP
from rfed.algorithms.federated import DPRSGD, ClientLevelDP, PriRFed
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import SPD
from rfed.networks import Network, ring
from rfed.privacy import PrivacyBudget
from rfed.privacy.secure import SecureRandom
from rfed.problems import FrechetMean, LogisticRegression, SpherePCA

GRID = 2.0**-20   # coarse enough that the term is visible next to the base sensitivity


@pytest.fixture
def released(monkeypatch):
    """Records ``(scale, coordinates per release)`` of every grid release."""
    calls = []
    honest = mechanisms.grid_release

    def spy(value, scale, rng, mechanism="gaussian", name="value"):
        calls.append((np.asarray(scale, dtype=float), np.shape(value)[-1], mechanism))
        return honest(value, scale, rng, mechanism, name)

    monkeypatch.setattr(mechanisms, "grid_release", spy)
    return calls


def _pca(n_agents=4, n=10, d=6):
    return SpherePCA(make_pca_synthetic(n_agents, n, d, 0.3, 1))


def _prirfed_record_level():
    prob = _pca()
    alg = PriRFed(DPRSGD(steps=1, clip=0.5), n_sampled=1, step_size=0.1,
                  budget=PrivacyBudget(2.0, 1e-5), n_rounds=1)
    res = alg.run(prob, 1, rng=SecureRandom(GRID), with_reference=False)
    return res.privacy, 2 * 0.5 / 10, prob.manifold.dim


def _prirfed_client_level():
    prob = _pca()
    alg = PriRFed(DPRSGD(steps=1), n_sampled=2, step_size=0.1, n_rounds=1,
                  client_dp=ClientLevelDP(clip=0.3, budget=PrivacyBudget(2.0, 1e-4)))
    res = alg.run(prob, 1, rng=SecureRandom(GRID), with_reference=False)
    return res.privacy["client_level"], 2 * 0.3 / 2, prob.manifold.dim


def _centralized():
    rng = np.random.default_rng(0)
    prob = LogisticRegression(rng.standard_normal((2, 20, 3)), rng.choice([-1.0, 1.0], (2, 20)))
    alg = DPSGD(step_size=0.1, batch_size=8, clip=1.0, sampling="poisson", n_rounds=1,
                budget=PrivacyBudget(2.0, 1e-5, neighboring="add_remove_one", public_sizes=20))
    res = alg.run(prob, 1, rng=SecureRandom(GRID), x0=np.zeros(3), with_reference=False)
    return res.privacy, 1.0 / 8, 3


def _analyze_gauss():
    res = AnalyzeGauss(PrivacyBudget(2.0, 1e-5)).run(_pca(), SecureRandom(GRID))
    return res.privacy, math.sqrt(2.0), 6 * 7 // 2


def _log_euclidean():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 8, 2, 2))
    prob = FrechetMean(SPD(2), a @ np.swapaxes(a, -1, -2) + 2 * np.eye(2))
    res = LogEuclideanPrivateMean(PrivacyBudget(2.0, 1e-5), log_norm_bound=1.5).run(
        prob, SecureRandom(GRID))
    return res.privacy, 2 * 1.5 / 8, 3


def _doadp():
    prob = _pca(n_agents=4, n=10, d=6)
    alg = DOADP(Network(ring(4)), alpha=0.1, grad_bound=1.0, batch_size=None,
                budget=PrivacyBudget(2.0, 1e-5), n_rounds=1)
    res = alg.run(prob, 1, rng=SecureRandom(GRID), with_reference=False)
    return res.privacy, 2 * 1.0 / 10, prob.manifold.dim


PATHS = {"PriRFed DP-RSGD (record level)": _prirfed_record_level,
         "PriRFed + ClientLevelDP (client level)": _prirfed_client_level,
         "centralized DP-SGD": _centralized, "Analyze Gauss": _analyze_gauss,
         "log-Euclidean private mean": _log_euclidean, "DO-ADP": _doadp}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_every_secure_release_adds_the_grid_term_and_is_certified_with_rdp(name, released):
    report, base, dim = PATHS[name]()
    gaussian = [(scale, k) for scale, k, mech in released if mech == "gaussian"]
    assert gaussian, "no secure release captured"
    z = report["noise_multiplier"]
    expected = z * (base + GRID * math.sqrt(dim))
    for scale, k in gaussian:
        assert k == dim
        np.testing.assert_allclose(scale[scale > 0], expected, rtol=1e-12)
    assert "RDP" in report["accountant"] and "PLD" not in report["accountant"].split("(")[0]
    assert report["epsilon_certified"] <= 2.0
