"""The base of rfed's decentralized algorithms and the private gradient step they all repeat.

* :class:`DecentralizedAlgorithm`: agents on a graph, per-agent points stacked as
  ``(n_agents, *point_shape)`` (the block of agents of this process on a distributed engine),
  every value that crosses from one agent to another through the network's
  :class:`~rfed.networks.comm.Communicator`; the output is the agents' (Karcher) mean, the
  history adds the consensus error, the messages and the bytes sent; :meth:`privacy` is the
  run's report (:mod:`rfed.algorithms.private`), private or not.
* :class:`PrivateAlgorithm`: a decentralized algorithm on the public contract for private
  algorithms. It takes the noise as ``privacy=NoiseConfig(...)`` (or the same keywords), states
  what one agent releases per active round (:meth:`PrivateAlgorithm.release`), and
  :meth:`PrivateAlgorithm.init` plans the noise once (:func:`rfed.algorithms.private.plan_noise`:
  under a budget the smallest noise whose planned run certifies it) and opens the account. A
  subclass writes its :meth:`~rfed.algorithms.base.Algorithm.step` and nothing else of the
  privacy machinery: its state (:class:`PrivateState`) carries the run's seed, the noise std and
  the account, the report and the checkpoints work as for rfed's own algorithms.
* :class:`PrivateGradient`: the reusable private step, minibatch -> clip -> mean -> noise ->
  ledger event, for the agents of a block; it states its release's sensitivity
  (:meth:`PrivateGradient.release`), draws each agent's minibatch and noise from the agent's
  keyed stream ``(seed, agent, round, purpose)`` (:mod:`rfed.randomness`; so a run is the same
  on any number of MPI processes) and charges the round to the agents' ledgers.

The tutorial "write your own private algorithm" (``docs/tutorials_src``) builds a noisy gossip
SGD on these three names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.algorithms.decentralized._blocks import BlockStates
from rfed.algorithms.decentralized._common import ScratchArrays, check_mixing_matrix
from rfed.algorithms.decentralized._streams import KeyedDraws, _streams_of, run_seed
from rfed.algorithms.private import (
    GAUSSIAN_REPLACE_ONE_ONLY,
    GaussianAccount,
    GaussianRelease,
    NoiseConfig,
    NoisePlan,
    Release,
    not_private_report,
    plan_noise,
)
from rfed.manifolds import Euclidean, Manifold, as_generator
from rfed.networks.gossip import consensus_error
from rfed.networks.network import Network
from rfed.privacy._tangent import scale as scale_tangents
from rfed.privacy.clipping import clip_by_norm, clip_coordinates
from rfed.privacy.mechanisms import gaussian_mechanism, gaussian_release
from rfed.privacy.secure import is_secure
from rfed.problems.base import Problem, sample_without_replacement

__all__ = ["DecentralizedAlgorithm", "PrivateAlgorithm", "PrivateGradient", "PrivateState",
           "CLIPPINGS", "agents_mean", "merged_report", "structured_clipping"]

#: How :class:`PrivateGradient` enforces its bound (see there).
CLIPPINGS = ("per_sample", "per_coordinate", "batch_mean")


def structured_clipping(problem: Any) -> bool:
    """Whether ``problem``'s class computes clipped gradient sums its own way.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    bool
        True when the class overrides :meth:`rfed.problems.Problem.clipped_grad_sum` (a closed
        form that does not materialise the per-sample gradients, e.g. softmax regression's
        ``A^T (s * (P - Y))``); a :class:`PrivateGradient` with ``structured_sums=True`` then
        uses it in place of clipping materialised gradients.
    """
    return type(problem).clipped_grad_sum is not Problem.clipped_grad_sum


def agents_mean(manifold: Manifold, x: np.ndarray) -> np.ndarray:
    """The agents' mean: arithmetic on Euclidean space, Karcher mean otherwise.

    Parameters
    ----------
    manifold : Manifold
    x : array, shape ``(n_agents, *point_shape)``

    Returns
    -------
    array, shape ``point_shape``
    """
    return manifold.mean(np.asarray(x, dtype=float))


def merged_report(algorithm: Algorithm, state: Any) -> dict[str, Any]:
    """The run's privacy report from a (block) state: the accounts of every process merged,
    the report (which runs the accountant) computed once, by one process, for all.

    Parameters
    ----------
    algorithm : Algorithm
    state : object
        With ``comm``, ``ledger`` (the account, or ``None`` without noise) and ``t``.

    Returns
    -------
    dict
        :func:`rfed.algorithms.private.privacy_report`'s keys
        (:func:`~rfed.algorithms.private.not_private_report` without noise).
    """
    if state.ledger is None:
        return not_private_report(algorithm.name, int(state.t), is_secure(state.rng))
    account = state.comm.merge_account(state.ledger)
    return state.comm.root_computes(account.report)


@dataclass
class PrivateState:
    """The state of a decentralized algorithm's block of agents.

    Attributes
    ----------
    t : int
        Rounds done.
    x : array, shape ``(n_local, *point_shape)``
        The iterates of the communicator's block of agents (every agent in one process).
    rng : numpy.random.Generator or SecureRandom
        The run's generator (its seed is drawn once, at ``init``).
    comm : Communicator
        Counts messages and bytes.
    ledger : GaussianAccount or None
        The run's privacy account (``None`` without noise).
    info : dict
        The message counts at the start (``comm0``) and what the algorithm reports per round.
    seed : int
        The seed of the agents' keyed streams (minibatches, noise).
    noise_std : float
        The noise std of one release (the plan's; 0 without noise).
    """

    t: int
    x: np.ndarray
    rng: Any
    comm: Any
    ledger: Any = None
    info: dict = field(default_factory=dict)
    seed: int = 0
    noise_std: float = 0.0

    def advance(self, **changes: Any) -> PrivateState:
        """The state of the next round: ``t + 1`` and ``changes`` (e.g. ``x=``), the rest kept.

        Parameters
        ----------
        **changes
            New values of fields.

        Returns
        -------
        PrivateState
            Of the same class.

        Notes
        -----
        ``dataclasses.replace(self, t=self.t + 1, **changes)``: for a plain state class (every
        field set by ``__init__``, no ``__post_init__``, not frozen, no slots) the new state is
        the same object built without ``replace``'s call through ``__init__`` (a copy of the
        fields' references, then the changes), which costs a small round (DP-DDA on 20 agents)
        about a tenth of its step; ``tests/algorithms/test_private_state.py`` keeps the two
        equal for every state class.
        """
        cls = type(self)
        names = _PLAIN_FIELDS.get(cls)
        if names is None:
            names = _PLAIN_FIELDS[cls] = _plain_fields(cls)
        if not names or not changes.keys() <= names:
            return dataclasses.replace(self, t=self.t + 1, **changes)
        new = cls.__new__(cls)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        fields["t"] = self.t + 1
        return new


#: per state class, the names of its fields when :meth:`PrivateState.advance` may copy them
#: directly (:func:`_plain_fields`), else an empty set
_PLAIN_FIELDS: dict[type, frozenset[str]] = {}


def _plain_fields(cls: type) -> frozenset[str]:
    """The field names but ``t`` of dataclass ``cls`` when ``dataclasses.replace`` on it is a copy
    of the instance's ``__dict__`` with the changes: every field in ``__init__``, no
    ``__post_init__``, not frozen, instances with a ``__dict__`` and no slots; else empty."""
    fields = dataclasses.fields(cls)
    plain = (all(f.init for f in fields) and not hasattr(cls, "__post_init__")
             and not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
             and not any("__slots__" in vars(k) for k in cls.__mro__))
    # 't' is advance's own: a change naming it goes to replace (which refuses it)
    return frozenset(f.name for f in fields if f.name != "t") if plain else frozenset()


class DecentralizedAlgorithm(BlockStates, Algorithm):
    """Base of the graph algorithms: output = agents' mean, metrics add consensus and traffic.

    Traffic goes through the :class:`~rfed.networks.Network`'s communicator; the history reports
    the messages and bytes sent since the run's ``init`` (the state keeps the starting totals).
    A state of a block of agents merges with the other blocks' and splits again
    (``x`` is a row field; see :mod:`rfed.engines.mpi`).

    History keys (every recorded round): ``round``, ``cost``, ``grad_norm`` (unless the
    problem's ``evaluate_grad_norm`` is false), ``excess_risk`` and ``dist_to_ref`` (with a
    reference), ``consensus_error``, ``messages`` and ``bytes_sent``.
    """

    state_rows: ClassVar[tuple[str, ...]] = ("x",)

    def output(self, problem, state) -> np.ndarray:
        return agents_mean(problem.manifold, self._all_output_points(state))

    def _all_output_points(self, state) -> np.ndarray:
        """Every agent's output point in agent order (gathered from the blocks of a
        distributed engine)."""
        return state.comm.all_rows(self._output_points(state))

    def privacy(self, state) -> dict[str, Any]:
        """The run's privacy report (:func:`merged_report`): the same keys private or not.

        Parameters
        ----------
        state

        Returns
        -------
        dict
        """
        return merged_report(self, state)

    def divergence(self, problem, state, recorded: bool) -> str | None:
        """:meth:`Algorithm.divergence` of this block, shared by every process of the engine
        (so all stop together).

        Parameters
        ----------
        problem : Problem
        state
        recorded : bool
            Whether this round's metrics are recorded.

        Returns
        -------
        str or None
        """
        if not recorded:
            # between records only finiteness is checked: finite iterates need no reason
            x = self.iterates(state)
            if type(x) is np.ndarray and np.isfinite(x).all():
                return state.comm.agree(None)
        return state.comm.agree(super().divergence(problem, state, recorded))

    def _output_points(self, state) -> np.ndarray:
        """The per-agent points whose mean is the output (the iterates by default)."""
        return state.x

    def metrics(self, problem, state, with_reference: bool) -> dict:
        xbar = self.output(problem, state)
        out = evaluate_point(problem, xbar, with_reference)
        out["consensus_error"] = consensus_error(problem.manifold,
                                                 self._all_output_points(state), xbar)
        start = state.info.get("comm0", {"messages": 0, "bytes": 0})
        total = state.comm.total_stats()
        out["messages"] = int(total["messages"]) - start["messages"]
        out["bytes_sent"] = int(total["bytes"]) - start["bytes"]
        return out


# ---------------------------------------------------------------------------- the private step
@dataclass(frozen=True)
class PrivateGradient:
    """The private gradient step: minibatch -> clip -> mean -> noise -> ledger event.

    Each agent of a block draws ``batch_size`` of its records uniformly without replacement
    (its keyed stream ``(seed, agent, round, 'minibatch')``), clips to the PUBLIC bound
    ``clip``, averages, and adds Gaussian noise of the run's ``noise_std`` (keyed stream
    ``'noise'``); the round is then charged to the agents' ledgers. How the bound is enforced
    (``clipping``) fixes where the noise goes and the sensitivity the step states
    (:meth:`release`):

    * ``'per_sample'``: each per-sample Riemannian gradient clipped to norm ``C``; the noise is
      added in the tangent space to the clipped SUM (sensitivity ``2 C``), which is then divided
      by ``b`` (by ``q_i`` for the whole local data set; MUFFLIATO, DPDL, DP-DPSGD);
    * ``'per_coordinate'``: each orthonormal coordinate of each per-sample gradient clipped to
      ``C / sqrt(dim)`` (so its norm is ``<= C``); the noise is added to the coordinates of the
      MEAN (sensitivity ``2 C / b``; DO-ADP's Assumption 2);
    * ``'batch_mean'``: the minibatch's mean gradient clipped to norm ``C``, then noised
      (sensitivity ``2 C``; DP-CGA's batch-level clipping).

    Parameters
    ----------
    clip : float or None
        ``C > 0``, a public number (never read from the data). ``None``: no clipping, for a
        run without noise only (:meth:`release` refuses it).
    batch_size : int or None
        ``b`` records per release (``None``: the whole local data set; with
        ``'per_coordinate'`` it needs equal local sizes).
    clipping : {'per_sample', 'per_coordinate', 'batch_mean'}
    structured_sums : bool
        With ``'per_sample'`` clipping and a minibatch: compute each clipped sum by the
        problem's own :meth:`~rfed.problems.Problem.clipped_grad_sum` when its class has one
        (:func:`structured_clipping`, chosen once per problem class), without materialising the
        per-sample gradients: the fast path beside the readable clip-then-sum, kept equal to it
        (to rounding) by a test. Default True, so that every trainer clipping per sample through
        this step (DPDL, DP-DPSGD, Muffliato, a trainer of your own) gets the closed form of
        the linear models (:mod:`rfed.problems.outer_gradients`); False: the readable path.

    Examples
    --------
    In a :class:`PrivateAlgorithm`'s ``step``, every agent of the block releases, once per
    round (the draws are keyed by ``state.t``: the step returns ``state.advance(...)``)::

        g = self.gradient(problem, state)      # (n_local, *point_shape), charged to the ledger
    """

    clip: float | None
    batch_size: int | None = 1
    clipping: str = "per_sample"
    structured_sums: bool = True

    def __post_init__(self) -> None:
        clip = self.clip
        if clip is not None and (isinstance(clip, bool) or not isinstance(
                clip, (int, float, np.integer, np.floating)) or not (np.isfinite(clip)
                                                                     and clip > 0)):
            raise ValueError(f"argument 'clip' must be a finite number > 0 (a public bound), "
                             f"got {clip!r}")
        b = self.batch_size
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, np.integer))
                              or b < 1):
            raise ValueError(f"argument 'batch_size' must be an int >= 1 or None, got {b!r}")
        if self.clipping not in CLIPPINGS:
            raise ValueError(f"argument 'clipping' must be one of {CLIPPINGS}, got "
                             f"{self.clipping!r}")

    # ------------------------------------------------------------------ the statement
    def release(self, problem: Any, per_round: int | np.ndarray = 1) -> GaussianRelease:
        """The release one agent makes per round: its replace-one L2 sensitivity and sampling.

        Parameters
        ----------
        problem : Problem
        per_round : int or int array, shape ``(n_agents,)``
            Releases per active round on the one minibatch (e.g. DPDL's ``|N_i|``).

        Returns
        -------
        GaussianRelease
            Sensitivity ``2 C`` (``'per_sample'``, ``'batch_mean'``: one record moves one
            clipped summand, or the clipped mean, inside a ball of radius ``C``) or ``2 C / b``
            (``'per_coordinate'``: the noise is on the mean; ``b = n_max`` for the whole data).

        Raises
        ------
        ValueError
            Without a clip level (no sensitivity holds).
        """
        if self.clip is None:
            raise ValueError("a private release needs a public clip level: without clipping "
                             "no sensitivity holds")
        if self.clipping == "per_coordinate":
            sensitivity = 2.0 * self.clip / (self.batch_size or int(problem.n_max))
        else:
            sensitivity = 2.0 * self.clip
        return GaussianRelease(sensitivity, sample_size=self.batch_size, per_round=per_round)

    def assumptions(self) -> list[str]:
        """What the step's guarantee rests on, in words (a report's ``assumptions``).

        Returns
        -------
        list of str
        """
        bound = {"per_sample": "each per-sample gradient clipped to norm C",
                 "per_coordinate": "each coordinate of each per-sample gradient clipped to "
                                   "C/sqrt(d)",
                 "batch_mean": "the minibatch's mean gradient clipped to norm C"}[self.clipping]
        batch = ("the whole local data set, its size public" if self.batch_size is None
                 else f"a minibatch of b = {self.batch_size} records drawn without replacement,"
                      " secret")
        return [f"{bound}, C = {self.clip:g} (enforced; public)", batch]

    def check(self, problem: Any) -> None:
        """Refuse a problem this step cannot serve (``ValueError`` naming ``batch_size``).

        Parameters
        ----------
        problem : Problem
        """
        counts = np.asarray(problem.counts)
        if self.batch_size is not None and self.batch_size > counts.min():
            raise ValueError(f"argument 'batch_size' ({self.batch_size}) exceeds the smallest "
                             f"local data set ({counts.min()})")
        if (self.batch_size is None and self.clipping == "per_coordinate"
                and np.any(counts != problem.n_max)):
            raise ValueError("batch_size=None (full local gradients) needs equal local sizes")

    # ------------------------------------------------------------------ the step
    def __call__(self, problem: Any, state: PrivateState, rows: np.ndarray | None = None,
                 *, scratch: ScratchArrays | None = None) -> np.ndarray:
        """This round's noisy gradients of the block's agents at their iterates, charged.

        Parameters
        ----------
        problem : Problem
        state : PrivateState
            ``state.x`` the block's iterates; its seed, round, noise std and account are used.
        rows : int array, shape ``(A,)``, optional
            The block's rows (local indices) of the agents that release (default: every agent
            of the block, whose iterates are then handed to the problem read-only, not copied).
        scratch : ScratchArrays, optional
            The run's reused arrays for the step's temporaries (the same bits; see
            :meth:`noisy_values`).

        Returns
        -------
        array, shape ``(A, *point_shape)``
            Tangent vectors at ``state.x[rows]``: the noisy clipped means.

        Raises
        ------
        RuntimeError
            A round past the budget's planned rounds, or a second call in round ``state.t``
            (a step that called it twice, or returned a state that did not advance): its
            minibatch and noise would be the same draws again (before anything is drawn).
        ValueError
            A non-finite gradient (before anything is released).
        """
        if state.ledger is not None:
            if getattr(state.ledger, "rounds", -1) > state.t:
                raise RuntimeError(
                    f"{state.ledger.algorithm}: the private gradient was already released in "
                    f"round t={state.t}; its minibatch and noise are keyed by the round, so a "
                    "second release would repeat them: call it once per step and return "
                    "state.advance(...), which moves to the next round")
            state.ledger.check_can_step()
        agents = state.comm.agents
        if rows is None:
            ids, x = agents, _read_only(state.x)
        else:
            rows = np.asarray(rows)
            ids = rows if agents.size == state.comm.n_agents else agents[rows]
            x = state.x[rows]
        if ids.size == 0:
            out = np.zeros((0,) + state.x.shape[1:])
        else:
            block = None if is_secure(state.rng) else _streams_of(state.seed).block(ids)
            idx = self.minibatch(problem, ids, _keyed(state, block, "minibatch"))
            # the reused arrays go to this class's own noisy_values only (one a subclass
            # overrides keeps its signature)
            noise = _keyed(state, block, "noise")
            if scratch is not None and type(self).noisy_values is _OWN_NOISY_VALUES:
                out = self.noisy_values(problem, x, ids, idx, state.noise_std, noise,
                                        scratch=scratch)
            else:
                out = self.noisy_values(problem, x, ids, idx, state.noise_std, noise)
        self.charge(state, ids)
        return out

    def minibatch(self, problem: Any, agents: np.ndarray, draws: Any) -> np.ndarray:
        """Each agent's minibatch rows, ``(A, b)`` (all ``n_max`` rows for the whole data).

        Parameters
        ----------
        problem : Problem
        agents : int array, shape ``(A,)``
            Global ids.
        draws : keyed draws or Generator
            Each agent's ``'minibatch'`` stream.

        Returns
        -------
        int array, shape ``(A, b)``
        """
        if self.batch_size is None:
            return np.broadcast_to(np.arange(problem.n_max), (agents.size, problem.n_max))
        return sample_without_replacement(problem.counts[agents], self.batch_size, draws)

    def noisy_values(self, problem: Any, x: np.ndarray, owners: np.ndarray, idx: np.ndarray,
                     std: float, noise: Any, mask: np.ndarray | None = None, *,
                     scratch: ScratchArrays | None = None) -> np.ndarray:
        """Clip, average and noise the gradients of records ``idx`` of ``owners`` at ``x``.

        Parameters
        ----------
        problem : Problem
        x : array, shape ``(P, *point_shape)``
            The points the gradients are taken at (a model each; DPDL evaluates a neighbour's).
        owners : int array, shape ``(P,)``
            The agents whose records are read.
        idx : int array, shape ``(P, b)``
        std : float
            Noise std of one release (0: no noise).
        noise : keyed draws or Generator
            One noise stream per row.
        mask : bool array, shape ``(P, b)``, optional
            The entries of ``idx`` that were drawn (a Poisson minibatch padded to its largest
            size; ``'per_sample'`` clipping with a minibatch only): the others add nothing to
            the sum, which is still divided by the public ``b``. Default: every entry.
        scratch : ScratchArrays, optional
            The run's reused arrays: ``'per_coordinate'`` clipping on Euclidean space writes its
            clipped coordinates, and with noise their mean, into them (the same operations, so
            the same bits); the array returned is still a fresh one.

        Returns
        -------
        array, shape ``(P, *point_shape)``
            Tangent vectors at ``x``.
        """
        manifold = problem.manifold
        if mask is not None and (self.clipping != "per_sample" or self.batch_size is None):
            raise ValueError("argument 'mask' needs per-sample clipping and a minibatch")
        if (self.structured_sums and self.clipping == "per_sample" and self.clip is not None
                and self.batch_size is not None and structured_clipping(problem)):
            # the fast path: the same clipped sum, the per-sample gradients never materialised
            total, _ = problem.clipped_grad_sum(x, problem.batch(owners, idx), self.clip, mask)
            if not np.isfinite(total).all():
                raise ValueError("a clipped gradient sum is not finite (a per-sample gradient "
                                 "that is not finite cannot be clipped)")
            if std > 0:
                total = gaussian_mechanism(manifold, x, total, std, noise)
            return total / float(self.batch_size)
        grads = _per_sample_grads(problem, x, owners, idx, scratch)  # (P, b, *point_shape)
        k = len(manifold.point_shape)
        if self.clipping == "per_coordinate":
            if type(manifold) is Euclidean and type(grads) is np.ndarray \
                    and grads.dtype == np.float64:
                # Euclidean coordinates are the entries (to_coords is a reshaped copy; nothing
                # below writes into them, so the view gives the same values)
                coords = grads.reshape(grads.shape[:2] + (manifold.dim,))
            else:
                coords = manifold.to_coords(np.expand_dims(x, 1), grads)   # (P, b, dim)
            reuse = scratch if coords.dtype == np.float64 else None
            if self.clip is not None:
                coords, _ = clip_coordinates(
                    coords, self.clip / np.sqrt(manifold.dim), count_clipped=False,
                    out=None if reuse is None else reuse.take("clipped coordinates",
                                                              coords.shape))
            # np.mean's own arithmetic (numpy's _mean: add.reduce, then true_divide by the
            # count in place) without its argument handling; with noise the mean is read once
            # by the release (a fresh array), so it may be a reused one
            shape: tuple[int, ...] = coords.shape   # (P, b, dim)
            mean = np.add.reduce(coords, axis=1, out=None if reuse is None or std <= 0
                                 else reuse.take("mean coordinates", (shape[0], shape[2])))
            np.true_divide(mean, shape[1], out=mean)
            if std > 0:
                mean = gaussian_release(mean, std, noise)
            if type(manifold) is Euclidean:
                return mean.reshape(mean.shape[:1] + manifold.point_shape)
            return manifold.from_coords(x, mean)
        if self.clipping == "batch_mean":
            mean = grads.mean(axis=1)
            del grads
            if self.clip is not None:
                mean = clip_by_norm(manifold, x, mean[:, None], self.clip)[0][:, 0]
            return mean if std <= 0 else gaussian_mechanism(manifold, x, mean, std, noise)
        clipped = grads if self.clip is None else clip_by_norm(manifold, x, grads, self.clip)[0]
        del grads
        if mask is not None:
            clipped = scale_tangents(manifold, clipped, mask.astype(float))
        if self.batch_size is None:
            mask = problem.mask[owners]
            clipped = clipped * mask.reshape(mask.shape + (1,) * k)
            divisor: Any = problem.counts[owners].reshape((-1,) + (1,) * k).astype(float)
        else:
            divisor = float(self.batch_size)
        total = clipped.sum(axis=1)
        del clipped
        if std > 0:
            total = gaussian_mechanism(manifold, x, total, std, noise)
        return total / divisor

    def charge(self, state: PrivateState, agents: np.ndarray) -> None:
        """Charge this round's releases of ``agents`` (global ids) to the account.

        Parameters
        ----------
        state : PrivateState
        agents : int array
            This process's agents that released this round (every round is charged, with no
            agent too: the account counts the rounds).
        """
        if state.ledger is not None:
            released = np.zeros(state.ledger.counts.size, dtype=bool)
            released[agents] = True
            state.ledger.record_round(released)


#: The class's own :meth:`PrivateGradient.noisy_values` (the one that takes ``scratch=``).
_OWN_NOISY_VALUES = PrivateGradient.noisy_values


def _per_sample_grads(problem: Any, x: np.ndarray, owners: np.ndarray, idx: np.ndarray,
                      scratch: ScratchArrays | None) -> np.ndarray:
    """``problem.per_sample_grad(x, owners, idx)``, shape ``(P, b, *point_shape)``; with
    ``scratch`` and the base class's method, the records are gathered into the run's reused
    arrays (:meth:`rfed.problems.Problem.batch`'s ``out=``, the same values) and the gradients
    taken from them by the same :meth:`~rfed.problems.Problem.sample_rgrad`."""
    if (scratch is None or idx.size == 0
            or getattr(problem.per_sample_grad, "__func__", None) is not Problem.per_sample_grad):
        return problem.per_sample_grad(x, owners, idx)
    probe = problem.batch(owners[:1], idx[:1, :1])
    buffers = {key: scratch.take(f"records {key}", (idx.size,) + v.shape[2:], v.dtype)
               for key, v in probe.items()}
    return problem.sample_rgrad(np.asarray(x), problem.batch(owners, idx, out=buffers))


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the iterates handed to the problem in place of a copy: a
    problem that wrote into them would raise instead of changing the state)."""
    view = a.view()
    view.flags.writeable = False
    return view


def _keyed(state: PrivateState, block: Any, purpose: str) -> Any:
    """The keyed draws of ``block`` (an AgentBlock) for ``(round, purpose)``, or the run's
    generator in secure mode (OS randomness, no keyed streams)."""
    if block is None:
        return state.rng
    return KeyedDraws(_streams_of(state.seed), block, state.t, purpose)


# ---------------------------------------------------------------------------- the base class
class PrivateAlgorithm(DecentralizedAlgorithm):
    """A decentralized private algorithm on the public contract.

    A subclass states its release and writes its step::

        class NoisyGossipSGD(PrivateAlgorithm):
            def __init__(self, network, *, lr, clip, batch_size, **privacy):
                super().__init__(network, **privacy)
                # its statement is the algorithm's release (release() to state another)
                self.lr, self.gradient = lr, PrivateGradient(clip, batch_size)

            def step(self, problem, state):
                g = self.gradient(problem, state)
                ...
                return state.advance(x=...)

    :meth:`init` checks the network against the problem, broadcasts ``x0`` to the block, draws
    the run's seed, plans the noise (:func:`~rfed.algorithms.private.plan_noise` with
    :meth:`release`, :meth:`active_rounds` and, if the subclass has one, its paper's formula)
    and opens the account (:class:`~rfed.algorithms.private.GaussianAccount`); :meth:`privacy`
    reports, merged over the processes of a distributed engine.

    Parameters
    ----------
    network : Network
        Graph, mixing matrix and communicator.
    privacy : NoiseConfig, optional
        The noise. Or the keywords of :class:`~rfed.algorithms.private.NoiseConfig`
        (``budget=``, ``n_rounds=``, ``noise_multiplier=``, ``paper_epsilon=``, ``delta=``)
        and ``sigma=`` (the paper's noise parameter); ``epsilon=`` is refused, naming these.
    mixing : bool
        Check ``network.weights`` symmetric doubly stochastic and keep it as :attr:`weights`
        (frozen CSR); ``False`` for algorithms that draw their own matrices.

    Raises
    ------
    ValueError
        Under a budget of relation ``'add_remove_one'`` (:attr:`add_remove_refusal` says why),
        or an invalid noise configuration.
    """

    #: Why the algorithm's releases cannot be accounted under add/remove (``None``: they can).
    add_remove_refusal: ClassVar[str | None] = GAUSSIAN_REPLACE_ONE_ONLY
    #: The state class :meth:`init` builds (a subclass of :class:`PrivateState`).
    state_class: ClassVar[type] = PrivateState

    def __init__(self, network: Network, *, privacy: NoiseConfig | None = None,
                 mixing: bool = True, **noise: Any):
        if not isinstance(network, Network):
            raise TypeError(f"argument 'network' must be an rfed Network, got {network!r}")
        self.network = network
        if mixing:
            self.weights = check_mixing_matrix(network.weights, "network.weights")
        if noise.get("paper_epsilon") is not None and type(self).paper_std is None:
            raise TypeError(f"{type(self).__name__} got unexpected keyword argument "
                            "'paper_epsilon': it has no paper formula; use budget= (with "
                            "n_rounds=) or noise_multiplier=")
        self.noise = NoiseConfig.from_keywords(privacy, algorithm=type(self).__name__, **noise)
        self.noise.refuse_relation(self.name, self.add_remove_refusal)

    @property
    def n_rounds(self) -> int | None:
        """The planned rounds (the noise configuration's): the default of :meth:`run`."""
        return self._noise_config().n_rounds

    def _noise_config(self) -> NoiseConfig:
        """``self.noise``, or a ``TypeError`` saying why a subclass has none."""
        noise = self.__dict__.get("noise")
        if noise is None:
            raise TypeError(f"{type(self).__name__}.__init__ must call super().__init__(network, "
                            "**privacy): PrivateAlgorithm's takes the noise and the network")
        return noise

    # ------------------------------------------------------------------ what a subclass states
    def release(self, problem: Any) -> Release:
        """What one agent releases in each round it is active (its public sensitivity).

        Parameters
        ----------
        problem : Problem

        Returns
        -------
        Release
            By default the statement of the algorithm's :class:`PrivateGradient` (its attribute
            ``gradient``): one release per active round.
        """
        gradient = getattr(self, "gradient", None)
        if isinstance(gradient, PrivateGradient):
            return gradient.release(problem)
        raise NotImplementedError(f"{type(self).__name__} must state its release: define "
                                  "release(problem), or a PrivateGradient as self.gradient")

    def active_rounds(self, seed: int, n_agents: int, n_rounds: int) -> np.ndarray | None:
        """The rounds each agent will release in over ``n_rounds`` (``None``: every round).

        An algorithm with public activation (e.g. DO-ADP's) replays its schedule here; the
        budget is then calibrated for the most active agent.

        Parameters
        ----------
        seed : int
        n_agents, n_rounds : int

        Returns
        -------
        int array, shape ``(n_agents,)``, or None
        """
        return None

    def assumptions(self, problem: Any) -> list[str]:
        """What the guarantee rests on, in words (the report's ``assumptions``).

        Parameters
        ----------
        problem : Problem

        Returns
        -------
        list of str
            By default those of the algorithm's :class:`PrivateGradient` (its ``gradient``).
        """
        gradient = getattr(self, "gradient", None)
        return gradient.assumptions() if isinstance(gradient, PrivateGradient) else []

    def sigma_unit(self) -> float:
        """The unit of the paper's noise parameter (``sigma=``): its std is ``sigma`` times
        this (1 by default; the clip level for papers that scale by it).

        Returns
        -------
        float
        """
        return 1.0

    paper_std: Any = None
    """Optional: ``paper_std(problem, delta) -> float``, the paper's noise std for
    ``paper_epsilon=`` in units of :meth:`sigma_unit` (without it ``paper_epsilon=`` is
    refused)."""

    def paper_formula(self, problem: Any, plan: NoisePlan) -> Any:
        """The paper's closed form reported beside the certificate (``None``: no paper).

        Parameters
        ----------
        problem : Problem
        plan : NoisePlan

        Returns
        -------
        object with ``evaluate(rounds) -> dict``, or None
        """
        return None

    def start_fields(self, problem: Any, x: np.ndarray) -> dict[str, Any]:
        """The subclass's own fields of the initial state (none by default).

        Parameters
        ----------
        problem : Problem
        x : array, shape ``(n_local, *point_shape)``
            The initial iterates.

        Returns
        -------
        dict
        """
        return {}

    def accounted_sizes(self, problem: Any) -> np.ndarray:
        """The local sizes the plan and the account read (the true ones by default, public
        under replace-one; an algorithm that accepts add/remove returns the declared public
        sizes, :meth:`rfed.privacy.PrivacyBudget.public_counts`).

        Parameters
        ----------
        problem : Problem

        Returns
        -------
        int array, shape ``(n_agents,)``
        """
        return problem.counts

    def fast_path(self, problem: Any) -> str | None:
        """The name of a faster round for ``problem`` that gives the readable round's bits (e.g.
        ``'euclidean'``), chosen once at :meth:`init` and kept in the state's ``info``
        (``'fast_path'``), so a resumed run takes the same; ``None`` (default): the readable
        :meth:`step`.

        Parameters
        ----------
        problem : Problem

        Returns
        -------
        str or None
        """
        return None

    def check_problem(self, problem: Any) -> None:
        """Refuse a problem the algorithm cannot run on (``ValueError``): by default, one whose
        number of agents is not the network's, or whose local data sets are smaller than the
        private gradient's minibatch.

        Parameters
        ----------
        problem : Problem
        """
        if self.network.n_agents != problem.n_agents:
            raise ValueError(f"network has {self.network.n_agents} agents, problem has "
                             f"{problem.n_agents}")
        gradient = getattr(self, "gradient", None)
        if isinstance(gradient, PrivateGradient):
            gradient.check(problem)

    # ------------------------------------------------------------------ the plan and the run
    def plan(self, problem: Any, rng: Any, seed: int) -> NoisePlan | None:
        """The run's noise (``None`` without noise), once for all processes of the engine.

        Parameters
        ----------
        problem : Problem
        rng : Generator or SecureRandom
        seed : int
            The run's seed (public schedules replay from it).

        Returns
        -------
        NoisePlan or None
        """
        cfg = self.noise
        if cfg.mode is None:
            return None
        n = problem.n_agents
        paper = None
        if self.paper_std is not None:
            def paper(delta: float) -> float:
                return self.paper_std(problem, delta)
        return plan_noise(
            cfg, self.release(problem), local_sizes=self.accounted_sizes(problem),
            dim=problem.manifold.dim, rng=rng, comm=self.network.comm,
            sigma_unit=self.sigma_unit(), paper_std=paper,
            active_rounds=lambda: self.active_rounds(seed, n, int(cfg.n_rounds or 0)),
            algorithm=self.name)

    def account(self, problem: Any, plan: NoisePlan | None) -> GaussianAccount | None:
        """The run's account of ``plan`` (``None`` without noise).

        Parameters
        ----------
        problem : Problem
        plan : NoisePlan or None

        Returns
        -------
        GaussianAccount or None
        """
        if plan is None:
            return None
        release = self.release(problem)
        if not isinstance(release, GaussianRelease):
            raise TypeError(f"{type(self).__name__}.release returned a {type(release).__name__}"
                            "; its account is the algorithm's own (override account())")
        return GaussianAccount(plan=plan, release=release,
                               local_sizes=self.accounted_sizes(problem),
                               algorithm=self.name, assumptions=self.assumptions(problem),
                               paper=self.paper_formula(problem, plan))

    def init(self, problem: Any, x0: np.ndarray, rng: Any) -> Any:
        """The state before the first round (see the class docstring).

        Parameters
        ----------
        problem : Problem
        x0 : array, shape ``point_shape``
            The common public start.
        rng : Generator, int or SecureRandom

        Returns
        -------
        PrivateState
            Of :attr:`state_class`.
        """
        self._noise_config()
        self.check_problem(problem)
        comm = self.network.comm
        x = np.broadcast_to(x0, (comm.n_local,) + problem.manifold.point_shape).copy()
        rng = as_generator(rng)
        # minibatches and noise come from the agents' keyed streams of this seed
        seed = run_seed(rng)
        plan = self.plan(problem, rng, seed)
        info: dict[str, Any] = {"comm0": comm.total_stats()}
        fast = self.fast_path(problem)
        if fast is not None:
            info["fast_path"] = fast
        return self.state_class(t=0, x=x, rng=rng, comm=comm,
                                ledger=self.account(problem, plan), info=info, seed=seed,
                                noise_std=0.0 if plan is None else plan.std,
                                **self.start_fields(problem, x))

