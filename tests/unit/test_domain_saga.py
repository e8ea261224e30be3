"""What a step's run status means to its workflow, and the key that makes a step's run unique."""

import pytest

from console.domain.saga import STEP_DONE, STILL_WORKING, UNDO_DONE, step_key, step_outcome
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
