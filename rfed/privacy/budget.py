"""Budget-first privacy: the user states the whole run's ``(epsilon, delta)``; rfed sets the noise.

The pieces every private algorithm uses (the user experience of Opacus'
``make_private_with_epsilon``):

* :class:`PrivacyBudget` -- what the user asks for: epsilon, delta (default
  :func:`default_delta`), the neighbouring relation and the accounting method;
* :func:`check_delta_for_dataset` -- refuses a delta that protects nothing (``delta >= 1/N``);
* :func:`certify` -- the certified epsilon of a list of ``(EventSpec, count)`` events, with the
  tighter of the two accountants when ``method='auto'``;
* :func:`calibrate` -- the smallest noise multiplier whose planned run certifies the budget,
  by bisection on a function ``events_for(z)`` that lists the events of the worst-off agent over the
  **whole planned run** when the base noise multiplier is ``z``.

Why ``delta < 1/N``: a mechanism that publishes one record in the clear with probability ``1/N``
per record satisfies ``(0, 1/N)``-DP for a dataset of ``N`` records and yet publishes, on average,
one record. rfed's default is ``min(1e-5, 1 / (10 N))`` for the smallest local dataset ``N``.

Example
-------
Noise for 300 DP-SGD steps on minibatches of 35 out of 70 records, at (1, 1e-5), replace-one::

    from rfed.privacy import EventSpec, PrivacyBudget, calibrate
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5)
    cal = calibrate(
        lambda z: [(EventSpec.make("gaussian", z, "without_replacement",
                                   dataset_size=70, sample_size=35), 300)],
        budget,
    )
    cal.noise_multiplier, cal.epsilon      # z, and the certified epsilon (<= 1.0, >= 0.9)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from rfed.privacy import _rdp
from rfed.privacy._checks import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from rfed.privacy.accountants import (
    DEFAULT_PLD_DISCRETIZATION,
    DP_ACCOUNTING_VERSION,
    METHODS,
    NEIGHBORING,
    EventSpec,
    compose_epsilon,
)

__all__ = [
    "PrivacyBudget",
    "public_counts",
    "check_public_sizes",
    "Certificate",
    "Calibration",
    "default_delta",
    "check_delta_for_dataset",
    "check_planned_round",
    "certify",
    "calibrate",
]

#: With ``method='auto'``, PLD refines an RDP epsilon only up to this value.
PLD_EPSILON_CAP = 50.0
#: The default delta never exceeds this, whatever the dataset size.
DEFAULT_DELTA_CAP = 1e-5
_METHOD_CHOICES = METHODS + ("auto",)
_MAX_MULTIPLIER = 1e6
_MIN_MULTIPLIER = 1e-6


def default_delta(min_dataset_size: int) -> float:
    """``min(1e-5, 1 / (10 N))`` for the smallest local dataset size ``N``.

    Parameters
    ----------
    min_dataset_size : int
        ``N``, the smallest local dataset size.

    Returns
    -------
    float
        The default delta.
    """
    n = check_int(min_dataset_size, "min_dataset_size")
    return min(DEFAULT_DELTA_CAP, 1.0 / (10.0 * n))


def check_delta_for_dataset(delta: float, min_dataset_size: int, name: str = "delta") -> float:
    """Return ``delta`` if it is below ``1 / N``; raise ``ValueError`` explaining why otherwise.

    Parameters
    ----------
    delta : float
        The delta to check.
    min_dataset_size : int
        ``N``, the smallest local dataset size.
    name : str
        The argument's name in the message.

    Returns
    -------
    float
        ``delta``.
    """
    delta = check_delta(delta, name)
    n = check_int(min_dataset_size, "min_dataset_size")
    if delta >= 1.0 / n:
        raise ValueError(
            f"argument '{name}' ({delta:g}) must be below 1/N = {1.0 / n:.3g} for the smallest "
            f"local dataset (N = {n} records): with delta >= 1/N a mechanism may publish a whole "
            f"record in the clear and still satisfy the guarantee; use at most "
            f"{default_delta(n):.3g}"
        )
    return delta


def check_planned_round(
    name: str, rounds_done: int, planned_rounds: int | None, target_epsilon: float | None,
    what: str = "the noise", unit: str = "rounds",
) -> None:
    """Raise ``RuntimeError`` before a round beyond the run ``what`` was calibrated for.

    A budget-first algorithm spends its budget over ``planned_rounds``; one more round would
    release more than the certificate covers. ``planned_rounds=None`` (no budget) never raises.

    Parameters
    ----------
    name : str
        The algorithm's name, for the message.
    rounds_done : int
        Rounds already run.
    planned_rounds : int or None
        The rounds the budget was calibrated for (``None``: no budget).
    target_epsilon : float or None
        The budget's epsilon, for the message.
    what, unit : str
        What was calibrated and the unit of a round, for the message.

    Raises
    ------
    RuntimeError
        One more round would exceed the calibrated run.
    """
    if planned_rounds is not None and rounds_done >= planned_rounds:
        eps = "" if target_epsilon is None else f" at epsilon={target_epsilon:g}"
        raise RuntimeError(
            f"{name}: {what} was calibrated for n_rounds={planned_rounds} {unit}{eps}; another "
            f"{unit[:-1]} would exceed the budget (plan a longer run with a larger n_rounds)"
        )


def check_public_sizes(public_sizes: Any, name: str = "public_sizes"
                       ) -> int | tuple[int, ...] | None:
    """``None``, one int >= 1, or a tuple of ints >= 1 (one per agent); lists become tuples.

    Parameters
    ----------
    public_sizes : None, int or sequence of int
        The declared public local dataset sizes.
    name : str
        The argument's name in the message.

    Returns
    -------
    None, int or tuple of int
        The validated sizes.
    """
    if public_sizes is None:
        return None
    if isinstance(public_sizes, (list, tuple, np.ndarray)):
        sizes = tuple(check_int(v, name) for v in np.asarray(public_sizes, dtype=object).ravel())
        if not sizes:
            raise ValueError(f"argument '{name}' must hold at least one size")
        return sizes
    return check_int(public_sizes, name)


def public_counts(counts: np.ndarray, neighboring: str, public_sizes: Any = None,
                  name: str = "public_sizes") -> np.ndarray:
    """The local dataset sizes that a private algorithm may use, shape ``(n_agents,)``.

    This is the one gateway through which an algorithm reads dataset sizes for anything that
    shapes its releases (normalisers, sampling rates, noise scales, aggregation weights, the
    default delta and its ``1/N`` check):

    * ``'replace_one'``: the true sizes ``counts`` (a replaced record leaves them unchanged, so
      they are public); ``public_sizes`` must be ``None``;
    * ``'add_remove_one'``: the true sizes are exactly what differs between neighbours, so they
      are never used: the user declares PUBLIC nominal sizes (``public_sizes``, one int for every
      agent or one per agent) and they stand in for ``N_i`` everywhere. A missing declaration
      is refused with a message that says why.

    Parameters
    ----------
    counts : int array, shape ``(n_agents,)``
        The true local dataset sizes (used only under replace-one).
    neighboring : {'replace_one', 'add_remove_one'}
    public_sizes : int or sequence of int, optional
    name : str
        The user's name for ``public_sizes`` in error messages.

    Returns
    -------
    int array, shape ``(n_agents,)``
    """
    check_choice(neighboring, "neighboring", NEIGHBORING)
    counts = np.asarray(counts)
    sizes = check_public_sizes(public_sizes, name)
    if neighboring == "replace_one":
        if sizes is not None:
            raise ValueError(
                f"argument '{name}' is for neighboring='add_remove_one': under replace-one a "
                "neighbour has the same dataset sizes, so the true sizes are public and used"
            )
        return counts
    if sizes is None:
        raise ValueError(
            f"neighboring='add_remove_one' needs argument '{name}': adding or removing a record "
            "changes the local dataset size, so no normaliser, sampling rate, noise scale, "
            "weight or default delta may be computed from it; declare PUBLIC nominal sizes "
            f"(e.g. PrivacyBudget(..., neighboring='add_remove_one', {name}=N), one int for "
            "every agent or one per agent) and they are used in its place"
        )
    out = np.asarray(sizes, dtype=np.int64)
    if out.ndim == 0:
        return np.full(counts.shape, int(out), dtype=np.int64)
    if out.shape != counts.shape:
        raise ValueError(f"argument '{name}' has {out.size} sizes for {counts.size} agents; give "
                         "one int for every agent or one per agent")
    return out


@dataclasses.dataclass(frozen=True)
class PrivacyBudget:
    """The privacy a user asks of a whole run.

    Parameters
    ----------
    epsilon : float
        Target epsilon of the finished run, per agent's dataset (> 0, finite).
    delta : float, optional
        Target delta; ``None`` means :func:`default_delta` of the smallest local dataset (the
        smallest declared public size under add/remove).
    neighboring : {'replace_one', 'add_remove_one'}
        Record-level neighbouring relation (replace-one is the papers' and makes dataset sizes
        public; add/remove hides them).
    method : {'auto', 'rdp', 'pld'}
        Accountant. ``'auto'`` takes, for every query, the smaller of the RDP and PLD values
        among those that support the events (both are upper bounds).
    public_sizes : int or tuple of int, optional
        Under ``'add_remove_one'``: PUBLIC nominal local dataset sizes (one int for every agent,
        or one per agent) that every normaliser, sampling rate, noise scale, weight and the
        default delta use in place of the private true sizes (:func:`public_counts`). Required
        by the algorithms whose releases need a size; refused under replace-one.
    """

    epsilon: float
    delta: float | None = None
    neighboring: str = "replace_one"
    method: str = "auto"
    public_sizes: int | tuple[int, ...] | None = None

    def __post_init__(self):
        # stored as checked floats: a string such as '1' is refused, not kept
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.delta is not None:
            object.__setattr__(self, "delta", check_delta(self.delta))
        check_choice(self.neighboring, "neighboring", NEIGHBORING)
        check_choice(self.method, "method", _METHOD_CHOICES)
        object.__setattr__(self, "public_sizes", check_public_sizes(self.public_sizes))
        if self.public_sizes is not None and self.neighboring != "add_remove_one":
            raise ValueError(
                "argument 'public_sizes' is for neighboring='add_remove_one': under replace-one "
                "a neighbour has the same dataset sizes, so the true sizes are public and used"
            )

    def public_counts(self, counts: np.ndarray) -> np.ndarray:
        """The sizes the algorithm may use under this budget's relation (:func:`public_counts`).

        Parameters
        ----------
        counts : int array, shape ``(n_agents,)``
            The true local dataset sizes.

        Returns
        -------
        int array, shape ``(n_agents,)``
        """
        return public_counts(counts, self.neighboring, self.public_sizes)

    def resolve_delta(self, min_dataset_size: int) -> float:
        """The delta to certify: the given one (checked against ``1/N``) or the default.

        ``min_dataset_size`` must be a public size: the smallest of :meth:`public_counts`.

        Parameters
        ----------
        min_dataset_size : int
            The smallest public local dataset size.

        Returns
        -------
        float
        """
        if self.delta is None:
            return default_delta(min_dataset_size)
        return check_delta_for_dataset(self.delta, min_dataset_size)

    def to_dict(self) -> dict[str, Any]:
        """The budget's fields.

        Returns
        -------
        dict
            JSON-serializable.
        """
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Certificate:
    """A certified ``(epsilon, delta)`` and how it was obtained.

    Parameters
    ----------
    epsilon, delta : float
        The certified guarantee.
    method : {'rdp', 'pld'}
        The accountant that certified it.
    neighboring : {'add_remove_one', 'replace_one'}
        The neighbouring relation of the guarantee.
    pld_discretization : float
        Value discretization of the PLD accountant.
    """

    epsilon: float
    delta: float
    method: str
    neighboring: str
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION

    @property
    def accountant(self) -> str:
        """E.g. ``'dp-accounting 0.6.0 RDP (curves: rfed-vectorized-1), replace_one'``."""
        engine = f" (curves: {_rdp.IMPLEMENTATION})" if self.method == "rdp" else ""
        return (
            f"dp-accounting {DP_ACCOUNTING_VERSION} {self.method.upper()}{engine}, "
            f"record-level {self.neighboring}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The certificate's fields and its ``accountant`` text.

        Returns
        -------
        dict
            JSON-serializable.
        """
        out = dataclasses.asdict(self)
        out["accountant"] = self.accountant
        return out


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate`: a noise multiplier and the certificate of its run.

    Parameters
    ----------
    noise_multiplier : float
        The calibrated noise multiplier.
    certificate : Certificate
        The certified guarantee of the planned run at that multiplier.
    target_epsilon : float
        The budget's epsilon.
    """

    noise_multiplier: float
    certificate: Certificate
    target_epsilon: float

    @property
    def epsilon(self) -> float:
        """The certified epsilon of the planned run."""
        return self.certificate.epsilon

    @property
    def delta(self) -> float:
        """The certificate's delta."""
        return self.certificate.delta

    def to_dict(self) -> dict[str, Any]:
        """The multiplier, the target and the certificate's fields.

        Returns
        -------
        dict
            JSON-serializable.
        """
        return {
            "noise_multiplier": self.noise_multiplier,
            "target_epsilon": self.target_epsilon,
            **self.certificate.to_dict(),
        }


def _supported(events: Sequence[tuple[EventSpec, int]], method: str, neighboring: str) -> bool:
    try:
        for spec, count in events:
            if count:
                spec.check_supported(method, neighboring)
    except ValueError:
        return False
    return True


def _event_pairs(events: Iterable[Any], name: str) -> list[tuple[EventSpec, int]]:
    """``events`` as a list of ``(EventSpec, count)`` pairs with counts ``>= 0``, or a
    ``TypeError`` naming ``name`` and the first item that is not such a pair."""
    pairs = []
    for i, item in enumerate(events):
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and isinstance(item[0], EventSpec)):
            raise TypeError(f"{name} must hold (EventSpec, count) pairs, e.g. "
                            f"(EventSpec.make('gaussian', z), 300); item {i} is {item!r}")
        pairs.append((item[0], check_int(item[1], "count", minimum=0)))
    return pairs


def certify(
    events: Iterable[tuple[EventSpec, int]],
    delta: float,
    neighboring: str = "replace_one",
    method: str = "auto",
    *,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
) -> Certificate:
    """Certified epsilon at ``delta`` of the adaptive composition of ``events``.

    Parameters
    ----------
    events : iterable of (EventSpec, int)
        Events of one agent (the worst-off one) with their counts.
    delta : float
    neighboring : {'replace_one', 'add_remove_one'}
    method : {'auto', 'rdp', 'pld'}
        ``'auto'``: the smaller of the values of the accountants that support every event (RDP
        first; PLD refines it only when the RDP epsilon is at most :data:`PLD_EPSILON_CAP`).

    Returns
    -------
    Certificate

    Raises
    ------
    ValueError
        If no accountant supports the events (the message names the event).
    TypeError
        An item of ``events`` that is not an ``(EventSpec, count)`` pair.
    """
    events = _event_pairs(events, "argument 'events'")
    delta = check_delta(delta)
    check_choice(neighboring, "neighboring", NEIGHBORING)
    check_choice(method, "method", _METHOD_CHOICES)
    methods = METHODS if method == "auto" else (method,)
    usable = [m for m in methods if _supported(events, m, neighboring)]
    if not usable:
        # let the accountant raise the precise message
        compose_epsilon(events, delta, methods[0], neighboring)
    best: tuple[float, str] | None = None
    for m in usable:
        if m == "pld" and best is not None and best[0] > PLD_EPSILON_CAP:
            # PLD's grid spans the privacy-loss range: at tiny noise it needs gigabytes and
            # minutes to refine an epsilon that large, and the guarantee is weak either way
            continue
        eps = compose_epsilon(events, delta, m, neighboring, pld_discretization=pld_discretization)
        if best is None or eps < best[0]:
            best = (eps, m)
    assert best is not None  # 'usable' is not empty and its first method is never skipped
    return Certificate(best[0], delta, best[1], neighboring, pld_discretization)


def calibrate(
    events_for: Callable[[float], Iterable[tuple[EventSpec, int]]],
    budget: PrivacyBudget,
    *,
    delta: float | None = None,
    rtol: float = 1e-3,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
) -> Calibration:
    """Smallest noise multiplier ``z`` whose whole planned run certifies ``budget``.

    Parameters
    ----------
    events_for : callable
        ``events_for(z)`` lists the ``(EventSpec, count)`` events of the worst-off agent over the
        whole planned run when the base noise multiplier is ``z``; its epsilon must not increase
        with ``z``.
    budget : PrivacyBudget
    delta : float, optional
        The delta to certify (default ``budget.delta``; one of them is required: resolve the
        default with :meth:`PrivacyBudget.resolve_delta` first).
    rtol : float
        Relative width of the final bracket on ``z`` (1e-3 gives a certified epsilon within a
        fraction of a percent of the target, well above 0.9 of it).

    Returns
    -------
    Calibration
        ``z`` with ``epsilon(z) <= budget.epsilon`` and ``epsilon(z / (1 + rtol)) > budget.epsilon``
        (or the floor 1e-6 when even that meets the target).

    Raises
    ------
    ValueError
        If the target needs a multiplier above 1e6, or the events cannot be accounted.
    TypeError
        ``events_for(z)`` lists an item that is not an ``(EventSpec, count)`` pair.
    """
    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {budget!r}")
    delta = budget.delta if delta is None else delta
    if delta is None:
        raise ValueError(
            "argument 'delta' is required when the budget has none (use budget.resolve_delta(N))"
        )
    delta = check_delta(delta)
    rtol = check_positive(rtol, "rtol")
    target = budget.epsilon
    cache: dict[float, Certificate] = {}

    def cert(z: float) -> Certificate:
        if z not in cache:
            events = _event_pairs(events_for(z), "argument 'events_for': events_for(z)")
            cache[z] = certify(events, delta, budget.neighboring, budget.method,
                               pld_discretization=pld_discretization)
        return cache[z]

    lo, hi = _bracket(lambda z: cert(z).epsilon, target)
    if lo is None:
        return Calibration(hi, cert(hi), target)
    hi = _shrink_bracket(lambda z: cert(z).epsilon, target, lo, hi, rtol)
    return Calibration(hi, cert(hi), target)


def _bracket(
    epsilon_of: Callable[[float], float], target: float, name: str = "epsilon"
) -> tuple[float | None, float]:
    """``lo, hi`` with ``epsilon_of(lo) > target >= epsilon_of(hi)`` (``lo`` None at the floor).

    Steps are scaled by ``epsilon / target`` (epsilon falls roughly like ``1 / z``), so the
    bracket is usually found in two or three calls.
    """
    z = 1.0
    e = epsilon_of(z)
    if e > target:
        lo = z
        while True:
            ratio = e / target if math.isfinite(e) else 1e3
            z = lo * min(max(1.25 * ratio, 1.5), 1e3)
            if z > _MAX_MULTIPLIER:
                raise ValueError(
                    f"argument '{name}' ({target:g}) needs a noise multiplier above "
                    f"{_MAX_MULTIPLIER:g} for this run; raise the budget or shorten the run"
                )
            e = epsilon_of(z)
            if e <= target:
                return lo, z
            lo = z
    hi = z
    while True:
        ratio = e / target
        z = hi * max(min(0.8 * ratio, 1 / 1.5), 1e-3)
        if z < _MIN_MULTIPLIER:
            return None, hi
        e = epsilon_of(z)
        if e > target:
            return z, hi
        hi = z


def _shrink_bracket(
    epsilon_of: Callable[[float], float], target: float, lo: float, hi: float, rtol: float
) -> float:
    """Shrink ``epsilon_of(lo) > target >= epsilon_of(hi)`` until ``hi / lo <= 1 + rtol``.

    Safeguarded secant on ``log epsilon`` against ``log z`` (epsilon is smooth and decreasing in
    ``z``, close to a power law), with a bisection step whenever the secant would not shrink the
    bracket by half: about 6 accountant calls instead of the ~20 of plain bisection. Once the
    bracket is narrow, the next trial points straddle the secant estimate by ``rtol / 2`` so that
    one pair of calls usually closes it. Returns ``hi``.
    """
    log_t = math.log(target)
    while hi / lo > 1.0 + rtol:
        f_lo = math.log(epsilon_of(lo)) - log_t
        e_hi = epsilon_of(hi)
        f_hi = math.log(e_hi) - log_t if e_hi > 0 else -math.inf
        width = math.log(hi / lo)
        frac = f_lo / (f_lo - f_hi) if math.isfinite(f_lo) and math.isfinite(f_hi) else 0.5
        frac = min(max(frac, 0.0), 1.0)
        estimate = math.log(lo) + frac * width
        if width <= 8.0 * rtol:
            # straddle the estimate: above it for hi, below it for lo
            above = min(math.exp(estimate) * (1.0 + 0.5 * rtol), hi)
            if above < hi and epsilon_of(above) <= target:
                hi = above
            below = max(hi / (1.0 + rtol), lo)
            if below > lo and epsilon_of(below) > target:
                lo = below
            elif below > lo:
                hi = below
            continue
        step = estimate - math.log(lo)
        if not 0.1 * width <= step <= 0.9 * width:
            step = 0.5 * width if not 0.0 < step < width else min(max(step, 0.1 * width),
                                                                  0.9 * width)
        mid = lo * math.exp(step)
        if epsilon_of(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi
