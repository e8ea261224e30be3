"""The RQ job that executes one attempt of a run."""

from console.services.engine import execute as engine


def run_attempt(run_id: int, expected_attempt: int) -> str:
    """Claim the run at this attempt number and execute it; a stale or duplicate job does nothing."""
    return engine.execute(run_id, expected_attempt)
