"""DPDL: cross-gradient aggregation with similarity calibration, and the DP-DPSGD baseline.

After Yuan, Xiao, Wang and Li (rfed's reading: ``docs/papers/dpdl.md``). Each round, agent ``i``
sends its model to its neighbours; each neighbour ``j`` evaluates it on a minibatch of *its own*
data, clips every per-sample gradient, adds ``N(0, sigma^2 C^2)`` to the sum and returns the mean
(the cross-gradient ``gdd^{ij}``, eqs. (8)-(10)); ``i`` compares each received cross-gradient with
its self-gradient by cosine similarity ``S`` and forms (eqs. (15)-(18))

``gtilde^i = sum_{j in N_i} gdd^{ij} / (sqrt(w_ij) N) + alpha (sum_j w_ij Cal^{ij}) gdd^{ii}``,
``Cal^{ij} = 1 / (1 + e^{S})`` (in ``[1/(1+e), e/(1+e)] = [0.2689, 0.7311]``),

then takes a heavy-ball step and gossips both momentum and model with ``W`` (eqs. (19)-(22)).

Privacy: the paper puts the agent's CLEAN clipped self-gradient ``ghat^{ii}``
in the self term and the cosine reference; that value then leaves the agent inside the model it
gossips, un-noised (infinite epsilon). rfed uses the agent's NOISY self-gradient ``gdd^{ii}`` (the
same Gaussian mechanism as a cross-gradient, on the same minibatch) in both places, so everything
that leaves agent ``i`` is post-processing of its ``|N_i|`` noisy releases per round (its
``|N_i| - 1`` cross-gradients for its neighbours and its self-gradient), all accounted.

Manifold form (``docs/papers/dpdl.md``): the cross-gradient is computed at the receiver's own point
``x^i_{t-1}`` (the model it sent), so it lies in ``T_{x^i}`` already: no transport for the
cosine, the calibration or the sum. The model step is ``Exp_{x^i}(-eta vtilde^i)``, the model
gossip is one Riemannian gossip step, and the momentum gossip transports each ``vtilde^j`` from
``x^j_{t-1}`` to the receiver's new point. On Euclidean space this is exactly Algorithm 1.

References
----------
* Yunsheng Yuan, Xue Xiao, Lina Wang and Feng Li. DPDL: Towards Differential Privacy
  Preservation in Decentralized Stochastic Learning on Non-IID Data. arXiv preprint
  arXiv:2606.04399, 2026.
* Jie Xu, Wei Zhang and Fei Wang. A(DP)^2SGD: Asynchronous Decentralized Parallel Stochastic
  Gradient Descent with Differential Privacy. IEEE Transactions on Pattern Analysis and Machine
  Intelligence, 2021. arXiv:2008.09246.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms.decentralized._common import ScratchArrays, check_nonneg, scratch_of
from rfed.algorithms.decentralized._privacy import PaperFormula
from rfed.algorithms.decentralized._streams import agent_draws
from rfed.algorithms.decentralized.base import (
    PrivateAlgorithm,
    PrivateGradient,
    PrivateState,
    structured_clipping,
)
from rfed.algorithms.private import SAMPLINGS, GaussianRelease
from rfed.manifolds import Euclidean
from rfed.networks.comm import _offdiag_arcs, reverse_arcs, segment_sum
from rfed.networks.gossip import mix_tangent, riemannian_gossip
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.secure import is_secure
from rfed.problems.base import sample_without_replacement

__all__ = ["DPDL", "DPDPSGD", "calibration_weights", "CALIBRATION_CHUNK_ROWS", "MAX_CHUNK_PAIRS",
           "MAX_CHUNK_BYTES",
           "poisson_minibatches", "structured_clipping"]

#: Default (model, data owner) pairs per chunk of per-sample gradients (with B = 32 and
#: dim = 100, about 25 KB per pair for each per-sample array).
MAX_CHUNK_PAIRS = 2048
#: Memory a chunk of pairs may take for its minibatch rows and per-sample arrays (256 MB):
#: fewer pairs per chunk when they are large (e.g. B = 819 records of 3,969 features).
MAX_CHUNK_BYTES = 1 << 28


def poisson_minibatches(counts: np.ndarray, batch_size: int, draws,
                        rate_sizes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Poisson minibatches: row ``j < counts[a]`` of agent ``a`` is drawn when its uniform key
    is below ``min(1, batch_size / rate_sizes[a])``.

    Parameters
    ----------
    counts : int array, shape ``(A,)``
        Local sizes (each ``>= batch_size``).
    batch_size : int
        The expected batch size ``B``.
    draws : numpy Generator or keyed draws
        ``draws.random((A, max(counts)))`` gives the keys.
    rate_sizes : int array, shape ``(A,)``, optional
        The sizes the rates use (default ``counts``; under add/remove the declared public
        sizes).

    Returns
    -------
    idx : int array, shape ``(A, b)``
        The drawn rows first, in increasing order, then zeros (``b``: the largest batch drawn,
        at least 1).
    mask : bool array, shape ``(A, b)``
        Which entries of ``idx`` were drawn.
    """
    counts = np.asarray(counts, dtype=np.int64)
    rate_sizes = counts if rate_sizes is None else np.asarray(rate_sizes, dtype=np.int64)
    keys = draws.random((counts.size, int(counts.max())))
    drawn = (keys < (batch_size / rate_sizes)[:, None]) & (np.arange(keys.shape[1])[None, :]
                                                           < counts[:, None])
    sizes = drawn.sum(axis=1)
    width = max(1, int(sizes.max()))
    order = np.argsort(~drawn, axis=1, kind="stable")[:, :width]
    mask = np.arange(width)[None, :] < sizes[:, None]
    return np.where(mask, order, 0), mask


#: Pairs whose calibration weights are computed at once (:func:`calibration_weights`): the
#: per-pair temporaries of a chunk stay in the cache and below glibc's mmap threshold.
CALIBRATION_CHUNK_ROWS = 1 << 16


def calibration_weights(manifold, x: np.ndarray, received: np.ndarray,
                        reference: np.ndarray, reference_norm: np.ndarray | None = None, *,
                        chunk_rows: int = CALIBRATION_CHUNK_ROWS
                        ) -> tuple[np.ndarray, np.ndarray]:
    r"""Cosine similarity ``S`` and DPDL's calibration ``Cal = 1 / (1 + e^S)`` (eqs. 15-16).

    Parameters
    ----------
    x : array, shape ``(m, *point_shape)``
        Base points (the receiver's model).
    received, reference : arrays, shape ``(m, *point_shape)``
        Noisy received gradients and the receiver's reference self-gradient (its own noisy
        self-gradient in :class:`DPDL`), tangent at ``x``.
    reference_norm : array, shape ``(m,)``, optional
        ``manifold.norm(x, reference)`` if the caller has it (e.g. one norm per agent, gathered
        to its pairs: a row's norm does not depend on the other rows, so the same floats).
    chunk_rows : int
        Rows computed at once (each row's values do not depend on the others, so the results
        do not depend on it); it bounds the temporaries (the manifold's products of two
        ``(m, *point_shape)`` arrays) to ``chunk_rows`` rows.

    Returns
    -------
    (S, Cal) : arrays, shape ``(m,)``; ``S = 0`` (``Cal = 1/2``) when a norm vanishes.
    """
    if (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer))
            or chunk_rows < 1):
        raise ValueError(f"argument 'chunk_rows' must be an int >= 1, got {chunk_rows!r}")
    m = np.shape(received)[0]
    if m <= chunk_rows:
        return _calibration(manifold, x, received, reference, reference_norm)
    s, cal = np.empty(m), np.empty(m)
    for lo in range(0, m, chunk_rows):
        sl = slice(lo, min(lo + chunk_rows, m))
        s[sl], cal[sl] = _calibration(manifold, x[sl], received[sl], reference[sl],
                                      None if reference_norm is None else reference_norm[sl])
    return s, cal


def _calibration(manifold, x, received, reference, reference_norm):
    """:func:`calibration_weights` of one chunk of rows."""
    num = manifold.inner(x, received, reference)
    if reference_norm is None:
        reference_norm = manifold.norm(x, reference)
    den = manifold.norm(x, received) * reference_norm
    s = np.where(den > 1e-12, num / np.maximum(den, 1e-12), 0.0)
    s = np.clip(s, -1.0, 1.0)
    return s, 1.0 / (1.0 + np.exp(s))


class _PairArrays:
    """A DPDL round's pair arrays (one row per pair) in the run's reused arrays
    (:class:`~rfed.algorithms.decentralized._common.ScratchArrays`) when the points are
    float64, else fresh ones: the same copies, gathers and products either way."""

    def __init__(self, scratch: ScratchArrays, x: np.ndarray):
        self.scratch = scratch if x.dtype == np.float64 else None
        self.point_shape = x.shape[1:]

    def like(self, name: str, rows: int) -> np.ndarray | None:
        """The reused array ``name`` of ``rows`` points (``None``: a fresh one is made)."""
        if self.scratch is None:
            return None
        return self.scratch.take(name, (rows,) + self.point_shape)

    def stacked(self, name: str, top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
        """``np.concatenate([top, bottom])``."""
        if self.scratch is None or top.dtype != np.float64 or bottom.dtype != np.float64:
            return np.concatenate([top, bottom])
        out = self.scratch.take(name, (top.shape[0] + bottom.shape[0],) + self.point_shape)
        return np.concatenate([top, bottom], out=out)

    def rows(self, name: str, values: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``values[index]`` (``index`` valid rows)."""
        if self.scratch is None or values.dtype != np.float64:
            return values[index]
        out = self.scratch.take(name, (index.size,) + self.point_shape)
        # mode 'clip' writes straight into out ('raise' would gather into a temporary first);
        # the indices are rows of the block
        return np.take(values, index, axis=0, out=out, mode="clip")


def _reusable(*arrays: np.ndarray) -> bool:
    """Whether a round may write these rows' results into reused arrays: C-contiguous float64
    arrays (what ``out=`` takes with the bits of a fresh result)."""
    return all(type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous
               for a in arrays)


def _state_array(algorithm, field: str, like: np.ndarray) -> np.ndarray | None:
    """The array the next state's ``field`` is written into (shape of ``like``): a recycled
    one (:meth:`ScratchArrays.recycled`) for float64 rows, else ``None`` (a fresh result)."""
    if not _reusable(like):
        return None
    return scratch_of(algorithm).recycled(field, like.shape)


@dataclass
class DPDLState(PrivateState):
    """Models ``x``, momenta ``v`` (tangent at ``x``), the last aggregate ``gtilde`` (eq. (18),
    tangent at the previous models) and the last calibration weights (one per pair, j = i
    included).

    Parameters
    ----------
    v, gtilde : ndarray, shape ``(n_local, *point_shape)``
    last_cal : ndarray
    **fields
        Those of :class:`~rfed.algorithms.decentralized.PrivateState`.
    """

    v: np.ndarray = None  # type: ignore[assignment]
    gtilde: np.ndarray = None  # type: ignore[assignment]
    last_cal: np.ndarray = None  # type: ignore[assignment]


class DPDL(PrivateAlgorithm):
    r"""DPDL (Algorithm 1 of Yuan, Xiao, Wang and Li), generic over the manifold.

    Parameters
    ----------
    network : Network
        Symmetric doubly stochastic ``W`` with a positive diagonal (``w_ii > 0``).
    lr : float
        ``eta`` (0.005 MNIST, 0.03 CIFAR-10).
    beta : float
        Momentum (0.7).
    alpha : float
        Calibration weight (1.5 bipartite/complete, 2 ring).
    batch_size : int
        ``B`` (216), one minibatch per round reused for all cross-gradients and the self-gradient
        (with Poisson sampling its expected size and the public normaliser).
    sampling : {'without_replacement', 'poisson'}
        How the minibatch is drawn: ``B`` of the ``q_i`` records uniformly without replacement
        (the paper's draw), or each record independently with probability ``B / q_i``
        (``B / N_i^pub``, the declared public size, under add/remove), the clipped sum divided
        by the public ``B``; certified by the PLD accountant under replace-one. Poisson
        sampling also accepts a budget of relation ``'add_remove_one'`` (with declared
        ``public_sizes``), whose sensitivity is ``C`` (one summand added or removed) instead
        of ``2 C``.
    clip : float
        Per-sample clipping norm ``C`` (Riemannian norm; 2 MNIST, 3 CIFAR-10), a PUBLIC number.
    budget : PrivacyBudget, optional
        Budget-first: the noise of the planned ``n_rounds`` rounds is calibrated at ``init`` so
        the finished run certifies ``budget`` (record level, replace-one, per agent).
    n_rounds : int, optional
        Planned rounds (required with ``budget`` and ``paper_epsilon``).
    noise_multiplier : float, optional
        Research: noise std over the replace-one sensitivity ``2C`` of one clipped sum.
    sigma : float
        The paper's parametrisation (eq. (10)): std ``sigma C`` on each clipped *sum*, then
        divided by ``B``; reported with its certified epsilon.
    paper_epsilon : float, optional
        The paper's Theorem 1 calibration (eq. (23) as printed) for ``n_rounds`` rounds: the
        paper's formula, not a guarantee.
    h, c2 : float
        Theorem 1's quantities the paper leaves unspecified, used only for the paper's formula.
    delta : float, optional
        Delta of the reports without a budget (default ``min(1e-5, 1/(10 q))``).
    max_chunk_pairs : int
        (model, data owner) pairs whose per-sample gradients are computed at once (fewer when
        a chunk would exceed ``MAX_CHUNK_BYTES``): peak memory of a round is
        ``O(max_chunk_pairs B dim)`` for the per-sample gradients plus
        ``O((arcs + agents) dim)`` for the per-pair results, instead of
        ``O((arcs + agents) B dim)``; the results do not depend on it.
    """

    name = "DPDL"
    state_rows = ("x", "v", "gtilde")
    state_class = DPDLState

    def __init__(self, network: Network, *, lr: float, beta: float = 0.7, alpha: float = 1.5,
                 batch_size: int = 32, clip: float = 2.0, sigma: float = 0.0, h: float = 1.0,
                 c2: float = 1.0, delta: float | None = None,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, paper_epsilon: float | None = None,
                 max_chunk_pairs: int = MAX_CHUNK_PAIRS,
                 sampling: str = "without_replacement", **kwargs):
        if sampling not in SAMPLINGS:
            raise ValueError(f"argument 'sampling' must be one of {SAMPLINGS}, got {sampling!r}")
        self.sampling = sampling
        if sampling == "poisson":
            # the rates read declared public sizes and the normaliser is the public B: this
            # instance accepts add/remove (the class's refusal is for the paper's draw)
            self.add_remove_refusal = None  # type: ignore[misc]
        super().__init__(network, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, sigma=check_nonneg(sigma, "sigma"),
                         paper_epsilon=paper_epsilon, delta=delta, **kwargs)
        diag = self.weights.diagonal()
        if np.any(diag <= 0):
            raise ValueError(f"DPDL needs w_ii > 0 for every agent; agent "
                             f"{int(np.argmin(diag))} has w_ii = {diag.min():.3g}")
        self.lr = check_nonneg(lr, "lr")
        if self.lr == 0:
            # as DO-ADP's alpha: with a zero step the iterates never move (a run that
            # "succeeds" and learns nothing, while spending the privacy budget)
            raise ValueError(f"argument 'lr' (the step size) must be > 0, got {lr!r}")
        self.beta = check_nonneg(beta, "beta")
        if self.beta >= 1:
            raise ValueError(f"argument 'beta' must be in [0, 1), got {beta!r}")
        self.alpha = check_nonneg(alpha, "alpha")
        if batch_size is None:
            raise ValueError("argument 'batch_size' must be an int >= 1, got None (one "
                             "minibatch of B records per round)")
        self.gradient = self._private_gradient(check_nonneg(clip, "clip"), batch_size)
        self.batch_size, self.clip = int(batch_size), float(clip)
        self.sigma = float(sigma)
        self.h = float(h)
        self.c2 = float(c2)
        if (isinstance(max_chunk_pairs, bool) or not isinstance(max_chunk_pairs, (int, np.integer))
                or max_chunk_pairs < 1):
            raise ValueError(f"argument 'max_chunk_pairs' must be an int >= 1, got "
                             f"{max_chunk_pairs!r}")
        self.max_chunk_pairs = int(max_chunk_pairs)
        # a cross-gradient computed on the arc j -> i (model of j, data of i) returns on i -> j
        self._reverse = reverse_arcs(self.weights)
        self.closed_sizes = np.diff(self.weights.indptr)  # |N_i| including i (w_ii > 0)
        self.n_agents = self.weights.shape[0]
        # in-arcs of agents 0 .. i-1 in arc-list order: where agent i's arcs start
        self._in_arc_ptr = _offdiag_arcs(self.weights)[3]

    # ------------------------------------------------------------------ block states
    def _extra_fields(self) -> tuple[str, ...]:
        return ("last_cal",)

    def _merge_extra(self, blocks, bounds):
        """``last_cal`` of a block is ``[its agents' in-arcs (arc-list order), its agents' self
        pairs]``; the whole state's is ``[every in-arc, every self pair]``."""
        if all(s.last_cal is None for s in blocks):
            return {"last_cal": None}
        arcs, selfs = [], []
        for k, s in enumerate(blocks):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            n_arcs = int(self._in_arc_ptr[hi] - self._in_arc_ptr[lo])
            if s.last_cal is None or np.shape(s.last_cal) != (n_arcs + hi - lo,):
                raise ValueError(f"block {k}'s field 'last_cal' must hold {n_arcs} arcs and "
                                 f"{hi - lo} self pairs, got shape "
                                 f"{None if s.last_cal is None else np.shape(s.last_cal)}")
            arcs.append(s.last_cal[:n_arcs])
            selfs.append(s.last_cal[n_arcs:])
        return {"last_cal": np.concatenate(arcs + selfs)}

    def _split_extra(self, state, bounds):
        cal = state.last_cal
        n_blocks = bounds.size - 1
        if cal is None:
            return [{"last_cal": None} for _ in range(n_blocks)]
        ptr = self._in_arc_ptr
        m = int(ptr[-1])
        out = []
        for k in range(n_blocks):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            out.append({"last_cal": np.concatenate([cal[ptr[lo]:ptr[hi]], cal[m + lo:m + hi]])})
        return out

    # ------------------------------------------------------------------ privacy
    def _private_gradient(self, clip: float, batch_size: int) -> PrivateGradient:
        """Eqs. (8)-(10): per-sample gradients clipped to ``C``, noise on the sum, then ``/B``
        (a problem's structured clipped sum when its class has one: the fast path)."""
        return PrivateGradient(clip, batch_size, structured_sums=True)

    @sections_from(PrivateAlgorithm.accounted_sizes)
    def accounted_sizes(self, problem) -> np.ndarray:
        """The local sizes the rates, the delta and the account read: the true ones under
        replace-one, the declared public ones under add/remove."""
        budget = self.noise.budget
        return (problem.counts if budget is None
                else np.asarray(budget.public_counts(problem.counts)))

    @sections_from(PrivateAlgorithm.check_problem)
    def check_problem(self, problem) -> None:
        """The network's size, and ``B`` against the smallest local size (the declared public
        one under add/remove: the true sizes are private there)."""
        if self.network.n_agents != problem.n_agents:
            raise ValueError(f"network has {self.network.n_agents} agents, problem has "
                             f"{problem.n_agents}")
        if self.noise.neighboring == "replace_one":
            self.gradient.check(problem)
            return
        sizes = self.accounted_sizes(problem)
        if self.batch_size > int(np.min(sizes)):
            raise ValueError(f"argument 'batch_size' ({self.batch_size}) exceeds the smallest "
                             f"declared public size ({int(np.min(sizes))})")

    @sections_from(PrivateAlgorithm.plan)
    def plan(self, problem, rng, seed):
        """:meth:`PrivateAlgorithm.plan`, refusing Poisson sampling under replace-one in secure
        mode (RDP only, and RDP has no replace-one bound for Poisson sampling)."""
        if (self.sampling == "poisson" and self.noise.mode is not None and is_secure(rng)
                and self.noise.neighboring == "replace_one"):
            raise ValueError(f"{self.name}: secure mode certifies with RDP only, which has no "
                             "replace-one bound for Poisson sampling; use "
                             "sampling='without_replacement' in secure mode")
        return super().plan(problem, rng, seed)

    def _releases(self) -> np.ndarray:
        """Gaussian releases per agent and round: ``|N_i|`` (cross-gradients and self)."""
        return self.closed_sizes

    @sections_from(PrivateAlgorithm.release)
    def release(self, problem) -> GaussianRelease:
        """``|N_i|`` noisy clipped sums per agent and round, all on one minibatch of ``B``
        (drawn as ``sampling`` says); under add/remove (Poisson only) one record adds or
        removes one clipped summand: sensitivity ``C``."""
        release = self.gradient.release(problem, per_round=self._releases())
        sensitivity = (release.sensitivity if self.noise.neighboring == "replace_one"
                       else self.clip)
        return dataclasses.replace(release, sensitivity=sensitivity, sampling=self.sampling)

    @sections_from(PrivateAlgorithm.sigma_unit)
    def sigma_unit(self) -> float:
        """The paper's noise std is ``sigma C`` (eq. (10))."""
        return self.clip

    def _paper(self, problem, delta, sigma) -> PaperFormula | None:
        w = self.weights
        return PaperFormula("dpdl", {
            "q_global": self.batch_size / (problem.n_agents * int(problem.counts.min())),
            "alpha": self.alpha, "n": problem.n_agents, "w_min": float(w.data.min()),
            "w_max": float(w.data.max()), "closed_min": int(self.closed_sizes.min()),
            "h": self.h, "c2": self.c2, "delta": delta, "sigma": sigma})

    def paper_std(self, problem, delta: float) -> float:
        """Theorem 1, eq. (23) as printed: the ``sigma`` of ``paper_epsilon`` (it scales as
        ``1 / epsilon``).

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
        unit = self._paper(problem, delta, 1.0)
        assert unit is not None   # a paper formula at unit noise
        return unit.evaluate(rounds)["epsilon"] / epsilon

    def paper_formula(self, problem, plan) -> PaperFormula | None:
        return self._paper(problem, plan.delta, plan.std / self.clip)

    def assumptions(self, problem) -> list[str]:
        batch = ("one minibatch of B records per round, drawn without replacement, secret; "
                 "all of the round's releases use it" if self.sampling == "without_replacement"
                 else f"one Poisson minibatch per round (each record with probability "
                      f"{self.batch_size} / q_i), secret, its sum divided by the public "
                      f"B = {self.batch_size}; all of the round's releases use it")
        return [f"per-sample gradients clipped to norm C = {self.clip:g} (enforced; public)",
                batch,
                "the self-gradient in the model update is the noisy one (every value leaving "
                "an agent is post-processing of its noisy releases)"]

    # ------------------------------------------------------------------ the round's pieces
    def _noisy_means(self, problem, x_models, data_owner, idx, noise_ids, state, mask=None,
                     out: np.ndarray | None = None):
        """Per pair (model, data owner): eq. (10), the noisy clipped mean of the owner's
        minibatch at the model, tangent at ``x_models`` (``noise_ids``: the keyed noise stream
        of each release; ``mask`` ``(P, b)``: the drawn rows of a Poisson minibatch, None:
        every row; ``out``: the array to write them into, default a fresh one).

        The pairs go a chunk at a time (:meth:`_chunk_pairs`), so the per-sample values never
        exceed one chunk; every pair's value is the same in any chunk. A problem with a
        structured clipped sum takes the private gradient's fast path
        (:func:`structured_clipping`).
        """
        if out is None:
            out = np.empty(x_models.shape)
        n_pairs = data_owner.size
        chunk = self._chunk_pairs(problem, structured_clipping(problem))
        for lo in range(0, n_pairs, chunk):  # chunks of pairs, not agents
            sl = slice(lo, min(lo + chunk, n_pairs))
            out[sl] = self.gradient.noisy_values(
                problem, x_models[sl], data_owner[sl], idx[sl], state.noise_std,
                agent_draws(state.rng, state.seed, noise_ids[sl], state.t, "noise"),
                **({} if mask is None else {"mask": mask[sl]}))
        return out

    def _chunk_pairs(self, problem, structured: bool) -> int:
        """Pairs per chunk: at most ``max_chunk_pairs``, and few enough that a chunk's gathered
        minibatch rows and per-sample arrays stay near ``MAX_CHUNK_BYTES`` (at least one)."""
        # one record's values in float64 (a structured sum may work on a float64 copy)
        row_values = sum(int(np.prod(v.shape[2:], dtype=np.int64)) for v in problem._data.values())
        if structured:
            # the gathered rows and their float64 copy in the products
            per_record = 2 * 8 * row_values
        else:
            # the gathered rows, the per-sample gradients and their clipped copy
            per_record = 8 * row_values + 2 * 8 * int(np.prod(problem.manifold.point_shape))
        per_pair = max(1, per_record * self.batch_size)
        return int(max(1, min(self.max_chunk_pairs, MAX_CHUNK_BYTES // per_pair)))

    def _minibatches(self, problem, state, agents):
        """This round's minibatch rows of ``agents`` (global ids), ``(A, B)``, keyed: ``B`` rows
        drawn uniformly without replacement (the paper's draw)."""
        return sample_without_replacement(
            problem.counts[agents], self.batch_size,
            agent_draws(state.rng, state.seed, agents, state.t, "minibatch"))

    def _round_batches(self, problem, state, agents):
        """This round's minibatches of ``agents``: ``(idx, mask)``, ``idx`` ``(A, b)`` and
        ``mask`` None (:meth:`_minibatches`) or ``(A, b)``, the drawn rows of a Poisson
        minibatch (``b`` its largest size)."""
        if self.sampling != "poisson":
            return self._minibatches(problem, state, agents), None
        draws = agent_draws(state.rng, state.seed, agents, state.t, "minibatch")
        # the rate B / N_i of the sizes the account uses (the declared public ones under
        # add/remove), over the rows the agent holds
        sizes = self.accounted_sizes(problem)
        return poisson_minibatches(problem.counts[agents], self.batch_size, draws,
                                   rate_sizes=sizes[agents])

    def _gossip(self, manifold, state, x, vtilde, xtilde):
        """Eqs. (21)-(22): the gossip of model and momentum, through the state's communicator
        (so that a resumed run keeps counting on the counters it saved), into the arrays of
        the state two rounds old when nothing else holds them
        (:meth:`~rfed.algorithms.decentralized._common.ScratchArrays.recycled`)."""
        x_out = _state_array(self, "x", x)
        x_new = riemannian_gossip(manifold, xtilde, self.weights, comm=state.comm, out=x_out)
        v_new = mix_tangent(manifold, self.weights, x, vtilde, x_new, comm=state.comm,
                            out=_state_array(self, "v", vtilde))
        return x_new, v_new

    def _heavy_ball(self, manifold, x, v, g):
        """Eqs. (19)-(20): ``vtilde = beta v + g`` and ``xtilde = Exp_x(-eta vtilde)``, in the
        run's reused arrays when the points are float64 (the same operations, so the same
        bits; Euclidean ``Exp`` is ``x + u``)."""
        if not _reusable(x, v, g):
            vtilde = self.beta * v + g
            return vtilde, manifold.exp(x, -self.lr * vtilde)
        scratch = scratch_of(self)
        vtilde = np.multiply(self.beta, v, out=scratch.take("momentum step", x.shape))
        vtilde += g
        step = np.multiply(-self.lr, vtilde, out=scratch.take("model step", x.shape))
        if type(manifold) is Euclidean:
            return vtilde, np.add(x, step, out=step)
        return vtilde, manifold.exp(x, step)

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One round of Algorithm 1 (lines 3-29, eqs. (8)-(22)) for the block's agents."""
        manifold, comm, w = problem.manifold, state.comm, self.weights
        n, agents, x = problem.n_agents, comm.agents, state.x
        if state.ledger is not None:
            state.ledger.check_can_step()
        idx, drawn = self._round_batches(problem, state, agents)  # line 3: one per round
        # lines 4-6: every agent sends its model to its neighbours (one dense point per arc)
        nb = comm.gather_from_neighbors(w, x)
        # (8)-(10), lines 7-16: each data owner evaluates the models it received (the m arcs)
        # and its own (the self pairs) on its minibatch. Keyed noise per release: the self
        # release of agent i is stream i, the cross release on arc e is stream n + e
        m = nb.senders.size
        # the round's pair arrays (m + n_local rows) that do not leave it are written into the
        # run's reused arrays (the same copies and products, so the same bits)
        scratch, n_local_rows = _PairArrays(scratch_of(self), x), x.shape[0]
        noisy = self._noisy_means(problem, scratch.stacked("models", nb.values, x),
                                  np.concatenate([agents[nb.receivers], agents]),
                                  np.concatenate([idx[nb.receivers], idx]),
                                  np.concatenate([n + nb.arc_ids, agents]), state,
                                  None if drawn is None
                                  else np.concatenate([drawn[nb.receivers], drawn]),
                                  out=scratch.like("noisy", m + n_local_rows))
        # the agent's own NOISY self-gradient gdd^ii: the clean one would leave the agent
        # un-noised inside the model it gossips
        g_self = noisy[m:]
        # line 18: the cross-gradients travel back to the model owners (one dense vector per
        # arc): the reply on arc j -> i goes along i -> j, so the replies leave in the order of
        # the arcs out of the block, by (sender, receiver)
        back_order = (self._reverse if agents.size == n
                      else np.lexsort((nb.receivers, nb.senders)))
        back = comm.send_along_arcs(w, noisy[:m][back_order])
        # (15)-(16), lines 19-20: cosine similarity and Cal at each model owner, j = i included
        n_local = agents.size
        model_owner = np.concatenate([back.receivers, np.arange(n_local)])  # local rows
        recv_all = scratch.stacked("received", back.values, g_self)
        wij = np.concatenate([back.weights, w.diagonal()[agents]])
        # each agent's self-gradient norm once, gathered to its pairs
        # (the pair models' array again: the stacked models above are no longer read)
        _, cal = calibration_weights(manifold, scratch.rows("models", x, model_owner), recv_all,
                                     scratch.rows("self gradients", g_self, model_owner),
                                     manifold.norm(x, g_self)[model_owner])
        # (17)-(18), lines 21-22:
        # gtilde^i = sum_j gdd^ij / (sqrt(w_ij) N) + alpha (sum_j w_ij Cal^ij) gdd^ii
        coef = 1.0 / (np.sqrt(wij) * n)
        shape = (-1,) + (1,) * len(manifold.point_shape)
        gtilde = _state_array(self, "gtilde", x)   # the state's field (None: a fresh one)
        cross = segment_sum(model_owner, np.multiply(coef.reshape(shape), recv_all,
                                                     out=recv_all), n_local, out=gtilde)
        self_weight = np.bincount(model_owner, weights=wij * cal, minlength=n_local)
        self_term = self.alpha * self_weight.reshape(shape)
        gtilde = np.add(cross, np.multiply(self_term, g_self, out=scratch.like(
            "self term", n_local_rows)), out=gtilde)
        # (19)-(22), lines 24-29: heavy ball, then gossip of momentum and model with W
        vtilde, xtilde = self._heavy_ball(manifold, x, state.v, gtilde)
        x_new, v_new = self._gossip(manifold, state, x, vtilde, xtilde)
        self.gradient.charge(state, agents)
        return state.advance(x=x_new, v=v_new, gtilde=gtilde, last_cal=cal,
                             info=self._calibration_range(state, model_owner, cal))

    def _calibration_range(self, state, model_owner, cal) -> dict:
        """``info`` with the range of this round's calibration weights over every agent (each
        rank holds its block's arcs; every agent has its self arc, so no entry stays
        infinite)."""
        n_local = state.comm.agents.size
        lowest, highest = np.full(n_local, np.inf), np.full(n_local, -np.inf)
        np.minimum.at(lowest, model_owner, cal)
        np.maximum.at(highest, model_owner, cal)
        info = dict(state.info)
        info["cal_min"] = float(state.comm.all_rows(lowest).min())
        info["cal_max"] = float(state.comm.all_rows(highest).max())
        return info

    def start_fields(self, problem, x) -> dict:
        return {"v": np.zeros_like(x)}


class DPDPSGD(DPDL):
    r"""DP-DPSGD baseline (A(DP)^2SGD of Xu, Zhang and Wang, DPDL's Section 5 baseline):
    decentralized parallel SGD where each agent perturbs its own clipped minibatch gradient.

    ``vtilde^i = beta v^i + gdd^{ii}``, ``xtilde^i = Exp_{x^i}(-eta vtilde^i)``, then the same
    gossip of model and momentum as DPDL (so the only difference from DPDL is the cross-gradient
    aggregation and calibration). ``gdd^{ii} = (sum_b clip(g_b) + N(0, sigma^2 C^2)) / B``: one
    release per agent and round. The same privacy arguments as :class:`DPDL` (``budget=``,
    ``n_rounds=``, ``noise_multiplier=``, ``sigma=``); no paper formula, so ``paper_epsilon=`` is
    refused. ``sampling='poisson'`` as in :class:`DPDL`.

    Parameters
    ----------
    network : Network
    lr, beta, batch_size, clip, sigma, delta, budget, n_rounds, noise_multiplier
        As :class:`DPDL` (no calibration weight: ``alpha = 0``).
    max_chunk_pairs, sampling
        As :class:`DPDL`.
    **kwargs
        Passed to :class:`DPDL`.
    """

    name = "DP-DPSGD"
    paper_std = None  # type: ignore[assignment]  # no paper formula: paper_epsilon= refused

    def __init__(self, network: Network, *, lr: float, beta: float = 0.7, batch_size: int = 32,
                 clip: float = 2.0, sigma: float = 0.0, delta: float | None = None,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None,
                 max_chunk_pairs: int = MAX_CHUNK_PAIRS,
                 sampling: str = "without_replacement", **kwargs):
        super().__init__(network, lr=lr, beta=beta, alpha=0.0, batch_size=batch_size,
                         clip=clip, sigma=sigma, delta=delta, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, max_chunk_pairs=max_chunk_pairs,
                         sampling=sampling, **kwargs)

    def _releases(self) -> np.ndarray:
        return np.ones(self.n_agents, dtype=int)

    def paper_formula(self, problem, plan) -> None:
        return None

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One round: the noisy self-gradient, heavy ball, gossip of model and momentum."""
        if state.ledger is not None:
            state.ledger.check_can_step()
        agents = state.comm.agents
        idx, drawn = self._round_batches(problem, state, agents)
        # gdd^ii through the chunked pairs (one pair per agent), then charged
        g = self._noisy_means(problem, state.x, agents, idx, agents, state, drawn,
                              out=_state_array(self, "gtilde", state.x))
        self.gradient.charge(state, agents)
        vtilde, xtilde = self._heavy_ball(problem.manifold, state.x, state.v, g)
        x_new, v_new = self._gossip(problem.manifold, state, state.x, vtilde, xtilde)
        return state.advance(x=x_new, v=v_new, gtilde=g)
