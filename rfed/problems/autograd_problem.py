"""A problem from a user's autograd loss: bring your own objective on any manifold."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from rfed.manifolds import Manifold
from rfed.problems.base import Problem

__all__ = ["AutogradProblem"]


class AutogradProblem(Problem):
    r"""Finite-sum problem whose per-sample loss is a batched autograd function.

    Parameters
    ----------
    manifold : Manifold
    loss : callable
        ``loss(x, batch) -> losses`` written with ``autograd.numpy`` for batched inputs: ``x`` of
        shape ``(*lead, *point_shape)`` and every ``batch[key]`` of shape ``(*lead, b, ...)``,
        returning the per-sample losses of shape ``(*lead, b)``. It must broadcast over any
        number of leading axes (write ``x[..., None, :]`` and reduce over the last axes, or use
        ``einsum`` with ellipses). Its Euclidean gradient is taken with respect to a smooth
        extension of the loss to the ambient space.
    data : mapping of str to array, each of shape ``(n_agents, n_max, ...)``
    counts : int array, shape ``(n_agents,)``, optional
    gradient_bound : float, optional
        Per-sample gradient bound (clipping level).
    reference_method : str
        Solver of :func:`rfed.manifolds.interop.solve_reference` for the pooled objective.

    Notes
    -----
    Per-sample gradients without a loop over samples: ``x`` is copied once per sample into an
    array ``X`` of shape ``(*lead, b, *point_shape)`` and every sample is made a batch of one
    (``(*lead, b, 1, ...)``). The loss of sample ``j`` then depends only on ``X[..., j, :]``,
    so the gradient of the *sum* of all losses with respect to ``X`` holds each sample's own
    Euclidean gradient in its own copy; :meth:`Manifold.egrad2rgrad` converts them all at once.
    """

    name = "autograd"

    def __init__(
        self,
        manifold: Manifold,
        loss: Callable,
        data: Mapping[str, np.ndarray],
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
        reference_method: str = "trust_regions",
    ):
        if not callable(loss):
            raise TypeError(f"argument 'loss' must be callable, got {type(loss).__name__}")
        super().__init__(manifold, data, counts=counts, gradient_bound=gradient_bound)
        self.loss = loss
        self.reference_method = reference_method
        self._check_loss()

    def _check_loss(self) -> None:
        """Evaluate the loss on two samples of agent 0 and check the output shape."""
        x = self.manifold.random_point(np.random.default_rng(0))
        batch = {k: v[:1, :2] for k, v in self.data.items()}
        b = batch[next(iter(batch))].shape[1]
        out = np.asarray(self.sample_loss(x[None], batch))
        if out.shape != (1, b):
            raise ValueError(
                f"AutogradProblem: argument 'loss' returned shape {out.shape} for x of shape "
                f"{(1, *self.manifold.point_shape)} and a batch of {b} samples; expected (1, {b}) "
                "(one loss per sample, batched over leading axes)"
            )

    def sample_loss(self, x, batch):
        x = np.asarray(x, dtype=float)
        out = self.loss(x, batch)
        self._check_finite(x, out, "returned")
        return out

    def _check_finite(self, x: np.ndarray, values, what: str) -> None:
        """A user's loss giving NaN/inf at finite points is an error, never a silent NaN run.

        (Non-finite *points* are a diverged run, which :meth:`Algorithm.run` reports.)
        """
        values = np.asarray(values, dtype=float)
        bad = ~np.isfinite(values)
        mask = getattr(self, "mask", None)
        if mask is not None and not mask.all() and values.shape[:2] == mask.shape:
            # a full-data call: the zero padding past counts[i] is never used, never checked
            bad = bad & mask.reshape(mask.shape + (1,) * (values.ndim - 2))
        if np.any(bad) and np.all(np.isfinite(x)):
            raise ValueError(
                f"AutogradProblem: argument 'loss' {what} {int(bad.sum())} non-finite value(s) "
                f"(NaN/inf) of {values.size} at finite points; check the loss's domain (e.g. "
                "log of a non-positive number, division by zero)"
            )

    def sample_rgrad(self, x, batch):
        from autograd import grad

        x = np.asarray(x, dtype=float)
        k = len(self.manifold.point_shape)
        n_lead = x.ndim - k
        first = batch[next(iter(batch))]
        b = first.shape[n_lead]
        shape = x.shape[:n_lead] + (b,) + x.shape[n_lead:]
        copies = np.broadcast_to(np.expand_dims(x, n_lead), shape)
        singles = {key: np.expand_dims(v, n_lead + 1) for key, v in batch.items()}

        def total(xs):
            return self.loss(xs, singles).sum()

        egrad = grad(total)(np.array(copies))
        self._check_finite(x, egrad, "has a gradient with")
        return self.manifold.egrad2rgrad(copies, egrad)

    def pooled_cost(self):
        """The global objective as an autograd function of one point (for pymanopt).

        Returns
        -------
        callable
            ``x -> f(x)``, differentiable by autograd.
        """
        import autograd.numpy as anp

        weights = self.mask / self.n_samples
        ones = np.ones((self.n_agents,) + (1,) * len(self.manifold.point_shape))

        def cost(x):
            losses = self.loss(x * ones, self.data)
            return anp.sum(losses * weights)

        return cost

    def _compute_reference(self) -> np.ndarray:
        """pymanopt on the pooled objective, started from the best of 20 random points."""
        from rfed.manifolds.interop import solve_reference

        cost = self.pooled_cost()
        starts = self.manifold.random_point(np.random.default_rng(0), 20)
        x0 = starts[int(np.argmin([cost(s) for s in starts]))]
        return solve_reference(self.manifold, cost, x0, method=self.reference_method)
