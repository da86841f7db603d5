r"""Client-level differential privacy for manifold models: clip, average and noise on the manifold.

The server receives the selected clients' local points :math:`x_i` (``s`` of them) and releases

.. math::
    x^{(t+1)} = \mathrm{Exp}_x\Big(\frac{1}{s}\sum_{i \in S_t} \mathrm{clip}_C(\mathrm{Log}_x x_i)
    + \xi\Big), \qquad \xi \sim N_x(0, \sigma^2 I_{\dim}),\quad
    \mathrm{clip}_C(u) = u \min\big(1, C / \|u\|_x\big),

with :math:`x = x^{(t)}` public, the norm the Riemannian one at ``x``, the noise drawn in an
orthonormal basis of :math:`T_x M` through :func:`rfed.privacy.mechanisms.gaussian_mechanism`
(so the release stays on the manifold, unlike flat-array DP wrappers).

**Adjacency: client level, replace one client.** Two federations are neighbours when one
client's whole dataset is replaced (any size, any content): that client's clipped update moves
anywhere in the ball of radius ``C`` of :math:`T_x M`, every other update is unchanged (each
client's local training reads its own data only), so the mean over the fixed, public number
``s`` of selected clients has Riemannian L2 sensitivity :math:`\Delta = 2C/s`. The weights are
the equal ``1/s`` (not data-size weights): a data-size weight would move with the replaced
dataset's size and the bound would not hold. A round is one Gaussian mechanism with
:math:`\sigma = z \Delta`; in secure mode the release is rounded to a grid and the rounding
term is added to :math:`\Delta` (:func:`rfed.privacy.mechanisms.release_sensitivity`), as for
every secure release in rfed.

**Accounting.** The noise multiplier of a budget is calibrated, and the finished run certified,
with the tighter of dp-accounting's RDP and PLD accountants (the budget's ``method``), as the
record-level paths do; secure mode uses RDP only.

**Agent sampling.** The clients of a round are ``s`` of ``n`` drawn without replacement. The
amplification by that sampling is valid only if the adversary does not learn which clients were
selected (``hidden_selection=True``: the seed of the selection stream and the selection itself
are kept secret by the server); then every client is charged every round the event "Gaussian
after sampling ``s`` of ``n`` without replacement". Otherwise (default) only the selected
clients are charged, each round they take part in, without amplification.

The keyed streams (:mod:`rfed.randomness`) make the server's noise a function of the run's seed
and the round: the guarantee assumes the seed is secret (secure mode draws from the OS instead).

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rfed.algorithms.private import NoiseConfig, Release, plan_noise, privacy_report
from rfed.manifolds.base import Manifold
from rfed.privacy.accountants import DP_ACCOUNTING_VERSION, EventSpec
from rfed.privacy.budget import PrivacyBudget, calibrate
from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE, PrivacyLedger
from rfed.privacy.mechanisms import gaussian_mechanism, release_sensitivity

__all__ = ["ClientLevelDP", "ClientRelease", "clip_updates", "clipped_update_mean"]


def clip_updates(manifold: Manifold, x: np.ndarray, points: np.ndarray, clip: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    r"""The clients' updates :math:`\mathrm{clip}_C(\mathrm{Log}_x x_i)` in the norm at ``x``.

    Parameters
    ----------
    x : array, shape ``point_shape``
    points : array, shape ``(*batch, A, *point_shape)``
        ``batch`` is e.g. independent trials of an audit.
    clip : float
        ``C > 0``.

    Returns
    -------
    updates : array, shape ``(*batch, A, *point_shape)``
        Tangent vectors at ``x`` with :math:`\|u_i\|_x \le C`.
    clipped : bool array, shape ``(*batch, A)``
        Whether each update was scaled down.
    """
    clip = _check_clip(clip)
    logs = manifold.log(x, points)
    norms = manifold.norm(x, logs)
    if not np.all(np.isfinite(norms)):
        raise FloatingPointError("a client's update Log_x(x_i) is not finite (a local run "
                                 "diverged or a point left the manifold)")
    scale = np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))
    k = len(manifold.point_shape)
    return logs * scale.reshape(scale.shape + (1,) * k), norms > clip


def clipped_update_mean(manifold: Manifold, x: np.ndarray, points: np.ndarray, clip: float,
                        n_sampled: int) -> np.ndarray:
    r""":math:`\frac1s \sum_i \mathrm{clip}_C(\mathrm{Log}_x x_i)` with the public ``s``.

    Parameters
    ----------
    points : array, shape ``(*batch, s, *point_shape)``

    Returns
    -------
    array, shape ``(*batch, *point_shape)`` (tangent vectors at ``x``)
    """
    k = len(manifold.point_shape)
    points = np.asarray(points, dtype=float)
    if points.ndim < k + 1 or points.shape[-(k + 1)] != n_sampled:
        raise ValueError(f"argument 'points' must hold the {n_sampled} selected clients' points "
                         f"on axis {-(k + 1)}, got shape {points.shape}")
    updates, _ = clip_updates(manifold, x, points, clip)
    return updates.sum(axis=-(k + 1)) / float(n_sampled)


def _check_clip(clip: Any) -> float:
    if isinstance(clip, bool) or not isinstance(clip, (int, float, np.floating, np.integer)) \
            or not np.isfinite(clip) or clip <= 0:
        raise ValueError(f"argument 'clip' must be a finite float > 0 (a public bound on the "
                         f"Riemannian norm of Log_x(x_i)), got {clip!r}")
    return float(clip)


@dataclass
class ClientLevelDP:
    r"""Server-side client-level DP on the manifold (module docstring), budget first.

    Parameters
    ----------
    clip : float
        Public ``C``: bound enforced on :math:`\|\mathrm{Log}_x x_i\|_x`.
    noise_multiplier : float, optional
        ``z``, with :math:`\sigma = z \cdot 2C/s` (research); give it or ``budget``.
    budget : PrivacyBudget, optional
        Whole-run client-level target; ``z`` is calibrated for ``n_rounds`` rounds (its
        ``neighboring`` must be ``'replace_one'``: one client's dataset replaced). Its delta
        defaults to ``min(1e-5, 1/(10 n))`` for ``n`` clients.
    hidden_selection : bool
        Account the amplification by sampling ``s`` of ``n`` clients (valid only if the
        selection is kept secret from the adversary).
    """

    clip: float
    noise_multiplier: float | None = None
    budget: PrivacyBudget | None = None
    hidden_selection: bool = False

    def __post_init__(self):
        self.clip = _check_clip(self.clip)
        if (self.noise_multiplier is None) == (self.budget is None):
            raise ValueError("give exactly one of 'noise_multiplier' and 'budget' to "
                             "ClientLevelDP")
        if self.noise_multiplier is not None and not (
                np.isfinite(self.noise_multiplier) and self.noise_multiplier > 0):
            raise ValueError(f"argument 'noise_multiplier' must be a finite float > 0, got "
                             f"{self.noise_multiplier!r}")
        if self.budget is not None:
            if not isinstance(self.budget, PrivacyBudget):
                raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {self.budget!r}")
            if self.budget.neighboring != "replace_one":
                raise ValueError("client-level DP is accounted under neighboring='replace_one' "
                                 "(one client's whole dataset replaced; s is fixed and public)")

    def sensitivity(self, n_sampled: int) -> float:
        """:math:`2C/s`: replace-one-client sensitivity of the mean of ``s`` clipped updates.

        Parameters
        ----------
        n_sampled : int
            ``s``, clients sampled per round.

        Returns
        -------
        float
        """
        return 2.0 * self.clip / float(n_sampled)

    def event(self, z: float, n_agents: int, n_sampled: int) -> EventSpec:
        """One round's event for one client (amplified only with a hidden selection).

        Parameters
        ----------
        z : float
            Noise multiplier.
        n_agents : int
            ``N``, the number of clients.
        n_sampled : int
            ``s``, clients sampled per round.

        Returns
        -------
        EventSpec
        """
        if self.hidden_selection and n_sampled < n_agents:
            return EventSpec.make("gaussian", z, "without_replacement",
                                  dataset_size=n_agents, sample_size=n_sampled)
        return EventSpec.make("gaussian", z)

    def delta(self, n_agents: int) -> float:
        """The certified delta (the budget's, checked against ``1/n``, or the default).

        Parameters
        ----------
        n_agents : int
            ``N``, the number of clients.

        Returns
        -------
        float
        """
        if self.budget is not None:
            return self.budget.resolve_delta(n_agents)
        return min(1e-5, 1.0 / (10.0 * n_agents))

    def method(self, secure: bool = False) -> str:
        """The accountant of the client-level certificate: the budget's (``'auto'``: the
        tighter of RDP and PLD, as the record-level paths) or ``'auto'`` without a budget; RDP
        in secure mode (the discrete Gaussian is certified through Renyi divergences).

        Parameters
        ----------
        secure : bool
            Whether the run is in secure mode.

        Returns
        -------
        {'auto', 'rdp', 'pld'}
        """
        if secure:
            return "rdp"
        return "auto" if self.budget is None else self.budget.method

    def resolve(self, n_agents: int, n_sampled: int, n_rounds: int | None,
                secure: bool = False) -> float:
        """``z``: the given one, or the smallest meeting the budget over ``n_rounds`` rounds
        (every client charged every round: the worst case of the selection), calibrated with
        the accountant that certifies the finished run (:meth:`method`).

        Parameters
        ----------
        n_agents : int
            ``N``, the number of clients.
        n_sampled : int
            ``s``, clients sampled per round.
        n_rounds : int or None
            Planned rounds (required with a budget).
        secure : bool
            Whether the run is in secure mode.

        Returns
        -------
        float
            The noise multiplier.
        """
        if self.budget is not None and n_rounds is None:
            raise ValueError("argument 'n_rounds' is required with a client-level budget")
        # the public contract's path: the server is the one "agent" whose records are the n
        # clients, its release the clipped mean of s of them
        config = NoiseConfig(budget=self.budget, n_rounds=n_rounds,
                             noise_multiplier=self.noise_multiplier)
        plan = plan_noise(config, ClientRelease(self, n_sampled, secure),
                          local_sizes=np.array([n_agents]), dim=1, rng=None,
                          algorithm="client-level DP")
        assert plan is not None  # exactly one of noise_multiplier and budget is given
        return float(plan.noise_multiplier)

    def release_sensitivity(self, dim: int, n_sampled: int, rng: Any) -> float:
        """The sensitivity of the release on a manifold of dimension ``dim``: ``2C/s``, plus
        secure mode's grid-rounding term (:func:`rfed.privacy.mechanisms.release_sensitivity`,
        the rule of every release).

        Parameters
        ----------
        dim : int
            Dimension of the manifold.
        n_sampled : int
            ``s``, clients sampled per round.
        rng : numpy.random.Generator or SecureRandom
            The release's generator (secure mode adds the grid term).

        Returns
        -------
        float
        """
        return float(release_sensitivity(self.sensitivity(n_sampled), dim, rng))

    def release(self, manifold: Manifold, x: np.ndarray, points: np.ndarray, n_sampled: int,
                z: float, rng: Any) -> np.ndarray:
        r""":math:`\mathrm{Exp}_x(\text{clipped mean} + \xi)`, ``xi`` tangent Gaussian of std
        ``z`` times :meth:`release_sensitivity` (``z 2C/s`` with a seeded generator; secure
        mode adds the grid-rounding term), through :func:`gaussian_mechanism`.

        ``points`` has shape ``(*batch, s, *point_shape)``; the result ``(*batch,
        *point_shape)``.

        Parameters
        ----------
        manifold : Manifold
            The parameters' manifold.
        x : array, shape ``point_shape``
            The global point.
        points : array, shape ``(s, *point_shape)``
            The sampled clients' points.
        n_sampled : int
            ``s``, clients sampled per round.
        z : float
            Noise multiplier.
        rng : numpy.random.Generator or SecureRandom
            The noise's generator.

        Returns
        -------
        array, shape ``point_shape``
            The next global point.
        """
        mean = clipped_update_mean(manifold, x, points, self.clip, n_sampled)
        sigma = z * self.release_sensitivity(manifold.dim, n_sampled, rng)
        return manifold.exp(x, gaussian_mechanism(manifold, x, mean, sigma, rng))

    def record(self, ledger: PrivacyLedger, round: int, agents: np.ndarray, n_sampled: int,
               z: float) -> None:
        """Charge the round: the selected clients, or every client with a hidden selection.

        Parameters
        ----------
        ledger : PrivacyLedger
            The client-level ledger.
        round : int
            The round charged.
        agents : int array, shape ``(s,)``
            The selected clients.
        n_sampled : int
            ``s``, clients sampled per round.
        z : float
            Noise multiplier.
        """
        ev = self.event(z, ledger.n_agents, n_sampled)
        kwargs: dict[str, Any] = {}
        who: Any = np.asarray(agents)
        if ev.sampling == "without_replacement":
            who = None
            kwargs = {"sampling": "without_replacement", "dataset_size": ev.dataset_size,
                      "sample_size": ev.sample_size}
        ledger.record(round, who, noise_multiplier=z, **kwargs)

    def report(self, ledger: PrivacyLedger, n_rounds_done: int, z: float, n_sampled: int,
               *, secure: bool = False, sensitivity: float | None = None,
               planned_rounds: int | None = None) -> dict[str, Any]:
        """The client-level privacy report of the rounds done (from the client-level ledger).

        The certified epsilon is that of the worst-off client's recorded events with
        :meth:`method`'s accountant; ``sensitivity`` is the release's (default ``2C/s``; pass
        :meth:`release_sensitivity` in secure mode) and gives the reported ``sigma``.

        Parameters
        ----------
        ledger : PrivacyLedger
            The client-level ledger.
        n_rounds_done : int
            Rounds run.
        z : float
            Noise multiplier.
        n_sampled : int
            ``s``, clients sampled per round.
        secure : bool
            Whether the run is in secure mode.
        sensitivity : float, optional
            The release's sensitivity when it differs from :meth:`sensitivity` (secure mode).
        planned_rounds : int, optional
            The rounds a budget was planned for.

        Returns
        -------
        dict
            The keys :data:`rfed.algorithms.private.REPORT_KEYS` (``level='client'``), plus
            ``sigma``, ``sensitivity``, ``clip`` and ``hidden_selection``.
        """
        from rfed.algorithms.federated.accounting import certified_epsilon

        delta = self.delta(ledger.n_agents)
        method = self.method(secure)
        eps, used, _ = (certified_epsilon(ledger, delta, method) if n_rounds_done
                        else (0.0, "rdp" if method == "auto" else method, 0))
        planned = None
        if self.budget is not None:
            planned = self.budget.epsilon
        if sensitivity is None:
            sensitivity = self.sensitivity(n_sampled)
        assumptions = [
            "client-level adjacency: one client's whole dataset replaced (size and content)",
            f"updates clipped to C = {self.clip:g} in the Riemannian norm at x^(t) (enforced)",
            "equal weights 1/s with the public number s of selected clients",
            "the run's seed (or secure mode) is secret: the noise is keyed by (seed, round)",
        ]
        assumptions.append(
            "amplification by sampling s of n clients without replacement: the selection is "
            "hidden from the adversary" if self.hidden_selection else
            "no amplification by the client sampling (the selection may be public)")
        if secure:
            assumptions.append("secure mode: discrete Gaussian on a grid, the grid-rounding term "
                               "added to the sensitivity 2C/s, certified with RDP")
        assumptions.append(OUTSIDE_THE_GUARANTEE)
        label = {"auto": "tighter of RDP and PLD", "rdp": "RDP", "pld": "PLD"}[method]
        # the one report shape (REPORT_KEYS) with the client-level release's own values beside
        report = privacy_report(
            algorithm="client-level DP (server-side, on the manifold)", rounds=n_rounds_done,
            epsilon=eps, delta=delta,
            accountant=f"dp-accounting {DP_ACCOUNTING_VERSION} {used.upper()} ({label}), "
                       "client-level replace_one; per-client ledger, worst client",
            neighboring="replace_one", level="client", assumptions=assumptions,
            target_epsilon=planned, noise_multiplier=z,
            calibration="noise_multiplier" if self.budget is None else "budget",
            secure=secure, planned_rounds=planned_rounds)
        report.update({"sigma": z * sensitivity, "sensitivity": sensitivity, "clip": self.clip,
                       "hidden_selection": self.hidden_selection})
        return report


class ClientRelease(Release):
    """One round's release of :class:`ClientLevelDP`, for
    :func:`~rfed.algorithms.private.plan_noise`: the server is the one "agent" whose records
    are the ``n`` clients, and it releases the clipped mean of ``s`` of them (sensitivity
    ``2C/s``), amplified by the sampling only with a hidden selection (:meth:`ClientLevelDP.event`).

    Parameters
    ----------
    dp : ClientLevelDP
    n_sampled : int
        ``s``, clients per round.
    secure : bool
        Secure mode (RDP only).
    """

    norm = "l2"
    add_remove_refusal = ("client-level DP replaces one client's whole dataset; s is fixed "
                          "and public")

    def __init__(self, dp: ClientLevelDP, n_sampled: int, secure: bool = False) -> None:
        self.dp = dp
        self.n_sampled = int(n_sampled)
        self.secure = bool(secure)
        self.sensitivity = dp.sensitivity(self.n_sampled)

    def recorded_sensitivity(self, dim: int, rng: Any) -> float:
        """``2C/s`` (secure mode's grid term is added where the release is made,
        :meth:`ClientLevelDP.release_sensitivity`).

        Parameters
        ----------
        dim : int
        rng : numpy.random.Generator, SecureRandom or None

        Returns
        -------
        float
        """
        return float(self.sensitivity)

    def events(self, noise_multiplier: float, local_size: int, rounds: int
               ) -> list[tuple[EventSpec, int]]:
        """The server's events over ``rounds`` rounds with ``local_size`` clients.

        Parameters
        ----------
        noise_multiplier : float
        local_size : int
            ``n``, the number of clients.
        rounds : int

        Returns
        -------
        list of (EventSpec, int)
        """
        return [(self.dp.event(noise_multiplier, int(local_size), self.n_sampled), int(rounds))]

    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: np.ndarray,
                  active_rounds: np.ndarray, rng: Any) -> float:
        """The smallest multiplier whose planned rounds certify ``budget`` (with the
        accountant of :meth:`ClientLevelDP.method`).

        Parameters
        ----------
        budget : PrivacyBudget
        delta : float
        local_sizes : int array, shape ``(1,)``
            ``[n]``.
        active_rounds : int array, shape ``(1,)``
            ``[n_rounds]``.
        rng : unused

        Returns
        -------
        float
        """
        n_agents, rounds = int(local_sizes[0]), int(active_rounds[0])
        cal = calibrate(lambda z: self.events(z, n_agents, rounds),
                        replace(budget, method=self.dp.method(self.secure)), delta=delta)
        return float(cal.noise_multiplier)
