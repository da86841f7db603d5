"""Noise mechanisms: the Gaussian mechanism on a tangent space and the Laplace mechanism.

Every function takes an explicit :class:`numpy.random.Generator` (or int seed). Seeded generators
are the default for research and tests: the same seed gives the same bits. For deployments,
:func:`secure_generator` returns a generator seeded from operating-system entropy.

Sources of the noise laws:

* Tangent Gaussian ``xi ~ N_x(0, sigma^2)``: PriRFed Def. 2.5 (specs/004_prirfed.md section 1.3),
  isotropic for the Riemannian metric, ``E ||xi||_x^2 = sigma^2 dim``; sampled by
  ``manifold.tangent_gaussian``.
* Laplace ``Lap(theta)``, density ``exp(-|x|/theta) / (2 theta)``, i.i.d. per coordinate, scale
  ``theta`` (DP-DGT Assumption 4, specs/003_dpdgt.md section 2.3), with the geometric schedule
  ``theta_k = theta_0 q^k`` of Corollary 5.14 (:class:`LaplaceSchedule`).
"""

from __future__ import annotations

import dataclasses
import secrets

import numpy as np

from rfed.manifolds.base import Manifold, as_generator
from rfed.privacy._checks import check_nonneg, check_nonneg_array, check_rate
from rfed.privacy._tangent import add, as_array, batch_shape, broadcast_batch

__all__ = [
    "gaussian_mechanism",
    "gaussian_release",
    "release_sensitivity",
    "laplace_noise",
    "laplace_mechanism",
    "LaplaceSchedule",
    "secure_generator",
]


def gaussian_mechanism(
    manifold: Manifold,
    x: np.ndarray,
    value: np.ndarray,
    sigma: float | np.ndarray,
    rng: np.random.Generator | int,
) -> np.ndarray:
    r"""Release ``value + xi`` with ``xi ~ N_x(0, sigma^2 I_dim)`` on :math:`T_x M`.

    Parameters
    ----------
    manifold : Manifold
    x : array, shape ``(*batch, *point_shape)``
        Base points; broadcast to the batch shape of ``value``.
    value : array, shape ``(*batch', *point_shape)``
        Tangent vectors at ``x`` (e.g. averaged clipped gradients, one per agent). For a
        tuple-valued ``Product``, ``x`` and ``value`` are tuples of blocks.
    sigma : float or array
        Noise standard deviation ``>= 0`` per intrinsic coordinate; an array broadcasts against
        the batch shape (one sigma per agent). It is ``noise_multiplier * sensitivity``.
    rng : Generator or int

    Returns
    -------
    array, shape of ``value``
    """
    sigma = check_nonneg_array(sigma, "sigma")
    value = as_array(manifold, value, "value")
    x = as_array(manifold, x, "x")
    batch = np.broadcast_shapes(batch_shape(manifold, x), batch_shape(manifold, value))
    xb = broadcast_batch(manifold, x, batch)
    return add(manifold, value, manifold.tangent_gaussian(xb, sigma, as_generator(rng)))


def gaussian_release(
    value: np.ndarray, sigma: float | np.ndarray, rng: np.random.Generator | int
) -> np.ndarray:
    """Release ``value + N(0, sigma^2)`` per coordinate of a flat (Euclidean) array.

    Parameters
    ----------
    value : array
    sigma : float or array
        Noise standard deviation ``>= 0``, broadcastable to ``value``.
    rng : Generator or int
    """
    sigma = check_nonneg_array(sigma, "sigma")
    value = np.asarray(value, dtype=float)
    return value + sigma * as_generator(rng).standard_normal(value.shape)


def release_sensitivity(
    sensitivity: float | np.ndarray, dim: int, rng: object, norm: str = "l2"
) -> float | np.ndarray:
    """The sensitivity a ledger must record for a release through this module's mechanisms.

    With a seeded :class:`numpy.random.Generator` the release adds continuous noise to the value
    itself, so the sensitivity is unchanged. ``dim`` (coordinates released) and ``norm``
    (``'l2'`` for Gaussian, ``'l1'`` for Laplace) matter for releases that round the value first.
    """
    if norm not in ("l2", "l1"):
        raise ValueError(f"argument 'norm' must be 'l2' or 'l1', got {norm!r}")
    return sensitivity


def laplace_noise(
    shape: int | tuple[int, ...], scale: float | np.ndarray, rng: np.random.Generator | int
) -> np.ndarray:
    """I.i.d. Laplace noise of the given ``shape`` and ``scale`` (``E x^2 = 2 scale^2``).

    Parameters
    ----------
    shape : int or tuple of int
    scale : float or array
        ``theta >= 0``; scalar or per-coordinate, broadcastable to ``shape``. Zero gives zeros.
    rng : Generator or int
    """
    scale = check_nonneg_array(scale, "scale")
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    try:
        fits = np.broadcast_shapes(scale.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"argument 'scale' of shape {scale.shape} must broadcast to shape {shape}")
    return as_generator(rng).laplace(0.0, 1.0, size=shape) * scale


def laplace_mechanism(
    value: np.ndarray, scale: float | np.ndarray, rng: np.random.Generator | int
) -> np.ndarray:
    """Release ``value + Lap(scale)`` per coordinate (noise multiplier = scale / L1 sensitivity)."""
    value = np.asarray(value, dtype=float)
    return value + laplace_noise(value.shape, scale, rng)


@dataclasses.dataclass(frozen=True)
class LaplaceSchedule:
    """Geometrically decaying Laplace scale ``theta_k = theta0 * q**k`` (DP-DGT Cor. 5.14, eq. 38).

    Parameters
    ----------
    theta0 : float
        Initial scale, ``>= 0`` (0 means no noise and infinite epsilon).
    q : float
        Decay factor in (0, 1]. DP-DGT needs ``q_step < q`` (step sizes decaying faster than the
        noise) for a finite epsilon; see :func:`rfed.privacy.papers.dpdgt_epsilon`.
    """

    theta0: float
    q: float

    def __post_init__(self):
        check_nonneg(self.theta0, "theta0")
        check_rate(self.q, "q")

    def scale(self, k: int | np.ndarray) -> float | np.ndarray:
        """``theta0 * q**k`` for iteration(s) ``k >= 0`` (vectorized)."""
        k_arr = np.asarray(k)
        if (
            not np.issubdtype(k_arr.dtype, np.number)
            or np.any(np.isnan(k_arr))
            or np.any(k_arr < 0)
        ):
            raise ValueError(f"argument 'k' must be >= 0, got {k!r}")
        out = self.theta0 * np.power(self.q, k_arr, dtype=float)
        return float(out) if np.ndim(out) == 0 else out

    def noise(
        self, k: int, shape: int | tuple[int, ...], rng: np.random.Generator | int
    ) -> np.ndarray:
        """Laplace noise of scale ``theta_k`` and the given shape."""
        return laplace_noise(shape, self.scale(k), rng)


def secure_generator() -> np.random.Generator:
    """A generator seeded from 256 bits of operating-system entropy (``secrets``).

    For deployments: the noise cannot be replayed from a seed stored with the run. It is not a
    cryptographic generator (numpy's PCG64 state can in principle be recovered from enough raw
    outputs), and floating-point noise samplers have known side channels (Mironov, CCS 2012);
    an adversarial deployment needs a cryptographic, discretized sampler. Research runs and tests
    keep seeded generators (``np.random.default_rng(seed)``), which rfed uses everywhere by default.
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(secrets.randbits(256))))
