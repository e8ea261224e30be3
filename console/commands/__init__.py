"""Groups of `rebound` commands that outgrew console/cli.py, one module per area."""
