"""Vectorized RDP curves of the (subsampled) Gaussian mechanism: dp-accounting's bounds, fast.

dp-accounting 0.6 evaluates these bounds with Python loops over the terms of their expansions
(a few hundred milliseconds per curve without replacement). This module evaluates the same
bounds with array operations over all terms and orders at once. Every value is an upper bound
on the exact value of the formula up to rounding; :mod:`tests.privacy.test_rdp_vectorized`
compares it with dp-accounting on a grid and with mpmath at high precision.

Functions take ``orders`` as a float array of shape ``(n_orders,)`` (finite, > 1) and return the
RDP curve of ONE invocation, shape ``(n_orders,)`` (``inf`` where the bound is infinite).

* :func:`gaussian_rdp`: ``alpha / (2 z^2)`` (Mironov 2017, Prop. 7).
* :func:`poisson_gaussian_rdp`: add/remove, ``log(A_alpha) / (alpha - 1)`` of Mironov, Talwar
  and Zhang 2019. Integer orders: the finite binomial sum, written as
  ``A - 1 = sum_{i>=2} C(a,i) q^i (1-q)^(a-i) expm1((i^2-i)/(2 z^2))`` (all terms positive,
  so ``log A`` keeps full relative accuracy when ``A`` is close to one). Fractional orders:
  the two series of their Section 3.3 with ``|C(a, i)|``, summed up to the same stopping index
  dp-accounting uses (both series decreasing and their terms ``e^30`` below the running total)
  and ``inf`` when that does not happen within 1000 terms, as dp-accounting does.
* :func:`sample_wor_gaussian_rdp`: replace-one, Wang, Balle and Kasiviswanathan 2019, Thm 27,
  in dp-accounting's form (its exact bound up to order 256, the bound with every term
  ``2 exp(cgf(i-1))`` above; fractional orders interpolate the CGF linearly between the
  neighbouring integers, their Cor. 10). The even forward differences
  ``Delta^{2m} exp(cgf)(-1) = E[(L - 1)^{2m}]`` with ``L = exp(Z/z - 1/(2 z^2))``,
  ``Z ~ N(0, 1)`` (the alternating sum of binomials cancels catastrophically for large ``z``)
  are integrals of a positive entire function, computed by the trapezoidal rule.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["gaussian_rdp", "poisson_gaussian_rdp", "sample_wor_gaussian_rdp", "IMPLEMENTATION"]

#: Tag of this implementation (part of the on-disk cache key of the curves it computes).
IMPLEMENTATION = "rfed-vectorized-1"

_LOG2 = math.log(2.0)
_LOG4 = math.log(4.0)
#: dp-accounting's cap on the terms of the fractional-order series (inf beyond).
_MAX_FRAC_TERMS = 1000
#: Orders up to this use Thm 27's exact bound; above, every term takes ``2 exp(cgf(i-1))``
#: (dp-accounting's ``max_alpha``).
_MAX_EXACT_WOR_ORDER = 256


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log |C(n, k)|`` (generalised binomial coefficient; gammaln is ``log |Gamma|``)."""
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def _log_comb_int(a: np.ndarray, i: np.ndarray) -> np.ndarray:
    """``log C(a, i)`` for integers ``0 <= i <= a`` (broadcast; other entries are garbage, to
    be masked) from one table of ``log Gamma`` instead of three ``gammaln`` per entry."""
    table = special.gammaln(np.arange(1, int(np.max(a)) + 2, dtype=float))  # log (t-1)!
    ai, ii = a.astype(int), i.astype(int)
    return table[ai] - table[ii] - table[np.maximum(ai - ii, 0)]


def _log1p_of_sum(log_terms: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``log(1 + sum_{t < count[r]} exp(log_terms[r, t]))`` for every row ``r``.

    Full relative accuracy when the sum is small (unlike ``log`` of a sum close to one). The
    sum runs left to right (a cumulative sum), so a row's value does not depend on the length
    of the array, i.e. on the other orders computed with it: a curve is the same bit for bit
    whichever orders are requested together.
    """
    rows = np.arange(log_terms.shape[0])
    valid = np.arange(log_terms.shape[1]) < count[:, None]
    x = np.where(valid, log_terms, -np.inf)
    top = np.max(x, axis=1, keepdims=True)
    partial = np.cumsum(np.exp(x - top), axis=1)
    return np.logaddexp(0.0, np.log(partial[rows, count - 1]) + top[:, 0])


def gaussian_rdp(noise_multiplier: float, orders: np.ndarray) -> np.ndarray:
    """RDP of the Gaussian mechanism, ``alpha / (2 z^2)`` (``inf`` for ``z = 0``)."""
    orders = np.asarray(orders, dtype=float)
    if noise_multiplier == 0:
        return np.full(orders.shape, np.inf)
    return orders / (2 * noise_multiplier**2)


# ------------------------------------------------------------------ Poisson subsampling
def _poisson_log_a_int(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """``log A_alpha`` for integer orders ``alphas`` (shape ``(k,)``), ``0 < q < 1``."""
    if alphas.size == 0:
        return np.zeros(0)
    i = np.arange(2, int(alphas.max()) + 1, dtype=float)            # (n,)
    a = alphas[:, None]                                              # (k, 1)
    x = (i * i - i) / (2 * sigma**2)                                 # > 0 for i >= 2
    log_expm1 = x + np.log(-np.expm1(-x))                            # log(e^x - 1), stable
    log_q, log_1mq = math.log(q), math.log1p(-q)
    log_terms = _log_comb_int(a, i) + i * log_q + (a - i) * log_1mq + log_expm1
    return _log1p_of_sum(log_terms, alphas.astype(int) - 1)        # terms i = 2..alpha


def _poisson_frac_terms(q: float, sigma: float, alphas: np.ndarray, n_terms: int):
    """The first ``n_terms`` log-terms of the two series of Mironov et al. (2019, Sec. 3.3)
    for each fractional order, shape ``(k, n_terms)`` each."""
    i = np.arange(n_terms, dtype=float)                              # (n,)
    a = alphas[:, None]                                              # (k, 1)
    j = a - i
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    log_coef = _log_comb(a, i)
    # 0.5 * erfc(x / (sqrt 2 sigma)) = Phi(-x / sigma)
    log_s0 = (log_coef + i * log_q + j * log_1mq + (i * i - i) / (2 * sigma**2)
              + special.log_ndtr(-(i - z0) / sigma))
    log_s1 = (log_coef + j * log_q + i * log_1mq + (j * j - j) / (2 * sigma**2)
              + special.log_ndtr(-(z0 - j) / sigma))
    return log_s0, log_s1


def _poisson_log_a_frac(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """``log A_alpha`` for fractional orders: dp-accounting's series, summed up to its
    stopping index (``inf`` when the series does not stop within 1000 terms)."""
    out = np.full(alphas.shape, np.inf)
    todo = np.ones(alphas.shape, dtype=bool)
    # most series stop within a few dozen terms: try short prefixes first, then
    # dp-accounting's cap
    for n_terms in (32, 160, _MAX_FRAC_TERMS):
        if not todo.any():
            break
        log_s0, log_s1 = _poisson_frac_terms(q, sigma, alphas[todo], n_terms)
        total = np.logaddexp(np.logaddexp.accumulate(log_s0, axis=1),
                             np.logaddexp.accumulate(log_s1, axis=1))
        # dp-accounting stops at the first term i >= 1 where both series decrease and both
        # terms are e^30 below the running total; the terms up to and including i are summed
        stop = np.zeros(total.shape, dtype=bool)
        stop[:, 1:] = ((log_s0[:, 1:] < log_s0[:, :-1]) & (log_s1[:, 1:] < log_s1[:, :-1])
                       & (np.maximum(log_s0[:, 1:], log_s1[:, 1:]) < total[:, 1:] - 30))
        found = stop.any(axis=1)
        # the running total at the stopping index: summed left to right, as dp-accounting
        # does, and independent of the prefix length (and so of the other orders)
        value = total[np.arange(total.shape[0]), np.argmax(stop, axis=1)]
        rows = np.flatnonzero(todo)
        out[rows[found]] = value[found]
        todo[rows[found]] = False
    return out


def _degenerate_sampled_curve(q: float, noise_multiplier: float, orders: np.ndarray
                              ) -> np.ndarray | None:
    """A subsampled Gaussian's curve where it needs no series: nothing sampled (0), no noise
    (inf), everything sampled (the plain Gaussian); else None."""
    if q == 0:
        return np.zeros(orders.shape)
    if noise_multiplier == 0:
        return np.full(orders.shape, np.inf)
    if q == 1:
        return gaussian_rdp(noise_multiplier, orders)
    return None


def poisson_gaussian_rdp(q: float, noise_multiplier: float, orders: np.ndarray) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian (add/remove), one invocation.

    Parameters
    ----------
    q : float
        Sampling probability in [0, 1].
    noise_multiplier : float
        ``z`` = noise std / L2 sensitivity, >= 0.
    orders : ndarray, shape (n_orders,)

    Returns
    -------
    ndarray, shape (n_orders,)
        ``log(A_alpha) / (alpha - 1)``; 0 for ``q = 0``, ``alpha / (2 z^2)`` for ``q = 1``.
    """
    orders = np.asarray(orders, dtype=float)
    degenerate = _degenerate_sampled_curve(q, noise_multiplier, orders)
    if degenerate is not None:
        return degenerate
    integer = orders == np.floor(orders)
    log_a = np.empty(orders.shape)
    log_a[integer] = _poisson_log_a_int(q, noise_multiplier, orders[integer])
    log_a[~integer] = _poisson_log_a_frac(q, noise_multiplier, orders[~integer])
    return log_a / (orders - 1)


# ------------------------------------------------------------------ sampling without replacement
#: Half-width of the quadrature windows around each peak: the log-integrand is concave with
#: curvature >= 1 on each side of its zero, so 11 away from a peak it is e^60 below it.
_WINDOW = 11.0
#: Trapezoid step: the integrand is entire; the rule's relative error is below e^-1000 here.
_STEP = 0.1


def _log_even_forward_differences(sigma: float, m_max: int) -> np.ndarray:
    """``log Delta^{2m} f(-1)``, ``m = 1..m_max``, for ``f(x) = exp(x (x+1) / (2 sigma^2))``.

    ``f(x) = E[L^(x+1)]`` for ``L = exp(s Z - s^2/2)``, ``s = 1/sigma``, so the forward difference
    of order ``k`` at -1 is ``E[(L - 1)^k]``; for even ``k = 2m`` the integrand
    ``exp(g_m(z)) = (e^u - 1)^{2m} phi(z)``, ``u = s z - s^2/2``, is positive. On each side of
    its zero ``z0 = s/2``, ``g_m`` is concave with ``g_m'' <= -1``, so it has one peak per side
    (found by bisection on ``g_m'``) and the integral is the trapezoidal sum over two windows of
    half-width :data:`_WINDOW` around the peaks, on the lattice ``z = k * _STEP``.

    Returns
    -------
    ndarray, shape (m_max,)
    """
    s = 1.0 / sigma
    z0 = 0.5 * s
    m = np.arange(1, m_max + 1, dtype=float)

    def slope(z):  # g_m'(z) = 2 m s e^u / (e^u - 1) - z = 2 m s / (1 - e^-u) - z
        return 2 * m * s / -np.expm1(-(s * z - 0.5 * s * s)) - z

    def peak(lo, hi):
        # g_m' decreases from +inf to -inf on each side of z0; bisect for its zero
        with np.errstate(divide="ignore", over="ignore"):
            for _ in range(48):  # the bracket (< 1e4 wide) to 1e-10: ample for a window
                mid = 0.5 * (lo + hi)
                pos = slope(mid) > 0
                lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
        return 0.5 * (lo + hi)

    # right of z0: g' -> +inf at z0+, and g'(z) < 0 for z >= 2 m s + sqrt(2 m) + 1
    right = peak(np.full_like(m, z0), 2 * m * s + np.sqrt(2 * m) + 1.0)
    # left of z0: g' > 0 at -sqrt(2 m) - 1 and -> -inf at z0-
    left = peak(-np.sqrt(2 * m) - 1.0, np.full_like(m, z0))
    n_win = int(math.ceil(2 * _WINDOW / _STEP)) + 1
    offsets = np.arange(n_win, dtype=float)
    start_left = np.floor((left - _WINDOW) / _STEP)
    end_left = start_left + n_win - 1                                # last lattice index used
    start_right = np.maximum(np.floor((right - _WINDOW) / _STEP), end_left + 1)
    z = np.concatenate([(start_left[:, None] + offsets) * _STEP,
                        (start_right[:, None] + offsets) * _STEP], axis=1)   # (m_max, 2 n_win)
    u = s * z - 0.5 * s * s
    with np.errstate(divide="ignore", invalid="ignore"):  # u == 0: the integrand's zero
        # log|e^u - 1| without overflow: u + log(1 - e^-u) for u > 0
        log_abs = np.where(u > 0, u, 0.0) + np.log(-np.expm1(-np.abs(u)))
        g = 2 * m[:, None] * log_abs - 0.5 * z * z
    return special.logsumexp(g, axis=1) + math.log(_STEP) - 0.5 * math.log(2 * math.pi)


def _wor_log_a_int(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """Thm 27's bound on ``log A_alpha`` (dp-accounting's form) for integer orders >= 1."""
    out = np.zeros(alphas.shape)
    big = alphas > 1
    if not big.any():
        return out
    a = alphas[big][:, None]                                         # (k, 1)
    i = np.arange(2, int(a.max()) + 1, dtype=float)                  # (n,)
    two_var = 2.0 * sigma**2
    cgf_im1 = (i - 1) * 1.0 * i / two_var                            # cgf(i - 1)
    f2 = 2.0 / two_var                                               # rdp of the Gaussian at 2
    log_f2m1 = f2 + math.log1p(-math.exp(-f2))
    first = min(_LOG4 + log_f2m1, f2 + _LOG2)                        # the i = 2 term's min
    bound = _LOG2 + cgf_im1                                          # every term's cap
    exact = a <= _MAX_EXACT_WOR_ORDER
    if np.any(exact):
        n_exact = int(min(i[-1], _MAX_EXACT_WOR_ORDER))
        log_d = _log_even_forward_differences(sigma, (n_exact + 1) // 2)   # D_2, D_4, ...
        idx = i[i <= n_exact].astype(int)
        lo = log_d[idx // 2 - 1]            # D_{2 floor(i/2)}
        hi = log_d[(idx + 1) // 2 - 1]      # D_{2 ceil(i/2)}
        by_diff = np.full(i.shape, np.inf)
        by_diff[: idx.size] = _LOG4 + 0.5 * (lo + hi)
        per_term = np.where(exact, np.minimum(by_diff, bound), bound)
    else:
        per_term = np.broadcast_to(bound, (a.shape[0], i.size))
    per_term = np.where(i == 2, first, per_term)
    log_terms = per_term + i * math.log(q) + _log_comb_int(a, i)
    out[big] = _log1p_of_sum(log_terms, a[:, 0].astype(int) - 1)  # terms i = 2..alpha
    return out


def sample_wor_gaussian_rdp(q: float, noise_multiplier: float, orders: np.ndarray
                            ) -> np.ndarray:
    """RDP of the Gaussian on a uniformly random subset of fixed size (replace-one).

    Parameters
    ----------
    q : float
        ``sample_size / dataset_size`` in [0, 1].
    noise_multiplier : float
        ``z`` = noise std / replace-one L2 sensitivity, >= 0.
    orders : ndarray, shape (n_orders,)

    Returns
    -------
    ndarray, shape (n_orders,)
        Integer ``a``: ``log A_a / (a - 1)``; fractional ``a`` between ``f = floor(a)`` and
        ``c = f + 1``: ``((1 - t) log A_f + t log A_c) / (a - 1)``, ``t = a - f``.
    """
    orders = np.asarray(orders, dtype=float)
    degenerate = _degenerate_sampled_curve(q, noise_multiplier, orders)
    if degenerate is not None:
        return degenerate
    floor = np.floor(orders)
    ceil = np.ceil(orders)
    needed, inverse = np.unique(np.concatenate([floor, ceil]), return_inverse=True)
    log_a = _wor_log_a_int(q, noise_multiplier, needed)[inverse]
    x, y = log_a[: orders.size], log_a[orders.size:]
    t = orders - floor
    return np.where(t == 0, x, (1 - t) * x + t * y) / (orders - 1)
