"""The SVM reference solvers (l1: dual LP and working-set LPs; l2: smoothing continuation and
dual coordinate descent; all with a certified duality gap) against closed forms, independent
formulations and each other."""

import numpy as np
import pytest
import scipy.optimize as sopt
import scipy.sparse as sp

from rfed.problems.linear import (
    HingeSVM,
    L1Regularizer,
    L2Regularizer,
    l1_svm_reference,
    l1_svm_working_set,
    l2_svm_dual_cd,
    l2_svm_reference,
)


def _objective(c_rows: np.ndarray, x: np.ndarray, phi: float) -> float:
    return float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + phi * np.abs(x).sum())


def _primal_lp(c_rows: np.ndarray, phi: float) -> float:
    """The primal LP (x = u - v, one slack per sample), an independent formulation."""
    n, d = c_rows.shape
    c_mat = sp.csr_matrix(c_rows)
    a_ub = sp.hstack([-c_mat, c_mat, -sp.identity(n)], format="csr")
    cost = np.concatenate([np.full(2 * d, phi), np.full(n, 1.0 / n)])
    res = sopt.linprog(cost, A_ub=a_ub, b_ub=-np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("phi", [0.5, 2.0])
def test_one_sample_closed_form(phi):
    # P(x) = max(0, 1 - x) + phi |x| on R: x* = 1 (P* = phi) when phi < 1, x* = 0 (P* = 1) above
    x, gap = l1_svm_reference(np.array([[1.0]]), phi)
    expected = 1.0 if phi < 1 else 0.0
    np.testing.assert_allclose(x, [expected], atol=1e-9)
    assert 0.0 <= gap <= 1e-9


def _margin_rows(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """Rows ``b_j a_j`` of unit-norm features with noisy linear labels, shape ``(n, d)``."""
    a = rng.standard_normal((n, d))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = np.sign(a @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))
    return a * b[:, None]


def test_two_samples_closed_form():
    # c_1 = (1, 0), c_2 = (0, 2), phi = 0.1: each coordinate separately, x = (1, 0.5),
    # P* = 0.1 * 1.5 = 0.15 (both hinges at 0; smaller x pays more hinge than it saves)
    x, _ = l1_svm_reference(np.array([[1.0, 0.0], [0.0, 2.0]]), 0.1)
    np.testing.assert_allclose(x, [1.0, 0.5], atol=1e-9)


@pytest.mark.parametrize("n, d, phi", [(60, 5, 1e-3), (300, 12, 1e-2), (400, 30, 1e-4)])
def test_matches_primal_lp_and_beats_perturbations(n, d, phi):
    rng = np.random.default_rng(n + d)
    c_rows = _margin_rows(n, d, rng)
    x, gap = l1_svm_reference(c_rows, phi)
    value = _objective(c_rows, x, phi)
    np.testing.assert_allclose(value, _primal_lp(c_rows, phi), rtol=1e-8, atol=1e-10)
    assert 0.0 <= gap <= 1e-9 * max(1.0, value)
    for _ in range(20):
        assert value <= _objective(c_rows, x + 1e-3 * rng.standard_normal(d), phi) + 1e-12


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="phi"):
        l1_svm_reference(np.ones((3, 2)), 0.0)
    with pytest.raises(ValueError, match="phi"):
        l1_svm_reference(np.ones((3, 2)), float("nan"))
    with pytest.raises(ValueError, match="margins_matrix"):
        l1_svm_reference(np.ones(3), 0.1)


@pytest.mark.parametrize("mu", [0.3, 4.0])
def test_l2_one_sample_closed_form(mu):
    # P(x) = max(0, 1 - x) + mu x^2 / 2 on R: x* = 1 when mu <= 1, else 1 / mu
    x, gap = l2_svm_reference(np.array([[1.0]]), mu)
    np.testing.assert_allclose(x, [min(1.0, 1.0 / mu)], atol=1e-7)
    assert 0.0 <= gap <= 1e-9 * 1.0


@pytest.mark.parametrize("n, d, mu", [(80, 4, 1e-2), (400, 16, 1e-3)])
def test_l2_matches_dual_qp(n, d, mu):
    rng = np.random.default_rng(n + d)
    c_rows = _margin_rows(n, d, rng)
    x, gap = l2_svm_reference(c_rows, mu)
    value = float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + 0.5 * mu * x @ x)
    assert 0.0 <= gap <= 1e-9 * max(1.0, value)

    # independent: the dual QP over the box by L-BFGS-B, its optimum a lower bound of P*
    def negdual(alpha):
        v = c_rows.T @ alpha / n
        return -alpha.mean() + v @ v / (2 * mu), -1.0 / n + c_rows @ v / (mu * n)

    res = sopt.minimize(negdual, np.full(n, 0.5), jac=True, method="L-BFGS-B",
                        bounds=[(0.0, 1.0)] * n,
                        options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 100000})
    assert -res.fun <= value + 1e-12  # weak duality
    np.testing.assert_allclose(value, -res.fun, rtol=1e-6)
    np.testing.assert_allclose(x, c_rows.T @ res.x / (mu * n), atol=1e-3 * np.linalg.norm(x))


def test_l2_bad_input_is_refused():
    with pytest.raises(ValueError, match="mu"):
        l2_svm_reference(np.ones((3, 2)), -1.0)
    with pytest.raises(ValueError, match="margins_matrix"):
        l2_svm_reference(np.ones(3), 0.1)


#: The l2 reference on dpdda-svm's default sizes (2,000 rows of make_epsilon_like, d = 50,
#: mu = 5e-4; seed [0, 99], unshuffled), computed in a child process on ONE BLAS thread. On these
#: rows the smoothing continuation alone stalls at a certified gap of 6.7e-4 (L-BFGS stops on
#: rounding at the small widths, where depends on the summation order); on some machines
#: "rfed run dpdda-svm" failed that way on one thread and passed on two.
_ONE_THREAD_CHILD = r"""
import json, sys
import numpy as np
from threadpoolctl import threadpool_info
from rfed.datasets.synthetic import make_epsilon_like
from rfed.problems.linear import l2_svm_reference
x, y = make_epsilon_like(2000, 50, np.random.default_rng([0, 99]))
c = x * y[:, None]
ref, gap = l2_svm_reference(c, 5e-4)
threads = sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})
np.save(sys.argv[1], c)
json.dump({"x": ref.tolist(), "gap": gap, "threads": threads}, open(sys.argv[2], "w"))
"""


def test_l2_reference_certifies_on_one_blas_thread(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=str(root))
    rows, out = tmp_path / "c.npy", tmp_path / "out.json"
    subprocess.run([sys.executable, "-c", _ONE_THREAD_CHILD, str(rows), str(out)], check=True,
                   env=env, cwd=root)
    got = json.loads(out.read_text())
    assert got["threads"] == [1]
    c_rows, x, mu = np.load(rows), np.array(got["x"]), 5e-4
    n = len(c_rows)
    value = float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + 0.5 * mu * x @ x)
    assert 0.0 <= got["gap"] <= 1e-9 * max(1.0, value)
    # independent certificate: the optimality conditions at x, solved here by a bounded least
    # squares (scipy's lsq_linear) for the margin samples' multipliers: alpha = 1 below the
    # margin, 0 above, in [0, 1] on it, and x = C^T alpha / (n mu)
    margins = c_rows @ x
    on = np.abs(margins - 1.0) < 1e-7
    alpha = (margins < 1.0 - 1e-7).astype(float)
    rest = mu * n * x - c_rows.T @ alpha
    fit = sopt.lsq_linear(c_rows[on].T, rest, bounds=(0.0, 1.0), tol=1e-15)
    alpha[on] = fit.x
    v = c_rows.T @ alpha / n
    dual = float(alpha.mean() - v @ v / (2 * mu))      # a lower bound of P* (alpha feasible)
    assert value - dual <= 1e-9 * max(1.0, value)


# --- the scalable solvers (dual coordinate descent for l2, working-set LPs for l1) ---------

def _l2_objective(c_rows: np.ndarray, x: np.ndarray, mu: float) -> float:
    return float(np.mean(np.maximum(0.0, 1.0 - c_rows @ x)) + 0.5 * mu * x @ x)


@pytest.mark.parametrize("n, d, mu", [(80, 4, 1e-2), (400, 16, 1e-3),
                                     pytest.param(1500, 30, 5e-4, marks=pytest.mark.slow)])
def test_l2_dual_cd_agrees_with_the_continuation_to_the_certified_gaps(n, d, mu):
    rng = np.random.default_rng(7 * n + d)
    c_rows = _margin_rows(n, d, rng)
    x_cd, gap_cd = l2_svm_dual_cd(c_rows, mu)
    x_ref, gap_ref = l2_svm_reference(c_rows, mu)
    value_cd, value_ref = _l2_objective(c_rows, x_cd, mu), _l2_objective(c_rows, x_ref, mu)
    assert 0.0 <= gap_cd <= 1e-9 * max(1.0, value_cd)
    # both values lie in [P*, P* + gap]: they differ by at most the larger gap
    assert abs(value_cd - value_ref) <= max(gap_cd, gap_ref) + 1e-15
    # mu-strong convexity: ||x - x*||^2 <= 2 (P(x) - P*) / mu for each, so by the triangle rule
    bound = np.sqrt(2 * gap_cd / mu) + np.sqrt(2 * gap_ref / mu)
    assert np.linalg.norm(x_cd - x_ref) <= bound + 1e-12


def test_l2_dual_cd_closed_forms():
    # one sample c = 1: x* = min(1, 1/mu); a zero row adds 1/N to P whatever x (alpha_j = 1)
    for mu in (0.3, 4.0):
        x, gap = l2_svm_dual_cd(np.array([[1.0]]), mu)
        np.testing.assert_allclose(x, [min(1.0, 1.0 / mu)], atol=1e-9)
        assert 0.0 <= gap <= 1e-9
    x, gap = l2_svm_dual_cd(np.array([[1.0], [0.0]]), 0.3)
    # P(x) = (max(0, 1 - x) + 1) / 2 + 0.15 x^2: x* = min(1, 1 / (2 * 0.3))
    np.testing.assert_allclose(x, [1.0], atol=1e-9)
    assert 0.0 <= gap <= 1e-9


@pytest.mark.parametrize("n, d, phi, first_rows",
                         [(60, 5, 1e-3, 1000), (300, 12, 1e-2, 40), (900, 30, 1e-3, 100),
                          pytest.param(1200, 60, 5e-4, 50, marks=pytest.mark.slow)])
def test_l1_working_set_agrees_with_the_dual_lp_to_the_certified_gaps(n, d, phi, first_rows):
    rng = np.random.default_rng(5 * n + d)
    c_rows = _margin_rows(n, d, rng)
    x_ws, gap_ws = l1_svm_working_set(c_rows, phi, first_rows=first_rows)
    x_lp, gap_lp = l1_svm_reference(c_rows, phi)
    value_ws, value_lp = _objective(c_rows, x_ws, phi), _objective(c_rows, x_lp, phi)
    assert 0.0 <= gap_ws <= 1e-9 * max(1.0, value_ws)
    assert abs(value_ws - value_lp) <= max(gap_ws, gap_lp) + 1e-15
    # and the primal LP, an independent formulation
    np.testing.assert_allclose(value_ws, _primal_lp(c_rows, phi), rtol=1e-8, atol=1e-10)


def test_l1_working_set_closed_forms():
    for phi in (0.5, 2.0):
        x, gap = l1_svm_working_set(np.array([[1.0]]), phi)
        np.testing.assert_allclose(x, [1.0 if phi < 1 else 0.0], atol=1e-9)
        assert 0.0 <= gap <= 1e-9
    x, _ = l1_svm_working_set(np.array([[1.0, 0.0], [0.0, 2.0]]), 0.1)
    np.testing.assert_allclose(x, [1.0, 0.5], atol=1e-9)


def test_a_wrong_dual_scaling_in_dual_cd_is_caught(monkeypatch):
    # the broken variant runs its passes with w = C^T alpha / (2 N mu): it converges to the
    # dual optimum of mu' = 2 mu, which the certificate (on the true problem) refuses
    import rfed.problems.linear as linear

    right = linear._l2_dual_cd_pass

    def wrong(c_rows, sq_norms, scale, *args):
        return right(c_rows, sq_norms, 2 * scale, *args)

    c_rows = _margin_rows(400, 16, np.random.default_rng(3))
    monkeypatch.setattr(linear, "_l2_dual_cd_pass", wrong)
    with pytest.raises(RuntimeError, match="certified duality gap"):
        l2_svm_dual_cd(c_rows, 1e-3, max_epochs=30)
    monkeypatch.setattr(linear, "_l2_dual_cd_pass", right)
    l2_svm_dual_cd(c_rows, 1e-3, max_epochs=30)   # the right one certifies within the budget


def test_a_wrong_dual_scaling_in_the_working_sets_is_caught(monkeypatch):
    # the broken variant halves the LP's multipliers (a dual scaled by 1/(2N), not 1/N): the
    # certified dual value is then about half of P*, and no iteration certifies
    import rfed.problems.linear as linear

    right = linear._l1_restricted_lp

    def wrong(*args):
        x, beta = right(*args)
        return x, 0.5 * beta

    c_rows = _margin_rows(300, 12, np.random.default_rng(4))
    monkeypatch.setattr(linear, "_l1_restricted_lp", wrong)
    with pytest.raises(RuntimeError, match="certified duality gap"):
        l1_svm_working_set(c_rows, 1e-2, max_iter=10)
    monkeypatch.setattr(linear, "_l1_restricted_lp", right)
    l1_svm_working_set(c_rows, 1e-2, max_iter=10)


@pytest.mark.parametrize("kwargs, name", [
    ({"mu": 0.0}, "mu"), ({"mu": float("inf")}, "mu"), ({"tol": 0.0}, "tol"),
    ({"tol": "x"}, "tol"), ({"max_epochs": 0}, "max_epochs"), ({"max_epochs": 2.5}, "max_epochs"),
    ({"margins_matrix": np.ones(3)}, "margins_matrix")])
def test_l2_dual_cd_bad_input_names_the_argument(kwargs, name):
    args = {"margins_matrix": np.ones((3, 2)), "mu": 0.1, **kwargs}
    with pytest.raises(ValueError, match=f"'{name}'"):
        l2_svm_dual_cd(**args)


@pytest.mark.parametrize("kwargs, name", [
    ({"phi": -1.0}, "phi"), ({"tol": float("nan")}, "tol"), ({"max_iter": 0}, "max_iter"),
    ({"first_rows": True}, "first_rows"), ({"growth": 1}, "growth"),
    ({"margins_matrix": np.ones((0, 2))}, "margins_matrix")])
def test_l1_working_set_bad_input_names_the_argument(kwargs, name):
    args = {"margins_matrix": np.ones((3, 2)), "phi": 0.1, **kwargs}
    with pytest.raises(ValueError, match=f"'{name}'"):
        l1_svm_working_set(**args)


@pytest.mark.parametrize("reg", ["l1", "l2"])
def test_hinge_svm_switches_to_the_scalable_solver_above_the_threshold(reg, monkeypatch):
    import rfed.problems.linear as linear

    rng = np.random.default_rng(11)
    c_rows = _margin_rows(240, 10, rng)
    labels = np.where(rng.random(240) < 0.5, -1.0, 1.0)
    feats = (c_rows * labels[:, None]).reshape(4, 60, 10)
    regularizer = L1Regularizer(1e-2) if reg == "l1" else L2Regularizer(1e-2)

    def solved():
        problem = HingeSVM(feats, labels.reshape(4, 60), regularizer)
        return problem.reference_cost(), problem.reference_gap, problem.reference_solver

    exact = solved()
    monkeypatch.setattr(linear, "SCALABLE_REFERENCE_SAMPLES", 100)
    scalable = solved()
    names = {"l1": ("l1_svm_reference", "l1_svm_working_set"),
             "l2": ("l2_svm_reference", "l2_svm_dual_cd")}[reg]
    assert (exact[2], scalable[2]) == names
    assert 0.0 <= scalable[1] <= 1e-9 and 0.0 <= exact[1] <= 1e-9
    assert abs(exact[0] - scalable[0]) <= max(exact[1], scalable[1]) + 1e-15
    problem = HingeSVM(feats, labels.reshape(4, 60), regularizer)
    problem.set_reference(np.zeros(10))
    assert problem.reference_gap is None


@pytest.mark.slow
@pytest.mark.parametrize("reg", ["l1", "l2"])
def test_scalable_solvers_on_an_epsilon_stand_in(reg):
    # 8,000 rows of dpdda-svm's recipe at d = 200: the scalable solver against the exact one
    from rfed.datasets.synthetic import make_epsilon_like

    x, y = make_epsilon_like(8000, 200, np.random.default_rng(99), spectrum_decay=1.0)
    c_rows = x * y[:, None]
    if reg == "l1":
        (x_fast, gap_fast), (x_ref, gap_ref) = (l1_svm_working_set(c_rows, 5e-4),
                                                l1_svm_reference(c_rows, 5e-4))
        values = [_objective(c_rows, v, 5e-4) for v in (x_fast, x_ref)]
    else:
        (x_fast, gap_fast), (x_ref, gap_ref) = (l2_svm_dual_cd(c_rows, 5e-4),
                                                l2_svm_reference(c_rows, 5e-4))
        values = [_l2_objective(c_rows, v, 5e-4) for v in (x_fast, x_ref)]
    assert 0.0 <= gap_fast <= 1e-9 * max(1.0, values[0])
    assert abs(values[0] - values[1]) <= max(gap_fast, gap_ref) + 1e-15
