"""What a step's run status means to its workflow, and the key that makes a step's run unique."""

import pytest

from console.domain.saga import (
    STEP_DONE,
    STILL_WORKING,
    UNDO_DONE,
    cancel_consequence,
    replay_consequence,
    resolve_consequence,
    step_key,
    step_outcome,
)
from console.domain.statuses import RunStatus


@pytest.mark.parametrize(("status", "outcome"), [
    ("succeeded", "succeeded"), ("dead", "failed"), ("compensated", "failed"), ("cancelled", "failed"),
    ("compensation_failed", "failed"), ("pending", "waiting"), ("running", "waiting"), ("retry_wait", "waiting"),
    ("failed", "waiting"), ("compensating", "waiting"),
])
def test_a_step_moves_its_workflow_on_only_once_its_run_has_finished(status, outcome):
    assert step_outcome(status) == outcome


def test_every_run_status_is_either_finished_or_still_at_work_for_a_workflow():
    statuses = {status.value for status in RunStatus}
    assert statuses == STEP_DONE | UNDO_DONE | STILL_WORKING
    assert not (STEP_DONE | UNDO_DONE) & STILL_WORKING


def test_a_steps_run_key_names_the_workflow_and_the_step():
    assert step_key(7, 2) == "workflow:7:step:2" != step_key(72, 2)


@pytest.mark.parametrize(("position", "status", "stopped_at", "said"), [
    (3, "compensation_failed", 3, "goes on undoing step 2 and the steps before it, running their undo steps."),
    (2, "compensation_failed", 2, "goes on undoing step 1, running its undo step."),
    (1, "compensation_failed", 1, "the workflow then ends compensated."),
    (3, "compensation_failed", 2, "Resolving it changes this run only: the workflow stays as it is."),
    (2, "compensated", 0, "Resolving it changes this run only: the workflow stays as it is."),
])
def test_resolving_a_step_goes_on_with_the_undo_only_where_it_stopped_it(position, status, stopped_at, said):
    assert resolve_consequence(position, status, stopped_at).endswith(said)


def test_cancelling_a_step_says_what_follows_for_its_workflow():
    assert cancel_consequence(1, "running") == (
        "Once it ends cancelled the workflow ends too: no step before it succeeded, so nothing is undone.")
    assert cancel_consequence(2, "running") == "Once it ends cancelled the workflow stops and undoes step 1."
    assert cancel_consequence(4, "running") == (
        "Once it ends cancelled the workflow stops and undoes steps 3 to 1, last first.")
    # An undo already under way, or a workflow that ended: a step's cancel no longer moves it.
    assert cancel_consequence(2, "compensating") == "Cancelling it changes this run only: the workflow stays as it is."


@pytest.mark.parametrize(("position", "status", "failed_step", "current_step", "said"), [
    # The step that failed stopped its workflow at once (severity 3, or its own undo failed): nothing was undone.
    (2, "compensation_failed", 2, 2, "A replay runs this step alone: the workflow stays stopped at it, the steps "
                                     "before it as they are. If the replay succeeds, Compensate… on its run page "
                                     "undoes it, and then the steps before it."),
    (1, "compensation_failed", 1, 1, "A replay runs this step alone: the workflow stays stopped at it. If the replay "
                                     "succeeds, Compensate… on its run page undoes it, and the workflow ends "
                                     "compensated."),
    # An earlier step's undo stopped it: the steps after it were undone.
    (3, "compensation_failed", 3, 2, "A replay runs this step alone: the workflow does not go on from it, and the "
                                     "steps its compensation undid stay undone."),
    (2, "compensation_failed", 3, 2, "It had succeeded, and its undo failed: a replay runs the step again, not its "
                                     "undo (Retry the undo, on its run page, does that)."),
    (2, "running", None, 2, "A replay runs this step alone: the workflow does not go on from it."),
])
def test_replaying_a_step_says_what_follows_for_its_workflow(position, status, failed_step, current_step, said):
    assert replay_consequence(position, status, failed_step, current_step) == said
