"""A person's compensation of a succeeded run is a request: it runs only once another person approves it."""

import re

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import Approval, AuditEntry, User
from console.services.actor import Actor
from console.services.engine import compensation
from console.services.engine.execute import execute
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.recovery import decisions, run_compensation
from console.services.recovery.approvals import FourEyes
from tests.factories import make_tenant


def succeeded(runs, clock, handler="demo.flaky_compensated", tenant="default") -> int:
    run_id = runs.submit(handler, {"fail_times": 0}, tenant=tenant)
    assert execute(run_id, 0, clock=clock) == "succeeded"
    return run_id


def test_a_compensation_waits_for_approval_then_runs_once(runs, staff, clock):
    run_id = succeeded(runs, clock)
    with pytest.raises(InvalidInput, match="cause"):
        run_compensation.request_compensation(run_id, "", staff["olga"], clock=clock)
    request = run_compensation.request_compensation(run_id, "step 3 failed", staff["olga"], clock=clock)
    assert (request.kind, request.status, request.reason) == ("run.compensate", "pending", "step 3 failed")
    assert (request.before, request.after) == ({"status": "succeeded"}, {"status": "compensating"})
    assert runs.status(run_id) == "succeeded" and not compensation.is_queued(run_id)
    with pytest.raises(Conflict, match="already waits"):
        run_compensation.request_compensation(run_id, "again", staff["olga"], clock=clock)

    clock.advance(30)
    approved = decisions.approve(request.id, staff["alex"], clock=clock)
    assert (approved.status, approved.backup) == ("executed", {"run_id": run_id, "status": "succeeded"})
    run = runs.get(run_id)
    # A person asked for it: not a workflow's step failing.
    assert (run.status, run.status_reason) == ("compensating", "compensation_requested")
    [event] = runs.events(run_id, "compensating")
    assert event.actor == f"olga (approved by alex, request #{request.id})"
    assert event.message == f"step 3 failed (approval #{request.id})"
    undo = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.compensate")).scalar_one()
    assert (undo.actor, undo.note) == ("olga", f"approved by alex, request #{request.id}")
    assert compensation.is_queued(run_id)
    assert event.reason == "compensation_requested"
    assert compensation.execute(run_id, clock=clock) == "compensated"
    kind = r"this kind of change \(compensate a succeeded run \(run its handler.s undo step\)\)"
    with pytest.raises(Conflict, match=kind + " cannot be rolled back"):
        decisions.rollback(request.id, staff["bea"], clock=clock)
    actions = db.session.execute(select(AuditEntry.action).order_by(AuditEntry.seq)).scalars().all()
    assert actions[-3:] == ["approval.request", "run.compensate", "approval.approve"]


def test_the_requester_cannot_approve_their_own_compensation(runs, staff, clock):
    db.session.get(User, staff["olga"].id).role = "approver"
    db.session.commit()
    run_id = succeeded(runs, clock)
    request = run_compensation.request_compensation(run_id, "step 3 failed", staff["olga"], clock=clock)
    with pytest.raises(FourEyes):
        decisions.approve(request.id, staff["olga"], clock=clock)
    assert runs.status(run_id) == "succeeded"


def test_a_run_that_moved_on_before_approval_is_not_compensated_twice(runs, staff, clock):
    run_id = succeeded(runs, clock)
    request = run_compensation.request_compensation(run_id, "step 3 failed", staff["olga"], clock=clock)
    compensation.request(runs.get(run_id), Actor("workflow"), cause="the saga undid it", clock=clock)  # no approval
    # Undone another way: nothing left to decide (it stayed approvable, then failed; helper 105).
    with pytest.raises(Conflict, match=f"request {request.id} no longer needs deciding: run #{run_id} is "
                                       "compensating now: it was undone"):
        decisions.approve(request.id, staff["alex"], clock=clock)
    assert db.session.get(Approval, request.id).status == "superseded"
    assert len(runs.events(run_id, "compensating")) == 1


def test_a_request_to_compensate_a_run_undone_another_way_closes_by_itself(runs, staff, clock):
    undone, kept = succeeded(runs, clock), succeeded(runs, clock)
    request = run_compensation.request_compensation(undone, "step 3 failed", staff["olga"], clock=clock)
    waiting = run_compensation.request_compensation(kept, "step 4 failed", staff["olga"], clock=clock)
    compensation.request(runs.get(undone), Actor("workflow"), cause="the saga undid it", clock=clock)
    assert compensation.execute(undone, clock=clock) == "compensated"
    assert run_compensation.supersede_undone(clock) == [request.id]
    closed = db.session.get(Approval, request.id)
    assert (closed.status, closed.outcome) == ("superseded", f"run #{undone} is compensated now: it was undone (or its "
                                               "undo began) another way since the request, so there is nothing left "
                                               "to compensate")
    assert db.session.get(Approval, waiting.id).status == "pending"
    assert run_compensation.supersede_undone(clock) == []


def test_a_tenant_scoped_person_cannot_ask_about_another_tenants_run(runs, staff, clock):
    acme = make_tenant("acme")
    run_id = succeeded(runs, clock)
    with pytest.raises(NotFound):
        run_compensation.request_compensation(run_id, "step 3 failed", staff["olga"], tenant_id=acme.id, clock=clock)
    theirs = succeeded(runs, clock, tenant="acme")
    request = run_compensation.request_compensation(theirs, "step 3 failed", staff["olga"], tenant_id=acme.id,
                                                    clock=clock)
    assert request.tenant_id == acme.id


def test_a_runs_compensate_button_speaks_of_a_persons_request_not_a_workflow(runs, staff, clock, client, auth):
    run_id = succeeded(runs, clock)
    auth.make_user("otto", "operator")
    auth.login("otto")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    summary = re.search(r'<summary class="button danger" title="([^"]*)">Compensate…</summary>', page).group(1)
    assert "workflow" not in summary and "undo step" in summary


def test_a_compensated_runs_duration_is_its_handlers_not_the_wait_for_approval(runs, staff, clock, client, auth):
    run_id = succeeded(runs, clock)
    request = run_compensation.request_compensation(run_id, "wrong customer", staff["olga"], clock=clock)
    clock.advance(200)  # the approver answers three minutes later
    decisions.approve(request.id, staff["alex"], clock=clock)
    assert compensation.execute(run_id, clock=clock) == "compensated"
    auth.make_user("vic", "viewer")
    auth.login("vic")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    duration = re.search(r"<dt>Duration</dt><dd>(.*?)</dd>", page, re.S).group(1)
    # It read 3.3 min for a handler that took no time: finished_at is when its undo ended.
    assert duration.strip().startswith("0 ms <span") and "its handler, which succeeded" in duration
    assert "its undo ended at the Finished time" in duration
    # The runs list says the same.
    listed = client.get("/runs").get_data(as_text=True)
    row = re.search(rf'<a href="/runs/{run_id}">{run_id}</a>.*?</tr>', listed, re.S).group(0)
    assert re.search(r"<span title=\"its handler's time; Finished is when its undo ended\">\s*0 ms</span>", row)
