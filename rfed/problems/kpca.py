"""k-PCA on the Stiefel or the Grassmann manifold: the top-k principal subspace."""

from __future__ import annotations

import numpy as np

from rfed._checks import numeric_array
from rfed.manifolds.grassmann import Grassmann, principal_angles
from rfed.manifolds.stiefel import Stiefel
from rfed.problems.base import Problem, stack_agents

__all__ = ["KPCA"]

_MANIFOLDS = ("grassmann", "stiefel")


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


class KPCA(Problem):
    r"""Top-k principal subspace of the pooled second-moment matrix, federated.

    .. math:: f_{i,j}(X) = -\mathrm{tr}(X^T z_{i,j} z_{i,j}^T X) = -\|X^T z_{i,j}\|^2,
              \qquad X \in \mathrm{St}(n, k) \text{ or } \mathrm{Gr}(n, k),

    so :math:`f(X) = -\mathrm{tr}(X^T C X)` with :math:`C = \sum_{\text{all}} z z^T /
    \sum_l N_l` (no centring, as :class:`~rfed.problems.SpherePCA`, which is the case k = 1).
    The minimum is minus the sum of the k largest eigenvalues of C, attained at (any orthonormal
    basis of) the span of their eigenvectors.

    Per-sample Riemannian gradient, with :math:`a = X^T z`: the Euclidean gradient
    :math:`-2 z a^T` has :math:`X^T G = -2 a a^T` symmetric, so the Stiefel projection
    :math:`G - X\,\mathrm{sym}(X^T G)` and the Grassmann projection :math:`(I - XX^T) G` agree:

    .. math:: \mathrm{grad} f_{i,j}(X) = -2 (z - X a) a^T, \qquad
              \|\mathrm{grad} f_{i,j}(X)\| = 2\|a\|\sqrt{\|z\|^2 - \|a\|^2} \le \|z\|^2,

    with equality when :math:`\|a\| = \|z\|/\sqrt2`.

    Privacy: the per-sample gradient bound is derived from a **public** bound on the data
    domain, ``norm_bound`` :math:`B \ge \|z\|` (asserted by the user, e.g. a property of the
    data's recipe or of a normalization), as :math:`B^2`; it is never computed from the data.
    The bound is enforced: a sample with :math:`\|z\| > B` is scaled to norm B at construction
    (so every per-sample gradient norm is at most :math:`B^2` whatever the data). Without
    ``norm_bound`` there is no ``gradient_bound`` and private trainers need an explicit clip.

    Parameters
    ----------
    z : array, shape ``(n_agents, n_max, n)``
        The agents' samples (rows past ``counts[i]`` are padding).
    k : int
        Subspace dimension, ``1 <= k < n``.
    manifold : {"grassmann", "stiefel"}
        ``Grassmann(n, k)`` (the cost depends on the span only) or ``Stiefel(n, k)``.
    counts : array of int, shape ``(n_agents,)``, optional
    norm_bound : float, optional
        Public bound :math:`B` on the sample norms.
    """

    name = "kpca"
    sorted_batches = True

    def __init__(
        self,
        z: np.ndarray,
        k: int,
        manifold: str = "grassmann",
        counts: np.ndarray | None = None,
        norm_bound: float | None = None,
    ):
        z = numeric_array(z, "z")
        if z.ndim != 3 or z.shape[-1] < 2:
            raise ValueError(
                f"KPCA: argument 'z' has shape {z.shape}; expected (n_agents, n_max, n), n >= 2"
            )
        n = z.shape[-1]
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= k < n:
            raise ValueError(f"KPCA: argument 'k' must be an int in [1, {n - 1}], got {k!r}")
        if manifold not in _MANIFOLDS:
            raise ValueError(
                f"KPCA: argument 'manifold' must be one of {_MANIFOLDS}, got {manifold!r}"
            )
        gradient_bound = None
        if norm_bound is not None:
            if isinstance(norm_bound, bool) or not float(norm_bound) > 0 or not np.isfinite(
                float(norm_bound)
            ):
                raise ValueError(
                    f"KPCA: argument 'norm_bound' must be a finite float > 0, got {norm_bound!r}"
                )
            norm_bound = float(norm_bound)
            norms = np.linalg.norm(z, axis=-1, keepdims=True)
            # enforce the asserted domain: rows beyond B are scaled onto the sphere of radius B
            z = z * np.minimum(1.0, norm_bound / np.where(norms > 0, norms, 1.0))
            gradient_bound = norm_bound**2
        geometry = Grassmann(n, int(k)) if manifold == "grassmann" else Stiefel(n, int(k))
        with np.errstate(over="ignore"):
            sq = np.einsum("anj,anj->an", z, z)
        if np.all(np.isfinite(z)) and not np.all(np.isfinite(sq)):
            raise ValueError("KPCA: argument 'z' has rows whose squared norm overflows "
                             f"(largest |entry| {np.max(np.abs(z)):.3g}); rescale the data")
        super().__init__(geometry, {"z": z, "sq": sq}, counts=counts,
                         gradient_bound=gradient_bound, arg_names={"z": "z", "sq": "z"})
        self.k = int(k)
        self.norm_bound = norm_bound

    # ---------------------------------------------------------------- losses and gradients
    def sample_loss(self, x, batch):
        a = batch["z"] @ np.asarray(x, dtype=float)  # (..., b, k)
        return -np.sum(a * a, axis=-1)

    def sample_rgrad(self, x, batch):
        x = np.asarray(x, dtype=float)
        z = batch["z"]
        a = z @ x  # (..., b, k)
        resid = z - a @ _mT(x)  # z - X a, (..., b, n)
        return -2.0 * resid[..., :, None] * a[..., None, :]

    def clipped_grad_sum(self, x, batch, bound, mask=None):
        r"""Clipped per-sample gradient sum without forming the ``(b, n, k)`` gradients.

        With :math:`A = Z X` (rows :math:`a_j`) and scales :math:`c_j`,
        :math:`\sum_j c_j\,(-2)(z_j - X a_j) a_j^T = -2\,(Z^T C A - X A^T C A)`,
        :math:`C = \mathrm{diag}(c)`; the norms :math:`2\|a_j\|\sqrt{\|z_j\|^2 - \|a_j\|^2}`
        decide the clipping.

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
        a = z @ x
        aa = np.sum(a * a, axis=-1)
        c = np.ones_like(aa) if mask is None else mask.astype(float)
        n_clipped = np.zeros(aa.shape[:-1], dtype=int)
        if bound is not None:
            sq = batch["sq"] if "sq" in batch else np.einsum("...bd,...bd->...b", z, z)
            norms = 2.0 * np.sqrt(aa * np.maximum(sq - aa, 0.0))
            over = norms > bound
            c = c * np.where(over, bound / np.where(over, norms, 1.0), 1.0)
            n_clipped = np.sum(over if mask is None else over & mask, axis=-1)
        ca = c[..., None] * a
        total = -2.0 * (_mT(z) @ ca - x @ (_mT(a) @ ca))
        return total, n_clipped

    def sample_lipschitz(self) -> np.ndarray:
        r"""Exact per-sample gradient bounds :math:`\sup_X \|\mathrm{grad} f_{i,j}(X)\| =
        \|z_{i,j}\|^2`, one per valid sample (read from the data: for analysis only, never a
        clip level of a private run; use ``gradient_bound``).

        Returns
        -------
        array, shape ``(n_samples,)``
        """
        return self.data["sq"][self.mask]

    # ---------------------------------------------------------------- reference
    def covariance(self) -> np.ndarray:
        """The pooled second-moment matrix :math:`C = \\sum z z^T / \\sum_l N_l`, ``(n, n)``.

        Returns
        -------
        array, shape ``(n, n)``
        """
        z = self.data["z"][self.mask]
        return z.T @ z / self.n_samples

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of :meth:`covariance`, descending, shape ``(n,)``.

        Returns
        -------
        array, shape ``(n,)``
        """
        return np.linalg.eigvalsh(self.covariance())[::-1]

    def _compute_reference(self) -> np.ndarray:
        """Closed form: the eigenvectors of the k largest eigenvalues (signs fixed), ``(n, k)``."""
        _, v = np.linalg.eigh(self.covariance())
        top = v[:, ::-1][:, : self.k]
        signs = np.sign(top[np.argmax(np.abs(top), axis=0), np.arange(self.k)])
        return top * np.where(signs == 0, 1.0, signs)

    def optimal_cost(self) -> float:
        """Minus the sum of the k largest eigenvalues of C (the closed-form minimum).

        Returns
        -------
        float
        """
        return float(-np.sum(self.eigenvalues()[: self.k]))

    def distance_to_reference(self, x: np.ndarray) -> float:
        """Subspace distance :math:`\\|\\Theta\\|_2` (principal angles) from span(x) to the optimal
        span; on Stiefel the minimizers are every orthonormal basis of that span.

        Parameters
        ----------
        x : array, shape ``(n, k)``
            One point of the Stiefel manifold.

        Returns
        -------
        float
        """
        return float(np.linalg.norm(principal_angles(np.asarray(x, float),
                                                     self.reference_point())))

    @classmethod
    def from_arrays(cls, z, k: int, **kwargs) -> KPCA:
        """Build from a list of per-agent arrays ``(N_i, n)`` (padding added).

        Parameters
        ----------
        z : list of array, shape ``(N_i, n)`` each
            Each agent's samples.
        k : int
            Number of principal components.
        **kwargs
            Further arguments of the constructor.

        Returns
        -------
        KPCA
        """
        z, counts = stack_agents(z, "z")
        return cls(z, k, counts=counts, **kwargs)
