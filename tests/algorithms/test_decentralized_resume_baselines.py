"""Checkpoint and resume of the baselines (MUFFLIATO, DPDO, DP-CGA), as for the papers'
algorithms in test_decentralized_resume.py: a run stopped mid-way and resumed from its
checkpoint ends bit-identical to the uninterrupted run, privacy report included; and the
states merge into blocks and split again (the MPI engine's checkpoints)."""

import pickle

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPCGA, DPDO, Muffliato
from rfed.networks.graphs import ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from tests.algorithms.decentralized_cases import logreg_problem


def _cases():
    return {
        "MUFFLIATO": Muffliato(Network(ring(6)), lr=0.3, batch_size=2, clip=1.0, gossip_steps=3,
                               budget=PrivacyBudget(4.0, 1e-5), n_rounds=6),
        "DPDO": DPDO(Network(ring(6)), lr=0.3, lr_decay=0.99, noise_decay=0.995, clip=1.0,
                     budget=PrivacyBudget(4.0, 1e-5), n_rounds=6),
        "DP-CGA": DPCGA(Network(ring(6)), lr=0.1, batch_size=2, clip=1.0,
                        noise_multiplier=1.0),
    }


@pytest.mark.parametrize("name", ["MUFFLIATO", "DPDO", "DP-CGA"])
def test_resumed_run_is_bit_identical(name):
    prob = logreg_problem(120, 4, 6, 0, 0.1)
    alg = _cases()[name]
    kw = dict(rng=7, eval_every=2, with_reference=False, x0=np.zeros(4))
    saved = []
    full = alg.run(prob, 6, checkpoint_every=3,
                   checkpoint=lambda p: saved.append(pickle.dumps(p)), **kw)
    payload = pickle.loads(saved[-1])
    assert len(saved) == 1 and payload["round"] == 3
    resumed = alg.run(prob, 6, resume_from=payload, **kw)
    np.testing.assert_array_equal(resumed.x, full.x)
    assert alg.privacy(resumed.state) == alg.privacy(full.state)
    assert full.privacy is not None and full.privacy["epsilon_certified"] > 0
    other = alg.run(prob, 6, **(kw | {"rng": 8}))
    assert not np.array_equal(other.x, full.x)


@pytest.mark.parametrize("name", ["MUFFLIATO", "DPDO", "DP-CGA"])
def test_block_states_split_and_merge_back(name):
    prob = logreg_problem(120, 4, 6, 0, 0.1)
    alg = _cases()[name]
    state = alg.init(prob, np.zeros(4), np.random.default_rng(0))
    for _ in range(3):
        state = alg.step(prob, state)
    bounds = np.array([0, 2, 6])
    merged = alg.merge_blocks(alg.split_state(state, bounds), bounds)
    np.testing.assert_array_equal(merged.x, state.x)
    assert merged.ledger.report() == state.ledger.report()
