"""Tasks area."""
