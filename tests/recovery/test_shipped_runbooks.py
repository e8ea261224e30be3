"""Each runbook Rebound ships: its dry-run changes nothing (every table compared before and after), its real run does
the job and records what it changed."""

import json
from datetime import timedelta

import pytest
import redis
from sqlalchemy import select

from console.domain.clock import FrozenClock
from console.extensions import db
from console.models import (
    Approval,
    AuditEntry,
    DeadLetter,
    Delivery,
    OutboxMessage,
    Run,
    RunbookBackup,
    RunEvent,
    WorkOrder,
)
from console.services.actor import Actor
from console.services.dlq import discards
from console.services.engine import control, queueing
from console.services.engine.execute import execute
from console.services.errors import Conflict
from console.services.people import tenants
from console.services.recovery import approvals, decisions, params_fix, runbook_reconcile, runbook_runner, runbooks
from console.services.scheduling import planner, tasks
from console.services.workorders import changes as workorder_changes
from tests.factories import Runs, changes_of, make_tenant, run_now


def run_approved(name: str, params: dict, staff, clock):
    """Ask for a real run (it needs approval), preview it, have another person approve it, run it."""
    execution = runbooks.start(name, params, staff["olga"], scope=None, reason="cleaning up", clock=clock,
                               enqueue=False)
    assert execution.status == "awaiting_approval"
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    decisions.approve(execution.approval_id, staff["alex"], "looks right", clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock, sleep=lambda s: None) in ("succeeded", "failed")
    db.session.expire_all()
    return runbooks.get(execution.id)


def dry_run_changes_nothing(snapshot, name: str, params: dict, actor, clock):
    before = snapshot()
    execution = run_now(name, params, actor, clock=clock, dry_run=True)
    assert execution.status == "succeeded", execution.log
    assert snapshot() == before
    return execution


def letter_of(run_id: int) -> DeadLetter:
    db.session.expire_all()
    return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalar_one()


def run_of(run_id: int) -> Run:
    db.session.expire_all()
    return db.session.get(Run, run_id)


def test_replay_dead_letters_by_filter_at_a_rate(staff, clock, dead_run, snapshot, redis_url):
    matching = [dead_run()[0] for _ in range(3)]
    other, _ = dead_run(code="other_code")
    params = {"code": "bad_account", "rate": 2}
    dry = dry_run_changes_nothing(snapshot, "replay_dead_letters", params, staff["olga"], clock)
    assert [change[:3] for change in changes_of(dry, planned=True)] == [
        item for run_id in matching for item in (("dead_letter", str(letter_of(run_id).id), "status"),
                                                 ("run", str(run_id), "status"))]
    assert "3 open dead letters with code bad_account." in dry.log

    slept, elapsed = [], [0.0]  # a monotonic clock only the sleeps move: the replays themselves take no time

    def sleep(seconds):
        slept.append(seconds)
        elapsed[0] += seconds

    execution = runbooks.start("replay_dead_letters", params, staff["olga"], scope=None, clock=clock, enqueue=False)
    assert runbook_runner.execute(execution.id, clock=clock, sleep=sleep, monotonic=lambda: elapsed[0]) == "succeeded"
    assert slept == [1.0]  # two a second: the second pair waits its second
    for run_id in matching:
        run = run_of(run_id)
        assert (run.status, run.series) == ("pending", 2)
        assert letter_of(run_id).status == "replayed"
        assert queueing.job_status(run_id, 2, 0) == "queued"
    assert run_of(other).status == "dead"
    done = runbooks.get(execution.id)
    assert done.changes_total == 6 and len(changes_of(done, planned=False)) == 6
    assert redis.Redis.from_url(redis_url).exists(f"rq:job:{queueing.job_id(matching[0], 2, 0)}")


def test_replay_dead_letters_takes_a_limit_and_refuses_a_task_with_a_handler(staff, clock, dead_run):
    first, second = dead_run()[0], dead_run()[0]
    execution = run_now("replay_dead_letters", {"limit": 1}, staff["olga"], clock=clock)
    assert (run_of(first).status, run_of(second).status) == ("pending", "dead")
    assert "replaying the oldest 1" in execution.log
    task = tasks.register(tenants.find("default"), {"name": "t", "handler": "demo.noop", "cron": "@daily"},
                          Actor("test"))
    with pytest.raises(Exception, match="a task or a handler, not both"):
        runbooks.start("replay_dead_letters", {"task": task.id, "handler": "python:demo.flaky"}, staff["olga"],
                       scope=None, clock=clock)
    # Any text was taken as a group and matched nothing: "0 dead letters" read as an empty group (helper 155).
    with pytest.raises(Exception, match="group is an error group's fingerprint: up to 32 hex digits"):
        runbooks.start("replay_dead_letters", {"group": "carrier\u202edown"}, staff["olga"], scope=None, clock=clock)


def test_a_runbook_started_without_a_tenant_on_one_tenants_objects_is_that_tenants(staff, clock, dead_run):
    """A fix of acme's dead letter filed without a tenant read "acts on every tenant" in Approvals."""
    acme = make_tenant("acme")
    acme_run, letter_id = dead_run(tenant="acme")
    execution = runbooks.start("fix_params_and_replay", {"dead_letter": letter_id, "params": '{"fail_times": 0}'},
                               staff["olga"], scope=None, reason="reopened", clock=clock, enqueue=False)
    assert execution.tenant_id == acme.id
    assert db.session.get(Approval, execution.approval_id).tenant_id == acme.id
    other, _ = dead_run()  # default's: two tenants' runs are every tenant's business
    spread = runbooks.start("resolve_runs", {"runs": f"{acme_run} {other}", "note": "handled"},
                            staff["olga"], scope=None, reason="handled", clock=clock, enqueue=False, dry_run=True)
    assert spread.tenant_id is None


def test_replay_dead_letters_with_no_filter_replays_everything_only_when_every_says_so(staff, clock, dead_run):
    """Left empty, the form replayed every open dead letter of every tenant after a confirm that gave no count."""
    first = dead_run()[0]
    with pytest.raises(Exception, match="no filter narrows this replay: .* or set every") as refused:
        runbooks.start("replay_dead_letters", {}, staff["olga"], scope=None, clock=clock)
    assert refused.value.field == "every" and run_of(first).status == "dead"
    assert "Would replay" in run_now("replay_dead_letters", {}, staff["olga"], clock=clock, dry_run=True).log
    run_now("replay_dead_letters", {"every": True}, staff["olga"], clock=clock)
    assert run_of(first).status == "pending"


def test_discard_dead_letters_discards_the_ones_that_match_after_a_second_persons_approval(staff, clock, dead_run,
                                                                                          snapshot):
    """The DLQ discarded at most the 50 ticked rows of a page, each batch over the hourly allowance a request of its
    own: a 700-letter group took 14 (helper 153)."""
    (first, first_letter), (second, second_letter) = dead_run(), dead_run()
    other, _ = dead_run(code="bad_iban", message="IBAN checksum failed")
    with pytest.raises(Exception, match="no filter narrows this discard: .* or set every to discard every"):
        runbooks.start("discard_dead_letters", {"reason": "test accounts"}, staff["olga"], scope=None, clock=clock)
    params = {"code": "bad_account", "reason": "test accounts, closed on purpose"}
    dry = dry_run_changes_nothing(snapshot, "discard_dead_letters", params, staff["olga"], clock)
    assert changes_of(dry, planned=True) == [("dead_letter", str(first_letter), "status", "open", "discarded"),
                                             ("dead_letter", str(second_letter), "status", "open", "discarded")]
    # The work order the two leave with nothing to do closes: the change lists did not say so (helper 160).
    order = letter_of(first).work_order_id
    closes = f"work order #{order} would close within a minute (the delivery round closes them"
    assert closes in dry.log
    done = run_approved("discard_dead_letters", params, staff, clock)
    assert done.status == "succeeded" and "2 dead letters discarded." in done.log
    assert closes.replace("would close", "close") in done.log
    assert [letter_of(run_id).status for run_id in (first, second, other)] == ["discarded", "discarded", "open"]
    assert run_of(first).status == "dead"
    rows = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.discard")
                              .order_by(AuditEntry.seq)).scalars().all()
    assert [(row.target_id, row.actor) for row in rows] == [(str(first_letter), "olga"), (str(second_letter), "olga")]
    assert rows[0].note == (f"test accounts, closed on purpose · approved by alex, request #{done.approval_id} · via "
                            f"runbook discard_dead_letters, execution #{done.id}")
    assert rows[0].after["approved_by"] == f"alex, request #{done.approval_id}"  # not counted in her allowance
    workorder_changes.close_settled(clock)  # the scheduler's outbox job, every 2 s
    assert db.session.get(WorkOrder, letter_of(first).work_order_id).status == "closed"
    assert db.session.get(WorkOrder, letter_of(other).work_order_id).status == "open"


def test_replay_dead_letters_says_what_it_does_to_the_workflows_among_them(staff, clock, saga, snapshot):
    saga.two_failed()  # three dead steps: two failed going forward, one died undoing itself
    dry = dry_run_changes_nothing(snapshot, "replay_dead_letters", {}, staff["olga"], clock)
    assert ("3 of them are steps of saga workflows: a replay runs each alone, and its workflow does not go on from "
            "it. Where the workflow was undone, the steps its compensation undid stay undone. One of them had "
            "succeeded and its undo failed: a replay runs that step again, not its undo (Retry the undo, on a "
            "run's page, does that).") in dry.log
    assert "of them are steps" not in run_now("replay_dead_letters", {"code": "no_such_code"}, staff["olga"],
                                              clock=clock, dry_run=True).log


def test_replaying_and_resolving_by_runbook_close_the_params_fixes_waiting_on_their_letters(staff, clock, dead_run):
    (replayed, replayed_letter), (resolved, resolved_letter) = dead_run(), dead_run(code="other_code")
    fixes = [params_fix.request_fix(letter_id, {"fail_times": 0}, "the account was reopened", staff["olga"],
                                    clock=clock).id for letter_id in (replayed_letter, resolved_letter)]
    replay = run_now("replay_dead_letters", {"code": "bad_account"}, staff["olga"], clock=clock)
    assert f"params fix #{fixes[0]} waiting for approval was closed" in replay.log
    resolve = run_approved("resolve_runs", {"runs": str(resolved), "note": "refunded by hand"}, staff, clock)
    assert resolve.status == "succeeded" and f"params fix #{fixes[1]} waiting for approval was closed" in resolve.log
    db.session.expire_all()
    assert [db.session.get(Approval, fix).status for fix in fixes] == ["superseded", "superseded"]
    assert run_of(replayed).status == "pending" and run_of(resolved).status == "resolved"


def test_resolve_runs_closes_their_dead_letters_and_then_the_work_order(staff, clock, dead_run, snapshot):
    (first, _), (second, _) = dead_run(), dead_run()
    succeeded = Runs().submit("demo.noop")
    assert execute(succeeded, 0, clock=clock) == "succeeded"
    order_id = letter_of(first).work_order_id
    assert order_id and letter_of(second).work_order_id == order_id
    params = {"runs": f"{first}, {succeeded}", "note": "refunded by hand"}
    dry = dry_run_changes_nothing(snapshot, "resolve_runs", params, staff["olga"], clock)
    assert changes_of(dry, planned=True) == [("run", str(first), "status", "dead", "resolved"),
                                             ("dead_letter", str(letter_of(first).id), "status", "open", "resolved")]
    assert f"Run #{succeeded} left alone: it is succeeded; only a dead run can be marked resolved." in dry.log

    execution = run_approved("resolve_runs", {**params, "runs": str(first)}, staff, clock)  # a real run: dead ones
    assert execution.status == "succeeded", execution.log
    assert run_of(first).status == "resolved" and run_of(succeeded).status == "succeeded"
    letter = letter_of(first)
    assert (letter.status, letter.resolution_note, letter.resolved_by) == (
        "resolved", "refunded by hand", f"olga (approved by alex, request #{execution.approval_id})")
    # Four eyes on the record: the requester acted, the approver and the runbook that did it named on the same row
    # (without it, a runbook's changes read as clicks by hand).
    [row] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.resolve",
                                                        AuditEntry.target_id == str(first))).scalars().all()
    assert (row.actor, row.note) == ("olga", f"refunded by hand · approved by alex, request #{execution.approval_id}"
                                             f" · via runbook resolve_runs, execution #{execution.id}")
    assert db.session.get(WorkOrder, order_id).status != "closed"  # the second run's letter is still open

    last = run_approved("resolve_runs", {"runs": str(second), "note": "refunded too"}, staff, clock)
    assert ("work_order", str(order_id), "status", "open", "closed") in changes_of(last, planned=False)
    order = db.session.get(WorkOrder, order_id)
    assert (order.status, order.closed_by) == ("closed", "system")
    [event] = Runs().events(second, "resolved")
    assert (event.from_status, event.actor, event.message) == ("dead", "olga", "refunded too")
    assert "run.resolve" in db.session.execute(select(AuditEntry.action)).scalars().all()


def test_fix_params_and_replay_gives_the_run_new_params_and_it_recovers(staff, clock, dead_run, snapshot):
    run_id, letter_id = dead_run()
    params = {"dead_letter": letter_id, "params": '{"fail_times": 0}'}
    dry = dry_run_changes_nothing(snapshot, "fix_params_and_replay", params, staff["olga"], clock)
    broken = run_of(run_id).params
    assert changes_of(dry, planned=True)[0] == ("run", str(run_id), "params", broken, {**broken, "fail_times": 0})

    execution = run_approved("fix_params_and_replay", params, staff, clock)
    assert execution.status == "succeeded", execution.log
    run = run_of(run_id)
    assert (run.status, run.series, run.params["fail_times"]) == ("pending", 2, 0)
    assert letter_of(run_id).status == "replayed"
    assert execute(run_id, 0, clock=clock) == "succeeded"
    with pytest.raises(Exception, match="not valid JSON"):
        runbooks.start("fix_params_and_replay", {**params, "params": "{oops"}, staff["olga"], scope=None, clock=clock)


def test_one_fix_of_a_letter_waits_at_a_time_whichever_way_it_was_asked(staff, clock, dead_run):
    run_id, letter_id = dead_run()
    by_form = params_fix.request_fix(letter_id, {"fail_times": 0}, "account reopened", staff["olga"], clock=clock)
    params = {"dead_letter": letter_id, "params": '{"fail_times": 0}'}
    with pytest.raises(runbooks.InvalidParams) as refused:
        runbooks.start("fix_params_and_replay", params, staff["olga"], scope=None, reason="again", clock=clock)
    assert refused.value.errors == {"dead_letter": f"request #{by_form.id} to fix dead letter #{letter_id} already "
                                                   "waits for approval; only one fix of a letter waits at a time"}
    # A dry-run contends with nothing: it previews while the fix waits.
    assert run_now("fix_params_and_replay", params, staff["olga"], clock=clock, dry_run=True).status == "succeeded"
    decisions.reject(by_form.id, staff["alex"], note="wrong account", clock=clock)
    execution = runbooks.start("fix_params_and_replay", params, staff["olga"], scope=None, reason="now", clock=clock)
    with pytest.raises(Conflict, match=rf"request #{execution.approval_id} to fix dead letter {letter_id} \(runbook "
                                       r"fix_params_and_replay\) is already waiting for approval"):
        params_fix.request_fix(letter_id, {"fail_times": 1}, "another", staff["olga"], clock=clock)
    assert db.session.execute(select(Approval.id).where(Approval.status == "pending")).scalars().all() == [
        execution.approval_id]
    # Once the runbook's request has expired (its execution not yet cancelled by the reconciler), a fix may be filed.
    clock.advance(24 * 3600 + 1)
    assert params_fix.request_fix(letter_id, {"fail_times": 1}, "again", staff["olga"], clock=clock).status == "pending"


def test_a_runbook_fix_whose_letter_was_replayed_meanwhile_is_refused_on_approval_and_closes_as_superseded(
        staff, clock, dead_run):
    params = {"dead_letter": 0, "params": '{"fail_times": 0}'}
    requests = []
    for _ in range(2):
        run_id, letter_id = dead_run()
        execution = runbooks.start("fix_params_and_replay", {**params, "dead_letter": letter_id}, staff["olga"],
                                   scope=None, reason="reopened", clock=clock, enqueue=False)
        assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
        control.replay(db.session.get(DeadLetter, letter_id), staff["bea"], clock)  # settled another way meanwhile
        requests.append((execution, letter_id))
    (approved, approved_letter), (left, left_letter) = requests
    # Approving could only fail: refused, saying why, closed as superseded (by nobody, as a fix asked from the DLQ
    # is), and its execution never runs.
    with pytest.raises(Conflict, match=rf"no longer needs deciding: dead letter {approved_letter} was replayed by bea "
                                       r"at .*nothing ran"):
        decisions.approve(approved.approval_id, staff["alex"], clock=clock)
    db.session.expire_all()
    refused = db.session.get(Approval, approved.approval_id)
    assert (refused.status, refused.decided_by_id) == ("superseded", None)
    assert refused.outcome.startswith(f"dead letter {approved_letter} was replayed by bea")
    assert runbooks.get(approved.id).status == "cancelled"
    # The other is closed by the maintenance job, as a fix asked from the DLQ would be.
    assert params_fix.supersede_settled(clock) == [left.approval_id]
    db.session.expire_all()
    closed = db.session.get(Approval, left.approval_id)
    assert closed.status == "superseded" and closed.outcome.startswith(f"dead letter {left_letter} was replayed by bea")
    assert runbooks.get(left.id).status == "cancelled" and "superseded" in runbooks.get(left.id).error
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.supersede",
                                                          AuditEntry.target_id == str(left.approval_id))).scalars()
    # Filed without a tenant, it is the letter's tenant's (it was on record as every tenant's).
    assert (entry.actor, entry.tenant, entry.note) == ("system", "default", closed.outcome)
    assert params_fix.supersede_settled(clock) == []


def test_an_approved_runbook_that_would_now_change_what_its_approver_never_saw_runs_nothing(staff, clock, dead_run):
    """A walk: a run died again after the preview was approved, so resolving it closed a dead letter and a work order
    the approver had never seen, while the approval's audit row listed what the preview had shown."""
    (run_id, letter_id), (other_run, other_letter) = dead_run(code="gone_a"), dead_run(code="gone_b")
    execution = runbooks.start("resolve_runs", {"runs": f"{run_id} {other_run}", "note": "refunded by hand"},
                               staff["olga"], scope=None, reason="refunded", clock=clock, enqueue=False)
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    control.replay(db.session.get(DeadLetter, letter_id), staff["bea"], clock)
    attempt = db.session.get(Run, run_id).attempt
    assert execute(run_id, attempt, clock=clock) == "dead"  # died again: a new dead letter the preview never listed
    new_letter = max(letter.id for letter in Runs().dead_letters(run_id))
    decisions.approve(execution.approval_id, staff["alex"], clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock) == "failed"
    db.session.expire_all()
    refused = runbooks.get(execution.id)
    assert refused.error.startswith(f"nothing ran: things moved on since the preview request "
                                    f"#{execution.approval_id} was approved on, and run now it would also make ")
    assert f"dead letter #{new_letter} status → resolved" in refused.error
    assert f"Not in the approved preview: dead letter #{new_letter} status → resolved" in refused.log
    # The request says so too (it read "executed", its outcome "queued for a worker"), audited as the system's.
    request = db.session.get(Approval, execution.approval_id)
    assert (request.status, request.outcome) == ("failed", refused.error)
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.fail")).scalars()
    assert (entry.actor, entry.target_id, entry.note) == ("system", str(execution.approval_id), refused.error)
    assert changes_of(refused, planned=False) == []
    assert {db.session.get(DeadLetter, i).status for i in (new_letter, other_letter)} == {"open"}
    assert db.session.get(Run, run_id).status == "dead"


def test_an_approved_runbook_with_less_left_to_do_than_its_preview_runs_the_rest(staff, clock, dead_run):
    (run_id, letter_id), (other_run, other_letter) = dead_run(code="gone_a"), dead_run(code="gone_b")
    execution = runbooks.start("resolve_runs", {"runs": f"{run_id} {other_run}", "note": "refunded by hand"},
                               staff["olga"], scope=None, reason="refunded", clock=clock, enqueue=False)
    runbook_runner.preview(execution.id, clock=clock)
    control.replay(db.session.get(DeadLetter, letter_id), staff["bea"], clock)  # settled another way: less to do
    decisions.approve(execution.approval_id, staff["alex"], clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock) == "succeeded"
    db.session.expire_all()
    assert db.session.get(DeadLetter, other_letter).status == "resolved"
    assert "Checked against the approved preview:" in runbooks.get(execution.id).log
    # The audit log says it made fewer changes than were approved: it listed only the approved ones (helper 144).
    (finish,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "runbook.finish")).scalars()
    assert (finish.target_type, finish.target_id) == ("runbook_execution", str(execution.id))
    assert finish.after == {"runbook": "resolve_runs", "status": "succeeded", "approval_id": execution.approval_id,
                            "changes_made": 3, "changes_approved": 6}
    assert finish.actor == "olga"  # who asked; its approval_id names the request alex approved


def test_a_runbook_request_that_expired_is_audited_as_cancelled(staff, clock, dead_run):
    (run_id, _), = [dead_run(code="gone_a")]
    execution = runbooks.start("resolve_runs", {"runs": str(run_id), "note": "refunded by hand"}, staff["olga"],
                               scope=None, reason="refunded", clock=clock, enqueue=False)
    runbook_runner.preview(execution.id, clock=clock)
    clock.advance(2 * 86400)
    approvals.expire_due(clock)
    runbook_reconcile.reconcile(clock)
    assert runbooks.get(execution.id).status == "cancelled"
    (cancel,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "runbook.cancel")).scalars()
    assert cancel.target_id == str(execution.id) and cancel.actor == "system"
    assert cancel.note == f"approval request #{execution.approval_id} was expired; it never ran"
    assert "changes_made" not in cancel.after


def test_backfill_task_creates_one_run_per_missed_firing_once(staff, clock, snapshot):
    task = tasks.register(tenants.find("default"), {"name": "hourly", "handler": "demo.noop", "cron": "0 * * * *"},
                          Actor("test"), clock=FrozenClock(clock() - timedelta(days=1)))
    six = clock().replace(hour=6)
    planner.fire([planner.Firing(task.id, six)], Actor("scheduler"), clock)  # this one the scheduler did fire
    params = {"task": task.id, "start": "2026-01-05T05:00", "end": "2026-01-05T07:00"}
    dry = dry_run_changes_nothing(snapshot, "backfill_task", params, staff["olga"], clock)
    assert [change[1] for change in changes_of(dry, planned=True)] == [
        f"task:{task.id}:2026-01-05T05:00:00+00:00", f"task:{task.id}:2026-01-05T07:00:00+00:00"]
    assert "3 firings" in dry.log and "1 have a run, 2 have none" in dry.log

    execution = run_now("backfill_task", params, staff["olga"], clock=clock)
    assert execution.status == "succeeded" and execution.changes_total == 2
    made = db.session.execute(select(Run.scheduled_for, Run.source, Run.idempotency_key).where(
        Run.task_id == task.id).order_by(Run.scheduled_for)).all()
    assert [(moment.hour, source) for moment, source, _ in made] == [(5, "backfill"), (6, "cron"), (7, "backfill")]
    again = run_now("backfill_task", params, staff["olga"], clock=clock)
    assert again.changes_total == 0 and "3 have a run, 0 have none" in again.log
    assert len(tasks.recent_runs(task)) == 3
    with pytest.raises(Exception, match="must not be in the future"):
        runbooks.start("backfill_task", {**params, "end": "2027-01-01T00:00"}, staff["olga"], scope=None, clock=clock)
    # A range of too many firings is refused when asked for, not after a 202 by the worker (helper 165).
    with pytest.raises(runbooks.InvalidParams) as refused:
        runbooks.start("backfill_task", {**params, "start": "2025-11-01T00:00"}, staff["olga"], scope=None,
                       dry_run=True, clock=clock, enqueue=False)
    assert refused.value.errors == {"end": "that range holds more than 1000 firings of '0 * * * *'; backfill a "
                                           "shorter one"}


def test_purge_finished_runs_exports_them_then_deletes_them(app, staff, clock, dead_run, snapshot):
    runs, old = Runs(), FrozenClock(clock() - timedelta(days=40))
    ancient = [runs.submit("demo.noop") for _ in range(2)]
    for run_id in ancient:
        assert execute(run_id, 0, clock=old) == "succeeded"
    recent = runs.submit("demo.noop")
    assert execute(recent, 0, clock=clock) == "succeeded"
    dead_id, _ = dead_run()  # dead, with an open dead letter: never purged
    # Dead long ago: one whose letter a person discarded is settled and goes too (it stayed for good, helper 131);
    # one whose letter is still open stays.
    settled, waiting = (runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal"}) for _ in range(2))
    for run_id in (settled, waiting):
        assert execute(run_id, 0, clock=old) == "dead"
    discards.discard(runs.dead_letters(settled)[0], "the customer cancelled the order", Actor("olga"), clock=old)
    ancient.append(settled)
    params = {"older_than_days": 30}
    dry = dry_run_changes_nothing(snapshot, "purge_finished_runs", params, staff["olga"], clock)
    assert [change[1] for change in changes_of(dry, planned=True)] == [str(run_id) for run_id in ancient]

    execution = run_approved("purge_finished_runs", params, staff, clock)
    assert execution.status == "succeeded", execution.log
    assert [run_of(run_id) for run_id in ancient] == [None, None, None]
    assert run_of(recent) is not None and run_of(dead_id) is not None and run_of(waiting) is not None
    assert db.session.execute(select(RunEvent).where(RunEvent.run_id.in_(ancient))).first() is None
    export = app.config["DATA_DIR"] + f"/exports/purged-runs-{execution.id}.jsonl"
    with open(export, encoding="utf-8") as lines_file:
        lines = [json.loads(line) for line in lines_file]
    assert [line["run"]["id"] for line in lines] == ancient
    assert {event["kind"] for event in lines[0]["run_events"]} >= {"running", "succeeded"}
    assert [letter["status"] for letter in lines[2]["dead_letters"]] == ["discarded"]  # in the export, then gone
    # The backup's record names every key a line carries (it left out the diagnostics; helper 141).
    kept = db.session.execute(select(RunbookBackup.row).where(RunbookBackup.execution_id == execution.id)).scalar_one()
    assert kept["format"] == "one JSON object per line: " + ", ".join(lines[0])
    assert export in execution.log


def test_purge_settled_messages_exports_them_with_their_deliveries_then_deletes_them(app, staff, clock, snapshot):
    def message(status: str, days_ago: int, tenant_id=None) -> int:
        row = OutboxMessage(kind="alert", dedup_key=f"k{status}{days_ago}{tenant_id}", payload={"summary": status},
                            status=status, tenant_id=tenant_id, created_at=clock() - timedelta(days=days_ago))
        db.session.add(row)
        db.session.flush()
        db.session.add(Delivery(outbox_id=row.id, channel="slack", attempt=1, outcome="sent", at=row.created_at))
        return row.id

    globex = make_tenant("globex").id
    old = [message("delivered", 40), message("skipped", 40)]
    kept = [message("failed", 40), message("pending", 40), message("delivered", 5)]  # a person's, in flight, recent
    theirs = message("delivered", 40, globex)
    db.session.commit()
    params = {"older_than_days": 30}
    dry = dry_run_changes_nothing(snapshot, "purge_settled_messages", params, staff["olga"], clock)
    assert [change[1] for change in changes_of(dry, planned=True)] == [str(i) for i in old + [theirs]]
    assert "Would export 3 messages with their delivery attempts to " in dry.log
    assert "purged-messages-<execution>.jsonl (named after the real run's execution)" in dry.log  # not the dry-run's

    execution = run_now("purge_settled_messages", params, staff["olga"], clock=clock)
    assert execution.status == "succeeded", execution.log
    left = set(db.session.execute(select(OutboxMessage.id)).scalars())
    assert left == set(kept)
    assert set(db.session.execute(select(Delivery.outbox_id)).scalars()) == set(kept)
    export = app.config["DATA_DIR"] + f"/exports/purged-messages-{execution.id}.jsonl"
    with open(export, encoding="utf-8") as lines_file:
        lines = [json.loads(line) for line in lines_file]
    assert [line["message"]["id"] for line in lines] == old + [theirs]
    assert [delivery["outcome"] for delivery in lines[0]["deliveries"]] == ["sent"]
    assert db.session.execute(select(AuditEntry).where(AuditEntry.action == "outbox_message.purge")).scalar_one()


def test_a_tenants_person_purges_only_that_tenants_messages(staff, clock):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    for tenant in (acme, globex, None):
        db.session.add(OutboxMessage(kind="alert", dedup_key=f"k{tenant}", payload={}, status="delivered",
                                     tenant_id=tenant.id if tenant else None,
                                     created_at=clock() - timedelta(days=40)))
    db.session.commit()
    execution = run_now("purge_settled_messages", {"older_than_days": 30}, staff["olga"], clock=clock, scope=acme.id)
    assert execution.status == "succeeded", execution.log
    assert set(db.session.execute(select(OutboxMessage.tenant_id)).scalars()) == {None, globex.id}


def test_a_purge_approved_hours_later_takes_what_was_past_the_cut_off_when_it_was_asked(staff, clock):
    # "Older than 30 days" counts from the request: measured from the approval, a run that crossed the line while the
    # request waited was a change the preview never listed, and the approved purge was refused.
    runs = Runs()
    ancient, crossing = runs.submit("demo.noop"), runs.submit("demo.noop")
    assert execute(ancient, 0, clock=FrozenClock(clock() - timedelta(days=40))) == "succeeded"
    assert execute(crossing, 0, clock=FrozenClock(clock() - timedelta(days=29, hours=18))) == "succeeded"
    execution = runbooks.start("purge_finished_runs", {"older_than_days": 30}, staff["olga"], scope=None,
                               reason="cleaning up", clock=clock, enqueue=False)
    assert runbook_runner.preview(execution.id, clock=clock) == "awaiting_approval"
    clock.advance(12 * 3600)  # approvals expire after a day
    decisions.approve(execution.approval_id, staff["alex"], "looks right", clock=clock)
    assert runbook_runner.execute(execution.id, clock=clock, sleep=lambda s: None) == "succeeded"
    db.session.expire_all()
    assert run_of(ancient) is None and run_of(crossing) is not None


def test_engine_reconcile_reports_drift_in_a_dry_run_and_repairs_it_for_real(staff, clock, snapshot, redis_url):
    run_id = Runs().submit("demo.noop")
    redis.Redis.from_url(redis_url).flushdb()  # Redis lost the run's job
    later = FrozenClock(clock() + timedelta(days=400))  # long after it was queued
    dry = dry_run_changes_nothing(snapshot, "engine_reconcile", {}, staff["olga"], later)
    assert changes_of(dry, planned=True) == [("run", str(run_id), "job", "missing", "queued")]
    assert queueing.job_status(run_id, 1, 0) is None

    execution = run_now("engine_reconcile", {}, staff["olga"], clock=later)
    assert execution.status == "succeeded" and "Repaired: 1 requeued" in execution.log
    assert queueing.job_status(run_id, 1, 0) == "queued"
    assert [event.reason for event in Runs().events(run_id, "requeued")] == ["job_missing"]
