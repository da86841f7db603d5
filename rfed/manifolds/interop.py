"""Run pymanopt's solvers on rfed manifolds.

:func:`to_pymanopt` wraps any rfed manifold in a :class:`pymanopt.manifolds.manifold.Manifold`
subclass, so that ``pymanopt.optimizers.SteepestDescent`` and ``TrustRegions`` run on it with a
``@pymanopt.function.autograd(adapter)`` cost. :func:`solve_reference` is the one-call form later
issues use for the centralized non-private reference solution.

pymanopt is imported here only (``rfed.manifolds`` imports this module lazily).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pymanopt  # type: ignore[import-untyped]
from pymanopt.manifolds.manifold import Manifold as _PymanoptManifold  # type: ignore[import-untyped]

from rfed.manifolds.base import Manifold, as_generator
from rfed.manifolds.product import FlatProduct, Product
from rfed.manifolds.sphere import Sphere

__all__ = ["PymanoptAdapter", "to_pymanopt", "solve_reference"]


class PymanoptAdapter(_PymanoptManifold):
    """A pymanopt manifold backed by an rfed manifold (single, unbatched points).

    Parameters
    ----------
    manifold : rfed Manifold
        The geometry. A :class:`~rfed.manifolds.Product` is used through its flat view
        (:meth:`Product.as_flat`): pymanopt's solvers add and scale tangent vectors, which needs
        arrays; ``rfed_manifold`` is then the :class:`~rfed.manifolds.FlatProduct`.
    seed : int or numpy.random.Generator
        Source of :meth:`random_point` and :meth:`random_tangent_vector` (pymanopt itself draws
        from global state; this adapter never does).

    Notes
    -----
    ``euclidean_to_riemannian_hessian`` uses the manifold's ``ehess2rhess``: Euclidean, Sphere,
    SPD, Hyperboloid, PoincareBall, Stiefel, Grassmann, Oblique, SpecialOrthogonal and products
    of them provide it, so trust regions works on each. SPDLogEuclidean and
    SPDBuresWasserstein support only first-order solvers (steepest descent, conjugate
    gradients: their ``ehess2rhess`` raises ``NotImplementedError``).
    ``random_tangent_vector`` is a unit-norm vector (pymanopt's convention), drawn as a
    normalized tangent Gaussian.
    """

    def __init__(self, manifold: Manifold, seed: np.random.Generator | int = 0):
        if not isinstance(manifold, Manifold):
            raise ValueError(
                f"to_pymanopt: argument 'manifold' must be an rfed Manifold, got "
                f"{type(manifold).__name__}"
            )
        if isinstance(manifold, Product):
            manifold = manifold.as_flat()
        self.rfed_manifold = manifold
        self._rng = as_generator(seed, "seed")
        super().__init__(f"pymanopt({manifold.name})", manifold.dim)

    @property
    def typical_dist(self) -> float:
        """pymanopt's scale of distances: pi on the sphere, else ``sqrt(dim)``."""
        if isinstance(self.rfed_manifold, Sphere):
            return float(np.pi)
        return float(np.sqrt(self.rfed_manifold.dim))

    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        """Riemannian inner product (rfed's :meth:`~rfed.manifolds.Manifold.inner`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector_a, tangent_vector_b : ndarray, shape ``point_shape``
            Tangent vectors at ``point``.

        Returns
        -------
        float
        """
        return float(self.rfed_manifold.inner(point, tangent_vector_a, tangent_vector_b))

    def norm(self, point, tangent_vector):
        """Riemannian norm (rfed's :meth:`~rfed.manifolds.Manifold.norm`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``
                    A tangent vector at ``point``.

        Returns
        -------
        float
        """
        return float(self.rfed_manifold.norm(point, tangent_vector))

    def dist(self, point_a, point_b):
        """Geodesic distance (rfed's :meth:`~rfed.manifolds.Manifold.dist`).

        Parameters
        ----------
        point_a, point_b : ndarray, shape ``point_shape``

        Returns
        -------
        float
        """
        return float(self.rfed_manifold.dist(point_a, point_b))

    def projection(self, point, vector):
        """Projection of an ambient vector onto the tangent space at ``point`` (rfed's
        :meth:`~rfed.manifolds.Manifold.proj`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        vector : ndarray, shape ``point_shape``
            An ambient vector.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.proj(point, vector)

    to_tangent_space = projection

    def random_point(self):
        """A random point, drawn from the adapter's own generator.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.random_point(self._rng)

    def random_tangent_vector(self, point):
        """A unit-norm random tangent vector at ``point`` (a normalized tangent Gaussian).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        v = self.rfed_manifold.tangent_gaussian(point, 1.0, self._rng)
        return v / self.rfed_manifold.norm(point, v)

    def zero_vector(self, point):
        """The zero tangent vector at ``point``.

        Parameters
        ----------
        point : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.zero_vector(point)

    def euclidean_to_riemannian_gradient(self, point, euclidean_gradient):
        """Riemannian gradient from the Euclidean one (rfed's
        :meth:`~rfed.manifolds.Manifold.egrad2rgrad`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        euclidean_gradient : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.egrad2rgrad(point, euclidean_gradient)

    def euclidean_to_riemannian_hessian(
        self, point, euclidean_gradient, euclidean_hessian, tangent_vector
    ):
        """Riemannian Hessian-vector product from the Euclidean ones (rfed's ``ehess2rhess``).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        euclidean_gradient : ndarray, shape ``point_shape``
        euclidean_hessian : ndarray, shape ``point_shape``
            The Euclidean Hessian applied to ``tangent_vector``.
        tangent_vector : ndarray, shape ``point_shape``
                    A tangent vector at ``point``.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.ehess2rhess(
            point, euclidean_gradient, euclidean_hessian, tangent_vector
        )

    def retraction(self, point, tangent_vector):
        """The manifold's retraction (rfed's :meth:`~rfed.manifolds.Manifold.retract`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``
                    A tangent vector at ``point``.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.retract(point, tangent_vector)

    def exp(self, point, tangent_vector):
        """The exponential map (rfed's :meth:`~rfed.manifolds.Manifold.exp`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``
                    A tangent vector at ``point``.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.exp(point, tangent_vector)

    def log(self, point_a, point_b):
        """The logarithm map: the tangent vector at ``point_a`` pointing to ``point_b`` (rfed's
        :meth:`~rfed.manifolds.Manifold.log`).

        Parameters
        ----------
        point_a, point_b : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.log(point_a, point_b)

    def transport(self, point_a, point_b, tangent_vector_a):
        """Vector transport from ``point_a`` to ``point_b`` (rfed's
        :meth:`~rfed.manifolds.Manifold.transport`).

        Parameters
        ----------
        point_a, point_b : ndarray, shape ``point_shape``
        tangent_vector_a : ndarray, shape ``point_shape``
            A tangent vector at ``point_a``.

        Returns
        -------
        ndarray, shape ``point_shape``
            A tangent vector at ``point_b``.
        """
        return self.rfed_manifold.transport(point_a, point_b, tangent_vector_a)

    def pair_mean(self, point_a, point_b):
        """The geodesic midpoint ``Exp_a(Log_a(b) / 2)``.

        Parameters
        ----------
        point_a, point_b : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.rfed_manifold.exp(point_a, 0.5 * self.rfed_manifold.log(point_a, point_b))


def to_pymanopt(manifold: Manifold, seed: np.random.Generator | int = 0) -> PymanoptAdapter:
    """Wrap an rfed manifold as a pymanopt manifold (see :class:`PymanoptAdapter`).

    Parameters
    ----------
    manifold : Manifold
        The rfed manifold.
    seed : numpy.random.Generator or int
        Generator of the adapter's random points and tangent vectors.

    Returns
    -------
    PymanoptAdapter
        The pymanopt manifold.
    """
    return PymanoptAdapter(manifold, seed)


_METHODS = ("trust_regions", "steepest_descent", "conjugate_gradient")


def solve_reference(
    manifold: Manifold,
    cost: Callable[..., Any],
    x0: Any = None,
    *,
    method: str = "trust_regions",
    max_iterations: int = 1000,
    min_gradient_norm: float = 1e-10,
    seed: np.random.Generator | int = 0,
    verbosity: int = 0,
) -> Any:
    """Minimize ``cost`` on ``manifold`` with a pymanopt solver and return the final point.

    Parameters
    ----------
    manifold : rfed Manifold
    cost : callable
        Written with ``autograd.numpy``; takes one point (an array of ``point_shape``), or, for a
        :class:`~rfed.manifolds.Product`, one argument per block.
    x0 : point, optional
        Initial point (a tuple of blocks for a Product); random from ``seed`` when omitted.
    method : {'trust_regions', 'steepest_descent', 'conjugate_gradient'}
    max_iterations, min_gradient_norm, verbosity
        Passed to the pymanopt optimizer.
    seed : int or Generator
        For the adapter's random points.

    Returns
    -------
    The minimizer found, in the manifold's own representation (a tuple for a Product).
    """
    if method not in _METHODS:
        raise ValueError(
            f"solve_reference: argument 'method' must be one of {_METHODS}, got {method!r}"
        )
    if not callable(cost):
        raise ValueError("solve_reference: argument 'cost' must be callable")
    adapter = to_pymanopt(manifold, seed)
    flat = adapter.rfed_manifold
    if isinstance(flat, FlatProduct):
        blocks = _autograd_split(flat)

        def flat_cost(z):
            return cost(*blocks(z))

        if x0 is not None:
            x0 = flat.join(x0)
    else:
        flat_cost = cost
    problem = pymanopt.Problem(adapter, pymanopt.function.autograd(adapter)(flat_cost))
    optimizer = {
        "trust_regions": pymanopt.optimizers.TrustRegions,
        "steepest_descent": pymanopt.optimizers.SteepestDescent,
        "conjugate_gradient": pymanopt.optimizers.ConjugateGradient,
    }[method](
        max_iterations=max_iterations, min_gradient_norm=min_gradient_norm, verbosity=verbosity
    )
    point = optimizer.run(problem, initial_point=x0).point
    return flat.split(point) if isinstance(flat, FlatProduct) else point


def _autograd_split(flat: FlatProduct):
    """``flat.split`` written with slicing and reshape only, so autograd can differentiate it."""

    def split(z):
        return tuple(
            z[lo:hi].reshape(m.point_shape)
            for m, lo, hi in zip(flat.manifolds, flat.bounds[:-1], flat.bounds[1:], strict=True)
        )

    return split
