"""The closed-form clipped sums of the linear models against clipping the materialised
per-sample gradients (:meth:`rfed.problems.Problem.clipped_grad_sum`, the generic path).

Tolerance: float64 features agree to 1e-12 relative to the largest entry of the sum (the two
paths sum the same terms in another order: rounding only; measured about 6e-16); float32
features agree to 1e-5 (the generic path's per-sample gradients are float32 products)."""

import numpy as np
import pytest

from rfed.problems.base import Problem
from rfed.problems.linear import HingeSVM, L1Regularizer, L2Regularizer, LogisticRegression
from rfed.problems.outer_gradients import outer_clipped_sum
from rfed.problems.softmax import SoftmaxRegression

RTOL64 = 1e-12


def _check(problem, x, rng, tol, bounds):
    batch = problem.data
    n_agents, n_max = problem.mask.shape
    seen_partial = False
    for bound in (None, *bounds):
        for mask in (None, rng.random((n_agents, n_max)) < 0.7):
            fast, n_fast = problem.clipped_grad_sum(x, batch, bound, mask)
            slow, n_slow = Problem.clipped_grad_sum(problem, x, batch, bound, mask)
            assert fast.shape == slow.shape == (n_agents, problem.manifold.dim)
            assert np.abs(fast - slow).max() <= tol * np.abs(slow).max()
            np.testing.assert_array_equal(n_fast, n_slow)
            included = n_max if mask is None else mask.sum(axis=1)
            # some rows clipped and some not, in the same batch
            seen_partial |= bool(np.any((n_fast > 0) & (n_fast < included)))
    assert seen_partial


@pytest.mark.parametrize("cls", [LogisticRegression, HingeSVM])
@pytest.mark.parametrize("reg", [None, L2Regularizer(0.3), L1Regularizer(0.2)])
def test_binary_linear_models_closed_form_equals_the_generic_path(cls, reg):
    rng = np.random.default_rng(1)
    problem = cls(3 * rng.standard_normal((4, 30, 7)),
                  np.where(rng.random((4, 30)) < 0.5, -1.0, 1.0), regularizer=reg)
    x = rng.standard_normal((4, 7))
    _check(problem, x, rng, RTOL64, bounds=(0.5, 3.0, 1e3))


@pytest.mark.parametrize("l2", [0.0, 0.5])
@pytest.mark.parametrize("dtype,tol", [(np.float64, RTOL64), (np.float32, 1e-5)])
def test_softmax_closed_form_with_bias_equals_the_generic_path(l2, dtype, tol):
    rng = np.random.default_rng(2)
    problem = SoftmaxRegression(rng.standard_normal((3, 25, 6)).astype(dtype),
                                rng.integers(0, 4, (3, 25)), 4, l2=l2)
    x = rng.standard_normal((3, problem.n_params))
    _check(problem, x, rng, tol, bounds=(1.0, 2.5, 1e3))
    # the full local gradient (no clip) through the same closed form
    agents = np.arange(3)
    generic = Problem.local_grad(problem, x, agents)
    assert np.abs(problem.local_grad(x, agents) - generic).max() <= tol * np.abs(generic).max()


def test_outer_sum_against_a_hand_written_gradient():
    """One record, bias and a shared term: the norm and the clipped sum by hand."""
    a = np.array([[3.0, 4.0]])                 # ||a|| = 5
    r = np.array([[1.0, 0.0]])
    s = np.zeros(6)
    s[-1] = 2.0                                # shared term on the second bias entry
    g = np.array([3.0, 0.0, 4.0, 0.0, 1.0, 2.0])   # [vec(a r^T), r] + s, row-major (d_in, k)
    total, n = outer_clipped_sum(a, r, 1.0, bias=True, shared=s)
    np.testing.assert_allclose(total, g / np.linalg.norm(g), rtol=1e-15)
    assert n == 1
    total, n = outer_clipped_sum(a, r, 10.0, bias=True, shared=s)
    np.testing.assert_allclose(total, g, rtol=1e-15)
    assert n == 0


def test_a_subclass_with_its_own_gradient_gets_the_generic_path():
    class Scaled(LogisticRegression):
        def sample_data_grad(self, x, batch):
            return 2.0 * super().sample_data_grad(x, batch)

    rng = np.random.default_rng(3)
    problem = Scaled(rng.standard_normal((2, 10, 3)), np.where(rng.random((2, 10)) < 0.5, -1, 1.0))
    x = rng.standard_normal((2, 3))
    fast, _ = problem.clipped_grad_sum(x, problem.data, 0.3)
    slow, _ = Problem.clipped_grad_sum(problem, x, problem.data, 0.3)
    np.testing.assert_array_equal(fast, slow)


def test_float32_features_in_blocks_equal_one_float64_product(monkeypatch):
    """Float32 features are converted to float64 a block of rows at a time: the blocks' sum
    equals the product of the whole float64 copy to float64 rounding (1e-12 relative)."""
    import rfed.problems.outer_gradients as outer

    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 37, 11)).astype(np.float32)
    r = rng.standard_normal((3, 37, 4))
    whole = np.matmul(np.swapaxes(a.astype(np.float64), -1, -2), r)
    monkeypatch.setattr(outer, "CAST_BYTES", 8 * 11 * 5)      # blocks of 5 rows
    assert outer._block_rows(11) == 5
    blocks = outer._transposed_product(a, r)
    assert np.abs(blocks - whole).max() <= RTOL64 * np.abs(whole).max()
    np.testing.assert_allclose(outer.row_sq_norms(a), np.sum(a.astype(np.float64) ** 2, -1),
                               rtol=1e-14)
