"""succeeded → compensating: a later workflow step failed; a service undoes a success, a person asks (four eyes)."""

import logging
from types import SimpleNamespace

from rq import Queue
from sqlalchemy import select

from console.extensions import db
from console.models import Approval, AuditEntry, OutboxMessage
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import compensation, failures, followups, queueing, reconcile
from console.services.engine.execute import execute
from tests.factories import bearer
from tests.helpers import wait_for


def succeeded(runs, clock, handler="demo.flaky_compensated") -> int:
    run_id = runs.submit(handler, {"fail_times": 0})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    return run_id


def test_the_api_asks_for_an_undo_and_it_runs_once_another_person_approves(client, auth, runs, clock):
    run_id = succeeded(runs, clock)
    headers = bearer(auth.make_user("otto", "operator"))
    response = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers,
                           json={"cause": "shipping step 3 failed: carrier rejected the parcel"})
    assert response.status_code == 202, response.get_data(as_text=True)
    body = response.get_json()
    assert body == {"approval_id": body["approval_id"], "status": "awaiting_approval"}
    assert runs.status(run_id) == "succeeded" and not compensation.is_queued(run_id)  # nothing until approved
    request = db.session.get(Approval, body["approval_id"])
    assert (request.kind, request.reason, request.subject_id) == (
        "run.compensate", "shipping step 3 failed: carrier rejected the parcel", str(run_id))

    approver = bearer(auth.make_user("ada", "approver"))
    approved = client.post(f"/api/approvals/{request.id}/approve", headers=approver, json={"note": "ok"})
    assert approved.status_code == 200 and approved.get_json()["status"] == "executed"
    assert approved.get_json()["run"] == {"id": run_id, "status": "compensating", "series": 1}
    [requested] = runs.events(run_id, "compensating")
    # The requester's undo, the approver beside them.
    assert requested.reason == "compensation_requested" and requested.actor.startswith("otto (approved by ada (token ")
    assert requested.message.startswith("shipping step 3 failed") and f"approval #{request.id}" in requested.message
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.compensate")).scalars().all()
    assert entry.actor == "otto" and entry.note.startswith("approved by ada")
    assert entry.target_id == str(run_id) and entry.after["status"] == "compensating"
    assert compensation.is_queued(run_id)
    assert compensation.execute(run_id, clock=clock) == "compensated"
    run = runs.get(run_id)
    assert (run.status, run.progress_message) == ("compensated", "compensated")  # the undo step reported
    # The request reads how its run stands now, beside what was said when it ran (the undo step queued).
    [listed] = client.get("/api/approvals?status=all", headers=approver).get_json()["items"]
    assert listed["run"]["status"] == "compensated" and "compensating" in listed["outcome"]
    assert client.get(f"/api/approvals/{request.id}", headers=approver).get_json()["run"]["status"] == "compensated"
    assert compensation.execute(run_id, clock=clock) == "skipped"  # a duplicate delivery does nothing


def test_what_cannot_be_compensated_is_refused_with_the_reason(client, auth, runs, clock):
    headers = bearer(auth.make_user("otto", "operator"))
    pending = runs.submit("demo.flaky_compensated")
    refused = client.post(f"/worker/tasks/{pending}/compensate", headers=headers)
    assert refused.status_code == 409 and "only a succeeded run" in refused.get_json()["detail"]
    # Left for a person by its error's severity 3: told what a person does instead, not that it was undone already.
    held = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable", "severity": 3})
    assert execute(held, 0, clock=clock) == "dead"
    refused = client.post(f"/worker/tasks/{held}/compensate", headers=headers, json={"cause": "x"})
    assert ("severity 3 left it for a person, with no undo run: replay it, run its undo (Run the undo, on its page), "
            "or resolve it") in refused.get_json()["detail"]
    no_undo = succeeded(runs, clock, "demo.noop")
    refused = client.post(f"/worker/tasks/{no_undo}/compensate", headers=headers, json={"cause": "x"})
    assert refused.status_code == 409 and refused.get_json()["field"] == "handler"
    run_id = succeeded(runs, clock)
    too_long = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers, json={"cause": "x" * 2001})
    assert too_long.status_code == 422 and too_long.get_json()["field"] == "cause"
    no_cause = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers, json={"cause": "  "})
    assert no_cause.status_code == 422 and no_cause.get_json()["field"] == "cause"
    unknown = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers, json={"reason": "typo"})
    assert unknown.status_code == 422 and unknown.get_json()["field"] == "reason"
    viewer = client.post(f"/worker/tasks/{run_id}/compensate", headers=bearer(auth.make_user("vic", "viewer")))
    assert viewer.status_code == 403
    first = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers, json={"cause": "step 2 failed"})
    again = client.post(f"/worker/tasks/{run_id}/compensate", headers=headers, json={"cause": "step 2 failed"})
    assert first.status_code == 202 and again.status_code == 409 and "already waits" in again.get_json()["detail"]
    assert runs.status(run_id) == "succeeded" and runs.events(run_id, "compensating") == []


def test_the_run_page_asks_operators_for_a_cause_and_files_a_request(client, auth, runs, clock):
    run_id = succeeded(runs, clock)
    auth.as_role("operator", "olga")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert f'action="/runs/{run_id}/compensate"' in page and 'name="cause"' in page
    token = auth.csrf(f"/runs/{run_id}")
    missing = client.post(f"/runs/{run_id}/compensate", data={"csrf_token": token, "cause": ""})
    assert missing.status_code == 422 and "give the cause" in missing.get_data(as_text=True)
    response = client.post(f"/runs/{run_id}/compensate", data={"csrf_token": token, "cause": "step 3 failed"})
    request = db.session.execute(select(Approval)).scalar_one()
    assert response.status_code == 303 and response.headers["Location"] == f"/approvals/{request.id}"
    assert runs.status(run_id) == "succeeded"
    body = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert f'action="/runs/{run_id}/compensate"' not in body  # not twice: one request waits
    assert f'href="/approvals/{request.id}"' in body
    no_undo = succeeded(runs, clock, "demo.noop")
    assert f'action="/runs/{no_undo}/compensate"' not in client.get(f"/runs/{no_undo}").get_data(as_text=True)


def test_viewers_are_not_offered_compensate_and_cannot_post_it(client, auth, runs, clock):
    run_id = succeeded(runs, clock)
    auth.as_role("viewer")
    assert f'action="/runs/{run_id}/compensate"' not in client.get(f"/runs/{run_id}").get_data(as_text=True)
    token = auth.csrf("/overview")
    assert client.post(f"/runs/{run_id}/compensate", headers={"X-CSRFToken": token}).status_code == 403
    assert runs.status(run_id) == "succeeded"


def test_a_worker_runs_a_requested_compensation(runs, workers, clock):
    workers()
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 0})
    run = runs.wait(run_id, "succeeded")
    compensation.request(run, Actor("workflow"), cause="step 2 failed")
    assert runs.wait(run_id, "compensated").status_reason == "compensated"


def test_the_reconciler_queues_a_compensation_redis_lost(runs, clock):
    run_id = succeeded(runs, clock)
    compensation.request(runs.get(run_id), Actor("workflow"), clock=clock)
    get_redis().flushdb()
    assert reconcile.reconcile(clock).compensations_requeued == []  # recent: its job may still be on its way
    clock.advance(31)
    assert reconcile.reconcile(clock).compensations_requeued == [run_id]
    assert compensation.is_queued(run_id)
    assert [event.reason for event in runs.events(run_id, "requeued")] == ["compensation_job_missing"]


def test_a_requested_undo_whose_handler_is_gone_fails_to_a_dead_letter(runs, clock):
    run_id = succeeded(runs, clock)
    compensation.request(runs.get(run_id), Actor("workflow"), clock=clock)
    db.session.execute(db.text("UPDATE runs SET handler = 'python:demo.retired' WHERE id = :id"), {"id": run_id})
    db.session.commit()
    assert compensation.execute(run_id, clock=clock) == "dead"
    run = runs.get(run_id)
    assert (run.status, run.status_reason) == ("dead", "compensation_failed")
    [letter] = runs.dead_letters(run_id)
    assert letter.error_code == "compensation_failed" and "python:demo.retired is gone" in letter.error_message


COMPENSABLE = {"fail_times": 1, "error": "compensable", "code": "card_declined"}


def test_the_reconciler_finishes_a_compensation_whose_worker_died(runs, clock, monkeypatch):
    # The worker commits `compensating` and dies before its undo step ends (nothing else is written).
    monkeypatch.setattr(failures, "compensate_run", lambda *args, **kwargs: "killed")
    run_id = runs.submit("demo.flaky_compensated", COMPENSABLE)
    assert execute(run_id, 0, clock=clock) == "compensating"
    assert runs.get(run_id).status_reason == failures.AFTER_FAILURE
    monkeypatch.undo()
    assert reconcile.reconcile(clock).compensations_requeued == []  # its worker may still be at it

    clock.advance(31)
    db.session.execute(db.text("UPDATE runs SET heartbeat_at = :now WHERE id = :id"), {"now": clock(), "id": run_id})
    db.session.commit()
    assert reconcile.reconcile(clock).compensations_requeued == []  # it is: its heartbeat is fresh

    clock.advance(31)
    assert reconcile.reconcile(clock).compensations_requeued == [run_id]
    assert compensation.is_queued(run_id)
    assert [event.reason for event in runs.events(run_id, "requeued")] == ["compensation_worker_lost"]
    assert compensation.execute(run_id, clock=clock) == "compensated"
    assert compensation.execute(run_id, clock=clock) == "skipped"  # a duplicate job does nothing


def killed_mid_undo_then_finished_elsewhere(doomed, runs, run_id: int, workers) -> None:
    """Kill the worker running the run's undo (SIGKILL: no cleanup), start another, and see the reconciler give the
    undo to it: compensated once, its requeue said to be for a lost worker."""
    doomed.kill()
    doomed.wait()
    workers()

    def finished():
        reconcile.reconcile()
        return runs.status(run_id) == "compensated"

    wait_for(finished, 40, 0.5, f"run {run_id} to be compensated")
    assert [event.reason for event in runs.events(run_id, "requeued")] == ["compensation_worker_lost"]
    assert len(runs.events(run_id, "compensated")) == 1


def test_a_worker_killed_during_an_undo_step_another_worker_finishes_it(runs, workers):
    doomed = workers()
    run_id = runs.submit("demo.flaky_compensated", {**COMPENSABLE, "undo_seconds": 2})
    runs.wait(run_id, "compensating")
    killed_mid_undo_then_finished_elsewhere(doomed, runs, run_id, workers)


def test_a_worker_killed_during_an_undo_a_workflow_asked_for_another_worker_finishes_it(runs, workers):
    # The undo runs as a job of its own: RQ called it "started" for 10 minutes after its worker died, and the
    # reconciler, trusting that, said the database and Redis agreed (helper 160).
    doomed = workers()
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 0, "undo_seconds": 3})
    runs.wait(run_id, "succeeded")
    compensation.request(runs.get(run_id), Actor("workflow"), cause="step 2 failed")
    wait_for(lambda: queueing.status_of(compensation.job_id(run_id)) == "started", 30, 0.05,
             "a worker to take the undo")
    killed_mid_undo_then_finished_elsewhere(doomed, runs, run_id, workers)


def test_a_long_undo_step_is_not_taken_from_its_live_worker(app, runs, workers, monkeypatch):
    # The reconciler here judges staleness at 4 s (the workers heartbeat every 0.2 s): a loaded machine's pause
    # of 2 s (the tests' default) was enough to take the undo from a live worker.
    monkeypatch.setitem(app.config, "STALE_AFTER_S", 4)
    workers()
    run_id = runs.submit("demo.flaky_compensated", {**COMPENSABLE, "undo_seconds": 8})  # twice STALE_AFTER_S
    runs.wait(run_id, "compensating")

    def finished():
        assert reconcile.reconcile().compensations_requeued == []  # its heartbeat goes on during the undo
        return runs.status(run_id) == "compensated"

    wait_for(finished, 30, 0.3, f"run {run_id} to be compensated")
    assert runs.events(run_id, "requeued") == []


def compensating(runs, clock) -> int:
    """A succeeded run someone asked to undo: compensating, its undo step not yet run."""
    run_id = succeeded(runs, clock)
    compensation.request(runs.get(run_id), Actor("workflow"), cause="step 2 failed", clock=clock)
    return run_id


def test_an_undo_step_that_keeps_failing_is_tried_three_times_then_left_to_a_person(runs, clock):
    run_id = compensating(runs, clock)
    waits = []

    def undo(ctx):
        logging.getLogger("billing").warning("refunding order 77: try %s", ctx.undo_attempt)
        raise ConnectionError("refund API unreachable")

    status = failures.compensate_run(runs.get(run_id), undo, SimpleNamespace(), clock(), compensation.REASON,
                                     sleep=waits.append)
    assert status == "dead"
    assert waits == [1.0, 2.0]  # seed 004: 2^n s between attempts (1 s, 2 s), none after the last
    attempts = runs.events(run_id, "compensation_attempt_failed")
    assert [event.data["number"] for event in attempts] == [1, 2, 3]
    assert {event.message for event in attempts} == {"ConnectionError: refund API unreachable"}
    # Each try keeps its traceback and log lines, as an attempt does: they were in the worker's log only (helper 146).
    assert ", in undo" in attempts[0].data["traceback"] and "ConnectionError: refund API unreachable" in \
        attempts[0].data["traceback"]
    assert attempts[2].data["log_lines"][0].endswith("WARNING billing: refunding order 77: try 3")
    run = runs.get(run_id)
    assert (run.status, run.status_reason) == ("dead", "compensation_failed")
    assert [event.kind for event in runs.events(run_id)][-2:] == ["compensation_failed", "dead"]
    [letter] = runs.dead_letters(run_id)
    assert (letter.reason, letter.error_code) == ("compensation_failed", "compensation_failed")
    assert letter.error_message == "workflow_step_failed: ConnectionError: refund API unreachable"
    assert letter.work_order_id is not None  # a person is asked to undo it by hand


def test_the_run_page_folds_each_failed_undo_trys_traceback_under_it(client, auth, runs, clock):
    run_id = compensating(runs, clock)

    def undo(ctx):
        logging.getLogger("billing").warning("refund service answered 503")
        raise ConnectionError("refund API unreachable")

    failures.compensate_run(runs.get(run_id), undo, SimpleNamespace(), clock(), compensation.REASON,
                            sleep=lambda s: None)
    auth.as_role("viewer")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    for number in (1, 2, 3):
        assert f'id="undo-try-{number}"' in page
        assert f"Traceback and the undo step's last 1 log line · undo try {number}</summary>" in page
    assert "ConnectionError: refund API unreachable" in page and "refund service answered 503" in page


def test_an_undo_step_that_fails_once_is_retried_after_its_backoff_and_compensates(runs, clock):
    run_id = compensating(runs, clock)
    waits, tries = [], []

    def undo(ctx):
        tries.append(ctx.undo_attempt)
        if ctx.undo_attempt == 1:
            raise TimeoutError("refund API timed out")

    status = failures.compensate_run(runs.get(run_id), undo, SimpleNamespace(), clock(), compensation.REASON,
                                     sleep=waits.append)
    assert status == "compensated" and tries == [1, 2] and waits == [failures.COMPENSATION_BACKOFF_S[0]]
    [failed] = runs.events(run_id, "compensation_attempt_failed")
    assert (failed.data["number"], failed.message) == (1, "TimeoutError: refund API timed out")
    [done] = runs.events(run_id, "compensated")
    assert done.data["compensation_attempts"] == 2
    run = runs.get(run_id)
    assert (run.status, run.status_reason) == ("compensated", "compensated") and runs.dead_letters(run_id) == []


def test_an_undo_and_a_workflows_advance_go_before_the_runs_already_queued(runs, clock):
    # On the maintenance queue, which workers read last, a saga's undo (a refund) and its next step waited behind
    # every queued run of an incident's backlog (helper 105).
    backlog = [runs.submit() for _ in range(3)]
    queue = Queue(queueing.RUN_QUEUE, connection=get_redis())
    assert len(queue.job_ids) == len(backlog)
    compensation.enqueue(backlog[0])
    followups.enqueue_advance(7)
    ahead = [job.func_name for job in queue.jobs[:2]]
    assert ahead == [followups.ADVANCE, compensation.ENTRY_POINT]
    assert Queue(queueing.MAINTENANCE_QUEUE, connection=get_redis()).count == 0


def test_the_page_a_severity_2_undo_opens_is_resolved_when_the_undo_ends(runs, clock):
    """PagerDuty was told "its undo is running" and never that it ended: the incident stayed open for good, and later
    failures of the group piled onto it (helper 160)."""
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable", "severity": 2})
    assert execute(run_id, 0, clock=clock) == "compensated"
    messages = db.session.execute(select(OutboxMessage.kind, OutboxMessage.dedup_key, OutboxMessage.payload)
                                  .order_by(OutboxMessage.id)).all()
    [(page_key, opened)] = [(key, payload) for kind, key, payload in messages if kind == "alert"]
    assert page_key.startswith("compensating:") and opened["rule"] == "compensation_started"
    [resolved] = [payload for kind, key, payload in messages if kind == "resolve"]
    assert resolved["incident_key"] == f"rebound-{page_key}" and resolved["run_id"] == run_id
    assert resolved["summary"] == f"Run #{run_id}'s undo worked: it is compensated."
