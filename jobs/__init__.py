"""RQ entry points (they take ids) and the handlers tasks run."""
