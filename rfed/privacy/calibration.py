"""Noise calibration: the smallest noise that meets a target (epsilon, delta).

* :func:`calibrate_noise_multiplier` bisects on the certified accountant (RDP or PLD) for a
  subsampled Gaussian (or Laplace) mechanism composed ``steps`` times. The returned multiplier is
  one the accountant certifies (``epsilon(z) <= target``) and is within ``rtol`` of the smallest
  such value (epsilon decreases as the multiplier grows).
* :func:`calibrate_sigma` multiplies by the sensitivity to give the noise standard deviation.
* The papers' closed forms, inverted where they are invertible:

  - DP-RSGD / DP-RSVRG / DO-ADP / DP-DDA / DPDL give sigma from the target directly
    (:mod:`rfed.privacy.papers`);
  - :func:`prirfed_local_epsilon` inverts PriRFed Theorem 4.2: the per-agent budget that makes
    the whole run meet a target epsilon';
  - :func:`dpdgt_theta0` inverts DP-DGT eq. (38) (epsilon is proportional to 1 / theta_0);
  - :func:`rfed.privacy.papers.doadp_sigma_for_delta` and
    :func:`rfed.privacy.papers.dpdda_sigma_for_delta` solve the papers' proof chains for a
    chosen small delta.
"""

from __future__ import annotations

import math

from rfed.privacy._checks import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)
from rfed.privacy.accountants import (
    DEFAULT_PLD_DISCRETIZATION,
    MECHANISMS,
    METHODS,
    EventSpec,
    compose_epsilon,
)
from rfed.privacy.budget import _bracket, _shrink_bracket
from rfed.privacy.papers import dpdgt_epsilon, prirfed_privacy

__all__ = [
    "calibrate_noise_multiplier",
    "calibrate_sigma",
    "prirfed_local_epsilon",
    "dpdgt_theta0",
]



def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sampling_rate: float = 1.0,
    steps: int = 1,
    *,
    method: str = "rdp",
    sampling: str = "poisson",
    neighboring: str | None = None,
    dataset_size: int | None = None,
    mechanism: str = "gaussian",
    rtol: float = 1e-4,
    pld_discretization: float = DEFAULT_PLD_DISCRETIZATION,
) -> float:
    """Smallest noise multiplier whose composition meets ``(target_epsilon, delta)``.

    Parameters
    ----------
    target_epsilon : float
        > 0.
    delta : float
        In (0, 1).
    sampling_rate : float
        In (0, 1].
    steps : int
        Number of compositions.
    method : {'rdp', 'pld'}
    sampling : {'poisson', 'without_replacement', 'none'}
    neighboring : {'add_remove_one', 'replace_one'}, optional
        Default: ``'replace_one'`` for sampling without replacement, else ``'add_remove_one'``.
    dataset_size : int, optional
        For sampling without replacement.
    mechanism : {'gaussian', 'laplace'}
    rtol : float
        Relative width of the final bracket.
    pld_discretization : float

    Returns
    -------
    float
        ``z`` with ``epsilon(z) <= target_epsilon`` and ``epsilon(z / (1 + rtol)) > target``.
        Multiply by the sensitivity for the noise std (:func:`calibrate_sigma`).

    Raises
    ------
    ValueError
        Bad arguments, an event the accountant cannot handle, or a target that needs a
        multiplier above 1e6.
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    steps = check_int(steps, "steps")
    check_choice(method, "method", METHODS)
    check_choice(mechanism, "mechanism", MECHANISMS)
    rtol = check_positive(rtol, "rtol")
    if neighboring is None:
        neighboring = "replace_one" if sampling == "without_replacement" else "add_remove_one"

    def eps(z: float) -> float:
        spec = EventSpec.make(mechanism, z, sampling, sampling_rate, dataset_size)
        return compose_epsilon(
            [(spec, steps)], delta, method, neighboring, pld_discretization=pld_discretization
        )

    lo, hi = _bracket(eps, target, "target_epsilon")
    if lo is None:
        return hi
    return _shrink_bracket(eps, target, lo, hi, rtol)


def calibrate_sigma(
    target_epsilon: float,
    delta: float,
    sensitivity: float,
    sampling_rate: float = 1.0,
    steps: int = 1,
    **kwargs,
) -> float:
    """Noise standard deviation ``sensitivity * calibrate_noise_multiplier(...)``.

    ``sensitivity`` is the L2 sensitivity under the chosen neighbouring relation (e.g.
    :func:`rfed.privacy.accountants.clipped_mean_sensitivity`). Keyword arguments go to
    :func:`calibrate_noise_multiplier`.

    Parameters
    ----------
    target_epsilon, delta : float
        The budget.
    sensitivity : float
        L2 sensitivity of one release.
    sampling_rate : float
        Sampling rate of one release.
    steps : int
        Number of releases composed.
    **kwargs
        Passed to :func:`calibrate_noise_multiplier`.

    Returns
    -------
    float
        The noise standard deviation.
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    return sensitivity * calibrate_noise_multiplier(
        target_epsilon, delta, sampling_rate, steps, **kwargs
    )


def prirfed_local_epsilon(
    target_epsilon: float,
    n_agents: int,
    s: int,
    rounds: int,
    delta_hat: float,
    local_delta: float,
    rtol: float = 1e-10,
) -> float:
    """The largest per-agent epsilon for which PriRFed Theorem 4.2 gives ``eps' <= target``.

    Inverts :func:`rfed.privacy.papers.prirfed_privacy` (eps' increases with the local epsilon)
    by bisection. Feed the result to :func:`rfed.privacy.papers.dp_rsgd_sigma` or
    :func:`rfed.privacy.papers.dp_rsvrg_sigma` for the agents' noise.

    Parameters
    ----------
    target_epsilon : float
        The target ``eps'`` of the whole run.
    n_agents, s : int
        ``N`` agents, ``s`` sampled per round.
    rounds : int
        ``T``.
    delta_hat : float
        Slack of the advanced composition.
    local_delta : float
        Each local run's delta.
    rtol : float
        Relative tolerance of the bisection.

    Returns
    -------
    float
        The per-agent epsilon of one local run.
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    local_delta = check_delta(local_delta, "local_delta")
    rtol = check_positive(rtol, "rtol")
    lo, hi = 0.0, 1.0

    def total(e: float) -> float:
        return prirfed_privacy(n_agents, s, e, local_delta, rounds, delta_hat).epsilon

    while total(hi) <= target:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if mid > 0 and total(mid) <= target:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError(
            f"argument 'target_epsilon' ({target:g}) cannot be met by Theorem 4.2 for this "
            "configuration"
        )
    return lo


def dpdgt_theta0(
    target_epsilon: float,
    alpha0: float,
    q: float,
    q_xi: float,
    q_zeta: float,
    mu: float,
    gamma: float,
    phi: float,
    adjacency_delta: float,
    q_c: float | None = None,
) -> float:
    """Initial Laplace scale ``theta_0 = theta_xi0 = theta_zeta0`` meeting DP-DGT eq. (38).

    Eq. (38) is ``eps = c / theta_0`` for equal initial scales, so
    ``theta_0 = eps(theta_0 = 1) / target``.

    Parameters
    ----------
    target_epsilon : float
        The target pure-DP epsilon.
    alpha0, q, q_xi, q_zeta, mu, gamma, phi, adjacency_delta, q_c
        As in :func:`rfed.privacy.papers.dpdgt_epsilon`.

    Returns
    -------
    float
        ``theta_0``.
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    unit = dpdgt_epsilon(alpha0, q, 1.0, q_xi, 1.0, q_zeta, mu, gamma, phi, adjacency_delta, q_c)
    return unit / target
