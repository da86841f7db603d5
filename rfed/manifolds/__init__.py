"""Riemannian manifolds: geometry only (no privacy, no agents).

Every class implements the contract of :class:`rfed.manifolds.base.Manifold`: point-first,
batched over leading axes, explicit random generators.
"""

from rfed.manifolds.base import CheckedManifold, Manifold, as_generator
from rfed.manifolds.euclidean import Euclidean
from rfed.manifolds.sphere import AntipodalError, Sphere

__all__ = [
    "AntipodalError",
    "CheckedManifold",
    "Euclidean",
    "Manifold",
    "Sphere",
    "as_generator",
]
