"""The manifold contract every rfed algorithm is written against.

A manifold object is pure geometry: points, tangent vectors, the Riemannian metric, and the maps
between them. It knows nothing of agents or privacy. Conventions:

* **Point first**, as in pymanopt and geoopt: ``exp(x, u)``, ``log(x, y)``, ``transport(x, y, u)``.
* **Batching**: every method accepts leading batch axes and broadcasts them. A point has shape
  ``point_shape``; ``x`` of shape ``(n_agents, *point_shape)`` with ``u`` of shape
  ``(n_agents, n_samples, *point_shape)`` is *not* broadcast automatically (the batch axes are
  aligned from the right, numpy style), so insert the axis: ``exp(x[:, None], u)``.
  Scalar-valued methods (``inner``, ``norm``, ``dist``) return the broadcast batch shape.
* **Dtype**: every method computes in float64 and returns float64 arrays (float32 input is
  upcast); membership tests widen their tolerance to the precision of a lower-precision input.
* **Randomness** comes from an explicit :class:`numpy.random.Generator` (or an int seed) passed in;
  no method touches global random state.
* **Validation** is free in hot paths: methods do not check their inputs. Public boundaries call
  :meth:`Manifold.check_point` / :meth:`Manifold.check_tangent`, and :meth:`Manifold.checked`
  returns a view of the manifold that validates every argument of every call (for debugging).

References
----------
* Hermann Karcher. Riemannian Center of Mass and Mollifier Smoothing. Communications on Pure and
  Applied Mathematics 30(5), 1977.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "Manifold",
    "CheckedManifold",
    "ConvergenceWarning",
    "as_generator",
    "check_mean_options",
    "check_sigma",
    "karcher_mean",
]

#: Relative tolerance used by :meth:`Manifold.belongs` and :meth:`Manifold.is_tangent`.
DEFAULT_ATOL = 1e-8


def _input_atol(a: Any, atol: float, point_size: int) -> float:
    """``atol`` widened to the precision the input was given in.

    Dtype policy: every method computes in float64 and returns float64 (float32 input is
    upcast). A float32 point rounded from an exact one is off the manifold by about its own
    rounding error, so membership tests accept violations up to
    ``10 * sqrt(point_size) * eps(dtype)`` for inputs of a lower-precision float dtype.
    """
    dtype = getattr(a, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.floating):
        eps = float(np.finfo(dtype).eps)
        if eps > np.finfo(np.float64).eps:
            return max(atol, 10.0 * np.sqrt(point_size) * eps)
    return atol


def _entry_scaled(u: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``u`` divided by its largest entry (at least 1) over ``axes``, for norms that must not
    overflow: ``||u / big||`` is at most the square root of the number of entries, and a ratio
    with ``max(1, ||u||)`` below keeps its value as ``max(1 / big, ||u / big||)``.

    Parameters
    ----------
    u : ndarray, shape ``(*batch, *point_shape)``
        Vectors (finite).
    axes : tuple of int
        The point axes (negative), e.g. ``(-1,)`` for vectors, ``(-2, -1)`` for matrices.

    Returns
    -------
    scaled : ndarray, shape of ``u``
        ``u / big``.
    big : ndarray, shape ``batch``
        ``max(1, max |u|)`` over each point's entries.
    """
    big = np.maximum(np.max(np.abs(u), axis=axes, initial=0.0), 1.0)
    return u / np.expand_dims(big, axes), big


def size_tuple(size: int | Sequence[int]) -> tuple[int, ...]:
    """A ``size`` argument (an int or a sequence of ints) as a tuple of ints.

    Parameters
    ----------
    size : int or sequence of int
        A batch shape.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        ``size`` is not a non-negative int or a sequence of them (e.g. ``-1``, ``2.5``).
    """
    entries: list[Any]
    try:
        entries = [size] if isinstance(size, (int, np.integer)) else list(size)
    except TypeError:  # not a sequence (e.g. 2.5): refused below
        entries = [size]
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_))
               and s >= 0 for s in entries):
        raise ValueError("argument 'size' must be a batch shape: a non-negative int or a "
                         f"sequence of them, got {size!r}")
    return tuple(int(s) for s in entries)


def as_generator(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` from a generator or an integer seed.

    ``None`` is refused: rfed never falls back to unseeded or global random state silently.
    Secure mode's ``rfed.privacy.secure.SecureRandom`` passes through (recognized by its
    ``is_secure_random`` marker: manifolds do not import rfed.privacy); it refuses Gaussian draws.

    Parameters
    ----------
    rng : numpy.random.Generator, SecureRandom or int
        A generator or a seed.
    name : str
        The argument's name in the message.

    Returns
    -------
    numpy.random.Generator
        ``rng`` itself, or ``default_rng(rng)`` for a seed.
    """
    if isinstance(rng, np.random.Generator) or getattr(rng, "is_secure_random", False) is True:
        return rng  # type: ignore[no-any-return]
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"argument '{name}' must be a numpy.random.Generator or an int seed, got "
        f"{type(rng).__name__}"
        " (rfed does not use global random state; pass np.random.default_rng(seed))"
    )


class Manifold(abc.ABC):
    """Abstract Riemannian manifold with batched, point-first geometry.

    Subclasses set ``name``, ``dim`` (intrinsic dimension) and ``point_shape`` (shape of one point
    in its ambient representation) and implement the abstract methods.
    """

    name: str
    dim: int
    point_shape: tuple[int, ...]
    #: A lower bound on the sectional curvature (used by :meth:`mean` for its step size).
    curvature_lower_bound: float = 0.0
    #: Whether :meth:`transport` is parallel transport (an isometry along the minimizing
    #: geodesic). ``False`` marks a documented vector transport (e.g. a projection).
    has_parallel_transport: bool = True
    #: Whether ``transport(x, x, u)`` returns ``u`` bit for bit for finite ``u`` (nonzero
    #: entries exactly, zeros up to their sign): an algorithm may then take the transport of a
    #: vector from a point to itself as the vector without calling it (e.g. the first inner step
    #: of DP-RSVRG, where the iterate is the snapshot). ``False`` unless a manifold shows it.
    exact_self_transport: bool = False

    # ------------------------------------------------------------------ metric
    @abc.abstractmethod
    def inner(self, x: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        r"""Riemannian inner product :math:`\langle u, v \rangle_x` (shape: the broadcast batch).

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u, v : ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``x`` (broadcast against its batch).

        Returns
        -------
        ndarray, shape ``batch``
            The inner products, one per batch element.
        """

    def norm(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        r"""Riemannian norm :math:`\|u\|_x = \sqrt{\langle u, u\rangle_x}`.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``batch``
            The norms.
        """
        return np.sqrt(np.maximum(self.inner(x, u, u), 0.0))

    def dist(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r"""Geodesic distance :math:`d(x, y) = \|\mathrm{Log}_x y\|_x`.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, *point_shape)``
            Points (broadcast against each other).

        Returns
        -------
        ndarray, shape ``batch``
            The geodesic distances.
        """
        return self.norm(x, self.log(x, y))

    # ------------------------------------------------------------------ maps
    @abc.abstractmethod
    def exp(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        r"""Exponential map :math:`\mathrm{Exp}_x(u)`.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            The points reached.
        """

    @abc.abstractmethod
    def log(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r"""Logarithmic map :math:`\mathrm{Log}_x(y)`, the inverse of ``exp`` inside the
        injectivity radius. ``log(x, x)`` is exactly zero.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        y : ndarray, shape ``(*batch, *point_shape)``
            Target point(s).

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``x``.
        """

    def retract(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Retraction; defaults to the exponential map.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            The retracted points.
        """
        return self.exp(x, u)

    @abc.abstractmethod
    def transport(self, x: np.ndarray, y: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Parallel transport of ``u`` in T_x along the minimizing geodesic to T_y (an isometry);
        a vector transport where :attr:`has_parallel_transport` is ``False``.

        Parameters
        ----------
        x, y : ndarray, shape ``(*batch, *point_shape)``
            Start and end points.
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``y``.
        """

    @abc.abstractmethod
    def proj(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Orthogonal projection (for the Riemannian metric) of an ambient vector onto T_x.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        v : ndarray, shape ``(*batch, *point_shape)``
            Ambient vector(s).

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``x``.
        """

    def egrad2rgrad(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Riemannian gradient from the Euclidean gradient ``g`` of a smooth extension.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        g : ndarray, shape ``(*batch, *point_shape)``
            Euclidean gradient(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Riemannian gradients, tangent at ``x``.
        """
        return self.proj(x, g)

    def ehess2rhess(
        self, x: np.ndarray, egrad: np.ndarray, ehess: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        """Riemannian Hessian applied to ``u`` from the Euclidean gradient ``egrad`` and the
        Euclidean Hessian-vector product ``ehess`` (= D egrad[u]) of a smooth extension.

        Needed by second-order solvers (pymanopt's trust regions through
        :func:`rfed.manifolds.to_pymanopt`). Manifolds without a derived formula raise
        ``NotImplementedError`` (first-order solvers only).

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        egrad, ehess : ndarray, shape ``(*batch, *point_shape)``
            Euclidean gradient and Hessian-vector product at ``x``.
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent direction of the Hessian-vector product.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            The Riemannian Hessian applied to ``u``, tangent at ``x``.
        """
        raise NotImplementedError(
            f"{self}: ehess2rhess is not implemented; only first-order solvers are supported"
        )

    def zero_vector(self, x: np.ndarray) -> np.ndarray:
        """The zero tangent vector at ``x``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Zeros.
        """
        return np.zeros_like(np.asarray(x, dtype=float))

    # ------------------------------------------------------------------ random
    @abc.abstractmethod
    def random_point(
        self, rng: np.random.Generator | int, size: int | Sequence[int] = ()
    ) -> np.ndarray:
        """Random points of shape ``(*size, *point_shape)``.

        Parameters
        ----------
        rng : numpy.random.Generator or int
            Generator or seed.
        size : int or sequence of int
            Batch shape (``()``: one point).

        Returns
        -------
        ndarray, shape ``(*size, *point_shape)``
        """

    @abc.abstractmethod
    def tangent_gaussian(
        self, x: np.ndarray, sigma: float | np.ndarray, rng: np.random.Generator | int
    ) -> np.ndarray:
        r"""Sample :math:`\xi \sim N(0, \sigma^2 I_{\dim})` on :math:`T_x M`.

        Isotropic for the Riemannian metric: for every tangent ``a``,
        :math:`E\langle\xi, a\rangle_x^2 = \sigma^2\|a\|_x^2` and
        :math:`E\|\xi\|_x^2 = \sigma^2 \dim`. ``sigma`` is a scalar or an array broadcastable to
        the batch shape of ``x`` (one scale per agent). The result has the shape of ``x``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        sigma : float or ndarray, shape broadcastable to ``batch``
            Standard deviation per coordinate of an orthonormal basis.
        rng : numpy.random.Generator or int
            Generator or seed.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Gaussian tangent vectors at ``x``.
        """

    def random_tangent(self, x: np.ndarray, rng: np.random.Generator | int) -> np.ndarray:
        """A standard Gaussian tangent vector at ``x`` (``tangent_gaussian`` with sigma = 1).

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        rng : numpy.random.Generator or int
            Generator or seed.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Standard Gaussian tangent vectors at ``x``.
        """
        return self.tangent_gaussian(x, 1.0, rng)

    # ------------------------------------------------------------------ coordinates
    @abc.abstractmethod
    def tangent_basis(self, x: np.ndarray) -> np.ndarray:
        """An orthonormal basis of T_x, shape ``(*batch, dim, *point_shape)``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).

        Returns
        -------
        ndarray, shape ``(*batch, dim, *point_shape)``
            ``dim`` orthonormal tangent vectors per batch element.
        """

    def to_coords(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Coordinates of ``u`` in the orthonormal basis :meth:`tangent_basis` of T_x.

        Shape ``(*batch, dim)``; ``from_coords(x, to_coords(x, u)) == u`` for tangent ``u``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(*batch, dim)``
            Orthonormal coordinates.
        """
        basis = self.tangent_basis(x)
        xb = np.expand_dims(np.asarray(x), -1 - len(self.point_shape))
        ub = np.expand_dims(np.asarray(u), -1 - len(self.point_shape))
        return self.inner(xb, basis, ub)

    def from_coords(self, x: np.ndarray, coords: np.ndarray) -> np.ndarray:
        """The tangent vector at ``x`` with orthonormal coordinates ``coords``, shape
        ``(*batch, dim)``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        coords : ndarray, shape ``(*batch, dim)``
            Orthonormal coordinates.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            Tangent vectors at ``x``.
        """
        basis = self.tangent_basis(x)
        k = len(self.point_shape)
        c = np.asarray(coords, dtype=float).reshape(np.shape(coords) + (1,) * k)
        return np.sum(c * basis, axis=-1 - k)

    # ------------------------------------------------------------------ membership
    @abc.abstractmethod
    def point_violation(self, x: np.ndarray) -> np.ndarray:
        """How far ``x`` is from the manifold (0 on it), relative to the scale of ``x``.

        Shape: the batch shape of ``x``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).

        Returns
        -------
        ndarray, shape ``batch``
            Relative violations (0 on the manifold).
        """

    @abc.abstractmethod
    def tangent_violation(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """How far ``u`` is from T_x (0 when tangent), relative to the scale of ``u``.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : ndarray, shape ``(*batch, *point_shape)``
            Candidate tangent vector(s).

        Returns
        -------
        ndarray, shape ``batch``
            Relative violations (0 when tangent).
        """

    def belongs(self, x: np.ndarray, atol: float = DEFAULT_ATOL) -> np.ndarray:
        """Whether ``x`` is a point of the manifold (per batch element); the tolerance is
        widened for float32 input (see the dtype policy of :func:`_input_atol`).

        Parameters
        ----------
        x : array_like, shape ``(*batch, *point_shape)``
            Candidate point(s).
        atol : float
            Tolerance on :meth:`point_violation`.

        Returns
        -------
        ndarray of bool, shape ``batch``
        """
        atol = _input_atol(x, atol, int(np.prod(self.point_shape)))
        x = np.asarray(x, dtype=float)
        if x.shape[x.ndim - len(self.point_shape) :] != self.point_shape:
            return np.zeros(x.shape[: max(x.ndim - len(self.point_shape), 0)], dtype=bool)
        finite = np.all(np.isfinite(x), axis=tuple(range(-len(self.point_shape), 0)))
        with np.errstate(invalid="ignore"):
            return finite & (self.point_violation(np.where(np.isfinite(x), x, 0.0)) <= atol)

    def is_tangent(self, x: np.ndarray, u: np.ndarray, atol: float = DEFAULT_ATOL) -> np.ndarray:
        """Whether ``u`` is a tangent vector at ``x`` (per batch element); ``False`` for a ``u``
        whose trailing shape is not ``point_shape``, as :meth:`belongs` does.

        Parameters
        ----------
        x : ndarray, shape ``(*batch, *point_shape)``
            Base point(s).
        u : array_like, shape ``(*batch, *point_shape)``
            Candidate tangent vector(s).
        atol : float
            Tolerance on :meth:`tangent_violation`.

        Returns
        -------
        ndarray of bool, shape ``batch``
        """
        atol = _input_atol(u, _input_atol(x, atol, 1), int(np.prod(self.point_shape)))
        u = np.asarray(u, dtype=float)
        k = len(self.point_shape)
        if u.shape[u.ndim - k :] != self.point_shape or np.shape(x)[np.ndim(x) - k :] != (
            self.point_shape
        ):
            lead = np.broadcast_shapes(np.shape(u)[: max(u.ndim - k, 0)],
                                       np.shape(x)[: max(np.ndim(x) - k, 0)])
            return np.zeros(lead, dtype=bool)
        finite = np.all(np.isfinite(u), axis=tuple(range(-len(self.point_shape), 0)))
        return finite & (self.tangent_violation(x, u) <= atol)

    # ------------------------------------------------------------------ validation
    def _check_array(self, a: Any, name: str) -> np.ndarray:
        if np.iscomplexobj(a):
            raise ValueError(
                f"{self}: argument '{name}' is complex; expected a real array (rfed's manifolds "
                "are real: the imaginary part would be dropped)"
            )
        try:
            arr = np.asarray(a, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self}: argument '{name}' is not a numeric array ({exc})") from None
        k = len(self.point_shape)
        if arr.ndim < k or arr.shape[arr.ndim - k :] != self.point_shape:
            raise ValueError(
                f"{self}: argument '{name}' has shape {arr.shape}; expected (..., "
                f"{', '.join(map(str, self.point_shape))}) (point_shape {self.point_shape})"
            )
        if not np.all(np.isfinite(arr)):
            n_bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(f"{self}: argument '{name}' has {n_bad} non-finite value(s) (NaN/inf)")
        return arr

    def check_point(self, x: Any, name: str = "x", atol: float = DEFAULT_ATOL) -> np.ndarray:
        """Return ``x`` as a float array, or raise ``ValueError`` naming it and the violation.

        Parameters
        ----------
        x : array_like, shape ``(*batch, *point_shape)``
            Candidate point(s).
        name : str
            The argument's name in the message.
        atol : float
            Tolerance on :meth:`point_violation`.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            ``x`` as float64.

        Raises
        ------
        ValueError
            ``x`` has the wrong shape, a non-finite entry, or lies off the manifold.
        """
        atol = _input_atol(x, atol, int(np.prod(self.point_shape)))
        arr = self._check_array(x, name)
        with np.errstate(over="ignore", invalid="ignore"):
            # an overflow makes the violation inf or NaN, which fails the test below: refused
            # without a RuntimeWarning first (the violations are scale-free where a point may
            # be huge, so an overflow never passes a point)
            viol = np.asarray(self.point_violation(arr))
        worst = float(np.max(viol)) if viol.size else 0.0
        if not worst <= atol:
            where = ""
            if viol.ndim:
                idx = tuple(int(i) for i in np.unravel_index(np.argmax(viol), viol.shape))
                where = f" (worst at batch index {idx})"
            raise ValueError(
                f"{self}: argument '{name}' is not on the manifold: violation {worst:.3e} > "
                f"tolerance {atol:.1e}{where}; {self.point_violation_description}"
            )
        return arr

    def check_tangent(
        self, x: Any, u: Any, name: str = "u", atol: float = DEFAULT_ATOL
    ) -> np.ndarray:
        """Return ``u`` as a float array, or raise ``ValueError`` if it is not tangent at ``x``.

        Parameters
        ----------
        x : array_like, shape ``(*batch, *point_shape)``
            Base point(s).
        u : array_like, shape ``(*batch, *point_shape)``
            Candidate tangent vector(s).
        name : str
            The argument's name in the message.
        atol : float
            Tolerance on :meth:`tangent_violation`.

        Returns
        -------
        ndarray, shape ``(*batch, *point_shape)``
            ``u`` as float64.

        Raises
        ------
        ValueError
            ``u`` has the wrong shape, a non-finite entry, or is not tangent at ``x``.
        """
        atol = _input_atol(u, _input_atol(x, atol, 1), int(np.prod(self.point_shape)))
        arr = self._check_array(u, name)
        with np.errstate(over="ignore", invalid="ignore"):  # as in check_point
            viol = np.asarray(self.tangent_violation(np.asarray(x, dtype=float), arr))
        worst = float(np.max(viol)) if viol.size else 0.0
        if not worst <= atol:
            raise ValueError(
                f"{self}: argument '{name}' is not a tangent vector at the base point: violation "
                f"{worst:.3e} > tolerance {atol:.1e}; {self.tangent_violation_description}"
            )
        return arr

    point_violation_description = "see point_violation"
    tangent_violation_description = "see tangent_violation"

    def _check_map_result(self, y: Any, method: str, u: Any, x: Any) -> None:
        """Raise ``ValueError`` naming the tangent argument ``u`` when ``method(x, u)`` (exp or
        retract) left float64 (NaN or inf) or the manifold (used by :meth:`checked`)."""
        y = np.asarray(y, dtype=float)
        if not np.all(np.isfinite(y)):
            with np.errstate(over="ignore", invalid="ignore"):
                norm = float(np.max(self.norm(np.asarray(x, dtype=float),
                                              np.asarray(u, dtype=float))))
            longest = f"up to {norm:.4g}" if np.isfinite(norm) else "beyond float64's range"
            raise ValueError(
                f"{self}: argument 'u' is too long: {method}(x, u) is not representable in "
                f"float64 (NaN/inf in the result) for |u|_x {longest}"
            )
        with np.errstate(over="ignore", invalid="ignore"):  # as in check_point
            viol = np.asarray(self.point_violation(y))
        worst = float(np.max(viol)) if viol.size else 0.0
        if not worst <= 1e-6:
            raise ValueError(
                f"{self}: argument 'u' is too long: {method}(x, u) lost the manifold to rounding "
                f"(violation {worst:.3e}; {self.point_violation_description})"
            )

    def checked(self) -> CheckedManifold:
        """A view of this manifold that validates every argument of every call.

        Returns
        -------
        CheckedManifold
            The validating view.
        """
        return CheckedManifold(self)

    # ------------------------------------------------------------------ mean
    def mean(
        self,
        points: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        tol: float = 1e-12,
        max_iter: int = 100,
        init: np.ndarray | None = None,
    ) -> np.ndarray:
        r"""Weighted Frechet (Karcher) mean of ``points`` along the axis before the point axes.

        Parameters
        ----------
        points : array, shape ``(*batch, n_points, *point_shape)``
        weights : array, shape ``(*batch, n_points)`` or ``(n_points,)``, optional
            Non-negative; normalized to sum to one. Uniform when omitted.
        tol : float
            Stop when the Riemannian gradient norm :math:`\|\sum_i w_i \mathrm{Log}_x p_i\|_x`
            falls below ``tol`` for every batch element.
        max_iter : int
            Iteration cap of the gradient iteration :math:`x \leftarrow \mathrm{Exp}_x(g / L)`,
            :math:`g = \sum_i w_i \mathrm{Log}_x p_i`, with :math:`L = 1` when the curvature is
            non-negative (the classical fixed-point iteration) and
            :math:`L = \sum_i w_i (c_i^2 + (1 - c_i^2) \kappa d_i \coth(\kappa d_i))`, where
            :math:`c_i` is the cosine between g and :math:`\mathrm{Log}_x p_i`, when it is bounded
            below by :math:`-\kappa^2` (:attr:`curvature_lower_bound`): the comparison-theorem
            bound on the Hessian of :math:`\frac12 \sum_i w_i d(x, p_i)^2` in the direction of
            the step (1 along each geodesic, :math:`\kappa d \coth \kappa d` across), so the step
            neither overshoots for spread data (where the unit step diverges) nor crawls; a batch
            element whose gradient norm grows falls back to the full bound
            :math:`\sum_i w_i \kappa d_i \coth(\kappa d_i)` (a guaranteed descent step). The
            iteration continues past ``max_iter`` (up to ten times) while the gradient norm
            still falls, and warns (:class:`ConvergenceWarning`) if ``tol`` is not reached.
        init : array, shape ``(*batch, *point_shape)``, optional
            Starting point; the first point by default.

        Returns
        -------
        array, shape ``(*batch, *point_shape)``
        """
        return karcher_mean(self, points, weights, tol=tol, max_iter=max_iter, init=init)

    def _logs_to(self, points: np.ndarray):
        """``x -> Log_x(points)`` for a fixed stack of ``points`` (the logs of every iteration
        of :func:`karcher_mean`). A manifold may prepare what depends on the points alone once
        (SPD: their Cholesky factors); the values are those of :meth:`log`."""
        return lambda x: self.log(x, points)

    def _norm_inner(self, x: np.ndarray, u: np.ndarray, v: np.ndarray):
        """``(norm(x, u), inner(x, u, v))``, the same values; a manifold may share the work on
        ``u`` between the two (SPD whitens u once)."""
        return self.norm(x, u), self.inner(x, u, v)

    # ------------------------------------------------------------------ misc
    def _batch_ndim(self, x: np.ndarray) -> int:
        return np.ndim(x) - len(self.point_shape)

    def _sum_point_axes(self, a: np.ndarray) -> np.ndarray:
        return np.sum(a, axis=tuple(range(-len(self.point_shape), 0)))

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


def check_sigma(sigma: Any, name: str = "sigma") -> np.ndarray:
    """``sigma`` as a float array, or ``ValueError`` unless every entry is finite and >= 0.

    Parameters
    ----------
    sigma : float or array_like
        Noise standard deviation(s).
    name : str
        The argument's name in the message.

    Returns
    -------
    ndarray of float64, shape of ``sigma``
    """
    if np.iscomplexobj(sigma):
        raise ValueError(f"argument '{name}' must be real, got a complex value")
    try:
        arr = np.asarray(sigma, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"argument '{name}' must be a finite float >= 0 (or an array of them), got "
            f"{sigma!r}"
        ) from None
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if np.any(bad):
        worst = arr[bad].flat[0]
        raise ValueError(
            f"argument '{name}' must be finite and >= 0 (a noise standard deviation), got "
            f"{worst!r}" + (f" ({int(np.sum(bad))} bad entries)" if arr.ndim else "")
        )
    return arr


def check_mean_options(n_points: int, tol: Any, max_iter: Any) -> None:
    """Refuse an empty mean and a meaningless ``tol`` or ``max_iter``, naming the argument.

    Parameters
    ----------
    n_points : int
        Number of points averaged.
    tol : float
        Tolerance on the gradient norm, > 0.
    max_iter : int
        Iteration budget, >= 1.

    Raises
    ------
    ValueError
        No point, or a ``tol`` or ``max_iter`` out of range.
    """
    if n_points < 1:
        raise ValueError(
            "argument 'points' holds no point (0 along the points axis): the mean of nothing "
            "is undefined"
        )
    if not isinstance(max_iter, (int, np.integer)) or isinstance(max_iter, bool) or max_iter < 1:
        raise ValueError(f"argument 'max_iter' must be an int >= 1, got {max_iter!r}")
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) or not (
        np.isfinite(tol) and tol >= 0
    ):
        raise ValueError(f"argument 'tol' must be a finite float >= 0, got {tol!r}")


def _normalize_weights(weights: np.ndarray | None, n_points: int, name: str = "weights"):
    if n_points < 1:
        raise ValueError(
            "argument 'points' holds no point (0 along the points axis): the mean of nothing "
            "is undefined"
        )
    if weights is None:
        return np.full(n_points, 1.0 / n_points)
    w = np.asarray(weights, dtype=float)
    if w.shape[-1:] != (n_points,):
        raise ValueError(f"argument '{name}' has shape {w.shape}; expected (..., {n_points})")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"argument '{name}' must be finite and non-negative")
    total = w.sum(axis=-1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError(f"argument '{name}' must have a positive sum")
    return w / total


class ConvergenceWarning(RuntimeWarning):
    """An iteration stopped at its cap before reaching its tolerance (the result is returned)."""


def karcher_mean(
    manifold: Manifold,
    points: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    tol: float = 1e-12,
    max_iter: int = 100,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """Batched weighted Karcher mean by gradient descent (see :meth:`Manifold.mean`).

    Runs ``max_iter`` iterations, and on past that (up to ``10 * max_iter``) while the gradient
    norm still falls (by 10% per 10 iterations); warns with :class:`ConvergenceWarning`, giving
    the gradient norm reached, when ``tol`` is not met.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the points.
    points : ndarray, shape ``(*batch, n, *point_shape)``
        The points averaged (along the axis before ``point_shape``).
    weights : ndarray, shape ``(*batch, n)`` or ``(n,)``, optional
        Non-negative weights (default: equal).
    tol : float
        Stop when the Riemannian gradient norm falls below it.
    max_iter : int
        Iteration budget (see above).
    init : ndarray, shape ``(*batch, *point_shape)``, optional
        Starting point (default: the first point).

    Returns
    -------
    ndarray, shape ``(*batch, *point_shape)``
        The means.
    """
    points = np.asarray(points, dtype=float)
    k = len(manifold.point_shape)
    if points.ndim < k + 1 or points.shape[points.ndim - k :] != manifold.point_shape:
        raise ValueError(
            f"{manifold}: argument 'points' has shape {points.shape}; expected "
            f"(..., n_points, {', '.join(map(str, manifold.point_shape))})"
        )
    if not np.all(np.isfinite(points)):
        n_bad = int(points.size - np.count_nonzero(np.isfinite(points)))
        raise ValueError(f"{manifold}: argument 'points' has {n_bad} non-finite value(s) (NaN/inf)")
    n_points = points.shape[-1 - k]
    check_mean_options(n_points, tol, max_iter)
    w = _normalize_weights(weights, n_points)
    w_b = w.reshape(w.shape + (1,) * k)
    x = np.array(points[(..., 0) + (slice(None),) * k]) if init is None else np.array(init, float)
    kappa = np.sqrt(max(-float(manifold.curvature_lower_bound), 0.0))
    history: list[float] = []
    it = 0
    prev: Any = np.inf
    careful = np.zeros(w.shape[:-1], dtype=bool)
    logs_to = manifold._logs_to(points)
    while True:
        xe = np.expand_dims(x, -1 - k)
        logs = logs_to(xe)
        step = np.sum(w_b * logs, axis=-1 - k)
        gnorm = manifold.norm(x, step)
        worst = float(np.max(gnorm)) if np.size(gnorm) else 0.0
        if worst <= tol:
            return x
        history.append(worst)
        progressing = len(history) > 10 and history[-1] < 0.9 * history[-11]
        if it >= max_iter and not (progressing and it < 10 * max_iter):
            break
        if kappa > 0:
            # On curvature >= -kappa^2 the Hessian of d(., p)^2 / 2 is 1 along the geodesic to p
            # and at most kappa d coth(kappa d) across it (comparison theorem); its value in the
            # direction of the step bounds the curvature the step sees (a unit step overshoots
            # and diverges for spread data, a step 1/max crawls).
            ln, along = manifold._norm_inner(xe, logs, np.expand_dims(step, -1 - k))
            kd = kappa * ln
            safe = np.where(kd > 1e-8, kd, 1.0)
            h = np.where(kd > 1e-8, safe / np.tanh(safe), 1.0)
            cos = along / np.where(ln > 0, ln, 1.0) / np.where(gnorm > 0, gnorm, 1.0)[..., None]
            cos2 = np.minimum(np.square(cos), 1.0)
            # elements whose gradient grew fall back for good to the full bound sum w h
            careful = careful | (gnorm > prev)
            cos2 = np.where(careful[..., None], 0.0, cos2)
            lip = np.sum(w * (cos2 + (1.0 - cos2) * h), axis=-1)
            step = step / lip.reshape(lip.shape + (1,) * k)
        x = manifold.exp(x, step)
        prev = gnorm
        it += 1
    warnings.warn(
        f"{manifold}: Karcher mean stopped after {it} iterations with gradient norm "
        f"{history[-1]:.3e} > tol {tol:.1e} (raise max_iter, or tol)",
        ConvergenceWarning,
        stacklevel=3,
    )
    return x


class CheckedManifold:
    """A validating view of a manifold: every point and tangent argument is checked first.

    Points are the arguments named ``x`` and ``y`` (and the ``points`` of :meth:`mean`), passed
    by position or by keyword; tangent vectors ``u`` and ``v`` are checked against the base
    point ``x``; the arguments' batch axes must broadcast against each other; the ``sigma`` of
    ``tangent_gaussian`` must be finite and non-negative; the result of ``exp`` and ``retract``
    must be finite and on the manifold (a step too long for float64 is refused, naming ``u``).
    Costs a membership test per call; meant for debugging and for public boundaries, not for
    hot loops.

    Parameters
    ----------
    manifold : Manifold
        The manifold whose calls are validated.
    """

    _POINT_FIRST = {
        "inner": ("x", "u", "v"),
        "norm": ("x", "u"),
        "dist": ("x", "y"),
        "exp": ("x", "u"),
        "retract": ("x", "u"),
        "log": ("x", "y"),
        "transport": ("x", "y", "u"),
        "to_coords": ("x", "u"),
        "tangent_gaussian": ("x",),
        "tangent_basis": ("x",),
        "from_coords": ("x",),
        "zero_vector": ("x",),
        "proj": ("x",),
        "egrad2rgrad": ("x",),
        "mean": ("points",),
    }

    def __init__(self, manifold: Manifold):
        self.manifold = manifold

    def __getattr__(self, attr: str):
        target = getattr(self.manifold, attr)
        roles = self._POINT_FIRST.get(attr)
        if roles is None:
            return target

        def checked_call(*args, **kwargs):
            args = list(args)
            self._check_batches(
                [(role, args[i] if i < len(args) else kwargs[role])
                 for i, role in enumerate(roles) if i < len(args) or role in kwargs])
            base = None
            for i, role in enumerate(roles):
                # the argument in role ``role``: positional, or passed by keyword
                if i < len(args):
                    value, put = args[i], (lambda v, i=i: args.__setitem__(i, v))
                elif role in kwargs:
                    value, put = kwargs[role], (lambda v, r=role: kwargs.__setitem__(r, v))
                else:
                    continue
                if role in ("x", "y"):
                    put(self.manifold.check_point(value, role))
                    if role == "x":
                        base = value
                elif role == "points":
                    put(self.manifold.check_point(value, role))
                else:
                    put(self.manifold.check_tangent(base, value, role))
            if attr == "tangent_gaussian":
                if len(args) > 1:
                    check_sigma(args[1])
                elif "sigma" in kwargs:
                    check_sigma(kwargs["sigma"])
            if attr not in ("exp", "retract"):
                return target(*args, **kwargs)
            with np.errstate(over="ignore", invalid="ignore"):
                # an overflow is reported below as an error naming the argument
                out = target(*args, **kwargs)
            if attr in ("exp", "retract"):
                x_arg = args[0] if args else kwargs.get("x")
                u_arg = args[1] if len(args) > 1 else kwargs.get("u")
                self.manifold._check_map_result(out, attr, u_arg, x_arg)
            return out

        checked_call.__doc__ = target.__doc__
        return checked_call

    def _check_batches(self, named: list[tuple[str, Any]]) -> None:
        """Raise ``ValueError`` naming the arguments when their leading batch axes do not
        broadcast against each other (an argument whose trailing shape is not the point shape is
        left to :meth:`Manifold.check_point` / :meth:`Manifold.check_tangent`, which name it)."""
        if len(named) < 2:
            return
        shapes: Any = self.manifold.point_shape   # a Product's: one shape per block
        product = bool(shapes) and isinstance(shapes[0], tuple)
        batches = []
        for role, value in named:
            blocks: list[tuple[str, Any, Any]]
            if product and isinstance(value, (tuple, list)):
                # a Product's blocks (a tuple of the wrong length is check_point's to refuse)
                blocks = [(f"{role}[{i}]", v, s)
                          for i, (v, s) in enumerate(zip(value, shapes, strict=False))]
            else:
                blocks = [(role, value, shapes)]
            for name, v, point_shape in blocks:
                shape, k = np.shape(v), len(point_shape)
                if len(shape) >= k and shape[len(shape) - k:] == tuple(point_shape):
                    batches.append((name, shape[: len(shape) - k]))
        try:
            np.broadcast_shapes(*(b for _, b in batches))
        except ValueError:
            listed = ", ".join(f"'{name}' {batch}" for name, batch in batches)
            raise ValueError(
                f"{self.manifold}: the batch shapes (the axes before the point shape) of "
                f"arguments {listed} do not broadcast against each other; they are matched from "
                "the right, so insert an axis to pair each point with several vectors, e.g. "
                "exp(x[:, None], u)") from None

    def __repr__(self) -> str:
        return f"checked({self.manifold!r})"
