"""What the private baselines share: their result, the calibration of one agent's releases."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from rfed.privacy.accountants import EventSpec
from rfed.privacy.budget import Calibration, PrivacyBudget, calibrate
from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE
from rfed.privacy.secure import is_secure

__all__ = [
    "BaselineResult", "calibrate_releases", "privacy_report", "clip_rows", "clip_scales", "finish",
    "is_secure",
]


@dataclasses.dataclass
class BaselineResult:
    """The output of a private baseline.

    Attributes
    ----------
    x : array
        The released estimate (a point of the problem's manifold).
    cost : float
        The problem's global cost at ``x``.
    privacy : dict
        The privacy report (same keys as the algorithms' reports).
    info : dict
        Noise levels, clipping counts and other diagnostics.
    """

    x: np.ndarray
    cost: float
    privacy: dict[str, Any]
    info: dict[str, Any]


@functools.lru_cache(maxsize=256)
def calibrate_releases(
    budget: PrivacyBudget, n_releases: int, min_dataset_size: int, secure: bool = False
) -> tuple[Calibration, float]:
    """Noise multiplier of ``n_releases`` Gaussian releases per agent meeting ``budget``.

    ``min_dataset_size`` must be public (the smallest of ``budget.public_counts``). A
    ``secure`` run (discrete Gaussian on a grid) is calibrated and certified with RDP, as
    every secure release in rfed: the Canonne-Kamath-Steinke comparison bounds Renyi
    divergences, not the continuous Gaussian's privacy-loss distribution.

    Returns the calibration and the delta it certifies (the user's, or the default for the
    smallest local dataset). A pure function of public numbers, computed in the process and
    kept in memory (repeated runs of one configuration calibrate once).

    Parameters
    ----------
    budget : PrivacyBudget
    n_releases : int
        Releases per agent.
    min_dataset_size : int
        The smallest public local size.
    secure : bool

    Returns
    -------
    calibration : Calibration
    delta : float
    """
    delta = budget.resolve_delta(min_dataset_size)
    if secure:
        budget = dataclasses.replace(budget, method="rdp")
    cal = calibrate(lambda z: [(EventSpec.make("gaussian", z), n_releases)], budget, delta=delta)
    return cal, delta


def privacy_report(
    cal: Calibration, budget: PrivacyBudget, assumptions: list[str], rng: Any
) -> dict[str, Any]:
    """The report dict every rfed algorithm returns (certified figure first).

    Parameters
    ----------
    cal : Calibration
    budget : PrivacyBudget
    assumptions : list of str
        What the certificate assumes, one sentence each.
    rng : numpy.random.Generator or SecureRandom
        The run's source (secure mode is reported).

    Returns
    -------
    dict
    """
    secure = is_secure(rng)
    return {
        "private": True,
        "epsilon_certified": cal.epsilon,
        "delta": cal.delta,
        "accountant": cal.certificate.accountant,
        "neighboring": budget.neighboring,
        "level": "record",
        "assumptions": [*assumptions, OUTSIDE_THE_GUARANTEE],
        "target_epsilon": budget.epsilon,
        "noise_multiplier": cal.noise_multiplier,
        "epsilon_paper": None,
        "paper": None,
        "secure": secure,
        "replayable_from_seed": not secure,
    }


def clip_rows(z: np.ndarray, bound: float) -> tuple[np.ndarray, int]:
    """Scale every row of ``z`` (last axis) to norm at most ``bound``; count the rows clipped.

    Parameters
    ----------
    z : ndarray, shape ``(..., d)``
    bound : float

    Returns
    -------
    clipped : ndarray, shape ``(..., d)``
    n_clipped : int
    """
    scale, n_clipped = clip_scales(z, bound)
    return z * scale, n_clipped


def clip_scales(z: np.ndarray, bound: float) -> tuple[np.ndarray, int]:
    """The factors of :func:`clip_rows`, ``clip_rows(z, bound)[0] == z * scale`` (1 for the rows
    within the bound), and the rows clipped: for a caller that writes the product in place.

    Parameters
    ----------
    z : ndarray, shape ``(..., d)``
        The rows (last axis).
    bound : float
        The largest norm a row keeps.

    Returns
    -------
    scale : ndarray, shape ``(..., 1)``
        ``min(1, bound / ||row||)`` per row.
    n_clipped : int
        Rows whose norm exceeds ``bound``.
    """
    norms = np.linalg.norm(z, axis=-1, keepdims=True)
    over = norms > bound
    return np.where(over, bound / np.where(over, norms, 1.0), 1.0), int(np.sum(over))


def finish(
    problem: Any, x: np.ndarray, cal: Calibration, budget: PrivacyBudget,
    assumptions: list[str], rng: Any, **info: Any
) -> BaselineResult:
    """The result of a baseline: its estimate, the cost there, the report and diagnostics.

    Parameters
    ----------
    problem : Problem
    x : ndarray, shape ``point_shape``
        The estimate.
    cal : Calibration
    budget : PrivacyBudget
    assumptions : list of str
    rng : numpy.random.Generator or SecureRandom
    **info
        Diagnostics kept in ``info``.

    Returns
    -------
    BaselineResult
    """
    return BaselineResult(x=x, cost=float(problem.cost(x)),
                          privacy=privacy_report(cal, budget, assumptions, rng), info=info)
