"""Issue 13's per-round shortcuts of DP-DDA and DP-DGT give the bits of the general paths.

Each test runs the shortcut and the general computation on the same input and asserts equality
of every bit, plus the refusals the privacy claim needs (a release whose input is not finite).
"""

from __future__ import annotations

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPDDA, calibration_weights
from rfed.datasets.synthetic import make_epsilon_like
from rfed.manifolds import SPD, Euclidean, Sphere
from rfed.networks.graphs import complete
from rfed.networks.network import Network
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.linear import HingeSVM, L1Regularizer, L2Regularizer, split_evenly


class _PlainEuclidean(Euclidean):
    """Euclidean space that DP-DDA does not recognise as such: it takes the general path
    (transport to the anchor, then orthonormal coordinates)."""


def _svm(reg, manifold=None):
    x, y = make_epsilon_like(240, 7, 5)
    feats, labels = split_evenly(x, y, 12, np.random.default_rng(2))
    problem = HingeSVM(feats, labels, reg, feature_bound=1.0)
    if manifold is not None:
        problem.manifold = manifold
    return problem


@pytest.mark.parametrize("reg, schedule, gamma", [(L2Regularizer(0.05), "strongly_convex", 2.0),
                                                  (L1Regularizer(0.01), "general", 0.5)])
@pytest.mark.parametrize("inactive_x", ["freeze", "recompute"])
def test_dpdda_euclidean_round_gives_the_general_paths_bits(reg, schedule, gamma, inactive_x):
    """On Euclidean space a round skips transport and coordinates (both are copies there):
    the run has the bits of the general path, which a subclass of Euclidean takes."""

    def run(manifold):
        alg = DPDDA(Network(complete(12)), n_active=4, schedule=schedule, gamma=gamma,
                    clip=0.5, noise_multiplier=0.8, inactive_x=inactive_x)
        return alg.run(_svm(reg, manifold), 60, rng=7, x0=np.zeros(7), eval_every=20)

    fast, general = run(None), run(_PlainEuclidean(7))
    for field in ("x", "z", "xtilde"):
        np.testing.assert_array_equal(getattr(fast.state, field), getattr(general.state, field))
    assert fast.history == general.history
    assert fast.privacy == general.privacy
    assert np.ptp(fast.state.z, axis=0).max() > 1e-3   # the duals moved: not trivial


class _NaNSVM(HingeSVM):
    """A hinge SVM whose subgradients are NaN (a bug upstream of the release)."""

    def sample_data_grad(self, x, batch):
        return np.full(super().sample_data_grad(x, batch).shape, np.nan)


def test_dpdda_euclidean_round_refuses_a_non_finite_subgradient():
    x, y = make_epsilon_like(240, 7, 5)
    feats, labels = split_evenly(x, y, 12, np.random.default_rng(2))
    problem = _NaNSVM(feats, labels, L2Regularizer(0.05), feature_bound=1.0)
    alg = DPDDA(Network(complete(12)), n_active=4, gamma=2.0, noise_multiplier=1.0)
    state = alg.init(problem, np.zeros(7), 3)
    with pytest.raises(ValueError, match="NaN or inf"):
        alg.step(problem, state)
    assert state.ledger.rounds == 0   # nothing released, nothing charged


def test_dpdda_anchor_rows_are_the_broadcast_of_the_current_anchor():
    alg = DPDDA(Network(complete(12)), n_active=4, gamma=2.0)
    a, b = np.arange(3.0), np.ones(3)
    rows = alg._anchors(a, 5)
    np.testing.assert_array_equal(rows, np.broadcast_to(a, (5, 3)))
    assert not rows.flags.writeable
    np.testing.assert_array_equal(alg._anchors(b, 2), np.broadcast_to(b, (2, 3)))
    np.testing.assert_array_equal(alg._anchors(a, 40), np.broadcast_to(a, (40, 3)))


def test_an_iterations_noise_scale_has_the_vectorized_scales_bits():
    """LaplaceSchedule.scale of one non-negative int (DP-DGT's per-iteration call, without the
    array checks) gives the float of the vectorized computation, for every iteration; other
    iterations are still checked (a negative one is refused)."""
    sched = LaplaceSchedule(0.013, 0.9951)
    ks = np.arange(3000)
    assert [sched.scale(int(k)) for k in ks] == sched.scale(ks).tolist()
    assert sched.scale(np.int64(7)) == sched.scale(7)
    with pytest.raises(ValueError, match="'k'"):
        sched.scale(-1)


@pytest.mark.parametrize("manifold", [Euclidean(7), Sphere(6), SPD(3)], ids=str)
def test_dpdl_calibration_with_gathered_reference_norms_has_the_same_bits(manifold):
    """DPDL computes each agent's self-gradient norm once and gathers it to the agent's pairs:
    the calibration weights of norms computed on the gathered rows, bit for bit."""
    rng = np.random.default_rng(8)
    x = manifold.random_point(rng, (5,))
    shape = (5,) + manifold.point_shape
    g_self = manifold.proj(x, rng.standard_normal(shape))
    owner = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 1, 0, 1, 2, 3, 4])
    received = manifold.proj(x[owner], rng.standard_normal((owner.size,) + manifold.point_shape))
    received[3] = 0.0   # a vanishing norm: Cal = 1/2
    want = calibration_weights(manifold, x[owner], received, g_self[owner])
    got = calibration_weights(manifold, x[owner], received, g_self[owner],
                              manifold.norm(x, g_self)[owner])
    for a, b in zip(got, want, strict=True):
        assert a.tobytes() == b.tobytes()
    assert want[1][3] == 0.5 and np.ptp(want[1]) > 0.01


@pytest.mark.parametrize("problem_name", ["logreg", "sphere"])
@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_dpdpsgd_chunked_round_gives_the_private_gradients_bits(problem_name, chunk):
    """DP-DPSGD takes its round's noisy gradients through DPDL's chunked pairs (bounded
    memory; Poisson minibatches, which PrivateGradient.__call__ does not draw): for
    without-replacement minibatches they are the bits of the public
    :class:`~rfed.algorithms.decentralized.PrivateGradient` called on the same state, in any
    chunk size, on a structured clipped sum (logistic regression) and per-sample gradients
    (the sphere), and the account charges the same round."""
    import copy

    from rfed.algorithms.decentralized import DPDPSGD
    from rfed.networks.graphs import ring
    from rfed.problems import LogisticRegression, SpherePCA

    rng = np.random.default_rng(0)
    if problem_name == "logreg":
        problem = LogisticRegression(rng.standard_normal((6, 9, 4)) / 3,
                                     np.sign(rng.standard_normal((6, 9))))
        x0 = np.zeros(4)
    else:
        problem = SpherePCA(rng.standard_normal((6, 9, 4)))
        x0 = np.eye(4)[0]
    alg = DPDPSGD(Network(ring(6)), lr=0.1, batch_size=4, clip=1.0, noise_multiplier=1.5,
                  max_chunk_pairs=chunk)
    state = alg.step(problem, alg.init(problem, x0, np.random.default_rng(3)))
    public = copy.deepcopy(state)
    expected = alg.gradient(problem, public)
    state = alg.step(problem, state)
    np.testing.assert_array_equal(state.gtilde, expected)
    assert np.abs(expected).max() > 0
    assert alg.privacy(state) == alg.privacy(public)
