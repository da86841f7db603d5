"""Certified privacy accountants built on Google's dp-accounting 0.6 (RDP and PLD).

An accountant composes the privacy events the code actually performs and answers
``epsilon(delta)`` and ``delta(epsilon)``. Two numerical methods:

* ``'rdp'``: Renyi DP (Mironov 2017; Poisson-subsampled Gaussian of Mironov, Talwar and Zhang
  2019; sampling without replacement of Wang, Balle and Kasiviswanathan 2019, Thm 27), converted
  to (epsilon, delta) by dp-accounting's ``compute_epsilon``. Fast, slightly loose. The curves
  of the Gaussian events are the bounds dp-accounting uses, evaluated by
  :mod:`rfed.privacy._rdp` (vectorized: ~20x faster without replacement; the forward
  differences of Thm 27 are integrated where dp-accounting's repeated subtraction loses its
  digits, noise multipliers above ~5); the Laplace mechanism's by :func:`_laplace_rdp_curve`,
  dp-accounting's own arithmetic (the same ``math`` calls in the same order, so the same bits;
  tests/privacy/test_laplace_rdp.py compares them with ``==``) without its per-order call.
* ``'pld'``: privacy loss distributions (Meiser-Mohammadi 2018, Koskela et al. 2020, Doroshenko
  et al. 2022) with pessimistic discretization: the reported epsilon is an upper bound for any
  discretization interval; a smaller interval is tighter and slower.

**Conventions** (state them with every number you report; :meth:`CertifiedAccountant.describe`
does):

* Record-level DP. ``neighboring='add_remove_one'``: datasets differing by adding or removing one
  record; ``'replace_one'``: datasets of the same size differing in one record (the papers'
  adjacency; it makes the dataset size public).
* ``noise_multiplier`` of a Gaussian event is the noise standard deviation divided by the L2
  sensitivity of the released quantity **under the chosen neighbouring relation**. For a mean of
  ``b`` per-sample vectors clipped to norm ``tau`` that is ``2 tau / b`` under replace-one and
  ``tau / b`` under add/remove (with the public normaliser ``b``); see
  :func:`clipped_mean_sensitivity`. dp-accounting's PLD accountant measures the Gaussian under
  REPLACE_ONE against *half* the replace-one sensitivity (the per-record contribution) while its
  RDP accountant uses the full one; this module converts, so one noise multiplier means the same
  thing for both methods.
* A Laplace event's ``noise_multiplier`` is the Laplace scale divided by the L1 sensitivity.
* Sampling schemes: ``'poisson'`` (each record independently with probability ``sampling_rate``),
  ``'without_replacement'`` (a uniformly random subset of fixed size ``sample_size`` of
  ``dataset_size`` records), ``'none'``. Which accountant handles which event:

  =============================  ==============================  ==============================
  event                          rdp                             pld
  =============================  ==============================  ==============================
  Gaussian, no sampling          both relations                  both relations
  Gaussian, Poisson              add_remove_one only             both relations
  Gaussian, without replacement  replace_one only                refused
  Laplace, no sampling           both relations                  add_remove_one only
  Laplace, Poisson               refused                         add_remove_one only
  Laplace, without replacement   refused                         refused
  =============================  ==============================  ==============================

  Anything else raises ``ValueError`` naming the event and the combination that works.
  A sampling rate of one (or ``sample_size == dataset_size``) is no sampling.

**PLD discretization.** The PLD value is pessimistic: every per-step privacy loss is rounded up
to a multiple of ``pld_discretization``, so with many compositions of small per-step losses the
upper bound can be far above the truth (DO-ADP's setting, 120000 steps of a weakly subsampled
mechanism: 0.049 at interval 1e-3, 0.0136 at 1e-4, 0.0036 at 1e-5). When the expected epsilon is
small compared with ``steps * pld_discretization``, lower the interval or use RDP.

**PLD construction.** dp-accounting folds the ``count`` invocations of an unsampled Gaussian into
one Gaussian of standard deviation ``z / sqrt(count)`` and builds its connect-the-dots PLD from
the hockey-stick divergence at every multiple of the interval in the privacy-loss range;
dp-accounting 0.6 inverts the privacy loss there in a Python loop, one call per point, which
took most of a construction's time. rfed builds that distribution with dp-accounting's code
except that loop, evaluated as one array expression (:class:`_GaussianPrivacyLoss`): the same
operations on the same floats in the same order, so the same distribution and epsilons, bit for
bit (tests/privacy/test_pld_fast.py compares them with dp-accounting's as integers). Sampled
events and the Laplace mechanism are dp-accounting's own; under a release other than the one
mirrored, so is everything.

**Caching.** Every epsilon rfed prints, returns or calibrates to is computed from curves
evaluated in the process: an RDP curve depends only on its event, the relation and the orders,
and is kept in an in-memory LRU for the life of the process (:func:`clear_rdp_cache` empties
it). There is no disk cache: a file could be edited to lower a printed epsilon, and the curves
cost about 1% of the default experiments' time.
An epsilon query composes the default orders in tiers (below 11, up to 63, 128-1024) and
adds a tier only when its orders could give a smaller epsilon (:func:`_higher_orders_cannot_win`):
the same value, bit for bit.

Reference number: Gaussian, noise multiplier 1.0, Poisson
rate 0.01, 1000 steps, delta 1e-5: epsilon 2.1014 (RDP) and 1.8282 (PLD, interval 1e-4).

References
----------
* Ilya Mironov. Renyi Differential Privacy. IEEE 30th Computer Security Foundations Symposium
  (CSF), 2017. arXiv:1702.07476.
* Ilya Mironov, Kunal Talwar and Li Zhang. Renyi Differential Privacy of the Sampled Gaussian
  Mechanism. arXiv preprint arXiv:1908.10530, 2019.
* Yu-Xiang Wang, Borja Balle and Shiva Prasad Kasiviswanathan. Subsampled Renyi Differential
  Privacy and Analytical Moments Accountant. Proceedings of the 22nd International Conference on
  Artificial Intelligence and Statistics (AISTATS), 2019. arXiv:1808.00087.
* Yuqing Zhu and Yu-Xiang Wang. Poisson Subsampled Renyi Differential Privacy. Proceedings of
  the 36th International Conference on Machine Learning (ICML), 2019.
* Sebastian Meiser and Esfandiar Mohammadi. Tight on Budget? Tight Bounds for r-Fold Approximate
  Differential Privacy. Proceedings of the 2018 ACM SIGSAC Conference on Computer and
  Communications Security (CCS), 2018.
* Antti Koskela, Joonas Jalko and Antti Honkela. Computing Tight Differential Privacy Guarantees
  Using FFT. Proceedings of the 23rd International Conference on Artificial Intelligence and
  Statistics (AISTATS), 2020. arXiv:1906.03049.
* Vadym Doroshenko, Badih Ghazi, Pritish Kamath, Ravi Kumar and Pasin Manurangsi. Connect the
  Dots: Tighter Discrete Approximations of Privacy Loss Distributions. Proceedings on Privacy
  Enhancing Technologies (PETS) 2022(4), 2022. arXiv:2207.04380.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import dp_accounting as dpa
import numpy as np
from dp_accounting import pld as dpa_pld
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from rfed.privacy import _rdp
from rfed.privacy._checks import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonneg,
    check_positive,
    check_rate,
)

__all__ = [
    "METHODS",
    "NEIGHBORING",
    "SAMPLING",
    "MECHANISMS",
    "DEFAULT_PLD_DISCRETIZATION",
    "EventSpec",
    "CertifiedAccountant",
    "gaussian_epsilon",
    "compose_epsilon",
    "compose_delta",
    "clipped_mean_sensitivity",
    "assumptions_text",
    "clear_rdp_cache",
]

METHODS = ("rdp", "pld")
NEIGHBORING = ("add_remove_one", "replace_one")
SAMPLING = ("none", "poisson", "without_replacement")
MECHANISMS = ("gaussian", "laplace")

#: PLD value discretization interval used unless told otherwise. PLD is pessimistic, so the
#: epsilon is an upper bound at any interval; 1e-3 is ~10x faster than 1e-4 and, on the anchor
#: example, only 0.0007 larger (1.8289 against 1.8282).
DEFAULT_PLD_DISCRETIZATION = 1e-3

_NR = {
    "add_remove_one": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dpa.NeighboringRelation.REPLACE_ONE,
}

try:
    DP_ACCOUNTING_VERSION = importlib.metadata.version("dp-accounting")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - imported above, so installed
    DP_ACCOUNTING_VERSION = "unknown"


def _check_orders(orders: Iterable[float] | None) -> tuple[float, ...] | None:
    """RDP orders as a tuple of finite floats > 1 (None keeps dp-accounting's defaults)."""
    if orders is None:
        return None
    try:
        out = tuple(float(o) for o in orders)
    except (TypeError, ValueError):
        raise TypeError("argument 'rdp_orders' must be a sequence of real numbers") from None
    if not out or not all(math.isfinite(o) and o > 1 for o in out):
        raise ValueError(
            f"argument 'rdp_orders' must be a non-empty sequence of finite orders > 1, got {out}"
        )
    return out


def clipped_mean_sensitivity(bound: float, batch_size: int, neighboring: str) -> float:
    """L2 sensitivity of ``(1/b) sum_{j in batch} clip_bound(g_j)`` with a public normaliser ``b``.

    Replace-one changes one summand (``2 * bound / b``); add/remove adds or drops one
    (``bound / b``). Divide the noise standard deviation by this to get the noise multiplier.

    Parameters
    ----------
    bound : float
        Clipping level (per-sample norm bound), > 0.
    batch_size : int
        Number of summands ``b`` (the public normaliser), >= 1.
    neighboring : {'add_remove_one', 'replace_one'}

    Returns
    -------
    float
        The L2 sensitivity.
    """
    bound = check_positive(bound, "bound")
    b = check_int(batch_size, "batch_size")
    check_choice(neighboring, "neighboring", NEIGHBORING)
    return (2.0 if neighboring == "replace_one" else 1.0) * bound / b


@dataclasses.dataclass(frozen=True)
class EventSpec:
    """One privacy event, hashable and JSON-serializable.

    Attributes
    ----------
    mechanism : {'gaussian', 'laplace'}
    noise_multiplier : float
        Gaussian: std / L2 sensitivity; Laplace: scale / L1 sensitivity (under the accountant's
        neighbouring relation). Zero means no noise (epsilon infinite).
    sampling : {'none', 'poisson', 'without_replacement'}
    sampling_rate : float
        Poisson inclusion probability, or ``sample_size / dataset_size``; 1 for ``'none'``.
    dataset_size, sample_size : int or None
        Only for ``'without_replacement'``.
    """

    mechanism: str
    noise_multiplier: float
    sampling: str = "none"
    sampling_rate: float = 1.0
    dataset_size: int | None = None
    sample_size: int | None = None

    def __post_init__(self):
        # direct construction skips make()'s normalisation, not the domain checks
        check_choice(self.mechanism, "mechanism", MECHANISMS)
        check_nonneg(self.noise_multiplier, "noise_multiplier")
        check_choice(self.sampling, "sampling", SAMPLING)
        check_rate(self.sampling_rate)
        if (self.sampling == "without_replacement") != (self.dataset_size is not None):
            raise ValueError(
                "argument 'dataset_size' is required with sampling='without_replacement' and "
                "only then"
            )

    @classmethod
    def make(
        cls,
        mechanism: str,
        noise_multiplier: float,
        sampling: str = "none",
        sampling_rate: float = 1.0,
        dataset_size: int | None = None,
        sample_size: int | None = None,
    ) -> EventSpec:
        """Validate and normalise (a rate of one becomes ``'none'``).

        Parameters
        ----------
        mechanism, noise_multiplier, sampling, sampling_rate, dataset_size, sample_size
            As the attributes above.

        Returns
        -------
        EventSpec
        """
        check_choice(mechanism, "mechanism", MECHANISMS)
        nm = check_nonneg(noise_multiplier, "noise_multiplier")
        check_choice(sampling, "sampling", SAMPLING)
        if sampling == "none":
            if sampling_rate is not None and check_rate(sampling_rate) != 1.0:
                raise ValueError(
                    f"argument 'sampling_rate' is {sampling_rate!r} but sampling='none'; pass "
                    "sampling='poisson' or 'without_replacement' to account for subsampling"
                )
            return cls(mechanism, nm)
        if sampling == "poisson":
            rate = check_rate(sampling_rate)
            if rate == 1.0:
                return cls(mechanism, nm)
            return cls(mechanism, nm, "poisson", rate)
        # without replacement: sizes are needed by dp-accounting
        if dataset_size is None:
            raise ValueError(
                "argument 'dataset_size' is required for sampling='without_replacement' "
                "(a subset of fixed size sample_size out of dataset_size records)"
            )
        n = check_int(dataset_size, "dataset_size")
        if sample_size is None:
            rate = check_rate(sampling_rate)
            m = int(round(rate * n))
            if m < 1 or abs(m - rate * n) > 1e-6 * n:
                raise ValueError(
                    f"argument 'sampling_rate' ({rate!r}) times dataset_size ({n}) is not a "
                    "positive integer; pass sample_size explicitly"
                )
        else:
            m = check_int(sample_size, "sample_size")
        if m > n:
            raise ValueError(f"argument 'sample_size' ({m}) must not exceed dataset_size ({n})")
        if m == n:
            return cls(mechanism, nm)
        return cls(mechanism, nm, "without_replacement", m / n, n, m)

    # ------------------------------------------------------------------ support
    def check_supported(self, method: str, neighboring: str) -> None:
        """Raise ``ValueError`` if the (method, neighbouring) accountant cannot take this event.

        Parameters
        ----------
        method : {'rdp', 'pld'}
            The accountant.
        neighboring : {'add_remove_one', 'replace_one'}
            The neighbouring relation.
        """
        problem = None
        if self.sampling == "without_replacement":
            if self.mechanism != "gaussian":
                problem = (
                    "sampling without replacement is accounted only for the Gaussian mechanism"
                )
            elif method != "rdp" or neighboring != "replace_one":
                problem = (
                    "sampling without replacement needs method='rdp' with "
                    "neighboring='replace_one' (dp-accounting's PLD has no such event)"
                )
        elif self.sampling == "poisson":
            if self.mechanism == "gaussian" and method == "rdp" and neighboring != "add_remove_one":
                problem = (
                    "Poisson sampling with RDP needs neighboring='add_remove_one'; use "
                    "method='pld' for replace_one"
                )
            if self.mechanism == "laplace" and (method != "pld" or neighboring != "add_remove_one"):
                problem = (
                    "Poisson-subsampled Laplace is accounted only by method='pld' with "
                    "neighboring='add_remove_one'"
                )
        elif self.mechanism == "laplace" and method == "pld" and neighboring != "add_remove_one":
            problem = (
                "PLD accounts the Laplace mechanism only with neighboring='add_remove_one'; use "
                "method='rdp' (or add_remove_one: without sampling the two relations differ only "
                "through the sensitivity)"
            )
        if problem:
            raise ValueError(
                f"event {self.describe()} cannot be accounted by method={method!r}, "
                f"neighboring={neighboring!r}: {problem}"
            )

    def to_dp_event(self, method: str, neighboring: str) -> dpa.DpEvent:
        """The dp-accounting event for one invocation (after :meth:`check_supported`).

        Parameters
        ----------
        method : {'rdp', 'pld'}
            The accountant.
        neighboring : {'add_remove_one', 'replace_one'}
            The neighbouring relation.

        Returns
        -------
        dp_accounting.DpEvent
        """
        nm = self.noise_multiplier
        if self.mechanism == "gaussian" and method == "pld" and neighboring == "replace_one":
            # dp-accounting's PLD measures REPLACE_ONE against the per-record contribution,
            # i.e. half of the replace-one sensitivity used by this module and by RDP.
            nm = 2.0 * nm
        inner = (dpa.GaussianDpEvent if self.mechanism == "gaussian" else dpa.LaplaceDpEvent)(nm)
        if self.sampling == "poisson":
            return dpa.PoissonSampledDpEvent(self.sampling_rate, inner)
        if self.sampling == "without_replacement":
            return dpa.SampledWithoutReplacementDpEvent(self.dataset_size, self.sample_size, inner)
        return inner

    def describe(self) -> str:
        """Short human-readable form, e.g. ``gaussian(z=1.1) poisson(q=0.01)``.

        Returns
        -------
        str
        """
        base = f"{self.mechanism}(z={self.noise_multiplier:.6g})"
        if self.sampling == "poisson":
            return f"{base} poisson(q={self.sampling_rate:.6g})"
        if self.sampling == "without_replacement":
            return f"{base} without-replacement({self.sample_size}/{self.dataset_size})"
        return base

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form.

        Returns
        -------
        dict
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EventSpec:
        """Inverse of :meth:`to_dict` (validated again).

        Parameters
        ----------
        data : mapping
            The output of :meth:`to_dict`.

        Returns
        -------
        EventSpec
        """
        return cls.make(
            data["mechanism"],
            data["noise_multiplier"],
            data.get("sampling", "none"),
            data.get("sampling_rate", 1.0),
            data.get("dataset_size"),
            data.get("sample_size"),
        )


# ---------------------------------------------------------------------- RDP curve cache
#: dp-accounting's default RDP orders (what ``rdp_orders=None`` means).
DEFAULT_RDP_ORDERS: tuple[float, ...] = tuple(float(o) for o in dpa_rdp.DEFAULT_RDP_ORDERS)
#: The default orders in three consecutive tiers (below 11, 11 to 63, 128 to 1024; for a
#: sampled-without-replacement Gaussian they cost about 12%, 46% and 36% of a curve): an epsilon
#: query composes a tier only when the orders above the tiers composed so far could still win.
_ORDER_TIERS: tuple[tuple[float, ...], ...] = (
    tuple(o for o in DEFAULT_RDP_ORDERS if o < 11),
    tuple(o for o in DEFAULT_RDP_ORDERS if 11 <= o <= 64),
    tuple(o for o in DEFAULT_RDP_ORDERS if o > 64),
)

def clear_rdp_cache() -> None:
    """Forget the RDP curves kept in memory (the in-process LRU of :func:`_rdp_vector`)."""
    _rdp_vector.cache_clear()


def _compute_rdp_curve(spec: EventSpec, neighboring: str, orders: tuple[float, ...]
                       ) -> np.ndarray:
    """RDP curve of one invocation of ``spec`` (after :meth:`EventSpec.check_supported`).

    Gaussian events are evaluated by :mod:`rfed.privacy._rdp` (the bounds dp-accounting uses,
    vectorized); the Laplace mechanism by :func:`_laplace_rdp_curve` (dp-accounting's
    ``RdpAccountant`` value, bit for bit).
    """
    if spec.mechanism == "laplace":
        # dp-accounting's LaplaceDpEvent: eps = 1 / noise_multiplier (either relation; the
        # multiplier already refers to it)
        return _laplace_rdp_curve(1 / spec.noise_multiplier, orders)
    order_array = np.asarray(orders, dtype=float)
    if spec.mechanism == "gaussian":
        z = spec.noise_multiplier
        if spec.sampling == "poisson":
            return _rdp.poisson_gaussian_rdp(spec.sampling_rate, z, order_array)
        if spec.sampling == "without_replacement":
            if spec.sample_size is None or spec.dataset_size is None:
                raise ValueError("sampling='without_replacement' needs 'sample_size' and "
                                 "'dataset_size'")
            q = spec.sample_size / spec.dataset_size  # dp-accounting's q, from the sizes
            return _rdp.sample_wor_gaussian_rdp(q, z, order_array)
        return _rdp.gaussian_rdp(z, order_array)
    raise ValueError(f"no RDP curve for mechanism {spec.mechanism!r}")


@functools.lru_cache(maxsize=64)
def _laplace_order_terms(orders: tuple[float, ...]) -> tuple[tuple[int, float, float, float], ...]:
    """Per order ``a``: ``(branch, a - 1, 1 - 2 a, 2 a - 1)``, the order's terms of Mironov's
    formula as dp-accounting writes them (each an exact function of ``a``, so computing them
    once gives the same floats as computing them per curve). ``branch`` is dp-accounting's
    case: 0 for ``a == 1``, 1 for ``1 < a < 1.1`` (Taylor series), 2 above."""
    terms = []
    for order in orders:
        a = float(order)
        if not math.isfinite(a) or a < 1:
            raise ValueError(f"argument 'orders' must hold finite RDP orders >= 1, got {a!r}")
        branch = 0 if a == 1 else 1 if a < 1.1 else 2
        terms.append((branch, a - 1, 1 - 2 * a, 2 * a - 1))
    return tuple(terms)


def _laplace_rdp_low_order(eps: float, branch: int, am1: float, one_m_2a: float,
                           two_a_m1: float) -> float:
    """dp-accounting's Laplace RDP at an order ``a < 1.1`` (``branch`` 0 or 1 of
    :func:`_laplace_order_terms`)."""
    if branch == 0:  # KL divergence: the limit a -> 1
        return eps + math.expm1(-eps)
    # 1 < a < 1.1: log(1 + c x) / x = c sum_k (-c x)^(k-1) / k
    c = math.expm1(eps * one_m_2a) / two_a_m1
    v = -c * am1
    return eps + c * math.fsum(v ** (k - 1) / k for k in range(1, 100))


def _laplace_rdp_curve(eps: float, orders: tuple[float, ...]) -> np.ndarray:
    r"""RDP curve of one Laplace mechanism with pure-DP parameter ``eps`` (L1 sensitivity over
    the scale), shape ``(len(orders),)``.

    Mironov (2017), Prop. 6, evaluated as dp-accounting 0.6's ``_laplace_rdp`` does:

    .. math:: \mathrm{RDP}(a) = \epsilon + \frac{1}{a-1}\log\Big(1 + (a-1)
              \frac{e^{(1-2a)\epsilon} - 1}{2a-1}\Big),

    ``log1p``/``expm1`` for ``a >= 1.1``, the limit :math:`\epsilon + e^{-\epsilon} - 1` at
    ``a = 1`` and its 99-term Taylor series of ``log1p`` (``math.fsum``) for ``1 < a < 1.1``:
    the same ``math`` calls on the same floats in the same order, so the same bits as
    ``RdpAccountant(orders).compose(LaplaceDpEvent(1 / eps)).rdp`` (its zero start and unit
    count add nothing: no term is ``-0.0`` because ``eps >= 0``), with one Python loop over
    the orders instead of a validated call per order (about 3x faster with the default
    orders). ``math`` rather than numpy: numpy's ``expm1``/``log1p`` may take SIMD paths whose
    last bits differ between CPUs.

    Raises
    ------
    ValueError
        ``eps`` not finite and >= 0 (dp-accounting's check), or an order not finite and >= 1.
    """
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"argument 'eps' of the Laplace RDP curve must be finite and >= 0 "
                         f"(1 / noise_multiplier), got {eps!r}")
    expm1, log1p = math.expm1, math.log1p
    return np.array([eps + log1p(am1 * expm1(eps * one_m_2a) / two_a_m1) / am1 if branch == 2
                     else _laplace_rdp_low_order(eps, branch, am1, one_m_2a, two_a_m1)
                     for branch, am1, one_m_2a, two_a_m1 in _laplace_order_terms(orders)],
                    dtype=float)


# ---------------------------------------------------------------------- composition engine
# 4096 curves: DP-DGT's default run (27,724 distinct Laplace curves, reports at several
# rounds) computes 31,941 curves with it and 28,747 unbounded; the 3,194 extra Laplace curves
# cost about 0.06 s, less than keeping every curve in memory is worth.
@functools.lru_cache(maxsize=4096)
def _rdp_vector(spec: EventSpec, neighboring: str, orders: tuple[float, ...]):
    """RDP curve of one invocation of ``spec`` at ``orders`` (RDP composes by addition).

    Evaluated in this process and kept in memory only: no epsilon rfed prints, returns or
    calibrates to is ever read from a file (a curve costs 3-6 ms; the default experiments spend
    about 1% of their time on curves, so a disk cache does not pay for the trust it needs).
    """
    rdp = _compute_rdp_curve(spec, neighboring, orders)
    rdp.setflags(write=False)  # shared by every caller of the cache
    return np.asarray(orders, dtype=float), rdp


def _check_all(events: Iterable[tuple[EventSpec, int]], method: str, neighboring: str):
    out = []
    for spec, count in events:
        count = check_int(count, "count", minimum=0)
        if count:
            spec.check_supported(method, neighboring)
            out.append((spec, count))
    return tuple(out)


def _composed_rdp(events, neighboring, orders):
    total = None
    orders_used = None
    for spec, count in events:
        orders_used, vec = _rdp_vector(spec, neighboring, orders)
        total = count * vec if total is None else total + count * vec
    return orders_used, total


def _higher_orders_cannot_win(rdp_low: np.ndarray, eps_low: float, higher: np.ndarray,
                              delta: float) -> bool:
    """True when none of the orders ``higher`` (all above the computed ones) can give an
    epsilon below ``eps_low``, the minimum over the computed orders with curve ``rdp_low``.

    Renyi divergence is non-decreasing in the order (van Erven and Harremoes 2014, Thm 3), so
    for a higher order ``a``, ``rdp(a) >= rdp_low[-1]`` and dp-accounting's conversion
    ``rdp(a) + log(1 - 1/a) - log(delta a) / (a - 1)`` is at least ``rdp_low[-1]`` plus the
    smallest order term over ``higher``. The composed curve is checked to be non-decreasing
    over the computed orders (else: False, and more orders are computed), and a relative margin
    of 1e-9 keeps rounding from deciding.
    """
    with np.errstate(invalid="ignore"):  # orders dp-accounting excluded are inf: inf - inf
        if not np.all(np.diff(rdp_low) >= -1e-12 * np.abs(rdp_low[1:])):
            return False
    term = np.log1p(-1.0 / higher) - np.log(delta * higher) / (higher - 1.0)
    bound = rdp_low[-1] + float(term.min())
    return bound > eps_low + 1e-9 * abs(eps_low)


def _rdp_epsilon(events, neighboring: str, orders: tuple[float, ...] | None, delta: float
                 ) -> float:
    """Epsilon of the composed RDP curve at ``delta``, as dp-accounting's ``compute_epsilon``.

    With the default orders, the tiers of :data:`_ORDER_TIERS` are composed in turn, and the
    next one only when :func:`_higher_orders_cannot_win` cannot exclude the orders above. The
    result is the one the full order set gives, bit for bit: every order's value is computed
    independently of the others, and the minimum is attained in the tiers composed, which come
    first in the order list, where ``compute_epsilon`` finds it first.
    """
    if orders is not None:
        used, rdp = _composed_rdp(events, neighboring, orders)
        return float(dpa_rdp.compute_epsilon(used, rdp, delta)[0])
    used_parts, rdp_parts = [], []
    for k, tier in enumerate(_ORDER_TIERS):
        tier_orders, tier_rdp = _composed_rdp(events, neighboring, tier)
        used_parts.append(tier_orders)
        rdp_parts.append(tier_rdp)
        rdp = np.concatenate(rdp_parts)
        eps = float(dpa_rdp.compute_epsilon(np.concatenate(used_parts), rdp, delta)[0])
        higher = np.asarray(sum(_ORDER_TIERS[k + 1:], ()), dtype=float)
        if eps == 0.0 or higher.size == 0 or _higher_orders_cannot_win(rdp, eps, higher, delta):
            return eps
    return eps


#: The dp-accounting releases whose PLD code :class:`_GaussianPrivacyLoss` and
#: :func:`_unsampled_gaussian_pld` mirror (tests/privacy/test_pld_fast.py compares them with
#: ``==``); under any other release the accountant is dp-accounting's own, unchanged.
_PLD_MIRRORED_VERSIONS = ("0.6.0",)


class _GaussianPrivacyLoss(dpa_pld.privacy_loss_mechanism.GaussianPrivacyLoss):
    """dp-accounting's Gaussian privacy loss with the hockey-stick grid of an unsampled
    mechanism evaluated as one array expression.

    Connect-the-dots asks :meth:`get_delta_for_epsilon` for the divergence at every multiple of
    the discretization interval in the privacy-loss range (tens of thousands of points), and
    dp-accounting 0.6 inverts the privacy loss there in a Python loop, one call per point: most
    of a PLD's construction. Without sampling that inverse is ``-eps * s^2 / c / 2``
    (replace-one) or ``-c / 2 - eps * s^2 / c`` (remove), ``s`` the standard deviation and
    ``c`` the sensitivity: the same IEEE operations on the same floats in the same order,
    applied to the whole array, give the same bits. Everything else (the CDFs, the tail, the
    sampled mechanism, another adjacency) is dp-accounting's code.
    """

    def get_delta_for_epsilon(self, epsilon):
        """dp-accounting's divergence at ``epsilon``, vectorized as the class docstring says.

        Parameters
        ----------
        epsilon : float or array_like
            The epsilons.

        Returns
        -------
        float or numpy.ndarray
            The divergences (a float for a scalar ``epsilon``).
        """
        adjacency = dpa_pld.privacy_loss_mechanism.AdjacencyType
        epsilons = None if isinstance(epsilon, numbers.Number) else np.asarray(epsilon)
        if (epsilons is None or epsilons.ndim != 1 or epsilons.dtype != np.float64
                or self.sampling_prob != 1.0
                or self.adjacency_type not in (adjacency.REPLACE, adjacency.REMOVE)):
            return super().get_delta_for_epsilon(epsilon)
        sd2 = self._standard_deviation**2
        c = self.sensitivity
        if self.adjacency_type == adjacency.REPLACE:
            # _inverse_privacy_loss_replace: 0.0 at a zero loss (not -0.0)
            x_cutoffs = np.where(epsilons == 0, 0.0, -epsilons * sd2 / c / 2)
        else:
            # _inverse_privacy_loss_without_subsampling_remove
            x_cutoffs = -0.5 * c - epsilons * sd2 / c
        deltas = self.mu_upper_cdf(x_cutoffs) - np.exp(epsilons + self.mu_lower_log_cdf(x_cutoffs))
        return np.clip(deltas, 0, 1)


def _unsampled_gaussian_pld(standard_deviation: float, vdi: float, relation):
    """``privacy_loss_distribution.from_gaussian_mechanism(standard_deviation,
    value_discretization_interval=vdi, neighboring_relation=relation)`` (its defaults:
    sensitivity 1, pessimistic connect-the-dots, truncation bound -50, no sampling) through
    :class:`_GaussianPrivacyLoss`."""
    module = dpa_pld.privacy_loss_distribution
    adjacency = dpa_pld.privacy_loss_mechanism.AdjacencyType.REMOVE
    if relation == dpa.NeighboringRelation.REPLACE_ONE:
        adjacency = dpa_pld.privacy_loss_mechanism.AdjacencyType.REPLACE
    pmf = module._create_pld_pmf_from_monotone_privacy_loss(
        _GaussianPrivacyLoss(standard_deviation, adjacency_type=adjacency),
        pessimistic_estimate=True, value_discretization_interval=vdi, use_connect_dots=True)
    return module.PrivacyLossDistribution(pmf)


class _PLDAccountant(dpa_pld.PLDAccountant):
    """dp-accounting's PLD accountant, composing an unsampled Gaussian event as its
    ``_maybe_compose`` does (one Gaussian of standard deviation ``z / sqrt(count)``) with the
    PLD of :func:`_unsampled_gaussian_pld`: the same distribution, bit for bit, without
    dp-accounting's per-point loop."""

    def _maybe_compose(self, event, count, do_compose):
        if (do_compose and isinstance(event, dpa.GaussianDpEvent) and event.noise_multiplier != 0
                and self.neighboring_relation in (dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                                  dpa.NeighboringRelation.REPLACE_ONE)):
            self._pld = self._pld.compose(_unsampled_gaussian_pld(
                event.noise_multiplier / math.sqrt(count), self._value_discretization_interval,
                self.neighboring_relation))
            return None
        return super()._maybe_compose(event, count, do_compose)


@functools.lru_cache(maxsize=256)
def _pld_accountant(events: tuple[tuple[EventSpec, int], ...], neighboring: str, vdi: float):
    mirrored = DP_ACCOUNTING_VERSION in _PLD_MIRRORED_VERSIONS
    acc = (_PLDAccountant if mirrored else dpa_pld.PLDAccountant)(
        neighboring_relation=_NR[neighboring], value_discretization_interval=vdi
    )
    acc.compose(
        dpa.ComposedDpEvent(
            [dpa.SelfComposedDpEvent(s.to_dp_event("pld", neighboring), c) for s, c in events]
        )
    )
    return acc


def _canonical(events) -> tuple[tuple[EventSpec, int], ...]:
    merged: dict[EventSpec, int] = {}
    for spec, count in events:
        merged[spec] = merged.get(spec, 0) + count
    return tuple(sorted(merged.items(), key=lambda kv: repr(kv[0])))


def _compose(
    events: Iterable[tuple[EventSpec, int]],
    query: str,
    value: float,
    method: str,
    neighboring: str,
    pld_discretization: float,
    rdp_orders: Iterable[float] | None,
) -> float:
    """``query`` ('epsilon' at delta ``value`` or 'delta' at epsilon ``value``) of the events."""
    check_choice(method, "method", METHODS)
    check_choice(neighboring, "neighboring", NEIGHBORING)
    rdp_orders = _check_orders(rdp_orders)
    events = _canonical(_check_all(events, method, neighboring))
    want_eps = query == "epsilon"
    if not events:
        return 0.0
    if any(s.noise_multiplier == 0 for s, _ in events):
        return math.inf if want_eps else 1.0
    if method == "rdp":
        if want_eps:
            return _rdp_epsilon(events, neighboring, rdp_orders, value)
        orders, rdp = _composed_rdp(events, neighboring, rdp_orders or DEFAULT_RDP_ORDERS)
        return float(dpa_rdp.compute_delta(orders, rdp, value)[0])
    vdi = check_positive(pld_discretization, "pld_discretization")
    acc = _pld_accountant(events, neighboring, vdi)
    return float(acc.get_epsilon(value) if want_eps else acc.get_delta(value))


def compose_epsilon(
    events: Iterable[tuple[EventSpec, int]],
    delta: float,
    method: str = "rdp",
    neighboring: str = "add_remove_one",
    *,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
    rdp_orders: Iterable[float] | None = None,
) -> float:
    """Epsilon at ``delta`` of the adaptive composition of ``(event, count)`` pairs.

    Zero events give epsilon 0; an event with noise multiplier 0 gives ``inf``.

    Parameters
    ----------
    events : iterable of (EventSpec, int)
        Each event with the number of times it is composed.
    delta : float
        Target delta in (0, 1).
    method : {'rdp', 'pld'}
        The accountant (dp-accounting's RDP or PLD).
    neighboring : {'add_remove_one', 'replace_one'}
        The neighbouring relation the events' noise multipliers refer to.
    pld_discretization : float
        Value discretization of the PLD accountant (``method='pld'``).
    rdp_orders : iterable of float, optional
        RDP orders (``method='rdp'``); the accountant's default set when omitted.

    Returns
    -------
    float
        The certified epsilon.
    """
    delta = check_delta(delta)
    return _compose(events, "epsilon", delta, method, neighboring, pld_discretization, rdp_orders)


def compose_delta(
    events: Iterable[tuple[EventSpec, int]],
    epsilon: float,
    method: str = "rdp",
    neighboring: str = "add_remove_one",
    *,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
    rdp_orders: Iterable[float] | None = None,
) -> float:
    """Delta at ``epsilon`` of the composition (the dual of :func:`compose_epsilon`).

    Zero events give delta 0; an event with noise multiplier 0 gives 1.

    Parameters
    ----------
    events : iterable of (EventSpec, int)
        Each event with the number of times it is composed.
    epsilon : float
        Target epsilon, >= 0.
    method : {'rdp', 'pld'}
        The accountant (dp-accounting's RDP or PLD).
    neighboring : {'add_remove_one', 'replace_one'}
        The neighbouring relation the events' noise multipliers refer to.
    pld_discretization : float
        Value discretization of the PLD accountant (``method='pld'``).
    rdp_orders : iterable of float, optional
        RDP orders (``method='rdp'``); the accountant's default set when omitted.

    Returns
    -------
    float
        The certified delta.
    """
    epsilon = check_epsilon(epsilon)
    return _compose(events, "delta", epsilon, method, neighboring, pld_discretization, rdp_orders)


def assumptions_text(method: str, neighboring: str, pld_discretization: float) -> str:
    """One paragraph naming the accountant and the assumptions behind its numbers.

    Parameters
    ----------
    method : {'rdp', 'pld'}
        The accountant.
    neighboring : {'add_remove_one', 'replace_one'}
        The neighbouring relation.
    pld_discretization : float
        Value discretization of the PLD accountant.

    Returns
    -------
    str
        The paragraph.
    """
    check_choice(method, "method", METHODS)
    check_choice(neighboring, "neighboring", NEIGHBORING)
    pld_discretization = check_positive(pld_discretization, "pld_discretization")
    if method == "rdp":
        engine = (
            f"RDP accountant of dp-accounting {DP_ACCOUNTING_VERSION} (its bounds, the Gaussian "
            f"curves evaluated by rfed's {_rdp.IMPLEMENTATION}; default orders, conversion by "
            "compute_epsilon)"
        )
    else:
        engine = (
            f"PLD accountant of dp-accounting {DP_ACCOUNTING_VERSION} (pessimistic "
            f"discretization, interval {pld_discretization:g}: an upper bound)"
        )
    rel = (
        "replace-one (same-size datasets differing in one record; sizes public)"
        if neighboring == "replace_one"
        else "add/remove-one (datasets differing by one record)"
    )
    return (
        f"{engine}; record-level DP, neighbouring relation {rel}; noise multiplier = Gaussian std "
        "/ L2 sensitivity (Laplace: scale / L1 sensitivity) under that relation; composition is "
        "adaptive over the recorded events; sampling as recorded (Poisson or fixed-size without "
        "replacement) and assumed secret and independent of the data."
    )


class CertifiedAccountant:
    """Compose privacy events as the code performs them; read epsilon or delta at any time.

    Parameters
    ----------
    method : {'rdp', 'pld'}
    neighboring : {'add_remove_one', 'replace_one'}
        The neighbouring relation the noise multipliers refer to (module docstring).
    pld_discretization : float
        Value discretization interval of the PLD accountant.
    rdp_orders : sequence of float, optional
        RDP orders; dp-accounting's defaults when omitted.

    Examples
    --------
    >>> acc = CertifiedAccountant("rdp")
    >>> acc.add_gaussian(1.0, sampling_rate=0.01, count=1000)
    >>> round(acc.epsilon(1e-5), 4)
    2.1014
    """

    def __init__(
        self,
        method: str = "rdp",
        neighboring: str = "add_remove_one",
        *,
        pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
        rdp_orders: Iterable[float] | None = None,
    ):
        self.method = check_choice(method, "method", METHODS)
        self.neighboring = check_choice(neighboring, "neighboring", NEIGHBORING)
        self.pld_discretization = check_positive(pld_discretization, "pld_discretization")
        self.rdp_orders = _check_orders(rdp_orders)
        self._events: dict[EventSpec, int] = {}

    # ------------------------------------------------------------------ recording
    def add_event(self, spec: EventSpec, count: int = 1) -> None:
        """Compose ``count`` invocations of ``spec`` (refused now if this accountant cannot).

        Parameters
        ----------
        spec : EventSpec
            The event.
        count : int
            Number of invocations, >= 0.
        """
        count = check_int(count, "count", minimum=0)
        spec.check_supported(self.method, self.neighboring)
        if count:
            self._events[spec] = self._events.get(spec, 0) + count

    def add(
        self,
        mechanism: str,
        noise_multiplier: float,
        sampling_rate: float = 1.0,
        sampling: str = "poisson",
        count: int = 1,
        *,
        dataset_size: int | None = None,
        sample_size: int | None = None,
    ) -> None:
        """Compose ``count`` (subsampled) Gaussian or Laplace mechanisms.

        Parameters
        ----------
        mechanism : {'gaussian', 'laplace'}
        noise_multiplier : float
            Gaussian: noise std / L2 sensitivity; Laplace: scale / L1 sensitivity (under this
            accountant's neighbouring relation).
        sampling_rate : float
            In (0, 1]; 1 means no sampling.
        sampling : {'poisson', 'without_replacement', 'none'}
        count : int
            Number of invocations (e.g. steps).
        dataset_size, sample_size : int, optional
            For ``'without_replacement'`` (``sample_size`` defaults to
            ``sampling_rate * dataset_size``).
        """
        spec = EventSpec.make(
            mechanism, noise_multiplier, sampling, sampling_rate, dataset_size, sample_size
        )
        self.add_event(spec, count)

    def add_gaussian(self, noise_multiplier: float, *args: Any, **kwargs: Any) -> None:
        """``add('gaussian', noise_multiplier, ...)``: multiplier = std / L2 sensitivity.

        Parameters
        ----------
        noise_multiplier : float
            Noise std over the L2 sensitivity.
        *args, **kwargs
            The sampling arguments of :meth:`add`.
        """
        self.add("gaussian", noise_multiplier, *args, **kwargs)

    def add_laplace(self, noise_multiplier: float, *args: Any, **kwargs: Any) -> None:
        """``add('laplace', noise_multiplier, ...)``: multiplier = scale / L1 sensitivity.

        Parameters
        ----------
        noise_multiplier : float
            Laplace scale over the L1 sensitivity.
        *args, **kwargs
            The sampling arguments of :meth:`add`.
        """
        self.add("laplace", noise_multiplier, *args, **kwargs)

    @property
    def events(self) -> tuple[tuple[EventSpec, int], ...]:
        """The composed events with their counts."""
        return tuple(self._events.items())

    # ------------------------------------------------------------------ queries
    def _query(self, compose, value: float) -> float:
        return compose(
            self._events.items(),
            value,
            self.method,
            self.neighboring,
            pld_discretization=self.pld_discretization,
            rdp_orders=self.rdp_orders,
        )

    def epsilon(self, delta: float) -> float:
        """Epsilon of everything composed so far, at ``delta`` in (0, 1).

        Parameters
        ----------
        delta : float
            The delta of the guarantee.

        Returns
        -------
        float
        """
        return self._query(compose_epsilon, delta)

    def delta(self, epsilon: float) -> float:
        """Delta of everything composed so far, at ``epsilon`` > 0.

        Parameters
        ----------
        epsilon : float
            The epsilon of the guarantee.

        Returns
        -------
        float
        """
        return self._query(compose_delta, epsilon)

    def describe(self) -> str:
        """The accountant, its assumptions and the composed events.

        Returns
        -------
        str
        """
        lines = [assumptions_text(self.method, self.neighboring, self.pld_discretization)]
        for spec, count in self._events.items():
            lines.append(f"  {count} x {spec.describe()}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable state.

        Returns
        -------
        dict
        """
        return {
            "method": self.method,
            "neighboring": self.neighboring,
            "pld_discretization": self.pld_discretization,
            "rdp_orders": None if self.rdp_orders is None else list(self.rdp_orders),
            "events": [{"event": s.to_dict(), "count": c} for s, c in self._events.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CertifiedAccountant:
        """Rebuild an accountant saved by :meth:`to_dict`.

        Parameters
        ----------
        data : mapping
            The output of :meth:`to_dict`.

        Returns
        -------
        CertifiedAccountant
        """
        acc = cls(
            data["method"],
            data["neighboring"],
            pld_discretization=data.get("pld_discretization", DEFAULT_PLD_DISCRETIZATION),
            rdp_orders=data.get("rdp_orders"),
        )
        for item in data.get("events", []):
            acc.add_event(EventSpec.from_dict(item["event"]), item["count"])
        return acc

    def __repr__(self) -> str:
        return (
            f"CertifiedAccountant(method={self.method!r}, neighboring={self.neighboring!r}, "
            f"{sum(self._events.values())} events)"
        )


def gaussian_epsilon(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    *,
    method: str = "rdp",
    sampling: str = "poisson",
    neighboring: str | None = None,
    dataset_size: int | None = None,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
) -> float:
    """Epsilon of ``steps`` compositions of a subsampled Gaussian mechanism, in one call.

    Parameters
    ----------
    noise_multiplier : float
        Std / L2 sensitivity under ``neighboring``.
    sampling_rate : float
        In (0, 1].
    steps : int
        Number of compositions, >= 1.
    delta : float
        In (0, 1).
    method : {'rdp', 'pld'}
    sampling : {'poisson', 'without_replacement', 'none'}
    neighboring : {'add_remove_one', 'replace_one'}, optional
        Defaults to ``'replace_one'`` for sampling without replacement (the only relation it is
        accounted under) and ``'add_remove_one'`` otherwise.
    dataset_size : int, optional
        Required for ``'without_replacement'``.
    pld_discretization : float

    Returns
    -------
    float
    """
    steps = check_int(steps, "steps")
    if neighboring is None:
        neighboring = "replace_one" if sampling == "without_replacement" else "add_remove_one"
    spec = EventSpec.make("gaussian", noise_multiplier, sampling, sampling_rate, dataset_size)
    return compose_epsilon(
        [(spec, steps)], delta, method, neighboring, pld_discretization=pld_discretization
    )
