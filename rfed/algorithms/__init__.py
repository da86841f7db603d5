"""rfed.algorithms."""
