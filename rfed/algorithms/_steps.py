"""Injectivity radii: where a step of the exponential map is still a step.

On a manifold of positive curvature the exponential map is one-to-one only on the ball of
radius the injectivity radius: ``Exp_x(v)`` with ``|v|_x`` beyond it wraps around (on the unit
sphere, a step of length ``2 pi k + r`` lands where a step of ``r`` does), so the update no
longer moves along ``-v`` by ``|v|``. DO-ADP refuses at ``init`` a step size whose clipped
gradient step alone (``alpha G``) exceeds the radius (:class:`rfed.algorithms.decentralized.
DOADP`).

Injectivity radii (standard metrics): unit sphere ``S^d``: ``pi``; Grassmann ``Gr(n, p)`` with
its canonical metric: ``pi / 2`` (the largest principal angle reaches ``pi / 2``); Euclidean
space, SPD matrices and hyperbolic spaces (Hadamard manifolds): infinite. Other manifolds are not
checked (infinite here).
"""

from __future__ import annotations

import math

from rfed.manifolds.base import Manifold

__all__ = ["injectivity_radius"]


def injectivity_radius(manifold: Manifold) -> float:
    """The injectivity radius of ``manifold`` (``inf`` when unbounded or not known).

    Parameters
    ----------
    manifold : Manifold

    Returns
    -------
    float
    """
    from rfed.manifolds.grassmann import Grassmann
    from rfed.manifolds.sphere import Sphere

    if isinstance(manifold, Sphere):
        return math.pi
    if isinstance(manifold, Grassmann):
        return math.pi / 2
    return math.inf
