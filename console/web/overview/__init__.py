"""Overview area."""
