"""Federated (server/agents) and decentralized (graph) private optimization algorithms."""

from rfed.algorithms.base import Algorithm, RunResult, evaluate_point

__all__ = ["Algorithm", "RunResult", "evaluate_point"]
