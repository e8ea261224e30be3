"""Saga workflows: their statuses, and what a step's run status means to the workflow it belongs to."""

from enum import Enum

# A workflow is one unit a person reads: past this many steps it is better split (and its page stays readable).
MAX_STEPS = 20
MAX_NAME_CHARS = 120


class WorkflowStatus(str, Enum):  # noqa: UP042 - the style guide's form, as RunStatus
    """Where a workflow stands: its steps run forward, then (if one fails for good) are undone backward."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"

    def __str__(self) -> str:
        return self.value


ACTIVE = (WorkflowStatus.RUNNING.value, WorkflowStatus.COMPENSATING.value)
FINISHED = (WorkflowStatus.SUCCEEDED.value, WorkflowStatus.COMPENSATED.value,
            WorkflowStatus.COMPENSATION_FAILED.value)
UNDOING_OR_UNDONE = (WorkflowStatus.COMPENSATING.value, WorkflowStatus.COMPENSATED.value,
                     WorkflowStatus.COMPENSATION_FAILED.value)


class Undo(str, Enum):  # noqa: UP042 - as above
    """Where the undo of one succeeded step stands (a step that never needs undoing has none)."""

    PENDING = "pending"  # to be undone once the steps after it are
    COMPENSATING = "compensating"  # asked for; the engine runs the handler's undo step
    COMPENSATED = "compensated"
    FAILED = "failed"  # its undo step kept failing: a person takes over
    NOT_COMPENSABLE = "not_compensable"  # its handler has no undo step: a person takes over
    NOT_ATTEMPTED = "not_attempted"  # left alone: a later step's undo failed, so undoing this one could do harm
    RESOLVED = "resolved"  # its undo failed or could not be, and a person undid it by hand and marked its run resolved
    # The step that failed, its undo not run: its error's severity 3 left it for a person (a person runs it, or
    # undoes the step by hand and resolves its run).
    MANUAL_INTERVENTION = "manual_intervention"

    def __str__(self) -> str:
        return self.value


# Run statuses in which a step's run has finished, for its workflow's purpose. Succeeded moves the workflow on;
# the others are a failure for good: dead (retries spent, non-retryable, or its own undo failed), compensated
# (it failed and undid itself), cancelled or resolved by a person. `failed` is not here: it becomes dead or
# compensating at once.
STEP_FAILED = frozenset({"dead", "compensated", "cancelled", "compensation_failed", "resolved"})
STEP_DONE = STEP_FAILED | {"succeeded"}
# Statuses of a run being undone at its workflow's request that end the undo: compensated, or failed to a person
# (compensation_failed turns dead in the same transaction).
UNDO_FAILED = frozenset({"dead", "compensation_failed", "resolved"})
UNDO_DONE = UNDO_FAILED | {"compensated"}
# A failed step's run dead for one of these reasons may still be in place: its error's severity 3 left it for a
# person with its undo not run, or its own undo failed. Undoing the steps before it could do harm (as under a step
# whose undo failed), so the workflow stops at it for a person; the value is the step's undo status meanwhile.
LEFT_IN_PLACE = {"manual_intervention": Undo.MANUAL_INTERVENTION.value, "compensation_failed": Undo.FAILED.value}
# Undo statuses of the step a stopped workflow waits at (a person runs or retries its undo, or resolves its run).
STOPPED_AT = (Undo.FAILED.value, Undo.NOT_COMPENSABLE.value, Undo.MANUAL_INTERVENTION.value)
# A run in one of these is still at work (or about to be); nothing for its workflow to do yet.
STILL_WORKING = frozenset({"pending", "running", "retry_wait", "failed", "compensating"})


def step_outcome(run_status: str) -> str:
    """Tell what a step's run status means going forward: "succeeded", "failed" (for good) or "waiting"."""
    if run_status == "succeeded":
        return "succeeded"
    return "failed" if run_status in STEP_FAILED else "waiting"


def step_key(workflow_id: int, position: int) -> str:
    """Return the idempotency key of a step's run: two advances that both start a step create one run."""
    return f"workflow:{workflow_id}:step:{position}"


def undo_failed(position: int, failed_step: int | None) -> bool:
    """Tell whether a dead step's run died undoing it: a step before the one that failed had succeeded, was asked to
    undo itself, and its undo failed (the step that failed died in its own attempt, or its own undo)."""
    return failed_step is not None and position != failed_step


def replay_consequence(position: int, workflow_status: str, failed_step: int | None, current_step: int,
                       has_undo: bool = True) -> str:
    """Say what replaying a dead step's run does to its workflow, for the person about to replay it (has_undo:
    whether its handler has an undo step)."""
    # Without an undo step a replayed step that succeeds can be undone only by hand, and a succeeded run cannot be
    # marked resolved: the workflow would stay stopped for good (helper 150).
    by_hand = (f"to have {'the steps before it undone' if position > 1 else 'it end compensated'}, undo this step "
               "by hand and mark its run resolved instead")
    if undo_failed(position, failed_step):
        if not has_undo:
            return f"It had succeeded, and its handler has no undo step: a replay runs the step again ({by_hand})."
        return ("It had succeeded, and its undo failed: a replay runs the step again, not its undo "
                "(Retry the undo, on its run page, does that).")
    if workflow_status == WorkflowStatus.COMPENSATION_FAILED.value and position == current_step:
        # It failed and stopped its workflow at once, for a person: nothing was undone.
        stays = ("A replay runs this step alone: the workflow stays stopped at it"
                 + (", the steps before it as they are" if position > 1 else ""))
        if not has_undo:
            return (f"{stays}. Its handler has no undo step: once a replay succeeds nothing here undoes it, and the "
                    f"workflow stays stopped ({by_hand}).")
        return (f"{stays}. If the replay succeeds, Compensate… on its run page undoes it"
                + (", and then the steps before it." if position > 1 else ", and the workflow ends compensated."))
    undone = workflow_status in UNDOING_OR_UNDONE
    return ("A replay runs this step alone: the workflow does not go on from it"
            + (", and the steps its compensation undid stay undone." if undone else "."))


def resolve_consequence(position: int, workflow_status: str, stopped_at: int, no_undo: tuple[int, ...] = ()) -> str:
    """Say what marking a dead step's run resolved does to its workflow, for the person about to do it (and the
    approver): resolving the step that stopped the undo says it was undone by hand, so the undo goes on (no_undo:
    the steps before it still to undo whose handlers have no undo step, where it will stop again)."""
    if workflow_status != WorkflowStatus.COMPENSATION_FAILED.value or position != stopped_at:
        return "Resolving it changes this run only: the workflow stays as it is."
    if position == 1:
        return "Resolving it says it was undone by hand: the workflow then ends compensated."
    said = "Resolving it says it was undone by hand: the workflow then goes on undoing "
    # "running its undo step" was said of a step with none, where the workflow stops again (helper 150).
    next_stop = max((step for step in no_undo if step < position), default=None)
    if next_stop == position - 1:
        return (f"{said}step {next_stop}, whose handler has no undo step: it stops there again, for a person to undo "
                "that step by hand.")
    if next_stop is not None:
        return (f"{said}step {position - 1} and the steps before it, running their undo steps, as far as step "
                f"{next_stop}, whose handler has no undo step: it stops there again, for a person.")
    earlier = "step 1, running its undo step" if position == 2 else (
        f"step {position - 1} and the steps before it, running their undo steps")
    return f"{said}{earlier}."


def steps_replay_words(steps: int, undone_failed: int) -> str:
    """Say what replaying many dead letters does to the workflows among them, after their subject ("3 of them ")."""
    many = steps > 1
    said = (f"{'are steps of saga workflows' if many else 'is a step of a saga workflow'}: a replay runs "
            f"{'each' if many else 'it'} alone, and {'its' if many else 'the'} workflow does not go on from it. "
            "Where the workflow was undone, the steps its compensation undid stay undone.")
    if undone_failed:
        plural = undone_failed > 1
        count = f"{undone_failed:,} of them" if plural else ("One of them" if many else "It")
        said += (f" {count} had succeeded and {'their' if plural else 'its'} undo failed: a replay runs "
                 f"{'those steps' if plural else 'that step'} again, not {'their' if plural else 'its'} undo "
                 "(Retry the undo, on a run's page, does that).")
    return said


def compensate_consequence(position: int, workflow_status: str, current_step: int) -> str:
    """Say what compensating one step's run does to its workflow, for the person asking and the one approving."""
    if workflow_status == WorkflowStatus.COMPENSATION_FAILED.value and position == current_step:
        # The step its workflow stopped at (replayed since): its undo lets the workflow go on. The form and the
        # approver's page said "alone", then the steps before it were undone too (helper 150).
        return (f"Its workflow stopped at step {position} for a person: once this undo works, the workflow "
                + ("ends compensated." if position == 1 else "goes on undoing the steps before it, last first."))
    return (f"Compensating runs the undo of step {position} alone: the workflow's other steps stay as they are, "
            "and its status does not change.")


def cancel_consequence(position: int, workflow_status: str) -> str:
    """Say what cancelling a step's run does to its workflow, for the person about to cancel it."""
    if workflow_status != WorkflowStatus.RUNNING.value:
        return "Cancelling it changes this run only: the workflow stays as it is."
    if position == 1:
        return "Once it ends cancelled the workflow ends too: no step before it succeeded, so nothing is undone."
    earlier = "step 1" if position == 2 else f"steps {position - 1} to 1, last first"
    return f"Once it ends cancelled the workflow stops and undoes {earlier}."


def step_words(run_id: int, position: int, workflow_id: int, workflow_status: str) -> str:
    """Name a run as a workflow's step, in plain text (a confirm dialog cannot hold a link)."""
    return f"Run #{run_id} is step {position} of workflow #{workflow_id} ({workflow_status.replace('_', ' ')})."
