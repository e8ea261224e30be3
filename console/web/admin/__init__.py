"""Admin area."""
