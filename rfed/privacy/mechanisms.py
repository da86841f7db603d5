"""Noise mechanisms: the Gaussian mechanism on a tangent space and the Laplace mechanism.

Every function takes an explicit random source ``rng``:

* a :class:`numpy.random.Generator` (or int seed): research mode. The noise is drawn in floating
  point and the run can be replayed from its seed. Floating-point noise leaks through the set
  of representable outputs (Mironov 2012), so research runs are not for deployment.
* a :class:`rfed.privacy.secure.SecureRandom` (:func:`secure_generator`,
  ``make_generator(secure=True)``): secure mode. Randomness comes from the OS CSPRNG and the
  release is discrete: the value is rounded to the grid ``rng.grid * Z`` and an integer number
  of grid steps drawn from the discrete Gaussian (Laplace) of Canonne, Kamath and Steinke 2020 is
  added (:func:`rfed.privacy.secure.grid_release`; its docstring says what is exact). Tangent
  vectors are released in orthonormal tangent coordinates, where the Riemannian norm is the
  coordinate L2 norm. Rounding inflates the sensitivity the ledger must record:
  :func:`release_sensitivity`.

Contract for the algorithms: noise a value with :func:`gaussian_mechanism` (tangent vectors),
:func:`gaussian_release` (flat arrays; :class:`GaussianNoise` when a run releases with one
standard deviation every round) or :func:`laplace_mechanism`, and record in the ledger
``release_sensitivity(sensitivity, dim, rng)``; never add bare noise to a value yourself
(:func:`laplace_noise` refuses a secure ``rng``).

Sources of the noise laws:

* Tangent Gaussian ``xi ~ N_x(0, sigma^2)``: PriRFed Def. 2.5 (:ref:`prirfed-tangent-gaussian`),
  isotropic for the Riemannian metric, ``E ||xi||_x^2 = sigma^2 dim``; sampled by
  ``manifold.tangent_gaussian``.
* Laplace ``Lap(theta)``, density ``exp(-|x|/theta) / (2 theta)``, i.i.d. per coordinate, scale
  ``theta`` (DP-DGT Assumption 4, :ref:`dpdgt-noise`), with the geometric schedule
  ``theta_k = theta_0 q^k`` of Corollary 5.14 (:class:`LaplaceSchedule`).

References
----------
* Zhenwei Huang, Wen Huang, Pratik Jawanpuria and Bamdev Mishra. Federated Learning on
  Riemannian Manifolds with Differential Privacy. arXiv preprint arXiv:2404.10029, 2024.
* Clement L. Canonne, Gautam Kamath and Thomas Steinke. The Discrete Gaussian for Differential
  Privacy. Advances in Neural Information Processing Systems 33 (NeurIPS), 2020.
  arXiv:2004.00010.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rfed.manifolds.base import Manifold, as_generator
from rfed.privacy._checks import (
    check_choice,
    check_int,
    check_nonneg,
    check_nonneg_array,
    check_rate,
)
from rfed.privacy._tangent import add, as_array, batch_shape, broadcast_batch
from rfed.privacy.clipping import _check_finite
from rfed.privacy.secure import SecureModeError, SecureRandom, grid_release, is_secure

__all__ = [
    "GaussianNoise",
    "gaussian_mechanism",
    "gaussian_release",
    "laplace_noise",
    "laplace_mechanism",
    "LaplaceSchedule",
    "release_sensitivity",
    "secure_generator",
]


def gaussian_mechanism(
    manifold: Manifold,
    x: np.ndarray,
    value: np.ndarray,
    sigma: float | np.ndarray,
    rng: np.random.Generator | SecureRandom | int,
) -> np.ndarray:
    r"""Release ``value + xi`` with ``xi ~ N_x(0, sigma^2 I_dim)`` on :math:`T_x M`.

    Secure mode (``rng`` a :class:`~rfed.privacy.secure.SecureRandom`): ``c = to_coords(x,
    value)`` (orthonormal coordinates, ``|c|_2 = |value|_x``), ``c~ = grid_release(c, sigma)``
    (grid rounding plus discrete Gaussian steps per coordinate), returned as ``from_coords(x,
    c~)`` (post-processing). Record ``release_sensitivity(sensitivity, manifold.dim, rng)``.

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
    rng : Generator, int or SecureRandom

    Returns
    -------
    array, shape of ``value``
    """
    sigma = check_nonneg_array(sigma, "sigma")
    if (isinstance(rng, np.random.Generator)
            and type(value) is np.ndarray and type(x) is np.ndarray
            and value.shape == x.shape and value.dtype == x.dtype == np.float64
            and value.shape[value.ndim - len(manifold.point_shape):] == manifold.point_shape
            and not getattr(rng, "is_keyed_draws", False)):
        # a trainer's step (float arrays of one batch shape, its block's generator): the
        # general path below without its conversions and broadcasts, the same checks first
        if not np.isfinite(value).all():
            _check_finite(manifold, value, "value")
        noise = manifold.tangent_gaussian(x, sigma, rng)
        if (type(noise) is np.ndarray and noise.base is None and noise.flags.writeable
                and noise.shape == value.shape and noise.dtype == np.float64
                and not np.may_share_memory(noise, value)
                and not np.may_share_memory(noise, x)):
            # the noise array is the release's own: the sum written into it (addition
            # commutes exactly, so these are the bits of value + noise) spares a fresh array
            return np.add(noise, value, out=noise)
        return value + noise
    value = as_array(manifold, value, "value")
    x = as_array(manifold, x, "x")
    _check_finite(manifold, value, "value")
    batch = np.broadcast_shapes(batch_shape(manifold, x), batch_shape(manifold, value))
    xb = broadcast_batch(manifold, x, batch)
    if is_secure(rng):
        coords = manifold.to_coords(xb, broadcast_batch(manifold, value, batch))
        try:
            scale = np.broadcast_to(sigma, batch)[..., None]
        except ValueError:
            raise ValueError(f"argument 'sigma' of shape {sigma.shape} must broadcast to the "
                             f"batch shape {batch}") from None
        return manifold.from_coords(xb, grid_release(coords, scale, rng, name="value"))
    if getattr(rng, "is_keyed_draws", False):
        # keyed per-agent draws: N(0, sigma^2) in orthonormal tangent coordinates, which is the
        # isotropic tangent Gaussian (the metric is the coordinate L2 norm there)
        z = _draws(rng).standard_normal(batch + (manifold.dim,))
        scale = np.broadcast_to(sigma, batch)[..., None]
        return add(manifold, value, manifold.from_coords(xb, scale * z))
    return add(manifold, value, manifold.tangent_gaussian(xb, sigma, as_generator(rng)))


def gaussian_release(
    value: np.ndarray, sigma: float | np.ndarray, rng: np.random.Generator | SecureRandom | int
) -> np.ndarray:
    """Release ``value + N(0, sigma^2)`` per coordinate of a flat (Euclidean) array.

    Parameters
    ----------
    value : array, any shape
        Finite.
    sigma : float or array
        ``>= 0``, broadcastable to ``value`` (one per coordinate, per agent, ...).
    rng : Generator, int or SecureRandom
        Secure mode: ``value`` is rounded to ``rng.grid`` and discrete Gaussian grid steps are
        added (:func:`rfed.privacy.secure.grid_release`); record
        ``release_sensitivity(sensitivity, value_dim, rng)``.

    Returns
    -------
    array, shape of ``value``
    """
    sigma = check_nonneg_array(sigma, "sigma")
    value = _finite(value, "value")
    if sigma.ndim:  # a scalar broadcasts to any value
        try:
            np.broadcast_to(sigma, value.shape)
        except ValueError:
            raise ValueError(f"argument 'sigma' of shape {sigma.shape} must broadcast to "
                             f"argument 'value' of shape {value.shape}") from None
    if is_secure(rng):
        return grid_release(value, sigma, rng, "gaussian", name="value")
    noise = _draws(rng).standard_normal(value.shape)
    # a scalar std as a float: the same product, without a 0-d array operand's overhead
    scale = float(sigma) if sigma.ndim == 0 else sigma
    if (type(noise) is np.ndarray and noise.dtype == np.float64 and noise.flags.writeable
            and noise.flags.c_contiguous and noise.shape == value.shape
            and np.ndim(scale) <= noise.ndim):
        # value + sigma z into the fresh draws' array: the same products and sums, without
        # two more arrays of the value's size
        np.multiply(noise, scale, out=noise)
        return np.add(value, noise, out=noise)
    return value + scale * noise


@dataclasses.dataclass(frozen=True)
class GaussianNoise:
    """:func:`gaussian_release` with its standard deviation checked once, for a run's loop.

    A run that adds the same noise to one value per round (centralized DP-SGD's noisy mean)
    checks ``sigma`` when the run starts, here, and each :meth:`release` then costs the draw,
    one product and one sum: the same floats as ``gaussian_release(value, sigma, rng)`` from
    the same generator, which every other source (a seed, secure mode, keyed draws) still goes
    through.

    Parameters
    ----------
    sigma : float
        The noise standard deviation per coordinate, finite and ``>= 0``
        (``noise_multiplier * sensitivity``).

    Raises
    ------
    ValueError
        ``sigma`` negative, NaN or infinite; TypeError: not a real number (each naming
        ``sigma``).
    """

    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_nonneg(self.sigma, "sigma"))

    def release(self, value: np.ndarray,
                rng: np.random.Generator | SecureRandom | int) -> np.ndarray:
        """Release ``value + N(0, sigma^2)`` per coordinate (:func:`gaussian_release`).

        Parameters
        ----------
        value : array, any shape
            Finite (checked at every release: it is computed from the data).
        rng : Generator, int or SecureRandom
            The run's source (secure mode: :func:`gaussian_release`'s discrete release).

        Returns
        -------
        array, shape of ``value``
        """
        if (type(rng) is np.random.Generator and type(value) is np.ndarray
                and value.dtype == np.float64 and value.ndim):
            # (counting the finite entries: np.all's fixed cost is several times the count's)
            if np.count_nonzero(np.isfinite(value)) != value.size:
                raise ValueError("argument 'value' contains NaN or inf")
            # gaussian_release's research path: the same draws, products and sums (in place)
            noise = rng.standard_normal(value.shape)
            noise *= self.sigma
            noise += value
            return noise
        return gaussian_release(value, self.sigma, rng)


def release_sensitivity(
    sensitivity: float | np.ndarray, dim: int, rng: Any, norm: str = "l2"
) -> float | np.ndarray:
    """The sensitivity the ledger must record for a release through this module.

    Research mode (a numpy Generator or seed): ``sensitivity`` unchanged. Secure mode: the grid
    rounding moves each of the ``dim`` released coordinates by at most ``grid / 2``, so between
    neighbours the rounded value moves by at most ``sensitivity + grid * sqrt(dim)`` (L2) or
    ``sensitivity + grid * dim`` (L1); with an integer shift, the discrete Gaussian's Renyi
    divergence is at most the continuous one's (Canonne, Kamath, Steinke 2020), so an RDP
    accountant (``method='rdp'``) may treat the release as a Gaussian event of this sensitivity;
    a Laplace release's privacy loss is at most ``sensitivity_l1 / scale`` (pure DP), as for the
    continuous Laplace. The PLD accountant models the continuous Gaussian's privacy loss
    distribution, which that result does not cover: account secure Gaussian releases with RDP.

    Not included: the floating-point error of computing the value itself (clipping, the tangent
    coordinates ``to_coords``), a relative ``1e-15`` or so of the value's norm, which is far below
    the grid term for values of norm below ``grid * 1e14`` (about 100 at the default grid).

    Parameters
    ----------
    sensitivity : float or array
        L2 (or L1) sensitivity of the value before rounding, ``>= 0``.
    dim : int
        Number of released coordinates (``manifold.dim`` for :func:`gaussian_mechanism`, the
        size of one agent's value for :func:`gaussian_release` / :func:`laplace_mechanism`).
    rng : Generator, int or SecureRandom
        The source the release uses.
    norm : {'l2', 'l1'}
        ``'l2'`` for the Gaussian mechanisms, ``'l1'`` for the Laplace mechanism.

    Returns
    -------
    float or ndarray
        The sensitivity to record, of the shape of ``sensitivity`` (a float for a scalar).
    """
    sens = check_nonneg_array(sensitivity, "sensitivity")
    dim = check_int(dim, "dim")
    check_choice(norm, "norm", ("l2", "l1"))
    if is_secure(rng):
        sens = sens + rng.grid * (np.sqrt(dim) if norm == "l2" else dim)
    return float(sens) if sens.ndim == 0 else sens


def _draws(rng: Any) -> Any:
    """The source to draw from: keyed per-agent draws (``rfed.algorithms.decentralized``'s
    ``KeyedDraws``, which have a leading agent axis) pass through; else a Generator."""
    return rng if getattr(rng, "is_keyed_draws", False) else as_generator(rng)


def _finite(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.isfinite(arr).all():
        raise ValueError(f"argument '{name}' contains NaN or inf")
    return arr


def laplace_noise(
    shape: int | tuple[int, ...], scale: float | np.ndarray,
    rng: np.random.Generator | SecureRandom | int,
) -> np.ndarray:
    """I.i.d. Laplace noise of the given ``shape`` and ``scale`` (``E x^2 = 2 scale^2``).

    Parameters
    ----------
    shape : int or tuple of int
    scale : float or array
        ``theta >= 0``; scalar or per-coordinate, broadcastable to ``shape``. Zero gives zeros.
    rng : Generator or int
        A :class:`~rfed.privacy.secure.SecureRandom` is refused (``SecureModeError``): bare
        noise would be added to a value in floating point by the caller; secure mode needs
        :func:`laplace_mechanism`.

    Returns
    -------
    ndarray, shape ``shape``
        ``scale`` times standard Laplace draws.
    """
    if is_secure(rng):
        raise SecureModeError(
            "laplace_noise returns bare noise that the caller adds in floating point, which is "
            "not allowed in secure mode; use laplace_mechanism(value, scale, rng) (or "
            "LaplaceSchedule.release)"
        )
    draws, scale = _laplace_draws(shape, scale, rng)
    return draws * scale


def _laplace_draws(shape: Any, scale: Any, rng: Any) -> tuple[np.ndarray, np.ndarray]:
    """Standard Laplace draws of ``shape`` from ``rng`` and the checked ``scale`` (an array
    that broadcasts to ``shape``); the noise is their product."""
    scale = check_nonneg_array(scale, "scale")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    try:
        fits = np.broadcast_shapes(scale.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"argument 'scale' of shape {scale.shape} must broadcast to shape {shape}")
    return _draws(rng).laplace(0.0, 1.0, size=shape), scale


def laplace_mechanism(
    value: np.ndarray, scale: float | np.ndarray, rng: np.random.Generator | SecureRandom | int
) -> np.ndarray:
    """Release ``value + Lap(scale)`` per coordinate (noise multiplier = scale / L1 sensitivity).

    Secure mode (``rng`` a SecureRandom): ``value`` rounded to ``rng.grid`` plus discrete
    Laplace grid steps of scale ``ceil(scale / grid)`` (at least ``scale``); record
    ``release_sensitivity(sensitivity, value.size_per_agent, rng, norm="l1")``.

    Parameters
    ----------
    value : array_like
        The value to release, any shape; finite.
    scale : float or ndarray
        Laplace scale ``theta >= 0``, scalar or broadcastable to ``value.shape``.
    rng : Generator, int or SecureRandom
        The noise source; a :class:`~rfed.privacy.secure.SecureRandom` selects secure mode.

    Returns
    -------
    ndarray, shape ``value.shape``
        The released value.
    """
    value = _finite(value, "value")
    if is_secure(rng):
        scale = check_nonneg_array(scale, "scale")
        return grid_release(value, scale, rng, "laplace", name="value")
    draws, scale = _laplace_draws(value.shape, scale, rng)
    if (type(draws) is np.ndarray and draws.dtype == np.float64 and draws.flags.writeable
            and draws.flags.c_contiguous and draws.shape == value.shape
            and value.dtype == np.float64):
        # value + draws * scale into the fresh draws' array: the same products and sums,
        # without two more arrays of the value's size
        np.multiply(draws, scale, out=draws)
        return np.add(value, draws, out=draws)
    return value + draws * scale


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
        """``theta0 * q**k`` for iteration(s) ``k >= 0`` (vectorized).

        Parameters
        ----------
        k : int or ndarray of int
            Iteration index (indices) ``>= 0``.

        Returns
        -------
        float or ndarray
            ``theta_k``, of the shape of ``k`` (a float for a scalar).
        """
        if type(k) is int and k >= 0:
            # one iteration's scale, on a round's path: the arithmetic below, without the checks
            # a non-negative int does not need
            return float(self.theta0 * np.power(self.q, np.asarray(k), dtype=float))
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
        """Laplace noise of scale ``theta_k`` and the given shape (research mode only).

        Parameters
        ----------
        k : int
            Iteration index ``>= 0``.
        shape : int or tuple of int
            Shape of the noise.
        rng : Generator or int
            Not a :class:`~rfed.privacy.secure.SecureRandom` (see :func:`laplace_noise`).

        Returns
        -------
        ndarray, shape ``shape``
        """
        return laplace_noise(shape, self.scale(k), rng)

    def release(
        self, k: int, value: np.ndarray, rng: np.random.Generator | SecureRandom | int
    ) -> np.ndarray:
        """``laplace_mechanism(value, theta_k, rng)``: works in both modes.

        Parameters
        ----------
        k : int
            Iteration index ``>= 0``.
        value : array_like
            The value to release, any shape.
        rng : Generator, int or SecureRandom

        Returns
        -------
        ndarray, shape ``value.shape``
        """
        return laplace_mechanism(value, self.scale(k), rng)


def secure_generator(grid: float = 2.0**-40) -> SecureRandom:
    """Secure mode's random source: ``SecureRandom(grid)`` (OS CSPRNG, not replayable).

    Pass it as ``rng`` to the mechanisms of this module to get discrete noise on ``grid * Z``;
    see :mod:`rfed.privacy.secure`. (It replaces an earlier entropy-seeded PCG64 generator, which
    was neither cryptographic nor protected against floating-point leaks.)

    Parameters
    ----------
    grid : float
        Spacing of the released values' grid, ``> 0``.

    Returns
    -------
    SecureRandom
    """
    return SecureRandom(grid)
