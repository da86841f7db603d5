"""rfed.privacy."""
