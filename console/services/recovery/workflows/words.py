"""What an action on a run does to the saga workflow it is a step of, in plain text ('' for a run outside one).

One source for the run page, a dead letter's row and fix form, the approver's page and the runbooks' logs.
"""

from collections.abc import Callable

from console.domain.saga import (
    Undo,
    WorkflowStatus,
    cancel_consequence,
    compensate_consequence,
    replay_consequence,
    resolve_consequence,
    step_words,
)
from console.models import Run, Workflow
from console.services.engine.compensation import has_undo_step

# How a stopped workflow's note names its failed step's letter, written when it failed.
FOR_A_PERSON = ", a dead letter for a person)"


def letter_settled(letter_id: int, status: str, by: str | None, at) -> str:
    """Say, in place of FOR_A_PERSON, how a person settled the failed step's dead letter since without a replay."""
    when = f" at {at:%Y-%m-%d %H:%M} UTC" if at else ""
    return f"; its dead letter #{letter_id} was {status} by {by or 'someone'}{when})"


def replayed_alone(run: Run) -> str:
    """Say what became of a failed step's run that a person replayed on its own since it failed."""
    return (f"its run #{run.id} was replayed alone since and is {run.status.replace('_', ' ')} now, which does not "
            "resume the workflow")


def as_step(run: Run | None, consequence: Callable[[Workflow], str]) -> str:
    """Name the run as its workflow's step, then say what the action does to that workflow ('' outside one)."""
    workflow = run.workflow if run is not None and run.workflow_id else None
    if workflow is None:
        return ""
    return step_words(run.id, run.workflow_step, workflow.id, workflow.status) + " " + consequence(workflow)


def workflow_replay(run: Run | None) -> str:
    """Say what replaying this dead run does to its workflow."""
    return as_step(run, lambda workflow: replay_consequence(run.workflow_step, workflow.status, workflow.failed_step,
                                                                 workflow.current_step, has_undo_step(run.handler)))


def workflow_cancel(run: Run | None) -> str:
    """Say what cancelling this run does to its workflow (the Cancel on a step's run page said nothing of it)."""
    return as_step(run, lambda workflow: cancel_consequence(run.workflow_step, workflow.status))


def workflow_compensation(run: Run | None) -> str:
    """Say what compensating this run does to its workflow."""
    return as_step(run, lambda workflow: compensate_consequence(run.workflow_step, workflow.status,
                                                                     workflow.current_step))


def workflow_resolve(run: Run | None) -> str:
    """Say what marking this dead run resolved does to its workflow."""
    return as_step(run, lambda workflow: resolve_consequence(run.workflow_step, workflow.status,
                                                             workflow.current_step, _without_undo(workflow)))


def _without_undo(workflow: Workflow) -> tuple[int, ...]:
    """Return the steps of a stopped workflow still to undo (left as they were) whose handlers have no undo step."""
    if workflow.status != WorkflowStatus.COMPENSATION_FAILED.value:
        return ()
    return tuple(step.position for step in workflow.steps
                 if step.position < workflow.current_step and step.compensation_status == Undo.NOT_ATTEMPTED.value
                 and not has_undo_step(step.handler))
