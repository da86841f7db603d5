"""The five papers' own privacy formulas, reproduced exactly, with their conditions checked.

Every function cites the theorem or equation it implements and the section of the paper's
reading in the documentation (``docs/papers/``; labels such as :ref:`doadp-theorem1`) that
explains how rfed resolves it. Where a reading found a paper's constant wrong, both values are
offered and labelled (``variant='paper'`` and a corrected variant). These are the papers' closed
forms: they sit *beside* the certified accountant of :mod:`rfed.privacy.accountants`, they do not
replace it (several rest on conditions the experiments violate, or leave delta vacuous).

When a configuration violates a theorem's hypothesis that the formula needs only for its proof,
a :class:`PrivacyConditionWarning` is emitted and the value is still returned (the papers'
experiments use such configurations). When the formula itself becomes meaningless (a negative or
divergent epsilon), ``ValueError`` is raised instead.

Contents
--------
Generic tools: :func:`advanced_composition` (PriRFed Thm 2.3), :func:`subsampled_epsilon`
(PriRFed Lemma 4.1), :func:`heterogeneous_composition` (Kairouz et al., DO-ADP Lemma 5 = DP-DDA
Lemma 4.3), :func:`classic_gaussian_sigma` (Dwork-Roth Gaussian mechanism).

* PriRFed (:doc:`/papers/prirfed`): :func:`prirfed_privacy` (Thm 4.2), :func:`prirfed_table1`,
  :func:`dp_rsgd_sigma` and :func:`dp_rsvrg_sigma` (section 2.5).
* DO-ADP (:doc:`/papers/doadp`): :func:`doadp_sigma` (Thm 1, eq. 7), :func:`doadp_epsilon`
  (the proof chain with a chosen delta), :func:`doadp_sigma_for_delta`.
* DPDL (:doc:`/papers/dpdl`): :func:`dpdl_sigma` (Thm 1, three printed versions),
  :func:`dpdl_noise_multipliers`.
* DP-DDA (:doc:`/papers/dpdda`): :func:`dpdda_sigma` (Thm 1, constant 32 or 160),
  :func:`dpdda_remark_epsilon` (Remark 3.1 eq. 7), :func:`dpdda_sigma_for_delta`.
* DP-DGT (:doc:`/papers/dpdgt`): :func:`dpdgt_epsilon` (Cor. 5.14 eq. 38),
  :func:`dpdgt_sensitivities` (the comparison system 32), :func:`dpdgt_epsilon_recursion`,
  :func:`dpdgt_laplace_events`.

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
* Wei Huo, Changxin Liu, Kemi Ding, Karl Henrik Johansson and Ling Shi. Decentralized
  Optimization with Amplified Privacy via Efficient Communication. arXiv preprint
  arXiv:2506.07102, 2025.
* Yunsheng Yuan, Xue Xiao, Lina Wang and Feng Li. DPDL: Towards Differential Privacy
  Preservation in Decentralized Stochastic Learning on Non-IID Data. arXiv preprint
  arXiv:2606.04399, 2026.
* Changxin Liu, Karl H. Johansson and Yang Shi. Distributed Empirical Risk Minimization With
  Differential Privacy. Automatica 162, 111514, 2024. arXiv:2302.10520.
* Wei Huo, Xiaomeng Chen, Lingying Huang, Karl Henrik Johansson and Ling Shi. Differentially
  Private Dual Gradient Tracking for Distributed Resource Allocation. Automatica 182, 112521,
  2025. arXiv:2403.18275.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from rfed.privacy._checks import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonneg,
    check_nonneg_array,
    check_positive,
    check_rate,
    check_real,
)
from rfed.privacy.accountants import EventSpec

__all__ = [
    "PrivacyConditionWarning",
    "round_sig",
    "advanced_composition",
    "subsampled_epsilon",
    "heterogeneous_composition",
    "classic_gaussian_sigma",
    "PriRFedPrivacy",
    "prirfed_privacy",
    "PRIRFED_TABLE1_SETTINGS",
    "PRIRFED_TABLE1_ROUNDS",
    "prirfed_table1",
    "dp_rsgd_sigma",
    "dp_rsvrg_sigma",
    "DoAdpNoise",
    "doadp_sigma",
    "doadp_epsilon",
    "doadp_sigma_for_delta",
    "dpdl_sigma",
    "dpdl_noise_multipliers",
    "DpDdaNoise",
    "dpdda_sigma",
    "dpdda_remark_epsilon",
    "dpdda_sigma_for_delta",
    "dpdgt_epsilon",
    "dpdgt_sensitivities",
    "dpdgt_epsilon_recursion",
    "dpdgt_laplace_events",
]


class PrivacyConditionWarning(UserWarning):
    """A configuration violates a hypothesis of the theorem whose formula was evaluated."""


def _warn(message: str) -> None:
    warnings.warn(message, PrivacyConditionWarning, stacklevel=3)


def round_sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant digits, half up, as printed (2.875e-3 -> 2.88e-3).

    Works on the shortest decimal representation of ``x`` so that a value that prints as an
    exact half rounds up.

    Parameters
    ----------
    x : float
        Value to round.
    digits : int
        Significant digits kept.

    Returns
    -------
    float
        ``x`` rounded (0, inf and NaN are returned unchanged).
    """
    x = check_real(x, "x")
    digits = check_int(digits, "digits")
    if x == 0 or not math.isfinite(x):
        return x
    d = Decimal(repr(x))
    exponent = d.adjusted() - digits + 1
    return float(d.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP))


# ---------------------------------------------------------------------- generic DP tools
def advanced_composition(epsilon: float, k: int, delta_hat: float) -> float:
    r"""Advanced composition (Dwork-Rothblum-Vadhan; PriRFed Sec. 2, Thm 2.3).

    ``k`` adaptive (eps, delta)-DP mechanisms are (eps', delta_hat + k delta)-DP with
    ``eps' = sqrt(2 k ln(1/delta_hat)) eps + k eps (e^eps - 1)``. Returns ``eps'``.

    Parameters
    ----------
    epsilon : float
        Epsilon of each mechanism.
    k : int
        Number of mechanisms composed.
    delta_hat : float
        The composition's slack ``delta_hat`` in (0, 1).

    Returns
    -------
    float
        ``eps'``.
    """
    epsilon = check_nonneg(epsilon, "epsilon")
    k = check_int(k, "k")
    delta_hat = check_delta(delta_hat, "delta_hat")
    return math.sqrt(2 * k * math.log(1 / delta_hat)) * epsilon + k * epsilon * math.expm1(epsilon)


def subsampled_epsilon(epsilon: float, rate: float) -> float:
    """Amplification by subsampling without replacement (PriRFed Sec. 4, Lemma 4.1).

    ``eps' = ln(1 + rate (e^eps - 1))`` (the delta becomes ``rate * delta``).

    Parameters
    ----------
    epsilon : float
        Epsilon of the mechanism on the subsample.
    rate : float
        Sampling rate in (0, 1].

    Returns
    -------
    float
        The amplified epsilon.
    """
    epsilon = check_nonneg(epsilon, "epsilon")
    rate = check_rate(rate, "rate")
    return math.log1p(rate * math.expm1(epsilon))


def heterogeneous_composition(
    epsilons: np.ndarray | float,
    deltas: np.ndarray | float,
    delta_hat: float,
    count: int | None = None,
) -> tuple[float, float]:
    r"""Heterogeneous advanced composition (Kairouz-Oh-Viswanath; DO-ADP Lemma 5, DP-DDA Lemma 4.3).

    For mechanisms that are (eps_t, delta_t)-DP with ``eps_t in (0, 0.9]``:
    ``eps~ = sqrt(sum_t 2 eps_t^2 ln(e + sqrt(sum_t eps_t^2) / delta_hat)) + sum_t eps_t^2`` and
    ``delta~ = 1 - (1 - delta_hat) prod_t (1 - delta_t)``.

    Parameters
    ----------
    epsilons, deltas : float or array
        Per-step values; scalars with ``count`` mean ``count`` identical steps.
    delta_hat : float
        In (0, 1].
    count : int, optional
        Number of identical steps when scalars are given.

    Returns
    -------
    (eps_tilde, delta_tilde)
    """
    eps = np.atleast_1d(check_nonneg_array(epsilons, "epsilons"))
    dts = np.atleast_1d(check_nonneg_array(deltas, "deltas"))
    n = 1 if count is None else check_int(count, "count")
    delta_hat = check_rate(delta_hat, "delta_hat")
    if np.any(dts > 1):
        raise ValueError("argument 'deltas' must lie in [0, 1]")
    if np.any(eps > 0.9):
        _warn(
            f"heterogeneous composition (Kairouz et al.) needs every eps_t <= 0.9; the largest is "
            f"{eps.max():.4g}, so the composed epsilon is not covered by the lemma"
        )
    s = n * float(np.sum(eps**2))
    eps_tilde = math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / delta_hat)) + s
    if eps.size == 1 and dts.size == 1:
        log_keep = n * math.log1p(-float(dts[0])) if dts[0] < 1 else -math.inf
    else:
        log_keep = n * float(np.sum(np.log1p(-np.minimum(dts, 1.0))))
    delta_tilde = 1.0 - (1.0 - delta_hat) * math.exp(log_keep)
    return eps_tilde, delta_tilde


def classic_gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float, constant: float = 1.25
) -> float:
    r"""The classic Gaussian mechanism ``sigma = sensitivity sqrt(2 ln(constant/delta)) / eps``.

    Dwork and Roth (2014) Thm A.1 with ``constant = 1.25``; it is DO-ADP Lemma 1, the Gaussian
    mechanism DPDL quotes in its Section III, and the one-shot tangent Gaussian mechanism PriRFed
    takes from Han et al. (2024, Prop. 2) with the sensitivity measured in the Riemannian norm
    (:ref:`prirfed-noise-formulas`). DP-DDA Lemma 4.1 prints
    ``constant = 2``. The theorem holds for ``eps < 1`` only: a warning is emitted otherwise.

    Parameters
    ----------
    epsilon : float
        Target epsilon (the theorem needs ``epsilon < 1``).
    delta : float
        Target delta in (0, 1).
    sensitivity : float
        L2 sensitivity of the released quantity.
    constant : float
        1.25 (Dwork and Roth) or 2 (as DP-DDA prints it).

    Returns
    -------
    float
        The noise standard deviation.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_nonneg(sensitivity, "sensitivity")
    constant = check_positive(constant, "constant")
    if epsilon >= 1:
        _warn(f"the classic Gaussian mechanism is proven for epsilon < 1 only, got {epsilon:g}")
    return sensitivity * math.sqrt(2 * math.log(constant / delta)) / epsilon


# ---------------------------------------------------------------------- PriRFed
@dataclasses.dataclass(frozen=True)
class PriRFedPrivacy:
    """Result of PriRFed Theorem 4.2.

    Attributes
    ----------
    epsilon, delta : float
        ``eps' = min(sequential, advanced)`` and ``delta' = delta_hat + T delta_tilde``.
    eps_tilde, delta_tilde : float
        Per-round guarantee after agent subsampling.
    eps_sequential, eps_advanced : float
        The two branches of the min.
    branch : {'sequential', 'advanced'}
    """

    epsilon: float
    delta: float
    eps_tilde: float
    delta_tilde: float
    eps_sequential: float
    eps_advanced: float
    branch: str


#: Largest x with exp(x) finite in IEEE double precision (ln(DBL_MAX) ~ 709.78).
_EXP_OVERFLOW = math.log(sys.float_info.max)


def _log1p_scaled_expm1(rho: float, x: float) -> float:
    r"""``ln(1 + rho (e^x - 1))`` for ``0 < rho <= 1``, ``x >= 0``, without overflow.

    For small ``x`` the direct ``log1p(rho * expm1(x))`` is exact to rounding; once ``e^x``
    would overflow (``x`` past ~709), use ``ln(rho (e^x - 1)) = ln rho + x + ln(1 - e^{-x})``
    and ``ln(1 + e^a) = logaddexp(0, a)``, which stays finite for every finite ``x``.
    """
    if x < _EXP_OVERFLOW - 1.0:
        return math.log1p(rho * math.expm1(x))
    log_term = math.log(rho) + x + math.log1p(-math.exp(-x))
    return float(np.logaddexp(0.0, log_term))


def prirfed_privacy(
    n_agents: int,
    s: int,
    epsilon: float,
    delta: float,
    rounds: int,
    delta_hat: float,
) -> PriRFedPrivacy:
    r"""PriRFed Theorem 4.2 (Sec. 4; :ref:`prirfed-theorem42`): privacy of Algorithm 1.

    Each selected agent's local training is (eps, delta)-DP per call; ``s`` of ``N`` agents are
    sampled without replacement per round (``rho = s / N``); agents within a round are composed
    sequentially (the paper does not use parallel composition); ``T`` rounds are composed by the
    better of sequential and advanced composition::

        eps_tilde   = ln(1 + rho (exp(s eps) - 1))
        delta_tilde = rho s delta
        eps'   = min(T eps_tilde,
                     sqrt(2 T ln(1/delta_hat)) eps_tilde + T eps_tilde (e^eps_tilde - 1))
        delta' = delta_hat + T delta_tilde

    Reproduces all 96 numbers of the paper's Table 1 (:func:`prirfed_table1`). The theorem needs a
    constant ``s_t = s``; ``delta'`` is reported with ``delta_hat`` even when the sequential
    branch wins, as printed.

    Parameters
    ----------
    n_agents : int
        ``N``.
    s : int
        Agents sampled per round (``s <= N``).
    epsilon, delta : float
        Per-call guarantee of each agent's local training.
    rounds : int
        ``T``.
    delta_hat : float
        Slack of the advanced composition.

    Returns
    -------
    PriRFedPrivacy
        ``(eps', delta')`` with the intermediate quantities and the branch of the min.
    """
    n = check_int(n_agents, "n_agents")
    s = check_int(s, "s")
    if s > n:
        raise ValueError(f"argument 's' ({s}) must not exceed n_agents ({n})")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    t = check_int(rounds, "rounds")
    delta_hat = check_delta(delta_hat, "delta_hat")
    rho = s / n
    eps_tilde = _log1p_scaled_expm1(rho, s * epsilon)
    delta_tilde = rho * s * delta
    seq = t * eps_tilde
    # e^eps_tilde overflows a double past ~709.78; the advanced branch is then +inf (the
    # sequential branch wins), reported as such rather than raising OverflowError.
    growth = math.expm1(eps_tilde) if eps_tilde < _EXP_OVERFLOW else math.inf
    adv = math.sqrt(2 * t * math.log(1 / delta_hat)) * eps_tilde + t * eps_tilde * growth
    return PriRFedPrivacy(
        epsilon=min(seq, adv),
        delta=delta_hat + t * delta_tilde,
        eps_tilde=eps_tilde,
        delta_tilde=delta_tilde,
        eps_sequential=seq,
        eps_advanced=adv,
        branch="advanced" if adv < seq else "sequential",
    )


#: The (N, s) rows of PriRFed Table 1 (Sec. 4), in the paper's order.
PRIRFED_TABLE1_SETTINGS = (
    (100, 1),
    (100, 5),
    (200, 1),
    (500, 5),
    (300, 5),
    (300, 10),
    (400, 5),
    (400, 10),
)
#: The T columns of PriRFed Table 1.
PRIRFED_TABLE1_ROUNDS = (50, 100, 200, 300, 400, 500)


def prirfed_table1(
    epsilon: float = 0.15, delta: float = 1e-4, delta_hat: float = 1e-3
) -> dict[tuple[int, int, int], PriRFedPrivacy]:
    """PriRFed Table 1: Theorem 4.2 at (eps, delta) = (0.15, 1e-4), delta_hat = 1e-3.

    Returns ``{(N, s, T): PriRFedPrivacy}`` for the 8 x 6 cells (96 numbers: eps' and delta').
    The paper prints them rounded to 3 significant digits (:func:`round_sig`).

    Parameters
    ----------
    epsilon, delta : float
        Per-call guarantee of each agent's local training (the table's 0.15 and 1e-4).
    delta_hat : float
        Slack of the advanced composition (the table's 1e-3).

    Returns
    -------
    dict
        ``{(N, s, T): PriRFedPrivacy}`` for the rows :data:`PRIRFED_TABLE1_SETTINGS` and the
        columns :data:`PRIRFED_TABLE1_ROUNDS`.
    """
    return {
        (n, s, t): prirfed_privacy(n, s, epsilon, delta, t, delta_hat)
        for n, s in PRIRFED_TABLE1_SETTINGS
        for t in PRIRFED_TABLE1_ROUNDS
    }


def dp_rsgd_sigma(
    epsilon: float,
    delta: float,
    clip: float,
    n_local: int,
    local_steps: int,
    constant: float = 1.0,
) -> float:
    r"""Noise std of DP-RSGD (PriRFed Sec. 5.1, Alg. 2, quoting Han et al. 2024, Thm 1).

    ``sigma_i^2 = o_i K ln(1/delta) tau^2 / (N_i^2 eps^2)``.

    Parameters
    ----------
    epsilon, delta : float
        Per-agent budget of one local-training call.
    clip : float
        Clipping level ``tau`` (per-sample Riemannian norm bound).
    n_local : int
        Local dataset size ``N_i``.
    local_steps : int
        ``K``.
    constant : float
        ``o_i``, "a constant" left unspecified by the paper; the experiments use 1 (the default).

    Returns
    -------
    float
        ``sigma_i``, the std of the tangent noise per step.

    Notes
    -----
    With ``o_i = 1`` this is a heuristic calibration, not a certified guarantee: the moments
    accountant's constant and side conditions are dropped. It does not depend on the batch size
    (:ref:`prirfed-noise-formulas`). Use the certified accountant for a guarantee.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    clip = check_nonneg(clip, "clip")
    n_local = check_int(n_local, "n_local")
    k = check_int(local_steps, "local_steps")
    constant = check_positive(constant, "constant")
    return math.sqrt(constant * k * math.log(1 / delta)) * clip / (n_local * epsilon)


def dp_rsvrg_sigma(
    epsilon: float,
    delta: float,
    clip0: float,
    clip1: float,
    n_local: int,
    local_steps: int,
    inner_steps: int,
    constant: float = 1.0,
) -> float:
    r"""Noise std of DP-RSVRG (PriRFed Sec. 5.2, Alg. 3, citing Utpala et al. 2023).

    ``sigma_i^2 = o~_i m K ln(1/delta) tau^2 / (N_i^2 eps^2)`` with ``tau = max(tau_0, tau_1)``.

    Parameters
    ----------
    epsilon, delta : float
    clip0, clip1 : float
        Clip levels of the snapshot gradient and of the inner steps.
    n_local : int
        ``N_i``.
    local_steps : int
        Outer loops ``K``.
    inner_steps : int
        Update frequency ``m``.
    constant : float
        ``o~_i``; the experiments set it to 1 (Sec. 6).

    Returns
    -------
    float
        ``sigma_i``, the std of the tangent noise per inner step.

    Notes
    -----
    Heuristic calibration with the unspecified constant set to one, as in the paper's
    experiments (:ref:`prirfed-noise-formulas`).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    tau = max(check_nonneg(clip0, "clip0"), check_nonneg(clip1, "clip1"))
    n_local = check_int(n_local, "n_local")
    k = check_int(local_steps, "local_steps")
    m = check_int(inner_steps, "inner_steps")
    constant = check_positive(constant, "constant")
    return math.sqrt(constant * m * k * math.log(1 / delta)) * tau / (n_local * epsilon)


# ---------------------------------------------------------------------- budget split helper
def _largest_budget(epsilon: float, delta_prime: float) -> float:
    """Largest ``S = sum eps_t^2`` with ``sqrt(2 S ln(e + sqrt(S)/delta')) + S <= eps``."""

    def total(s: float) -> float:
        return math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / delta_prime)) + s

    lo, hi = 0.0, epsilon**2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if total(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------- DO-ADP
@dataclasses.dataclass(frozen=True)
class DoAdpNoise:
    """Result of :func:`doadp_sigma` (DO-ADP Theorem 1).

    Attributes
    ----------
    sigma : float
        The noise std of the chosen variant.
    variant : {'paper', 'corrected'}
    sigma_paper : float
        Eq. (7) at equality.
    sigma_floor : float
        ``sqrt(40 (k/d) ln(1.25/delta0)) G``, which makes ``eps_t^2 <= 1/5``
        (:ref:`doadp-horizon-condition`).
    eps_step : float
        Per-step ``eps_t = 2 sqrt(2 (k/d) ln(1.25/delta0)) G / sigma`` (Lemma 1).
    eps_step_amplified : float
        ``eps_t' = 2 p eps_t / q`` as in the proof of Theorem 1 (Sec. IV).
    delta : float
        The delta the theorem leaves as "some constant": ``1 - (1 - sqrt(sum eps_t'^2))
        (1 - p delta0)^T`` (:ref:`doadp-vacuous-delta`); at equality in (7) it is at least
        ``eps / sqrt(5)``.
    t_condition_holds : bool
        Whether ``T >= q^2 eps^2 / (4 p^2)``.
    """

    sigma: float
    variant: str
    sigma_paper: float
    sigma_floor: float
    eps_step: float
    eps_step_amplified: float
    delta: float
    t_condition_holds: bool


def _chain_args(delta0, iterations, n_local, rate, rate_name, bound, bound_name):
    """Validate the arguments shared by DO-ADP's and DP-DDA's proof chains."""
    delta0 = check_delta(delta0, "delta0") if delta0 != 1 else 1.0
    t = check_int(iterations, "iterations")
    q = check_int(n_local, "n_local")
    rate = check_rate(rate, rate_name)
    bound = check_positive(bound, bound_name)
    return delta0, t, q, rate, bound


def _doadp_args(delta0, iterations, n_local, p, k, d, grad_bound):
    delta0, t, q, p, g = _chain_args(delta0, iterations, n_local, p, "p", grad_bound, "grad_bound")
    d = check_int(d, "d")
    k = check_int(k, "k")
    if k > d:
        raise ValueError(f"argument 'k' ({k}) must not exceed d ({d})")
    return delta0, t, q, p, k, d, g


def doadp_sigma(
    epsilon: float,
    delta0: float,
    iterations: int,
    n_local: int,
    p: float,
    k: int,
    d: int,
    grad_bound: float,
    variant: str = "paper",
) -> DoAdpNoise:
    r"""DO-ADP Theorem 1 (Sec. IV; :ref:`doadp-theorem1`): the noise for a target epsilon.

    ``sigma^2 >= 160 k p^2 T ln(1.25/delta0) G^2 / (q^2 d eps^2)``   (7)

    with ``eps in (0, 1]``, the hypothesis ``T >= q^2 eps^2 / (4 p^2)``, ``q`` the local dataset
    size, ``p`` the activation probability, ``k`` of ``d`` coordinates kept by Top-k and ``G``
    the gradient bound (each coordinate clipped to ``G / sqrt(d)``,
    :ref:`doadp-coordinate-clipping`).

    Parameters
    ----------
    epsilon : float
        Target epsilon in (0, 1].
    delta0 : float
        Per-step delta of the Gaussian mechanism, in (0, 1).
    iterations : int
        ``T``.
    n_local : int
        ``q``, each agent's local dataset size.
    p : float
        Activation probability of an agent per iteration.
    k, d : int
        Top-k keeps ``k`` of the ``d`` coordinates.
    grad_bound : float
        ``G``; each coordinate is clipped to ``G / sqrt(d)``.
    variant : {'paper', 'corrected'}
        See Notes.

    Returns
    -------
    DoAdpNoise
        The noise std with the quantities of the proof.

    Notes
    -----
    The two variants:

    ``'paper'``
        Eq. (7) at equality; warns when ``T < q^2 eps^2 / (4 p^2)`` (the experiments violate it,
        :ref:`doadp-horizon-condition`).
    ``'corrected'``
        ``max(eq. 7, 40 (k/d) ln(1.25/delta0) G^2)`` (:ref:`doadp-horizon-condition`): the
        floor enforces directly ``eps_t^2 <= 1/5``, the only use of the T condition, so no
        warning is needed.

    The theorem leaves delta as "some constant"; the returned ``delta`` is the one its proof
    implies (:ref:`doadp-vacuous-delta`), which is at least ``0.447 eps``: vacuous as a DP
    delta. For a small delta use :func:`doadp_sigma_for_delta` (same proof chain, chosen delta)
    or the certified accountant. The Top-k sensitivity argument treats the selected coordinates
    as fixed (:ref:`doadp-topk-data-dependent`).
    """
    epsilon = check_epsilon(epsilon)
    if epsilon > 1:
        raise ValueError(f"argument 'epsilon' must lie in (0, 1] for DO-ADP Thm 1, got {epsilon}")
    check_choice(variant, "variant", ("paper", "corrected"))
    delta0, t, q, p, k, d, g = _doadp_args(delta0, iterations, n_local, p, k, d, grad_bound)
    log_term = math.log(1.25 / delta0)
    sigma_paper = math.sqrt(160 * k * p**2 * t * log_term * g**2 / (q**2 * d * epsilon**2))
    sigma_floor = math.sqrt(40 * (k / d) * log_term) * g
    t_ok = t >= q**2 * epsilon**2 / (4 * p**2)
    if variant == "paper":
        sigma = sigma_paper
        if not t_ok:
            _warn(
                f"DO-ADP Thm 1 needs T >= q^2 eps^2 / (4 p^2) = "
                f"{q**2 * epsilon**2 / (4 * p**2):.4g}, got T = {t}; use variant='corrected' "
                "(noise floor) for a covered sigma"
            )
    else:
        sigma = max(sigma_paper, sigma_floor)
    eps_t = 2 * math.sqrt(2 * (k / d) * log_term) * g / sigma
    eps_t_amp = 2 * p * eps_t / q
    root_s = min(math.sqrt(t) * eps_t_amp, 1.0)
    delta = 1.0 - (1.0 - root_s) * (1.0 - p * delta0) ** t
    return DoAdpNoise(sigma, variant, sigma_paper, sigma_floor, eps_t, eps_t_amp, delta, t_ok)


def doadp_epsilon(
    sigma: float,
    delta0: float,
    iterations: int,
    n_local: int,
    p: float,
    k: int,
    d: int,
    grad_bound: float,
    delta_hat: float,
    per_step_delta: str = "paper",
) -> tuple[float, float]:
    r"""DO-ADP's proof chain (Sec. IV and Appendix A) with a chosen ``delta_hat``.

    Per step, the Gaussian mechanism on the k selected coordinates (Lemma 1,
    ``Delta = 2 G sqrt(k/d)``) is (eps_t, delta0)-DP; activation and sampling amplify it to
    ``eps_t' = ln(1 + p (e^eps_t - 1) / q)`` (Lemma 4, exact form); T steps compose by Lemma 5
    (:func:`heterogeneous_composition`) with ``delta_hat``.

    ``per_step_delta='paper'`` composes with ``p delta0`` as the proof of Theorem 1 does;
    ``'refined'`` with ``p delta0 / q`` as Lemma 4 gives (:ref:`doadp-per-step-delta`).

    Parameters
    ----------
    sigma : float
        Noise std per selected coordinate.
    delta0 : float
        Per-step delta of the Gaussian mechanism, in (0, 1).
    iterations : int
        ``T``.
    n_local : int
        ``q``, each agent's local dataset size.
    p : float
        Activation probability of an agent per iteration.
    k, d : int
        Top-k keeps ``k`` of the ``d`` coordinates.
    grad_bound : float
        ``G``; each coordinate is clipped to ``G / sqrt(d)``.
    delta_hat : float
        Slack of the heterogeneous composition (Lemma 5).
    per_step_delta : {'paper', 'refined'}
        Per-step delta composed (see above).

    Returns
    -------
    (epsilon, delta)
        Warns when ``eps_t >= 1`` (Lemma 1 is proven for eps < 1) or ``eps_t' > 0.9`` (Lemma 5).
    """
    sigma = check_positive(sigma, "sigma")
    delta0, t, q, p, k, d, g = _doadp_args(delta0, iterations, n_local, p, k, d, grad_bound)
    check_choice(per_step_delta, "per_step_delta", ("paper", "refined"))
    eps_t = 2 * math.sqrt(2 * (k / d) * math.log(1.25 / delta0)) * g / sigma
    if eps_t >= 1:
        _warn(
            f"per-step eps_t = {eps_t:.4g} >= 1: the classic Gaussian mechanism (Lemma 1) "
            "is not proven there"
        )
    eps_amp = math.log1p(p * math.expm1(eps_t) / q)
    dstep = p * delta0 if per_step_delta == "paper" else p * delta0 / q
    return heterogeneous_composition(eps_amp, dstep, delta_hat, count=t)


def doadp_sigma_for_delta(
    epsilon: float,
    delta_hat: float,
    delta0: float,
    iterations: int,
    n_local: int,
    p: float,
    k: int,
    d: int,
    grad_bound: float,
) -> float:
    r"""Noise std for a target (epsilon, small delta_hat) by DO-ADP's own chain.

    See :ref:`doadp-vacuous-delta`.

    Uses the proof's linearization ``eps_t' = 2 p eps_t / q`` so that
    ``sum_t eps_t'^2 = 32 p^2 (k/d) T ln(1.25/delta0) G^2 / (q^2 sigma^2) = S``, and takes the
    largest ``S`` with ``sqrt(2 S ln(e + sqrt(S)/delta_hat)) + S <= eps`` (Lemma 5). The total
    delta is ``1 - (1 - delta_hat)(1 - p delta0)^T``. (Theorem 1 as printed is the special case
    ``S = eps^2 / 5`` with ``delta_hat = eps / sqrt(5)``.)

    Parameters
    ----------
    epsilon : float
        Target epsilon.
    delta_hat : float
        Target slack of the composition (a small delta).
    delta0 : float
        Per-step delta of the Gaussian mechanism, in (0, 1).
    iterations : int
        ``T``.
    n_local : int
        ``q``, each agent's local dataset size.
    p : float
        Activation probability of an agent per iteration.
    k, d : int
        Top-k keeps ``k`` of the ``d`` coordinates.
    grad_bound : float
        ``G``; each coordinate is clipped to ``G / sqrt(d)``.

    Returns
    -------
    float
        The noise std per selected coordinate.
    """
    epsilon = check_epsilon(epsilon)
    delta_hat = check_delta(delta_hat, "delta_hat")
    delta0, t, q, p, k, d, g = _doadp_args(delta0, iterations, n_local, p, k, d, grad_bound)
    s = _largest_budget(epsilon, delta_hat)
    sigma = math.sqrt(32 * p**2 * (k / d) * t * math.log(1.25 / delta0) * g**2 / (q**2 * s))
    eps_t = 2 * math.sqrt(2 * (k / d) * math.log(1.25 / delta0)) * g / sigma
    if eps_t**2 > 0.2:
        _warn(
            f"per-step eps_t^2 = {eps_t**2:.4g} > 1/5: the linearization e^x - 1 <= 2x of the "
            "proof does not hold; raise sigma to the floor sqrt(40 (k/d) ln(1.25/delta0)) G"
        )
    return sigma


# ---------------------------------------------------------------------- DPDL
def dpdl_sigma(
    epsilon: float,
    delta: float,
    rounds: int,
    sampling_rate: float,
    alpha: float,
    n_agents: int,
    w_min: float,
    w_max: float,
    n_neighbors: int,
    h: float = 1.0,
    c2: float = 1.0,
    variant: str = "theorem",
    c1: float | None = None,
) -> float:
    r"""DPDL Theorem 1 (Sec. V; :ref:`dpdl-theorem1`): noise multiplier sigma, three printed forms.

    Each version is ``sigma >= A c2 q sqrt(T ln(1/delta)) / (sqrt(N_i / w) eps)``:

    ``variant='theorem'`` (eq. (23), as printed in the theorem; the default)
        ``A = 2/sqrt(w_min) + 15 alpha N / 8 + alpha w_max (h+1)^2 N / (2h)``, ``w = w_max``.
        Dropping ``(1 - w_min)`` and using ``w_max`` in the denominator make it the
        conservative one.
    ``variant='appendix'`` (the final line of Appendix A, the proof of Theorem 1)
        ``A = 2/sqrt(w_min) + 15 alpha (1 - w_min) / 8 + alpha w_max (h+1)^2 N / (2h)``,
        ``w = w_min`` (drops a factor N in the middle term).
    ``variant='derivation'`` (the line before it in Appendix A, times N B / C: consistent)
        The algebraically consistent form,
        ``A = 2/sqrt(w_min) + 15 alpha (1 - w_min) N / 8 + alpha w_max (h+1)^2 N / (2h)``,
        ``w = w_min``.

    Parameters
    ----------
    epsilon, delta : float
    rounds : int
        ``T``.
    sampling_rate : float
        ``q = B / (N min_i |D_i|)``, the paper's "global" rate (N times smaller than an agent's
        local rate ``B / |D_i|``; :ref:`dpdl-sampling-rate`).
    alpha : float
        Calibration weight (1.5 or 2 in the experiments).
    n_agents : int
        ``N``.
    w_min, w_max : float
        Smallest and largest positive mixing weight.
    n_neighbors : int
        ``N_i`` (closed neighbourhood size, including i); use ``min_i N_i`` for a global bound.
    h : float
        The data-dependent ratio of Theorem 1 (>= 1; 1 by default, 2 to be safe; :ref:`dpdl-h`).
    c2 : float
        Unspecified constant of the theorem (default 1, "paper-literal"; the proof's
        constants suggest about 2).
    c1 : float, optional
        The other unspecified constant: if given, ``eps <= c1 q^2 T`` is checked (warning).

    Returns
    -------
    float
        The noise multiplier ``sigma`` of the chosen variant.

    Notes
    -----
    Lemma 1 (moments accountant) also needs ``q < 1/(32 sigma)`` and other preconditions that
    cannot be checked without the constants; the certified accountant with
    :func:`dpdl_noise_multipliers` is the checkable alternative. Only the broadcast model is
    accounted; the cross-gradient messages are not (:ref:`dpdl-accounting`).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    t = check_int(rounds, "rounds")
    q = check_rate(sampling_rate)
    alpha = check_nonneg(alpha, "alpha")
    n = check_int(n_agents, "n_agents")
    w_min = check_rate(w_min, "w_min")
    w_max = check_rate(w_max, "w_max")
    if w_min > w_max:
        raise ValueError(f"argument 'w_min' ({w_min}) must not exceed w_max ({w_max})")
    n_i = check_int(n_neighbors, "n_neighbors")
    h = check_positive(h, "h")
    if h < 1:
        raise ValueError(f"argument 'h' must be >= 1 (h = ratio + 1), got {h}")
    c2 = check_positive(c2, "c2")
    check_choice(variant, "variant", ("theorem", "appendix", "derivation"))
    last = alpha * w_max * (h + 1) ** 2 * n / (2 * h)
    if variant == "theorem":
        a = 2 / math.sqrt(w_min) + 15 * alpha * n / 8 + last
        w = w_max
    elif variant == "appendix":
        a = 2 / math.sqrt(w_min) + 15 * alpha * (1 - w_min) / 8 + last
        w = w_min
    else:
        a = 2 / math.sqrt(w_min) + 15 * alpha * (1 - w_min) * n / 8 + last
        w = w_min
    if c1 is not None and epsilon > check_positive(c1, "c1") * q**2 * t:
        _warn(f"DPDL Thm 1 needs eps <= c1 q^2 T = {c1 * q**2 * t:.4g}, got eps = {epsilon:g}")
    return a * c2 * q * math.sqrt(t * math.log(1 / delta)) / (math.sqrt(n_i / w) * epsilon)


def dpdl_noise_multipliers(sigma: float, mixing: np.ndarray, alpha: float, h: float = 1.0):
    r"""Per-agent effective noise multiplier of DPDL's released aggregate (Appendix A).

    ``z_i = sigma sqrt(sum_{j in N_i} 1/w_ij) / (2/sqrt(w_ii) + 15 alpha (1 - w_ii) N / 8
    + alpha w_ii (h+1)^2 N / (2h))``: the std of the noise in ``g~^i`` (eq. 40) over the
    replace-one sensitivity bound (eq. 53). Derived from the proof (its "equivalent
    noise-multiplier view", consistent with Appendix A's final bound), not printed in the paper;
    feed it to the certified accountant with ``neighboring='replace_one'`` and ``T`` rounds, at
    agent i's own sampling rate ``B / |D_i|``, not the paper's global ``q`` (N times smaller,
    :ref:`dpdl-sampling-rate`): Poisson batches need
    ``method='pld'`` (RDP takes Poisson only with add/remove), fixed-size batches
    ``sampling='without_replacement'`` with ``method='rdp'``.

    Parameters
    ----------
    sigma : float
    mixing : array, shape ``(N, N)``
        Symmetric doubly stochastic mixing matrix with a positive diagonal.
    alpha, h : float

    Returns
    -------
    array, shape ``(N,)``
    """
    sigma = check_nonneg(sigma, "sigma")
    w = check_nonneg_array(mixing, "mixing")
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"argument 'mixing' must be a square matrix, got shape {w.shape}")
    if np.any(np.diag(w) <= 0):
        raise ValueError("argument 'mixing' must be non-negative with a positive diagonal")
    n = w.shape[0]
    alpha = check_nonneg(alpha, "alpha")
    h = check_positive(h, "h")
    inv = np.where(w > 0, 1.0 / np.where(w > 0, w, 1.0), 0.0)
    wii = np.diag(w)
    sens = (
        2 / np.sqrt(wii) + 15 * alpha * (1 - wii) * n / 8 + alpha * wii * (h + 1) ** 2 * n / (2 * h)
    )
    return sigma * np.sqrt(inv.sum(axis=1)) / sens


# ---------------------------------------------------------------------- DP-DDA
@dataclasses.dataclass(frozen=True)
class DpDdaNoise:
    """Result of :func:`dpdda_sigma` (DP-DDA Theorem 1).

    Attributes
    ----------
    sigma : float
    constant : {'paper', 'corrected'}
        32 (as printed) or 160 (what the proof needs, :ref:`dpdda-theorem1-constant`).
    delta_prime : float
        ``sqrt(sum eps_t'^2)``, fixed by the proof: ``eps`` (paper) or ``eps/sqrt(5)``.
    delta : float
        ``1 - (1 - delta') (1 - iota delta0)^T``: the "some constant delta" (vacuous,
        :ref:`dpdda-vacuous-delta`).
    epsilon_proved : float
        What the proof's chain actually yields for this sigma:
        ``sqrt(2 ln(e+1) S) + S`` with ``S = sum eps_t'^2`` (``~1.62 eps + eps^2`` for 32,
        ``<= eps`` for 160).
    t_condition_holds : bool
        Whether ``T >= 5 q^2 eps^2 / (4 iota^2)`` (paper) / ``q^2 eps^2 / (4 iota^2)``
        (corrected) holds.
    """

    sigma: float
    constant: str
    delta_prime: float
    delta: float
    epsilon_proved: float
    t_condition_holds: bool


def dpdda_sigma(
    epsilon: float,
    delta0: float,
    iterations: int,
    n_local: int,
    iota: float,
    lipschitz: float,
    constant: str = "paper",
) -> DpDdaNoise:
    r"""DP-DDA Theorem 1 (Sec. 3.3; :ref:`dpdda-theorem1-constant`): noise for a target epsilon.

    ``sigma^2 >= C iota^2 L^2 T ln(2/delta0) / (q^2 eps^2)`` with ``C = 32`` as printed
    (``constant='paper'``, used by the paper's experiments) or ``C = 160``
    (``constant='corrected'``): with 32 the proof's own chain only yields
    ``~1.62 eps + eps^2``, and it closes at ``eps`` with 160.

    Hypotheses: ``eps in (0, 1]``; ``T >= 5 q^2 eps^2 / (4 iota^2)`` as printed (with 160 the
    proof needs ``T >= q^2 eps^2 / (4 iota^2)``); a warning is emitted when it fails (the
    experiments violate it by orders of magnitude, :ref:`dpdda-horizon-condition`). The
    theorem's delta is "some constant", at least ``eps`` (paper) or ``eps/sqrt(5)``
    (corrected): vacuous (:ref:`dpdda-vacuous-delta`). For a small delta use
    :func:`dpdda_sigma_for_delta` or the certified accountant.

    Parameters
    ----------
    epsilon : float
        Target epsilon in (0, 1].
    delta0 : float
        Per-step delta of the Gaussian mechanism, in (0, 1).
    iterations : int
        ``T``.
    n_local : int
        ``q``, each node's local dataset size.
    iota : float
        Node sampling probability per iteration.
    lipschitz : float
        ``L``, the per-sample Lipschitz constant of the loss.
    constant : {'paper', 'corrected'}
        32 as printed or 160.

    Returns
    -------
    DpDdaNoise
        The noise std with the quantities of the proof.
    """
    epsilon = check_epsilon(epsilon)
    if epsilon > 1:
        raise ValueError(f"argument 'epsilon' must lie in (0, 1] for DP-DDA Thm 1, got {epsilon}")
    check_choice(constant, "constant", ("paper", "corrected"))
    delta0, t, q, iota, lip = _chain_args(
        delta0, iterations, n_local, iota, "iota", lipschitz, "lipschitz"
    )
    c = 32.0 if constant == "paper" else 160.0
    sigma = math.sqrt(c * iota**2 * lip**2 * t * math.log(2 / delta0) / (q**2 * epsilon**2))
    factor = 5.0 if constant == "paper" else 1.0
    t_min = factor * q**2 * epsilon**2 / (4 * iota**2)
    t_ok = t >= t_min
    if not t_ok:
        _warn(
            f"DP-DDA Thm 1 needs T >= {t_min:.4g} ({'5 ' if factor == 5 else ''}q^2 eps^2 / "
            f"(4 iota^2)), got T = {t}: the (eps, delta) guarantee is not covered"
        )
    s = 32 * iota**2 * lip**2 * t * math.log(2 / delta0) / (q**2 * sigma**2)
    delta_prime = math.sqrt(s)
    delta = 1.0 - (1.0 - min(delta_prime, 1.0)) * (1.0 - iota * delta0) ** t
    eps_proved = math.sqrt(2 * math.log(math.e + 1) * s) + s
    return DpDdaNoise(sigma, constant, delta_prime, delta, eps_proved, t_ok)


def dpdda_remark_epsilon(t: int, iterations: int, epsilon: float) -> float:
    """DP-DDA Remark 3.1 eq. (7): after ``t <= T`` iterations, ``sqrt(3t/(5T)) eps + t eps^2/(5T)``.

    Consistent with the corrected constant 160 (:ref:`dpdda-theorem1-constant`).

    Parameters
    ----------
    t : int
        Iterations run, ``0 <= t <= T``.
    iterations : int
        ``T``, the horizon the noise was calibrated for.
    epsilon : float
        The target epsilon of the whole horizon.

    Returns
    -------
    float
        The epsilon spent after ``t`` iterations.
    """
    t = check_int(t, "t", minimum=0)
    big_t = check_int(iterations, "iterations")
    if t > big_t:
        raise ValueError(f"argument 't' ({t}) must not exceed iterations ({big_t})")
    epsilon = check_epsilon(epsilon)
    return math.sqrt(3 * t / (5 * big_t)) * epsilon + t * epsilon**2 / (5 * big_t)


def dpdda_sigma_for_delta(
    epsilon: float,
    delta_prime: float,
    delta0: float,
    iterations: int,
    n_local: int,
    iota: float,
    lipschitz: float,
) -> float:
    r"""Noise std for (epsilon, small delta') by DP-DDA's own chain (:ref:`dpdda-vacuous-delta`).

    Largest ``S`` with ``sqrt(2 S ln(e + sqrt(S)/delta')) + S <= eps``, then
    ``sigma^2 = 32 iota^2 L^2 T ln(2/delta0) / (q^2 S)``. Total delta
    ``1 - (1 - delta')(1 - iota delta0)^T``. Warns when the per-step linearization fails
    (``eps_t^2 > 1/5``).

    Parameters
    ----------
    epsilon : float
        Target epsilon.
    delta_prime : float
        Target slack of the composition (a small delta).
    delta0 : float
        Per-step delta of the Gaussian mechanism, in (0, 1).
    iterations : int
        ``T``.
    n_local : int
        ``q``, each node's local dataset size.
    iota : float
        Node sampling probability per iteration.
    lipschitz : float
        ``L``, the per-sample Lipschitz constant of the loss.

    Returns
    -------
    float
        The noise std.
    """
    epsilon = check_epsilon(epsilon)
    delta_prime = check_delta(delta_prime, "delta_prime")
    delta0, t, q, iota, lip = _chain_args(
        delta0, iterations, n_local, iota, "iota", lipschitz, "lipschitz"
    )
    s = _largest_budget(epsilon, delta_prime)
    sigma = math.sqrt(32 * iota**2 * lip**2 * t * math.log(2 / delta0) / (q**2 * s))
    eps_t = 2 * lip * math.sqrt(2 * math.log(2 / delta0)) / sigma
    if eps_t**2 > 0.2:
        _warn(f"per-step eps_t^2 = {eps_t**2:.4g} > 1/5: the proof's linearization does not hold")
    return sigma


# ---------------------------------------------------------------------- DP-DGT
def dpdgt_epsilon(
    alpha0: float,
    q: float,
    theta_xi0: float,
    q_xi: float,
    theta_zeta0: float,
    q_zeta: float,
    mu: float,
    gamma: float,
    phi: float,
    adjacency_delta: float,
    q_c: float | None = None,
) -> float:
    r"""DP-DGT Corollary 5.14, eq. (38) (Sec. 5; :ref:`dpdgt-theorem`): pure eps-DP, infinite run.

    With ``alpha_k = alpha0 q^k``, ``theta_xi,k = theta_xi0 q_xi^k``,
    ``theta_zeta,k = theta_zeta0 q_zeta^k``::

        eps = alpha0 delta (g + alpha0) / (g (g - alpha0))
              * ( q_xi / (theta_xi0 (q_xi - q)) + phi q_zeta / (theta_zeta0 (q_zeta - q)) ),
        g = gamma phi mu,

    where ``delta`` is the adjacency radius (gradient distance, Def. 2.2), not a DP delta.

    Conditions: ``alpha0 < mu gamma phi`` and ``q < min(q_xi, q_zeta)`` are needed for the
    formula to be a (finite, positive) bound: ``ValueError`` otherwise. ``q > max(q_C, q_xi^2,
    q_zeta^2)`` is needed for convergence only: a warning. This is the paper's value; its
    derivation has algebra slips (:ref:`dpdgt-theorem`), see :func:`dpdgt_epsilon_recursion` for
    the paper's own intermediate bound evaluated numerically (~2.7 % larger on Sec. 6.1).

    Parameters
    ----------
    alpha0, q : float
        Step sizes ``alpha_k = alpha0 q^k``.
    theta_xi0, q_xi, theta_zeta0, q_zeta : float
        Laplace scales ``theta_xi0 q_xi^k`` and ``theta_zeta0 q_zeta^k``.
    mu : float
        Strong convexity modulus of the costs.
    gamma, phi : float
        The paper's contraction constants of the comparison system (32).
    adjacency_delta : float
        Adjacency radius (gradient distance, Def. 2.2), not a DP delta.
    q_c : float, optional
        The convergence condition's rate; when given, ``q > q_c`` is checked (warning).

    Returns
    -------
    float
        The pure-DP epsilon of the infinite run.
    """
    alpha0 = check_positive(alpha0, "alpha0")
    q = check_rate(q, "q")
    theta_xi0 = check_positive(theta_xi0, "theta_xi0")
    theta_zeta0 = check_positive(theta_zeta0, "theta_zeta0")
    q_xi = check_rate(q_xi, "q_xi")
    q_zeta = check_rate(q_zeta, "q_zeta")
    mu = check_positive(mu, "mu")
    gamma = check_rate(gamma, "gamma")
    phi = check_rate(phi, "phi")
    adjacency_delta = check_nonneg(adjacency_delta, "adjacency_delta")
    g = gamma * phi * mu
    if not alpha0 < g:
        raise ValueError(
            f"argument 'alpha0' ({alpha0:g}) must be < mu gamma phi = {g:g} for eq. (38) "
            "(Cor. 5.14); otherwise the bound is negative or infinite"
        )
    if not q < min(q_xi, q_zeta):
        raise ValueError(
            f"argument 'q' ({q:g}) must be < min(q_xi, q_zeta) = {min(q_xi, q_zeta):g}: the step "
            "sizes must decay faster than the noise scale for a finite epsilon"
        )
    lower = max(q_xi**2, q_zeta**2, 0.0 if q_c is None else check_rate(q_c, "q_c"))
    if not q > lower:
        _warn(
            f"DP-DGT Cor. 5.14 needs q > max(q_C, q_xi^2, q_zeta^2) = {lower:.6g} for "
            f"convergence, got q = {q:.6g} (the privacy bound itself is unaffected)"
        )
    front = alpha0 * adjacency_delta * (g + alpha0) / (g * (g - alpha0))
    return front * (q_xi / (theta_xi0 * (q_xi - q)) + phi * q_zeta / (theta_zeta0 * (q_zeta - q)))


def dpdgt_sensitivities(
    alphas: np.ndarray, mu: float, gamma: float, phi: float, adjacency_delta: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""The comparison system (32) of DP-DGT's proof of Theorem 5.12 (Sec. 5).

    ``varphi_{k+1} = (1-gamma) varphi_k + (alpha_k/mu) eta_k + alpha_k delta / mu``,
    ``eta_{k+1} = (2-gamma) varphi_k + (1 - phi + alpha_k/mu) eta_k + alpha_k delta / mu``,
    ``varphi_0 = eta_0 = 0``; they bound the L1 sensitivities ``||Delta s_{i0,k}||_1`` and
    ``||Delta w~_{i0,k}||_1`` of the two messages at iteration ``k``.

    Parameters
    ----------
    alphas : array, shape ``(K,)``
        Step sizes ``alpha_0 .. alpha_{K-1}``.

    Returns
    -------
    (varphi, eta) : arrays, shape ``(K,)``
        Values for ``k = 0 .. K-1``.
    """
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size == 0 or np.any(a < 0) or not np.all(np.isfinite(a)):
        raise ValueError("argument 'alphas' must be a non-empty 1-d array of finite steps >= 0")
    mu = check_positive(mu, "mu")
    gamma = check_rate(gamma, "gamma")
    phi = check_rate(phi, "phi")
    dl = check_nonneg(adjacency_delta, "adjacency_delta")
    # A 2x2 linear recursion with time-varying coefficients: a scalar loop over iterations
    # (not over agents or samples) is the direct evaluation.
    varphi = np.zeros_like(a)
    eta = np.zeros_like(a)
    vp, et = 0.0, 0.0
    for k in range(a.size - 1):
        ak = a[k]
        vp, et = (
            (1 - gamma) * vp + ak / mu * et + ak * dl / mu,
            (2 - gamma) * vp + (1 - phi + ak / mu) * et + ak * dl / mu,
        )
        varphi[k + 1] = vp
        eta[k + 1] = et
    return varphi, eta


def _dpdgt_scales(alphas, theta_xi, theta_zeta) -> tuple[np.ndarray, np.ndarray]:
    """Laplace scale sequences: finite, > 0 (0 means no privacy), one per step size."""
    shape = np.shape(alphas)
    out = []
    for name, theta in (("theta_xi", theta_xi), ("theta_zeta", theta_zeta)):
        th = check_nonneg_array(theta, name)
        if th.shape != shape:
            raise ValueError(
                f"argument '{name}' must have the shape of 'alphas' {shape}, got {th.shape}"
            )
        if np.any(th == 0):
            raise ValueError(f"argument '{name}' must be > 0 everywhere (0 means no privacy)")
        out.append(th)
    return out[0], out[1]


def dpdgt_epsilon_recursion(
    alphas: np.ndarray,
    theta_xi: np.ndarray,
    theta_zeta: np.ndarray,
    mu: float,
    gamma: float,
    phi: float,
    adjacency_delta: float,
) -> float:
    r"""DP-DGT's likelihood-ratio bound evaluated numerically (:ref:`dpdgt-theorem`).

    ``eps = sum_k varphi_k / theta_xi,k + eta_k / theta_zeta,k`` over the iterations run, with
    (varphi, eta) from :func:`dpdgt_sensitivities` (the proof's step before eqs. 36-37). This is
    the paper's own bound without the algebra slips of (36)-(38); on Sec. 6.1's setting it is
    about 2.7 % above eq. (38). Pure eps-DP (delta = 0) for a run of ``len(alphas)`` iterations.

    Parameters
    ----------
    alphas : array, shape ``(K,)``
        Step sizes ``alpha_0 .. alpha_{K-1}``.
    theta_xi, theta_zeta : array, shape ``(K,)``
        Laplace scales of the two released variables at each iteration.
    mu : float
        Strong convexity modulus of the costs.
    gamma, phi : float
        The paper's contraction constants of the comparison system (32).
    adjacency_delta : float
        Adjacency radius (gradient distance, Def. 2.2), not a DP delta.

    Returns
    -------
    float
        The pure-DP epsilon of the iterations run.
    """
    th_x, th_z = _dpdgt_scales(alphas, theta_xi, theta_zeta)
    varphi, eta = dpdgt_sensitivities(alphas, mu, gamma, phi, adjacency_delta)
    return float(np.sum(varphi / th_x) + np.sum(eta / th_z))


def dpdgt_laplace_events(
    alphas: np.ndarray,
    theta_xi: np.ndarray,
    theta_zeta: np.ndarray,
    mu: float,
    gamma: float,
    phi: float,
    adjacency_delta: float,
) -> list[tuple[EventSpec, int]]:
    """DP-DGT's releases as Laplace events for the certified accountant.

    Iteration ``k`` releases ``s_{i0,k} + xi`` and ``w~_{i0,k} + zeta`` with L1 sensitivities
    ``varphi_k`` and ``eta_k`` (:func:`dpdgt_sensitivities`), so each is a Laplace mechanism with
    noise multiplier ``theta / sensitivity``. Iterations with zero sensitivity cost nothing and
    are skipped. Compose with ``method='rdp'`` (the relation only enters through the
    sensitivity: DP-DGT's adjacency is a change of one agent's cost function).

    Parameters
    ----------
    alphas : array, shape ``(K,)``
        Step sizes ``alpha_0 .. alpha_{K-1}``.
    theta_xi, theta_zeta : array, shape ``(K,)``
        Laplace scales of the two released variables at each iteration.
    mu : float
        Strong convexity modulus of the costs.
    gamma, phi : float
        The paper's contraction constants of the comparison system (32).
    adjacency_delta : float
        Adjacency radius (gradient distance, Def. 2.2), not a DP delta.

    Returns
    -------
    list of (EventSpec, int)
        Each distinct Laplace event with its number of releases.
    """
    th_x, th_z = _dpdgt_scales(alphas, theta_xi, theta_zeta)
    varphi, eta = dpdgt_sensitivities(alphas, mu, gamma, phi, adjacency_delta)
    events: dict[EventSpec, int] = {}
    for sens, theta in ((varphi, th_x), (eta, th_z)):
        for s_k, th_k in zip(sens, theta, strict=True):
            if s_k > 0:
                spec = EventSpec.make("laplace", float(th_k / s_k))
                events[spec] = events.get(spec, 0) + 1
    return list(events.items())
