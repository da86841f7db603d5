"""rfed's vectorized RDP curves (rfed.privacy._rdp) against dp-accounting and against mpmath.

Tolerance: on ``log A = rdp * (alpha - 1)``, 1e-12 relative plus ``1e-15 alpha`` absolute. The
absolute part is dp-accounting's rounding: it forms ``log A`` as the logarithm of a sum close to
one, term by term, so when ``A - 1`` is tiny (large z, small q) its value carries ~1e-16 absolute
rounding per term (up to 1e-7 relative); rfed sums ``A - 1`` directly for integer orders
(checked against mpmath below).

Without replacement, dp-accounting computes the forward differences of ``exp(cgf)`` by repeated
subtraction, which cancels catastrophically for large noise multipliers (z >= 5: every digit of
the high differences is lost, and with q >= 0.1 the curve is up to 20x too large, or 7e-10
relative too small); rfed integrates them (positive integrands, no cancellation). There the
reference is the formula evaluated by mpmath with exact differences, not dp-accounting.
"""

from __future__ import annotations

import logging
import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from rfed.privacy import _rdp

ORDERS = np.array(dpa_rdp.DEFAULT_RDP_ORDERS, dtype=float)


@pytest.fixture(autouse=True)
def _quiet_dp_accounting():
    # dp-accounting logs a warning per order whose series it gives up on (inf): expected here
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def assert_close_to_dp_accounting(ours, reference, orders=ORDERS):
    assert ours.shape == reference.shape
    assert np.array_equal(np.isinf(ours), np.isinf(reference))
    assert not np.any(np.isnan(ours))
    fin = np.isfinite(reference)
    log_a, log_a_ref = ours[fin] * (orders[fin] - 1), reference[fin] * (orders[fin] - 1)
    for a, ours_a, ref_a in zip(orders[fin], log_a, log_a_ref, strict=True):
        assert abs(ours_a - ref_a) <= 1e-12 * abs(ref_a) + 1e-15 * a, (a, ours_a, ref_a)


# ---------------------------------------------------------------------- against dp-accounting
POISSON_GRID = [(z, q) for z in (0.3, 1.0, 5.0, 50.0) for q in (1e-4, 0.01, 0.3, 0.9)]


@pytest.mark.parametrize("z,q", POISSON_GRID)
def test_poisson_curve_equals_dp_accounting(z, q):
    reference = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, z, ORDERS)
    assert_close_to_dp_accounting(_rdp.poisson_gaussian_rdp(q, z, ORDERS), reference)


def test_poisson_gives_inf_where_dp_accounting_does():
    # the fractional series does not stop within 1000 terms at these orders (dp-accounting
    # gives up and returns inf); the other orders stay finite
    reference = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(0.03, 0.6, ORDERS)
    assert np.isinf(reference).any() and np.isfinite(reference).any()
    assert_close_to_dp_accounting(_rdp.poisson_gaussian_rdp(0.03, 0.6, ORDERS), reference)


# (dataset size, sample size): rfed's range, 10 to 1e6 records; q from 1e-4 to 0.5
WOR_SIZES = [(10, 1), (179, 1), (131, 66), (1_000_000, 100)]


@pytest.mark.parametrize("n,m", WOR_SIZES)
@pytest.mark.parametrize("z", [0.3, 1.0])
def test_without_replacement_curve_equals_dp_accounting(z, n, m):
    reference = dpa_rdp._compute_rdp_sample_wor_gaussian(m / n, z, ORDERS)
    assert_close_to_dp_accounting(_rdp.sample_wor_gaussian_rdp(m / n, z, ORDERS), reference)


@pytest.mark.slow
@pytest.mark.parametrize("n,m", WOR_SIZES + [(1000, 1), (100, 10), (10, 9)])
@pytest.mark.parametrize("z", [0.3, 0.5, 1.0, 1.5, 2.0])
def test_without_replacement_curve_equals_dp_accounting_full_grid(z, n, m):
    reference = dpa_rdp._compute_rdp_sample_wor_gaussian(m / n, z, ORDERS)
    assert_close_to_dp_accounting(_rdp.sample_wor_gaussian_rdp(m / n, z, ORDERS), reference)


@pytest.mark.slow
@pytest.mark.parametrize("z", [0.3, 0.5, 0.8, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0])
@pytest.mark.parametrize("q", [1e-4, 1e-3, 0.0056, 0.03, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_poisson_curve_equals_dp_accounting_full_grid(z, q):
    reference = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, z, ORDERS)
    assert_close_to_dp_accounting(_rdp.poisson_gaussian_rdp(q, z, ORDERS), reference)


# ---------------------------------------------------------------------- against mpmath
def _poisson_log_a_int_mp(q, z, alpha):
    """log A_alpha of Mironov et al. (2019), integer alpha: the binomial sum, 50 digits."""
    with mp.workdps(50):
        q, z = mp.mpf(q), mp.mpf(z)
        return mp.log(mp.fsum(mp.binomial(alpha, i) * q**i * (1 - q) ** (alpha - i)
                              * mp.e ** ((i * i - i) / (2 * z * z)) for i in range(alpha + 1)))


def _poisson_log_a_integral_mp(q, z, alpha):
    """log E_{x ~ N(0, z^2)} [((1 - q) + q exp((2x - 1) / (2 z^2)))^alpha]: the exact quantity
    the fractional-order series bounds from above (it sums |C(alpha, i)|)."""
    with mp.workdps(30):
        q, z, a = mp.mpf(q), mp.mpf(z), mp.mpf(alpha)

        def f(x):
            return (((1 - q) + q * mp.e ** ((2 * x - 1) / (2 * z * z))) ** a
                    * mp.npdf(x, 0, z))
        return mp.log(mp.quad(f, [-mp.inf, -10 * z, 0, a, a + 10 * z, mp.inf]))


def _wor_log_a_int_mp(q, z, alpha):
    """Wang, Balle and Kasiviswanathan (2019) Thm 27 in dp-accounting's form, integer alpha,
    with the forward differences summed exactly at 3 alpha + 60 digits."""
    if alpha == 1:
        return mp.mpf(0)
    with mp.workdps(3 * alpha + 60):
        q, s2 = mp.mpf(q), mp.mpf(z) ** 2

        def cgf(x):
            return x * (x + 1) / (2 * s2)

        values = [mp.e ** cgf(j - 1) for j in range(alpha + 3)]
        diffs = {}

        def diff(k):  # k-th forward difference of exp(cgf) at -1, exactly
            if k not in diffs:
                diffs[k] = mp.fsum((-1) ** (k - j) * mp.binomial(k, j) * values[j]
                                   for j in range(k + 1))
            return diffs[k]

        total = mp.mpf(1)
        for i in range(2, alpha + 1):
            if i == 2:
                term = min(4 * mp.expm1(1 / s2), 2 * mp.e ** (1 / s2))
            elif alpha <= 256:
                term = min(4 * mp.sqrt(diff(2 * (i // 2)) * diff(2 * ((i + 1) // 2))),
                           2 * mp.e ** cgf(i - 1))
            else:
                term = 2 * mp.e ** cgf(i - 1)
            total += q**i * mp.binomial(alpha, i) * term
        return mp.log(total)


def assert_upper_bound_of(ours, exact, rtol=1e-12):
    """``ours`` is the exact value up to rounding: never below it by more than 1e-13
    relative, never above it by more than ``rtol``."""
    exact = float(exact)
    assert exact * (1 - 1e-13) <= ours <= exact * (1 + rtol), (ours, exact)


@pytest.mark.parametrize("q,z,alpha", [(1e-4, 50.0, 2), (0.03, 400.0, 1024), (0.01, 1.0, 63),
                                       (0.5, 0.3, 11), (0.9, 2.0, 256)])
def test_poisson_integer_orders_match_mpmath(q, z, alpha):
    ours = _rdp.poisson_gaussian_rdp(q, z, np.array([float(alpha)]))[0] * (alpha - 1)
    assert_upper_bound_of(ours, _poisson_log_a_int_mp(q, z, alpha))


@pytest.mark.parametrize("q,z,alpha", [(0.01, 1.0, 1.5), (0.5, 50.0, 10.9), (0.0056, 2.0, 4.4)])
def test_poisson_fractional_orders_bound_the_exact_divergence(q, z, alpha):
    ours = _rdp.poisson_gaussian_rdp(q, z, np.array([alpha]))[0] * (alpha - 1)
    assert ours >= float(_poisson_log_a_integral_mp(q, z, alpha))


@pytest.mark.parametrize("q,z,alpha", [
    (0.0056, 2.0, 20), (0.5, 0.3, 40), (0.1, 1.0, 63), (1e-4, 14.8, 128),
    # dp-accounting's forward differences are wrong here (see the module docstring)
    (0.5, 5.0, 43), (0.9, 5.0, 35), (0.1, 50.0, 63), (0.5, 50.0, 128)])
def test_without_replacement_matches_mpmath(q, z, alpha):
    ours = _rdp.sample_wor_gaussian_rdp(q, z, np.array([float(alpha)]))[0] * (alpha - 1)
    assert_upper_bound_of(ours, _wor_log_a_int_mp(q, z, alpha))


@pytest.mark.slow
@pytest.mark.parametrize("q,z,alpha", [(0.1, 14.8, 256), (0.0056, 1.0, 256), (0.3, 3.0, 512),
                                       (1e-3, 0.5, 1024)])
def test_without_replacement_high_orders_match_mpmath(q, z, alpha):
    ours = _rdp.sample_wor_gaussian_rdp(q, z, np.array([float(alpha)]))[0] * (alpha - 1)
    assert_upper_bound_of(ours, _wor_log_a_int_mp(q, z, alpha))


def test_dp_accounting_without_replacement_loses_its_digits_for_large_noise():
    """Why the tests above use mpmath, not dp-accounting, for large z (documents the finding;
    if dp-accounting fixes its differences this test says so)."""
    exact = float(_wor_log_a_int_mp(0.5, 50.0, 128)) / 127
    theirs = dpa_rdp._compute_rdp_sample_wor_gaussian(0.5, 50.0, [128])[0]
    ours = _rdp.sample_wor_gaussian_rdp(0.5, 50.0, np.array([128.0]))[0]
    assert theirs > 10 * exact          # dp-accounting: 0.374, exact: 0.0175
    assert ours == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("z", [0.3, 1.0, 5.0, 50.0])
def test_even_forward_differences_match_exact_sums(z):
    log_d = _rdp._log_even_forward_differences(z, 64)
    with mp.workdps(300):
        c = 1 / (2 * mp.mpf(z) ** 2)
        values = [mp.e ** (c * (j - 1) * j) for j in range(130)]
        for m in (1, 2, 5, 16, 64):
            k = 2 * m
            exact = mp.log(mp.fsum((-1) ** (k - j) * mp.binomial(k, j) * values[j]
                                   for j in range(k + 1)))
            # absolute error in the log: rounding of the integrand's exponent, amplified by 2m
            assert abs(log_d[m - 1] - float(exact)) <= 1e-13 * max(1.0, abs(float(exact))), m


# ---------------------------------------------------------------------- structure
@pytest.mark.parametrize("curve,q", [(_rdp.poisson_gaussian_rdp, 0.01),
                                     (_rdp.sample_wor_gaussian_rdp, 0.1)])
def test_each_order_is_independent_of_the_others_bit_for_bit(curve, q):
    # the accountant composes the default orders in tiers; a tier's values must be exactly
    # those of the full set
    full = curve(q, 1.3, ORDERS)
    for tier in (ORDERS[ORDERS < 11], ORDERS[(ORDERS >= 11) & (ORDERS <= 64)],
                 ORDERS[ORDERS > 64], ORDERS[::7]):
        expected = full[np.isin(ORDERS, tier)]
        assert np.array_equal(curve(q, 1.3, tier), expected)


@pytest.mark.parametrize("curve", [_rdp.poisson_gaussian_rdp, _rdp.sample_wor_gaussian_rdp])
def test_edge_cases(curve):
    orders = np.array([1.5, 2.0, 32.0])
    assert np.array_equal(curve(0.0, 1.0, orders), np.zeros(3))
    assert np.array_equal(curve(1.0, 2.0, orders), orders / 8.0)
    assert np.all(np.isinf(curve(0.1, 0.0, orders)))
    assert np.array_equal(_rdp.gaussian_rdp(2.0, orders), orders / 8.0)


def test_curves_increase_with_the_order_and_decrease_with_the_noise():
    # Renyi divergence is non-decreasing in the order; more noise, less privacy loss
    for curve, q in [(_rdp.poisson_gaussian_rdp, 0.02), (_rdp.sample_wor_gaussian_rdp, 0.02)]:
        low, high = curve(q, 0.8, ORDERS), curve(q, 1.6, ORDERS)
        fin = np.isfinite(low)
        assert np.all(np.diff(low[fin] * 1) >= -1e-15 * low[fin][1:])
        assert np.all(high <= low) and math.isfinite(high[-1])
