"""rfed.experiments."""
