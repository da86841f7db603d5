"""rfed.algorithms.federated."""
