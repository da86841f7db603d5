"""Leading eigenvector (PCA) on the sphere: PriRFed problem (6.1)."""

from __future__ import annotations

import numpy as np

from rfed.manifolds.sphere import Sphere
from rfed.problems.base import Problem, stack_agents

__all__ = ["SpherePCA"]


class SpherePCA(Problem):
    r"""Leading eigenvector of the pooled second-moment matrix, on the sphere.

    PriRFed (seed 004) problem (6.1), spec section 5.1:

    .. math:: f_{i,j}(x) = -x^T z_{i,j} z_{i,j}^T x, \qquad x \in S^d \subset \mathbb{R}^{d+1},

    so :math:`f(x) = -x^T C x` with :math:`C = \sum_{\text{all}} z z^T / \sum_l N_l` (second
    moments, no centring; ``p_i / N_i = 1 / sum N_l``) and the minimum is
    :math:`-\lambda_{\max}(C)`, attained at :math:`\pm v_{\max}`.

    Per-sample Riemannian gradient (spec 5.1):
    :math:`\mathrm{grad} f_{i,j}(x) = -2 (I - x x^T) z z^T x = -2 (z^T x)(z - (z^T x) x)`,
    with norm :math:`2 |z^T x| \sqrt{\|z\|^2 - (z^T x)^2} \le 2\|z\|^2`. The default clipping
    level is the paper's :math:`\tau = L_g = 2\theta`, :math:`\theta = \max_{i,j} \|z_{i,j}\|^2`
    (spec 5.1 and pitfall 16: it never activates, and it is computed from the private data, which
    the paper ignores).

    Parameters
    ----------
    z : array, shape ``(n_agents, n_max, d + 1)``
        The agents' samples (rows past ``counts[i]`` are padding).
    counts : array of int, shape ``(n_agents,)``, optional
        Valid rows per agent (default: all).
    gradient_bound : float, optional
        Override the default clipping level ``2 max ||z||^2``.
    """

    name = "sphere-pca"
    #: Minibatches may be evaluated as masks over all samples (two cheap passes, no gather).
    masked_batches = True

    def __init__(
        self,
        z: np.ndarray,
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
    ):
        z = np.asarray(z, dtype=float)
        if z.ndim != 3 or z.shape[-1] < 2:
            raise ValueError(
                f"SpherePCA: argument 'z' has shape {z.shape}; expected (n_agents, n_max, d + 1) "
                "with d + 1 >= 2"
            )
        # per-sample squared norms, gathered with every batch: clipping then needs no extra pass
        sq = np.einsum("anj,anj->an", z, z)
        super().__init__(Sphere(z.shape[-1] - 1), {"z": z, "sq": sq}, counts=counts)
        self.theta = float(np.max(np.where(self.mask, sq, 0.0)))
        if not self.theta > 0:
            raise ValueError("SpherePCA: argument 'z' is zero on every valid row")
        if gradient_bound is None:
            gradient_bound = 2.0 * self.theta
        elif not gradient_bound > 0:
            raise ValueError(f"argument 'gradient_bound' must be > 0, got {gradient_bound}")
        self.gradient_bound = float(gradient_bound)
        self.smoothness = 2.0 * self.theta

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
        """
        x = np.asarray(x, dtype=float)
        z = batch["z"]
        a = np.einsum("...bd,...d->...b", z, x)
        c = np.ones_like(a) if mask is None else mask.astype(float)
        n_clipped = np.zeros(a.shape[:-1], dtype=int)
        if bound is not None:
            # |z|^2 - a^2 = |(I - x x^T) z|^2 >= 0 up to rounding
            sq = batch["sq"] if "sq" in batch else np.einsum("...bd,...bd->...b", z, z)
            perp = np.maximum(sq - a * a, 0.0)
            norms = 2.0 * np.abs(a) * np.sqrt(perp)
            over = norms > bound
            c = c * np.where(over, bound / np.where(over, norms, 1.0), 1.0)
            n_clipped = np.sum(over if mask is None else over & mask, axis=-1)
        ca = c * a
        total = -2.0 * (np.einsum("...bd,...b->...d", z, ca) - np.sum(ca * a, -1)[..., None] * x)
        return total, n_clipped

    def sample_lipschitz(self) -> np.ndarray:
        r"""Exact per-sample gradient bounds :math:`\sup_x \|\mathrm{grad} f_{i,j}(x)\| =
        \|z_{i,j}\|^2`, one per valid sample, shape ``(n_samples,)``.

        With :math:`z^T x = \|z\| \cos\theta` the gradient norm is
        :math:`2 \|z\|^2 \cos\theta \sin\theta = \|z\|^2 \sin 2\theta`, maximal at
        :math:`\theta = \pi/4`; the paper's bound :math:`2\|z\|^2` (L440) is twice this.
        """
        return self.data["sq"][self.mask]

    def clip_level(self, rule: str | float) -> float:
        r"""A clipping level for the private trainers.

        Parameters
        ----------
        rule : "paper", "tight" or float in (0, 1)
            ``"paper"``: :math:`\tau = L_g = 2 \max \|z\|^2` (paper L445, spec 5.1; never
            activates). ``"tight"``: :math:`\max \|z\|^2`, the exact supremum of the per-sample
            gradient norms (:meth:`sample_lipschitz`): still never activates, half the paper's
            noise. A float ``q``: the ``q``-quantile of the per-sample bounds
            :math:`\|z_{i,j}\|^2` -- a DEVIATION from the paper (clipping then activates on the
            samples of large norm, which biases the gradient, and the level is read from the
            private data, as the paper's own maximum is, spec pitfall 16).

        Returns
        -------
        float
        """
        if isinstance(rule, str):
            if rule == "paper":
                return 2.0 * self.theta
            if rule == "tight":
                return self.theta
            raise ValueError(f"argument 'rule' must be 'paper', 'tight' or a float in (0, 1), "
                             f"got {rule!r}")
        q = float(rule)
        if not 0.0 < q < 1.0:
            raise ValueError(f"argument 'rule' as a quantile must be in (0, 1), got {rule!r}")
        return float(np.quantile(self.sample_lipschitz(), q))

    def covariance(self) -> np.ndarray:
        """The pooled second-moment matrix :math:`C = \\sum z z^T / \\sum_l N_l`, ``(d+1, d+1)``."""
        z = self.data["z"][self.mask]
        return z.T @ z / self.n_samples

    def _compute_reference(self) -> np.ndarray:
        """Closed form: the eigenvector of the largest eigenvalue of :meth:`covariance`."""
        _, v = np.linalg.eigh(self.covariance())
        top = v[:, -1]
        # fix the sign so that the reference is reproducible (the optimum is the pair +-v)
        return top * (1.0 if top[np.argmax(np.abs(top))] > 0 else -1.0)

    def distance_to_reference(self, x: np.ndarray) -> float:
        """Distance to the nearer of the two minimizers :math:`\\pm v_{\\max}`."""
        ref = self.reference_point()
        return float(min(self.manifold.dist(x, ref), self.manifold.dist(x, -ref)))

    @classmethod
    def from_arrays(cls, z: np.ndarray | list, **kwargs) -> SpherePCA:
        """Build from a list of per-agent arrays ``(N_i, d + 1)`` (padding added)."""
        z, counts = stack_agents(z, "z")
        return cls(z, counts=counts, **kwargs)
