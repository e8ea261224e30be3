"""The RQ job that moves a workflow on; the engine queues it by name when one of the workflow's runs finishes."""

from console.services.recovery.workflows import advance as workflows


def advance(workflow_id: int) -> str:
    """Start the workflow's next step or undo the next one back; a duplicate or stale job does nothing."""
    return workflows.advance(workflow_id)
