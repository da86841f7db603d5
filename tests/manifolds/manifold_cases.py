"""Manifold cases and tuple-aware array helpers shared by the manifold tests."""

from __future__ import annotations

import numpy as np

from rfed.manifolds import (
    SPD,
    Euclidean,
    Grassmann,
    Hyperboloid,
    Oblique,
    PoincareBall,
    Product,
    SPDBuresWasserstein,
    SPDLogEuclidean,
    SpecialOrthogonal,
    Sphere,
    Stiefel,
)

CASES = {
    "Euclidean(3)": lambda: Euclidean(3),
    "Euclidean(2,3)": lambda: Euclidean(2, 3),
    "Sphere(1)": lambda: Sphere(1),
    "Sphere(2)": lambda: Sphere(2),
    "Sphere(24)": lambda: Sphere(24),
    "SPD(2)": lambda: SPD(2),
    "SPD(3)": lambda: SPD(3),
    "SPD(5)": lambda: SPD(5),
    "Hyperboloid(2)": lambda: Hyperboloid(2),
    "Hyperboloid(5)": lambda: Hyperboloid(5),
    "PoincareBall(2)": lambda: PoincareBall(2),
    "PoincareBall(3)": lambda: PoincareBall(3),
    "Product(S2,SPD2).flat": lambda: Product(Sphere(2), SPD(2)).as_flat(),
    "Product(S2,SPD2)": lambda: Product(Sphere(2), SPD(2)),
    "Stiefel(5,2)": lambda: Stiefel(5, 2),
    "Stiefel(6,3)": lambda: Stiefel(6, 3),
    "Stiefel(4,1)": lambda: Stiefel(4, 1),
    "Grassmann(5,2)": lambda: Grassmann(5, 2),
    "Grassmann(7,3)": lambda: Grassmann(7, 3),
    "Grassmann(4,1)": lambda: Grassmann(4, 1),
    "Oblique(4,3)": lambda: Oblique(4, 3),
    "Oblique(2,1)": lambda: Oblique(2, 1),
    "SO(2)": lambda: SpecialOrthogonal(2),
    "SO(3)": lambda: SpecialOrthogonal(3),
    "SO(5)": lambda: SpecialOrthogonal(5),
    "SPDLogEuclidean(2)": lambda: SPDLogEuclidean(2),
    "SPDLogEuclidean(4)": lambda: SPDLogEuclidean(4),
    "SPDBuresWasserstein(2)": lambda: SPDBuresWasserstein(2),
    "SPDBuresWasserstein(4)": lambda: SPDBuresWasserstein(4),
    "Product(SO3,Oblique)": lambda: Product(SpecialOrthogonal(3), Oblique(3, 2)),
}


# ---------------------------------------------------------------- tuple-aware helpers
def is_product(m) -> bool:
    return isinstance(m, Product)


def blocks(m, a):
    """(manifold, array) pairs: the blocks of a product, or the single array."""
    if is_product(m):
        return list(zip(m.manifolds, a, strict=True))
    return [(m, a)]


def tmap(m, f, *args):
    """Apply f(block_manifold, *block_arrays) blockwise; rebuild a tuple for products."""
    if is_product(m):
        return tuple(f(mi, *(a[i] for a in args)) for i, mi in enumerate(m.manifolds))
    return f(m, *args)


def scale(m, u, s):
    """Multiply tangent vectors u (batch shape of s) by the per-batch scalars s."""
    s = np.asarray(s, dtype=float)
    return tmap(m, lambda mi, b: b * s.reshape(s.shape + (1,) * len(mi.point_shape)), u)


def sub(m, a, b):
    return tmap(m, lambda mi, x, y: np.asarray(x) - np.asarray(y), a, b)


def take(m, a, idx):
    return tmap(m, lambda mi, x: np.asarray(x)[idx], a)


def insert_axis(m, a, axis):
    """np.expand_dims on a batch axis (counted from the left)."""
    return tmap(m, lambda mi, x: np.expand_dims(x, axis), a)


def broadcast_batch(m, a, batch):
    return tmap(m, lambda mi, x: np.broadcast_to(x, tuple(batch) + mi.point_shape), a)


def ambient_normal(m, rng, batch):
    """Standard normal arrays with the shape of points (ambient vectors)."""
    return tmap(m, lambda mi: rng.standard_normal(tuple(batch) + mi.point_shape))


def allclose(m, a, b, atol):
    return all(
        np.allclose(x, y, rtol=0, atol=atol)
        for (_, x), (_, y) in zip(blocks(m, a), blocks(m, b), strict=True)
    )


def max_abs(m, a):
    return max(float(np.max(np.abs(x))) for _, x in blocks(m, a))


def unit_tangent(m, x, rng, norms):
    """Tangent vectors at x with the prescribed Riemannian norms (shape: batch of x)."""
    u = m.tangent_gaussian(x, 1.0, rng)
    return scale(m, u, np.asarray(norms) / m.norm(x, u))


def radius(m) -> float:
    """A tangent norm safely inside the injectivity radius (pi on the sphere, pi/2 on the
    Grassmann manifold) and, on Stiefel, inside the range where its log iteration converges."""
    if isinstance(m, Grassmann):
        return 1.4
    if isinstance(m, SPDBuresWasserstein):
        # the exponential is a geodesic only while I + L_P[u] stays positive definite
        return 0.3
    if isinstance(m, Oblique):
        return 2.5
    if isinstance(m, Stiefel):
        return 1.5
    if isinstance(m, Sphere) or (
        hasattr(m, "manifolds") and any(isinstance(f, Sphere) for f in m.manifolds)
    ):
        return 2.5
    return 3.0
