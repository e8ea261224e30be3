"""Saga workflows: steps run in order; when one fails for good the succeeded ones are undone backward, once each."""

import threading

import pytest
from sqlalchemy import func, select

from console.extensions import db
from console.models import AuditEntry, DeadLetter, Workflow
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq import resolve as resolving
from console.services.engine import compensation, control
from console.services.engine.control import replay
from console.services.engine.submit import submit as submit_run
from console.services.errors import Conflict, InvalidInput
from console.services.people import tenants
from console.services.recovery import undo_retry
from console.services.recovery.workflows import advance, query
from console.services.recovery.workflows.submit import submit
from tests.factories import FATAL, OK, Runs, run_now, three_steps
from tests.helpers import wait_for

UNDO_KINDS = ("compensating", "compensation_attempt_failed", "compensated", "compensation_failed")


def test_steps_run_one_after_another_and_the_workflow_succeeds(saga):
    workflow_id = saga.submit(three_steps(third=OK))
    assert [run.workflow_step for run in saga.runs(workflow_id)] == [1]  # only the first step is started
    for position in (1, 2, 3):
        assert saga.execute(workflow_id, position) == "succeeded"
        assert [run.workflow_step for run in saga.runs(workflow_id)] == list(range(1, position + 1))
        saga.advance(workflow_id)
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step, workflow.finished_at) == ("succeeded", 3, saga.clock())
    assert {run.source for run in saga.runs(workflow_id)} == {"workflow"}
    assert [step.compensation_status for step in saga.steps(workflow_id)] == [None, None, None]
    assert saga.advance(workflow_id) == "succeeded"  # a late duplicate changes nothing


def test_step_3_fails_so_steps_2_then_1_are_undone_once_each_though_2s_undo_fails_once(saga, runs):
    workflow_id = saga.submit(three_steps())
    for position in (1, 2):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    assert saga.execute(workflow_id, 3) == "dead"  # non-retryable, no undo of its own: a dead letter
    assert saga.advance(workflow_id) == "undoing"
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.failed_step, workflow.current_step) == ("compensating", 3, 2)
    assert "step 3 failed for good" in workflow.note and "carrier_rejected" in workflow.note
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["pending", "compensating", None]
    assert saga.run(workflow_id, 1).status == "succeeded"  # not before step 2 is undone

    assert saga.undo(workflow_id, 2) == "compensated"  # first try fails, the engine tries again
    assert saga.advance(workflow_id) == "undoing"
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"

    assert saga.events(*UNDO_KINDS, workflow_id=workflow_id) == [
        (2, "compensating"), (2, "compensation_attempt_failed"), (2, "compensated"),
        (1, "compensating"), (1, "compensated")]
    steps = saga.steps(workflow_id)
    assert [step.compensation_status for step in steps] == ["compensated", "compensated", None]
    assert all(step.compensation_started_at and step.compensation_finished_at for step in steps[:2])
    assert saga.get(workflow_id).finished_at == saga.clock()
    assert [letter.error_code for letter in runs.dead_letters(saga.run(workflow_id, 3).id)] == ["carrier_rejected"]
    assert saga.advance(workflow_id) == "compensated" and saga.undo(workflow_id, 2) == "skipped"


def test_end_to_end_on_real_workers_steps_2_then_1_are_undone_once_each(saga, workers):
    workers()
    workflow_id = saga.submit(three_steps())
    wait_for(lambda: saga.status(workflow_id) in ("compensated", "compensation_failed"), 60, 0.1,
             f"workflow {workflow_id} to finish compensating")
    assert saga.status(workflow_id) == "compensated"
    assert [run.status for run in saga.runs(workflow_id)] == ["compensated", "compensated", "dead"]
    # In reverse order, each once; step 2's undo failed on its first try and the engine tried it again.
    assert saga.events(*UNDO_KINDS, workflow_id=workflow_id) == [
        (2, "compensating"), (2, "compensation_attempt_failed"), (2, "compensated"),
        (1, "compensating"), (1, "compensated")]
    assert saga.events("running", workflow_id=workflow_id) == [(1, "running"), (2, "running"), (3, "running")]


def test_a_step_with_no_undo_ends_the_workflow_compensation_failed_for_a_person(saga, runs):
    # Step 2 (demo.noop) has no undo step: step 1 is left alone, for a person to judge.
    workflow_id = stopped_at_a_step_with_no_undo(saga)
    workflow = saga.get(workflow_id)
    assert "step 2 is not compensable" in workflow.note
    assert workflow.note.endswith("steps before it were left as they are. Handler python:demo.noop has no undo step.")
    assert [step.compensation_status for step in saga.steps(workflow_id)] == [
        "not_attempted", "not_compensable", None]
    assert saga.steps(workflow_id)[1].note == "handler python:demo.noop has no undo step"
    [letter] = runs.dead_letters(saga.run(workflow_id, 2).id)
    assert letter.error_code == "not_compensable" and "has no undo step" in letter.error_message
    assert saga.run(workflow_id, 1).status == "succeeded"
    assert saga.events(*UNDO_KINDS, workflow_id=workflow_id) == [(2, "compensating"), (2, "compensation_failed")]


def stopped_at_a_step_with_no_undo(saga) -> int:
    """A workflow whose step 3 failed for good and whose step 2 (no undo step) stopped the undo before step 1."""
    steps = [{"handler": "demo.flaky_compensated", "params": OK}, {"handler": "demo.noop"},
             {"handler": "demo.flaky", "params": FATAL}]
    workflow_id = saga.submit(steps)
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    assert saga.undo(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    return workflow_id


def resolve_by_hand(run_id: int, clock) -> None:
    """A person undid the step by hand and marks its dead run resolved (as the DLQ and resolve_runs do)."""
    done = resolving.resolve(resolving.plan([run_id], None), "refunded by hand", Actor("olga"), clock())
    assert list(done.runs) == [run_id]
    db.session.commit()


def test_resolving_the_step_that_stopped_the_undo_goes_on_undoing_the_steps_before_it(saga):
    workflow_id = stopped_at_a_step_with_no_undo(saga)
    resolve_by_hand(saga.run(workflow_id, 2).id, saga.clock)
    assert saga.advance(workflow_id) == "undoing"  # step 1's undo asked for
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step, workflow.finished_at) == ("compensating", 1, None)
    assert "step 3 failed for good" in workflow.note and "not compensable" not in workflow.note
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", "resolved", None]
    # The trail says who undid step 2 by hand, between its failed undo and step 1's.
    trail = [(entry.position, entry.kind, entry.actor) for entry in query.detail(saga.get(workflow_id)).trail]
    assert trail == [(2, "compensating", f"workflow #{workflow_id}"), (2, "compensation_failed", None),
                     (2, "resolved", "olga"), (1, "compensating", f"workflow #{workflow_id}"), (1, "compensated", None)]


def test_a_step_replayed_after_its_undo_failed_then_compensated_lets_the_workflow_undo_the_steps_before_it(
        saga, client, auth):
    # Replay ran the step again (it warns so); the person then undid it with Compensate. The workflow stayed
    # compensation_failed for good, its step's undo "failed" beside a run compensated, step 1 never undone (helper 105).
    workflow_id = saga.submit(three_steps(second={"fail_times": 0, "undo_fail_times": 3}))
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    assert saga.undo(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    stopper = saga.run(workflow_id, 2)
    replay(DeadLetter.query.filter_by(run_id=stopper.id).one(), Actor("olga"), clock=saga.clock)
    assert saga.execute(workflow_id, 2) == "succeeded"
    assert saga.advance(workflow_id) == "compensation_failed"  # a replay runs the step alone
    auth.as_role("operator")
    page = " ".join(client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True).split())
    # Its run page has no Retry the undo for a succeeded run: the page points at Compensate.
    assert (f'Its run was replayed since and succeeded: <a href="/runs/{stopper.id}">compensate step 2</a> on its run '
            "page; once that undo works, the steps before it are undone too.") in page
    assert "retry the undo of step 2" not in page
    compensation.start(saga.run(workflow_id, 2), Actor("olga"), cause="undo the charge", now=saga.clock(),
                       reason=compensation.REQUESTED)  # Compensate on the run page, approved
    db.session.commit()
    assert saga.undo(workflow_id, 2) == "compensated"  # its fourth undo works
    assert saga.advance(workflow_id) == "undoing"  # step 1's undo asked for
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", "compensated", None]


def test_the_runbooks_dry_run_tells_the_approver_what_resolving_or_fixing_a_step_does_to_its_workflow(saga, staff):
    workflow_id = stopped_at_a_step_with_no_undo(saga)
    stopper, failed = saga.run(workflow_id, 2), saga.run(workflow_id, 3)
    dry = run_now("resolve_runs", {"runs": f"{stopper.id}", "note": "refunded by hand"}, staff["olga"],
                  clock=saga.clock, dry_run=True)
    assert (f"Run #{stopper.id} is step 2 of workflow #{workflow_id} (compensation failed). Resolving it says it was "
            "undone by hand: the workflow then goes on undoing step 1, running its undo step.") in dry.log
    letter = DeadLetter.query.filter_by(run_id=failed.id).one()
    fix = run_now("fix_params_and_replay", {"dead_letter": letter.id, "params": '{"fail_times": 0}'},
                  staff["olga"], clock=saga.clock, dry_run=True)
    assert (f"Run #{failed.id} is step 3 of workflow #{workflow_id} (compensation failed). A replay runs this step "
            "alone: the workflow does not go on from it, and the steps its compensation undid stay undone.") in fix.log


def test_a_step_a_person_compensated_is_recorded_and_the_undo_passes_it_by(saga):
    workflow_id = stopped_at_a_step_with_no_undo(saga)
    first = saga.run(workflow_id, 1)
    compensation.start(first, Actor("olga"), cause="the order was cancelled", now=saga.clock(),
                       reason=compensation.REQUESTED)  # Compensate on the run page, approved
    db.session.commit()
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensation_failed"  # step 2 still waits for a person
    assert [step.compensation_status for step in saga.steps(workflow_id)] == [
        "compensated", "not_compensable", None]
    by_hand = saga.steps(workflow_id)[0]  # its undo's times, from its run's timeline
    asked, undone = (Runs().events(first.id, kind)[-1].at for kind in ("compensating", "compensated"))
    assert (by_hand.compensation_started_at, by_hand.compensation_finished_at) == (asked, undone)
    resolve_by_hand(saga.run(workflow_id, 2).id, saga.clock)
    assert saga.advance(workflow_id) == "compensated"  # step 1 is not undone twice
    assert saga.events("compensating", workflow_id=workflow_id) == [(2, "compensating"), (1, "compensating")]


def test_an_undo_that_keeps_failing_ends_compensation_failed_after_the_engines_retries(saga, runs):
    workflow_id = saga.submit(three_steps(second={"fail_times": 0, "undo_fail_times": 9}))
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    assert saga.undo(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["not_attempted", "failed", None]
    assert len([kind for _, kind in saga.events("compensation_attempt_failed", workflow_id=workflow_id)]) == 3
    [letter] = runs.dead_letters(saga.run(workflow_id, 2).id)
    assert letter.error_code == "compensation_failed" and "undo failure 3 of 9" in letter.error_message


# Its error's severity 3 leaves the step for a person, its undo not run (seed 004: a person looks first).
HELD = {"fail_times": 9, "error": "compensable", "severity": 3, "code": "label_unclear",
        "message": "the carrier's answer does not say whether parcel 7 was labelled"}


def held_at_step_2(saga, second=HELD) -> int:
    """A workflow whose step 1 succeeded and whose step 2 failed, left in place for a person."""
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": OK},
                               {"handler": "demo.flaky_compensated", "params": second}, {"handler": "demo.noop"}])
    assert saga.execute(workflow_id, 1) == "succeeded"
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    return workflow_id


def test_a_step_its_severity_3_error_left_for_a_person_stops_the_workflow_before_anything_is_undone(saga):
    # Step 1 was undone while step 2, which may have labelled the parcel, was still in place: by the rule for an
    # undo that fails, undoing an earlier step under one still in place could do harm (helper 148, note 49).
    workflow_id = held_at_step_2(saga)
    held = saga.run(workflow_id, 2)
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step, workflow.failed_step) == ("compensation_failed", 2, 2)
    assert workflow.finished_at == saga.clock()
    assert workflow.note == (
        f"step 2 failed for good and waits for a person: its error's severity 3 left it with its undo not run "
        f"(run #{held.id}, a dead letter for a person); steps before it were left as they are. label_unclear: the "
        "carrier's answer does not say whether parcel 7 was labelled")
    assert [step.compensation_status for step in saga.steps(workflow_id)] == [
        "not_attempted", "manual_intervention", None]
    assert saga.run(workflow_id, 1).status == "succeeded"
    assert saga.events(*UNDO_KINDS, workflow_id=workflow_id) == []
    assert saga.advance(workflow_id) == "compensation_failed"  # it waits for a person, however often advanced


def test_running_the_held_steps_undo_then_undoes_the_steps_before_it(saga):
    workflow_id = held_at_step_2(saga)
    held = saga.run(workflow_id, 2)
    retried = undo_retry.retry(held.id, Actor("olga"), clock=saga.clock)  # Run the undo, on its run page
    assert retried.workflow_id == workflow_id
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step, workflow.finished_at) == ("compensating", 2, None)
    assert workflow.note == (f"step 2 failed for good (label_unclear: the carrier's answer does not say whether "
                             f"parcel 7 was labelled): a person had its undo run (run #{held.id})")
    assert query.detail(workflow).note == workflow.note  # not read as a replay of the failed step
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["pending", "compensating", None]
    assert saga.advance(workflow_id) == "waiting"  # step 1 waits for step 2's undo
    assert saga.undo(workflow_id, 2) == "compensated"
    assert saga.advance(workflow_id) == "undoing"
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", "compensated", None]
    assert saga.events("compensating", workflow_id=workflow_id) == [(2, "compensating"), (1, "compensating")]


def test_resolving_the_held_step_by_hand_goes_on_undoing_the_steps_before_it(saga):
    workflow_id = held_at_step_2(saga)
    resolve_by_hand(saga.run(workflow_id, 2).id, saga.clock)
    assert saga.advance(workflow_id) == "undoing"
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", "resolved", None]


def test_a_step_whose_own_undo_failed_stops_the_workflow_until_its_undo_is_retried(saga):
    # It failed, its own undo kept failing: it may be half in place, so step 1 waits for it, as under a step 2 that
    # had succeeded and whose undo failed.
    workflow_id = held_at_step_2(saga, {"fail_times": 9, "error": "compensable", "code": "card_declined",
                                        "undo_fail_times": 3})
    stuck = saga.run(workflow_id, 2)
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step, workflow.failed_step) == ("compensation_failed", 2, 2)
    assert workflow.note == (
        f"step 2 failed for good and could not be undone by its own undo step (run #{stuck.id}, a dead letter for a "
        "person); steps before it were left as they are. card_declined: RetryableError: undo_flaky: undo failure 3 "
        "of 3")
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["not_attempted", "failed", None]
    undo_retry.retry(stuck.id, Actor("olga"), clock=saga.clock)  # Retry the undo: its 4th try works
    assert saga.get(workflow_id).note == f"step 2 failed for good: a person had its undo run (run #{stuck.id})"
    assert saga.undo(workflow_id, 2) == "compensated"
    assert saga.advance(workflow_id) == "undoing"
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"


def test_a_step_left_for_a_person_with_no_undo_step_reads_not_compensable_and_is_resolved_by_hand(saga):
    # Its note said "its undo not run" and its undo "manual intervention", for a handler with none (helper 150).
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": OK},
                               {"handler": "demo.flaky", "params": HELD}])
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    held = saga.run(workflow_id, 2)
    assert saga.get(workflow_id).note.startswith(
        "step 2 failed for good and waits for a person: its error's severity 3 left it for a person, and its handler "
        f"has no undo step (run #{held.id}, a dead letter for a person); steps before it were left as they are.")
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["not_attempted", "not_compensable"]
    resolve_by_hand(held.id, saga.clock)
    assert saga.advance(workflow_id) == "undoing"
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"


def test_a_stopped_step_replayed_then_compensated_records_when_its_undo_started(saga):
    # "Undo started" read "—" beside its "Undo ended" (helper 150).
    workflow_id = held_at_step_2(saga, {**HELD, "fail_times": 1})
    held = saga.run(workflow_id, 2)
    replay(DeadLetter.query.filter_by(run_id=held.id).one(), Actor("olga"), clock=saga.clock)
    assert saga.execute(workflow_id, 2) == "succeeded"
    saga.clock.advance(60)
    asked = saga.clock()
    compensation.start(saga.run(workflow_id, 2), Actor("olga"), cause="undo the label", now=asked,
                       reason=compensation.REQUESTED)  # Compensate… on its run page, approved
    db.session.commit()
    saga.clock.advance(5)
    assert saga.undo(workflow_id, 2) == "compensated"
    assert saga.advance(workflow_id) == "undoing"  # step 1's undo asked for
    step = saga.steps(workflow_id)[1]
    assert (step.compensation_status, step.compensation_started_at) == ("compensated", asked)
    assert step.compensation_finished_at >= asked


def test_an_undo_that_fails_again_keeps_its_error_code_as_written_in_the_workflows_note(saga):
    # "Compensable: RetryableError…": the note made the code the head of a sentence (helper 150).
    workflow_id = held_at_step_2(saga, {**HELD, "undo_fail_times": 9})
    undo_retry.retry(saga.run(workflow_id, 2).id, Actor("olga"), clock=saga.clock)
    assert saga.undo(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    note = saga.get(workflow_id).note
    assert note.startswith("step 2 could not be undone") and ". label_unclear: " in note, note


def test_resolving_a_held_step_says_the_undo_stops_again_at_a_step_with_no_undo(saga, staff):
    workflow_id = saga.submit([{"handler": "demo.noop"}, {"handler": "demo.flaky_compensated", "params": HELD}])
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    saga.execute(workflow_id, 2)
    assert saga.advance(workflow_id) == "compensation_failed"
    held = saga.run(workflow_id, 2)
    dry = run_now("resolve_runs", {"runs": f"{held.id}", "note": "voided by hand"}, staff["olga"], clock=saga.clock,
                  dry_run=True)
    assert ("Resolving it says it was undone by hand: the workflow then goes on undoing step 1, whose handler has no "
            "undo step: it stops there again, for a person to undo that step by hand.") in dry.log
    resolve_by_hand(held.id, saga.clock)
    assert saga.advance(workflow_id) == "undoing"
    saga.undo(workflow_id, 1)
    assert saga.advance(workflow_id) == "compensation_failed"  # as it said
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["not_compensable", "resolved"]


def test_a_first_step_left_for_a_person_ends_the_workflow_stopped_not_compensated(saga):
    # "compensated" with nothing undone and step 1 still in place read as all rolled back.
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": HELD}, {"handler": "demo.noop"}])
    assert saga.execute(workflow_id, 1) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    held = saga.run(workflow_id, 1)
    assert saga.get(workflow_id).note.startswith(
        f"step 1 failed for good and waits for a person: its error's severity 3 left it with its undo not run (run "
        f"#{held.id}, a dead letter for a person). label_unclear: ")
    undo_retry.retry(held.id, Actor("olga"), clock=saga.clock)
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", None]


def test_a_step_a_person_cancelled_says_so_not_that_it_failed(saga):
    # Its note read "step 1 failed for good: … ended cancelled (flaky: flaky failure 1 of 5)": a person's cancel
    # called a failure, an earlier attempt's error given as its cause, and "compensated" with nothing undone.
    workflow_id = saga.submit([{"handler": "demo.flaky", "params": {"fail_times": 1}}, {"handler": "demo.noop"}])
    assert saga.execute(workflow_id, 1) == "retry_wait"  # an attempt failed: its error stays on the run
    first = saga.run(workflow_id, 1)
    control.cancel(first, Actor("olga"), clock=saga.clock)
    assert saga.advance(workflow_id) == "compensated"
    assert saga.get(workflow_id).note == (f"step 1 was cancelled by olga: run #{first.id} ended cancelled; no step "
                                          "before it had succeeded, so there was nothing to undo")


def test_a_first_step_that_fails_leaves_nothing_to_undo(saga):
    workflow_id = saga.submit([{"handler": "demo.flaky", "params": FATAL}, {"handler": "demo.noop"}])
    saga.execute(workflow_id, 1)
    assert saga.advance(workflow_id) == "compensated"
    assert [run.workflow_step for run in saga.runs(workflow_id)] == [1]


def test_a_step_that_undoes_itself_is_waited_for_before_the_steps_before_it(saga):
    compensable = {"fail_times": 9, "error": "compensable", "code": "card_declined"}
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": OK},
                               {"handler": "demo.flaky_compensated", "params": compensable}])
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "compensated"  # failed, and undid itself at once
    assert saga.advance(workflow_id) == "undoing"
    saga.undo(workflow_id, 1)
    assert saga.advance(workflow_id) == "compensated"
    # Step 2's undo was its own failure's, not one the workflow asked for: it stays "the step that failed".
    assert [step.compensation_status for step in saga.steps(workflow_id)] == ["compensated", None]


def test_a_second_submit_with_the_same_key_is_the_same_workflow(saga, app):
    first = saga.submit(three_steps())
    again, created = submit(tenants.find("default"), saga.actor, name="ship order 7", steps=three_steps(),
                            idempotency_key="order-7", clock=saga.clock)
    assert (again.id, created, again.name) == (first, False, "ship order 7")
    # The same key for other work is a client's mistake: said, not answered with a workflow it did not ask for.
    for name, steps in (("another name", three_steps()), ("ship order 7", [{"handler": "demo.noop"}])):
        with pytest.raises(Conflict, match=rf"idempotency key 'order-7' is workflow #{first} \(ship order 7\), "
                                           "submitted with another name or other steps"):
            submit(tenants.find("default"), saga.actor, name=name, steps=steps, idempotency_key="order-7",
                   clock=saga.clock)
    assert db.session.execute(select(func.count()).select_from(Workflow)).scalar_one() == 1
    assert len(saga.runs(first)) == 1
    audits = db.session.execute(select(AuditEntry).where(AuditEntry.action == "workflow.submit")).scalars().all()
    assert [(entry.target_id, entry.actor) for entry in audits] == [(str(first), "olga")]


@pytest.mark.parametrize(("steps", "field"), [
    ([], "steps"),
    ({"handler": "demo.noop"}, "steps"),
    ([{"handler": "demo.noop"}] * 21, "steps"),
    (["demo.noop"], "steps[0]"),
    ([{"handler": "demo.noop"}, {"handler": "demo.nope"}], "steps[1].handler"),
    ([{"params": {}}], "steps[0].handler"),
    ([{"handler": "demo.noop", "params": [1]}], "steps[0].params"),
    ([{"handler": "demo.noop", "policy": {"max_attempts": 0}}], "steps[0].policy.max_attempts"),
    ([{"handler": "demo.noop", "policy": "no-such-policy"}], "steps[0].policy"),
    ([{"handler": "demo.noop", "retries": 3}], "steps[0].retries"),
    ([{"handler": "demo.noop"}, {"handler": "demo.noop", "params": {"blob": "x" * 100_000}}], "steps[1].params"),
])
def test_bad_steps_are_refused_naming_the_field_and_nothing_is_written(saga, steps, field):
    with pytest.raises(InvalidInput) as refused:
        submit(tenants.find("default"), saga.actor, name="x", steps=steps, idempotency_key="k", clock=saga.clock)
    assert refused.value.field == field
    assert db.session.execute(select(func.count()).select_from(Workflow)).scalar_one() == 0


def test_two_advances_racing_start_the_next_step_once(saga, app, monkeypatch):
    workflow_id = saga.submit(three_steps(third=OK))
    saga.execute(workflow_id, 1)
    both_read = threading.Barrier(2, timeout=10)
    move = advance._move
    waited = threading.local()

    def move_after_both_read(*args, **kwargs):
        if not getattr(waited, "done", False):  # each caller decides on what it read before either writes
            waited.done = True
            both_read.wait()
        return move(*args, **kwargs)

    monkeypatch.setattr(advance, "_move", move_after_both_read)
    outcomes = []

    def advance_in_its_own_context():
        with app.app_context():
            outcomes.append(advance.advance(workflow_id, clock=saga.clock))
            db.session.remove()

    threads = [threading.Thread(target=advance_in_its_own_context) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["raced", "started"]
    assert [run.workflow_step for run in saga.runs(workflow_id)] == [1, 2]
    assert saga.get(workflow_id).current_step == 2
    assert saga.events("submitted", workflow_id=workflow_id) == [(1, "submitted"), (2, "submitted")]


def test_two_advances_racing_ask_for_an_undo_once(saga, app):
    workflow_id = saga.submit(three_steps())
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        if position < 3:
            saga.advance(workflow_id)
    outcomes = []

    def advance_in_its_own_context():
        with app.app_context():
            outcomes.append(advance.advance(workflow_id, clock=saga.clock))
            db.session.remove()

    threads = [threading.Thread(target=advance_in_its_own_context) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert "undoing" in outcomes and outcomes.count("undoing") == 1
    assert saga.events("compensating", workflow_id=workflow_id) == [(2, "compensating")]


def test_a_lost_advance_job_is_recovered_by_the_reconcile_pass(saga):
    workflow_id = saga.submit(three_steps(third=OK))
    saga.execute(workflow_id, 1)
    get_redis().flushdb()  # the advance job the engine queued is lost
    assert advance.reconcile(saga.clock) == []  # just finished: its job may still be on its way
    saga.clock.advance(5)
    assert advance.reconcile(saga.clock) == [workflow_id]
    assert saga.run(workflow_id, 2).status == "pending"
    assert advance.reconcile(saga.clock) == []  # step 2 is at work: the engine's reconciler tends it


@pytest.mark.parametrize("stop", ["an earlier step with no undo", "the failed step, left for a person"])
def test_a_stop_resolved_by_a_person_whose_advance_job_was_lost_is_resumed_by_the_reconcile_pass(saga, stop):
    workflow_id = stopped_at_a_step_with_no_undo(saga) if stop.startswith("an") else held_at_step_2(saga)
    saga.clock.advance(5)
    assert advance.reconcile(saga.clock) == []  # stopped for a person: left alone
    resolve_by_hand(saga.run(workflow_id, 2).id, saga.clock)
    get_redis().flushdb()  # the advance job the resolve queued is lost
    saga.clock.advance(5)
    assert advance.reconcile(saga.clock) == [workflow_id]
    assert saga.status(workflow_id) == "compensating" and saga.run(workflow_id, 1).status == "compensating"


def test_a_claimed_step_whose_run_was_never_created_is_started_by_the_reconcile_pass(saga, monkeypatch):
    workflow_id = saga.submit(three_steps(third=OK))
    saga.execute(workflow_id, 1)

    def died(*args, **kwargs):
        raise SystemExit("the caller died between the claim and the run")

    monkeypatch.setattr(advance.engine_submit, "submit", died)
    with pytest.raises(SystemExit):
        saga.advance(workflow_id)
    monkeypatch.undo()
    db.session.rollback()
    assert (saga.get(workflow_id).current_step, saga.run(workflow_id, 2)) == (2, None)
    saga.clock.advance(5)
    assert advance.reconcile(saga.clock) == [workflow_id]
    assert saga.run(workflow_id, 2).status == "pending"


def test_a_lost_undo_request_is_asked_again_by_the_reconcile_pass(saga, monkeypatch):
    workflow_id = saga.submit(three_steps())
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        if position < 3:
            saga.advance(workflow_id)
    monkeypatch.setattr(advance.compensation, "start_for_workflow",
                        lambda *args, **kwargs: (_ for _ in ()).throw(SystemExit()))
    with pytest.raises(SystemExit):
        saga.advance(workflow_id)
    monkeypatch.undo()
    assert [step.compensation_status for step in saga.steps(workflow_id)][1] == "compensating"
    assert saga.run(workflow_id, 2).status == "succeeded"
    saga.clock.advance(5)
    assert advance.reconcile(saga.clock) == [workflow_id]
    assert saga.run(workflow_id, 2).status == "compensating"


def test_a_step_whose_handler_is_gone_fails_the_workflow_and_undoes_the_steps_before(saga):
    workflow_id = saga.submit(three_steps(third=OK))
    db.session.execute(db.text("UPDATE workflow_steps SET handler = 'python:demo.retired' WHERE position = 2"))
    db.session.commit()
    saga.execute(workflow_id, 1)
    assert saga.advance(workflow_id) == "undoing"
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.failed_step) == ("compensating", 2)
    assert "step 2 could not start" in workflow.note and "demo.retired" in workflow.note
    assert saga.run(workflow_id, 2) is None


def test_a_step_over_the_queue_limit_waits_and_says_why(saga):
    workflow_id = saga.submit([{"handler": "demo.noop"}, {"handler": "demo.sleep", "policy": {"queue_limit": 1}}])
    submit_run(tenants.find("default"), Actor("test"), handler="demo.sleep")  # one demo.sleep already waits
    saga.execute(workflow_id, 1)
    assert saga.advance(workflow_id) == "waiting"
    workflow = saga.get(workflow_id)
    assert (workflow.status, workflow.current_step) == ("running", 2)
    assert "step 2 waits to start: queue full" in workflow.note
    assert saga.run(workflow_id, 2) is None
