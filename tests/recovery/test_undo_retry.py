"""Retrying a failed undo: the run's undo step runs again, and a saga workflow it stopped goes back to undoing. And
running the undo a severity-3 error left for a person."""

import threading

import pytest
from rq import Queue
from sqlalchemy import select, update

from console.extensions import db
from console.models import AuditEntry, DeadLetter, Run, RunEvent, WorkOrder
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq import discards
from console.services.engine import compensation, queueing
from console.services.engine.execute import execute
from console.services.errors import Conflict, NotFound
from console.services.people import tenants
from console.services.recovery import params_fix, undo_retry
from console.services.recovery.workflows import query as workflow_query
from console.services.workorders import changes as workorders
from tests.factories import bearer, three_steps
from tests.helpers import HX, confirm_of, csrf_from

OLGA = Actor("olga")


def letters_of(run_id: int) -> list[tuple[str, str]]:
    db.session.expire_all()
    return [(letter.reason, letter.status) for letter in db.session.execute(
        select(DeadLetter).where(DeadLetter.run_id == run_id).order_by(DeadLetter.id)).scalars()]


def undo_statuses(saga, workflow_id: int) -> list:
    return [step.compensation_status for step in saga.steps(workflow_id)]


def downstream_fixed(run_id: int) -> None:
    """What a person fixes before retrying: here the demo undo stops failing."""
    db.session.execute(update(Run).where(Run.id == run_id).values(params={"fail_times": 0}))
    db.session.commit()


@pytest.fixture
def stopped(saga):
    """A workflow stopped by step 2's undo, which failed for good: step 1 was left as it was."""
    _, stuck = saga.two_failed()
    saga.advance(stuck)
    assert saga.status(stuck) == "compensation_failed"
    assert undo_statuses(saga, stuck) == ["not_attempted", "failed", None]
    return stuck


def test_the_note_of_a_workflow_whose_failed_step_was_fixed_alone_since_says_so(saga, stopped):
    failed = saga.run(stopped, 3)
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == failed.id)).scalars()
    restarted = params_fix.restart_with(failed.id, letter.id, dict(failed.params), {**failed.params, "fail_times": 0},
                                        OLGA, saga.clock(), message="fixed alone")
    db.session.commit()
    assert restarted and saga.execute(stopped, 3) == "succeeded"
    step = saga.run(stopped, 2)
    downstream_fixed(step.id)
    undo_retry.retry(step.id, OLGA, clock=saga.clock)
    assert saga.get(stopped).note == (f"step 3 failed for good; its run #{failed.id} was replayed alone since and is "
                                      "succeeded now, which does not resume the workflow")


def test_a_compensated_workflow_whose_failed_step_is_fixed_after_says_so_in_its_note(saga, client, auth):
    undone, _ = saga.two_failed()
    saga.advance(undone)
    saga.undo(undone, 1)
    saga.advance(undone)
    assert saga.status(undone) == "compensated"
    failed = saga.run(undone, 3)
    stored = saga.get(undone).note
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == failed.id)).scalars()
    params_fix.restart_with(failed.id, letter.id, dict(failed.params), {**failed.params, "fail_times": 0}, OLGA,
                            saga.clock(), message="fixed alone")
    db.session.commit()
    assert saga.execute(undone, 3) == "succeeded"
    shown = workflow_query.detail(saga.get(undone)).note
    assert shown == (f"{stored}; its run #{failed.id} was replayed alone since and is succeeded now, which does not "
                     "resume the workflow")
    # The Workflows list says the same (its Note said the run "ended dead"; helper 105).
    assert workflow_query.notes([saga.get(undone)]) == {undone: shown}
    auth.as_role("viewer")
    listing = client.get("/runs/workflows").get_data(as_text=True)
    assert f"its run #{failed.id} was replayed alone since and is succeeded now" in listing


def test_a_retried_undo_that_works_lets_the_workflow_undo_the_steps_left_before_it(saga, stopped):
    run = saga.run(stopped, 2)
    downstream_fixed(run.id)
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars()
    retried = undo_retry.retry(run.id, OLGA, clock=saga.clock)
    assert retried.workflow_id == stopped and retried.closed_fixes == []
    # Its letter counts as replayed: its work order stays open until the undo works.
    assert retried.letters == [letter.id]
    assert letters_of(run.id) == [("compensation_failed", "replayed")]
    assert db.session.get(WorkOrder, letter.work_order_id).status == "open"
    assert saga.run(stopped, 2).status == "compensating"
    workflow = saga.get(stopped)
    assert (workflow.status, workflow.current_step, workflow.finished_at) == ("compensating", 2, None)
    assert workflow.note.startswith("step 3 failed for good: run #")  # why it is undone, as before the stop
    assert (saga.run(stopped, 2).error_code, saga.run(stopped, 2).error_message) == (None, None)  # a clean try
    assert undo_statuses(saga, stopped) == ["pending", "compensating", None]
    assert compensation.job_id(run.id) in Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids
    (moved,) = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id,
                                                         RunEvent.reason == "undo_retried")).scalars()
    assert (moved.from_status, moved.to_status, moved.actor) == ("dead", "compensating", "olga")
    (entry,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.retry_undo")).scalars()
    assert entry.after == {"status": "compensating", "dead_letters": retried.letters, "workflow": stopped}

    # The compensation job runs the undo again; the workflow then undoes step 1 and ends compensated.
    assert saga.undo(stopped, 2) == "compensated"
    # Its try counts on from the round before, as the handler's undo_attempt does (the trail restarted at 1).
    trail = workflow_query.detail(saga.get(stopped)).trail
    tries = [(entry.kind, entry.number) for entry in trail
             if entry.position == 2 and entry.kind in ("compensation_attempt_failed", "compensated")]
    assert tries[-1] == ("compensated", len(tries)) > ("compensated", 3)
    assert [number for _, number in tries] == list(range(1, len(tries) + 1))
    assert saga.advance(stopped) == "undoing"
    assert saga.undo(stopped, 1) == "compensated"
    assert saga.advance(stopped) == "compensated"
    assert undo_statuses(saga, stopped) == ["compensated", "compensated", None]
    assert saga.get(stopped).note.startswith("step 3 failed for good")
    assert workorders.close_settled(clock=saga.clock) == [letter.work_order_id]  # the undo worked: settled


def test_the_stopped_workflows_page_points_to_the_run_whose_undo_can_be_retried(client, auth, saga, stopped):
    auth.as_role("viewer")
    page = " ".join(client.get(f"/runs/workflows/{stopped}").get_data(as_text=True).split())
    assert (f'Once what stopped it is fixed, <a href="/runs/{saga.run(stopped, 2).id}">retry the undo of step 2</a> '
            "on its run page: the steps before it are then undone too.") in page


def test_an_undo_that_fails_again_stops_the_workflow_again_with_a_new_dead_letter(saga, stopped):
    run = saga.run(stopped, 2)
    undo_retry.retry(run.id, OLGA, clock=saga.clock)
    assert saga.undo(stopped, 2) == "dead"  # nothing was fixed
    saga.advance(stopped)
    workflow = saga.get(stopped)
    assert workflow.status == "compensation_failed" and "could not be undone" in workflow.note
    assert not workflow.note.count("undo_retried:")  # the workflow says why itself
    assert undo_statuses(saga, stopped) == ["not_attempted", "failed", None]
    assert letters_of(run.id) == [("compensation_failed", "replayed"), ("compensation_failed", "open")]
    # The same failure as before: the same words, error group and work order, which never closed meanwhile (no
    # resolve and page again for one outage).
    first, second = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)
                                       .order_by(DeadLetter.id)).scalars().all()
    # Its tries are counted across rounds (the undo saw tries 4 to 6, not 1 to 3 again): the words differ there only.
    assert (first.error_message.endswith("undo failure 3 of 9"), second.error_message.endswith("undo failure 6 of 9")
            ) == (True, True)
    assert second.fingerprint == first.fingerprint
    assert second.work_order_id == first.work_order_id
    assert db.session.get(WorkOrder, first.work_order_id).status == "open"
    assert workorders.close_settled(clock=saga.clock) == []


def test_only_a_run_that_died_undoing_itself_with_an_undo_step_can_retry_it(saga, runs, stopped, snapshot):
    refusals = {
        saga.run(stopped, 3).id: "did not die undoing itself (non retryable); replay it instead",
        saga.run(stopped, 1).id: "is succeeded; only a dead run whose undo failed, or that its error's severity 3 "
                                 "left for a person, can have its undo run",
    }
    # A step with no undo step of its own: its undo fails at once as not compensable, for a person to do by hand.
    bare = saga.submit(three_steps(first_handler="demo.flaky", second={"fail_times": 0}), key="order-3")
    for position in (1, 2):
        saga.execute(bare, position)
        saga.advance(bare)
    assert saga.execute(bare, 3) == "dead"
    saga.advance(bare)
    assert saga.undo(bare, 2) == "compensated"
    saga.advance(bare)
    assert saga.undo(bare, 1) == "dead"
    refusals[saga.run(bare, 1).id] = "handler python:demo.flaky has no undo step to run: undo it by hand"
    other = tenants.create("other", Actor("test")).id
    before = snapshot()
    for run_id, said in refusals.items():
        with pytest.raises(Conflict) as refused:
            undo_retry.retry(run_id, OLGA, clock=saga.clock)
        assert said in refused.value.detail
    with pytest.raises(NotFound):
        undo_retry.retry(saga.run(stopped, 2).id, OLGA, tenant_id=other, clock=saga.clock)
    db.session.rollback()
    assert snapshot() == before  # each refusal changed nothing


def test_two_people_retrying_one_undo_at_once_retry_it_once(saga, stopped, app, monkeypatch):
    run_id = saga.run(stopped, 2).id
    both_checked = threading.Barrier(2, timeout=10)
    why_not = undo_retry.why_not

    def check_then_wait(run):
        said = why_not(run)
        both_checked.wait()  # each decided on what it read before either writes
        return said

    monkeypatch.setattr(undo_retry, "why_not", check_then_wait)
    outcomes = []

    def retry_in_its_own_context(name: str):
        with app.app_context():
            try:
                outcomes.append(type(undo_retry.retry(run_id, Actor(name), clock=saga.clock)).__name__)
            except Conflict as error:
                outcomes.append(error.detail)
            db.session.remove()

    threads = [threading.Thread(target=retry_in_its_own_context, args=(name,)) for name in ("olga", "oscar")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["Retried", f"run {run_id} changed while you acted on it; look again"]
    db.session.expire_all()
    assert len(db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.retry_undo")).all()) == 1
    assert len(db.session.execute(select(RunEvent).where(RunEvent.run_id == run_id,
                                                         RunEvent.reason == "undo_retried")).all()) == 1
    assert saga.get(stopped).status == "compensating"


def test_a_service_retries_the_undo_through_the_api_with_an_operators_token(client, auth, saga, stopped):
    run_id = saga.run(stopped, 2).id
    viewer, operator = auth.make_user("vic", "viewer"), auth.make_user("olga", "operator")
    assert client.post(f"/worker/tasks/{run_id}/retry-undo", headers=bearer(viewer)).status_code == 403
    answer = client.post(f"/worker/tasks/{run_id}/retry-undo", headers=bearer(operator))
    assert answer.status_code == 202
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars()
    assert answer.json == {"id": run_id, "status": "compensating", "dead_letters_replayed": [letter.id],
                           "workflow_id": stopped, "params_fixes_closed": []}
    again = client.post(f"/worker/tasks/{run_id}/retry-undo", headers=bearer(operator))
    assert again.status_code == 409
    assert "only a dead run whose undo failed, or that its error's severity 3" in again.json["detail"]
    assert client.post("/worker/tasks/999999/retry-undo", headers=bearer(operator)).status_code == 404


def test_a_letter_discarded_while_the_undo_retry_was_decided_keeps_the_run_dead(saga, stopped, app, monkeypatch):
    run_id = saga.run(stopped, 2).id
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars()
    why_not = undo_retry.why_not

    def discarded_right_after_the_check(run):
        said = why_not(run)
        with app.app_context():  # another person, in another session, between this one's read and its writes
            discards.discard(db.session.get(DeadLetter, letter.id), "refunded by hand", Actor("oscar"))
            db.session.remove()
        return said

    monkeypatch.setattr(undo_retry, "why_not", discarded_right_after_the_check)
    with pytest.raises(Conflict, match="dead letter was settled meanwhile"):
        undo_retry.retry(run_id, OLGA, clock=saga.clock)
    assert letters_of(run_id) == [("compensation_failed", "discarded")]
    assert saga.run(stopped, 2).status == "dead" and saga.status(stopped) == "compensation_failed"
    assert not db.session.execute(select(RunEvent).where(RunEvent.run_id == run_id,
                                                         RunEvent.reason == "undo_retried")).all()
    assert not db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.retry_undo")).all()


def test_a_run_its_severity_3_error_left_for_a_person_has_its_undo_run_at_their_word(runs, clock, client, auth):
    """Seed 004's severity 3: a person looks first. Replay and Resolve were their only ways on; the undo its handler
    has now runs at their word, keeping the handler's error as the undo's cause."""
    held = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable", "severity": 3,
                                                   "code": "ledger_mismatch"})
    assert execute(held, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(held)
    assert (letter.reason, runs.events(held, "compensating")) == ("manual_intervention", [])
    auth.as_role("operator", "olga")
    page = client.get(f"/runs/{held}").get_data(as_text=True)
    assert ">Run the undo</button>" in page and "Retry the undo" not in page
    assert confirm_of(page, f"/runs/{held}/retry-undo").startswith(
        f"Run the undo of run #{held}? Its handler's undo step runs (up to 3 tries, with backoff)")
    row = client.get("/dlq/?view=list").get_data(as_text=True)
    assert f'href="/runs/{held}" title="its error\'s severity 3 left it for a person' in row
    answer = client.post(f"/runs/{held}/retry-undo", data={"csrf_token": csrf_from(page)}, headers=HX)
    assert f"Ran the undo of run #{held}: it is now compensating." in answer.get_data(as_text=True)
    run = runs.get(held)
    assert (run.status, run.status_reason, run.error_code) == ("compensating", "undo_after_review", "ledger_mismatch")
    assert letters_of(held) == [("manual_intervention", "replayed")]
    (entry,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.undo")).scalars()
    assert (entry.actor, entry.after["dead_letters"]) == ("olga", [letter.id])
    assert compensation.execute(held, clock=clock) == "compensated"
    assert runs.status(held) == "compensated"
    assert workorders.close_settled(clock=clock) == [letter.work_order_id]  # its letter settled by the undo


def test_a_severity_3_run_whose_handler_has_no_undo_is_not_offered_one(runs, clock, client, auth):
    held = runs.submit("demo.flaky", {"fail_times": 1, "error": "compensable", "severity": 3})
    assert execute(held, 0, clock=clock) == "dead"
    with pytest.raises(Conflict) as refused:
        undo_retry.retry(held, OLGA, clock=clock)
    assert "has no undo step to run: undo it by hand, then mark the run resolved" in refused.value.detail
    auth.as_role("operator", "olga")
    assert "Run the undo" not in client.get(f"/runs/{held}").get_data(as_text=True)
    assert "Undo…" not in client.get("/dlq/?view=list").get_data(as_text=True)


def test_a_failed_undo_whose_letter_was_discarded_is_not_offered_again_nor_sent_to_a_replay(saga, stopped, client,
                                                                                             auth):
    """Its workflow's page still said to retry the undo, the run page had no such button, and the API said "replay
    it instead", which runs the step's handler, not its undo (helper 148)."""
    step = saga.run(stopped, 2)
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == step.id)).scalars()
    discards.discard(letter, "undid the shipment label by hand at the carrier", OLGA)
    with pytest.raises(Conflict) as refused:
        undo_retry.retry(step.id, OLGA, clock=saga.clock)
    assert refused.value.detail == (f"run {step.id} has no open dead letter (it was discarded or resolved): undo it "
                                    "by hand, then mark the run resolved")
    auth.as_role("operator", "opal")
    page = client.get(f"/runs/workflows/{stopped}").get_data(as_text=True)
    assert "retry the undo of step 2" not in page and "mark its run resolved" in page
