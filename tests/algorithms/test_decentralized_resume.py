"""Checkpoint and resume: with keyed streams, a run stopped mid-way and resumed from its
checkpoint ends bit-identical to the uninterrupted run (DO-ADP, DPDL, DP-DDA, DP-DGT)."""

import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP, DPDDA, DPDGT, DPDL
from rfed.networks.graphs import complete, ieee14_digraph, ring
from rfed.networks.network import Network
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import ieee14_problem
from rfed.problems.linear import HingeSVM, L2Regularizer
from rfed.state import dumps_state, loads_state
from tests.algorithms.decentralized_cases import logreg_problem


def _cases():
    logreg = logreg_problem(120, 4, 6, 0, 0.1)
    svm = HingeSVM(logreg.data["features"], logreg.data["labels"], L2Regularizer(0.1),
                   feature_bound=1.0)
    return {
        "DO-ADP": (logreg, DOADP(Network(ring(6)), alpha=0.1, p=0.7, k=2, grad_bound=1.0,
                                 batch_size=2, noise_multiplier=1.0), np.zeros(4)),
        "DPDL": (logreg, DPDL(Network(ring(6)), lr=0.1, batch_size=2, clip=1.0,
                              noise_multiplier=1.0), np.zeros(4)),
        "DP-DDA": (svm, DPDDA(Network(complete(6)), n_active=2, gamma=1.0,
                              noise_multiplier=1.0), np.zeros(4)),
        "DP-DGT": (ieee14_problem(), DPDGT(ieee14_digraph("paper"), alpha0=0.015, q=0.99,
                                           theta_xi=LaplaceSchedule(0.01, 0.995),
                                           theta_zeta=LaplaceSchedule(0.01, 0.995)), None),
    }


@pytest.mark.parametrize("name", ["DO-ADP", "DPDL", "DP-DDA", "DP-DGT"])
def test_resumed_run_is_bit_identical(name):
    prob, alg, x0 = _cases()[name]
    kw = dict(rng=7, eval_every=2, with_reference=False) | ({} if x0 is None else {"x0": x0})
    saved = []
    # serialized when taken, as a file checkpoint is (the live state goes on changing)
    full = alg.run(prob, 6, checkpoint_every=3,
                   checkpoint=lambda p: saved.append(dumps_state(p, kind="k")), **kw)
    payload = loads_state(saved[-1], kind="k")
    assert len(saved) == 1 and payload["round"] == 3
    resumed = alg.run(prob, 6, resume_from=payload, **kw)
    np.testing.assert_array_equal(resumed.x, full.x)
    assert alg.privacy(resumed.state) == alg.privacy(full.state)
    # and the run is random: another seed ends elsewhere
    other = alg.run(prob, 6, **(kw | {"rng": 8}))
    assert not np.array_equal(other.x, full.x)
