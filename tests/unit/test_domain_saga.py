"""What a step's run status means to its workflow, and the key that makes a step's run unique."""

import pytest

from console.domain.saga import (
    STEP_DONE,
    STILL_WORKING,
    UNDO_DONE,
    cancel_consequence,
    compensate_consequence,
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


def test_resolving_a_step_says_where_the_undo_will_stop_again_at_a_step_with_no_undo():
    # "running its undo step" was said of a step whose handler has none (helper 150).
    assert resolve_consequence(2, "compensation_failed", 2, no_undo=(1,)) == (
        "Resolving it says it was undone by hand: the workflow then goes on undoing step 1, whose handler has no undo "
        "step: it stops there again, for a person to undo that step by hand.")
    assert resolve_consequence(4, "compensation_failed", 4, no_undo=(1, 2)) == (
        "Resolving it says it was undone by hand: the workflow then goes on undoing step 3 and the steps before it, "
        "running their undo steps, as far as step 2, whose handler has no undo step: it stops there again, for a "
        "person.")
    assert resolve_consequence(2, "compensation_failed", 2, no_undo=(3,)).endswith("step 1, running its undo step.")


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


def test_replaying_a_step_whose_handler_has_no_undo_says_only_a_person_can_undo_it():
    """It pointed at Compensate… and at Retry the undo, which such a step does not have: a replay that succeeded left
    the workflow stopped for good with nothing to press (helper 150)."""
    assert replay_consequence(2, "compensation_failed", 2, 2, has_undo=False) == (
        "A replay runs this step alone: the workflow stays stopped at it, the steps before it as they are. Its handler "
        "has no undo step: once a replay succeeds nothing here undoes it, and the workflow stays stopped (to have the "
        "steps before it undone, undo this step by hand and mark its run resolved instead).")
    assert replay_consequence(1, "compensation_failed", 3, 1, has_undo=False) == (
        "It had succeeded, and its handler has no undo step: a replay runs the step again (to have it end "
        "compensated, undo this step by hand and mark its run resolved instead).")


def test_compensating_the_step_its_workflow_stopped_at_says_the_workflow_goes_on():
    """The form and the approver's page said "alone", then the steps before it were undone too (helper 150)."""
    assert compensate_consequence(2, "compensation_failed", 2) == (
        "Its workflow stopped at step 2 for a person: once this undo works, the workflow goes on undoing the steps "
        "before it, last first.")
    assert compensate_consequence(1, "compensation_failed", 1).endswith("once this undo works, the workflow ends "
                                                                       "compensated.")
    for status, current in (("compensation_failed", 3), ("succeeded", 3), ("compensating", 2)):
        assert compensate_consequence(2, status, current) == (
            "Compensating runs the undo of step 2 alone: the workflow's other steps stay as they are, and its status "
            "does not change.")
