"""Leading eigenvector (PCA) on the sphere: PriRFed problem (6.1)."""

from __future__ import annotations

import numpy as np

from rfed._checks import numeric_array
from rfed.manifolds.sphere import Sphere
from rfed.problems.base import Problem, stack_agents

__all__ = ["SpherePCA"]


class SpherePCA(Problem):
    r"""Leading eigenvector of the pooled second-moment matrix, on the sphere.

    PriRFed (Huang et al. 2024) problem (6.1), Sec. 6.1:

    .. math:: f_{i,j}(x) = -x^T z_{i,j} z_{i,j}^T x, \qquad x \in S^d \subset \mathbb{R}^{d+1},

    so :math:`f(x) = -x^T C x` with :math:`C = \sum_{\text{all}} z z^T / \sum_l N_l` (second
    moments, no centring; ``p_i / N_i = 1 / sum N_l``) and the minimum is
    :math:`-\lambda_{\max}(C)`, attained at :math:`\pm v_{\max}`.

    Per-sample Riemannian gradient (PriRFed Sec. 6.1):
    :math:`\mathrm{grad} f_{i,j}(x) = -2 (I - x x^T) z z^T x = -2 (z^T x)(z - (z^T x) x)`,
    with norm :math:`2 |z^T x| \sqrt{\|z\|^2 - (z^T x)^2} \le \|z\|^2`
    (:meth:`sample_lipschitz`; the paper's bound is :math:`2\|z\|^2`).

    Constants for clipping and step sizes are PUBLIC: they come from ``norm_bound``, a bound
    :math:`\|z\| \le B` that the user asserts about the data domain (e.g. ``sqrt(d + 1)`` for
    pixels in [0, 1]); the paper's :math:`\tau = L_g = 2\theta` with :math:`\theta = \max
    \|z\|^2` read from the private data (:ref:`prirfed-clip-level`) leaks through the noise scale
    and is not offered. The privacy of a run never rests on the assertion: the trainers clip every
    per-sample gradient to the clip level they are given.

    Parameters
    ----------
    z : array, shape ``(n_agents, n_max, d + 1)``
        The agents' samples (rows past ``counts[i]`` are padding).
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (default: all).
    norm_bound : float, optional
        Public bound :math:`B \ge \|z_{i,j}\|` asserted by the user; gives
        ``gradient_bound = B^2``, ``smoothness = 2 B^2`` and :meth:`clip_level`.
    gradient_bound : float, optional
        A public per-sample gradient bound (overrides the one from ``norm_bound``).
    """

    name = "sphere-pca"
    #: Random minibatches are gathered in row order, a cache-sized block of agents at a time
    #: (:class:`~rfed.problems.base.Problem`): the two products of :meth:`clipped_grad_sum` then
    #: read each block from the cache.
    sorted_batches = True

    def __init__(
        self,
        z: np.ndarray,
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
        *,
        norm_bound: float | None = None,
    ):
        z = numeric_array(z, "z")
        if z.ndim != 3 or z.shape[-1] < 2:
            raise ValueError(
                f"SpherePCA: argument 'z' has shape {z.shape}; expected (n_agents, n_max, d + 1) "
                "with d + 1 >= 2"
            )
        # per-sample squared norms, gathered with every batch: clipping then needs no extra pass
        with np.errstate(over="ignore"):
            sq = np.einsum("anj,anj->an", z, z)
        if np.all(np.isfinite(z)) and not np.all(np.isfinite(sq)):
            raise ValueError("SpherePCA: argument 'z' has rows whose squared norm overflows "
                             f"(largest |entry| {np.max(np.abs(z)):.3g}); rescale the data")
        super().__init__(Sphere(z.shape[-1] - 1), {"z": z, "sq": sq}, counts=counts,
                         arg_names={"z": "z", "sq": "z"})
        if self.n_agents and not np.any(np.where(self.mask, sq, 0.0) > 0):
            raise ValueError("SpherePCA: argument 'z' is zero on every valid row")
        if norm_bound is not None and not (float(norm_bound) > 0 and np.isfinite(norm_bound)):
            raise ValueError(f"argument 'norm_bound' must be a finite float > 0, got {norm_bound}")
        self.norm_bound = None if norm_bound is None else float(norm_bound)
        if gradient_bound is not None and not gradient_bound > 0:
            raise ValueError(f"argument 'gradient_bound' must be > 0, got {gradient_bound}")
        if gradient_bound is None and self.norm_bound is not None:
            gradient_bound = self.norm_bound**2
        self.gradient_bound = None if gradient_bound is None else float(gradient_bound)
        #: L_g = 2 B^2 (PriRFed Sec. 6.1), from the public bound only (None without it)
        self.smoothness = None if self.norm_bound is None else 2.0 * self.norm_bound**2
        self.privacy_assumptions = (
            () if self.norm_bound is None else
            (f"||z|| <= {self.norm_bound:g} asserted by the user (public data-domain bound, "
             "used for clip levels and step sizes; privacy rests on clipping, not on it)",))

    def sample_loss(self, x, batch):
        zx = np.einsum("...bd,...d->...b", batch["z"], x)
        return -(zx**2)

    def sample_rgrad(self, x, batch):
        z = batch["z"]
        zx = np.einsum("...bd,...d->...b", z, x)[..., None]
        return -2.0 * zx * (z - zx * np.expand_dims(x, -2))

    def clipped_grad_sum(self, x, batch, bound, mask=None):
        """Clipped per-sample gradient sum from two products with the data, ``Z x`` and ``Z^T w``.

        With :math:`a_j = z_j^T x` the gradients are :math:`-2 a_j (z_j - a_j x)`, of norm
        :math:`2 |a_j| \\sqrt{\\|z_j\\|^2 - a_j^2}`; for scales :math:`c_j` the clipped sum is
        :math:`-2 (Z^T (c a) - (\\sum_j c_j a_j^2) x)`, so no ``(b, d + 1)`` gradient array is
        formed.

        Parameters
        ----------
        x : array, shape ``(*lead, *point_shape)``
        batch : mapping of str to array, each of shape ``(*lead, b, ...)``
        bound : float or None
            Clipping level tau; ``None`` sums the raw gradients.
        mask : bool array, shape ``(*lead, b)``, optional
            Samples to include (padding rows are ``False``).

        Returns
        -------
        total : array, shape ``(*lead, *point_shape)``
        n_clipped : int array, shape ``lead``
            How many included samples had ``||g_j||_x > bound``.
        """
        x = np.asarray(x, dtype=float)
        z = batch["z"]
        # the two products by BLAS (one gemv per agent: 2-3x np.einsum's time on a cached
        # block, and each agent's values do not depend on the other agents of the call)
        a = np.matmul(z, x[..., None])[..., 0]
        # c: the weight of each summand; without a mask it is 1, and 1 * s is s exactly, so the
        # scales are used as they are
        c = None if mask is None else mask.astype(float)
        if bound is not None:
            # |z|^2 - a^2 = |(I - x x^T) z|^2 >= 0 up to rounding
            sq = batch["sq"] if "sq" in batch else np.einsum("...bd,...bd->...b", z, z)
            perp = np.maximum(sq - a * a, 0.0)
            norms = 2.0 * np.abs(a) * np.sqrt(perp)
            over = norms > bound
            scale = np.where(over, bound / np.where(over, norms, 1.0), 1.0)
            c = scale if c is None else c * scale
            n_clipped = (over if mask is None else over & mask).sum(-1)
        else:
            n_clipped = np.zeros(a.shape[:-1], dtype=int)
        ca = a if c is None else c * a
        # -2 (Z^T (c a) - (sum c a^2) x), in place: the same roundings, two fewer temporaries
        total = np.matmul(ca[..., None, :], z)[..., 0, :]
        total -= (ca * a).sum(-1)[..., None] * x
        total *= -2.0
        return total, n_clipped

    def sample_lipschitz(self) -> np.ndarray:
        r"""Exact per-sample gradient bounds :math:`\sup_x \|\mathrm{grad} f_{i,j}(x)\| =
        \|z_{i,j}\|^2`, one per valid sample, shape ``(n_samples,)`` (private: a diagnostic,
        never a clip level).

        With :math:`z^T x = \|z\| \cos\theta` the gradient norm is
        :math:`2 \|z\|^2 \cos\theta \sin\theta = \|z\|^2 \sin 2\theta`, maximal at
        :math:`\theta = \pi/4`; the paper's bound :math:`2\|z\|^2` (Sec. 6.1) is twice this.

        Returns
        -------
        array, shape ``(n_samples,)``
        """
        return self.data["sq"][self.mask]

    def clip_level(self, rule: str) -> float:
        r"""A public clipping level from ``norm_bound``.

        Parameters
        ----------
        rule : {"paper", "tight"}
            ``"paper"``: :math:`\tau = L_g = 2 B^2` (PriRFed Sec. 6.1 with the public ``B`` in place
            of the data's maximum; never activates when the assertion holds). ``"tight"``:
            :math:`B^2`, the supremum of the per-sample gradient norms (:meth:`sample_lipschitz`)
            under the assertion: half the paper's noise. Levels from quantiles of the private
            records are not offered (they leak); choose one on public data instead.

        Returns
        -------
        float
        """
        if rule not in ("paper", "tight"):
            raise ValueError(f"argument 'rule' must be 'paper' or 'tight', got {rule!r}")
        if self.norm_bound is None:
            raise ValueError(
                "SpherePCA.clip_level needs the public 'norm_bound' (a bound ||z|| <= B you "
                "assert on the data domain); the data's own maximum is private"
            )
        return (2.0 if rule == "paper" else 1.0) * self.norm_bound**2

    def covariance(self) -> np.ndarray:
        """The pooled second-moment matrix :math:`C = \\sum z z^T / \\sum_l N_l`, ``(d+1, d+1)``.

        Returns
        -------
        array, shape ``(d + 1, d + 1)``
        """
        z = self.data["z"]
        # every row valid: the records themselves, not a masked copy (hundreds of MiB on
        # Fashion-MNIST; the same rows in the same order, hence the same product)
        z = z.reshape(-1, z.shape[-1]) if self.mask.all() else z[self.mask]
        return z.T @ z / self.n_samples

    def _compute_reference(self) -> np.ndarray:
        """Closed form: the eigenvector of the largest eigenvalue of :meth:`covariance`."""
        _, v = np.linalg.eigh(self.covariance())
        top = v[:, -1]
        # fix the sign so that the reference is reproducible (the optimum is the pair +-v)
        return top * (1.0 if top[np.argmax(np.abs(top))] > 0 else -1.0)

    def distance_to_reference(self, x: np.ndarray) -> float:
        """Distance to the nearer of the two minimizers :math:`\\pm v_{\\max}`.

        Parameters
        ----------
        x : array, shape ``(d + 1,)``
            One point of the sphere.

        Returns
        -------
        float
        """
        ref = self.reference_point()
        return float(min(self.manifold.dist(x, ref), self.manifold.dist(x, -ref)))

    @classmethod
    def from_arrays(cls, z: np.ndarray | list, **kwargs) -> SpherePCA:
        """Build from a list of per-agent arrays ``(N_i, d + 1)`` (padding added).

        Parameters
        ----------
        z : list of ndarray, shapes ``(N_i, d + 1)``
            Each agent's records.
        **kwargs
            Passed to :class:`SpherePCA`.

        Returns
        -------
        SpherePCA
        """
        z, counts = stack_agents(z, "z")
        return cls(z, counts=counts, **kwargs)
