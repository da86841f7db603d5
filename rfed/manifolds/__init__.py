"""Riemannian manifolds: geometry only (no privacy, no agents).

Every class implements the contract of :class:`rfed.manifolds.base.Manifold`: point-first,
batched over leading axes, explicit random generators. The pymanopt bridge
(:func:`to_pymanopt`, :func:`solve_reference`, :class:`PymanoptAdapter`) is imported on first
use, so importing ``rfed.manifolds`` does not import pymanopt.
"""

from rfed.manifolds.base import (
    CheckedManifold,
    ConvergenceWarning,
    Manifold,
    as_generator,
    karcher_mean,
)
from rfed.manifolds.euclidean import Euclidean
from rfed.manifolds.grassmann import Grassmann, principal_angles
from rfed.manifolds.hyperboloid import Hyperboloid, minkowski_inner
from rfed.manifolds.oblique import Oblique
from rfed.manifolds.poincare import PoincareBall, mobius_add
from rfed.manifolds.product import FlatProduct, Product
from rfed.manifolds.spd import SPD
from rfed.manifolds.spd_metrics import SPDBuresWasserstein, SPDLogEuclidean
from rfed.manifolds.special_orthogonal import SpecialOrthogonal
from rfed.manifolds.sphere import AntipodalError, Sphere
from rfed.manifolds.stiefel import Stiefel, StiefelLogError

__all__ = [
    "AntipodalError",
    "CheckedManifold",
    "ConvergenceWarning",
    "Euclidean",
    "FlatProduct",
    "Grassmann",
    "Hyperboloid",
    "Manifold",
    "Oblique",
    "PoincareBall",
    "Product",
    "PymanoptAdapter",
    "SPD",
    "SPDBuresWasserstein",
    "SPDLogEuclidean",
    "SpecialOrthogonal",
    "Sphere",
    "Stiefel",
    "StiefelLogError",
    "as_generator",
    "karcher_mean",
    "minkowski_inner",
    "mobius_add",
    "principal_angles",
    "solve_reference",
    "to_pymanopt",
]

_INTEROP = ("PymanoptAdapter", "solve_reference", "to_pymanopt")


def __getattr__(name: str):
    if name in _INTEROP:
        from rfed.manifolds import interop

        return getattr(interop, name)
    raise AttributeError(f"module 'rfed.manifolds' has no attribute {name!r}")
