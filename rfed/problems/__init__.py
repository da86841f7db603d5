"""Objectives split across agents: per-sample loss and Riemannian gradient on a manifold."""

from rfed.problems.base import Problem, sample_without_replacement

__all__ = ["Problem", "sample_without_replacement"]
