"""Runs: the list, one run with its timeline, and a Gantt of many."""
