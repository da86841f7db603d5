"""Steps that leave the region where the exponential map is a step: divergence, said honestly.

On a manifold of positive curvature the exponential map is one-to-one only on the ball of
radius the injectivity radius: ``Exp_x(v)`` with ``|v|_x`` beyond it wraps around (on the unit
sphere, a step of length ``2 pi k + r`` lands where a step of ``r`` does), so the update no
longer moves along ``-v`` by ``|v|``: the iterate is a valid point, but the run has left the
region where its steps mean anything (a step size of ``1e6`` on the sphere gives points that
look uniformly random and never fail the finiteness or on-manifold checks).

What is checked is the part of a step that the step size controls: the step size times the
(clipped) gradient estimate before the privacy noise. The noise alone may carry a step around
the sphere at a small epsilon, as the private algorithms are written; that is not the step
size's doing and is not flagged. The algorithms raise :class:`StepBeyondInjectivityRadius`, a
``FloatingPointError``, which :meth:`rfed.algorithms.base.Algorithm.run` reports as a
divergence naming the step size argument; DO-ADP, whose steps carry a momentum of noisy
gradients, refuses at ``init`` a step size whose clipped gradient step alone (``alpha G``)
exceeds the radius.

Injectivity radii (standard metrics): unit sphere ``S^d``: ``pi``; Grassmann ``Gr(n, p)`` with
its canonical metric: ``pi / 2`` (the largest principal angle reaches ``pi / 2``); Euclidean
space, SPD matrices and hyperbolic spaces (Hadamard manifolds): infinite. Other manifolds are not
checked (infinite here).
"""

from __future__ import annotations

import math

import numpy as np

from rfed.manifolds.base import Manifold

__all__ = ["StepBeyondInjectivityRadius", "injectivity_radius", "check_step_length"]


class StepBeyondInjectivityRadius(FloatingPointError):
    """A step longer than the manifold's injectivity radius (the run diverged)."""


def injectivity_radius(manifold: Manifold) -> float:
    """The injectivity radius of ``manifold`` (``inf`` when unbounded or not known)."""
    from rfed.manifolds.grassmann import Grassmann
    from rfed.manifolds.sphere import Sphere

    if isinstance(manifold, Sphere):
        return math.pi
    if isinstance(manifold, Grassmann):
        return math.pi / 2
    return math.inf


def check_step_length(manifold: Manifold, x: np.ndarray, step: np.ndarray, argument: str,
                      radius: float | None = None) -> None:
    """Raise :class:`StepBeyondInjectivityRadius` if a step ``Exp_x(step)`` is longer than the
    injectivity radius.

    Parameters
    ----------
    manifold : Manifold
    x : array, shape ``(*batch, *point_shape)``
    step : array, shape ``(*batch, *point_shape)``
        Tangent vectors at ``x``: the step size times the gradient estimate (before noise).
    argument : str
        The user's name for the step size, named in the message.
    radius : float, optional
        :func:`injectivity_radius` of ``manifold`` when the caller computed it once.
    """
    radius = injectivity_radius(manifold) if radius is None else radius
    if not math.isfinite(radius):
        return
    length = float(np.max(manifold.norm(x, step), initial=0.0))
    if length > radius:
        raise StepBeyondInjectivityRadius(
            f"a gradient step of length {length:.3g} (the step size times the clipped "
            f"gradient, before noise) exceeds the injectivity radius {radius:.4g} of "
            f"{manifold}: the exponential map wraps around and the update no longer follows "
            f"the gradient; reduce '{argument}'"
        )
