"""The papers' privacy formulas of the decentralized algorithms, and DP-DGT's account.

* :class:`PaperFormula`: a paper's closed form (DO-ADP Thm 1 eq. (7), DPDL Thm 1 eq. (23),
  DP-DDA Thm 1, DP-DGT Cor. 5.14 eq. (38) and the recursion (32)), evaluated for a run length and
  reported beside the certified value as the paper's formula, not a guarantee;
* :class:`DGTAccount` and :func:`ddgt_sensitivities`: DP-DGT's (and noisy DDGT's) Laplace
  releases under the paper's cost-function adjacency.

The contract every private algorithm uses (the noise configuration, the release statement, the
plan, the Gaussian account and the report) is :mod:`rfed.algorithms.private`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from rfed.algorithms.private import PAPER_LABEL, NoisePlan, Release, privacy_report
from rfed.privacy import papers
from rfed.privacy.accountants import EventSpec
from rfed.privacy.budget import PrivacyBudget, calibrate, certify, check_planned_round
from rfed.privacy.mechanisms import LaplaceSchedule, release_sensitivity
from rfed.privacy.secure import is_secure

__all__ = ["PaperFormula", "DGTAccount", "DGTRelease", "COST_FUNCTION_RELATION_ONLY",
           "ddgt_sensitivities"]

#: Why DP-DGT and noisy DDGT refuse ``neighboring='add_remove_one'``.
COST_FUNCTION_RELATION_ONLY = (
    "it is certified under its paper's cost-function adjacency (one agent's cost function "
    "changes, with a bounded gradient difference), which is not a record-level relation"
)


# ---------------------------------------------------------------------- papers' formulas
def _paper_doadp(p: dict, rounds: int) -> dict:
    # DO-ADP Thm 1 eq. (7) at equality, solved for eps (sigma^2 proportional to 1/eps^2)
    eps = (math.sqrt(160 * (p["k"] / p["dim"]) * p["p"] ** 2 * rounds
                     * math.log(1.25 / p["delta0"])) * p["G"] / (p["q"] * p["sigma"]))
    out = {"epsilon": eps, "delta": p["delta0"],
           "formula": "DO-ADP Thm 1 eq. (7): sigma^2 = 160 k p^2 T ln(1.25/delta0) G^2 "
                      "/ (q^2 d eps^2), solved for eps (per-step delta0; Top-k indices treated "
                      "as fixed, activation amplification claimed)"}
    if eps > 1:
        out["warning"] = "eps > 1 lies outside Theorem 1 (eps in (0, 1])"
    return out


def _paper_dpdl(p: dict, rounds: int) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        ref = papers.dpdl_sigma(1.0, p["delta"], rounds, p["q_global"], p["alpha"], p["n"],
                                p["w_min"], p["w_max"], p["closed_min"], h=p["h"], c2=p["c2"])
    return {"epsilon": ref / p["sigma"], "delta": p["delta"],
            "formula": f"DPDL Thm 1 eq. (23) as printed, solved for eps (c2={p['c2']}, "
                       f"h={p['h']}, the paper's global rate q = B/(N min|D_i|))"}


def _paper_dpdda(p: dict, rounds: int) -> dict:
    out = {"formula": "DP-DDA Thm 1: sigma^2 = C iota^2 L^2 T ln(2/delta0) / (q^2 eps^2) "
                      "solved for eps (printed C = 32; corrected C = 160, the constant the "
                      "proof's chain needs; node "
                      "sampling amplification claimed)", "delta": p["delta0"]}
    for label, c in (("", 32.0), ("_corrected_160", 160.0)):
        out[f"epsilon{label}"] = (math.sqrt(c * rounds * math.log(2 / p["delta0"]))
                                  * p["iota"] * p["L"] / (p["q"] * p["sigma"]))
    return out


def _paper_dpdgt(p: dict, rounds: int) -> dict:
    out = {"formula": "DP-DGT Cor. 5.14 eq. (38) (infinite run) and the likelihood-ratio sum "
                      "of the recursion (32) over the rounds run", "delta": 0.0,
           "adjacency_radius": p["radius"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        try:
            out["epsilon"] = papers.dpdgt_epsilon(
                p["alpha0"], p["q"], p["theta_xi0"], p["q_xi"], p["theta_zeta0"], p["q_zeta"],
                p["mu"], p["gamma"], p["phi"], p["radius"], q_c=p["q_c"])
        except ValueError as exc:
            out["epsilon"] = None
            out["warning"] = f"eq. (38) not applicable: {exc}"
    out["epsilon_eq38"] = out["epsilon"]
    k = np.arange(max(rounds, 1))
    out["epsilon_recursion"] = papers.dpdgt_epsilon_recursion(
        p["alpha0"] * p["q"] ** k, p["theta_xi0"] * p["q_xi"] ** k,
        p["theta_zeta0"] * p["q_zeta"] ** k, p["mu"], p["gamma"], p["phi"], p["radius"])
    return out


_PAPERS = {"doadp": _paper_doadp, "dpdl": _paper_dpdl, "dpdda": _paper_dpdda,
           "dpdgt": _paper_dpdgt}


@dataclasses.dataclass(frozen=True)
class PaperFormula:
    """A paper's closed form, evaluated for a run length (picklable: a kind and numbers)."""

    kind: str
    params: dict

    def evaluate(self, rounds: int) -> dict:
        """``{'label', 'formula', 'epsilon', 'delta', ...}`` for a run of ``rounds`` rounds."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            out = _PAPERS[self.kind](self.params, max(int(rounds), 1))
        return {"label": PAPER_LABEL, **out}


def ddgt_sensitivities(alphas: np.ndarray | None, betas: np.ndarray, iota: float, mu: float,
                       radius: float) -> tuple[np.ndarray, np.ndarray]:
    r"""L1 sensitivities of noisy DDGT's two messages under the cost-function adjacency.

    With every message observed identically (the proof technique of DP-DGT), only the changed
    agent's own state differs: ``Delta w~_{k+1} = beta_k Delta z_k``,
    ``Delta z_{k+1} = -iota (Delta w_{k+1} - Delta w_k)`` with ``z_0 = -iota (w_0 - d)``, and the
    argmin moves by at most ``||Delta w_k||_1 <= (||Delta w~_k||_1 + radius) / mu`` (it is
    ``1/mu``-Lipschitz in the price and the gradient). So, for ``k = 0 .. K-1``::

        u_0 = 0,  v_0 = iota radius / mu,  u_{k+1} = beta_k v_k,
        v_{k+1} = iota ((u_{k+1} + radius) / mu + (u_k + radius) / mu),

    ``u_k`` bounding the price message ``w~_k`` and ``v_k`` the tracker message ``z_k``.
    ``v_k >= 2 iota radius / mu`` never decays: with decaying noise DDGT's epsilon grows without
    bound (the reason DP-DGT exists). ``alphas`` is unused (``None`` will do; same signature as
    DP-DGT's).
    """
    betas = np.asarray(betas, dtype=float)
    k = betas.size
    u = np.zeros(k)
    v = np.zeros(k)
    v[0] = iota * radius / mu
    # a 2-term scalar recursion over iterations (not agents or samples)
    for t in range(k - 1):
        u[t + 1] = betas[t] * v[t]
        v[t + 1] = iota * ((u[t + 1] + radius) / mu + (u[t] + radius) / mu)
    return v, u


def _laplace_events(sens_xi, theta_xi, sens_zeta, theta_zeta) -> list[tuple[EventSpec, int]]:
    events: dict[EventSpec, int] = {}
    for sens, theta in ((sens_xi, theta_xi), (sens_zeta, theta_zeta)):
        for s_k, th_k in zip(np.atleast_1d(sens), np.atleast_1d(theta), strict=True):
            if s_k > 0:
                spec = EventSpec.make("laplace", float(th_k / s_k))
                events[spec] = events.get(spec, 0) + 1
    return list(events.items())


@dataclasses.dataclass(frozen=True, eq=False)
class DGTRelease(Release):
    """DP-DGT's (and noisy DDGT's) releases: per iteration ``s_i + xi`` and ``w~_i + zeta``,
    Laplace with the scales ``theta0 q_theta^k`` of both schedules, under the paper's
    cost-function adjacency (:class:`DGTAccount`).

    The plan's noise level is ``theta0``, the factor on the unit schedules ``q_theta^k``; each
    iteration's L1 sensitivities come from the proof's recursion (32) (``kind='dgt'``) or from
    :func:`ddgt_sensitivities` (``kind='ddgt'``).

    Parameters
    ----------
    kind : {'dgt', 'ddgt'}
    params : dict
        The step sizes and constants of the sensitivity recursion (``alpha0``, ``q``, ``mu``,
        ``gamma``, ``phi`` for DP-DGT; ``beta0``, ``q``, ``iota``, ``mu`` for DDGT).
    radius : float
        The relation's radius: ``sup_w ||grad F_i - grad F_i'||_1``.
    dim : int
        ``m``, the coordinates of one message.
    q_theta : float
        The decay of the calibrated schedules.
    """

    kind: str
    params: dict
    radius: float
    dim: int
    q_theta: float
    sensitivity: float = 1.0
    norm: str = "l1"
    add_remove_refusal: str | None = COST_FUNCTION_RELATION_ONLY

    def recorded_sensitivity(self, dim: int, rng: Any) -> float:
        """1: the level scales the unit schedules; the account records each iteration's
        sensitivities (secure mode's grid term included) itself."""
        return 1.0

    def paper_level(self, sigma: float, sigma_unit: float, sensitivity: float) -> float:
        """The paper's formula gives ``theta0`` itself."""
        return sigma

    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: Any,
                  active_rounds: np.ndarray, rng: Any) -> float:
        """The smallest ``theta0`` whose iterations certify ``budget``
        (:meth:`DGTAccount.calibrate_scale` on the unit schedules)."""
        unit = LaplaceSchedule(1.0, self.q_theta)
        account = DGTAccount(algorithm="", release=self, theta_xi=unit, theta_zeta=unit,
                             rng=rng, delta=delta)
        return account.calibrate_scale(budget, int(np.max(active_rounds)), delta)


class DGTAccount:
    """DP-DGT's (and noisy DDGT's) Laplace releases under the paper's cost-function adjacency.

    Relation (Def. 2.2 of the DP-DGT paper): two problems are neighbours when exactly one
    agent's cost function differs and ``sup_w ||grad F_i(w) - grad F'_i(w)||_1 <= radius``;
    only cost functions are protected (demands, graph and initial states are public). Iteration
    ``k`` releases ``s_{i,k} + xi`` and ``w~_{i,k} + zeta`` (Laplace, scales ``theta_k``) with L1
    sensitivities from the proof's recursion (32) (DP-DGT, ``kind='dgt'``) or from
    :func:`ddgt_sensitivities` (noisy DDGT, ``kind='ddgt'``), each passed through
    :func:`rfed.privacy.mechanisms.release_sensitivity`. Certified: the smaller of the basic
    composition ``sum_k varphi_k/theta_xi,k + eta_k/theta_zeta,k`` (pure, delta = 0; the paper's
    own intermediate bound) and dp-accounting's RDP composition of the same Laplace events at
    delta; both are upper bounds.

    Parameters
    ----------
    algorithm : str
    release : DGTRelease
    theta_xi, theta_zeta : LaplaceSchedule
        The two messages' noise schedules.
    rng : numpy.random.Generator or SecureRandom
        The run's generator (secure mode inflates the sensitivities by the grid term).
    delta : float
    plan : NoisePlan, optional
        The plan the schedules were calibrated by (budget or the paper's epsilon).
    mode : str, optional
        How the noise was set (``'paper_sigma'`` for the given schedules).
    paper : PaperFormula, optional
    """

    level = "dpdgt-cost-function"

    def __init__(self, *, algorithm: str, release: DGTRelease, theta_xi: LaplaceSchedule,
                 theta_zeta: LaplaceSchedule, rng: Any, delta: float = 1e-5,
                 plan: NoisePlan | None = None, mode: str | None = None,
                 paper: PaperFormula | None = None):
        self.algorithm = algorithm
        self.kind = release.kind
        self.params = dict(release.params)
        self.radius = float(release.radius)
        self.theta_xi, self.theta_zeta = theta_xi, theta_zeta
        self.dim = int(release.dim)
        self._rng = rng
        self.delta = float(delta)
        self.target_epsilon = None if plan is None else plan.target_epsilon
        self.planned_rounds = None if plan is None else plan.planned_rounds
        self.paper = paper
        self.epsilon_paper = None if plan is None else plan.epsilon_paper
        self.secure = is_secure(rng)
        self.mode = mode if plan is None else plan.mode
        self.rounds = 0
        self.neighboring = (f"one agent's cost function changes, sup_w ||grad F_i - grad F_i'||_1 "
                            f"<= {self.radius:g}")
        self._memo: dict[tuple, tuple[float, str]] = {}

    def check_can_step(self) -> None:
        """Raise before an iteration beyond the planned run (the budget would be exceeded)."""
        check_planned_round(self.algorithm, self.rounds, self.planned_rounds,
                            self.target_epsilon, what="theta0", unit="iterations")

    def record_round(self) -> None:
        """Charge one iteration (every agent releases both messages)."""
        self.check_can_step()
        self.rounds += 1

    def sensitivities(self, rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """L1 sensitivities ``(of s / z, of w~)`` for ``k < rounds``, as released."""
        k = np.arange(max(rounds, 1))
        p = self.params
        if self.kind == "dgt":
            sx, sz = papers.dpdgt_sensitivities(p["alpha0"] * p["q"] ** k, p["mu"], p["gamma"],
                                                p["phi"], self.radius)
        else:
            sx, sz = ddgt_sensitivities(None, p["beta0"] * p["q"] ** k, p["iota"], p["mu"],
                                        self.radius)
        return (np.asarray(release_sensitivity(sx, self.dim, self._rng, "l1")),
                np.asarray(release_sensitivity(sz, self.dim, self._rng, "l1")))

    def _scales(self, rounds: int, scale: float):
        k = np.arange(max(rounds, 1))
        return (scale * np.asarray(self.theta_xi.scale(k)),
                scale * np.asarray(self.theta_zeta.scale(k)))

    def events(self, rounds: int, scale: float = 1.0) -> list[tuple[EventSpec, int]]:
        """The Laplace events of ``rounds`` iterations with both schedules times ``scale``."""
        sx, sz = self.sensitivities(rounds)
        tx, tz = self._scales(rounds, scale)
        return _laplace_events(sx, tx, sz, tz)

    def pure_epsilon(self, rounds: int, scale: float = 1.0) -> float:
        """Basic composition of the Laplace releases (pure epsilon, delta = 0)."""
        sx, sz = self.sensitivities(rounds)
        tx, tz = self._scales(rounds, scale)
        return float(np.sum(sx / tx) + np.sum(sz / tz))

    def certified(self, rounds: int, delta: float, scale: float = 1.0) -> tuple[float, str]:
        """``(epsilon, how)``: the smaller of the pure sum and the RDP composition at delta."""
        key = (rounds, delta, scale)
        if key not in self._memo:
            pure = self.pure_epsilon(rounds, scale)
            events = self.events(rounds, scale)
            rdp = (certify(events, delta, "replace_one", "rdp").epsilon if events else 0.0)
            self._memo[key] = ((pure, "basic composition (pure eps-DP)") if pure <= rdp
                               else (rdp, "dp-accounting RDP"))
        return self._memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The report every private rfed algorithm gives
        (:func:`rfed.algorithms.private.privacy_report`), for this relation."""
        delta = self.delta if delta is None else float(delta)
        eps, how = self.certified(self.rounds, delta)
        assumptions = [
            "neighbouring problems differ in one agent's cost function F_i, with "
            f"sup_w ||grad F_i(w) - grad F_i'(w)||_1 <= {self.radius:g} (DP-DGT Def. 2.2)",
            "demands, graph and initial states are public (only cost functions are protected)",
            f"every cost is mu-strongly convex with mu = {self.params['mu']:g} (public)",
        ]
        return privacy_report(
            algorithm=self.algorithm, rounds=self.rounds, planned_rounds=self.planned_rounds,
            epsilon=eps, delta=delta,
            accountant=(f"{how}: the smaller of basic composition (pure) and dp-accounting RDP "
                        f"over the Laplace releases; relation: {self.neighboring}"),
            neighboring=self.neighboring, level=self.level, assumptions=assumptions,
            target_epsilon=self.target_epsilon, noise_multiplier=float(self.theta_xi.theta0),
            calibration=self.mode, secure=self.secure, paper=self.paper,
            epsilon_paper=self.epsilon_paper, adjacency_radius=self.radius)

    def finalize(self):
        return self

    def text(self, delta: float | None = None) -> str:
        """A short plain-text report."""
        rep = self.report(delta)
        lines = [f"{self.algorithm}: {rep['label']} over {self.rounds} iterations",
                 f"relation: {self.neighboring} (level {self.level})",
                 f"accountant: {rep['accountant']}"]
        if rep["paper"] is not None:
            lines.append(f"paper ({PAPER_LABEL}): eps = {rep['paper'].get('epsilon')} "
                         f"[{rep['paper']['formula']}]")
        return "\n".join(lines)

    def calibrate_scale(self, budget: PrivacyBudget, rounds: int, delta: float) -> float:
        """Smallest factor on the unit schedules whose run of ``rounds`` certifies ``budget``.

        The pure sum is ``c / scale`` (closed form); the RDP composition is bisected with
        :func:`rfed.privacy.calibrate`; the smaller factor wins (both bound the same releases).
        """
        key = None
        if not self.secure:  # secure mode's grid inflates the sensitivities: not cached
            key = (self.kind, tuple(sorted(self.params.items())), self.radius, self.dim,
                   self.theta_xi, self.theta_zeta, budget, int(rounds), float(delta))
            if key in _DGT_SCALES:
                return _DGT_SCALES[key]
        pure_scale = self.pure_epsilon(rounds, 1.0) / budget.epsilon
        rdp_budget = PrivacyBudget(budget.epsilon, delta, method="rdp")
        rdp_scale = calibrate(_ScaledLaplace(self, rounds), rdp_budget, delta=delta
                              ).noise_multiplier
        scale = float(min(pure_scale, rdp_scale))
        if key is not None:
            _DGT_SCALES[key] = scale
        return scale


#: DGT calibrations already done (a pure function of public numbers), for repetitions.
_DGT_SCALES: dict[tuple, float] = {}


@dataclasses.dataclass(frozen=True)
class _ScaledLaplace:
    """``events_for(scale)`` of a DGT account (picklable, no closure)."""

    account: DGTAccount
    rounds: int

    def __call__(self, scale: float):
        return self.account.events(self.rounds, scale)
