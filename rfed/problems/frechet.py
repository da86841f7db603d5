"""Frechet (Karcher) mean of SPD matrices: PriRFed problem (6.2)."""

from __future__ import annotations

import numpy as np

from rfed._checks import numeric_array
from rfed.manifolds import Manifold
from rfed.problems.base import Problem, stack_agents

__all__ = ["FrechetMean", "SPDFrechetMean"]


class FrechetMean(Problem):
    r"""Frechet mean on any manifold: :math:`f_{i,j}(x) = \mathrm{dist}^2(x, a_{i,j})`.

    PriRFed (Huang et al. 2024) problem (6.2), Sec. 6.2, written for a general manifold (the
    paper's case is :class:`SPDFrechetMean`). The per-sample Riemannian gradient is
    :math:`\mathrm{grad} f_{i,j}(x) = -2\,\mathrm{Log}_x(a_{i,j})` (PriRFed Sec. 6.2; the
    constant 2 comes from differentiating the square), of norm :math:`2\,\mathrm{dist}(x, a)`.
    The minimizer of the pooled objective is the Karcher mean of all samples.

    Parameters
    ----------
    manifold : Manifold
    points : array, shape ``(n_agents, n_max, *point_shape)``
        The agents' samples (each valid row is checked to lie on the manifold).
    counts : array of int, shape ``(n_agents,)``, optional
    gradient_bound : float, optional
        Clipping level (the paper uses tau = 1.0 on SPD, Sec. 6.2). There is no data-free
        global bound: the gradient norm grows with the distance to the samples.
    evaluate_grad_norm : bool, default True
        False: a run's recorded rounds hold the cost (and excess risk, distance) but not the
        gradient norm, and :meth:`cost` needs only the distances, which on SPD come from
        singular values alone (about 0.45x the time of the logs' eigendecompositions).
    """

    name = "frechet-mean"
    _caches = ("_evaluated",)
    #: bytes of evaluations kept by (agents, x): the start of the repetitions of a setting is
    #: the start of the same repetitions of the other settings, a few hundred evaluations apart
    _EVALUATIONS_BYTES = 64 * 2**20

    def __init__(
        self,
        manifold: Manifold,
        points: np.ndarray,
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
        evaluate_grad_norm: bool = True,
    ):
        if not isinstance(evaluate_grad_norm, (bool, np.bool_)):
            raise ValueError(f"{type(self).__name__}: argument 'evaluate_grad_norm' must be a "
                             f"bool, got {evaluate_grad_norm!r}")
        self.evaluate_grad_norm = bool(evaluate_grad_norm)
        points = numeric_array(points, "points")
        k = len(getattr(manifold, "point_shape", ()))
        if points.ndim != 2 + k:
            raise ValueError(
                f"{type(self).__name__}: argument 'points' has shape {points.shape}; expected "
                f"(n_agents, n_max, {', '.join(map(str, manifold.point_shape))})"
            )
        super().__init__(manifold, {"a": points}, counts=counts, gradient_bound=gradient_bound,
                         arg_names={"a": "points"})
        manifold.check_point(points[self.mask], "points")
        self._evaluated: dict | None = None  # (what, agents, x) -> local costs [, grads]
        if not self.mask.all():
            # padding rows must be valid points for the batched geometry: repeat row 0
            pad = self.mask.reshape(self.mask.shape + (1,) * k)
            self.data["a"] = np.where(pad, points, points[:, :1])

    def sample_loss(self, x, batch):
        k = len(self.manifold.point_shape)
        return self.manifold.dist(np.expand_dims(x, -1 - k), batch["a"]) ** 2

    def sample_rgrad(self, x, batch):
        k = len(self.manifold.point_shape)
        return -2.0 * self.manifold.log(np.expand_dims(x, -1 - k), batch["a"])

    def _local_cost_and_grad(self, x, agents):
        """``(local_cost, local_grad)`` of ``agents`` at ``x`` from one factorization per pair
        (the manifold's ``log_dist_eigh`` where it has one, else ``log_dist``).

        These serve evaluations only (cost, gradient norm), never the iterates. The last
        answers (up to :attr:`_EVALUATIONS_BYTES`) are kept by (agents, x), so that a cost and
        a gradient norm at one point, and the common start of the settings of a repetition,
        factorize once.
        """
        def compute(xe, data, mask, count):
            log, d = self._log_dist(xe, data)
            k = len(self.manifold.point_shape)
            m = mask.reshape(mask.shape + (1,) * k)
            cost = np.sum(np.where(mask, d**2, 0.0), axis=-1) / count
            if mask.all() and log.flags.c_contiguous:
                # sum(-2 log) = -2 sum(log) bit for bit (doubling is exact, and so is every
                # partial sum's), one pass over the stack of logs instead of three
                grad = np.sum(log, axis=1)
                grad *= -2.0
            else:
                grad = np.sum(np.where(m, -2.0 * log, 0.0), axis=1)
            grad /= count.reshape((-1,) + (1,) * k)
            return cost, grad

        cost, grad = self._kept_evaluation("cost and grad", x, agents, compute)
        return cost.copy(), grad.copy()

    def _kept_evaluation(self, what, x, agents, compute):
        """``compute(x_expanded, data, mask, counts)`` for ``agents`` at ``x``, kept by
        ``(what, agents, x)``: the last answers up to :attr:`_EVALUATIONS_BYTES`."""
        agents, data, mask = self._all(agents)
        k = len(self.manifold.point_shape)
        x = np.asarray(x, dtype=float)
        xb = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        key = (what, agents.tobytes(), xb.tobytes())
        if self._evaluated is None:
            self._evaluated = {}
        if key not in self._evaluated:
            # one point for every agent: factor its frame once (broadcasting it against the
            # samples gives the bits of one copy per agent)
            xe = x.reshape((1, 1) + x.shape) if x.ndim == k else np.expand_dims(xb, -1 - k)
            value = compute(xe, data, mask, self.counts[agents])
            self._evaluated[key] = value
            size = sum(v.nbytes for v in (value if isinstance(value, tuple) else (value,)))
            size += len(key[1]) + len(key[2])
            while len(self._evaluated) > 1 and size * len(self._evaluated) > \
                    self._EVALUATIONS_BYTES:
                del self._evaluated[next(iter(self._evaluated))]   # the oldest
        return self._evaluated[key]

    def _log_dist(self, x, data):
        """Per-sample ``(log, dist)`` at ``x`` for an evaluation."""
        log_dist = getattr(self.manifold, "log_dist_eigh", self.manifold.log_dist)
        return log_dist(x, data["a"])

    def _dist(self, x, data):
        """Per-sample distances at ``x`` for a cost-only evaluation."""
        return self.manifold.dist(x, data["a"])

    def _local_cost_only(self, x, agents):
        """``local_cost`` from the distances alone, kept like :meth:`_local_cost_and_grad`'s."""
        def compute(xe, data, mask, count):
            return np.sum(np.where(mask, self._dist(xe, data) ** 2, 0.0), axis=-1) / count

        return self._kept_evaluation("cost", x, agents, compute).copy()

    def local_cost(self, x, agents=None):
        if not hasattr(self.manifold, "log_dist"):
            return super().local_cost(x, agents)
        if not self.evaluate_grad_norm:
            return self._local_cost_only(x, agents)
        return self._local_cost_and_grad(x, agents)[0]

    def local_grad(self, x, agents=None):
        if not hasattr(self.manifold, "log_dist"):
            return super().local_grad(x, agents)
        return self._local_cost_and_grad(x, agents)[1]

    def pooled_points(self) -> np.ndarray:
        """All valid samples, shape ``(n_samples, *point_shape)``.

        Returns
        -------
        array, shape ``(n_samples, *point_shape)``
        """
        return self.data["a"][self.mask]

    def _compute_reference(self) -> np.ndarray:
        """Karcher mean of all samples (the pooled minimizer), to a gradient norm of 1e-13."""
        pts = self.pooled_points()
        return self.manifold.mean(pts, tol=1e-13, max_iter=10_000, init=pts[0])

    @classmethod
    def from_arrays(cls, manifold: Manifold, points, **kwargs):
        """Build from a list of per-agent arrays ``(N_i, *point_shape)`` (padding added).

        Parameters
        ----------
        manifold : Manifold
            The manifold of the points.
        points : list of array, shape ``(N_i, *point_shape)`` each
            Each agent's points.
        **kwargs
            Further arguments of the constructor.

        Returns
        -------
        FrechetMean
        """
        pts, counts = stack_agents(points, "points")
        return cls(manifold, pts, counts=counts, **kwargs)


class SPDFrechetMean(FrechetMean):
    r"""Frechet mean of SPD matrices under the affine-invariant metric (PriRFed problem (6.2)).

    :math:`f_{i,j}(X) = \|\mathrm{logm}(X^{-1/2} A_{i,j} X^{-1/2})\|_F^2 = \mathrm{dist}^2(X, A)`,
    gradient :math:`-2\,\mathrm{Log}_X(A) = -2 X^{1/2} \mathrm{logm}(X^{-1/2} A X^{-1/2}) X^{1/2}`
    (PriRFed Sec. 6.2).

    Parameters
    ----------
    points : array, shape ``(n_agents, n_max, n, n)``
    counts, gradient_bound, evaluate_grad_norm
        As in :class:`FrechetMean`.
    """

    name = "spd-frechet-mean"

    def __init__(self, points, counts=None, gradient_bound=None, evaluate_grad_norm=True):
        from rfed.manifolds import SPD

        points = numeric_array(points, "points")
        if points.ndim != 4 or points.shape[-1] != points.shape[-2]:
            raise ValueError(
                f"SPDFrechetMean: argument 'points' has shape {points.shape}; expected "
                "(n_agents, n_max, n, n)"
            )
        super().__init__(SPD(points.shape[-1]), points, counts=counts,
                         gradient_bound=gradient_bound, evaluate_grad_norm=evaluate_grad_norm)
        # the Cholesky factor of every sample, once: every log and evaluation needs it (a
        # batch gathers it with the samples; the same bits as factorizing each time)
        self.data["chol"] = np.linalg.cholesky(self.data["a"])

    def sample_rgrad(self, x, batch):
        # one eigh per pair instead of the pencil's SVD (SPD.log_eigh: the same map, ~1.6x
        # faster for 9 x 9; badly conditioned pairs still go through the pencil)
        return -2.0 * self.manifold.log_eigh(np.expand_dims(np.asarray(x, dtype=float), -3),
                                             batch["a"], batch.get("chol"))

    def _log_dist(self, x, data):
        return self.manifold.log_dist_eigh(x, data["a"], data.get("chol"))

    def _dist(self, x, data):
        return self.manifold.dist_eigvalsh(x, data["a"], data.get("chol"))

    @classmethod
    def from_arrays(cls, points, **kwargs):
        """Build from a list of per-agent arrays ``(N_i, n, n)`` (padding added).

        Parameters
        ----------
        points : list of array, shape ``(N_i, n, n)`` each
            Each agent's SPD matrices.
        **kwargs
            Further arguments of the constructor.

        Returns
        -------
        SPDFrechetMean
        """
        pts, counts = stack_agents(points, "points")
        return cls(pts, counts=counts, **kwargs)
