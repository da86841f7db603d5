"""Private local training of the selected agents: DP-RSGD (Alg. 2) and DP-RSVRG (Alg. 3).

Both trainers run all selected agents at once: the iterate array has shape
``(A, *point_shape)``, one row per selected agent, and every manifold call serves all rows.
Only the local steps (``k``, and ``j`` for RSVRG) are Python loops.

**Noise.** Every noisy step adds tangent Gaussian noise of std ``sigma_i = z_i * Delta_i`` through
:func:`rfed.privacy.mechanisms.gaussian_mechanism`, where ``Delta_i`` is the L2 sensitivity of the
step's released value under the run's neighbouring relation (below) and ``z_i`` the noise
multiplier. ``z`` comes from one of:

* a :class:`~rfed.privacy.PrivacyBudget` given to :class:`~rfed.algorithms.federated.PriRFed`,
  which calibrates ``z`` over the whole planned run (the default way to use the trainers);
* ``noise_multiplier=`` (research: the certified epsilon is reported for whatever ``z`` is);
* ``sigma=`` (an explicit noise std, research);
* ``paper_epsilon=`` / ``paper_delta=``: the paper's formulas (Sec. 5.1 and 5.2 of PriRFed,
  constants ``o_i = o~_i = 1`` as in its experiments, Sec. 6; :ref:`prirfed-noise-formulas`)
  :math:`\\sigma_i^2 = m K \\log(1/\\delta) \\tau^2 / (N_i^2 \\epsilon^2)` (``m = 1`` for DP-RSGD),
  which are heuristic calibrations and NOT guarantees: the run reports the certified epsilon of
  the noise they give beside the paper's value.

There is no ``epsilon=`` argument: it used to take the paper's local epsilon and did not deliver
it (a local budget of 1.5 certified 7.8); it raises ``TypeError``.

**Clipping.** The clip levels are PUBLIC numbers given by the user (``clip``; DP-RSVRG also
``clip_full``); they are never read from the private data. Every per-sample gradient is clipped to
them in the Riemannian norm at the point where it lives, which enforces the sensitivities below.

**Sensitivities** (``tau`` = ``clip``, ``tau_0`` = ``clip_full``, records of agent ``i``).

DP-RSGD, one step releases (inside ``x_{k+1}``) the noisy mean
:math:`\\frac{1}{b}\\sum_{p \\in B_k} \\mathrm{clip}_\\tau(\\mathrm{grad} f_{i,p}(x_k))`:

* fixed-size minibatch without replacement (the paper's), replace-one: one summand changes,
  ``Delta = 2 tau / b_i``; accounted as a Gaussian subsampled without replacement ``b_i`` of
  ``N_i`` (Wang, Balle and Kasiviswanathan 2019), RDP;
* Poisson minibatch (each record independently with the public probability ``q_i``): the sum
  is divided by the PUBLIC expected size ``bbar_i = q_i N_i`` (never by the realised size),
  add/remove-one: one summand appears or disappears, ``Delta = tau / bbar_i``; accounted as the
  Poisson-subsampled Gaussian under add/remove (RDP or PLD);
* full batch: ``Delta = 2 tau / N_i`` (replace-one) or ``tau / N_i`` (add/remove), no sampling.

Under add/remove the true ``N_i`` is private (it is what differs between neighbours): ``N_i``
above is then the declared PUBLIC nominal size (``public_sizes``,
:func:`rfed.privacy.budget.public_counts`) in every normaliser, rate and noise scale; the data
enter only through the sum over the records held. Fixed-size minibatches without replacement
are refused under add/remove (no such bound for a draw from a private count).

DP-RSVRG, one inner step ``j`` of outer loop ``k`` releases
:math:`\\eta = c_1(x_j) - \\Gamma(c_1(\\tilde x) - g)` plus noise, with
:math:`c_1 = \\mathrm{clip}_{\\tau_1}(\\mathrm{grad} f_{i,l_j})` and the full clipped gradient
:math:`g = \\frac{1}{N_i}\\sum_j \\mathrm{clip}_{\\tau_0}(\\mathrm{grad} f_{i,j}(\\tilde x))`.
Replace one record ``r`` (given everything released before, so the points are fixed):

* if ``l_j = r``: ``c_1(x_j)`` and ``Gamma c_1(x~)`` each lie in a ball of radius ``tau_1``, so
  their difference moves by at most ``2 tau_1 + 2 tau_1``; ``g`` moves by ``2 tau_0 / N_i``
  (one summand, and parallel transport is an isometry): ``4 tau_1 + 2 tau_0 / N_i``;
* otherwise only ``g`` moves: ``2 tau_0 / N_i``.

Add or remove one record (``N_i`` the public size, the full gradient divided by it): ``g``
moves by ``tau_0 / N_i``, and a step whose pick is the added record by at most
``4 tau_1 + tau_0 / N_i``; the uniform pick over the records held is a mixture whose
divergence is at most its worst component's (joint convexity), so ``Delta = 4 tau_1 + tau_0 /
N_i`` under add/remove.

So every inner step is a Gaussian mechanism of sensitivity ``Delta = 4 tau_1 + 2 tau_0 / N_i``;
``g`` itself is never released except through the noisy steps. A local run is ``K m`` such
events (no amplification is claimed for the uniform pick of ``l_j``: the record also acts through
``g`` in every step). The calibration and the ledger compose all ``K m`` events per round.

**DP-RSVRG with a released snapshot** (``DPRSVRG(variant='released_snapshot')``, the standard
private variance reduction; NOT the paper's Alg. 3, and labelled so). The paper's steps above
carry the whole record through ``g`` in every step, so no step is amplified by the pick of
``l_j`` and each costs a Gaussian of sensitivity ``4 tau_1 + 2 tau_0 / N_i``. The variant
instead releases, once per outer loop,

* the snapshot gradient :math:`\\tilde g = g + \\xi_0`, :math:`\\xi_0 \\sim N_{\\tilde x}(0,
  \\sigma_0^2)`, with ``g`` the mean of the ``N_i`` summands clipped to ``tau_0`` (replace one
  record: one summand moves inside a ball of radius ``tau_0``, parallel transport is not
  involved): a Gaussian mechanism of sensitivity ``Delta_0 = 2 tau_0 / N_i``, no sampling;

and in each inner step, from a minibatch ``B_j`` of ``b_i`` records drawn uniformly without
replacement, the mean of the per-sample DIFFERENCES clipped jointly to the public ``tau_d``
(``clip``),
:math:`v_j = \\frac{1}{b_i}\\sum_{l \\in B_j} \\mathrm{clip}_{\\tau_d}(\\mathrm{grad} f_l(x_j)
- \\Gamma_{\\tilde x}^{x_j} \\mathrm{grad} f_l(\\tilde x))`, and steps along
:math:`\\eta_j = v_j + \\Gamma_{\\tilde x}^{x_j} \\tilde g + \\xi_j`,
:math:`\\xi_j \\sim N_{x_j}(0, \\sigma_d^2)`. Given everything released before (so ``x_j``,
``x~`` and ``g~`` are fixed: they are post-processing of earlier releases), the term
:math:`\\Gamma \\tilde g` is public and only ``v_j`` reads the data: replacing record ``r``
changes nothing if ``r`` is not in ``B_j`` and one summand, inside a ball of radius ``tau_d`` at
``x_j``, if it is. So each inner step is the Gaussian mechanism of sensitivity
``Delta_d = 2 tau_d / b_i`` applied to a fixed-size subsample without replacement, accounted as
such under replace-one (Wang, Balle and Kasiviswanathan 2019), with amplification by ``b_i /
N_i``: ``g`` no longer enters the step's sensitivity because it is released separately. One local
run is ``K`` snapshot events plus ``K m`` subsampled events; both kinds take the same noise
multiplier ``z`` (``sigma_0 = z Delta_0``, ``sigma_d = z Delta_d``), calibrated over the whole run
and recorded in the ledger. Only replace-one, and no coupled records.

**Coupled records.** When a problem's per-sample loss depends on other records of the same agent
(``problem.coupled_records``, e.g. :class:`~rfed.problems.HyperbolicPrediction` with the paper's
kernel-ridge weights), replacing one record may change EVERY clipped summand: DP-RSGD's
``Delta = 2 tau`` (no minibatch amplification: the record acts on the sampled summands even when
it is not sampled) and DP-RSVRG's ``Delta = 4 tau_1 + 2 tau_0``; only replace-one is supported.

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
* Andi Han, Bamdev Mishra, Pratik Jawanpuria and Junbin Gao. Differentially Private Riemannian
  Optimization. Machine Learning 113, 2024. arXiv:2205.09494.
* Saiteja Utpala, Andi Han, Pratik Jawanpuria and Bamdev Mishra. Improved Differentially Private
  Riemannian Optimization: Fast Sampling and Variance Reduction. Transactions on Machine
  Learning Research, 2023.
* Yu-Xiang Wang, Borja Balle and Shiva Prasad Kasiviswanathan. Subsampled Renyi Differential
  Privacy and Analytical Moments Accountant. Proceedings of the 22nd International Conference on
  Artificial Intelligence and Statistics (AISTATS), 2019. arXiv:1808.00087.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rfed.algorithms.federated.sampling import batch_sizes, sample_minibatches
from rfed.privacy import papers
from rfed.privacy.accountants import EventSpec
from rfed.privacy.budget import public_counts
from rfed.privacy.mechanisms import gaussian_mechanism, release_sensitivity
from rfed.problems.base import Problem

__all__ = ["LocalTrainer", "LocalPlan", "DPRSGD", "DPRSVRG", "paper_sigma", "SAMPLINGS",
           "RSVRG_VARIANTS"]

#: Minibatch schemes of DP-RSGD.
SAMPLINGS = ("without_replacement", "poisson")
#: DP-RSVRG: the paper's Alg. 3, or the standard private variance reduction (module docstring).
RSVRG_VARIANTS = ("paper", "released_snapshot")

_EPSILON_REMOVED = (
    "argument '{name}' was removed: it took the paper's local epsilon, and the paper's sigma "
    "formula does not deliver that epsilon. Use PriRFed(..., budget=PrivacyBudget(epsilon, "
    "delta), n_rounds=T) for a certified whole-run budget, or paper_epsilon= / paper_delta= for "
    "the paper's calibration (reported as the paper's formula, not a guarantee)."
)


def paper_sigma(
    counts: np.ndarray,
    *,
    epsilon: float,
    delta: float,
    clip: float,
    steps: int,
    inner_steps: int = 1,
    constant: float = 1.0,
) -> np.ndarray:
    r"""Per-agent noise std of PriRFed's local trainers (Sec. 5.1 and 5.2).

    :math:`\sigma_i = \sqrt{o\, m K \log(1/\delta)}\; \tau / (N_i \epsilon)` with ``m = 1`` for
    DP-RSGD (PriRFed Sec. 5.1, after Han et al. 2024, Thm 1) and ``m`` the inner loop length for
    DP-RSVRG (Sec. 5.2, after Utpala et al. 2023, Claim 5, read with variance :math:`\sigma^2`,
    :ref:`prirfed-rsvrg-variance`). Delegates to
    :mod:`rfed.privacy.papers` (``dp_rsgd_sigma`` / ``dp_rsvrg_sigma``).

    Parameters
    ----------
    counts : int array, shape ``(n_agents,)``
        Local dataset sizes ``N_i``.
    epsilon, delta : float
        Each agent's local budget for one full local run.
    clip : float
        :math:`\tau` (``max(tau_0, tau_1)`` for DP-RSVRG).
    steps : int
        ``K``.
    inner_steps : int
        ``m`` (1 for DP-RSGD).
    constant : float
        ``o_i`` / ``o~_i`` (1 in the paper's experiments).

    Returns
    -------
    array, shape ``(n_agents,)``
    """
    counts = np.asarray(counts, dtype=int)
    # the paper's formulas are scalar in N_i: evaluate once per distinct local size
    sizes, inverse = np.unique(counts, return_inverse=True)
    if inner_steps == 1:
        vals = [papers.dp_rsgd_sigma(epsilon, delta, clip, int(n), steps, constant)
                for n in sizes]
    else:
        vals = [papers.dp_rsvrg_sigma(epsilon, delta, clip, clip, int(n), steps, inner_steps,
                                      constant) for n in sizes]
    return np.asarray(vals, dtype=float)[inverse]



@dataclass
class LocalPlan:
    """What a trainer needs for every round, fixed at the start of a run.

    Attributes
    ----------
    sigma : array, shape ``(n_agents,)``
        Noise std of each agent (0: no noise).
    clip : float or None
        Public clipping level (``None``: no clipping). For DP-RSVRG, ``clip`` is tau_1 and
        ``clip_full`` tau_0.
    sizes : array, shape ``(n_agents,)``
        Minibatch sizes ``b_i`` (DP-RSGD; the expected size ``q_i N_i`` under Poisson sampling)
        or ``N_i`` (DP-RSVRG's full gradients).
    counts : int array, shape ``(n_agents,)``
        ``N_i`` under replace-one; under add/remove the declared PUBLIC nominal sizes that
        stand in for them (:func:`rfed.privacy.budget.public_counts`): the private true sizes
        never enter a plan.
    sensitivity : array, shape ``(n_agents,)``
        L2 sensitivity of one noisy step under ``neighboring`` (``inf`` without clipping), as
        returned by :func:`rfed.privacy.mechanisms.release_sensitivity`.
    neighboring : {'replace_one', 'add_remove_one'}
    sampling : {'none', 'without_replacement', 'poisson'}
        How a noisy step samples the agent's records (for the accountant).
    steps : int
        Noisy steps of one local run (``K``, or ``K m`` for DP-RSVRG).
    snapshot_sigma, snapshot_sensitivity : array, shape ``(n_agents,)``, optional
        DP-RSVRG with a released snapshot: noise std and sensitivity ``2 tau_0 / N_i`` of the
        snapshot gradient's release.
    snapshot_steps : int
        Snapshot releases of one local run (``K`` for that variant, else 0).
    """

    sigma: np.ndarray
    clip: float | None
    sizes: np.ndarray
    counts: np.ndarray
    sensitivity: np.ndarray
    clip_full: float | None = None
    neighboring: str = "replace_one"
    sampling: str = "none"
    steps: int = 1
    extra: dict = field(default_factory=dict)
    snapshot_sigma: np.ndarray | None = None
    snapshot_sensitivity: np.ndarray | None = None
    snapshot_steps: int = 0

    @property
    def private(self) -> bool:
        """Whether every agent's releases (and snapshot releases) carry noise."""
        return bool(np.all(self.sigma > 0)) and (
            self.snapshot_steps == 0
            or (self.snapshot_sigma is not None and bool(np.all(self.snapshot_sigma > 0))))

    @property
    def noise_multiplier(self) -> np.ndarray:
        """``sigma / sensitivity`` per agent (0 without noise or without clipping)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(np.isfinite(self.sensitivity), self.sigma / self.sensitivity, 0.0)
        return z

    def with_noise_multiplier(self, z: np.ndarray | float) -> LocalPlan:
        """The same plan with ``sigma = z * sensitivity`` (``z`` scalar or per agent).

        Parameters
        ----------
        z : float or array, shape ``(n_agents,)``
            Noise multiplier(s).

        Returns
        -------
        LocalPlan
        """
        if not np.all(np.isfinite(self.sensitivity)):
            raise ValueError("a noise multiplier needs a finite sensitivity: set 'clip' (and "
                             "'clip_full' for DP-RSVRG) to public clipping levels")
        z = np.broadcast_to(np.asarray(z, dtype=float), self.sigma.shape)
        if self.snapshot_steps:
            # one multiplier for both release kinds (module docstring)
            return dataclasses.replace(self, sigma=z * self.sensitivity,
                                       snapshot_sigma=z * self.snapshot_sensitivity)
        return dataclasses.replace(self, sigma=z * self.sensitivity)

    def events(self, agent: int, z: float | None = None) -> list[tuple[EventSpec, int]]:
        """The accountant events of ONE local run of ``agent`` (with multiplier ``z``).

        ``z`` defaults to the plan's own multiplier. Returns ``[(EventSpec, steps)]``.

        Parameters
        ----------
        agent : int
            The agent.
        z : float, optional
            Noise multiplier (default: the plan's own).

        Returns
        -------
        list of (EventSpec, int)
        """
        z = float(self.noise_multiplier[agent]) if z is None else float(z)
        n, b = int(self.counts[agent]), self.sizes[agent]
        if self.sampling == "without_replacement":
            spec = EventSpec.make("gaussian", z, "without_replacement", dataset_size=n,
                                  sample_size=int(b))
        elif self.sampling == "poisson":
            spec = EventSpec.make("gaussian", z, "poisson", float(b) / n)
        else:
            spec = EventSpec.make("gaussian", z)
        if self.snapshot_steps:
            # the released snapshot gradients: full batch, the same multiplier
            return [(spec, self.steps), (EventSpec.make("gaussian", z), self.snapshot_steps)]
        return [(spec, self.steps)]


def _check_clip(clip: Any, name: str) -> float | None:
    if isinstance(clip, str):
        raise ValueError(
            f"argument '{name}' must be a public float or None, got {clip!r}: clip levels read "
            "from the private data (the former 'auto', a maximum or a quantile of the records) "
            "leak through the noise scale; give a public number (e.g. a bound you assert on the "
            "data domain, or one chosen on public data)"
        )
    if clip is None:
        return None
    clip = float(clip)
    if not clip > 0 or not np.isfinite(clip):
        raise ValueError(f"argument '{name}' must be a finite float > 0, got {clip}")
    return clip


class LocalTrainer(abc.ABC):
    """Local training of the agents selected in a round (PriRFed Alg. 1 line 6)."""

    name = "local"
    steps: int
    noise_multiplier: float | None
    sigma: float | None
    paper_epsilon: float | None
    paper_delta: float | None
    constant: float

    def _check_noise(self, epsilon, delta) -> None:
        if epsilon is not None:
            raise TypeError(_EPSILON_REMOVED.format(name="epsilon"))
        if delta is not None:
            raise TypeError(_EPSILON_REMOVED.format(name="delta"))
        s = self.steps
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 1:
            raise ValueError(f"argument 'steps' must be an int >= 1, got {s!r}")
        given = [n for n in ("noise_multiplier", "sigma", "paper_epsilon")
                 if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'noise_multiplier', 'sigma' and "
                             f"'paper_epsilon', not both {given[0]!r} and {given[1]!r}")
        for n in ("noise_multiplier", "sigma"):
            v = getattr(self, n)
            if v is not None and not (float(v) >= 0 and np.isfinite(float(v))):
                raise ValueError(f"argument '{n}' must be a finite float >= 0, got {v}")
        if self.paper_epsilon is not None:
            if not float(self.paper_epsilon) > 0:
                raise ValueError(f"argument 'paper_epsilon' must be > 0, got "
                                 f"{self.paper_epsilon}")
            if self.paper_delta is None or not 0 < float(self.paper_delta) < 1:
                raise ValueError(f"argument 'paper_delta' must be in (0, 1) with "
                                 f"'paper_epsilon', got {self.paper_delta}")
        elif self.paper_delta is not None:
            raise ValueError("argument 'paper_delta' is only used with 'paper_epsilon'")
        if not self.constant > 0:
            raise ValueError(f"argument 'constant' must be > 0, got {self.constant}")

    @property
    def private(self) -> bool:
        """True when the trainer adds noise by itself (a budget can also make it private)."""
        return (self.paper_epsilon is not None
                or (self.sigma is not None and self.sigma > 0)
                or (self.noise_multiplier is not None and self.noise_multiplier > 0))

    @property
    def total_steps(self) -> int:
        """Noisy steps of one local run."""
        return self.steps

    @abc.abstractmethod
    def plan(self, problem: Problem, neighboring: str = "replace_one",
             rng: Any = None, public_sizes: Any = None) -> LocalPlan:
        """Resolve clipping, batch sizes, sensitivities and noise for ``problem``.

        Parameters
        ----------
        problem : Problem
        neighboring : {'replace_one', 'add_remove_one'}
            Relation the sensitivities refer to.
        rng : Generator, optional
            The run's generator (passed to :func:`release_sensitivity`).
        public_sizes : int or sequence of int, optional
            Under ``'add_remove_one'`` (required there): the declared PUBLIC nominal local
            dataset sizes that replace the private ``N_i`` in every normaliser, sampling rate
            and noise scale (:func:`rfed.privacy.budget.public_counts`); the plan's ``counts``
            are then these sizes. ``None`` under replace-one (the true sizes are public).

        Returns
        -------
        LocalPlan
            Noise, sensitivities, sampling and steps of one local run of every agent.
        """

    def _finish_plan(self, plan: LocalPlan, problem: Problem, paper_clip: float | None,
                     rng: Any) -> LocalPlan:
        """Apply the trainer's own noise setting and the release's sensitivity to ``plan``."""
        if np.all(np.isfinite(plan.sensitivity)):
            # secure mode rounds the release to a grid, which adds to the sensitivity
            plan.sensitivity = np.asarray(
                release_sensitivity(plan.sensitivity, problem.manifold.dim, rng, "l2"),
                dtype=float)
        if (plan.snapshot_steps and plan.snapshot_sensitivity is not None
                and np.all(np.isfinite(plan.snapshot_sensitivity))):
            plan.snapshot_sensitivity = np.asarray(
                release_sensitivity(plan.snapshot_sensitivity, problem.manifold.dim, rng, "l2"),
                dtype=float)
        if plan.snapshot_steps:
            plan.snapshot_sigma = np.zeros(problem.n_agents)
            if self.paper_epsilon is not None or self.sigma is not None:
                raise ValueError(
                    f"{self.name}: the released-snapshot variant takes a budget on PriRFed or "
                    "'noise_multiplier' (one multiplier for its two release kinds); the paper's "
                    "calibration and 'sigma' describe the paper's Alg. 3"
                )
        n = problem.n_agents
        if self.paper_epsilon is not None:
            assert self.paper_delta is not None  # the constructor requires both together
            if paper_clip is None:
                raise ValueError("the paper's calibration needs clipping levels; set 'clip'"
                                 + (" and 'clip_full'" if isinstance(self, DPRSVRG) else ""))
            plan.sigma = paper_sigma(np.asarray(plan.counts), epsilon=self.paper_epsilon,
                                     delta=self.paper_delta, clip=paper_clip, steps=self.steps,
                                     inner_steps=getattr(self, "inner_steps", 1),
                                     constant=self.constant)
        elif self.noise_multiplier is not None:
            if self.noise_multiplier > 0:
                return plan.with_noise_multiplier(float(self.noise_multiplier))
        elif self.sigma is not None:
            plan.sigma = np.full(n, float(self.sigma))
        if np.any(plan.sigma > 0) and not np.all(np.isfinite(plan.sensitivity)):
            raise ValueError(
                f"{self.name}: noise without clipping certifies nothing (no sensitivity holds); "
                "set 'clip'" + (" and 'clip_full'" if isinstance(self, DPRSVRG) else "")
                + " to public clipping levels"
            )
        return plan

    @abc.abstractmethod
    def train(
        self,
        problem: Problem,
        plan: LocalPlan,
        x: np.ndarray,
        agents: np.ndarray,
        step_size: float,
        rng: np.random.Generator,
        option: int = 1,
        *,
        sigma: np.ndarray | None = None,
        snapshot_sigma: np.ndarray | None = None,
    ) -> tuple[np.ndarray, dict]:
        """Run the local procedure of every agent in ``agents`` from its row of ``x``.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)``
            Starting points (the broadcast global parameter).
        agents : int array, shape ``(A,)``
        step_size : float
            ``alpha_t``.
        option : {1, 2}
            Output option (the one chosen in Algorithm 1).
        sigma, snapshot_sigma : array, shape ``(A,)``, optional
            Noise std of each row (default ``plan.sigma[agents]``, and
            ``plan.snapshot_sigma[agents]`` for the released snapshot): a multi-run driver
            stacks rows of several runs whose calibrations differ.

        Returns
        -------
        x_out : array, shape ``(A, *point_shape)``
        info : dict
            ``n_clipped`` (total clipped per-sample gradients), ``n_clipped_rows`` (the same
            per row, int array of shape ``(A,)``) and ``grad_evals``.
        """

    @staticmethod
    def _rows_sigma(plan_sigma: np.ndarray | None, agents: np.ndarray,
                    given: np.ndarray | None) -> np.ndarray | None:
        return given if given is not None or plan_sigma is None else plan_sigma[agents]

    def _release(self, problem, x, value, sigma, rng, noisy=None):
        """``value + N_x(0, sigma^2)`` through :func:`gaussian_mechanism` (``value`` if no
        noise), refusing non-finite input.

        ``noisy``: ``np.any(sigma > 0)`` when the caller computed it once for its steps (the
        rows' ``sigma`` is fixed for a local run); :func:`gaussian_mechanism` checks ``sigma``
        at every release.
        """
        if not (np.isfinite(value).all() and np.isfinite(x).all()):
            # e.g. a noisy random walk on SPD or the hyperboloid overflowing expm / cosh
            raise FloatingPointError(
                f"{self.name}: a local iterate or its step left the floating-point range (the "
                "run diverged; reduce the step size or the noise)"
            )
        if not (np.any(sigma > 0) if noisy is None else noisy):
            return value
        return gaussian_mechanism(problem.manifold, x, value, sigma, rng)


def _per_row(clipped: np.ndarray) -> np.ndarray:
    """Clipped counts of shape ``(A, ...)`` summed per row: ``(A,)``."""
    return clipped.reshape(clipped.shape[0], -1).sum(axis=1)


def _info(n_clipped_rows: np.ndarray, grad_evals: int) -> dict:
    return {"n_clipped": int(n_clipped_rows.sum()), "n_clipped_rows": n_clipped_rows,
            "grad_evals": grad_evals}


def _agent_data(problem: Problem, agents: np.ndarray) -> tuple[dict, np.ndarray]:
    """All samples of ``agents``; a view (no copy of the data) under full participation (a
    shard maps the global ids to its rows)."""
    if (not problem.is_shard and agents.size == problem.n_agents
            and np.array_equal(agents, np.arange(problem.n_agents))):
        return dict(problem.data), problem.mask
    return problem.agent_data(agents)


#: Bytes of gathered minibatch rows per block of :func:`_clipped_sum_in_order` (and of records
#: per block of the fused full-batch step), so that the block's passes read it from the cache.
#: Half of one core's L2 on the 2-core machine the benchmarks run on (2 MiB per core): there
#: the floors of benchmarks/bench_prirfed.py (timed by block size in its table) and rfed's
#: round were faster with blocks of 0.5-1 MiB than with 4 MiB; on an older machine with a 32 MiB
#: L3, blocks of 1-8 MiB took within 3% of each other and one gather of everything 1.4x.
_GATHER_BLOCK_BYTES = 2**20
#: The same for the inner steps of the released-snapshot DP-RSVRG, whose difference mean makes
#: about ten temporaries of the block's size: blocks of one agent (about 1 MiB, one core's L2
#: here) took 0.8x the time of 4 MiB blocks on utility-pca-fmnist's shapes (128 x 784 per agent).
_DIFFERENCE_BLOCK_BYTES = 2**20


def _clipped_sum_in_order(problem: Problem, x: np.ndarray, agents: np.ndarray,
                          idx: np.ndarray, valid: np.ndarray, clip: float | None,
                          buffers: dict | None, out: np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """Clipped per-sample gradient sums of minibatches gathered in row order, block by block.

    Each agent's drawn rows are sorted (valid ones first) and gathered for a block of agents at
    a time (about :data:`_GATHER_BLOCK_BYTES`), so that ``clipped_grad_sum``'s passes over the
    block read cached rows; the loop runs over blocks of the data, not over agents. The subsets
    are the drawn ones: only the order of the summands changes.

    Parameters
    ----------
    x : array, shape ``(A, *point_shape)``
        Each agent's point.
    idx, valid : arrays, shape ``(A, b)``
        :func:`~rfed.algorithms.federated.sampling.sample_minibatches`' output (``valid`` a
        prefix of each row).
    buffers : dict or None
        Gather buffers of an earlier call (reused), or ``None``.
    out : float array, shape ``(A, *point_shape)``, optional
        Where ``total`` is written (e.g. the array of the previous step's sum, which a
        trainer no longer reads); default a fresh array. The same values.

    Returns
    -------
    total : array, shape ``(A, *point_shape)``
        ``out`` when given with that shape.
    n_clipped : int array, shape ``(A,)``
    buffers : dict or None
        The gather buffers, for the next call (``None`` while no agent was drawn).
    """
    # the drawn rows in increasing order, the unused slots (past b_i) after them: the sorted
    # valid entries fill the same prefix, and the unused slots point at row 0 (masked out)
    rows = np.sort(np.where(valid, idx, problem.n_max), axis=1)
    rows[~valid] = 0
    return _clipped_sum_blocked(problem, x, agents, rows, valid, clip, buffers, out)


def _agents_per_block(data: dict, n_agents: int) -> int | None:
    """Agents whose records (``data``'s rows, shapes ``(A, N, ...)``) fill about
    :data:`_GATHER_BLOCK_BYTES`, or ``None`` when all ``n_agents`` fit in one block."""
    per_agent = sum(v[0].nbytes for v in data.values()) if n_agents else 0
    per_block = max(1, _GATHER_BLOCK_BYTES // max(per_agent, 1))
    return per_block if per_block < n_agents else None


def _clipped_sum_by_blocks(problem: Problem, x: np.ndarray, data: dict, mask: np.ndarray,
                           clip: float | None, per_block: int, out: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """``problem.clipped_grad_sum(x, data, clip, mask)`` taken ``per_block`` agents at a time.

    The fused local step: a problem whose clipped sum reads each record twice (``Z x``, then
    ``Z^T w``) reads a cache-sized block of agents' records from memory once, the second product
    reading it from the cache. ``clipped_grad_sum`` acts on each agent's rows alone, with the
    same operations per agent, so the values are those of one call on every agent (the test
    ``test_fused_full_batch_step_equals_one_call`` keeps them equal bit for bit).

    Parameters
    ----------
    x : array, shape ``(A, *point_shape)``
    data : mapping of str to array, each of shape ``(A, N, ...)``
        Every agent's records (views: nothing is copied).
    mask : bool array, shape ``(A, N)``
        The records summed (held, and drawn under Poisson sampling).
    clip : float or None
    per_block : int
        Agents per block (:func:`_agents_per_block`).
    out : float array, shape ``(A, *point_shape)``, optional
        Where ``total`` is written (:func:`_clipped_sum_in_order`); default a fresh array.

    Returns
    -------
    total : array, shape ``(A, *point_shape)``
        ``out`` when given with that shape.
    n_clipped : int array, shape ``(A,)``
    """
    n_agents = x.shape[0]
    total = _out_or_empty(out, x.shape)
    n_clipped = np.empty(n_agents, dtype=int)
    for start in range(0, n_agents, per_block):
        rows = slice(start, min(n_agents, start + per_block))
        part, clipped = problem.clipped_grad_sum(x[rows], {k: v[rows] for k, v in data.items()},
                                                 clip, mask[rows])
        total[rows] = part
        n_clipped[rows] = _per_row(clipped)
    return total, n_clipped


#: Gathered minibatch bytes above which a step's clipped sum runs per block of agents
#: (:func:`_clipped_sum_blocked`): the C allocator maps arrays beyond 32 MiB fresh at every
#: call and the kernel zeroes their pages again; below, one stacked call is cheaper.
_STACKED_BYTES = 32 * 2**20


def _stacked_bytes(problem: Problem, shape: tuple[int, int]) -> int:
    """Bytes of ``problem.batch`` of ``shape = (A, b)`` rows."""
    per_row = sum(v.itemsize * math.prod(v.shape[2:]) for v in problem._data.values())
    return shape[0] * shape[1] * per_row


def _clipped_sum_blocked(problem: Problem, x: np.ndarray, agents: np.ndarray, idx: np.ndarray,
                         valid: np.ndarray, clip: float | None, buffers: dict | None,
                         out: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """``problem.clipped_grad_sum`` of the minibatches ``idx`` per block of agents, each block
    gathered into reused buffers, the rows in their drawn order.

    ``clipped_grad_sum`` acts on each agent's rows alone, so the values are those of one call
    on every agent's gathered batch, without its stacked temporaries (see
    :func:`_difference_mean_blocked`).

    Parameters
    ----------
    x : array, shape ``(A, *point_shape)``
    agents : int array, shape ``(A,)``
    idx, valid : arrays, shape ``(A, b)``
    clip : float or None
    buffers : dict or None
        Gather buffers of an earlier call (reused), or ``None``.
    out : float array, shape ``(A, *point_shape)``, optional
        Where ``total`` is written (:func:`_clipped_sum_in_order`); default a fresh array.

    Returns
    -------
    total : array, shape ``(A, *point_shape)``
    n_clipped : int array, shape ``(A,)``
    buffers : dict or None
    """
    def clipped_sum(problem, x, snapshot, batch, mask, sizes, clip):
        return problem.clipped_grad_sum(x, batch, clip, mask)

    return _difference_mean_blocked(clipped_sum, problem, x, x, agents, idx, valid,
                                    np.ones(idx.shape[0]), clip, buffers, out)


def _difference_mean_blocked(difference_mean: Any, problem: Problem, x: np.ndarray,
                             snapshot: np.ndarray, agents: np.ndarray, idx: np.ndarray,
                             valid: np.ndarray, sizes: np.ndarray, clip: float | None,
                             buffers: dict | None, out: np.ndarray | None = None,
                             block_bytes: int | None = None
                             ) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """``difference_mean`` over blocks of agents, each block's minibatch gathered into reused
    buffers.

    The per-sample gradients, their transports and differences are ``(A, b, *point_shape)``
    arrays; formed for all agents at once they are tens of MiB each, which the C allocator
    maps fresh and the kernel faults in page by page at every inner step. Per block of about
    :data:`_GATHER_BLOCK_BYTES` of gathered rows they stay small enough to be reused (and to be
    read from the cache). Every operation of ``difference_mean`` acts on each agent's rows
    alone, in the same order: the values are those of one call on all agents.

    Parameters
    ----------
    difference_mean : callable
        :meth:`DPRSVRG.difference_mean`'s signature.
    x, snapshot : arrays, shape ``(A, *point_shape)``
    agents : int array, shape ``(A,)``
    idx, valid : arrays, shape ``(A, b)``
        The minibatch rows (as drawn, not reordered) and which are summands.
    sizes : array, shape ``(A,)``
        The public normalisers ``b_i``.
    clip : float or None
    buffers : dict or None
        Gather buffers of an earlier call (reused), or ``None``.
    out : float array, optional
        Where ``v`` is written when it has ``v``'s shape (:func:`_clipped_sum_in_order`);
        default a fresh array.
    block_bytes : int, optional
        Bytes of gathered rows per block (default :data:`_GATHER_BLOCK_BYTES`; at least one
        agent per block).

    Returns
    -------
    v : array, shape ``(A, *point_shape)``
    n_clipped : int array, shape ``(A,)``
    buffers : dict or None
        The gather buffers, for the next call (``None`` while no agent was drawn).
    """
    n_agents, b = idx.shape
    if n_agents == 0:
        return (np.empty(np.broadcast_shapes(np.shape(x), np.shape(snapshot))),
                np.empty(0, dtype=int), buffers)
    if b == 0:
        v, clipped = difference_mean(problem, x, snapshot, problem.batch(agents, idx), valid,
                                     sizes, clip)
        return v, _per_row(clipped), buffers
    if buffers is None or next(iter(buffers.values())).shape[0] % b:
        probe = problem.batch(agents[:1], idx[:1, :1])
        batch_bytes = b * sum(v.nbytes for v in probe.values())
        budget = _GATHER_BLOCK_BYTES if block_bytes is None else block_bytes
        per_block = min(n_agents, max(1, budget // max(batch_bytes, 1)))
        buffers = {k: np.empty((per_block * b,) + v.shape[2:], v.dtype)
                   for k, v in probe.items()}
    per_block = next(iter(buffers.values())).shape[0] // b
    x = np.asarray(x, dtype=float)
    snapshot = np.asarray(snapshot, dtype=float)
    v = _out_or_empty(out, np.broadcast_shapes(x.shape, snapshot.shape))
    n_clipped = np.empty(n_agents, dtype=int)
    for start, stop, block in problem._batch_blocks(agents, idx, per_block, buffers):
        part, clipped = difference_mean(problem, x[start:stop], snapshot[start:stop], block,
                                        valid[start:stop], sizes[start:stop], clip)
        v[start:stop] = part
        n_clipped[start:stop] = _per_row(clipped)
    return v, n_clipped, buffers


def _owned(eta: Any, mean: np.ndarray, total: np.ndarray) -> bool:
    """Whether a step may overwrite its released ``eta``: the step's own sum (``mean`` formed
    in place in ``total``), or a fresh float64 array the release made (not ``mean`` itself)."""
    if type(eta) is not np.ndarray or eta.dtype != np.float64 or not eta.flags.writeable:
        return False
    if eta is mean:
        return mean is total
    return eta.base is None


def _out_or_empty(out: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """``out`` when it is a float64 array of ``shape``, else a fresh one."""
    if out is not None and out.shape == shape and out.dtype == np.float64:
        return out
    return np.empty(shape)


def _check_neighboring(neighboring: str) -> str:
    if neighboring not in ("replace_one", "add_remove_one"):
        raise ValueError(f"argument 'neighboring' must be 'replace_one' or 'add_remove_one', "
                         f"got {neighboring!r}")
    return neighboring


def _coupled(problem: Problem, neighboring: str) -> bool:
    coupled = bool(getattr(problem, "coupled_records", False))
    if coupled and neighboring != "replace_one":
        raise ValueError(
            f"{type(problem).__name__} couples its records (each per-sample loss depends on the "
            "agent's other records), which rfed accounts only under neighboring='replace_one'"
        )
    return coupled


@dataclass
class DPRSGD(LocalTrainer):
    r"""DP-RSGD local training (PriRFed Alg. 2), batched over the selected agents.

    For ``k = 0..K-1`` (PriRFed Algorithm 2):

    * line 3: minibatch :math:`B_k`: ``b_i`` records uniformly without replacement (the
      paper's), or Poisson (each record independently with probability ``q_i``);
    * line 4: :math:`\eta_k = \frac{1}{b_i}\sum_{p \in B_k} \mathrm{clip}_\tau(\mathrm{grad}
      f_{i,p}(x_{i,k})) + \epsilon_{i,k}`, :math:`\epsilon_{i,k} \sim N_{x_{i,k}}(0,
      \sigma_i^2)` (tangent Gaussian at the current local iterate); under Poisson sampling
      ``b_i`` is the public expected size ``q_i N_i``;
    * line 5: :math:`x_{i,k+1} = \mathrm{Exp}_{x_{i,k}}(-\alpha \eta_k)`;
    * output option 1: :math:`x_{i,K}`; option 2: uniform over :math:`\{x_{i,k}\}_{k=0}^{K}`.

    Parameters
    ----------
    steps : int
        ``K``.
    batch_size : int, float or None
        ``b_i`` (see :func:`rfed.algorithms.federated.sampling.batch_sizes`); ``None`` = full.
        Under Poisson sampling, the expected size (a fraction is the rate ``q``).
    clip : float or None
        Public clipping level :math:`\tau` (required for privacy; ``None`` = never clip, the
        paper's non-private runs).
    noise_multiplier : float, optional
        Noise std over the step's sensitivity (research; a budget on PriRFed sets it instead).
    sigma : float, optional
        Explicit noise std (same for all agents), research.
    paper_epsilon, paper_delta : float, optional
        The paper's calibration (module docstring): not a guarantee.
    constant : float
        ``o_i`` of the paper's calibration (1, as in the paper's experiments).
    sampling : {'without_replacement', 'poisson'}
        Minibatch scheme (module docstring for the accounting of each).
    local_optimizer : optional
        The local update rule fed with the privatized step :math:`\eta_k` in place of line 5,
        e.g. :class:`rfed.optim.RiemannianAdam` (a fresh state per local run, step size
        :math:`\alpha`). Post-processing of the released :math:`\eta_k`: the noise, the
        sensitivity and the privacy report are unchanged. ``None``: line 5 as written.
    """

    steps: int = 1
    batch_size: int | float | None = None
    clip: float | None = None
    noise_multiplier: float | None = None
    sigma: float | None = None
    paper_epsilon: float | None = None
    paper_delta: float | None = None
    constant: float = 1.0
    sampling: str = "without_replacement"
    local_optimizer: Any = None
    name: str = "DP-RSGD"
    epsilon: dataclasses.InitVar[None] = None
    delta: dataclasses.InitVar[None] = None

    def __post_init__(self, epsilon=None, delta=None):
        self._check_noise(epsilon, delta)
        self.clip = _check_clip(self.clip, "clip")
        b = self.batch_size
        if isinstance(b, (bool, np.bool_)) or not (
            b is None
            or (isinstance(b, (int, np.integer)) and b >= 1)
            or (isinstance(b, float) and 0.0 < b <= 1.0)
        ):
            raise ValueError(
                f"argument 'batch_size' must be None (full batch), an int >= 1 or a fraction in "
                f"(0, 1], got {b!r}"
            )
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"argument 'sampling' must be one of {SAMPLINGS}, got "
                             f"{self.sampling!r}")
        rule = self.local_optimizer
        if rule is not None and not (callable(getattr(rule, "init", None))
                                     and callable(getattr(rule, "step", None))):
            raise ValueError("argument 'local_optimizer' must have init(manifold, x) and "
                             "step(manifold, x, grad, state, lr), e.g. rfed.optim.RiemannianAdam()"
                             f"; got {type(rule).__name__}")

    def plan(self, problem: Problem, neighboring: str = "replace_one", rng: Any = None,
             public_sizes: Any = None) -> LocalPlan:
        neighboring = _check_neighboring(neighboring)
        coupled = _coupled(problem, neighboring)
        # the true N_i under replace-one, the declared public sizes under add/remove
        counts = public_counts(problem.counts, neighboring, public_sizes)
        sizes = batch_sizes(counts, self.batch_size).astype(float)
        if self.sampling == "poisson":
            if neighboring != "add_remove_one":
                raise ValueError(
                    "Poisson minibatches are accounted under neighboring='add_remove_one' (the "
                    "sum over the drawn records divided by the public expected batch size moves "
                    "by tau / b when one record is added or removed); pass "
                    "PrivacyBudget(..., neighboring='add_remove_one') or use "
                    "sampling='without_replacement'"
                )
            if self.batch_size is not None and not isinstance(self.batch_size, float):
                sizes = np.full(counts.shape, float(self.batch_size))
            if np.any(sizes > counts):
                raise ValueError("argument 'batch_size' (expected Poisson batch) must not "
                                 f"exceed min N_i = {counts.min()}")
            sampling = "poisson" if np.any(sizes < counts) else "none"
        else:
            if neighboring != "replace_one" and np.any(sizes < counts):
                raise ValueError(
                    "fixed-size minibatches without replacement are accounted under "
                    "neighboring='replace_one' only: the draw of b of the private N_i records "
                    "has no add/remove bound in dp-accounting; use sampling='poisson' (public "
                    "rate) or a full batch (batch_size=None, normalised by the public size) "
                    "for add/remove"
                )
            sampling = "without_replacement" if np.any(sizes < counts) else "none"
        if coupled:
            # every clipped summand may change: no 1/b, no amplification by the minibatch
            sens = np.full(counts.shape, 2.0 * self.clip if self.clip else np.inf)
            sampling = "none"
        elif self.clip is None:
            sens = np.full(counts.shape, np.inf)
        else:
            factor = 2.0 if neighboring == "replace_one" else 1.0
            sens = factor * self.clip / sizes
        plan = LocalPlan(sigma=np.zeros(problem.n_agents), clip=self.clip, sizes=sizes,
                         counts=counts.copy(), sensitivity=sens, neighboring=neighboring,
                         sampling=sampling, steps=self.steps)
        return self._finish_plan(plan, problem, self.clip, rng)

    def train(self, problem, plan, x, agents, step_size, rng, option=1, *, sigma=None,
              snapshot_sigma=None):
        man = problem.manifold
        k_pts = len(man.point_shape)
        agents = np.asarray(agents)
        sigma = self._rows_sigma(plan.sigma, agents, sigma)
        counts = problem.counts[agents]   # the records held (data access only)
        sizes = plan.sizes[agents]        # the public normalisers
        poisson = self.sampling == "poisson" and bool(np.any(sizes < plan.counts[agents]))
        # add/remove runs a full batch or Poisson (never b of the private N_i)
        full = not poisson and (plan.neighboring == "add_remove_one"
                                or bool(np.all(sizes == counts)))
        in_order = not full and not poisson and problem.sorted_batches
        per_block = None
        if full or poisson:
            data, full_mask = _agent_data(problem, agents)
            mask = full_mask
            if problem.sorted_batches:
                # the fused step (chosen once): per cache-sized block of agents, each record
                # read once per step (_clipped_sum_by_blocks)
                per_block = _agents_per_block(data, agents.size)
        buffers = None
        chosen = x
        pick = rng.integers(0, self.steps + 1, size=agents.size) if option == 2 else None
        n_clipped = np.zeros(agents.size, dtype=int)
        int_sizes = sizes.astype(int)
        noisy = bool(np.any(sigma > 0))
        rule = self.local_optimizer
        rule_state = None if rule is None else rule.init(man, x)
        # the array of the previous step's clipped sum, which nothing reads once the step has
        # moved (a local optimizer may keep its eta: then every sum is fresh)
        spent = None
        for k in range(self.steps):
            if option == 2:
                chosen = np.where((pick == k).reshape((-1,) + (1,) * k_pts), x, chosen)
            if poisson:
                # each record independently with the public probability q_i = bbar_i / N_i
                # (N_i the plan's size: the declared public one under add/remove)
                rate = (sizes / plan.counts[agents])[:, None]
                mask = full_mask & (rng.random(full_mask.shape) < rate)
            summed = False
            if not (full or poisson):
                idx, mask = sample_minibatches(counts, int_sizes, rng)
                points = np.broadcast_to(x, (agents.size, *man.point_shape))
                if in_order:
                    total, clipped, buffers = _clipped_sum_in_order(
                        problem, points, agents, idx, mask, plan.clip, buffers, spent)
                    summed = True
                elif _stacked_bytes(problem, idx.shape) > _STACKED_BYTES:
                    total, clipped, buffers = _clipped_sum_blocked(
                        problem, points, agents, idx, mask, plan.clip, buffers, spent)
                    summed = True
                else:
                    data = problem.batch(agents, idx)
            if per_block is not None:
                total, clipped = _clipped_sum_by_blocks(problem, x, data, mask, plan.clip,
                                                        per_block, spent)
                summed = True
            elif not summed:
                total, clipped = problem.clipped_grad_sum(x, data, plan.clip, mask)
            n_clipped += _per_row(clipped)
            # the PUBLIC normaliser b_i (the expected size under Poisson sampling); in place
            # in an array of this function's own (the same quotients)
            normaliser = sizes.reshape((-1,) + (1,) * k_pts)
            mean = (np.divide(total, normaliser, out=total) if summed
                    and total.dtype == np.float64 else total / normaliser)
            eta = self._release(problem, x, mean, sigma, rng, noisy)
            if rule is None:
                # -alpha eta in the released array when it is this function's own (this
                # step's sum, or a fresh release): the same products as -alpha * eta
                if summed and _owned(eta, mean, total):
                    x = man.exp(x, np.multiply(eta, -step_size, out=eta))
                else:
                    x = man.exp(x, -step_size * eta)
                if mean is total and not np.may_share_memory(x, total):
                    spent = total
            else:  # post-processing of the released eta (and of the earlier ones)
                x, rule_state = rule.step(man, x, eta, rule_state, step_size)
        if option == 2:
            x = np.where((pick == self.steps).reshape((-1,) + (1,) * k_pts), x, chosen)
        evals = int(self.steps * (counts.sum() if poisson else sizes.sum()))
        return x, _info(n_clipped, evals)


@dataclass
class DPRSVRG(LocalTrainer):
    r"""DP-RSVRG local training (PriRFed Alg. 3), batched over the selected agents.

    For ``k = 0..K-1`` (PriRFed Algorithm 3), from the snapshot :math:`\tilde x_k`:

    * line 4: :math:`g = \frac{1}{N_i} \sum_j \mathrm{clip}_{\tau_0}(\mathrm{grad}
      f_{i,j}(\tilde x_k))` (full clipped gradient);
    * lines 5-10, ``j = 0..m-1``: pick :math:`l_j` uniformly (independently each step),
      :math:`\eta = \mathrm{clip}_{\tau_1}(\mathrm{grad} f_{i,l_j}(x_j)) -
      \Gamma_{\tilde x_k}^{x_j}(\mathrm{clip}_{\tau_1}(\mathrm{grad} f_{i,l_j}(\tilde x_k)) - g)
      + \epsilon_j` with exact parallel transport and :math:`\epsilon_j \sim N_{x_j}(0,
      \sigma_i^2)` (variance, :ref:`prirfed-rsvrg-variance`), then :math:`x_{j+1} =
      \mathrm{Exp}_{x_j}(-\alpha \eta)`;
    * line 11: :math:`\tilde x_{k+1} = x_m`;
    * output option 1: :math:`x_{K,m}`; option 2: uniform over the ``m K`` points
      :math:`x_{k+1,j}`, ``j = 0..m-1``.

    Sensitivity of a noisy step: ``4 tau_1 + 2 tau_0 / N_i`` (replace-one) or ``4 tau_1 +
    tau_0 / N_i`` with the public ``N_i`` (add/remove; module docstring).

    ``variant='released_snapshot'`` (NOT the paper's; module docstring): per outer loop the
    snapshot gradient is released once, :math:`\tilde g = g + N_{\tilde x}(0, \sigma_0^2)`
    (sensitivity ``2 tau_0 / N_i``), and inner step ``j`` draws ``b_i`` records without
    replacement and moves along :math:`\eta_j = \frac{1}{b_i}\sum_{l \in B_j}
    \mathrm{clip}_{\tau_d}(\mathrm{grad} f_l(x_j) - \Gamma \mathrm{grad} f_l(\tilde x))
    + \Gamma \tilde g + N_{x_j}(0, \sigma_d^2)` (sensitivity ``2 tau_d / b_i``, amplified by
    the subsampling), :math:`x_{j+1} = \mathrm{Exp}_{x_j}(-\alpha \eta_j)`.

    Parameters
    ----------
    steps : int
        ``K`` (outer loops).
    inner_steps : int
        ``m``.
    clip, clip_full : float or None
        Public :math:`\tau_1` (single-sample gradients) and :math:`\tau_0` (full gradient),
        kept separate even where the paper's experiments set them equal (a
        cached single-sample snapshot gradient is clipped by :math:`\tau_1`, never
        :math:`\tau_0`); ``clip_full`` defaults to ``clip``. With
        ``variant='released_snapshot'``, ``clip`` is :math:`\tau_d`, the joint clip of each
        per-sample difference.
    noise_multiplier, sigma, paper_epsilon, paper_delta, constant
        As in :class:`DPRSGD`; the paper's calibration uses :math:`m K` and
        :math:`\tau = \max(\tau_0, \tau_1)`. The released-snapshot variant takes a budget
        (on :class:`PriRFed`) or ``noise_multiplier`` only.
    variant : {'paper', 'released_snapshot'}
        ``'paper'``: Alg. 3 as written (one record per inner step, the default).
    batch_size : int or float
        ``b_i`` of the inner steps of ``'released_snapshot'`` (an int, or a fraction of
        ``N_i``; default 1, the paper's one record per step); must be 1 for ``'paper'``.
    """

    steps: int = 1
    inner_steps: int = 1
    clip: float | None = None
    clip_full: float | None = None
    noise_multiplier: float | None = None
    sigma: float | None = None
    paper_epsilon: float | None = None
    paper_delta: float | None = None
    constant: float = 1.0
    variant: str = "paper"
    batch_size: int | float = 1
    name: str = "DP-RSVRG"
    epsilon: dataclasses.InitVar[None] = None
    delta: dataclasses.InitVar[None] = None

    def __post_init__(self, epsilon=None, delta=None):
        self._check_noise(epsilon, delta)
        if self.variant not in RSVRG_VARIANTS:
            raise ValueError(f"argument 'variant' must be one of {RSVRG_VARIANTS}, got "
                             f"{self.variant!r}")
        b = self.batch_size
        if isinstance(b, (bool, np.bool_)) or not (
            (isinstance(b, (int, np.integer)) and b >= 1)
            or (isinstance(b, float) and 0.0 < b <= 1.0)
        ):
            raise ValueError(f"argument 'batch_size' must be an int >= 1 or a fraction in "
                             f"(0, 1], got {b!r}")
        if self.variant == "paper" and not (isinstance(b, (int, np.integer)) and b == 1):
            raise ValueError("argument 'batch_size' is for variant='released_snapshot'; the "
                             "paper's Alg. 3 picks one record per inner step")
        if self.variant == "released_snapshot" and self.name == "DP-RSVRG":
            self.name = "DP-RSVRG-released-snapshot"
        m = self.inner_steps
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise ValueError(f"argument 'inner_steps' must be an int >= 1, got {m!r}")
        self.clip = _check_clip(self.clip, "clip")
        self.clip_full = _check_clip(self.clip_full, "clip_full")
        if self.clip_full is None:
            self.clip_full = self.clip

    @property
    def total_steps(self) -> int:
        """Noisy steps of one local run: ``K m``."""
        return self.steps * self.inner_steps

    def plan(self, problem: Problem, neighboring: str = "replace_one", rng: Any = None,
             public_sizes: Any = None) -> LocalPlan:
        neighboring = _check_neighboring(neighboring)
        if neighboring != "replace_one" and self.variant == "released_snapshot":
            raise ValueError(
                "DP-RSVRG with a released snapshot is accounted under neighboring='replace_one' "
                "only: its inner steps draw b of the private N_i records without replacement, "
                "which has no add/remove bound in dp-accounting; use variant='paper'"
            )
        coupled = _coupled(problem, neighboring)
        # the true N_i under replace-one, the declared public sizes under add/remove
        counts = public_counts(problem.counts, neighboring, public_sizes)
        tau1, tau0 = self.clip, self.clip_full
        if self.variant == "released_snapshot":
            return self._plan_released(problem, coupled, rng)
        sens: np.ndarray
        if tau1 is None or tau0 is None:
            sens = np.full(counts.shape, np.inf)
        elif neighboring == "replace_one":
            per_step = 4.0 * tau1 + 2.0 * tau0 / (1.0 if coupled else counts.astype(float))
            sens = np.broadcast_to(per_step, counts.shape).astype(float)
        else:
            # g = (1/N^pub) sum_j clip(grad f_j): one summand more or less moves it by
            # tau_0 / N^pub; a step whose pick is the added record moves by at most
            # 4 tau_1 + tau_0 / N^pub (the uniform pick over the held records is a mixture,
            # bounded by its worst component: module docstring)
            sens = 4.0 * tau1 + tau0 / counts.astype(float)
        plan = LocalPlan(sigma=np.zeros(problem.n_agents), clip=tau1, clip_full=tau0,
                         sizes=counts.astype(float), counts=counts.copy(), sensitivity=sens,
                         neighboring=neighboring, sampling="none", steps=self.total_steps)
        paper_clip = None if tau0 is None or tau1 is None else max(tau0, tau1)
        return self._finish_plan(plan, problem, paper_clip, rng)

    def _plan_released(self, problem: Problem, coupled: bool, rng: Any) -> LocalPlan:
        if coupled:
            raise ValueError(
                f"{type(problem).__name__} couples its records: a replaced record would move "
                "every summand of the inner steps, which variant='released_snapshot' does not "
                "account; use the paper's variant"
            )
        counts = problem.counts
        sizes = batch_sizes(counts, self.batch_size)
        if np.any(sizes > counts):
            raise ValueError(f"argument 'batch_size' must not exceed min N_i = {counts.min()}")
        if self.clip is None or self.clip_full is None:
            sens = snap = np.full(counts.shape, np.inf)
        else:
            sens = 2.0 * self.clip / sizes.astype(float)
            snap = 2.0 * self.clip_full / counts.astype(float)
        plan = LocalPlan(sigma=np.zeros(problem.n_agents), clip=self.clip,
                         clip_full=self.clip_full, sizes=sizes.astype(float),
                         counts=counts.copy(), sensitivity=sens, neighboring="replace_one",
                         sampling="without_replacement" if np.any(sizes < counts) else "none",
                         steps=self.total_steps, snapshot_sensitivity=snap,
                         snapshot_steps=self.steps)
        return self._finish_plan(plan, problem, None, rng)

    @staticmethod
    def difference_mean(problem: Problem, x: np.ndarray, snapshot: np.ndarray,
                        batch: dict, mask: np.ndarray, sizes: np.ndarray,
                        clip: float | None) -> tuple[np.ndarray, np.ndarray]:
        r"""The data-dependent value of an inner step of ``variant='released_snapshot'``.

        :math:`v = \frac{1}{b}\sum_{l} \mathrm{clip}_{\tau_d}(\mathrm{grad} f_l(x) -
        \Gamma_{\tilde x}^{x} \mathrm{grad} f_l(\tilde x))`, each difference clipped in the norm
        at ``x``: between neighbouring batches (one record replaced) ``v`` moves by at most
        ``2 tau_d / b``.

        Parameters
        ----------
        x, snapshot : array, shape ``(A, *point_shape)``
        batch : dict of arrays, each ``(A, b, ...)``
        mask : bool array, shape ``(A, b)``
            The summands (padding ``False``).
        sizes : array, shape ``(A,)``
            The public normalisers ``b_i``.
        clip : float or None
            :math:`\tau_d` (``None``: no clipping, non-private).

        Returns
        -------
        v : array, shape ``(A, *point_shape)``
        n_clipped : int array, shape ``(A,)``
        """
        man = problem.manifold
        k = len(man.point_shape)
        xb = np.expand_dims(x, -1 - k)
        sb = np.expand_dims(snapshot, -1 - k)
        diff = problem.sample_rgrad(x, batch) - man.transport(
            sb, xb, problem.sample_rgrad(snapshot, batch))
        scale = np.ones(diff.shape[: diff.ndim - k])
        n_clipped = np.zeros(diff.shape[: diff.ndim - k - 1], dtype=int)
        if clip is not None:
            norms = man.norm(xb, diff)
            over = norms > clip
            scale = np.where(over, clip / np.where(over, norms, 1.0), 1.0)
            n_clipped = np.sum(over & mask, axis=-1)
        scale = np.where(mask, scale, 0.0)
        total = np.sum(scale.reshape(scale.shape + (1,) * k) * diff, axis=-1 - k)
        return total / np.asarray(sizes, dtype=float).reshape((-1,) + (1,) * k), n_clipped

    def _train_released(self, problem, plan, x, agents, step_size, rng, option, sigma,
                        snapshot_sigma):
        man = problem.manifold
        shape = (-1,) + (1,) * len(man.point_shape)
        counts = problem.counts[agents]
        sizes = plan.sizes[agents]
        int_sizes = sizes.astype(int)
        data, mask = _agent_data(problem, agents)
        m = self.inner_steps
        if option == 2:
            pick = rng.integers(0, m * self.steps, size=agents.size)
            chosen = x
        n_clipped = np.zeros(agents.size, dtype=int)
        noisy = bool(np.any(sigma > 0))
        # the first inner step's iterate is the snapshot itself: each difference
        # grad f_l(x~) - Gamma_{x~}^{x~} grad f_l(x~) is u - u with u finite, +0.0 exactly, where
        # the transport from a point to itself returns its argument; so is their clipped mean
        # (norms 0, nothing clipped). Its minibatch is still drawn (the same random stream).
        first_is_zero = man.exact_self_transport
        snap = x
        buffers = None   # the inner steps' gather buffers, reused by every step
        for k in range(self.steps):
            total, clipped = problem.clipped_grad_sum(snap, data, plan.clip_full, mask)
            n_clipped += _per_row(clipped)
            # the snapshot's release: its own Gaussian mechanism (sensitivity 2 tau_0 / N_i)
            g_rel = self._release(problem, snap, total / counts.reshape(shape), snapshot_sigma,
                                  rng)
            xj = snap
            for j in range(m):
                if option == 2:
                    chosen = np.where((pick == k * m + j).reshape(shape), xj, chosen)
                idx, valid = sample_minibatches(counts, int_sizes, rng)
                if j == 0 and first_is_zero:
                    v = np.zeros(np.broadcast_shapes(np.shape(xj), np.shape(snap)))
                else:
                    v, clipped, buffers = _difference_mean_blocked(
                        self.difference_mean, problem, xj, snap, agents, idx, valid, sizes,
                        plan.clip, buffers, block_bytes=_DIFFERENCE_BLOCK_BYTES)
                    n_clipped += _per_row(clipped)
                eta = v + man.transport(snap, xj, g_rel)
                eta = self._release(problem, xj, eta, sigma, rng, noisy)
                xj = man.exp(xj, -step_size * eta)
            snap = xj
        out = chosen if option == 2 else snap
        evals = int(self.steps * (counts.sum() + 2 * m * sizes.sum()))
        return out, _info(n_clipped, evals)

    def train(self, problem, plan, x, agents, step_size, rng, option=1, *, sigma=None,
              snapshot_sigma=None):
        agents = np.asarray(agents)
        sigma = self._rows_sigma(plan.sigma, agents, sigma)
        if self.variant == "released_snapshot":
            snapshot_sigma = self._rows_sigma(plan.snapshot_sigma, agents, snapshot_sigma)
            return self._train_released(problem, plan, x, agents, step_size, rng, option, sigma,
                                        snapshot_sigma)
        man = problem.manifold
        k_pts = len(man.point_shape)
        shape = (-1,) + (1,) * k_pts
        counts = problem.counts[agents]
        data, mask = _agent_data(problem, agents)
        m = self.inner_steps
        if option == 2:
            pick = rng.integers(0, m * self.steps, size=agents.size)
            chosen = x
        n_clipped = np.zeros(agents.size, dtype=int)
        noisy = bool(np.any(sigma > 0))
        snap = x
        for k in range(self.steps):
            total, clipped = problem.clipped_grad_sum(snap, data, plan.clip_full, mask)
            n_clipped += _per_row(clipped)
            # the plan's N_i: the true size under replace-one, the public one under add/remove
            g_full = total / plan.counts[agents].reshape(shape)
            xj = snap
            # line 6 for all j at once: l_j uniform on [N_i], independent across j
            picks = problem.batch(agents, rng.integers(0, counts[:, None], size=(agents.size, m)))
            # c_1(x~) - g for every j at once: the snapshot stays fixed during the inner loop
            at_snap, c_snap = problem.clipped_grad_sum(
                snap[:, None], {key: v[:, :, None] for key, v in picks.items()}, plan.clip)
            n_clipped += _per_row(c_snap)
            snap_terms = at_snap - g_full[:, None]
            # the single-record batches of the inner steps, sliced once (views)
            ones = [{key: v[:, j : j + 1] for key, v in picks.items()} for j in range(m)]
            for j in range(m):
                if option == 2:
                    chosen = np.where((pick == k * m + j).reshape(shape), xj, chosen)
                g1, c1 = problem.clipped_grad_sum(xj, ones[j], plan.clip)
                n_clipped += _per_row(c1)
                eta = g1 - man.transport(snap, xj, snap_terms[:, j])
                eta = self._release(problem, xj, eta, sigma, rng, noisy)
                xj = man.exp(xj, -step_size * eta)
            snap = xj
        out = chosen if option == 2 else snap
        evals = int(self.steps * (counts.sum() + 2 * m * agents.size))
        return out, _info(n_clipped, evals)
