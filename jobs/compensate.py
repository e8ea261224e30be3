"""The RQ job that runs a compensation: one a person or service asked for, or one whose worker died during it."""

from console.services.engine import compensation


def compensate(run_id: int) -> str:
    """Run the run's undo step; a duplicate or stale job does nothing."""
    return compensation.execute(run_id)
