"""Centralized DP-SGD on the pooled data: the reference a decentralized method can at best approach.

:class:`DPSGD` trains on the union of all agents' records as ONE data set of ``N`` records (a
trusted curator holds everything), with the DP-SGD of Abadi et al. 2016: per round, a minibatch
is sampled from the ``N`` records, every per-sample gradient is clipped to the public norm ``C``,
the clipped sum is divided by the public normaliser ``B`` (the expected batch size) and Gaussian
noise is added; the iterate takes a (momentum) step on the noisy mean.

Privacy is budget-first and certified: ``budget=PrivacyBudget(epsilon, delta)`` with the planned
``n_rounds`` sets the noise multiplier ``z`` (:func:`rfed.privacy.budget.calibrate`, the RDP and
PLD accountants of dp-accounting) so that the finished run is ``(epsilon, delta)``-DP with respect
to one record of the pooled data set, under the budget's neighbouring relation:

* ``sampling='poisson'``: each record joins the minibatch independently with probability
  ``q = B / N`` (the batch size varies; the normaliser stays ``B``), accounted as the
  Poisson-subsampled Gaussian; sensitivity ``C / B`` (add/remove) or ``2 C / B`` (replace-one);
* ``sampling='without_replacement'``: a uniformly random subset of exactly ``B`` records,
  accounted as sampling without replacement (replace-one only; dp-accounting's RDP bound of Wang,
  Balle and Kasiviswanathan 2019), sensitivity ``2 C / B``.

All noise goes through :func:`rfed.privacy.mechanisms.gaussian_release` and the sensitivity the
account records is :func:`~rfed.privacy.mechanisms.release_sensitivity` (secure mode: OS
randomness, discrete Gaussian on a grid, RDP only). The batch selection is secret (only the noisy
mean is released), as the sampling theorems require. The clip ``C``, ``B``, the step size and
the number of rounds are public numbers chosen by the user (on public data), never from the
private records.

References
----------
* Martin Abadi, Andy Chu, Ian Goodfellow, H. Brendan McMahan, Ilya Mironov, Kunal Talwar and Li
  Zhang. Deep Learning with Differential Privacy. Proceedings of the 2016 ACM SIGSAC Conference
  on Computer and Communications Security (CCS), 2016. arXiv:1607.00133.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed.algorithms.base import Algorithm, check_n_rounds, evaluate_point, step_size_at
from rfed.algorithms.private import not_private_report, privacy_report
from rfed.manifolds import Euclidean, as_generator
from rfed.privacy.accountants import EventSpec, clipped_mean_sensitivity
from rfed.privacy.budget import (
    Certificate,
    PrivacyBudget,
    calibrate,
    certify,
    check_delta_for_dataset,
    check_planned_round,
    default_delta,
)
from rfed.privacy.mechanisms import GaussianNoise, release_sensitivity
from rfed.privacy.secure import is_secure
from rfed.problems.base import Problem
from rfed.problems.outer_gradients import row_sq_norms

__all__ = ["DPSGD", "DPSGDState"]

_SAMPLING = ("poisson", "without_replacement")


@dataclass(frozen=True)
class _Pool:
    """The pooled records of one problem, built once per problem (not once per step).

    Attributes
    ----------
    data, mask : the problem's ``data`` dict and ``mask`` this pool was built from (a problem
        whose arrays were replaced builds a new pool).
    flat : dict of str to array, each of shape ``(n_agents * n_max, ...)``
        The data arrays with the agent and row axes merged (a view of contiguous arrays).
    index : int array, shape ``(N,)``
        Positions of the ``N`` held records in ``flat``, agent-major (``np.nonzero``'s order).
    every_row : bool
        Whether every row of ``flat`` is held (no padding): ``index`` is then ``arange(N)``
        and a batch's positions are its rows.
    sq_norms : float array, shape ``(n_agents * n_max,)``, or None
        ``||a_j||^2`` of every row of ``flat['features']``
        (:func:`~rfed.problems.outer_gradients.row_sq_norms`, the values the problem's clipped
        sum would compute for a batch) when the problem's ``clipped_grad_sum`` takes them
        (``takes_feature_sq_norms``); ``None`` otherwise.
    """

    data: dict
    mask: np.ndarray
    flat: dict
    index: np.ndarray
    every_row: bool
    sq_norms: np.ndarray | None


# problem -> its pool; weak keys: a pool lives as long as its problem and is never pickled
_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pooled(problem: Problem) -> _Pool:
    """The pooled records of ``problem`` (cached per problem)."""
    data, mask = problem.data, problem.mask
    pool = _POOLS.get(problem)
    if pool is None or pool.data is not data or pool.mask is not mask:
        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in data.items()}
        sq_norms = None
        if getattr(problem, "takes_feature_sq_norms", False) and "features" in flat:
            sq_norms = row_sq_norms(flat["features"])
        index = np.flatnonzero(mask)
        pool = _Pool(data=data, mask=mask, flat=flat, index=index,
                     every_row=index.size == mask.size, sq_norms=sq_norms)
        _POOLS[problem] = pool
    return pool


@dataclass
class DPSGDState:
    """State of a centralized DP-SGD run (picklable).

    Attributes
    ----------
    t : int
        Rounds done.
    x : array, shape ``point_shape``
    m : array, shape ``point_shape``
        Momentum (heavy ball).
    rng : Generator or SecureRandom
    ledger : _PooledAccount or None
        The run's privacy account (``None`` for a non-private run).
    batch_sizes : int
        Records used so far (sum of the minibatch sizes; Poisson batches vary).
    """

    t: int
    x: np.ndarray
    m: np.ndarray
    rng: Any
    ledger: Any = None
    batch_sizes: int = 0


class _PooledAccount:
    """Rounds of one Gaussian event on the pooled data set, certified on demand."""

    level = "record"

    def __init__(self, spec_unit: EventSpec, noise_multiplier: float, sensitivity: float,
                 delta: float, neighboring: str, method: str, planned_rounds: int | None,
                 target_epsilon: float | None, assumptions: list[str], secure: bool,
                 mode: str, sampling_rate: float | None = None):
        self.spec = dataclasses.replace(spec_unit, noise_multiplier=float(noise_multiplier))
        self.noise_multiplier = float(noise_multiplier)
        self.sensitivity = float(sensitivity)
        self.delta = float(delta)
        self.neighboring = neighboring
        self.method = "rdp" if secure else method
        self.planned_rounds = planned_rounds
        self.target_epsilon = target_epsilon
        self.assumptions = assumptions
        self.secure = bool(secure)
        self.mode = mode
        #: Poisson inclusion probability ``B / N`` from the public pooled size.
        self.sampling_rate = sampling_rate
        #: The release of every round, its std ``z * sens`` checked here, once per run.
        self.noise = GaussianNoise(self.noise_multiplier * self.sensitivity)
        self.rounds = 0
        self._memo: dict[tuple[int, float], Certificate] = {}

    def check_can_step(self) -> None:
        check_planned_round("DP-SGD", self.rounds, self.planned_rounds, self.target_epsilon)

    def record_round(self) -> None:
        if self.planned_rounds is not None:   # (no plan: nothing to check)
            self.check_can_step()
        self.rounds += 1

    def certificate(self, delta: float | None = None) -> Certificate | None:
        delta = self.delta if delta is None else float(delta)
        if self.rounds == 0:
            return None
        key = (self.rounds, delta)
        if key not in self._memo:
            self._memo[key] = certify([(self.spec, self.rounds)], delta, self.neighboring,
                                      self.method)
        return self._memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The report every private rfed algorithm gives (same keys everywhere; JSON-ready)."""
        cert = self.certificate(delta)
        return privacy_report(
            algorithm="DP-SGD (centralized, pooled data)", rounds=self.rounds,
            planned_rounds=self.planned_rounds,
            epsilon=0.0 if cert is None else cert.epsilon,
            delta=self.delta if delta is None else float(delta),
            accountant="no release yet" if cert is None else cert.accountant,
            neighboring=self.neighboring, level=self.level, assumptions=self.assumptions,
            target_epsilon=self.target_epsilon, noise_multiplier=self.noise_multiplier,
            calibration=self.mode, secure=self.secure)


class DPSGD(Algorithm):
    r"""Centralized DP-SGD on the pooled records of a problem (all agents as one data set).

    ``x <- Exp_x(-alpha_t m)`` with ``m <- beta m + (1/B)(sum_{j in S_t} clip_C(g_j) + N(0,
    s^2 I))``, ``s = z * sens`` (on Euclidean space: plain momentum SGD on the noisy mean).

    Parameters
    ----------
    step_size : float or callable
        ``alpha`` or ``alpha(t)`` (checked every round).
    batch_size : int
        ``B``: the expected (Poisson) or exact (without replacement) minibatch size, and the
        public normaliser of the clipped sum.
    clip : float
        Public per-sample gradient norm bound ``C > 0`` (enforced by clipping). Required for a
        private run; without noise and with ``clip=None`` the gradients are not clipped.
    momentum : float
        ``beta`` in [0, 1).
    sampling : {'poisson', 'without_replacement'}
    budget : PrivacyBudget, optional
        Budget-first: the planned run of ``n_rounds`` rounds certifies ``budget`` on the pooled
        data set (delta default ``min(1e-5, 1 / (10 N))``; a delta >= 1/N is refused).
    n_rounds : int, optional
        Planned rounds (required with ``budget``); stepping past them raises.
    noise_multiplier : float, optional
        Research: ``z`` directly (noise std over the release sensitivity); the certified epsilon
        of the rounds run is reported.
    delta : float, optional
        Delta of the report when no budget is given (default ``min(1e-5, 1 / (10 N))``).

    Notes
    -----
    ``Poisson`` with ``neighboring='replace_one'`` is certified by PLD only (dp-accounting's RDP
    has no replace-one Poisson bound), so the secure mode (RDP only) needs
    ``neighboring='add_remove_one'`` or sampling without replacement with Poisson sampling.
    """

    name = "DP-SGD"

    def __init__(self, *, step_size: Any, batch_size: int, clip: float | None = None,
                 momentum: float = 0.0, sampling: str = "poisson",
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, delta: float | None = None, **kwargs):
        if "epsilon" in kwargs:
            raise TypeError("DPSGD has no 'epsilon=' argument: pass budget=PrivacyBudget(epsilon,"
                            " delta) with n_rounds= for a certified (epsilon, delta)")
        if kwargs:
            raise TypeError(f"DPSGD got unexpected keyword argument(s) {sorted(kwargs)}")
        self.step_size = step_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"argument 'batch_size' must be an int >= 1, got {batch_size!r}")
        self.batch_size = int(batch_size)
        if clip is not None:
            try:
                clip = float(clip)
            except (TypeError, ValueError):
                clip = float("nan")
            if not (math.isfinite(clip) and clip > 0):
                raise ValueError(f"argument 'clip' must be a finite number > 0 or None, got "
                                 f"{clip!r}")
        self.clip = clip
        try:
            self.momentum = float(momentum)
        except (TypeError, ValueError):
            self.momentum = float("nan")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"argument 'momentum' must be in [0, 1), got {momentum!r}")
        if sampling not in _SAMPLING:
            raise ValueError(f"argument 'sampling' must be 'poisson' or 'without_replacement', "
                             f"got {sampling!r}")
        self.sampling = sampling
        if budget is not None and noise_multiplier is not None:
            raise ValueError("give at most one of 'budget' and 'noise_multiplier'")
        if budget is not None and not isinstance(budget, PrivacyBudget):
            raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {budget!r}")
        if budget is not None and n_rounds is None:
            raise ValueError("argument 'n_rounds' (the planned run length) is required with "
                             "'budget'")
        self.budget = budget
        self.n_rounds = None if n_rounds is None else check_n_rounds(n_rounds)
        if noise_multiplier is not None:
            noise_multiplier = float(noise_multiplier)
            if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
                raise ValueError(f"argument 'noise_multiplier' must be a finite number > 0, got "
                                 f"{noise_multiplier!r}")
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        if self.private and self.clip is None:
            raise ValueError("a private DP-SGD run needs 'clip' (a public per-sample gradient "
                             "norm bound C > 0, enforced by clipping)")
        neighboring = budget.neighboring if budget is not None else "replace_one"
        if sampling == "without_replacement" and neighboring != "replace_one":
            raise ValueError("sampling='without_replacement' is accounted under "
                             "neighboring='replace_one' only (a draw of B of the private N "
                             "records has no add/remove bound); use sampling='poisson' for "
                             "add/remove, with the budget's public_sizes")
        if neighboring == "add_remove_one" and budget is not None and budget.public_sizes is None:
            raise ValueError("DP-SGD under neighboring='add_remove_one' needs the budget's "
                             "'public_sizes': the Poisson rate q = B / N may not use the "
                             "private pooled size N (declare the agents' public nominal sizes; "
                             "their sum is the pooled N)")
        self.neighboring = neighboring

    @property
    def private(self) -> bool:
        """Whether the run adds noise."""
        return self.budget is not None or self.noise_multiplier is not None

    # ------------------------------------------------------------------ privacy
    def _unit_event(self, n_records: int) -> EventSpec:
        if self.batch_size > n_records:
            raise ValueError(f"argument 'batch_size' ({self.batch_size}) exceeds the pooled data "
                             f"set ({n_records} records)")
        if self.sampling == "poisson":
            return EventSpec.make("gaussian", 1.0, "poisson",
                                  sampling_rate=self.batch_size / n_records)
        return EventSpec.make("gaussian", 1.0, "without_replacement", dataset_size=n_records,
                              sample_size=self.batch_size)

    def _pooled_size(self, problem: Problem) -> int:
        """The pooled size the run may use: the true ``N`` under replace-one (public there),
        the sum of the declared public sizes under add/remove (the true one is private)."""
        if self.neighboring == "replace_one" or self.budget is None:
            return problem.n_samples
        return int(self.budget.public_counts(problem.counts).sum())

    def _account(self, problem: Problem, rng: Any) -> _PooledAccount | None:
        if not self.private:
            return None
        n = self._pooled_size(problem)
        dim = problem.manifold.dim
        secure = is_secure(rng)
        assert self.clip is not None  # a private run has a clip (checked in __init__)
        sens = float(release_sensitivity(
            clipped_mean_sensitivity(self.clip, self.batch_size, self.neighboring), dim, rng))
        unit = self._unit_event(n)
        method = self.budget.method if self.budget is not None else "auto"
        if secure:
            method = "rdp"
        size = (f"N = {n} pooled records" if self.neighboring == "replace_one" else
                f"the declared public pooled size N = {n} (the true size is private under "
                "add/remove and never used)")
        assumptions = [
            f"per-sample gradients clipped to norm C = {self.clip:g} (enforced; public)",
            f"minibatch: {self.sampling.replace('_', ' ')} sampling, expected size "
            f"{self.batch_size} of {size}, secret; public normaliser B",
            "one data set: every agent's records pooled at a trusted curator",
        ]
        if self.budget is not None:
            delta = self.budget.resolve_delta(n)   # n public (see _pooled_size)
            budget = dataclasses.replace(self.budget, method=method)
            rounds = self.n_rounds

            def events_for(z: float):
                return [(dataclasses.replace(unit, noise_multiplier=z), rounds)]

            cal = calibrate(events_for, budget, delta=delta, rtol=1e-3)
            z, target, mode = cal.noise_multiplier, self.budget.epsilon, "budget"
        else:
            delta = default_delta(n) if self.delta is None else check_delta_for_dataset(
                self.delta, n)
            assert self.noise_multiplier is not None  # private without a budget
            z, target, mode = self.noise_multiplier, None, "noise_multiplier"
        return _PooledAccount(unit, z, sens, delta, self.neighboring, method,
                              self.n_rounds if self.budget is not None else None, target,
                              assumptions, secure, mode, sampling_rate=self.batch_size / n)

    def privacy(self, state: DPSGDState) -> dict:
        """The run's privacy report (:func:`rfed.algorithms.private.privacy_report`; without
        noise :func:`~rfed.algorithms.private.not_private_report`).

        Parameters
        ----------
        state : DPSGDState
            The state after the steps done.

        Returns
        -------
        dict
            The privacy report: the certified epsilon and delta, the accountant and the neighbouring
            relation.
        """
        if state.ledger is None:
            return not_private_report(self.name, state.t, is_secure(state.rng))
        return state.ledger.report()

    # ------------------------------------------------------------------ run
    def init(self, problem: Problem, x0: np.ndarray, rng: Any) -> DPSGDState:
        rng = rng if is_secure(rng) else as_generator(rng)
        x = np.array(x0, dtype=float)
        _pooled(problem)   # the pooled index (and row norms) built at the start, not in a step
        return DPSGDState(t=0, x=x, m=np.zeros_like(x), rng=rng,
                          ledger=self._account(problem, rng))

    def _sample(self, n: int, rng: Any, rate: float | None = None) -> np.ndarray:
        """Indices of this round's minibatch among the ``n`` pooled records held (Poisson:
        each with the public ``rate``, default ``B / n``)."""
        if self.sampling == "poisson":
            return np.flatnonzero(rng.random(n) < (self.batch_size / n if rate is None
                                                    else rate))
        # uniform subset of exactly B records: the B smallest of n uniform keys
        return np.argpartition(rng.random(n), self.batch_size - 1)[: self.batch_size]

    def step(self, problem: Problem, state: DPSGDState) -> DPSGDState:
        acc = state.ledger
        if acc is not None and acc.planned_rounds is not None:
            acc.check_can_step()
        pool = _pooled(problem)
        rng = state.rng
        rate = getattr(acc, "sampling_rate", None)
        sel = self._sample(pool.index.size, rng, rate)
        rows = sel if pool.every_row else pool.index[sel]
        if pool.sq_norms is None:
            batch = {k: v[rows][None] for k, v in pool.flat.items()}
            total = problem.clipped_grad_sum(state.x[None], batch, self.clip)[0][0]
        else:
            # a closed-form clipped sum (linear models) takes one point and its batch without
            # a leading agent axis (two-dimensional products, the same floats) and the rows'
            # squared norms gathered from the pool's
            batch = {k: v[rows] for k, v in pool.flat.items()}
            total = problem.clipped_grad_sum(  # type: ignore[call-arg]
                state.x, batch, self.clip, feature_sq_norms=pool.sq_norms[rows])[0]
        man = problem.manifold
        euclidean = type(man) is Euclidean
        # the public normaliser B, not the (secret, varying) Poisson batch size
        mean = total / self.batch_size
        if not euclidean:   # on Euclidean space the coordinates are the array itself
            mean = man.to_coords(state.x, mean)
        if acc is not None:
            noise = getattr(acc, "noise", None)
            if noise is None:   # an account saved before it kept its release
                noise = acc.noise = GaussianNoise(acc.noise_multiplier * acc.sensitivity)
            mean = noise.release(mean, rng)
            acc.record_round()
        g = mean if euclidean else man.from_coords(state.x, mean)
        m = self.momentum * state.m + g
        alpha = step_size_at(self.step_size, state.t)
        if euclidean:       # Exp_x(-alpha m) = x - alpha m, the same floats
            x_new = state.x - alpha * m
            m_new = m
        else:
            x_new = man.exp(state.x, -alpha * m)
            m_new = man.transport(state.x, x_new, m)
        return DPSGDState(t=state.t + 1, x=x_new, m=m_new, rng=rng, ledger=state.ledger,
                          batch_sizes=state.batch_sizes + int(sel.size))

    def output(self, problem: Problem, state: DPSGDState) -> np.ndarray:
        return state.x

    def metrics(self, problem: Problem, state: DPSGDState, with_reference: bool) -> dict:
        return evaluate_point(problem, state.x, with_reference)
