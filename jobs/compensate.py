"""The RQ job that runs a compensation a person or service asked for."""

from console.services.engine import compensation


def compensate(run_id: int) -> str:
    """Undo a succeeded run whose workflow failed later; a duplicate or stale job does nothing."""
    return compensation.execute(run_id)
