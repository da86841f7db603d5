"""DO-ADP: decentralized momentum SGD with random activation, sparsified gossip and Gaussian noise.

After Huo, Liu, Ding, Johansson and Shi (rfed's reading: ``docs/papers/doadp.md``). Every agent is
active with probability ``p``; an active agent samples ``b`` local records (``b = 1`` in the paper),
clips each per-sample gradient **per coordinate** to ``G / sqrt(dim)`` (Assumption 2), adds ``N(0,
sigma^2 I_dim)``, takes a momentum step plus a consensus step on the *public copies*, and broadcasts
the Top-k (or rand-k) sparsified difference between its new state and its public copy (eqs.
(5a)-(5d); Algorithm 1 with the sender's own-copy update and Jacobi semantics).

Manifold form (intrinsic reading, ``docs/papers/doadp.md``): the momentum lives in ``T_{x_i}`` and
is parallel-transported along each step, the consensus direction is ``sum_j w_ij
Log_{xhat_i}(xhat_j)`` transported to ``x_i``, the message is Top-k of the coordinates of
``Log_{xhat_i}(x_i^new)`` in the orthonormal basis ``tangent_basis(xhat_i)`` (computable by every
neighbour since ``xhat_i`` is public), and receivers set ``xhat_i <-
Exp_{xhat_i}(from_coords(s_i))``. On Euclidean space every map is the identity or addition and the
update is exactly the paper's.

References
----------
* Wei Huo, Changxin Liu, Kemi Ding, Karl Henrik Johansson and Ling Shi. Decentralized
  Optimization with Amplified Privacy via Efficient Communication. arXiv preprint
  arXiv:2506.07102, 2025.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms._steps import injectivity_radius
from rfed.algorithms.decentralized._common import (
    check_choice,
    check_nonneg,
    check_probability,
    scratch_of,
)
from rfed.algorithms.decentralized._privacy import PaperFormula
from rfed.algorithms.decentralized._streams import PlannedRounds, agent_draws
from rfed.algorithms.decentralized.base import PrivateAlgorithm, PrivateGradient, PrivateState
from rfed.algorithms.private import GaussianRelease
from rfed.manifolds import Euclidean
from rfed.networks.comm import dense_payload_bytes, sparse_payload_bytes
from rfed.networks.gossip import consensus_direction
from rfed.networks.network import Network
from rfed.privacy import papers
from rfed.privacy.budget import PrivacyBudget
from rfed.randomness import public_generator

__all__ = ["DOADP", "NoisyDSGD", "sparsify"]


def sparsify(coords: np.ndarray, k: int, method: str = "top_k",
             rng: np.random.Generator | None = None) -> np.ndarray:
    """Keep ``k`` coordinates of every row of ``coords`` ``(A, dim)``, zero the rest.

    ``'top_k'``: the ``k`` largest magnitudes (Definition 2), ties broken by the lowest index
    (``docs/papers/doadp.md``, 'Top-k details'), selected in O(dim) per row with
    ``np.partition``. ``'rand_k'``: ``k`` indices uniformly at random per row, drawn from
    ``rng`` independently of the data (the fixed-index sensitivity argument holds); ``rng`` may
    be a Generator or keyed per-agent draws (one row per agent).

    Parameters
    ----------
    coords : ndarray, shape ``(A, dim)``
    k : int
        Coordinates kept per row, ``1 <= k <= dim``.
    method : {'top_k', 'rand_k'}
    rng : numpy.random.Generator, optional
        Needed by ``'rand_k'``.

    Returns
    -------
    ndarray, shape ``(A, dim)``
    """
    coords = np.asarray(coords, dtype=float)
    a, dim = coords.shape
    if k >= dim:
        return coords.copy()
    if method == "top_k":
        # O(dim) selection: everything at or above the k-th largest magnitude; rows where ties
        # at that magnitude overflow k keep the lowest indices (deterministic). Ties
        # are rare in noisy coordinates, so only those rows pay for the running count.
        mag = np.abs(coords)
        part = mag.copy()
        part.partition(dim - k, axis=1)
        thr = part[:, dim - k : dim - k + 1]
        keep = mag >= thr
        # every row keeps at least k, so a row keeps more only when the total exceeds a * k
        over = (np.flatnonzero(np.count_nonzero(keep, axis=1) > k)
                if np.count_nonzero(keep) > a * k else ())
        if len(over):
            m, t = mag[over], thr[over]
            ties = m == t
            room = k - np.count_nonzero(m > t, axis=1)[:, None]
            keep[over] = (m > t) | (ties & (np.cumsum(ties, axis=1) <= room))
        return np.where(keep, coords, 0.0)
    if method == "rand_k":
        if rng is None:
            raise ValueError("rand_k sparsification needs a generator 'rng'")
        idx = np.argpartition(rng.random((a, dim)), k - 1, axis=1)[:, :k]
    else:
        raise ValueError(f"argument 'method' must be 'top_k' or 'rand_k', got {method!r}")
    out = np.zeros_like(coords)
    rows = np.arange(a)[:, None]
    out[rows, idx] = coords[rows, idx]
    return out


@dataclass
class DOADPState(PrivateState):
    """DO-ADP state of a block of agents: iterates ``x``, momenta ``m`` (tangent at ``x``),
    public copies ``xhat`` (rows of the block), the active rounds summed over agents, and (from
    :class:`~rfed.algorithms.decentralized.PrivateState`) the seed of the keyed streams and the
    per-coordinate noise std of this run.

    Parameters
    ----------
    m, xhat : ndarray, shape ``(n_local, *point_shape)``
    n_active_total : int
    **fields
        Those of :class:`~rfed.algorithms.decentralized.PrivateState`.
    """

    m: np.ndarray = None  # type: ignore[assignment]
    xhat: np.ndarray = None  # type: ignore[assignment]
    n_active_total: int = 0


class DOADP(PrivateAlgorithm):
    r"""DO-ADP (Algorithm 1 / eqs. (5a)-(5d) of Huo, Liu, Ding, Johansson and Shi), generic
    over the manifold.

    Parameters
    ----------
    network : Network
        Graph, symmetric doubly stochastic ``W`` (Assumption 3) and the communicator.
    alpha, beta, gamma : float
        SGD step, momentum factor, consensus step (experiments: 1e-3 / 1e-2, 0.15, 0.05).
    p : float
        Activation probability in (0, 1]; the convergence theory needs ``p >= 1/2`` (a warning
        otherwise).
    k : int, optional
        Coordinates kept per message; ``k_ratio`` gives it as a fraction of ``dim`` instead
        (``k = max(1, round(k_ratio * dim))``). Default: all (no sparsification).
    sparsifier : {'top_k', 'rand_k'}
    budget : PrivacyBudget, optional
        Budget-first (the way to run privately): the noise multiplier of the planned run of
        ``n_rounds`` rounds is calibrated at ``init`` so that the finished run certifies
        ``budget`` (record level, replace-one, per agent's data set); the activation schedule is
        drawn from a public generator before the run, and the calibration uses the largest
        number of rounds any agent is active in.
    n_rounds : int, optional
        Planned rounds (required with ``budget`` and ``paper_epsilon``); stepping past them
        raises.
    noise_multiplier : float, optional
        Research: noise std over the replace-one sensitivity ``2 G / b`` of one release.
    sigma : float
        The paper's parametrisation: Gaussian noise std per coordinate; 0 turns the noise off.
        Its certified epsilon is reported beside the paper's.
    paper_epsilon : float, optional
        The paper's Theorem 1 calibration (:func:`rfed.privacy.papers.doadp_sigma`, variant
        'paper') for ``n_rounds`` rounds: the paper's formula, not a guarantee (the certified
        epsilon is reported beside it).
    privacy : NoiseConfig, optional
        The noise as one object instead of the keywords above.
    delta : float, optional
        Delta of the certified report when no budget is given (default ``min(1e-5, 1/(10 q))``).
    grad_bound : float, optional
        ``G``, a PUBLIC number: each tangent coordinate of each per-sample gradient is clamped
        to ``G / sqrt(dim)`` before the noise (Assumption 2 enforced by clipping), so every
        per-sample gradient has L2 norm ``<= G``. Required for a private run.
    batch_size : int or None
        Samples per active agent per round (1 in the paper; a minibatch for ``b > 1``).
        ``None``: the full local data set (deterministic gradients; for tests of the
        optimization, requires equal local sizes).
    xhat_init : {'x0', 'zero'}
        Initial public copies: the common public start ``x0`` (costs no privacy) or the
        paper's 0 (Euclidean only).
    delta0 : float
        Per-step delta of the Gaussian mechanism, for the paper's privacy report.

    Notes
    -----
    Privacy: the released value of an active agent is its noisy averaged gradient; the Top-k
    (or rand-k) message is computed from the agent's iterate, which depends on its data only
    through past noisy gradients, so the message, its values AND its chosen indices are
    post-processing of accounted releases (the noise is added before the selection). The
    paper's ``sqrt(k/d)`` gain (which treats the indices as fixed) and activation
    amplification are not claimed on the certified side.

    History keys: those of :class:`~rfed.algorithms.decentralized.DecentralizedAlgorithm`
    (``round``, ``cost``, ``grad_norm``, ``excess_risk``, ``dist_to_ref``,
    ``consensus_error``, ``messages``, ``bytes_sent``).
    """

    name = "DO-ADP"
    state_rows = ("x", "m", "xhat")
    state_class = DOADPState

    def __init__(self, network: Network, *, alpha: float, beta: float = 0.15, gamma: float = 0.05,
                 p: float = 1.0, k: int | None = None, k_ratio: float | None = None,
                 sparsifier: str = "top_k", sigma: float = 0.0, grad_bound: float | None = None,
                 batch_size: int | None = 1, xhat_init: str = "x0", delta0: float = 1e-5,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, paper_epsilon: float | None = None,
                 delta: float | None = None, **kwargs):
        self.sigma = check_nonneg(sigma, "sigma")
        super().__init__(network, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, sigma=self.sigma,
                         paper_epsilon=paper_epsilon, delta=delta, **kwargs)
        self.alpha = check_nonneg(alpha, "alpha")
        if self.alpha == 0:
            # with a zero step the iterates never move: a run that "succeeds" and learns nothing
            raise ValueError("argument 'alpha' (the step size) must be > 0, got 0")
        self.beta = check_nonneg(beta, "beta")
        if self.beta >= 1:
            raise ValueError(f"argument 'beta' must be in [0, 1), got {beta!r}")
        self.gamma = check_nonneg(gamma, "gamma")
        self.p = check_probability(p, "p")
        if self.p < 0.5:
            warnings.warn(f"DO-ADP's convergence theory needs p >= 1/2, got p={p}",
                          stacklevel=2)
        if k is not None and k_ratio is not None:
            raise ValueError("give at most one of 'k' and 'k_ratio'")
        if k is not None and (not isinstance(k, (int, np.integer)) or k < 1):
            raise ValueError(f"argument 'k' must be an int >= 1, got {k!r}")
        self.k = k
        self.k_ratio = None if k_ratio is None else check_probability(k_ratio, "k_ratio")
        self.sparsifier = check_choice(sparsifier, "sparsifier", ("top_k", "rand_k"))
        self.grad_bound = None if grad_bound is None else check_nonneg(grad_bound, "grad_bound")
        if self.noise.mode is not None and not self.grad_bound:
            raise ValueError("a private DO-ADP run needs 'grad_bound' (a public clip level G > 0 "
                             "enforced by clipping)")
        # lines 5-6: the noisy gradient of one sample (b in general), clipped per coordinate
        self.gradient = PrivateGradient(self.grad_bound or None, batch_size,
                                        clipping="per_coordinate")
        self.batch_size = batch_size
        self.xhat_init = check_choice(xhat_init, "xhat_init", ("x0", "zero"))
        self.delta0 = check_probability(delta0, "delta0")
        # the activation schedule replayed by the budget calibration, reused by the rounds
        self._planned = PlannedRounds()

    def resolved_k(self, dim: int) -> int:
        """The number of kept coordinates for intrinsic dimension ``dim``.

        Parameters
        ----------
        dim : int

        Returns
        -------
        int
        """
        if self.k is not None:
            if self.k > dim:
                raise ValueError(f"argument 'k' ({self.k}) exceeds the dimension {dim}")
            return self.k
        if self.k_ratio is not None:
            return max(1, int(round(self.k_ratio * dim)))
        return dim

    @sections_from(PrivateAlgorithm.check_problem)
    def check_problem(self, problem) -> None:
        """The network's agents, a step that does not wrap around the manifold, the minibatch
        and the public copies' start (``ValueError`` naming the argument)."""
        super().check_problem(problem)
        manifold = problem.manifold
        radius = injectivity_radius(manifold)
        if self.grad_bound and self.alpha * self.grad_bound > radius:
            # one clipped gradient step alone would wrap around the manifold (_steps module)
            raise ValueError(
                f"argument 'alpha' ({self.alpha:g}) times 'grad_bound' ({self.grad_bound:g}) "
                f"exceeds the injectivity radius {radius:.4g} of {manifold}: a clipped gradient "
                "step would wrap around the manifold; reduce 'alpha'"
            )
        if self.xhat_init == "zero" and not isinstance(manifold, Euclidean):
            raise ValueError("xhat_init='zero' is only defined on Euclidean space; use 'x0'")

    @sections_from(PrivateAlgorithm.start_fields)
    def start_fields(self, problem, x) -> dict:
        """``m = 0`` and the public copies ``xhat = x0`` (or the paper's 0)."""
        return {"m": np.zeros_like(x),
                "xhat": np.zeros_like(x) if self.xhat_init == "zero" else x.copy()}

    # ------------------------------------------------------------------ privacy
    @sections_from(PrivateAlgorithm.release)
    def release(self, problem) -> GaussianRelease:
        """The mean of ``b`` clipped per-sample gradients of norm ``<= G``: replace-one
        sensitivity ``2 G / b``, one release per active round."""
        return self.gradient.release(problem)

    def _activation(self, seed: int, t: int, n: int) -> np.ndarray:
        """Every agent's activation in round ``t``, from the public stream (seed, t)."""
        if self.p >= 1.0:
            # uniforms lie in [0, 1): every agent is active whatever the stream draws (a keyed
            # stream: not drawing it changes no other draw)
            return np.ones(n, dtype=bool)
        return public_generator(seed, t, "activation").random(n) < self.p

    def planned_activity(self, seed: int, n: int, n_rounds: int) -> np.ndarray:
        """Rounds each agent will be active in over ``n_rounds`` (the public activation stream
        is keyed by round: the run draws exactly the same schedule).

        Parameters
        ----------
        seed : int
            The run's public activation seed.
        n : int
            Number of agents.
        n_rounds : int

        Returns
        -------
        ndarray of int, shape ``(n_agents,)``
        """
        counts = np.zeros(n, dtype=np.int64)
        keep = self._planned.start(seed, n, n_rounds)
        for t in range(n_rounds):  # one vectorized draw per round, as step() does
            eta = self._activation(seed, t, n)
            counts += eta
            if keep:
                self._planned.keep(t, eta)
        return counts

    @sections_from(PrivateAlgorithm.active_rounds)
    def active_rounds(self, seed: int, n_agents: int, n_rounds: int) -> np.ndarray:
        """The replayed public activation schedule (:meth:`planned_activity`)."""
        return self.planned_activity(seed, n_agents, n_rounds)

    def paper_std(self, problem, delta: float) -> float:
        """Theorem 1, eq. (7): the noise std of ``paper_epsilon`` (the paper's formula).

        Parameters
        ----------
        problem : Problem
            The problem the run is planned on (its public sizes and dimension).
        delta : float
            The run's delta.

        Returns
        -------
        float
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            epsilon, rounds = self.noise.paper_target()
            return papers.doadp_sigma(epsilon, self.delta0, rounds, int(problem.counts.min()),
                                      self.p, self.resolved_k(problem.manifold.dim),
                                      problem.manifold.dim, float(self.grad_bound or 0.0),
                                      variant="paper").sigma

    def paper_formula(self, problem, plan) -> PaperFormula:
        dim = problem.manifold.dim
        return PaperFormula("doadp", {"k": self.resolved_k(dim), "dim": dim, "p": self.p,
                                      "G": self.grad_bound, "q": int(problem.counts.min()),
                                      "sigma": plan.std, "delta0": self.delta0})

    def assumptions(self, problem) -> list[str]:
        return [f"per-sample gradient coordinates clipped to G/sqrt(d), G = {self.grad_bound:g} "
                "(enforced; public)",
                "minibatch of b records drawn without replacement, secret",
                "activation treated as public: no amplification claimed",
                "Top-k/rand-k message: post-processing of the noisy gradient"]

    # ------------------------------------------------------------------ one round
    @sections_from(PrivateAlgorithm.fast_path)
    def fast_path(self, problem) -> str | None:
        """``'euclidean'`` on Euclidean space (:meth:`_step_euclidean`), else ``None``."""
        return "euclidean" if type(problem.manifold) is Euclidean else None

    def _activity(self, state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Line 3: every agent's activation ``eta`` (public, keyed by ``(seed, t)``; the kept
        replay of the calibration when there is one), this block's, and its active rows."""
        eta = self._planned.take(state.seed, state.t)
        if eta is None:
            eta = self._activation(state.seed, state.t, state.comm.n_agents)
        agents = state.comm.agents
        mine = eta if agents.size == eta.size else eta[agents]
        return eta, mine, mine.nonzero()[0]

    def _message_size(self, dim: int) -> tuple[int, int]:
        """``(k, bytes of one message)`` at intrinsic dimension ``dim`` (dense: ``k = dim``)."""
        k = self.resolved_k(dim)
        return k, dense_payload_bytes(dim) if k >= dim else sparse_payload_bytes(k)

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One round of Algorithm 1, eqs. (5a)-(5d), for the block's agents."""
        if state.info.get("fast_path") == "euclidean":
            return self._step_euclidean(problem, state)
        man, w = problem.manifold, self.weights
        x, xhat = state.x, state.xhat
        eta, mine, act = self._activity(state)                                   # line 3
        # consensus on the public copies (every neighbour holds them: no messages), moved to x
        cons = consensus_direction(man, w, xhat, comm=state.comm, copies=True)
        u = self.gamma * man.transport(xhat, x, cons)
        # (5a): m_i <- beta m_i + eta_i (g_i + theta_i)                    lines 5-6 and 11
        m = self.beta * state.m
        m[act] = m[act] + self.gradient(problem, state, act)   # noisy, charged to the ledger
        # (5b): x_i <- Exp_{x_i}(gamma cons_i - eta_i alpha m_i)            lines 7 and 12
        u[act] = u[act] - self.alpha * m[act]
        x_new = man.exp(x, u)
        m_new = man.transport(x, x_new, m)         # the momentum stays tangent at the iterate
        # (5c): s_i = S(Log_{xhat_i}(x_i^new)), in the orthonormal basis at xhat_i     line 8
        k, payload = self._message_size(man.dim)
        delta = np.zeros_like(xhat)
        if act.size:
            xh = xhat[act]
            s = man.to_coords(xh, man.log(xh, x_new[act]))
            if k < man.dim:
                s = sparsify(s, k, self.sparsifier, self._rand_k_draws(state, act))
            # (5d): xhat_i <- Exp_{xhat_i}(s_i), at agent i and its neighbours  lines 9, 14-15
            delta[act] = man.exp(xh, man.from_coords(xh, s)) - xh
        xhat = state.comm.publish(w, xhat, delta, senders=mine, payload_bytes=payload)
        return state.advance(x=x_new, m=m_new, xhat=xhat,
                             n_active_total=state.n_active_total + int(np.count_nonzero(eta)))

    def _rand_k_draws(self, state, rows: np.ndarray):
        """The rand-k indices' keyed draws of the block's ``rows`` (``None`` for Top-k)."""
        if self.sparsifier == "top_k":
            return None
        return agent_draws(state.rng, state.seed, self._ids(state, rows), state.t, "rand-k")

    @staticmethod
    def _ids(state, rows: np.ndarray) -> np.ndarray:
        """The global ids of the block's ``rows``."""
        agents = state.comm.agents
        return rows if agents.size == state.comm.n_agents else agents[rows]

    def _step_euclidean(self, problem, state):
        """:meth:`step` on Euclidean space, chosen at :meth:`init`: exp is ``+``, log ``-``,
        transport the identity and the coordinates the entries, so the same arithmetic runs
        on the arrays themselves; with every agent of the block active (``p = 1``: noisy DSGD)
        whole arrays stand for the active rows, updated in place (the same sums and products,
        no gathers), and the temporaries that do not leave the round are written into the run's
        reused arrays (:class:`~rfed.algorithms.decentralized._common.ScratchArrays`).
        ``tests/algorithms/test_doadp_round_bits.py`` keeps it equal to :meth:`step` bit for
        bit."""
        w, dim = self.weights, problem.manifold.dim
        x, xhat = state.x, state.xhat
        eta, mine, act = self._activity(state)
        everyone = act.size == x.shape[0]
        scratch = scratch_of(self)
        # the new iterates and momenta in the arrays of the state two rounds old when nothing
        # else holds them (ScratchArrays.recycled; the same bits)
        reuse = all(type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous
                    for a in (x, xhat, state.m))
        cons = consensus_direction(problem.manifold, w, xhat, comm=state.comm, copies=True,
                                   out=scratch.recycled("x", x.shape) if reuse else None)
        u = np.multiply(cons, self.gamma, out=cons)   # gamma cons, in the fresh array
        m = np.multiply(self.beta, state.m,
                        out=scratch.recycled("m", state.m.shape) if reuse else None)
        if everyone:
            # the iterates read-only, not copied; the noisy gradient and alpha m do not escape
            m += self.gradient(problem, state, scratch=scratch)
            u -= np.multiply(self.alpha, m, out=scratch.take("alpha m", m.shape))
        else:
            m_act = m[act] + self.gradient(problem, state, act)
            m[act] = m_act
            u[act] = u[act] - self.alpha * m_act
        x_new = np.add(x, u, out=u)
        k, payload = self._message_size(dim)
        if everyone:
            # (x_new - xhat), then (xhat + s) - xhat into reused arrays: publish adds the
            # result to the copies in a fresh array
            s = np.subtract(x_new, xhat, out=scratch.take("s", xhat.shape)).reshape(act.size, dim)
            if k < dim:
                s = sparsify(s, k, self.sparsifier, self._rand_k_draws(state, act))
            delta = np.add(xhat, s.reshape(xhat.shape), out=scratch.take("moved", xhat.shape))
            np.subtract(delta, xhat, out=delta)
        else:
            delta = np.zeros_like(xhat)
            if act.size:
                xh = xhat[act]
                s = (x_new[act] - xh).reshape(act.size, dim)
                if k < dim:
                    s = sparsify(s, k, self.sparsifier, self._rand_k_draws(state, act))
                delta[act] = (xh + s.reshape(xh.shape)) - xh
        xhat = state.comm.publish(w, xhat, delta, senders=mine, payload_bytes=payload)
        return state.advance(x=x_new, m=m, xhat=xhat,
                             n_active_total=state.n_active_total + int(np.count_nonzero(eta)))


class NoisyDSGD(DOADP):
    r"""Decentralized SGD with Gaussian gradient noise (DO-ADP's "traditional" baseline).

    ``x_i <- Exp_{x_i}(sum_j w_ij Log_{x_i}(x_j) - alpha (g_i + noise))``, i.e. on Euclidean space
    ``X <- W X - alpha (G + noise)``. It is exactly DO-ADP with every agent active (``p = 1``),
    dense messages (``k = dim``), no momentum (``beta = 0``) and a full consensus step
    (``gamma = 1``): the public copies then equal the iterates after every round, so the same
    code serves as the baseline and its traffic is one dense vector per arc and round.

    Parameters
    ----------
    network : Network
    alpha : float
        Step size.
    sigma, grad_bound, batch_size, delta0, budget, n_rounds, noise_multiplier, paper_epsilon, delta
        As :class:`DOADP`.
    **kwargs
        Passed to :class:`DOADP`.
    """

    name = "DSGD"

    def __init__(self, network: Network, *, alpha: float, sigma: float = 0.0,
                 grad_bound: float | None = None, batch_size: int | None = 1,
                 delta0: float = 1e-5, budget: PrivacyBudget | None = None,
                 n_rounds: int | None = None, noise_multiplier: float | None = None,
                 paper_epsilon: float | None = None, delta: float | None = None, **kwargs):
        super().__init__(network, alpha=alpha, beta=0.0, gamma=1.0, p=1.0, k=None,
                         sigma=sigma, grad_bound=grad_bound, batch_size=batch_size,
                         xhat_init="x0", delta0=delta0, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, paper_epsilon=paper_epsilon,
                         delta=delta, **kwargs)
