"""Auth area."""
