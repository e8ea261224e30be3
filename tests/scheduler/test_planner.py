"""Seed 001's planner: quota, mutex (allow/forbid/replace), windows, and firings that never double."""

from datetime import UTC, datetime, timedelta

import pytest
from rq.registry import ScheduledJobRegistry
from sqlalchemy import select

from console.domain import windows
from console.domain.cron import jitter_offset
from console.extensions import db
from console.models import AuditEntry, Run, Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import control, queueing, reconcile
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.scheduling import forecast, planner, task_query, tasks

SCHEDULER = Actor("scheduler")


def fire(task, clock, **kwargs):
    [outcome] = planner.fire([planner.Firing(task.id, clock(), **kwargs)], SCHEDULER, clock)
    return outcome


def test_b1_fires_on_schedule_with_quota_available(register, runs, clock):
    task = register(cron="*/5 * * * *")
    clock.set(datetime(2026, 3, 2, 10, 5, tzinfo=UTC))
    outcome = fire(task, clock)
    run = runs.get(outcome.run_id)
    assert (outcome.status, run.status, run.status_reason) == ("created", "pending", None)
    assert run.scheduled_for == clock() and run.enqueued_at == clock() and run.idempotency_key == (
        f"task:{task.id}:2026-03-02T10:05:00+00:00")
    assert execute(run.id, 0, clock=clock) == "succeeded"
    assert runs.get(run.id).started_at - run.scheduled_for == timedelta(0)


def test_the_same_firing_twice_creates_one_run(register, runs, clock):
    task = register()
    first = fire(task, clock)
    second = fire(task, clock)  # a second leader, or a catch-up racing the live firing
    assert (first.status, second.status) == ("created", "duplicate")
    assert db.session.query(Run).filter_by(task_id=task.id).count() == 1


def test_a_batch_makes_one_run_per_task_and_firing_with_its_timeline_row(register, runs, clock):
    first, second = register("a", params={"n": 1}), register("b")
    firings = [planner.Firing(first.id, clock()), planner.Firing(second.id, clock()),
               planner.Firing(first.id, clock(), source="catchup")]  # a catch-up racing the live firing
    outcomes = planner.fire(firings, SCHEDULER, clock)
    assert [o.status for o in outcomes] == ["created", "created", "duplicate"]
    run = runs.get(outcomes[0].run_id)
    assert (run.task_id, run.params, run.status, run.source, run.scheduled_for, run.enqueued_at) == (
        first.id, {"n": 1}, "pending", "cron", clock(), clock())
    assert run.idempotency_key == planner.cron_key(first.id, clock()) and len(run.trace_id) == 32
    assert run.trace_id != runs.get(outcomes[1].run_id).trace_id
    [event] = runs.events(run.id)
    assert (event.kind, event.to_status, event.actor, event.data["source"]) == ("submitted", "pending",
                                                                                "scheduler", "cron")
    assert queueing.job_status(run.id, 1, 0) == "queued"
    db.session.refresh(first)
    assert first.last_fired_for == clock()


def test_b2_quota_exhausted_queues_with_a_warning_then_runs_when_room_frees(register, runs, clock):
    tenant = db.session.query(Tenant).filter_by(name="default").one()
    tenant.max_queued, tenant.max_running = 1, 1
    db.session.commit()
    task = register()
    first = fire(task, clock)
    clock.advance(60)
    second = fire(task, clock)
    run = runs.get(second.run_id)
    assert (run.status, run.status_reason) == ("pending", "quota")  # not lost
    [warning] = [m for m in runs.outbox("alert") if m.payload["rule"] == "tenant_quota"]
    assert warning.payload["max_queued"] == 1
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"),
                       {"id": first.run_id})
    db.session.commit()
    assert execute(run.id, 0, clock=clock) == "deferred:quota"  # max_running 1 is taken
    db.session.execute(db.text("UPDATE runs SET status = 'succeeded' WHERE id = :id"), {"id": first.run_id})
    db.session.commit()
    assert execute(run.id, 0, clock=clock) == "succeeded"


def test_forbid_skips_and_records_the_new_firing_while_the_mutex_is_held(register, runs, clock):
    holder = register("export", mutex_key="ledger")
    blocked = register("reconcile-ledger", mutex_key="ledger", concurrency_policy="forbid")
    fire(holder, clock)
    outcome = fire(blocked, clock)
    run = runs.get(outcome.run_id)
    assert (outcome.status, run.status, run.status_reason) == ("skipped", "cancelled", "mutex_forbid")
    assert [e.kind for e in runs.events(run.id)] == ["submitted", "cancelled"]


def test_a_mutex_key_is_its_tenants_own(register, runs, clock):
    # A globex operator's task naming acme's key cancelled acme's running payroll (replace) and kept acme's firings
    # from starting (forbid); the forecast, per tenant, showed neither (helper 106).
    tenants.create("globex", Actor("test"))
    payroll = register("payroll", mutex_key="payroll", concurrency_policy="forbid")
    running = fire(payroll, clock).run_id
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": running})
    db.session.commit()
    theirs = register("evil", tenant="globex", mutex_key="payroll", concurrency_policy="replace")
    assert fire(theirs, clock).status == "created"
    assert runs.get(running).cancel_requested is False
    clock.advance(60)
    assert fire(payroll, clock).reason == "mutex_forbid"  # its own run still holds its key
    hog = register("hog", tenant="globex", mutex_key="ledger")
    fire(hog, clock)
    assert fire(register("ledger", mutex_key="ledger", concurrency_policy="forbid"), clock).status == "created"
    overlaps = forecast.forecast(clock(), hours=1).mutex_overlaps  # every tenant's
    assert overlaps and all(o["same_task"] for o in overlaps)  # each task meets its own next firing, no other's


def test_replace_cancels_the_running_holder_and_starts_the_new_one(register, runs, clock):
    old = register("sync-v1", mutex_key="catalog", concurrency_policy="replace")
    old_run = fire(old, clock).run_id
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": old_run})
    db.session.commit()
    clock.advance(60)
    new = fire(old, clock)
    assert new.status == "created" and runs.get(new.run_id).status == "pending"
    assert runs.get(old_run).cancel_requested is True  # a running run stops at its next check
    assert [e.kind for e in runs.events(old_run)][-1] == "replaced"


def test_replace_cancels_a_waiting_holder_at_once(register, runs, clock):
    task = register("sync", mutex_key="catalog", concurrency_policy="replace")
    waiting = fire(task, clock).run_id
    clock.advance(60)
    fire(task, clock)
    assert (runs.get(waiting).status, runs.get(waiting).status_reason) == ("cancelled", "replaced")


def test_allow_runs_side_by_side(register, runs, clock):
    first = register("a", mutex_key="shared")
    second = register("b", mutex_key="shared", concurrency_policy="allow")
    assert fire(first, clock).status == fire(second, clock).status == "created"


def test_outside_its_window_a_firing_is_deferred_to_the_next_opening(register, runs, clock):
    clock.set(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))  # a Friday evening
    task = register(window={"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00",
                            "timezone": "UTC"})
    outcome = fire(task, clock)
    run = runs.get(outcome.run_id)
    assert (run.status, run.status_reason) == ("pending", "window")
    scheduled = ScheduledJobRegistry("retries", connection=get_redis())
    assert scheduled.get_scheduled_time(f"run-{run.id}-s1-a0") == datetime(2026, 3, 9, 8, 0, tzinfo=UTC)


def test_firings_outside_the_window_wait_for_its_opening_in_one_run(register, runs, clock):
    # An every-minute task closed for the weekend queued one run per minute, all started at Monday's opening.
    task, first = closed_for_the_weekend(register, clock)
    waiting = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    assert [(r.id, r.status, r.due_at) for r in waiting] == [
        (first.run_id, "pending", datetime(2026, 3, 9, 8, 0, tzinfo=UTC))]


def closed_for_the_weekend(register, clock, **task):
    """Register an every-minute task with a weekday window and fire it four times on a Friday evening; return the
    task and its first firing's outcome (the three others, its duplicates)."""
    clock.set(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))
    task = register(cron="* * * * *", window={"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00",
                                               "end": "18:00", "timezone": "UTC"}, **task)
    first = fire(task, clock)
    later = []
    for _ in range(3):
        clock.advance(60)
        later.append(fire(task, clock))
    assert first.status == "created" and {o.status for o in later} == {"duplicate"}
    return task, first


@pytest.mark.parametrize("policy", ["forbid", "replace"])
def test_a_mutex_tasks_firings_outside_the_window_join_its_waiting_run(register, runs, clock, policy):
    """Its own waiting run held the key: forbid cancelled a run every minute of the closed window ("another run
    with the same mutex key is active"), replace cancelled the waiting run and its firing joined nothing."""
    task, first = closed_for_the_weekend(register, clock, mutex_key="ledger", concurrency_policy=policy)
    waiting = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    assert [(r.id, r.status, r.status_reason) for r in waiting] == [(first.run_id, "pending", "window")]
    # A person's "run when the window opens" joins it too, and so do the cron firings after a person's waiting run.
    from console.services.scheduling import on_demand

    asked = on_demand.run_now(task, Actor("ops"), clock)
    assert (asked.status, asked.run_id, asked.reason) == ("duplicate", first.run_id, "window")
    if policy == "forbid":  # another task's run holding the key still cancels the firing
        assert fire(register("export", mutex_key="ledger"), clock).status == "created"
        clock.advance(60)
        held = fire(task, clock)
        assert (held.status, held.reason) == ("skipped", "mutex_forbid")


def test_a_cron_time_before_the_task_was_created_makes_no_run(register, runs, clock):
    """With a jitter a firing comes up to an hour after its cron time: a task created at 18:16 made a run "scheduled
    for 18:01", a time it did not exist at."""
    task = register(cron="* * * * *", jitter_s=3600, clock=clock)
    [before] = planner.fire([planner.Firing(task.id, clock() - timedelta(minutes=15))], SCHEDULER, clock)
    assert (before.status, before.run_id) == ("before_task", None)
    # Nor does its page promise one: its next firings are the cron times from its creation on, plus the offset.
    offset = jitter_offset(task.id, 3600)
    [first] = task_query.firing_times(task, clock(), 1)
    assert first - offset > task.created_at >= first - offset - timedelta(minutes=1)
    clock.advance(60)
    assert fire(task, clock).status == "created"


def test_after_its_waiting_run_was_started_outside_the_window_the_next_firings_wait_for_the_opening(
        register, runs, clock):
    """The started run kept the opening's key: the cron firings after it joined a run that had already run, and
    none started at the opening."""
    from console.services.scheduling import on_demand

    task, first = closed_for_the_weekend(register, clock, mutex_key="ledger", concurrency_policy="forbid")
    released = on_demand.run_now(task, Actor("ops"), clock, outside_window=True)
    assert (released.status, released.run_id) == ("released", first.run_id)
    clock.advance(60)
    meanwhile = fire(task, clock)
    assert (meanwhile.status, meanwhile.reason) == ("skipped", "mutex_forbid")  # it is the task's run now
    assert execute(first.run_id, 0, clock=clock) == "succeeded"
    clock.advance(60)
    later = fire(task, clock)
    assert later.status == "created" and later.run_id != first.run_id
    run = runs.get(later.run_id)
    assert (run.status, run.status_reason, run.due_at) == ("pending", "window", datetime(2026, 3, 9, 8, 0, tzinfo=UTC))
    clock.advance(60)
    joined = fire(task, clock)
    assert (joined.status, joined.run_id) == ("duplicate", later.run_id)
    # Its job delivered before the opening (the reconciler's requeue) defers it to the opening again; a second
    # "run outside the window" then starts it: the first release's key collided (a 409, a traceback in the CLI),
    # and the run kept its deferral's due time, so the reconciler looked for that job and never queued it anew.
    assert execute(later.run_id, 0, clock=clock) == "deferred:window"
    assert runs.get(later.run_id).next_retry_at == datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
    again = on_demand.run_now(task, Actor("ops"), clock, outside_window=True)
    assert (again.status, again.run_id) == ("released", later.run_id)
    run = runs.get(later.run_id)
    assert (run.status, run.status_reason, run.next_retry_at) == ("pending", None, None)
    # Its job lost (Redis restarted, say) while the workers were busy: the reconciler queues the run anew.
    get_redis().delete(f"rq:job:{queueing.job_id(later.run_id, 1, 0)}")
    clock.advance(600)
    assert reconcile.reconcile(clock).requeued == [later.run_id]
    assert execute(later.run_id, 0, clock=clock) == "succeeded"


@pytest.mark.parametrize("window", [None, {"days": ["fri", "sat"], "start": "18:00", "end": "23:00",
                                            "timezone": "UTC"}], ids=["removed", "open-now"])
def test_a_run_waiting_for_a_window_its_task_no_longer_has_starts_at_the_edit(register, runs, clock, window):
    """It kept the old window's opening: removed, a forbid task's run waited six days and cancelled every firing
    meanwhile, with no "run outside the window" left to press (helper 151)."""
    task, first = closed_for_the_weekend(register, clock, mutex_key="ledger", concurrency_policy="forbid")
    tasks.edit(task, {"window": window}, Actor("ops"), clock=clock)
    run = runs.get(first.run_id)
    assert (run.status, run.status_reason, run.due_at, run.next_retry_at) == ("pending", None, clock(), None)
    assert [event.kind for event in runs.events(run.id)][-1] == "released"
    assert run.wait_reason is None  # not "it starts when the window opens" while a worker is on its way
    assert queueing.job_id(run.id, 1, 0).encode() in get_redis().lrange("rq:queue:default", 0, -1)
    assert execute(run.id, 0, clock=clock) == "succeeded"
    clock.advance(60)
    assert fire(task, clock).status == "created"  # nothing holds its mutex now


def test_a_run_waiting_for_a_window_changed_to_another_closed_one_waits_for_the_new_opening(register, runs, clock):
    """It kept the old opening: a window moved to open an hour earlier still started it an hour late (helper 151)."""
    task, first = closed_for_the_weekend(register, clock)
    tasks.edit(task, {"window": {**task.window, "start": "07:00"}}, Actor("ops"), clock=clock)
    opening = datetime(2026, 3, 9, 7, 0, tzinfo=UTC)
    run = runs.get(first.run_id)
    assert (run.status, run.status_reason, run.due_at, run.next_retry_at) == ("pending", "window", opening, opening)
    assert run.idempotency_key == windows.opening_key(task.id, opening)
    assert [(e.kind, e.reason) for e in runs.events(run.id)][-1] == ("deferred", "window_changed")
    assert "2026-03-09 07:00 UTC" in run.wait_reason
    deferral = queueing.job_id(run.id, 1, 0, opening)
    assert deferral in ScheduledJobRegistry(queueing.RETRY_QUEUE, connection=get_redis()).get_job_ids()
    clock.advance(60)
    assert fire(task, clock).status == "duplicate"  # the firings after the edit join it
    assert [r.id for r in db.session.execute(select(Run).where(Run.task_id == task.id)).scalars()] == [run.id]
    clock.set(opening)
    assert execute(run.id, 0, clock=clock) == "succeeded"


def test_a_run_waiting_for_a_window_that_now_opens_later_is_put_off_at_the_old_opening(register, runs, clock):
    task, first = closed_for_the_weekend(register, clock)
    tasks.edit(task, {"window": {**task.window, "start": "10:00"}}, Actor("ops"), clock=clock)
    clock.set(datetime(2026, 3, 9, 8, 0, tzinfo=UTC))  # the old opening: its first job comes due
    assert execute(first.run_id, 0, clock=clock) == "deferred:window"
    assert runs.get(first.run_id).due_at == datetime(2026, 3, 9, 10, 0, tzinfo=UTC)


def test_firings_of_one_moment_are_planned_in_task_id_order_as_the_forecast_reads_them(register, runs, clock):
    """The demo's export (allow) and reindex (forbid) share a mutex at :30: handed over reindex first, both ran,
    where the forecast said reindex is skipped (helper 151)."""
    clock.set(datetime(2026, 3, 2, 10, 30, tzinfo=UTC))
    export = register(name="export", cron="*/15 * * * *", mutex_key="orders-db", concurrency_policy="allow")
    reindex = register(name="reindex", cron="*/30 * * * *", mutex_key="orders-db", concurrency_policy="forbid")
    outcomes = planner.fire([planner.Firing(reindex.id, clock()), planner.Firing(export.id, clock())], SCHEDULER,
                            clock)
    by_task = {outcome.task_id: (outcome.status, outcome.reason) for outcome in outcomes}
    assert by_task == {export.id: ("created", None), reindex.id: ("skipped", "mutex_forbid")}
    overlap = forecast.forecast(clock() - timedelta(seconds=1), hours=0.1).mutex_overlaps[0]
    assert (overlap["first_task_id"], overlap["second_task_id"]) == (export.id, reindex.id)  # as it was planned


def test_a_paused_task_does_not_fire_from_cron_but_run_now_still_works(register, runs, clock):
    from console.services.scheduling import on_demand

    task = tasks.set_paused(register(), True, Actor("ops"))
    assert fire(task, clock).status == "paused"
    outcome = on_demand.run_now(task, Actor("ops"), clock)
    assert outcome.status == "created" and runs.get(outcome.run_id).source == "manual"


def test_cancelling_a_forbidden_holder_frees_the_mutex(register, runs, clock):
    holder = register("export", mutex_key="ledger")
    blocked = register("reconcile-ledger", mutex_key="ledger", concurrency_policy="forbid")
    control.cancel(runs.get(fire(holder, clock).run_id), Actor("ops"))
    assert fire(blocked, clock).status == "created"


def test_a_window_deferred_run_delivered_early_waits_again(register, runs, clock):
    clock.set(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))  # Friday evening, window closed until Monday 08:00
    task = register(window={"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"})
    run_id = fire(task, clock).run_id
    assert execute(run_id, 0, clock=clock) == "deferred:window"  # e.g. re-queued after Redis lost its job
    assert runs.status(run_id) == "pending"
    clock.set(datetime(2026, 3, 9, 8, 0, tzinfo=UTC))
    assert execute(run_id, 0, clock=clock) == "succeeded"


def test_a_long_deferral_keeps_its_own_job_and_the_reconciler_leaves_it_alone(register, runs, clock):
    clock.set(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))
    task = register(window={"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"})
    run_id = fire(task, clock).run_id
    assert execute(run_id, 0, clock=clock) == "deferred:window"
    opening = datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
    run = runs.get(run_id)
    assert (run.status, run.next_retry_at) == ("pending", opening)
    # Not the attempt's own id, which RQ marks finished (and expires) when the deferring job returns.
    deferral = queueing.job_id(run_id, 1, 0, opening)
    assert deferral.endswith(f"-d{int(opening.timestamp())}") and queueing.parse_job_id(deferral) == (run_id, 1, 0)
    scheduled = ScheduledJobRegistry(queueing.RETRY_QUEUE, connection=get_redis())
    assert scheduled.get_scheduled_time(deferral) == opening
    clock.advance(3600)
    assert reconcile.reconcile(clock).requeued == []
    assert runs.events(run_id, "requeued") == []
    get_redis().flushdb()  # Redis loses the deferral: it is scheduled again for the opening, not run now
    assert reconcile.reconcile(clock).requeued == [run_id]
    assert scheduled.get_scheduled_time(deferral) == opening
    assert queueing.job_status(run_id, 1, 0) is None


def test_a_firing_of_the_schedule_an_edit_replaced_makes_no_run(register, runs, clock):
    """A cron edit saved in the 2 s before the scheduler's sync saw it: the old cron's minute still fired (helper
    151). The firing names the schedule that fired it; the planner drops it when the task has another now."""
    task = register(cron="*/5 * * * *")
    clock.set(datetime(2026, 3, 2, 10, 5, tzinfo=UTC))
    tasks.edit(task, {"cron": "*/10 * * * *"}, Actor("ops"), clock=clock)
    old = fire(task, clock, schedule=("*/5 * * * *", "UTC"))
    assert (old.status, old.run_id) == ("schedule_changed", None)
    clock.set(datetime(2026, 3, 2, 10, 10, tzinfo=UTC))
    assert fire(task, clock, schedule=("*/10 * * * *", "UTC")).status == "created"
    assert [run.scheduled_for for run in db.session.execute(select(Run).where(Run.task_id == task.id)).scalars()] == [
        datetime(2026, 3, 2, 10, 10, tzinfo=UTC)]


def test_a_run_moved_to_a_new_opening_then_released_by_another_edit_waits_for_nothing(register, runs, clock):
    """Released, it still read "it starts when the window opens at …", the moved opening's words (helper 157)."""
    task, first = closed_for_the_weekend(register, clock)
    tasks.edit(task, {"window": {**task.window, "start": "07:00"}}, Actor("ops"), clock=clock)
    assert runs.get(first.run_id).wait_reason
    tasks.edit(task, {"window": None}, Actor("ops"), clock=clock)
    run = runs.get(first.run_id)
    assert (run.status_reason, run.wait_reason) == (None, None)


def test_a_templates_window_changed_moves_or_starts_its_tasks_waiting_runs(register, runs, clock):
    """The template's window removed, a task inheriting it read "any time from template" while its run still waited
    for Sunday's opening, with no "run outside the window" to press (helper 157)."""
    from console.services.scheduling import templates

    clock.set(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))  # a Friday evening
    weekdays = {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00", "timezone": "UTC"}
    templates.save("office-hours", {"window": weekdays}, Actor("ops"), clock=clock)
    task = register(cron="* * * * *", template="office-hours")
    first = fire(task, clock)
    assert runs.get(first.run_id).due_at == datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
    templates.save("office-hours", {"window": {**weekdays, "start": "07:00"}}, Actor("ops"), clock=clock)
    assert runs.get(first.run_id).due_at == datetime(2026, 3, 9, 7, 0, tzinfo=UTC)
    templates.save("office-hours", {"window": None}, Actor("ops"), clock=clock)
    run = runs.get(first.run_id)
    assert (run.status, run.status_reason, run.due_at) == ("pending", None, clock())
    assert queueing.job_id(run.id, 1, 0).encode() in get_redis().lrange("rq:queue:default", 0, -1)
    applied = db.session.execute(select(AuditEntry).where(AuditEntry.action == "task.template_applied")
                                 .order_by(AuditEntry.seq)).scalars().all()
    assert applied[-1].after["released_runs"] == [run.id] and applied[0].after["moved_runs"] == [run.id]
