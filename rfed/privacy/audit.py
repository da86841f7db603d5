r"""Empirical privacy auditing: a statistical lower bound on the epsilon a mechanism spends.

An audit runs the mechanism many times on two neighbouring datasets ``D0`` and ``D1`` (they
differ in one record, the *canary*), reduces each run's output to a scalar statistic (a score),
and tries to tell the two apart with a threshold test ``score > t`` (or ``score < t``). If the
mechanism is :math:`(\epsilon, \delta)`-DP, every test has (Kairouz, Oh and Viswanath 2015)

.. math:: \mathrm{FPR} + e^{\epsilon} \mathrm{FNR} \ge 1 - \delta, \qquad
          \mathrm{FNR} + e^{\epsilon} \mathrm{FPR} \ge 1 - \delta,

so a test's error rates certify

.. math:: \epsilon \ge \max\left(\log\frac{1 - \delta - \mathrm{FNR}}{\mathrm{FPR}},\;
          \log\frac{1 - \delta - \mathrm{FPR}}{\mathrm{FNR}}\right).

The rates are only estimated; the audit replaces them by Clopper-Pearson upper confidence
bounds, as in Jagielski, Ullman and Oprea (NeurIPS 2020) and Nasr, Song, Thakurta, Papernot and
Carlini (IEEE S&P 2021), so the returned ``epsilon_lower`` is a lower bound on the true epsilon
with probability at least ``confidence`` (over the trials' randomness). The threshold and the
direction of the test are chosen on a held-out part of the trials, so the bound evaluated on the
rest stays valid (choosing them on the same trials would bias the rates down).

A lower bound above the epsilon an accountant certifies for the same mechanism proves the
accounting (or the implementation) wrong; a lower bound below it proves nothing by itself, but
an audit that catches a deliberately under-noised variant shows the test has power.

Entry points
------------
:func:`epsilon_lower_bound`
    From two arrays of scores.
:func:`audit`
    From a batched trial runner ``run_trials(neighbour, n, rng) -> scores``.
:func:`replace_record`, :func:`canary_gradient_direction`, :func:`tangent_statistic`
    Neighbouring datasets with a canary record for :mod:`rfed.problems`' dict-of-arrays data,
    and the statistic "inner product of the released update with the canary's clipped gradient
    difference".
:class:`AuditConfiguration`, :func:`gaussian_configuration`
    A runnable audit (trial runner, certified epsilon, description), and the one of the
    Gaussian mechanism. The audits of rfed's algorithms and the ``rfed audit NAME`` command
    are :mod:`rfed.experiments.audits`.

Example
-------
>>> import numpy as np
>>> from rfed.privacy.audit import audit
>>> def run_trials(neighbour, n, rng):   # Gaussian mechanism, sensitivity 1, sigma 1
...     return neighbour + rng.standard_normal(n)
>>> res = audit(run_trials, 20000, 1e-5, rng=np.random.default_rng(0))
>>> 0.0 < res.epsilon_lower < 4.4   # exact epsilon of this mechanism at delta 1e-5: about 4.4
True

References
----------
* Matthew Jagielski, Jonathan Ullman and Alina Oprea. Auditing Differentially Private Machine
  Learning: How Private is Private SGD?. Advances in Neural Information Processing Systems 33
  (NeurIPS), 2020. arXiv:2006.07709.
* Milad Nasr, Shuang Song, Abhradeep Thakurta, Nicolas Papernot and Nicholas Carlini. Adversary
  Instantiation: Lower Bounds for Differentially Private Machine Learning. IEEE Symposium on
  Security and Privacy (S&P), 2021. arXiv:2101.04535.
* C. J. Clopper and E. S. Pearson. The Use of Confidence or Fiducial Limits Illustrated in the
  Case of the Binomial. Biometrika 26(4), 1934.
* Peter Kairouz, Sewoong Oh and Pramod Viswanath. The Composition Theorem for Differential
  Privacy. Proceedings of the 32nd International Conference on Machine Learning (ICML), 2015.
  arXiv:1311.0776.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy import stats  # type: ignore[import-untyped]

from rfed.privacy._checks import check_delta, check_int, check_real

__all__ = [
    "AuditConfiguration",
    "AuditResult",
    "audit",
    "canary_gradient_direction",
    "clopper_pearson",
    "epsilon_lower_bound",
    "gaussian_configuration",
    "gaussian_pair_delta",
    "gaussian_pair_epsilon",
    "replace_record",
    "tangent_statistic",
]


# ---------------------------------------------------------------------- statistics
def clopper_pearson(
    successes: int | np.ndarray, trials: int | np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""One-sided Clopper-Pearson bounds on a binomial proportion.

    With ``k`` successes out of ``n`` trials and level :math:`\gamma = ` ``confidence``:

    .. math:: p_{lo} = \mathrm{Beta}^{-1}(1 - \gamma;\, k, n - k + 1), \qquad
              p_{hi} = \mathrm{Beta}^{-1}(\gamma;\, k + 1, n - k),

    with :math:`p_{lo} = 0` for ``k = 0`` and :math:`p_{hi} = 1` for ``k = n``. Each bound
    alone holds with probability at least ``confidence`` (exact, conservative coverage).

    Parameters
    ----------
    successes : int or int array
        ``k``, in ``[0, n]``.
    trials : int or int array
        ``n >= 1``; broadcast against ``successes``.
    confidence : float
        In (0, 1).

    Returns
    -------
    lower, upper : float arrays, broadcast shape of the inputs
    """
    gamma = _check_confidence(confidence)
    k = np.asarray(successes)
    n = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise TypeError("arguments 'successes' and 'trials' must be integers")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("arguments must satisfy 0 <= successes <= trials and trials >= 1")
    k, n = np.broadcast_arrays(k.astype(float), n.astype(float))
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(1.0 - gamma, np.maximum(k, 1), n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(gamma, k + 1, np.maximum(n - k, 1)), 1.0)
    return lower, upper


def _check_confidence(confidence: Any) -> float:
    c = check_real(confidence, "confidence")
    if not 0.0 < c < 1.0:
        raise ValueError(f"argument 'confidence' must lie in the open interval (0, 1), got {c!r}")
    return c


def _epsilon_from_rates(fpr: np.ndarray, fnr: np.ndarray, delta: float) -> np.ndarray:
    """``max(log((1-delta-FNR)/FPR), log((1-delta-FPR)/FNR), 0)``, elementwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where((1.0 - delta - fnr > 0) & (fpr > 0), np.log((1.0 - delta - fnr) / fpr), 0.0)
        b = np.where((1.0 - delta - fpr > 0) & (fnr > 0), np.log((1.0 - delta - fpr) / fnr), 0.0)
    return np.maximum(np.maximum(a, b), 0.0)


def _scores(name: str, scores: Any) -> np.ndarray:
    arr = np.asarray(scores, dtype=float)
    if arr.ndim != 1 or arr.size < 4:
        raise ValueError(f"argument '{name}' must be a 1-d array of >= 4 scores, got shape "
                         f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"argument '{name}' contains NaN or inf")
    return arr


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The outcome of an audit.

    Attributes
    ----------
    epsilon_lower : float
        With probability at least ``confidence``, the mechanism is not
        ``(epsilon, delta)``-DP for any ``epsilon < epsilon_lower`` (0 when nothing is shown).
    confidence : float
        Joint confidence of the two Clopper-Pearson bounds (union bound: each one-sided bound
        is taken at level ``1 - (1 - confidence) / 2``).
    delta : float
    threshold : float
        The test's threshold (chosen on the held-out trials, or given).
    fpr, fnr : float
        Empirical false positive rate (a ``D0`` trial called ``D1``) and false negative rate on
        the evaluation trials.
    n_trials : int
        Evaluation trials per neighbour (the held-out ones excluded).
    fpr_upper, fnr_upper : float
        The Clopper-Pearson upper bounds that entered ``epsilon_lower``.
    direction : int
        ``+1``: the test says ``D1`` when ``score > threshold``; ``-1``: when ``score < threshold``.
    n_heldout : int
        Trials per neighbour used to choose the threshold.
    """

    epsilon_lower: float
    confidence: float
    delta: float
    threshold: float
    fpr: float
    fnr: float
    n_trials: int
    fpr_upper: float
    fnr_upper: float
    direction: int
    n_heldout: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields.

        Returns
        -------
        dict of str to JSON values
        """
        return dataclasses.asdict(self)


def _rates(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray, direction: int):
    """Error counts of the test ``direction * score > direction * t`` for every threshold."""
    t = np.asarray(thresholds, dtype=float)
    if direction > 0:
        fp = s0.size - np.searchsorted(np.sort(s0), t, side="right")  # s0 > t
        fn = np.searchsorted(np.sort(s1), t, side="right")  # s1 <= t
    else:
        fp = np.searchsorted(np.sort(s0), t, side="left")  # s0 < t
        fn = s1.size - np.searchsorted(np.sort(s1), t, side="left")  # s1 >= t
    return fp, fn


def epsilon_lower_bound(
    scores_0: np.ndarray,
    scores_1: np.ndarray,
    delta: float,
    *,
    confidence: float = 0.95,
    threshold: float | None = None,
    direction: int | None = None,
    n_thresholds: int = 200,
    heldout_fraction: float = 0.5,
) -> AuditResult:
    r"""Epsilon lower bound from scores of trials on neighbouring datasets ``D0`` and ``D1``.

    The test says "``D1``" when ``direction * score > direction * threshold``. Unless
    ``threshold`` is given, the first ``heldout_fraction`` of each array is held out: on it,
    ``n_thresholds`` candidate thresholds (quantiles of the pooled held-out scores) and both
    directions are tried, and the pair maximizing the same Clopper-Pearson bound is kept. On
    the remaining trials, with ``k0`` false positives out of ``n0`` and ``k1`` false negatives
    out of ``n1``, one-sided upper bounds at level ``1 - (1 - confidence) / 2`` each
    (:func:`clopper_pearson`; jointly at level ``confidence``) give

    .. math:: \epsilon_{lb} = \max\left(\log\frac{1-\delta-\overline{FNR}}{\overline{FPR}},\;
              \log\frac{1-\delta-\overline{FPR}}{\overline{FNR}},\; 0\right).

    Parameters
    ----------
    scores_0, scores_1 : array, shape ``(n0,)`` and ``(n1,)``
        The statistic of independent trials on ``D0`` and on ``D1``; finite.
    delta : float
        The delta of the claim under audit, in (0, 1).
    confidence : float
        In (0, 1).
    threshold : float, optional
        A fixed threshold (chosen independently of these scores); then no trial is held out.
    direction : {+1, -1}, optional
        With ``threshold``: the test's direction (default +1). Ignored otherwise.
    n_thresholds : int
        Candidate thresholds tried on the held-out trials.
    heldout_fraction : float
        Fraction of each array used to choose the threshold, in (0, 1).

    Returns
    -------
    AuditResult
    """
    s0 = _scores("scores_0", scores_0)
    s1 = _scores("scores_1", scores_1)
    delta = check_delta(delta)
    gamma = _check_confidence(confidence)
    per_bound = 1.0 - (1.0 - gamma) / 2.0
    n_thresholds = check_int(n_thresholds, "n_thresholds")
    if threshold is None:
        frac = check_real(heldout_fraction, "heldout_fraction")
        if not 0.0 < frac < 1.0:
            raise ValueError(f"argument 'heldout_fraction' must lie in (0, 1), got {frac!r}")
        h0, h1 = max(1, int(frac * s0.size)), max(1, int(frac * s1.size))
        sel0, s0 = s0[:h0], s0[h0:]
        sel1, s1 = s1[:h1], s1[h1:]
        pooled = np.concatenate([sel0, sel1])
        cand = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]))
        best = (-1.0, 0.0, 1)
        for d in (1, -1):
            fp, fn = _rates(sel0, sel1, cand, d)
            _, fpr_hi = clopper_pearson(fp, sel0.size, per_bound)
            _, fnr_hi = clopper_pearson(fn, sel1.size, per_bound)
            eps = _epsilon_from_rates(fpr_hi, fnr_hi, delta)
            i = int(np.argmax(eps))
            if eps[i] > best[0]:
                best = (float(eps[i]), float(cand[i]), d)
        _, t, d = best
        n_heldout = h0
    else:
        t = check_real(threshold, "threshold")
        d = 1 if direction is None else direction
        if d not in (1, -1):
            raise ValueError(f"argument 'direction' must be +1 or -1, got {direction!r}")
        n_heldout = 0
    fp, fn = _rates(s0, s1, np.array([t]), d)
    _, fpr_hi = clopper_pearson(fp, s0.size, per_bound)
    _, fnr_hi = clopper_pearson(fn, s1.size, per_bound)
    epsilon_lower = float(_epsilon_from_rates(fpr_hi, fnr_hi, delta)[0])
    return AuditResult(
        epsilon_lower=epsilon_lower,
        confidence=gamma,
        delta=delta,
        threshold=float(t),
        fpr=float(fp[0] / s0.size),
        fnr=float(fn[0] / s1.size),
        n_trials=int(s0.size),
        fpr_upper=float(fpr_hi[0]),
        fnr_upper=float(fnr_hi[0]),
        direction=int(d),
        n_heldout=int(n_heldout),
    )


def audit(
    run_trials: Callable[[int, int, Any], np.ndarray],
    n_trials: int,
    delta: float,
    *,
    confidence: float = 0.95,
    rng: Any,
    chunk_size: int | None = None,
    **kwargs: Any,
) -> AuditResult:
    """Run ``n_trials`` trials on each neighbour and return :func:`epsilon_lower_bound`.

    Parameters
    ----------
    run_trials : callable ``(neighbour, n, rng) -> array of shape (n,)``
        Runs ``n`` independent trials of the mechanism on dataset ``neighbour`` (0 for ``D0``,
        1 for ``D1``) with randomness from ``rng`` and returns each trial's statistic; batched
        (trials as the leading axis of the arrays), not a Python loop over trials.
    n_trials : int
        Trials per neighbour (half of them choose the threshold).
    delta : float
    confidence : float
    rng : numpy.random.Generator or rfed.privacy.secure.SecureRandom
        Passed to ``run_trials``.
    chunk_size : int, optional
        Run the trials in chunks of this many (bounds memory); all at once by default.
    **kwargs
        Passed to :func:`epsilon_lower_bound` (``n_thresholds``, ``heldout_fraction``).

    Returns
    -------
    AuditResult
        The audited lower bound on epsilon at ``confidence``, with the threshold and error
        rates it rests on.
    """
    n_trials = check_int(n_trials, "n_trials", minimum=4)
    chunk = n_trials if chunk_size is None else check_int(chunk_size, "chunk_size")
    if rng is None:
        raise TypeError("argument 'rng' must be a numpy.random.Generator or SecureRandom, got None")

    def scores(neighbour: int) -> np.ndarray:
        parts = []
        for start in range(0, n_trials, chunk):
            n = min(chunk, n_trials - start)
            out = np.asarray(run_trials(neighbour, n, rng), dtype=float)
            if out.shape != (n,):
                raise ValueError(
                    f"run_trials({neighbour}, {n}, rng) returned shape {out.shape}; expected ({n},)"
                )
            parts.append(out)
        return np.concatenate(parts)

    return epsilon_lower_bound(scores(0), scores(1), delta, confidence=confidence, **kwargs)


# ---------------------------------------------------------------------- exact pair epsilon
def gaussian_pair_delta(epsilon: float, shift: float, sigma_0: float, sigma_1: float,
                        dim: int) -> float:
    r"""The larger hockey-stick divergence of ``P = N(0, s0^2 I_d)`` and ``Q = N(m, s1^2 I_d)``.

    ``delta(epsilon) = max(E_P[(1 - e^{eps - L})_+], E_Q[(1 - e^{eps + L})_+])`` with the
    privacy loss :math:`L = \log p / q`, ``|m| = shift``: the smallest ``delta`` for which the
    two output laws are ``(epsilon, delta)``-indistinguishable in both directions. With equal
    variances it is the Gaussian mechanism's privacy profile (Balle and Wang, "Improving the
    Gaussian mechanism for differential privacy", ICML 2018, Thm 8) at ``mu = shift / s``; with
    unequal variances ``L = a |y - c|^2 + K`` is a quadric, and each probability is that of a
    noncentral chi-square with ``d`` degrees of freedom.

    Parameters
    ----------
    epsilon : float
        ``>= 0``.
    shift : float
        ``|m|``, the distance between the two means (Euclidean, in orthonormal coordinates of
        the ``d``-dimensional space the noise lives in), ``>= 0``.
    sigma_0, sigma_1 : float
        The two noise standard deviations, ``> 0``.
    dim : int
        ``d``, the number of noisy coordinates.

    Returns
    -------
    float
    """
    eps = check_real(epsilon, "epsilon")
    shift = check_real(shift, "shift")
    s0, s1 = check_real(sigma_0, "sigma_0"), check_real(sigma_1, "sigma_1")
    dim = check_int(dim, "dim")
    if not (eps >= 0 and shift >= 0 and s0 > 0 and s1 > 0 and np.isfinite([eps, shift, s0, s1])
            .all()):
        raise ValueError("arguments must satisfy epsilon >= 0, shift >= 0, sigma_0 > 0, "
                         "sigma_1 > 0 (all finite)")
    return max(_hockey_stick(eps, shift, s0, s1, dim), _hockey_stick(eps, shift, s1, s0, dim))


def _hockey_stick(eps: float, shift: float, s0: float, s1: float, dim: int) -> float:
    """``P[L > eps] - e^eps Q[L > eps]`` for ``P = N(0, s0^2 I)``, ``Q = N(m, s1^2 I)``."""
    if s0 == s1:
        if shift == 0.0:
            return 0.0
        mu = shift / s0
        return float(stats.norm.cdf(mu / 2 - eps / mu)
                     - np.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu))
    # L(y) = d log(s1/s0) - |y|^2 / (2 s0^2) + |y - m|^2 / (2 s1^2) = a |y - c|^2 + K
    a = 1.0 / (2 * s1 * s1) - 1.0 / (2 * s0 * s0)
    c = shift / (2 * a * s1 * s1)                     # c = m / (2 a s1^2), along m
    k = dim * np.log(s1 / s0) - a * c * c + shift * shift / (2 * s1 * s1)
    t = (eps - k) / a                                 # L > eps  <=>  a |y - c|^2 > a t

    def prob(scale: float, centre: float) -> float:
        """P[a |y - c|^2 > a t] for y ~ N(centre e, scale^2 I)."""
        nc = (centre - c) ** 2 / (scale * scale)
        law = stats.chi2(dim) if nc == 0 else stats.ncx2(dim, nc)
        if a > 0:
            return 1.0 if t <= 0 else float(law.sf(t / (scale * scale)))
        return 0.0 if t <= 0 else float(law.cdf(t / (scale * scale)))

    return max(0.0, prob(s0, 0.0) - float(np.exp(eps)) * prob(s1, shift))


def gaussian_pair_epsilon(shift: float, sigma_0: float, sigma_1: float, dim: int,
                          delta: float) -> float:
    """Exact epsilon at ``delta`` of ONE pair of isotropic Gaussian outputs (both directions).

    The two laws are ``N(m0, s0^2 I_d)`` and ``N(m1, s1^2 I_d)`` with ``|m0 - m1| = shift``:
    the outputs of a Gaussian release on two neighbouring datasets. Their exact epsilon is a
    LOWER bound on the epsilon of the mechanism (a sup over all neighbouring pairs), so a
    certified epsilon below it is wrong. The smallest ``epsilon >= 0`` with
    :func:`gaussian_pair_delta` at most ``delta``, by bisection to a relative ``1e-10``.

    Parameters
    ----------
    shift : float
        ``|m0 - m1|`` in orthonormal coordinates (e.g. the Riemannian norm of the difference of
        two released tangent vectors at the same point).
    sigma_0, sigma_1 : float
        The two noise standard deviations (per coordinate).
    dim : int
        The number of noisy coordinates (``manifold.dim`` for a tangent release).
    delta : float
        In (0, 1).

    Returns
    -------
    float
    """
    delta = check_delta(delta)

    def over(eps: float) -> bool:
        return gaussian_pair_delta(eps, shift, sigma_0, sigma_1, dim) > delta

    if not over(0.0):
        return 0.0
    hi = 1.0
    while over(hi):
        hi *= 2.0
        if hi > 1e6:
            return float("inf")
    lo = 0.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if over(mid) else (lo, mid)
    return hi


# ---------------------------------------------------------------------- canaries
def replace_record(
    data: Mapping[str, np.ndarray], agent: int, index: int, record: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """A copy of ``data`` with row ``index`` of ``agent`` replaced by ``record``.

    ``data`` is the dict-of-arrays layout of :class:`rfed.problems.base.Problem` (every array of
    shape ``(n_agents, n_max, ...)``); replacing one record gives the replace-one neighbour.

    Parameters
    ----------
    data : mapping of str to array, each ``(n_agents, n_max, ...)``
    agent, index : int
        Which record (``index`` must be a valid, non-padding row of that agent: the caller knows
        the counts; it is checked against ``n_max``).
    record : mapping of str to array
        One value per key of ``data``, each of shape ``data[key].shape[2:]``. Every key must be
        given (derived columns, such as SpherePCA's squared norms, included), so that no stale
        value of the old record survives.

    Returns
    -------
    dict of str to array
        New arrays; ``data`` is not modified.
    """
    if not data:
        raise ValueError("argument 'data' must hold at least one array")
    missing = set(data) - set(record)
    extra = set(record) - set(data)
    if missing or extra:
        raise ValueError(
            f"argument 'record' must give exactly the keys of 'data' {sorted(data)}; missing "
            f"{sorted(missing)}, unknown {sorted(extra)}"
        )
    n_agents, n_max = np.shape(next(iter(data.values())))[:2]
    agent = check_int(agent, "agent", minimum=0)
    index = check_int(index, "index", minimum=0)
    if agent >= n_agents or index >= n_max:
        raise ValueError(
            f"arguments 'agent'={agent} and 'index'={index} must lie in [0, {n_agents}) and "
            f"[0, {n_max})"
        )
    out = {}
    for key, arr in data.items():
        arr = np.array(arr, copy=True)
        value = np.asarray(record[key], dtype=arr.dtype)
        if value.shape != arr.shape[2:]:
            raise ValueError(
                f"record['{key}'] has shape {value.shape}; expected {arr.shape[2:]}"
            )
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            raise ValueError(f"record['{key}'] contains NaN or inf")
        arr[agent, index] = value
        out[key] = arr
    return out


def canary_gradient_direction(
    problem: Any,
    x: np.ndarray,
    record_0: Mapping[str, Any],
    record_1: Mapping[str, Any],
    clip: float,
) -> tuple[np.ndarray, float]:
    r"""Unit tangent direction of the change a canary makes to a clipped gradient sum at ``x``.

    With :math:`g_k = \mathrm{clip}_\tau(\mathrm{grad} f(x; r_k))` the clipped per-sample
    gradients of the two records (``D0`` holds ``record_0``, ``D1`` holds ``record_1``), returns
    :math:`u = (g_1 - g_0) / \|g_1 - g_0\|_x` and :math:`\|g_1 - g_0\|_x` (at most
    :math:`2\tau`; equal to it for the worst-case pair of opposite clipped gradients). The
    inner product of a released (noised) gradient step with ``u`` is the statistic of a linear
    likelihood-ratio test for a Gaussian mechanism.

    Parameters
    ----------
    problem : rfed.problems.base.Problem
    x : array, ``point_shape``
        The (public) point where the gradient is taken.
    record_0, record_1 : mapping of str to array
        One record each, with the keys of ``problem.data`` (shapes ``data[key].shape[2:]``).
    clip : float
        Clipping level :math:`\tau > 0`.

    Returns
    -------
    direction : array, ``point_shape``
    norm : float
    """
    from rfed.privacy.clipping import clip_by_norm

    x = np.asarray(x, dtype=float)
    batch = {
        key: np.stack([np.asarray(record_0[key]), np.asarray(record_1[key])])[None]
        for key in problem.data
    }
    g = problem.sample_rgrad(x[None], batch)  # (1, 2, *point_shape)
    clipped, _ = clip_by_norm(problem.manifold, x[None], g, clip)
    diff = clipped[0, 1] - clipped[0, 0]
    norm = float(problem.manifold.norm(x, diff))
    if not norm > 0:
        raise ValueError("the two records have the same clipped gradient at x; no canary signal")
    return diff / norm, norm


def tangent_statistic(manifold: Any, x: np.ndarray, released: np.ndarray,
                      direction: np.ndarray) -> np.ndarray:
    """``<released_i, direction>_x`` for a batch of released tangent vectors at ``x``.

    Parameters
    ----------
    manifold : Manifold
    x : array, ``point_shape`` (or broadcastable batch)
    released : array, ``(n_trials, *point_shape)``
    direction : array, ``point_shape``

    Returns
    -------
    array, shape ``(n_trials,)``
    """
    return np.asarray(manifold.inner(x, released, direction), dtype=float)


# ---------------------------------------------------------------------- named configurations
@dataclasses.dataclass(frozen=True)
class AuditConfiguration:
    """A runnable audit: the trial runner, the certified epsilon and a description.

    Attributes
    ----------
    run_trials : callable
        ``run_trials(neighbour, n, rng) -> scores``, shape ``(n,)``: ``n`` runs of the
        mechanism on ``D0`` (``neighbour = 0``) or ``D1`` (``1``), each reduced to a score
        (see :func:`audit`).
    certified_epsilon : callable
        ``certified_epsilon(delta) -> float``: the epsilon the certified accountant reports.
    description : str
        The mechanism, its parameters and any deliberate breakage, in words.
    method : str
        The accountant's method (``"pld"``, ``"rdp"``, ``"auto"``).
    """

    run_trials: Callable[[int, int, Any], np.ndarray]
    certified_epsilon: Callable[[float], float]
    description: str
    method: str


def gaussian_configuration(sigma: float, noise_factor: float = 1.0,
                           secure: bool = False) -> AuditConfiguration:
    """The scalar Gaussian mechanism ``f(D) + N(0, sigma^2)``, ``f(D0) = 0``, ``f(D1) = 1``,
    certified under add/remove-one.

    Parameters
    ----------
    sigma : float
        The noise standard deviation the ledger records (sensitivity 1).
    noise_factor : float
        Run with noise this many times smaller than recorded (a broken variant, > 1).
    secure : bool
        Release with the discrete Gaussian on a grid (:mod:`rfed.privacy.secure`), certified
        with RDP.

    Returns
    -------
    AuditConfiguration
    """
    from rfed.privacy.accountants import CertifiedAccountant

    sensitivity = 1.0
    if secure:
        from rfed.privacy.mechanisms import release_sensitivity
        from rfed.privacy.secure import SecureRandom

        sensitivity = float(release_sensitivity(sensitivity, 1, SecureRandom()))
    # secure mode is certified through RDP (the discrete Gaussian's Renyi divergence is at most
    # the continuous one's); the PLD accountant models the continuous Gaussian only
    method = "rdp" if secure else "pld"
    acc = CertifiedAccountant(method, "add_remove_one", pld_discretization=1e-4)
    acc.add_gaussian(sigma / sensitivity, sampling="none")

    def run_trials(neighbour: int, n: int, rng: Any) -> np.ndarray:
        value = np.full(n, float(neighbour))
        if secure:
            from rfed.privacy.mechanisms import gaussian_release

            return gaussian_release(value, sigma / noise_factor, rng)
        return value + (sigma / noise_factor) * rng.standard_normal(n)

    label = "secure (discrete Gaussian on a grid)" if secure else "floating-point"
    broken = f"; BROKEN: actual noise {noise_factor:g}x smaller" if noise_factor != 1 else ""
    desc = (f"Gaussian mechanism, sensitivity 1, sigma {sigma:g} recorded in the ledger, "
            f"{label}{broken}")
    return AuditConfiguration(run_trials, acc.epsilon, desc, acc.method)
