"""Every privacy report says that the metrics a run logs are outside the guarantee.

A run's history holds exact functions of all agents' private data (cost, gradient norm, excess
risk, clipped-gradient counts, DP-DGT's allocations and imbalance, ...): only the noisy releases
in the ledger are covered. Every report (the dicts algorithms return, the ledger's text and
dict) states it in its assumptions; ``rfed run`` prints it (tests/test_cli.py).
"""

import json

import numpy as np
import pytest

from rfed.algorithms.baselines import AnalyzeGauss, LogEuclideanPrivateMean, NoisyPowerMethod
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL, DPDPSGD, NoisyDSGD
from rfed.algorithms.federated import DPRSGD, ClientLevelDP, PriRFed
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import SPD
from rfed.networks import Network, ring
from rfed.privacy import OUTSIDE_THE_GUARANTEE, PrivacyBudget, PrivacyLedger
from rfed.problems import FrechetMean, LogisticRegression, SpherePCA

B = PrivacyBudget(2.0, 1e-4)


def _pca():
    return SpherePCA(make_pca_synthetic(4, 12, 6, 0.3, 1))


def _logreg():
    rng = np.random.default_rng(0)
    return LogisticRegression(rng.standard_normal((4, 12, 3)), rng.choice([-1.0, 1.0], (4, 12)))


def _spd():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 8, 2, 2))
    return FrechetMean(SPD(2), a @ np.swapaxes(a, -1, -2) + 2 * np.eye(2))


def _run(alg, prob, x0=None):
    return alg.run(prob, 2, rng=0, x0=x0, with_reference=False).privacy


REPORTS = {
    "PriRFed": lambda: _run(PriRFed(DPRSGD(steps=1, clip=0.5), 2, 0.1, budget=B, n_rounds=2),
                            _pca()),
    "PriRFed client level": lambda: _run(PriRFed(
        DPRSGD(steps=1), 2, 0.1, n_rounds=2,
        client_dp=ClientLevelDP(clip=0.3, budget=B)), _pca())["client_level"],
    "DP-SGD": lambda: _run(DPSGD(step_size=0.1, batch_size=8, clip=1.0, budget=B, n_rounds=2),
                           _logreg(), np.zeros(3)),
    "Analyze Gauss": lambda: AnalyzeGauss(B).run(_pca(), 0).privacy,
    "noisy power method": lambda: NoisyPowerMethod(B, n_iters=2).run(_pca(), 0).privacy,
    "log-Euclidean mean": lambda: LogEuclideanPrivateMean(B, 1.0).run(_spd(), 0).privacy,
    "DO-ADP": lambda: _run(DOADP(Network(ring(4)), alpha=0.1, grad_bound=1.0, budget=B,
                                 n_rounds=2), _pca()),
    "noisy DSGD": lambda: _run(NoisyDSGD(Network(ring(4)), alpha=0.1, grad_bound=1.0,
                                         budget=B, n_rounds=2), _pca()),
    "DPDL": lambda: _run(DPDL(Network(ring(4)), lr=0.1, clip=1.0, batch_size=4, budget=B,
                              n_rounds=2), _logreg(), np.zeros(3)),
    "DP-DPSGD": lambda: _run(DPDPSGD(Network(ring(4)), lr=0.1, clip=1.0, batch_size=4,
                                     budget=B, n_rounds=2), _logreg(), np.zeros(3)),
    "DP-DDA": lambda: _run(DPDDA(Network(ring(4)), n_active=2, clip=1.0, budget=B, n_rounds=2),
                           _logreg(), np.zeros(3)),
}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_report_states_the_metrics_are_outside_the_guarantee(name):
    report = REPORTS[name]()
    assert OUTSIDE_THE_GUARANTEE in report["assumptions"]
    # and it survives the JSON round trip the results folder makes
    assert OUTSIDE_THE_GUARANTEE in json.loads(json.dumps(report))["assumptions"]


def test_dpdgt_report_states_it():
    from rfed.networks.graphs import ieee14_digraph
    from rfed.problems.dispatch import ieee14_problem

    prob = ieee14_problem()
    rep = DPDGT(ieee14_digraph("paper"), budget=PrivacyBudget(2.0), n_rounds=3).run(
        prob, 3, rng=0, with_reference=False).privacy
    assert OUTSIDE_THE_GUARANTEE in rep["assumptions"]


def test_ledger_text_and_dict_state_it():
    led = PrivacyLedger(2)
    led.record(0, [0], sigma=1.0, sensitivity=1.0)
    assert OUTSIDE_THE_GUARANTEE[1:] in led.report(1e-5)
    assert OUTSIDE_THE_GUARANTEE in led.report_dict(1e-5)["assumptions"]
