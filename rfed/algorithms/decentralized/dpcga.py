"""DP-CGA: cross-gradient aggregation by quadratic programming, with batch-level Gaussian noise.

Y. Esfandiari, S. Y. Tan, Z. Jiang, A. Balu, E. Herron, C. Hegde, S. Sarkar, "Cross-Gradient
Aggregation for Decentralized Learning from Non-IID Data", ICML 2021 (arXiv:2103.02051),
Algorithm 1 (CGA). Each round agent ``j`` sends its model to its neighbours; every neighbour
``l`` returns the cross-gradient ``g^{jl}`` of ``j``'s model on ``l``'s minibatch; ``j`` projects
its own gradient ``g^{jj}`` so that it agrees with every cross-gradient, by the quadratic
program of gradient episodic memory (GEM)::

    with G the rows pi_jl g^{jl} (l != j) and g = pi_jj g^{jj}:
    v* = argmin_{v >= margin} 1/2 v^T G G^T v + (G g)^T v,    g~ = G^T v* + g,

then takes a momentum step and averages the models with the mixing weights ``pi``::

    m_j <- mu m_j + g~,     x_j <- sum_l pi_jl x_l - lr (g~ + mu m_j).

The weighting of the gradients by ``pi`` before the QP, the dual lower bound ``margin`` (0.5) and
the momentum in its Nesterov form are those of the authors' released implementation; the QP
there is solved per network layer, here over the whole parameter vector.

The DP variant (DP-CGA) is the one DPDL (Yuan et al., Sec. 6, its baselines) compares with:
"each agent first computes the average cross-gradient (or self-gradient) over its local data
batch, and then conducts clipping operation and adds Gaussian noise" -- BATCH-level clipping.
Neither paper calibrates that noise; rfed's calibration, labelled as rfed's: the clipped mean
of a minibatch has replace-one sensitivity ``2C`` (one record can move the unclipped mean
arbitrarily), each release gets ``N(0, (z 2C)^2)``, and an agent's ``|N_j|`` releases of one
round (its cross-gradients for its neighbours and its own self-gradient, which enters the model it
gossips and is therefore noised too) compose on one minibatch drawn without replacement, with
the certified accountant, as for DPDL.

Manifold form: the cross-gradients of ``j``'s model lie in ``T_{x_j}`` (evaluated at the model
``j`` sent), so the QP's Gram matrix uses the metric at ``x_j``; the models are averaged by one
Riemannian gossip step of the models already sent (public copies, no new message), the step is
``Exp`` from the average with the direction transported there, and the momentum is transported
to the new model. On Euclidean space this is the update above.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize

from rfed._docstrings import sections_from
from rfed.algorithms.decentralized._common import check_nonneg
from rfed.algorithms.decentralized.base import PrivateAlgorithm, PrivateGradient
from rfed.algorithms.decentralized.dpdl import DPDL, MAX_CHUNK_PAIRS
from rfed.manifolds import Euclidean
from rfed.networks.gossip import consensus_direction
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget

__all__ = ["DPCGA", "cga_projection"]

#: Ridge added to the QP's Gram matrix (the authors' 1e-12), which makes it positive definite.
GRAM_RIDGE = 1e-12


def cga_projection(gram: np.ndarray, cross_dot_self: np.ndarray, margin: float
                   ) -> np.ndarray:
    r"""The dual solution ``v* = argmin_{v >= margin} 1/2 v^T P v + c^T v`` of CGA's QP.

    Parameters
    ----------
    gram : array, shape ``(m, m)``
        ``P = G G^T`` of the (weighted) cross-gradients.
    cross_dot_self : array, shape ``(m,)``
        ``c = G g`` (inner products of the cross-gradients with the weighted self-gradient).
    margin : float
        Lower bound on every dual variable.

    Returns
    -------
    array, shape ``(m,)``

    Notes
    -----
    With ``v = margin + u``, ``u >= 0`` and ``P + ridge I = L L^T`` (Cholesky), the objective is
    ``1/2 ||L^T u + L^{-1} b||^2 + const`` with ``b = P margin 1 + c``: a non-negative least
    squares problem, solved exactly (active set) by :func:`scipy.optimize.nnls`.
    """
    m = cross_dot_self.size
    if m == 0:
        return np.zeros(0)
    p = 0.5 * (gram + gram.T) + GRAM_RIDGE * np.eye(m)
    b = p @ np.full(m, margin) + cross_dot_self
    chol = scipy.linalg.cholesky(p, lower=True)
    rhs = -scipy.linalg.solve_triangular(chol, b, lower=True)
    u, _ = scipy.optimize.nnls(chol.T, rhs)
    return margin + u


class DPCGA(DPDL):
    r"""DP-CGA (Esfandiari et al., ICML 2021, Algorithm 1, with batch-level Gaussian noise),
    generic over the manifold.

    Parameters
    ----------
    network : Network
        Symmetric doubly stochastic ``pi`` with a positive diagonal.
    lr : float
        Step size.
    momentum : float
        ``mu`` in ``[0, 1)``.
    batch_size : int
        ``B``: one minibatch per round for every cross-gradient and the self-gradient.
    clip : float
        Batch-level clipping norm ``C`` of each averaged (cross- or self-) gradient, public.
    margin : float
        Lower bound of the QP's dual variables (0.5; 0 gives the plain GEM projection).
    budget : PrivacyBudget, optional
        Budget-first (rfed's calibration): the planned ``n_rounds`` certify ``budget`` (record
        level, replace-one, per agent).
    n_rounds : int, optional
    noise_multiplier : float, optional
        Noise std over the replace-one sensitivity ``2C`` of one clipped batch mean.
    delta : float, optional
    max_chunk_pairs : int
        As :class:`DPDL`.
    """

    name = "DP-CGA"

    def __init__(self, network: Network, *, lr: float, momentum: float = 0.5,
                 batch_size: int = 32, clip: float = 2.0, margin: float = 0.5,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, delta: float | None = None,
                 max_chunk_pairs: int = MAX_CHUNK_PAIRS, **kwargs):
        super().__init__(network, lr=lr, beta=momentum, alpha=0.0, batch_size=batch_size,
                         clip=clip, delta=delta, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, max_chunk_pairs=max_chunk_pairs,
                         **kwargs)
        self.margin = check_nonneg(margin, "margin")

    paper_std = None  # type: ignore[assignment]  # no paper formula: paper_epsilon= refused

    def _private_gradient(self, clip: float, batch_size: int) -> PrivateGradient:
        """Batch-level clipping (DPDL's Sec. 6 reading of DP-CGA): the minibatch's mean
        gradient clipped to ``C`` and noised; replace-one sensitivity ``2C``."""
        return PrivateGradient(clip, batch_size, clipping="batch_mean")

    def paper_formula(self, problem, plan) -> None:
        return None

    def assumptions(self, problem) -> list[str]:
        return [f"each minibatch-mean gradient clipped to norm C = {self.clip:g} (batch-level, "
                "enforced; public): replace-one sensitivity 2C",
                "one minibatch of B records per round, drawn without replacement, secret; all "
                "of the round's releases use it",
                "the self-gradient in the update is noised (every value leaving an agent is "
                "post-processing of its noisy releases); rfed's calibration (the papers give "
                "none)"]

    def aggregate(self, manifold, x: np.ndarray, owner: np.ndarray, cross: np.ndarray,
                  cross_weights: np.ndarray, g_self: np.ndarray, self_weights: np.ndarray
                  ) -> np.ndarray:
        """CGA's QP aggregate ``g~_j = G_j^T v*_j + pi_jj g^{jj}`` of every agent of the block.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)``
            The block's models.
        owner : int array, shape ``(m,)``
            Local row of the model owner of each received cross-gradient.
        cross : array, shape ``(m, *point_shape)``
            Received cross-gradients, tangent at ``x[owner]``.
        cross_weights : array, shape ``(m,)``
            ``pi_jl`` of each.
        g_self : array, shape ``(A, *point_shape)``
        self_weights : array, shape ``(A,)``
            ``pi_jj``.

        Returns
        -------
        ndarray, shape ``(A, *point_shape)``
            ``g~_j``, tangent at ``x``.
        """
        k = len(manifold.point_shape)
        shape = (-1,) + (1,) * k
        rows = cross_weights.reshape(shape) * cross
        g = self_weights.reshape(shape) * g_self
        out = g.copy()
        order = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[order], np.arange(x.shape[0] + 1))
        for j in range(x.shape[0]):   # one small QP per agent (|N_j| - 1 dual variables)
            mine = order[bounds[j]:bounds[j + 1]]
            if mine.size == 0:
                continue
            # orthonormal coordinates at x_j: the metric's inner products are dot products
            base = np.broadcast_to(x[j], rows[mine].shape)
            coords = manifold.to_coords(base, rows[mine])
            keep = np.any(coords != 0, axis=1)          # the QP over the non-zero rows
            if not keep.any():
                continue
            coords = coords[keep]
            own = manifold.to_coords(x[j], g[j])
            v = cga_projection(coords @ coords.T, coords @ own, self.margin)
            out[j] = g[j] + np.tensordot(v, rows[mine][keep], axes=1)
        return out

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One round of Algorithm 1 (CGA) with batch-level noise, for the block's agents."""
        manifold, comm, w = problem.manifold, state.comm, self.weights
        n, agents, x = problem.n_agents, comm.agents, state.x
        if state.ledger is not None:
            state.ledger.check_can_step()
        idx = self._minibatches(problem, state, agents)
        # models to the neighbours; each data owner evaluates them (and its own model) on its
        # minibatch: the noisy clipped cross-gradients g^{jl} and the self-gradient g^{jj}
        nb = comm.gather_from_neighbors(w, x)
        m = nb.senders.size
        noisy = self._noisy_means(problem, np.concatenate([nb.values, x]),
                                  np.concatenate([agents[nb.receivers], agents]),
                                  np.concatenate([idx[nb.receivers], idx]),
                                  np.concatenate([n + nb.arc_ids, agents]), state)
        g_self = noisy[m:]
        # cross-gradients back to the model owners (reply on j -> i goes i -> j)
        back_order = (self._reverse if agents.size == n
                      else np.lexsort((nb.receivers, nb.senders)))
        back = comm.send_along_arcs(w, noisy[:m][back_order])
        # the QP aggregate g~_j = G_j^T v*_j + pi_jj g^{jj} at each model owner
        g_agg = self.aggregate(manifold, x, back.receivers, back.values, back.weights, g_self,
                               w.diagonal()[agents])
        # momentum (Nesterov form), then the step from the average of the models sent
        mom = self.beta * state.v + g_agg
        direction = g_agg + self.beta * mom
        cons = consensus_direction(manifold, w, x, comm=comm, copies=True)
        if type(manifold) is Euclidean:
            x_new = x + cons - self.lr * direction
            m_new = mom
        else:
            mixed = manifold.exp(x, cons)
            x_new = manifold.exp(mixed, -self.lr * manifold.transport(x, mixed, direction))
            m_new = manifold.transport(x, x_new, mom)
        self.gradient.charge(state, agents)
        return state.advance(x=x_new, v=m_new, gtilde=g_agg)
