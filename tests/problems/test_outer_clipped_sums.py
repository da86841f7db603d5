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


@pytest.mark.parametrize("model", ["logistic", "logistic-l2", "softmax", "softmax-l2"])
def test_one_batch_without_a_leading_axis_equals_the_stacked_form(model):
    """Centralized DP-SGD passes one point and one batch without the agent axis, with the rows'
    squared norms from its pool: the same floats as the stacked form (one agent) that
    computes the norms itself, and the same clip counts (0-d)."""
    rng = np.random.default_rng(5)
    a = 2.0 * rng.standard_normal((1, 40, 6))
    if model.startswith("logistic"):
        reg = L2Regularizer(0.3) if model.endswith("l2") else None
        problem = LogisticRegression(a, np.where(rng.random((1, 40)) < 0.5, -1.0, 1.0), reg)
        x = rng.standard_normal(6)
    else:
        problem = SoftmaxRegression(a, rng.integers(0, 3, (1, 40)), 3,
                                    l2=0.2 if model.endswith("l2") else 0.0)
        x = rng.standard_normal(problem.n_params)
    assert problem.takes_feature_sq_norms
    batch = {k: v[0] for k, v in problem.data.items()}
    norms = np.einsum("ij,ij->i", batch["features"], batch["features"])
    partial = False
    for bound in (None, 0.5, 3.0, 10.0):
        one, n_one = problem.clipped_grad_sum(x, batch, bound, feature_sq_norms=norms)
        stacked, n_stacked = problem.clipped_grad_sum(x[None], problem.data, bound)
        np.testing.assert_array_equal(one, stacked[0])
        assert np.ndim(n_one) == 0 and n_one == n_stacked[0]
        partial |= bool(0 < n_one < 40)   # some rows clipped, some not
    assert partial


def test_the_one_batch_binary_product_with_a_mask_equals_the_stacked_form():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((30, 5))
    r = rng.standard_normal((30, 1))
    mask = rng.random(30) < 0.6
    for bound in (None, 0.4):
        one, n_one = outer_clipped_sum(a, r, bound, mask)
        stacked, n_stacked = outer_clipped_sum(a[None], r[None], bound, mask[None])
        np.testing.assert_array_equal(one, stacked[0])
        assert n_one == n_stacked[0]
