"""RQ entry points for runbooks (they take the execution's id)."""

from console.services.recovery import runbook_runner


def run_runbook(execution_id: int) -> str:
    """Run a queued runbook execution; a late duplicate does nothing."""
    return runbook_runner.execute(execution_id)


def preview_runbook(execution_id: int) -> str:
    """Dry-run an execution awaiting approval, so its approver reads the changes it would make."""
    return runbook_runner.preview(execution_id)
