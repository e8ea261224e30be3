"""The scheduler's task jobs follow the table; missed firings are caught up once; SLA breaches escalate."""

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import update

from console.domain.cron import jitter_offset
from console.extensions import db
from console.models import Run, SlaBreach
from console.scheduler import task_jobs
from console.scheduler.task_jobs import TaskJobs
from console.services.actor import Actor
from console.services.delivery import notice
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.scheduling import planner, sla, task_query, tasks
from console.services.system import observability


class Buffer:
    def __init__(self):
        self.firings = []

    def add_many(self, firings):
        self.firings.extend(firings)


@pytest.fixture
def jobs(app, clock):
    scheduler = BackgroundScheduler(timezone="UTC")
    return TaskJobs(app, scheduler, Buffer(), clock)


def test_jobs_follow_register_pause_resume_edit_and_delete(register, jobs):
    task = register(cron="30 2 * * MON", timezone="Europe/Berlin")
    assert jobs.sync() == 1 and jobs.job_for(task.id) is not None
    assert jobs.sync() == 0  # nothing changed, nothing done
    tasks.set_paused(task, True, Actor("ops"))
    jobs.sync()
    assert jobs.job_for(task.id) is None and jobs.scheduler.get_jobs() == []
    tasks.set_paused(task, False, Actor("ops"))
    tasks.edit(task, {"cron": "0 6 * * *"}, Actor("ops"))
    jobs.sync()
    job = jobs.job_for(task.id)
    assert "0 6 * * *" in str(job.trigger)
    tasks.delete(task, Actor("ops"))
    jobs.sync()
    assert jobs.scheduler.get_jobs() == []


def test_a_firing_stands_for_its_cron_time_even_when_delivered_late_or_jittered(register, jobs, clock):
    task = register(cron="*/5 * * * *", jitter_s=30)
    jobs.sync()
    job = jobs.job_for(task.id)
    fired_at = datetime(2026, 3, 2, 10, 5, tzinfo=UTC) + job.trigger.offset + timedelta(seconds=2)
    assert job.trigger.nominal_time(fired_at, timedelta(minutes=6)) == datetime(2026, 3, 2, 10, 5, tzinfo=UTC)


def test_tasks_sharing_a_schedule_share_one_job_that_fires_each_of_them(register, jobs, clock):
    first, second, third = register("a"), register("b"), register("c", cron="*/5 * * * *")
    jittered = register("d", jitter_s=30)
    assert jobs.sync() == 4
    assert jobs.job_for(first.id).id == jobs.job_for(second.id).id
    assert len({jobs.job_for(t.id).id for t in (first, third, jittered)}) == 3
    clock.set(datetime(2026, 3, 2, 10, 5, 0, 300000, tzinfo=UTC))  # APScheduler delivers a little late
    job = jobs.job_for(first.id)
    job.func(*job.args)
    assert sorted(f.task_id for f in jobs.buffer.firings) == [first.id, second.id]
    assert {f.scheduled_for for f in jobs.buffer.firings} == {datetime(2026, 3, 2, 10, 5, tzinfo=UTC)}
    tasks.set_paused(first, True, Actor("ops"))
    jobs.sync()
    assert jobs.job_for(second.id).id == job.id and len(jobs.scheduler.get_jobs()) == 3  # the others keep it
    jobs.buffer.firings.clear()
    job.func(*job.args)
    assert [f.task_id for f in jobs.buffer.firings] == [second.id]


def test_missed_firings_within_grace_are_caught_up_once_and_the_rest_counted(register, jobs, clock, runs, caplog):
    clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    task = register(cron="*/10 * * * *", misfire_grace_s=900)
    task.created_at = clock()
    db.session.commit()
    clock.set(datetime(2026, 3, 2, 11, 3, tzinfo=UTC))  # the scheduler was down for an hour
    with caplog.at_level(logging.INFO, logger="rebound.scheduler"):
        fired, missed = jobs.catch_up()
    assert (fired, missed) == (1, 5)  # 11:00 is caught up; 10:10 .. 10:50 are past their grace
    assert [r.levelname for r in caplog.records if "caught up" in r.getMessage()] == ["WARNING"]  # some are lost
    [run] = db.session.query(Run).filter_by(task_id=task.id).all()
    assert run.scheduled_for == datetime(2026, 3, 2, 11, 0, tzinfo=UTC) and run.source == "catchup"
    db.session.refresh(task)
    assert task.missed_total == 5
    assert jobs.catch_up() == (0, 0)  # nothing twice


@pytest.mark.parametrize("resume", ["console", "api"])
def test_the_firings_a_pause_skipped_are_neither_caught_up_nor_missed_once_resumed(register, jobs, clock, resume):
    clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    task = register(cron="* * * * *", misfire_grace_s=300)
    task.created_at = clock()
    db.session.commit()
    clock.set(datetime(2026, 3, 2, 10, 0, 40, tzinfo=UTC))
    tasks.set_paused(task, True, Actor("ops"), clock=clock)
    clock.set(datetime(2026, 3, 2, 10, 3, 20, tzinfo=UTC))  # 10:01 .. 10:03 came while it was paused
    if resume == "console":
        tasks.set_paused(task, False, Actor("ops"), clock=clock)
    else:
        tasks.edit(task, {"paused": False}, Actor("ops"), clock=clock)
    clock.set(datetime(2026, 3, 2, 10, 3, 50, tzinfo=UTC))  # the next catch-up pass, before 10:04
    assert jobs.catch_up() == (0, 0)
    db.session.refresh(task)
    assert (task.missed_total, db.session.query(Run).filter_by(task_id=task.id).count()) == (0, 0)
    # A scheduler down after the resume still catches up and counts what it missed.
    clock.set(datetime(2026, 3, 2, 10, 12, 30, tzinfo=UTC))
    assert jobs.catch_up() == (1, 8)  # 10:12 is caught up; 10:04 .. 10:11 are counted missed


def test_a_new_schedule_is_neither_caught_up_nor_missed_before_its_edit(register, jobs, clock):
    """Editing `30 2 * * *` to `*/5 * * * *` at 07:15 fired a catch-up run for 07:15 and counted 4 "missed" firings
    that were never due, with a scheduler leading all along (helper 151)."""
    clock.set(datetime(2026, 3, 2, 6, 54, tzinfo=UTC))
    task = register(cron="30 2 * * *", misfire_grace_s=300)
    task.created_at = clock()
    db.session.commit()
    clock.set(datetime(2026, 3, 2, 7, 15, 24, tzinfo=UTC))
    tasks.edit(task, {"cron": "*/5 * * * *"}, Actor("ops"), clock=clock)
    clock.set(datetime(2026, 3, 2, 7, 15, 28, tzinfo=UTC))  # the next catch-up pass
    assert jobs.catch_up() == (0, 0)
    db.session.refresh(task)
    assert (task.missed_total, db.session.query(Run).filter_by(task_id=task.id).count()) == (0, 0)
    clock.set(datetime(2026, 3, 2, 7, 36, tzinfo=UTC))  # a scheduler down after the edit still counts its misses
    assert jobs.catch_up() == (1, 3)  # 07:35 is caught up; 07:20 .. 07:30 are missed


def test_an_sla_breach_is_recorded_once_and_three_in_a_row_escalate(register, runs, clock):
    task = register(cron="0 * * * *", sla={"max_start_delay_s": 60})
    for hour in range(3):
        clock.set(datetime(2026, 3, 2, 9 + hour, 0, tzinfo=UTC))
        [outcome] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
        clock.advance(300)  # workers were busy: it starts five minutes late
        execute(outcome.run_id, 0, clock=clock)
        breaches = sla.check(clock)
        assert [(b.kind, b.late_by_s) for b in breaches] == [("start_delay", 240)]
        assert sla.check(clock) == []  # recorded once
    assert db.session.query(SlaBreach).count() == 3
    alerts = [m for m in runs.outbox("alert") if m.payload["rule"] == "sla_breach"]
    assert len(alerts) == 1 and alerts[0].occurrences == 3 and alerts[0].channel == "sla-breach"
    [escalation] = runs.outbox("escalation")
    assert escalation.channel == "manager" and escalation.payload["count"] == 3
    # Named to its receivers with its tenant, as each breach is (the webhook's document read "tenant": null).
    assert notice.build(escalation).tenant == notice.build(alerts[0]).tenant == "default"


def test_a_run_that_never_starts_breaches_its_start_delay_too(register, runs, clock):
    task = register(cron="0 * * * *", sla={"max_start_delay_s": 60, "deadline_s": 600})
    [outcome] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
    clock.advance(30)
    assert sla.check(clock) == []
    clock.advance(600)
    kinds = sorted(b.kind for b in sla.check(clock))
    assert kinds == ["deadline", "start_delay"]
    assert runs.status(outcome.run_id) == "pending"


def test_a_breach_found_before_the_run_started_says_how_late_it_started_at_last(register, runs, clock):
    """Found at the minute's check, 2 s past the limit, a late start read "2 s" on the reports though the run
    started 68 s past it; a run that has not started yet reads how late it is so far."""
    task = register(cron="0 * * * *", sla={"max_start_delay_s": 30, "deadline_s": 60})
    clock.set(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    [outcome] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
    clock.advance(32)
    assert [(b.kind, b.late_by_s) for b in sla.check(clock)] == [("start_delay", 2)]
    clock.advance(60)
    assert [(b.kind, b.late_by_s) for b in sla.check(clock)] == [("deadline", 32)]
    assert late_by(outcome.run_id) == {"start_delay": 62, "deadline": 32}  # still waiting: so far
    clock.advance(6)
    assert execute(outcome.run_id, 0, clock=clock) == "succeeded"  # started and finished 68 s past its limit
    assert sla.check(clock) == []
    assert late_by(outcome.run_id) == {"start_delay": 68, "deadline": 38}
    clock.advance(600)
    assert sla.check(clock) == [] and late_by(outcome.run_id) == {"start_delay": 68, "deadline": 38}


def late_by(run_id: int) -> dict[str, int]:
    db.session.expire_all()
    return {b.kind: b.late_by_s for b in db.session.query(SlaBreach).filter_by(run_id=run_id)}


def test_a_run_deferred_into_its_window_is_due_at_the_opening_and_no_breach_for_waiting(register, runs, clock):
    clock.set(datetime(2026, 3, 6, 6, 0, tzinfo=UTC))  # the window opens at 08:00
    task = register(cron="0 6 * * *", sla={"max_start_delay_s": 60, "deadline_s": 600},
                    window={"start": "08:00", "end": "18:00"})
    [outcome] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
    opening = datetime(2026, 3, 6, 8, 0, tzinfo=UTC)
    assert runs.get(outcome.run_id).due_at == opening
    clock.set(opening + timedelta(seconds=60))  # starts exactly at its limit after the opening
    assert execute(outcome.run_id, 0, clock=clock) == "succeeded"
    assert sla.check(clock) == []


def test_a_jittered_firing_is_due_at_its_offset_so_the_offset_is_never_a_late_start(register, runs, clock):
    """The scheduler fires a jittered task at cron time + its offset: that is when it is due, for the SLA check,
    the on-time figure and the breaches list alike."""
    cron_time = datetime(2026, 3, 6, 9, 10, tzinfo=UTC)
    clock.set(cron_time - timedelta(days=1))
    task = register(cron="*/2 * * * *", jitter_s=300, clock=clock)
    offset = jitter_offset(task.id, 300)
    limit = max(1, int(offset.total_seconds()) // 2)  # its offset is past its start limit: late from the cron time
    tasks.edit(task, {"sla": {"max_start_delay_s": limit}}, Actor("ops"))
    clock.set(cron_time + offset)  # when the scheduler fires it
    [outcome] = planner.fire([planner.Firing(task.id, cron_time)], Actor("scheduler"), clock)
    run = runs.get(outcome.run_id)
    assert (run.scheduled_for, run.due_at) == (cron_time, cron_time + offset)
    assert execute(outcome.run_id, 0, clock=clock) == "succeeded"
    assert sla.check(clock) == []
    assert observability.start_punctuality(clock(), 3600) == (0, 1)
    # The task's page and API say when it fires: the cron times plus the offset.
    shown = tasks.next_runs(task, cron_time + timedelta(seconds=1), 2)
    assert shown == [cron_time + offset, cron_time + timedelta(minutes=2) + offset]
    assert [firing.at for firing in task_query.next_firings(task, cron_time + timedelta(seconds=1), 2)] == shown
    assert task_query.next_firing(task, cron_time + timedelta(seconds=1)).at == cron_time + offset  # the Tasks list's
    plain = register("plain", cron="*/2 * * * *")  # no jitter: due at the cron time, as before
    [outcome] = planner.fire([planner.Firing(plain.id, cron_time)], Actor("scheduler"), clock)
    assert runs.get(outcome.run_id).due_at is None


def test_two_schedulers_catching_up_at_once_count_the_missed_firings_once(app, register, clock, monkeypatch):
    clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    task = register(cron="*/10 * * * *", misfire_grace_s=60)
    task.created_at = clock()
    db.session.commit()
    clock.set(datetime(2026, 3, 2, 11, 3, tzinfo=UTC))
    both_read, due = threading.Barrier(2, timeout=10), task_jobs._due

    def due_once_both_have_read(*args):
        both_read.wait()  # each scheduler has read the task's last firing before either writes
        return due(*args)

    due_once_both_have_read.cache_clear = due.cache_clear
    monkeypatch.setattr(task_jobs, "_due", due_once_both_have_read)
    missed = []

    def catch_up():
        with app.app_context():
            missed.append(TaskJobs(app, None, Buffer(), clock).catch_up()[1])
            db.session.remove()

    threads = [threading.Thread(target=catch_up) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    assert sorted(missed) == [0, 6] and db.session.get(type(task), task.id).missed_total == 6


def _died_early(register, clock):
    """Fire an hourly task with an hour's deadline whose run dies 5 s in; return the firing's outcome."""
    task = register(cron="0 * * * *", sla={"max_start_delay_s": 60, "deadline_s": 3600},
                    params={"fail_times": 9, "error": "fatal"}, handler="demo.flaky")
    [outcome] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
    clock.advance(5)
    assert execute(outcome.run_id, 0, clock=clock) == "dead"
    return outcome


def _replayed_fixed(runs, run_id: int, clock):
    """Replay a dead run's letter as a person, with params that now succeed; return the run."""
    control.replay(runs.dead_letters(run_id)[0], Actor("olga"), clock=clock)
    run = runs.get(run_id)
    db.session.execute(update(Run).where(Run.id == run.id).values(params={"fail_times": 0}))
    db.session.commit()
    return run


def test_a_late_replay_of_a_run_whose_miss_was_never_recorded_adds_no_breach(register, runs, clock):
    # The demo's history (and a console whose SLA check was down when the deadline came) left no breach for the dead
    # run; approving the demo's params fix paged "SLA breach" for a day-old firing, missed by 24 h (helper 99).
    outcome = _died_early(register, clock)
    clock.advance(24 * 3600)
    run = _replayed_fixed(runs, outcome.run_id, clock)
    assert execute(run.id, run.attempt, clock=clock) == "succeeded"
    assert sla.check(clock) == [] and db.session.query(SlaBreach).count() == 0


def test_a_replay_before_the_deadline_that_succeeds_after_it_misses_it_once(register, runs, clock):
    outcome = _died_early(register, clock)
    clock.advance(60)  # replayed within the hour: the firing's promise still stands for the new series
    run = _replayed_fixed(runs, outcome.run_id, clock)
    clock.advance(3600)
    assert execute(run.id, run.attempt, clock=clock) == "succeeded"
    [missed] = sla.check(clock)
    assert (missed.kind, missed.run_id) == ("deadline", outcome.run_id)


def test_a_run_that_dies_before_its_deadline_breaches_it_when_it_passes_and_a_late_replay_adds_none(
        register, runs, clock):
    """The deadline is missed when it comes, by the series that died; replaying it a day later is no new breach."""
    outcome = _died_early(register, clock)
    assert sla.check(clock) == []  # dead at 5 s: its deadline (an hour) has not come yet
    clock.advance(3596)  # 1 s past its deadline, long after it died: the next check records the miss
    [missed] = sla.check(clock)
    assert (missed.kind, missed.run_id, missed.late_by_s) == ("deadline", outcome.run_id, 1)
    clock.advance(300)
    assert sla.check(clock) == [] and late_by(outcome.run_id) == {"deadline": 1}  # dead: not later and later

    clock.advance(24 * 3600 - 4000)  # the next day a person fixes the cause and replays it; it succeeds
    run = _replayed_fixed(runs, outcome.run_id, clock)
    assert execute(run.id, run.attempt, clock=clock) == "succeeded"
    assert sla.check(clock) == []  # neither a late start nor a missed deadline of a day-old firing, today
    assert db.session.query(SlaBreach).count() == 1
