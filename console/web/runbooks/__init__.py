"""Runbooks area: tested procedures with a dry-run, run on a worker, gated by approval when risky."""
