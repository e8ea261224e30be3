"""Runs: the list, one run with its timeline, a Gantt of many, and saga workflows (their steps are runs)."""

from console.web.runs import submit, views, workflows  # noqa: F401 - importing them registers their routes
from console.web.runs.blueprint import bp  # noqa: F401 - what console.web.register looks for
