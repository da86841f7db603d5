"""rfed.algorithms.decentralized."""
