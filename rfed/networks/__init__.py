"""rfed.networks."""
