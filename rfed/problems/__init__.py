"""rfed.problems."""
