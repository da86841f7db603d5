"""Silent cases of issue 12 in the networks layer and the autograd problem are now errors
naming the argument."""

import autograd.numpy as anp
import numpy as np
import pytest
import scipy.sparse as sp

from rfed.manifolds import Euclidean, Sphere
from rfed.networks.gossip import consensus_direction, riemannian_gossip
from rfed.networks.graphs import ring
from rfed.networks.mixing import check_doubly_stochastic, uniform_weights
from rfed.problems.autograd_problem import AutogradProblem


def _points(n=6):
    return Sphere(2).random_point(np.random.default_rng(0), n)


def test_gossip_refuses_a_non_stochastic_w():
    w = uniform_weights(ring(6)) * 1.5
    with pytest.raises(ValueError, match="'weights' is not row-stochastic: row 0 sums to 1.5"):
        riemannian_gossip(Sphere(2), _points(), w)
    w = sp.csr_matrix(np.eye(6) * 2.0 - np.roll(np.eye(6), 1, axis=1))   # rows sum to 1
    with pytest.raises(ValueError, match="'weights' has a negative entry"):
        riemannian_gossip(Euclidean(3), np.zeros((6, 3)), w)
    # Euclidean gossip checks the row sums it uses in its closed form
    w = uniform_weights(ring(6)).tolil()
    w[4, 4] += 1e-6
    with pytest.raises(ValueError, match="'weights' is not row-stochastic: row 4 sums to 1.000001"):
        riemannian_gossip(Euclidean(3), np.zeros((6, 3)), w.tocsr())


def test_gossip_refuses_off_manifold_points():
    x = _points()
    x[2] *= 1.1
    with pytest.raises(ValueError, match="'points' is not on the manifold"):
        riemannian_gossip(Sphere(2), x, uniform_weights(ring(6)))


def test_nan_weights_are_refused_by_gossip_and_by_the_checks():
    w = uniform_weights(ring(6)).tolil()
    w[0, 1] = np.nan
    w = w.tocsr()
    with pytest.raises(ValueError, match="'weights' has 1 non-finite"):
        consensus_direction(Sphere(2), w, _points())
    with pytest.raises(ValueError, match="'W' has non-finite entries"):
        check_doubly_stochastic(w)


def test_gossip_still_averages_on_valid_input():
    x = _points()
    w = uniform_weights(ring(6))
    y = riemannian_gossip(Euclidean(3), x, w)
    np.testing.assert_allclose(y, w @ x, atol=1e-15)
    assert np.all(Sphere(2).belongs(riemannian_gossip(Sphere(2), x, w)))


def _problem(loss):
    rng = np.random.default_rng(0)
    return AutogradProblem(Euclidean(3), loss, {"a": rng.standard_normal((2, 5, 3))})


def test_nan_loss_of_an_autograd_problem_is_an_error_naming_the_loss():
    with pytest.raises(ValueError, match="argument 'loss' returned 2 non-finite"):
        _problem(lambda x, b: anp.log(anp.sum(x[..., None, :] * b["a"], -1) * 0.0 - 1.0))
    # finite where probed, NaN later: the cost and the gradient say so
    prob = _problem(lambda x, b: anp.sqrt(anp.sum(x[..., None, :] * b["a"], -1) + 100.0))
    far = np.full(3, -1e3)
    with pytest.raises(ValueError, match="argument 'loss' returned"):
        prob.cost(far)
    with pytest.raises(ValueError, match="argument 'loss' has a gradient with"):
        prob.sample_rgrad(far[None], {"a": prob.data["a"][:1]})
    assert np.isfinite(prob.cost(np.zeros(3)))
