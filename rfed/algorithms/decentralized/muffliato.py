"""MUFFLIATO: local Gaussian noise on a gradient step, then several (accelerated) gossip steps.

E. Cyffers, M. Even, A. Bellet, L. Massoulie, "Muffliato: Peer-to-Peer Privacy Amplification
for Decentralized Optimization and Averaging", NeurIPS 2022, arXiv:2206.05091.

The paper's averaging protocol (Algorithm 1, "Muffliato") has every node add Gaussian noise to
its private value once and then run ``K`` synchronous gossip steps with the mixing matrix ``W``,
accelerated by the two-term (Chebyshev / heavy-ball) recursion::

    y^0 = x + eta,   y^1 = W y^0,   y^{s+1} = omega W y^s + (1 - omega) y^{s-1}  (s >= 1),

and its optimization algorithm (Muffliato-GD, the paper's Section on private decentralized
optimization; a stochastic gradient gives Muffliato-SGD) alternates a local noisy gradient step
with that protocol::

    x_v^{t+1/2} = x_v^t - gamma (g_v(x_v^t) + eta_v^t),   x^{t+1} = Muffliato(x^{t+1/2}; W, K).

What rfed implements, batched over agents, generic over the manifold:

* the gradient ``g_v`` is the mean of the per-sample gradients of a minibatch of ``b`` records
  (``batch_size=None``: the whole local data set, Muffliato-GD), each CLIPPED to norm ``C`` (a
  public number; the paper assumes a Lipschitz loss, rfed enforces the bound), and ``eta`` is
  ``N(0, (z 2C)^2)`` on the clipped SUM, divided by ``b`` (so ``z`` is the noise multiplier of
  the replace-one sensitivity ``2C`` of one release);
* the local step is ``Exp_{x_v}(-gamma g~_v)``, the gossip step ``riemannian_gossip`` with
  ``W`` and the acceleration ``y^{s+1} = Exp_{y^{s-1}}(omega Log_{y^{s-1}}(gossip(y^s)))``, which
  is the recursion above on Euclidean space;
* ``omega = 2 / (1 + sqrt(1 - rho^2))`` with ``rho`` the second largest eigenvalue modulus of
  ``W`` (the optimal constant of the two-term recursion for a spectrum within ``[-rho, rho]``;
  the paper computes its constant from the spectral gap too), ``accelerated=False`` gives plain
  gossip (``omega = 1``);
* ``K`` (``gossip_steps``) defaults to ``ceil(ln(n) / sqrt(1 - rho))``, of the order of the
  accelerated gossip's mixing time; it is rfed's default, the paper tunes ``K``.

Privacy, certified (record level, replace-one, each agent's local data set): in every round an
agent's data enters one Gaussian release, its noisy gradient; the ``K`` gossip messages it sends
are post-processing of that release and of the messages it received (the agent's model at the
start of a round is itself a function of earlier messages). The accountant composes one
(subsampled) Gaussian release per agent and round, exactly as for DP-DPSGD.

The paper's own guarantee is *pairwise network DP* (an observer node ``v`` sees only the messages
of its neighbours): node ``u``'s Renyi divergence of order ``alpha`` towards ``v`` after one
Muffliato round is ``alpha / (2 z^2) sum_{s<K} sum_{w in N(v)} (P_s)_{wu}^2 / ||(P_s)_{w,:}||^2``
with ``P_s`` the gossip polynomial of step ``s`` (``P_0 = I``, ``P_1 = W``,
``P_{s+1} = omega W P_s + (1 - omega) P_{s-1}``), composed over the rounds and converted to
``(epsilon, delta)``. rfed reports it beside the certified value, labelled as the paper's formula
for a weaker threat model (it is not the certificate); ``paper_epsilon=`` calibrates the noise
to it (worst pair of distinct nodes).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg

from rfed._docstrings import sections_from
from rfed.algorithms.decentralized._common import check_nonneg
from rfed.algorithms.decentralized.base import PrivateAlgorithm, PrivateGradient
from rfed.algorithms.private import PAPER_LABEL, GaussianRelease
from rfed.manifolds import Euclidean
from rfed.networks.gossip import riemannian_gossip
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget

__all__ = ["Muffliato", "MuffliatoPaperFormula", "gossip_polynomials", "second_eigenvalue_modulus"]


#: Largest graph whose spectrum is computed densely (``eigvalsh``); larger ones use ``eigsh``.
DENSE_SPECTRUM = 1500

#: Largest graph for which the paper's pairwise accounting (dense ``n x n`` gossip
#: polynomials) is evaluated.
PAIRWISE_MAX_AGENTS = 1000


def second_eigenvalue_modulus(weights: sp.spmatrix) -> float:
    """``rho = max(|lambda_2|, |lambda_n|)`` of a symmetric mixing matrix (a public number).

    Parameters
    ----------
    weights : sparse matrix, shape ``(n, n)``
        Symmetric doubly stochastic.

    Returns
    -------
    float in ``[0, 1]``

    Raises
    ------
    ValueError
        When the sparse eigensolver of a large graph does not converge (give ``gossip_steps``
        and ``omega`` explicitly then).
    """
    n = weights.shape[0]
    if n == 1:
        return 0.0
    if n <= DENSE_SPECTRUM:
        eig = np.linalg.eigvalsh(weights.toarray())   # ascending; eig[-1] = 1
        return float(min(1.0, max(abs(eig[0]), abs(eig[-2]))))
    try:
        top = scipy.sparse.linalg.eigsh(sp.csr_matrix(weights, dtype=float), k=2, which="LM",
                                        return_eigenvectors=False, tol=1e-8)
    except scipy.sparse.linalg.ArpackNoConvergence:
        raise ValueError(f"the spectrum of the {n}-agent mixing matrix did not converge: give "
                         "'gossip_steps' and 'omega' explicitly") from None
    return float(min(1.0, np.sort(np.abs(top))[0]))


def gossip_polynomials(weights: sp.spmatrix, steps: int, omega: float) -> list[np.ndarray]:
    """The matrices ``P_0 .. P_{steps-1}`` of the (accelerated) gossip: ``y^s = P_s y^0``.

    ``P_0 = I``, ``P_1 = W``, ``P_{s+1} = omega W P_s + (1 - omega) P_{s-1}`` (Muffliato,
    Algorithm 1). Dense ``(n, n)`` arrays: for the paper's pairwise accounting of small graphs.

    Parameters
    ----------
    weights : sparse matrix, shape ``(n, n)``
    steps : int
        ``K``.
    omega : float
        The acceleration parameter.

    Returns
    -------
    list of ndarray, each of shape ``(n, n)``
    """
    n = weights.shape[0]
    w = sp.csr_matrix(weights)
    out = [np.eye(n)]
    if steps > 1:
        out.append(w.toarray())
    while len(out) < steps:
        out.append(omega * (w @ out[-1]) + (1.0 - omega) * out[-2])
    return out[:steps]


def _pairwise_sums(weights: sp.spmatrix, steps: int, omega: float) -> np.ndarray:
    """``S[u, v] = sum_{s<K} sum_{w in N(v)} (P_s)_{wu}^2 / ||(P_s)_{w,:}||^2`` for ``u != v``
    (0 on the diagonal): the paper's pairwise Renyi factor of one Muffliato round."""
    w = sp.csr_matrix(weights)
    adj = (w != 0).astype(float).tolil()
    adj.setdiag(0.0)
    adj = sp.csr_matrix(adj)                       # adj[v, w] = 1: w is a neighbour of v
    s_uv = np.zeros(w.shape)
    for p in gossip_polynomials(w, steps, omega):
        row_sq = np.sum(p * p, axis=1)             # ||(P_s)_{w,:}||^2
        contrib = (p * p) / np.where(row_sq > 0, row_sq, 1.0)[:, None]  # [w, u]
        s_uv += (adj @ contrib).T                   # [u, v] = sum_{w in N(v)} contrib[w, u]
    np.fill_diagonal(s_uv, 0.0)
    return s_uv


def _rdp_to_dp(rho: float, delta: float) -> float:
    """``min_alpha alpha rho + ln(1/delta) / (alpha - 1)`` = ``rho + 2 sqrt(rho ln(1/delta))``:
    the classical RDP-to-DP conversion of a Gaussian-like curve ``eps(alpha) = alpha rho``."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclasses.dataclass(frozen=True, eq=False)
class MuffliatoPaperFormula:
    """The paper's pairwise network DP of a Muffliato run, evaluated for a run length.

    The mixing matrix is kept as its CSR arrays (so that a run's state, which holds this
    formula, saves as a state file).

    Attributes
    ----------
    indptr, indices, data : arrays
        The (public) mixing matrix ``W`` in CSR form, ``(n, n)``.
    steps : int
        Gossip steps per round.
    omega : float
        Acceleration constant.
    noise_multiplier : float
        Noise std over the replace-one sensitivity of one release.
    delta : float
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    steps: int
    omega: float
    noise_multiplier: float
    delta: float

    @classmethod
    def of(cls, weights: sp.spmatrix, steps: int, omega: float, noise_multiplier: float,
           delta: float) -> MuffliatoPaperFormula:
        """The formula of a run on the mixing matrix ``weights``.

        Parameters
        ----------
        weights : sparse matrix, shape ``(n, n)``
        steps : int
        omega, noise_multiplier, delta : float

        Returns
        -------
        MuffliatoPaperFormula
        """
        w = sp.csr_matrix(weights)
        return cls(np.array(w.indptr), np.array(w.indices), np.array(w.data), int(steps),
                   float(omega), float(noise_multiplier), float(delta))

    @property
    def weights(self) -> sp.csr_matrix:
        """The mixing matrix ``W``."""
        n = self.indptr.size - 1
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(n, n))

    def factor(self) -> np.ndarray:
        """``S[u, v]`` of one round (see :func:`_pairwise_sums`).

        Returns
        -------
        ndarray, shape ``(n, n)``
        """
        return _pairwise_sums(self.weights, self.steps, self.omega)

    def evaluate(self, rounds: int) -> dict:
        """``{'label', 'formula', 'epsilon', 'epsilon_mean_pairs', 'delta'}`` for ``rounds``.

        Parameters
        ----------
        rounds : int

        Returns
        -------
        dict
        """
        formula = ("Muffliato pairwise network DP: Renyi divergence alpha/(2 z^2) "
                   "sum_{s<K} sum_{w in N(v)} (P_s)_wu^2 / ||(P_s)_w||^2 per round, composed "
                   "over the rounds without subsampling amplification, converted to (eps, "
                   "delta); worst pair u != v ('epsilon') and mean over pairs; a node sees only "
                   "its neighbours' messages (weaker than the certified local DP)")
        n = self.indptr.size - 1
        if n > PAIRWISE_MAX_AGENTS:
            return {"label": PAPER_LABEL, "epsilon": None, "epsilon_mean_pairs": None,
                    "delta": self.delta, "formula": formula,
                    "warning": f"not evaluated for {n} > {PAIRWISE_MAX_AGENTS} agents (dense "
                               "n x n gossip polynomials)"}
        s = self.factor()
        off = s[~np.eye(n, dtype=bool)]
        z = self.noise_multiplier
        rounds = max(int(rounds), 1)
        if z <= 0:
            worst = mean = float("inf")
        else:
            worst = _rdp_to_dp(rounds * float(off.max()) / (2 * z * z), self.delta)
            mean = float(np.mean([_rdp_to_dp(rounds * v / (2 * z * z), self.delta)
                                  for v in off]))
        return {"label": PAPER_LABEL, "epsilon": worst, "epsilon_mean_pairs": mean,
                "delta": self.delta, "formula": formula}


def muffliato_paper_z(weights, steps: int, omega: float, epsilon: float, delta: float,
                      rounds: int) -> float:
    """The noise multiplier whose paper pairwise bound (worst pair) after ``rounds`` rounds is
    ``epsilon``: ``rho = (sqrt(L + eps) - sqrt(L))^2`` with ``L = ln(1/delta)`` inverts
    :func:`_rdp_to_dp`, and ``rho = rounds S_max / (2 z^2)``.

    Parameters
    ----------
    weights : sparse matrix, shape ``(n, n)``
    steps : int
    omega : float
    epsilon, delta : float
        The paper's target.
    rounds : int

    Returns
    -------
    float
    """
    n = weights.shape[0]
    if n > PAIRWISE_MAX_AGENTS:
        raise ValueError(f"argument 'paper_epsilon': the paper's pairwise accounting is not "
                         f"evaluated for {n} > {PAIRWISE_MAX_AGENTS} agents; use budget=")
    s_max = float(_pairwise_sums(weights, steps, omega)[~np.eye(n, dtype=bool)].max())
    log_term = math.log(1.0 / delta)
    rho = (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2
    return math.sqrt(rounds * s_max / (2.0 * rho))


class Muffliato(PrivateAlgorithm):
    r"""MUFFLIATO-GD / -SGD (Cyffers et al., NeurIPS 2022), generic over the manifold.

    Parameters
    ----------
    network : Network
        Symmetric doubly stochastic ``W``.
    lr : float
        Step size ``gamma`` (> 0).
    batch_size : int or None
        Records per local gradient (``None``: the whole local data set, Muffliato-GD).
    clip : float
        Per-sample clipping norm ``C`` (Riemannian norm), a PUBLIC number.
    gossip_steps : int, optional
        ``K`` gossip steps per round (default ``ceil(ln(n) / sqrt(1 - rho))``).
    accelerated : bool
        Two-term (Chebyshev) acceleration of the gossip (the paper's Algorithm 1); ``False``:
        ``K`` plain gossip steps.
    omega : float, optional
        The acceleration constant (default ``2 / (1 + sqrt(1 - rho^2))``).
    budget : PrivacyBudget, optional
        Budget-first: the noise of the planned ``n_rounds`` rounds is calibrated at ``init`` so
        the finished run certifies ``budget`` (record level, replace-one, per agent).
    n_rounds : int, optional
        Planned rounds (required with ``budget`` and ``paper_epsilon``).
    noise_multiplier : float, optional
        Research: noise std over the replace-one sensitivity ``2C`` of one clipped sum.
    paper_epsilon : float, optional
        Noise from the paper's pairwise network DP (worst pair) for ``n_rounds`` rounds at
        ``delta``: the paper's formula, not a guarantee (the certified epsilon is reported
        beside it).
    delta : float, optional
        Delta of the reports without a budget (default ``min(1e-5, 1/(10 q))``).
    """

    name = "MUFFLIATO"

    def __init__(self, network: Network, *, lr: float, batch_size: int | None = 32,
                 clip: float = 1.0, gossip_steps: int | None = None, accelerated: bool = True,
                 omega: float | None = None, budget: PrivacyBudget | None = None,
                 n_rounds: int | None = None, noise_multiplier: float | None = None,
                 paper_epsilon: float | None = None, delta: float | None = None, **kwargs):
        super().__init__(network, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, paper_epsilon=paper_epsilon,
                         delta=delta, **kwargs)
        self.lr = check_nonneg(lr, "lr")
        if self.lr == 0:
            raise ValueError("argument 'lr' (the step size) must be > 0, got 0")
        self.gradient = PrivateGradient(clip, batch_size)
        self.batch_size, self.clip = self.gradient.batch_size, float(clip)
        n = self.weights.shape[0]
        # the spectrum (a public number) only when a default needs it
        needs_rho = gossip_steps is None or (accelerated and omega is None)
        rho = second_eigenvalue_modulus(self.weights) if needs_rho else 0.0
        #: The second largest eigenvalue modulus of ``W`` (None when no default needed it).
        self.rho: float | None = rho if needs_rho else None
        if gossip_steps is None:
            gap = max(1.0 - rho, 1e-12)
            gossip_steps = max(1, math.ceil(math.log(max(n, 2)) / math.sqrt(gap)))
        if (isinstance(gossip_steps, bool) or not isinstance(gossip_steps, (int, np.integer))
                or gossip_steps < 1):
            raise ValueError(f"argument 'gossip_steps' must be an int >= 1, got "
                             f"{gossip_steps!r}")
        self.gossip_steps = int(gossip_steps)
        self.accelerated = bool(accelerated)
        if not self.accelerated:
            omega = 1.0
        elif omega is None:
            omega = 2.0 / (1.0 + math.sqrt(max(0.0, 1.0 - rho ** 2)))
        omega = check_nonneg(omega, "omega")
        if not 0 < omega < 2:
            raise ValueError(f"argument 'omega' must be in (0, 2), got {omega!r}")
        self.omega = omega

    # ------------------------------------------------------------------ privacy
    @sections_from(PrivateAlgorithm.release)
    def release(self, problem) -> GaussianRelease:
        """One noisy clipped gradient per agent and round (sensitivity ``2C`` on the sum)."""
        return self.gradient.release(problem)

    @sections_from(PrivateAlgorithm.sigma_unit)
    def sigma_unit(self) -> float:
        """The paper's noise is stated in units of the clip level ``C``."""
        return self.clip

    def paper_std(self, problem, delta: float) -> float:
        """The noise std (units of ``C``) of the paper's pairwise bound at ``paper_epsilon``.

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
        epsilon, rounds = self.noise.paper_target()
        z = muffliato_paper_z(self.weights, self.gossip_steps, self.omega, epsilon, delta,
                              rounds)
        return z * self.release(problem).sensitivity / self.clip

    @sections_from(PrivateAlgorithm.paper_formula)
    def paper_formula(self, problem, plan) -> MuffliatoPaperFormula:
        """The paper's pairwise network DP of this run, reported beside the certificate."""
        return MuffliatoPaperFormula.of(self.weights, self.gossip_steps, self.omega,
                                        plan.noise_multiplier, plan.delta)

    def assumptions(self, problem) -> list[str]:
        return [f"per-sample gradients clipped to norm C = {self.clip:g} (enforced; public)",
                "one noisy gradient per agent and round (minibatch drawn without replacement, "
                "secret); the gossip messages are post-processing",
                "local DP against an observer of every message (the paper's pairwise network "
                "DP is reported beside it, labelled as the paper's)"]

    # ------------------------------------------------------------------ run
    def gossip(self, manifold, y0: np.ndarray, comm) -> np.ndarray:
        """``K`` (accelerated) gossip steps from ``y0`` (Muffliato, Algorithm 1).

        Parameters
        ----------
        manifold : Manifold
        y0 : ndarray, shape ``(n_local, *point_shape)``
        comm : Communicator

        Returns
        -------
        ndarray, shape ``(n_local, *point_shape)``
        """
        prev, cur = y0, riemannian_gossip(manifold, y0, self.weights, comm=comm)
        flat = type(manifold) is Euclidean
        for _ in range(self.gossip_steps - 1):
            mixed = riemannian_gossip(manifold, cur, self.weights, comm=comm)
            if self.omega == 1.0:
                nxt = mixed
            elif flat:   # (1 - omega) y^{s-1} + omega W y^s
                nxt = self.omega * mixed + (1.0 - self.omega) * prev
            else:
                nxt = manifold.exp(prev, self.omega * manifold.log(prev, mixed))
            prev, cur = cur, nxt
        return cur

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One round: the local noisy gradient step, then ``K`` (accelerated) gossip steps."""
        g = self.gradient(problem, state)                 # noisy clipped mean, charged
        half = problem.manifold.exp(state.x, -self.lr * g)
        return state.advance(x=self.gossip(problem.manifold, half, state.comm))
