"""rfed.datasets."""
