"""DO-ADP: decentralized momentum SGD with random activation, sparsified gossip and Gaussian noise.

Spec ``specs/000_doadp.md`` (Huo, Liu, Ding, Johansson, Shi). Every agent is active with
probability ``p``; an active agent samples ``b`` local records (``b = 1`` in the paper), clips each
per-sample gradient **per coordinate** to ``G / sqrt(dim)`` (Assumption 2, pitfall P2), adds
``N(0, sigma^2 I_dim)``, takes a momentum step plus a consensus step on the *public copies*, and
broadcasts the Top-k (or rand-k) sparsified difference between its new state and its public copy
(eqs. (5a)-(5d); Algorithm 1 with the own-copy update of P8 and Jacobi semantics).

Manifold form (spec section 7, intrinsic reading): the momentum lives in ``T_{x_i}`` and is
parallel-transported along each step, the consensus direction is
``sum_j w_ij Log_{xhat_i}(xhat_j)`` transported to ``x_i``, the message is Top-k of the
coordinates of ``Log_{xhat_i}(x_i^new)`` in the orthonormal basis ``tangent_basis(xhat_i)``
(computable by every neighbour since ``xhat_i`` is public), and receivers set
``xhat_i <- Exp_{xhat_i}(from_coords(s_i))``. On Euclidean space every map is the identity or
addition and the update is exactly the paper's.

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

from rfed.algorithms._steps import injectivity_radius
from rfed.algorithms.decentralized._common import (
    DecentralizedAlgorithm,
    DecentralizedState,
    check_choice,
    check_mixing_matrix,
    check_nonneg,
    check_probability,
    privacy_report,
)
from rfed.algorithms.decentralized._privacy import (
    GAUSSIAN_REPLACE_ONE_ONLY,
    GaussianAccount,
    NoiseConfig,
    PaperFormula,
    gaussian_groups_calibration,
    is_secure,
    refuse_add_remove,
    reject_epsilon,
)
from rfed.algorithms.decentralized._streams import (
    KeyedDraws,
    PlannedRounds,
    _streams_of,
    run_seed,
)
from rfed.manifolds import Euclidean, as_generator
from rfed.networks.comm import dense_payload_bytes, sparse_payload_bytes
from rfed.networks.gossip import consensus_direction
from rfed.networks.network import Network
from rfed.privacy import papers
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.clipping import clip_coordinates
from rfed.privacy.mechanisms import gaussian_release, release_sensitivity
from rfed.problems.base import sample_without_replacement
from rfed.randomness import public_generator

__all__ = ["DOADP", "NoisyDSGD", "sparsify"]


def sparsify(coords: np.ndarray, k: int, method: str = "top_k",
             rng: np.random.Generator | None = None) -> np.ndarray:
    """Keep ``k`` coordinates of every row of ``coords`` ``(A, dim)``, zero the rest.

    ``'top_k'``: the ``k`` largest magnitudes (Definition 2), ties broken by the lowest index
    (spec P18), selected in O(dim) per row with ``np.partition``. ``'rand_k'``: ``k`` indices
    uniformly at random per row, drawn from ``rng`` independently of the data (spec P1: the
    fixed-index sensitivity argument holds); ``rng`` may be a Generator or keyed per-agent draws
    (one row per agent).
    """
    coords = np.asarray(coords, dtype=float)
    a, dim = coords.shape
    if k >= dim:
        return coords.copy()
    if method == "top_k":
        # O(dim) selection: everything at or above the k-th largest magnitude; rows where ties
        # at that magnitude overflow k keep the lowest indices (deterministic, spec P18). Ties
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
class DOADPState(DecentralizedState):
    """DO-ADP state of a block of agents: iterates ``x``, momenta ``m`` (tangent at ``x``),
    public copies ``xhat`` (rows of the block), the seed of the keyed streams and the
    per-coordinate noise std of this run."""

    m: np.ndarray = None  # type: ignore[assignment]
    xhat: np.ndarray = None  # type: ignore[assignment]
    n_active_total: int = 0
    seed: int = 0
    noise_std: float = 0.0


class DOADP(DecentralizedAlgorithm):
    r"""DO-ADP (spec 000, Algorithm 1 / eqs. (5a)-(5d)), generic over the manifold.

    Parameters
    ----------
    network : Network
        Graph, symmetric doubly stochastic ``W`` (Assumption 3) and the communicator.
    alpha, beta, gamma : float
        SGD step, momentum factor, consensus step (experiments: 1e-3 / 1e-2, 0.15, 0.05).
    p : float
        Activation probability in (0, 1]; the convergence theory needs ``p >= 1/2`` (a warning
        otherwise, spec P20).
    k : int, optional
        Coordinates kept per message; ``k_ratio`` gives it as a fraction of ``dim`` instead
        (``k = max(1, round(k_ratio * dim))``, spec P18). Default: all (no sparsification).
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
        The paper's parametrisation: Gaussian noise std per coordinate (P3); 0 turns the noise
        off. Its certified epsilon is reported beside the paper's.
    paper_epsilon : float, optional
        The paper's Theorem 1 calibration (:func:`rfed.privacy.papers.doadp_sigma`, variant
        'paper') for ``n_rounds`` rounds: the paper's formula, not a guarantee (the certified
        epsilon is reported beside it).
    delta : float, optional
        Delta of the certified report when no budget is given (default ``min(1e-5, 1/(10 q))``).
    grad_bound : float, optional
        ``G``, a PUBLIC number: each tangent coordinate of each per-sample gradient is clamped
        to ``G / sqrt(dim)`` before the noise (P2), so every per-sample gradient has L2 norm
        ``<= G``. Required for a private run.

    Privacy: the released value of an active agent is its noisy averaged gradient; the Top-k
    (or rand-k) message is computed from the agent's iterate, which depends on its data only
    through past noisy gradients, so the message, its values AND its chosen indices are
    post-processing of accounted releases (the noise is added before the selection). The
    paper's ``sqrt(k/d)`` gain (which treats the indices as fixed, spec P1) and activation
    amplification are not claimed on the certified side.
    batch_size : int or None
        Samples per active agent per round (1 in the paper; the spec's mini-batch extension for
        ``b > 1``). ``None``: the full local data set (deterministic gradients; for tests of the
        optimization, requires equal local sizes).
    xhat_init : {'x0', 'zero'}
        Initial public copies: the common public start ``x0`` (P15; costs no privacy) or the
        paper's 0 (Euclidean only).
    delta0 : float
        Per-step delta of the Gaussian mechanism, for the paper's privacy report (spec P13).
    """

    name = "DO-ADP"
    state_rows = ("x", "m", "xhat")

    def __init__(self, network: Network, *, alpha: float, beta: float = 0.15, gamma: float = 0.05,
                 p: float = 1.0, k: int | None = None, k_ratio: float | None = None,
                 sparsifier: str = "top_k", sigma: float = 0.0, grad_bound: float | None = None,
                 batch_size: int | None = 1, xhat_init: str = "x0", delta0: float = 1e-5,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, paper_epsilon: float | None = None,
                 delta: float | None = None, **kwargs):
        reject_epsilon(kwargs, type(self).__name__)
        if not isinstance(network, Network):
            raise TypeError(f"argument 'network' must be an rfed Network, got {network!r}")
        self.network = network
        self.weights = check_mixing_matrix(network.weights, "network.weights")
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
            warnings.warn(f"DO-ADP's convergence theory needs p >= 1/2 (spec P20), got p={p}",
                          stacklevel=2)
        if k is not None and k_ratio is not None:
            raise ValueError("give at most one of 'k' and 'k_ratio'")
        if k is not None and (not isinstance(k, (int, np.integer)) or k < 1):
            raise ValueError(f"argument 'k' must be an int >= 1, got {k!r}")
        self.k = k
        self.k_ratio = None if k_ratio is None else check_probability(k_ratio, "k_ratio")
        self.sparsifier = check_choice(sparsifier, "sparsifier", ("top_k", "rand_k"))
        self.sigma = check_nonneg(sigma, "sigma")
        self.noise = NoiseConfig(budget, n_rounds, noise_multiplier, self.sigma or None,
                                 paper_epsilon, delta)
        refuse_add_remove(budget, self.name, GAUSSIAN_REPLACE_ONE_ONLY)
        self.grad_bound = None if grad_bound is None else check_nonneg(grad_bound, "grad_bound")
        if self.noise.mode is not None and not self.grad_bound:
            raise ValueError("a private DO-ADP run needs 'grad_bound' (a public clip level G > 0 "
                             "enforced by clipping)")
        if batch_size is not None and (not isinstance(batch_size, (int, np.integer))
                                       or batch_size < 1):
            raise ValueError(f"argument 'batch_size' must be an int >= 1 or None, got "
                             f"{batch_size!r}")
        self.batch_size = batch_size
        self.xhat_init = check_choice(xhat_init, "xhat_init", ("x0", "zero"))
        self.delta0 = check_probability(delta0, "delta0")
        # the activation schedule replayed by the budget calibration, reused by the rounds
        self._planned = PlannedRounds()

    def resolved_k(self, dim: int) -> int:
        """The number of kept coordinates for intrinsic dimension ``dim``."""
        if self.k is not None:
            if self.k > dim:
                raise ValueError(f"argument 'k' ({self.k}) exceeds the dimension {dim}")
            return self.k
        if self.k_ratio is not None:
            return max(1, int(round(self.k_ratio * dim)))
        return dim

    def init(self, problem, x0, rng):
        manifold = problem.manifold
        if self.network.n_agents != problem.n_agents:
            raise ValueError(f"network has {self.network.n_agents} agents, problem has "
                             f"{problem.n_agents}")
        radius = injectivity_radius(manifold)
        if self.grad_bound and self.alpha * self.grad_bound > radius:
            # one clipped gradient step alone would wrap around the manifold (_steps module)
            raise ValueError(
                f"argument 'alpha' ({self.alpha:g}) times 'grad_bound' ({self.grad_bound:g}) "
                f"exceeds the injectivity radius {radius:.4g} of {manifold}: a clipped gradient "
                "step would wrap around the manifold; reduce 'alpha'"
            )
        if self.batch_size is None and np.any(problem.counts != problem.n_max):
            raise ValueError("batch_size=None (full local gradients) needs equal local sizes")
        if self.batch_size is not None and self.batch_size > problem.counts.min():
            raise ValueError(f"argument 'batch_size' ({self.batch_size}) exceeds the smallest "
                             f"local data set ({problem.counts.min()})")
        comm = self.network.comm
        x = np.broadcast_to(x0, (comm.n_local,) + manifold.point_shape).copy()
        if self.xhat_init == "zero":
            if not isinstance(manifold, Euclidean):
                raise ValueError("xhat_init='zero' is only defined on Euclidean space; use 'x0'")
            xhat = np.zeros_like(x)
        else:
            xhat = x.copy()
        rng = as_generator(rng)
        # keyed streams: activation is public (visible on the wire) and keyed by (seed, round),
        # so the planned schedule can be replayed before the run for the calibration; the
        # per-agent draws are keyed by (seed, agent, round, purpose)
        seed = run_seed(rng)
        account = self._account(problem, rng, seed)
        return DOADPState(t=0, x=x, rng=rng, comm=comm,
                          ledger=account, info={"comm0": comm.total_stats()},
                          m=np.zeros_like(x), xhat=xhat, seed=seed,
                          noise_std=0.0 if account is None else
                          account.noise_multiplier * account.sensitivity)

    # ------------------------------------------------------------------ privacy
    def _activation(self, seed: int, t: int, n: int) -> np.ndarray:
        """Every agent's activation in round ``t``, from the public stream (seed, t)."""
        if self.p >= 1.0:
            # uniforms lie in [0, 1): every agent is active whatever the stream draws (a keyed
            # stream: not drawing it changes no other draw)
            return np.ones(n, dtype=bool)
        return public_generator(seed, t, "activation").random(n) < self.p

    def planned_activity(self, seed: int, n: int, n_rounds: int) -> np.ndarray:
        """Rounds each agent will be active in over ``n_rounds`` (the public activation stream
        is keyed by round: the run draws exactly the same schedule)."""
        counts = np.zeros(n, dtype=np.int64)
        keep = self._planned.start(seed, n, n_rounds)
        for t in range(n_rounds):  # one vectorized draw per round, as step() does
            eta = self._activation(seed, t, n)
            counts += eta
            if keep:
                self._planned.keep(t, eta)
        return counts

    def _account(self, problem, rng, seed) -> GaussianAccount | None:
        cfg = self.noise
        if cfg.mode is None:
            return None
        manifold = problem.manifold
        dim, n = manifold.dim, problem.n_agents
        sizes = problem.counts
        b = self.batch_size
        q = int(sizes.min())
        delta = cfg.resolve_delta(q)
        # mean of b per-sample gradients of L2 norm <= G: replace-one sensitivity 2G/b
        sens = release_sensitivity(2.0 * self.grad_bound / (b or int(problem.n_max)), dim, rng)
        k = self.resolved_k(dim)
        def budget_z():
            planned = self.planned_activity(seed, n, cfg.n_rounds)
            return gaussian_groups_calibration(sizes, b, np.ones(n, int), planned, cfg.budget,
                                               delta, is_secure(rng))[0]

        def paper_std():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
                return papers.doadp_sigma(cfg.paper_epsilon, self.delta0, cfg.n_rounds, q,
                                          self.p, k, dim, self.grad_bound,
                                          variant="paper").sigma

        z, target = cfg.resolve_noise_multiplier(sens, budget_z, paper_std,
                                                 comm=self.network.comm)
        paper = PaperFormula("doadp", {"k": k, "dim": dim, "p": self.p, "G": self.grad_bound,
                                       "q": q, "sigma": z * sens, "delta0": self.delta0})
        return GaussianAccount(
            self.name, sizes, b, np.ones(n, int), z, sens, delta, cfg.method,
            assumptions=[f"per-sample gradient coordinates clipped to G/sqrt(d), "
                         f"G = {self.grad_bound:g} (enforced; public)",
                         "minibatch of b records drawn without replacement, secret",
                         "activation treated as public: no amplification claimed",
                         "Top-k/rand-k message: post-processing of the noisy gradient"],
            target_epsilon=target, planned_rounds=cfg.n_rounds if target is not None else None,
            paper=paper, epsilon_paper=cfg.paper_epsilon, secure=is_secure(rng), mode=cfg.mode)

    def privacy(self, state):
        """The run's privacy report dict (``None`` without noise)."""
        return privacy_report(state)

    # ------------------------------------------------------------------ one round
    def _noisy_gradients(self, problem, x_act, act, state, block=None):
        """Clipped, averaged, noised gradients of the active agents (global ids ``act``),
        tangent at ``x_act``; minibatches and noise from the agents' keyed streams (``block``:
        the agents' :class:`rfed.randomness.AgentBlock`, derived once per round)."""
        manifold = problem.manifold
        rng, noise_std = state.rng, state.noise_std
        if block is None and not is_secure(rng):
            block = _streams_of(state.seed).block(act)
        b = self.batch_size
        if b is None:
            idx = np.broadcast_to(np.arange(problem.n_max), (act.size, problem.n_max))
        else:
            idx = sample_without_replacement(problem.counts[act], b,
                                             _draws(rng, state.seed, block, state.t, "minibatch"))
        grads = problem.per_sample_grad(x_act, act, idx)  # (A, b, *ps)
        if type(manifold) is Euclidean and type(grads) is np.ndarray \
                and grads.dtype == np.float64:
            # Euclidean coordinates are the entries (to_coords is a reshaped copy; nothing
            # below writes into them, so the view gives the same values)
            coords = grads.reshape(grads.shape[:2] + (manifold.dim,))
        else:
            coords = manifold.to_coords(np.expand_dims(x_act, 1), grads)  # (A, b, dim)
        if self.grad_bound is not None:
            coords, _ = clip_coordinates(coords, self.grad_bound / np.sqrt(manifold.dim),
                                         count_clipped=False)
        # np.mean's own arithmetic (numpy's _mean: add.reduce, then true_divide by the count
        # in place) without its argument handling
        mean = np.add.reduce(coords, axis=1)
        np.true_divide(mean, coords.shape[1], out=mean)
        if noise_std > 0:
            # only the active agents release, so only their A x dim coordinates are drawn
            mean = gaussian_release(mean, noise_std,
                                    _draws(rng, state.seed, block, state.t, "noise"))
        if type(manifold) is Euclidean:
            return mean.reshape(mean.shape[:1] + manifold.point_shape)
        return manifold.from_coords(x_act, mean)

    def step(self, problem, state):
        manifold = problem.manifold
        rng, seed, t = state.rng, state.seed, state.t
        n = problem.n_agents
        ledger = state.ledger
        if ledger is not None:
            ledger.check_can_step()
        comm = state.comm
        agents = comm.agents
        one_block = agents.size == n  # every agent in this process: row i is agent i
        eta_all = self._planned.take(seed, t)
        if eta_all is None:
            eta_all = self._activation(seed, t, n)
        eta = eta_all if one_block else eta_all[agents]  # this block's activation
        act = eta.nonzero()[0]  # local rows
        act_ids = act if one_block else agents[act]  # their global ids
        # Euclidean space: exp is +, log is -, transport the identity (on a fresh array, whose
        # copy the manifold would return) and coordinates the entries: the same arithmetic
        flat = type(manifold) is Euclidean
        # Phase A: consensus on the public copies (held by every neighbour: no messages)
        xhat, x = state.xhat, state.x
        cons = consensus_direction(manifold, self.weights, xhat, comm=comm, copies=True)
        if flat:   # gamma cons, into consensus_direction's fresh array
            u = np.multiply(cons, self.gamma, out=cons)
        else:
            u = self.gamma * manifold.transport(xhat, x, cons)
        m = self.beta * state.m
        # every agent of the block active (p = 1, noisy DSGD): whole arrays stand for the rows
        # of the active agents, updated in place (the same sums and products, no gathers)
        everyone = act.size == eta.size
        block = None
        if act.size:
            if not is_secure(rng):
                block = _streams_of(seed).block(act_ids)
            g = self._noisy_gradients(problem, _read_only(x) if everyone else x[act], act_ids,
                                      state, block)
            if everyone:
                m += g
                u -= self.alpha * m
            else:
                m_act = m[act] + g
                m[act] = m_act
                u[act] = u[act] - self.alpha * m_act
        x_new = np.add(x, u, out=u) if flat else manifold.exp(x, u)
        m_new = m if flat else manifold.transport(x, x_new, m)
        # messages: sparsified Log_{xhat_i}(x_i^new) in the orthonormal basis at xhat_i
        k, payload = self._message_size(manifold.dim)
        if act.size:
            xh, x_act = (xhat, x_new) if everyone else (xhat[act], x_new[act])
            if flat:
                diff = x_act - xh
                c = diff.reshape(act.size, manifold.dim)
            else:
                c = manifold.to_coords(xh, manifold.log(xh, x_act))
            # dense messages: sparsify would return a copy of c (which nothing writes into)
            s = c if k >= manifold.dim else sparsify(
                c, k, self.sparsifier,
                None if self.sparsifier == "top_k" else _draws(rng, seed, block, t, "rand-k"))
            if flat:
                moved = (xh + s.reshape(xh.shape)) - xh
            else:
                moved = manifold.exp(xh, manifold.from_coords(xh, s)) - xh
            if everyone:
                delta = moved
            else:
                delta = np.zeros_like(xhat)
                delta[act] = moved
        else:
            delta = np.zeros_like(xhat)
        xhat = comm.publish(self.weights, xhat, delta, senders=eta, payload_bytes=payload)
        n_active = int(np.count_nonzero(eta_all))
        if ledger is not None:
            # this block's releases (one block: every agent's); blocks' ledgers are merged
            ledger.record_round(eta_all if one_block else np.isin(np.arange(n), act_ids))
        return DOADPState(t=t + 1, x=x_new, rng=rng, comm=comm, ledger=ledger,
                          info=state.info, m=m_new, xhat=xhat,
                          n_active_total=state.n_active_total + n_active,
                          seed=seed, noise_std=state.noise_std)

    def _message_size(self, dim: int) -> tuple[int, int]:
        """``(k, bytes of one message)`` at intrinsic dimension ``dim`` (dense: ``k = dim``)."""
        key = (dim, self.k, self.k_ratio)
        kept = getattr(self, "_message_sizes", None)
        if kept is None or kept[0] != key:
            k = self.resolved_k(dim)
            kept = self._message_sizes = (key, (k, dense_payload_bytes(dim) if k >= dim
                                                else sparse_payload_bytes(k)))
        return kept[1]


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the iterates handed to the problem in place of a copy: a
    problem that wrote into them would raise instead of changing the state)."""
    view = a.view()
    view.flags.writeable = False
    return view


def _draws(rng, seed: int, block, round: int, purpose: str):
    """The keyed draws of ``block`` (an AgentBlock) for ``(round, purpose)``, or the OS source
    in secure mode (as :func:`agent_draws`)."""
    if block is None:  # secure mode: no keyed streams
        return rng
    return KeyedDraws(_streams_of(seed), block, round, purpose)


class NoisyDSGD(DOADP):
    r"""Decentralized SGD with Gaussian gradient noise (the "traditional" method of spec 000).

    ``x_i <- Exp_{x_i}(sum_j w_ij Log_{x_i}(x_j) - alpha (g_i + noise))``, i.e. on Euclidean space
    ``X <- W X - alpha (G + noise)``. It is exactly DO-ADP with every agent active (``p = 1``),
    dense messages (``k = dim``), no momentum (``beta = 0``) and a full consensus step
    (``gamma = 1``): the public copies then equal the iterates after every round, so the same
    code serves as the baseline and its traffic is one dense vector per arc and round.
    """

    name = "DSGD"

    def __init__(self, network: Network, *, alpha: float, sigma: float = 0.0,
                 grad_bound: float | None = None, batch_size: int | None = 1,
                 delta0: float = 1e-5, budget: PrivacyBudget | None = None,
                 n_rounds: int | None = None, noise_multiplier: float | None = None,
                 paper_epsilon: float | None = None, delta: float | None = None, **kwargs):
        reject_epsilon(kwargs, type(self).__name__)
        super().__init__(network, alpha=alpha, beta=0.0, gamma=1.0, p=1.0, k=None,
                         sigma=sigma, grad_bound=grad_bound, batch_size=batch_size,
                         xhat_init="x0", delta0=delta0, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, paper_epsilon=paper_epsilon,
                         delta=delta)
