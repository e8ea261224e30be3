"""Retry policies: versions in force and what the console shows beside them."""
