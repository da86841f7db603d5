"""Private local training of the selected agents: DP-RSGD (Alg. 2) and DP-RSVRG (Alg. 3).

Both trainers run all selected agents at once: the iterate array has shape
``(A, *point_shape)``, one row per selected agent, and every manifold call serves all rows.
Only the local steps (``k``, and ``j`` for RSVRG) are Python loops.

Noise (PriRFed, seed 004, spec section 2.5, with the constants ``o_i = o~_i = 1`` of the paper's
experiments, L430):

* DP-RSGD (L322, quoting HMJG24 Thm 1):
  :math:`\\sigma_i^2 = o_i K \\log(1/\\delta)\\, \\tau^2 / (N_i^2 \\epsilon^2)`;
* DP-RSVRG (L416, quoting UHJM23 Claim 5):
  :math:`\\sigma_i^2 = \\tilde o_i\\, m K \\log(1/\\delta)\\, \\tau^2 / (N_i^2 \\epsilon^2)`,
  :math:`\\tau = \\max(\\tau_0, \\tau_1)`.

These are the paper's heuristic calibrations (the constants of the cited theorems are set to 1),
not certified guarantees; :mod:`rfed.algorithms.federated.accounting` certifies what the code
does with dp-accounting. A trainer with neither ``epsilon`` nor ``sigma`` is the non-private
form (no noise, and by default no clipping).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rfed.algorithms.federated.sampling import batch_sizes, sample_minibatches
from rfed.privacy import papers
from rfed.privacy.mechanisms import gaussian_mechanism
from rfed.problems.base import Problem

__all__ = ["LocalTrainer", "LocalPlan", "DPRSGD", "DPRSVRG", "paper_sigma"]


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
    r"""Per-agent noise std of PriRFed's local trainers (spec section 2.5).

    :math:`\sigma_i = \sqrt{o\, m K \log(1/\delta)}\; \tau / (N_i \epsilon)` with ``m = 1`` for
    DP-RSGD (paper L322, HMJG24 Thm 1) and ``m`` the inner loop length for DP-RSVRG (paper L416,
    UHJM23 Claim 5, read with variance :math:`\sigma^2`, pitfall 2). Delegates to
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
        Clipping level (``None``: no clipping). For DP-RSVRG, ``clip`` is tau_1 and
        ``clip_full`` tau_0.
    sizes : int array, shape ``(n_agents,)``
        Minibatch sizes ``b_i`` (DP-RSGD) or ``N_i`` (DP-RSVRG's full gradients).
    """

    sigma: np.ndarray
    clip: float | None
    sizes: np.ndarray
    clip_full: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def private(self) -> bool:
        return bool(np.all(self.sigma > 0))


def _resolve_clip(clip: Any, problem: Problem, private: bool, name: str) -> float | None:
    if isinstance(clip, str):
        if clip != "auto":
            raise ValueError(f"argument '{name}' must be a float, None or 'auto', got {clip!r}")
        if not private:
            return None
        if problem.gradient_bound is None:
            raise ValueError(
                f"argument '{name}'='auto' needs the problem's gradient_bound, and "
                f"{type(problem).__name__} has none; pass {name}=<float>"
            )
        return float(problem.gradient_bound)
    if clip is None:
        return None
    if not float(clip) > 0:
        raise ValueError(f"argument '{name}' must be > 0, got {clip}")
    return float(clip)


class LocalTrainer(abc.ABC):
    """Local training of the agents selected in a round (PriRFed Alg. 1 line 6)."""

    name = "local"
    steps: int

    @abc.abstractmethod
    def plan(self, problem: Problem) -> LocalPlan:
        """Resolve clipping, batch sizes and noise for ``problem``."""

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

        Returns
        -------
        x_out : array, shape ``(A, *point_shape)``
        info : dict
            ``n_clipped`` (total clipped per-sample gradients) and ``grad_evals``.
        """

    def _noise(self, problem, plan, x, value, agents, rng):
        if not np.any(plan.sigma[agents] > 0):
            return value
        return gaussian_mechanism(problem.manifold, x, value, plan.sigma[agents], rng)


def _agent_data(problem: Problem, agents: np.ndarray) -> tuple[dict, np.ndarray]:
    """All samples of ``agents``; a view (no copy of the data) under full participation."""
    if agents.size == problem.n_agents and np.array_equal(agents, np.arange(problem.n_agents)):
        return dict(problem.data), problem.mask
    return {key: v[agents] for key, v in problem.data.items()}, problem.mask[agents]


def _check_common(steps: int, epsilon, delta, sigma, constant) -> None:
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"argument 'steps' must be an int >= 1, got {steps!r}")
    if sigma is not None and epsilon is not None:
        raise ValueError("give either 'sigma' (explicit noise std) or 'epsilon' (paper's "
                         "calibration), not both")
    if sigma is not None and not float(sigma) >= 0:
        raise ValueError(f"argument 'sigma' must be >= 0, got {sigma}")
    if epsilon is not None:
        if not float(epsilon) > 0:
            raise ValueError(f"argument 'epsilon' must be > 0, got {epsilon}")
        if delta is None or not 0 < float(delta) < 1:
            raise ValueError(f"argument 'delta' must be in (0, 1) with 'epsilon', got {delta}")
    if not constant > 0:
        raise ValueError(f"argument 'constant' must be > 0, got {constant}")


@dataclass
class DPRSGD(LocalTrainer):
    r"""DP-RSGD local training (PriRFed Alg. 2), batched over the selected agents.

    For ``k = 0..K-1`` (spec section 2.3):

    * line 3: minibatch :math:`B_k` of size :math:`b_i`, uniformly without replacement;
    * line 4: :math:`\eta_k = \frac{1}{b_i}\sum_{p \in B_k} \mathrm{clip}_\tau(\mathrm{grad}
      f_{i,p}(x_{i,k})) + \epsilon_{i,k}`, :math:`\epsilon_{i,k} \sim N_{x_{i,k}}(0,
      \sigma_i^2)` (tangent Gaussian at the current local iterate);
    * line 5: :math:`x_{i,k+1} = \mathrm{Exp}_{x_{i,k}}(-\alpha \eta_k)`;
    * output option 1: :math:`x_{i,K}`; option 2: uniform over :math:`\{x_{i,k}\}_{k=0}^{K}`.

    Parameters
    ----------
    steps : int
        ``K``.
    batch_size : int, float or None
        ``b_i`` (see :func:`rfed.algorithms.federated.sampling.batch_sizes`); ``None`` = full.
    clip : float, None or "auto"
        :math:`\tau`; ``"auto"`` = the problem's ``gradient_bound`` when private, no clipping
        when not (the paper's non-private runs); ``None`` = never clip.
    epsilon, delta : float, optional
        Local budget; sigma from :func:`paper_sigma` (with ``K`` steps).
    sigma : float, optional
        Explicit noise std (same for all agents), instead of ``epsilon``.
    constant : float
        ``o_i`` of the calibration (1, as in the paper's experiments).
    """

    steps: int = 1
    batch_size: int | float | None = None
    clip: float | str | None = "auto"
    epsilon: float | None = None
    delta: float | None = None
    sigma: float | None = None
    constant: float = 1.0
    name: str = "DP-RSGD"

    def __post_init__(self):
        _check_common(self.steps, self.epsilon, self.delta, self.sigma, self.constant)
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

    @property
    def private(self) -> bool:
        return self.epsilon is not None or (self.sigma is not None and self.sigma > 0)

    @property
    def total_steps(self) -> int:
        """Noisy steps of one local run: ``K``."""
        return self.steps

    def plan(self, problem: Problem) -> LocalPlan:
        clip = _resolve_clip(self.clip, problem, self.private, "clip")
        sizes = batch_sizes(problem.counts, self.batch_size)
        if self.epsilon is not None:
            if clip is None:
                raise ValueError("the paper's calibration needs a clipping level; set 'clip'")
            sigma = paper_sigma(problem.counts, epsilon=self.epsilon, delta=self.delta,
                                clip=clip, steps=self.steps, constant=self.constant)
        else:
            sigma = np.full(problem.n_agents, float(self.sigma or 0.0))
        return LocalPlan(sigma=sigma, clip=clip, sizes=sizes)

    def train(self, problem, plan, x, agents, step_size, rng, option=1):
        man = problem.manifold
        k_pts = len(man.point_shape)
        agents = np.asarray(agents)
        counts = problem.counts[agents]
        sizes = plan.sizes[agents]
        full = bool(np.all(sizes == counts))
        masked = getattr(problem, "masked_batches", False) and 4 * sizes.min() >= counts.max()
        if full or masked:
            data, full_mask = _agent_data(problem, agents)
            mask = full_mask
        chosen = x
        pick = rng.integers(0, self.steps + 1, size=agents.size) if option == 2 else None
        n_clipped = 0
        for k in range(self.steps):
            if option == 2:
                chosen = np.where((pick == k).reshape((-1,) + (1,) * k_pts), x, chosen)
            if not full:
                idx, valid = sample_minibatches(counts, sizes, rng)
                if masked:
                    # large batches of a cheap per-sample gradient: select by a mask over all
                    # samples instead of gathering a copy of the batch
                    mask = np.zeros_like(full_mask)
                    mask[np.nonzero(valid)[0], idx[valid]] = True
                else:
                    data, mask = problem.batch(agents, idx), valid
            total, clipped = problem.clipped_grad_sum(x, data, plan.clip, mask)
            n_clipped += int(np.sum(clipped))
            mean = total / sizes.reshape((-1,) + (1,) * k_pts)
            eta = self._noise(problem, plan, x, mean, agents, rng)
            x = man.exp(x, -step_size * eta)
        if option == 2:
            x = np.where((pick == self.steps).reshape((-1,) + (1,) * k_pts), x, chosen)
        return x, {"n_clipped": n_clipped, "grad_evals": int(self.steps * sizes.sum())}


@dataclass
class DPRSVRG(LocalTrainer):
    r"""DP-RSVRG local training (PriRFed Alg. 3), batched over the selected agents.

    For ``k = 0..K-1`` (spec section 2.4), from the snapshot :math:`\tilde x_k`:

    * line 4: :math:`g = \frac{1}{N_i} \sum_j \mathrm{clip}_{\tau_0}(\mathrm{grad}
      f_{i,j}(\tilde x_k))` (full clipped gradient);
    * lines 5-10, ``j = 0..m-1``: pick :math:`l_j` uniformly (independently each step),
      :math:`\eta = \mathrm{clip}_{\tau_1}(\mathrm{grad} f_{i,l_j}(x_j)) -
      \Gamma_{\tilde x_k}^{x_j}(\mathrm{clip}_{\tau_1}(\mathrm{grad} f_{i,l_j}(\tilde x_k)) - g)
      + \epsilon_j` with exact parallel transport and :math:`\epsilon_j \sim N_{x_j}(0,
      \sigma_i^2)` (variance, pitfall 2), then :math:`x_{j+1} = \mathrm{Exp}_{x_j}(-\alpha
      \eta)`;
    * line 11: :math:`\tilde x_{k+1} = x_m`;
    * output option 1: :math:`x_{K,m}`; option 2: uniform over the ``m K`` points
      :math:`x_{k+1,j}`, ``j = 0..m-1``.

    Parameters
    ----------
    steps : int
        ``K`` (outer loops).
    inner_steps : int
        ``m``.
    clip_full, clip : float, None or "auto"
        :math:`\tau_0` (full gradient) and :math:`\tau_1` (single-sample gradients), kept
        separate (pitfall 23).
    epsilon, delta, sigma, constant
        As in :class:`DPRSGD`; the calibration uses :math:`m K` and
        :math:`\tau = \max(\tau_0, \tau_1)`.
    """

    steps: int = 1
    inner_steps: int = 1
    clip: float | str | None = "auto"
    clip_full: float | str | None = "auto"
    epsilon: float | None = None
    delta: float | None = None
    sigma: float | None = None
    constant: float = 1.0
    name: str = "DP-RSVRG"

    def __post_init__(self):
        _check_common(self.steps, self.epsilon, self.delta, self.sigma, self.constant)
        m = self.inner_steps
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise ValueError(f"argument 'inner_steps' must be an int >= 1, got {m!r}")

    @property
    def private(self) -> bool:
        return self.epsilon is not None or (self.sigma is not None and self.sigma > 0)

    def plan(self, problem: Problem) -> LocalPlan:
        tau1 = _resolve_clip(self.clip, problem, self.private, "clip")
        tau0 = _resolve_clip(self.clip_full, problem, self.private, "clip_full")
        if self.epsilon is not None:
            if tau0 is None or tau1 is None:
                raise ValueError("the paper's calibration needs clipping levels; set 'clip' and "
                                 "'clip_full'")
            sigma = paper_sigma(problem.counts, epsilon=self.epsilon, delta=self.delta,
                                clip=max(tau0, tau1), steps=self.steps,
                                inner_steps=self.inner_steps, constant=self.constant)
        else:
            sigma = np.full(problem.n_agents, float(self.sigma or 0.0))
        return LocalPlan(sigma=sigma, clip=tau1, clip_full=tau0, sizes=problem.counts.copy())

    def train(self, problem, plan, x, agents, step_size, rng, option=1):
        man = problem.manifold
        k_pts = len(man.point_shape)
        shape = (-1,) + (1,) * k_pts
        agents = np.asarray(agents)
        counts = problem.counts[agents]
        data, mask = _agent_data(problem, agents)
        m = self.inner_steps
        if option == 2:
            pick = rng.integers(0, m * self.steps, size=agents.size)
            chosen = x
        n_clipped = 0
        snap = x
        for k in range(self.steps):
            total, clipped = problem.clipped_grad_sum(snap, data, plan.clip_full, mask)
            n_clipped += int(np.sum(clipped))
            g_full = total / counts.reshape(shape)
            xj = snap
            # line 6 for all j at once: l_j uniform on [N_i], independent across j
            picks = problem.batch(agents, rng.integers(0, counts[:, None], size=(agents.size, m)))
            for j in range(m):
                if option == 2:
                    chosen = np.where((pick == k * m + j).reshape(shape), xj, chosen)
                one = {key: v[:, j : j + 1] for key, v in picks.items()}
                # the sample's gradient at x_j and at the snapshot in one batched call
                pair = {key: np.broadcast_to(v, (2,) + v.shape) for key, v in one.items()}
                g2, c2 = problem.clipped_grad_sum(np.stack([xj, snap]), pair, plan.clip)
                n_clipped += int(np.sum(c2))
                eta = g2[0] - man.transport(snap, xj, g2[1] - g_full)
                eta = self._noise(problem, plan, xj, eta, agents, rng)
                xj = man.exp(xj, -step_size * eta)
            snap = xj
        out = chosen if option == 2 else snap
        evals = int(self.steps * (counts.sum() + 2 * m * agents.size))
        return out, {"n_clipped": n_clipped, "grad_evals": evals}

    @property
    def total_steps(self) -> int:
        """Noisy steps of one local run: ``K m``."""
        return self.steps * self.inner_steps
