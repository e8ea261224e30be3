"""A runbook execution's life: filed, run or dry-run, log and changes kept; gated by approval; walled by tenant."""

import importlib
import io
import logging

import pytest
import redis
from flask import current_app
from rq import Queue
from sqlalchemy import select

from console import logs
from console.extensions import db
from console.models import Approval, AuditEntry, RunbookBackup, RunbookExecution, Tenant
from console.services.actor import Actor
from console.services.engine import queueing
from console.services.engine.execute import execute
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound
from console.services.recovery import approvals, decisions, runbook_reconcile, runbook_runner, runbooks, shown
from console.services.recovery.approvals import FourEyes
from console.services.recovery.runbook_params import InvalidParams
from console.services.system.maintenance import MAINTENANCE
from tests.factories import Runs, changes_of, make_tenant, run_now


def audit_actions() -> list[str]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry.action).order_by(AuditEntry.seq)).scalars().all()


def test_a_real_run_logs_line_by_line_and_records_each_change_it_committed(samples, staff, clock):
    execution = run_now("sample_steps", {"steps": "3"}, staff["olga"], clock=clock, reason="tidy up")
    assert (execution.status, execution.dry_run, execution.error, execution.changes_total) == (
        "succeeded", False, None, 3)
    assert execution.params == {"steps": 3, "pause_s": 0.0}
    lines = execution.log.splitlines()
    assert [line.split(" ", 1)[1] for line in lines[1:4]] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert lines[-1].endswith("Done: 3 changes made.")
    assert changes_of(execution, planned=False) == [("step", str(n), "done", False, True) for n in (1, 2, 3)]
    assert execution.started_at == execution.finished_at == clock()
    assert audit_actions()[-2:] == ["runbook.request", "runbook.finish"]  # asked, then how it ended


def test_a_dry_run_records_what_it_would_change_and_is_not_audited(samples, staff, clock):
    execution = run_now("sample_steps", {"steps": 2}, staff["olga"], clock=clock, dry_run=True)
    assert (execution.status, execution.dry_run, execution.changes_total) == ("succeeded", True, 2)
    assert changes_of(execution, planned=True) == [("step", "1", "done", False, True),
                                                   ("step", "2", "done", False, True)]
    assert changes_of(execution, planned=False) == []
    assert execution.log.splitlines()[-1].endswith("Dry-run done: 2 changes would be made.")
    assert "runbook.request" not in audit_actions() and "runbook.finish" not in audit_actions()


def test_a_dry_run_cannot_write_even_when_its_code_tries(samples, staff, clock, snapshot):
    before = snapshot()
    execution = run_now("sample_writer", {}, staff["olga"], clock=clock, dry_run=True)
    assert snapshot() == before
    assert execution.status == "failed"
    assert "a dry-run may not change anything" in execution.error and "UPDATE tenants" in execution.error
    assert "Failed: a dry-run may not change anything" in execution.log
    # The same code writes for real when it is not a dry-run: the guard, not the code, kept the dry-run clean.
    assert run_now("sample_writer", {}, staff["olga"], clock=clock).status == "succeeded"
    assert snapshot() != before


def test_a_failure_keeps_what_was_committed_and_says_why(samples, staff, clock):
    execution = run_now("sample_fails", {}, staff["olga"], clock=clock)
    assert execution.status == "failed" and execution.error == "RuntimeError: disk on fire"
    assert changes_of(execution, planned=False) == [("step", "1", "done", False, True)]  # step 2 rolled back
    assert execution.changes_total == 1
    assert execution.log.splitlines()[-1].endswith("Failed: RuntimeError: disk on fire")


def test_a_secret_param_is_masked_by_value_in_the_log_the_error_and_the_servers_log(samples, staff, clock):
    """A key logged as `connecting with sk_…` and raised as `refused credential sk_…` was on the execution's page for
    every viewer and in the server's log file (helper 120)."""
    key, stream = "sk_live_RBFAIL7777", io.StringIO()
    server_log = logs.handler("json", stream)
    logging.getLogger("rebound.runbooks").addHandler(server_log)
    try:
        execution = run_now("sample_leaky", {"api_key": key}, staff["olga"], clock=clock)
    finally:
        logging.getLogger("rebound.runbooks").removeHandler(server_log)
    assert execution.status == "failed" and execution.error == "RuntimeError: db refused credential ***"
    assert key not in execution.log and "connecting with ***" in execution.log
    assert "runbook execution" in stream.getvalue() and key not in stream.getvalue()


def test_invalid_params_are_refused_naming_each_field_and_nothing_is_filed(samples, staff, clock):
    with pytest.raises(InvalidInput) as refused:
        runbooks.start("sample_steps", {"steps": "many", "colour": "red"}, staff["olga"], scope=None, clock=clock)
    assert refused.value.field == "colour"
    assert refused.value.to_dict()["errors"] == {
        "colour": "unknown parameter; this runbook takes steps, pause_s", "steps": "a whole number"}
    with pytest.raises(InvalidInput, match="no dead letter #999"):
        runbooks.start("fix_params_and_replay", {"dead_letter": 999, "params": "{}"}, staff["olga"], scope=None,
                       clock=clock)
    with pytest.raises(NotFound, match="no runbook named 'nope'"):
        runbooks.start("nope", {}, staff["olga"], scope=None, clock=clock)
    assert db.session.execute(select(RunbookExecution)).first() is None


def test_a_late_duplicate_of_the_job_runs_nothing(samples, staff, clock):
    execution = run_now("sample_steps", {"steps": 1}, staff["olga"], clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock) == "skipped"
    assert runbooks.get(execution.id).changes_total == 1


def test_a_high_risk_run_waits_for_approval_with_the_dry_runs_changes_as_its_diff(samples, staff, clock):
    with pytest.raises(InvalidInput, match="give a reason"):
        runbooks.start("sample_gated", {"steps": 2}, staff["bea"], scope=None, clock=clock, enqueue=False)
    execution = runbooks.start("sample_gated", {"steps": 2}, staff["bea"], scope=None, reason="after the outage",
                               clock=clock, enqueue=False)
    assert execution.status == "awaiting_approval" and execution.approval_id
    approval = db.session.get(Approval, execution.approval_id)
    assert (approval.kind, approval.status, approval.subject_id, approval.reason) == (
        "runbook.execute", "pending", str(execution.id), "after the outage")

    # The preview (a worker's job) dry-runs it and puts what it would change in front of the approver.
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    db.session.expire_all()
    assert approval.before == {"step #1 done": False, "step #2 done": False}
    assert approval.after == {"step #1 done": True, "step #2 done": True}
    assert changes_of(execution, planned=True) == [("step", "1", "done", False, True),
                                                   ("step", "2", "done", False, True)]
    assert runbook_runner.execute(execution.id, clock=clock) == "skipped"  # not queued: it waits for the approver

    with pytest.raises(FourEyes):  # the requester holds the approve permission too, and still may not
        decisions.approve(execution.approval_id, staff["bea"], clock=clock)
    decisions.approve(execution.approval_id, staff["alex"], "ok", clock=clock)
    assert runbooks.get(execution.id).status == "queued"
    assert runbook_runner.execute(execution.id, clock=clock) == "succeeded"
    db.session.expire_all()
    done = runbooks.get(execution.id)
    # The request, as the API and the CLI read it, says how the execution ended, not only "queued for a worker"
    # (its outcome when approved; helper 125).
    request = shown.as_dict(approvals.row(db.session.get(Approval, execution.approval_id)), clock())
    assert "queued for a worker" in request["outcome"]
    assert request["execution"] == {"id": execution.id, "status": "succeeded", "changes_total": 2,
                                    "finished_at": done.finished_at.isoformat()}
    said = current_app.test_cli_runner().invoke(args=["approvals", "show", str(execution.approval_id)]).output
    assert f"  execution now: #{execution.id} succeeded, 2 changes" in said
    assert changes_of(done, planned=False) == [("step", "1", "done", False, True), ("step", "2", "done", False, True)]
    assert "Approved (request #" in done.log and "Preview done: 2 changes" in done.log


def test_an_approved_run_whose_changes_are_whole_number_floats_runs(samples, staff, clock):
    """An extension developer's walk: 'amount → 9.0' was refused as a change the approver never saw, beside a
    preview that read 9 (the JSON column gives 9.0 back as 9)."""
    execution = runbooks.start("sample_reprice", {}, staff["bea"], scope=None, reason="price fix", clock=clock,
                               enqueue=False)
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    decisions.approve(execution.approval_id, staff["alex"], clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock) == "succeeded", runbooks.get(execution.id).error


def test_a_request_whose_preview_finds_nothing_to_change_closes_without_asking_an_approver(staff, clock):
    run_id = Runs().submit("demo.noop", {})
    assert execute(run_id, 0, clock=clock) == "succeeded"  # nothing finished a year ago: nothing to purge
    execution = runbooks.start("purge_finished_runs", {"older_than_days": "365"}, staff["olga"], scope=None,
                               reason="tidy up", clock=clock, enqueue=False)
    assert execution.status == "awaiting_approval"
    assert runbook_runner.preview(execution.id, clock=clock) == "cancelled"
    db.session.expire_all()
    request = db.session.get(Approval, execution.approval_id)
    assert request.status == "superseded" and request.outcome.startswith("its dry-run found nothing to change")
    done = runbooks.get(execution.id)
    assert done.status == "cancelled" and f"request #{request.id} closed without asking an approver" in done.log
    assert approvals.waiting_for(None, None, clock()) == 0
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.supersede")).scalars()
    assert (entry.actor, entry.target_id) == ("system", str(request.id))
    assert runbook_runner.execute(execution.id, clock=clock) == "skipped"  # nothing runs


def test_a_real_resolve_of_a_run_that_is_not_dead_is_refused_naming_it(staff, clock):
    run_id = Runs().submit("demo.noop", {})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    with pytest.raises(InvalidParams) as refused:
        runbooks.start("resolve_runs", {"runs": str(run_id), "note": "paid"}, staff["olga"], scope=None,
                       reason="tidy up", clock=clock, enqueue=False)
    assert refused.value.errors == {
        "runs": f"run {run_id}: it is succeeded; only a dead run can be marked resolved; leave it out"}
    assert db.session.execute(select(Approval)).first() is None
    # A dry-run still lists what it would leave alone.
    assert runbooks.start("resolve_runs", {"runs": str(run_id), "note": "paid"}, staff["olga"], scope=None,
                          dry_run=True, clock=clock, enqueue=False).status == "queued"


def test_approving_before_the_preview_finished_is_refused_and_the_request_keeps_waiting(samples, staff, clock):
    execution = runbooks.start("sample_gated", {}, staff["olga"], scope=None, reason="now", clock=clock,
                               enqueue=False)
    with pytest.raises(Conflict, match="preview has not finished .its dry-run waits for a worker.") as refused:
        decisions.approve(execution.approval_id, staff["alex"], clock=clock)
    assert "It still waits for you" in refused.value.detail
    db.session.expire_all()
    # It was closed as failed and its execution cancelled: a click made while busy workers had not previewed it
    # threw the request away (helper 101).
    assert db.session.get(Approval, execution.approval_id).status == "pending"
    assert runbooks.get(execution.id).status == "awaiting_approval"
    assert db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.approve")).first() is None
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    assert decisions.approve(execution.approval_id, staff["alex"], clock=clock).status == "executed"
    assert runbooks.get(execution.id).status == "queued"


def test_a_rejected_withdrawn_or_expired_request_never_runs(samples, staff, clock):
    rejected = runbooks.start("sample_gated", {}, staff["olga"], scope=None, reason="a", clock=clock, enqueue=False)
    expired = runbooks.start("sample_gated", {}, staff["olga"], scope=None, reason="b", clock=clock, enqueue=False)
    withdrawn = runbooks.start("sample_gated", {}, staff["olga"], scope=None, reason="c", clock=clock, enqueue=False)
    decisions.reject(rejected.approval_id, staff["alex"], "not during the sale", clock=clock)
    decisions.withdraw(withdrawn.approval_id, staff["olga"], "asked twice", clock=clock)
    db.session.expire_all()
    # A person's refusal cancels the execution with the decision, so its page never says it still awaits approval.
    assert (runbooks.get(rejected.id).status, runbooks.get(withdrawn.id).status) == ("cancelled", "cancelled")
    clock.advance(24 * 3600 + 1)
    approvals.expire_due(clock=clock)
    report = runbook_reconcile.reconcile(clock=clock)
    assert report["cancelled"] == [expired.id]  # an expiry has no person to act at the moment: the reconciler does
    assert runbooks.get(withdrawn.id).error == (f"approval request #{withdrawn.approval_id} was withdrawn: "
                                                "asked twice; it never ran")
    db.session.expire_all()
    assert runbooks.get(rejected.id).error == (f"approval request #{rejected.approval_id} was rejected: "
                                               "not during the sale; it never ran")
    assert runbooks.get(expired.id).status == "cancelled"
    assert runbook_runner.execute(rejected.id, clock=clock) == "skipped"


def test_an_admin_can_require_approval_for_any_runbook_audited(samples, staff, clock):
    assert run_now("sample_steps", {}, staff["olga"], clock=clock).status == "succeeded"
    runbooks.set_requires_approval("sample_steps", True, staff["ada"], scope=None, clock=clock)
    assert audit_actions()[-1] == "runbook.policy"
    audited = len(audit_actions())
    runbooks.set_requires_approval("sample_steps", True, staff["ada"], scope=None, clock=clock)
    runbooks.set_requires_approval("sample_writer", False, staff["ada"], scope=None, clock=clock)  # off, as it was
    assert len(audit_actions()) == audited  # saved as it was: nothing changed, nothing to audit
    execution = runbooks.start("sample_steps", {}, staff["olga"], scope=None, reason="r", clock=clock, enqueue=False)
    assert execution.status == "awaiting_approval"
    # A dry-run changes nothing, so it never waits.
    assert run_now("sample_steps", {}, staff["olga"], clock=clock, dry_run=True).status == "succeeded"
    with pytest.raises(Forbidden):
        runbooks.set_requires_approval("sample_steps", False, staff["ada"], scope=1, clock=clock)


def test_a_tenant_scoped_person_runs_runbooks_only_on_their_tenants_objects(staff, clock, dead_run):
    acme = make_tenant("acme")
    _, theirs = dead_run("default")
    _, ours = dead_run("acme")
    scoped = staff["olga"]
    params = {"dead_letter": theirs, "params": '{"fail_times": 0}'}
    with pytest.raises(InvalidInput, match="no dead letter #.* in your tenant"):
        runbooks.start("fix_params_and_replay", params, scoped, scope=acme.id, dry_run=True, clock=clock)
    with pytest.raises(Forbidden, match="only on tenant acme"):
        runbooks.start("replay_dead_letters", {}, scoped, scope=acme.id, tenant="default", dry_run=True, clock=clock)
    with pytest.raises(Forbidden, match="whole system"):
        runbooks.start("engine_reconcile", {}, scoped, scope=acme.id, dry_run=True, clock=clock)
    execution = runbooks.start("fix_params_and_replay", {**params, "dead_letter": ours}, scoped, scope=acme.id,
                               dry_run=True, clock=clock, enqueue=False)
    assert execution.tenant_id == acme.id
    with pytest.raises(NotFound):
        runbooks.get(execution.id, tenant_id=db.session.execute(
            select(Tenant.id).where(Tenant.name == "default")).scalar_one())
    everywhere = runbooks.start("replay_dead_letters", {}, staff["olga"], scope=None, dry_run=True, clock=clock,
                                enqueue=False)
    with pytest.raises(NotFound):  # an execution across every tenant is not one tenant's to read
        runbooks.get(everywhere.id, tenant_id=acme.id)


def test_a_worker_lost_mid_run_is_failed_clearly_by_the_reconciler(samples, staff, clock):
    execution = runbooks.start("sample_steps", {}, staff["olga"], scope=None, clock=clock, enqueue=False)
    # Claimed by a worker that then died: running, and no heartbeat since.
    db.session.execute(db.update(RunbookExecution).where(RunbookExecution.id == execution.id).values(
        status="running", started_at=clock(), heartbeat_at=clock(), worker_id="host:4242", changes_total=3))
    db.session.commit()
    assert runbook_reconcile.reconcile(clock=clock)["lost"] == []  # still fresh
    clock.advance(3)
    assert runbook_reconcile.reconcile(clock=clock)["lost"] == [execution.id]
    db.session.expire_all()
    lost = runbooks.get(execution.id)
    assert lost.status == "failed" and lost.error.startswith("worker lost: host:4242 stopped sending heartbeats")
    assert lost.log.endswith("Check them, then run it again.")
    # Its log is written a second behind its work: the changes, not the log's last lines, say what it committed.
    assert "What it committed before (3 changes) is listed in its changes" in lost.error


def test_a_real_run_keeps_a_backup_of_the_rows_it_changed(staff, clock, dead_run):
    run_id, _ = dead_run()
    execution = run_now("replay_dead_letters", {"code": "bad_account"}, staff["olga"], clock=clock)
    assert execution.status == "succeeded"
    [backup] = db.session.execute(select(RunbookBackup).where(RunbookBackup.execution_id == execution.id)).scalars()
    assert (backup.object, backup.object_id, backup.row) == (
        "run", str(run_id), {"status": "dead", "series": 1, "attempt": 1, "error_code": "bad_account"})


def test_the_cli_runs_as_nobody_cannot_ask_for_approval(samples, clock):
    with pytest.raises(Forbidden, match="must be requested by a person"):
        runbooks.start("sample_gated", {}, Actor("cli"), scope=None, reason="r", clock=clock, enqueue=False)
    assert db.session.execute(select(RunbookExecution)).first() is None


def test_an_approvers_preview_is_queued_ahead_of_the_waiting_runs(samples, staff, clock, redis_url, runs):
    """On the maintenance queue, which workers read last, a preview waited behind an incident's backlog of runs
    while the approver could not approve (helper 103)."""
    waiting = [runs.submit("demo.noop") for _ in range(3)]
    gated = runbooks.start("sample_gated", {}, staff["bea"], scope=None, reason="r", clock=clock)
    queued = Queue(queueing.RUN_QUEUE, connection=redis.Redis.from_url(redis_url)).job_ids
    assert queued[0] == runbooks.preview_job_id(gated.id) and len(queued) == len(waiting) + 1


def test_the_reconciler_queues_again_what_redis_lost_and_is_on_the_maintenance_schedule(samples, staff, clock,
                                                                                       redis_url):
    queued = runbooks.start("sample_steps", {}, staff["olga"], scope=None, clock=clock)
    gated = runbooks.start("sample_gated", {}, staff["bea"], scope=None, reason="r", clock=clock)
    assert queueing.status_of(runbooks.run_job_id(queued.id)) == "queued"
    assert runbook_reconcile.reconcile(clock=clock) == {"lost": [], "requeued": [], "cancelled": [],
                                                        "previews_requeued": []}
    redis.Redis.from_url(redis_url).flushdb()
    clock.advance(2)
    report = runbook_reconcile.reconcile(clock=clock)
    assert (report["requeued"], report["previews_requeued"]) == ([queued.id], [gated.id])
    assert queueing.status_of(runbooks.run_job_id(queued.id)) == "queued"
    assert queueing.status_of(runbooks.preview_job_id(gated.id)) == "queued"
    [job] = [job for job in MAINTENANCE if job.id == "runbooks-reconcile"]
    module, name = job.func.split(":")
    assert getattr(importlib.import_module(module), name) is runbook_reconcile.reconcile
