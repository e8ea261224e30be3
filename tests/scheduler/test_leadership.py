"""Leader failover's logic on the injected clock: one leader at a time, and across a handover no firing twice or missed.

Each scheduler here is the real lock, the real task jobs and catch-up and the real planner, in this process: the
clock moves instead of time passing, and a cron time comes when the test says so (what APScheduler does). The
one real two-process failover is tests/scheduler/test_leader_failover.py.
"""

import logging
from datetime import UTC, datetime, timedelta

import pytest
import redis
from apscheduler.schedulers.background import BackgroundScheduler
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from console.extensions import db
from console.models import Run, Task
from console.redis_conn import get_redis
from console.scheduler.firing import SCHEDULER
from console.scheduler.process import Leadership
from console.scheduler.task_jobs import TaskJobs
from console.services.scheduling import planner
from console.services.system.leader import KEY, LeaderLock
from tests.helpers import free_port, wait_for

MINUTE = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a cron time of `* * * * *`
TTL_S = 10.0


class Firing:
    """Stands in for APScheduler's running state: the leader resumes it, a standby keeps it paused."""

    def __init__(self):
        self.on = False
        self.calls = []

    def resume(self):
        self.on = True
        self.calls.append("resume")

    def pause(self):
        self.on = False
        self.calls.append("pause")


class Planner:
    """The firing buffer, without its thread: hand the firings straight to the planner, on the test's clock."""

    def __init__(self, clock):
        self.clock = clock

    def add_many(self, firings):
        planner.fire(firings, SCHEDULER, self.clock)


class Member:
    """One scheduler process: its own lock, task jobs and firing switch, on the shared database, Redis and clock."""

    def __init__(self, app, clock):
        self.lock = LeaderLock(get_redis(), ttl_s=TTL_S)
        self.jobs = TaskJobs(app, BackgroundScheduler(timezone="UTC"), Planner(clock), clock)
        self.jobs.sync(force=True)
        self.firing = Firing()
        self.leadership = Leadership(self.lock, self.jobs.catch_up, self.firing)

    def contend(self) -> bool:
        """One pass of the process's loop (every renew interval)."""
        return self.leadership.contend()

    def cron_time(self) -> None:
        """A cron time comes: APScheduler runs the schedules' jobs, unless this process is paused."""
        if self.firing.on:
            for job in self.jobs.scheduler.get_jobs():
                job.func(*job.args)

    def lapse(self) -> None:
        """What Redis does TTL_S after this process last renewed: the lock expires."""
        assert get_redis().pexpire(KEY, 1)
        wait_for(lambda: get_redis().get(KEY) is None, 1, 0.002, "the lock to expire")


@pytest.fixture
def task(register, clock):
    clock.set(MINUTE - timedelta(seconds=40))  # created after the last cron time: nothing due at its first catch-up
    task = register(cron="* * * * *", misfire_grace_s=60)
    task.created_at = clock()
    db.session.commit()
    return task


def fired(task) -> list[tuple[datetime, str]]:
    db.session.expire_all()
    runs = db.session.query(Run).filter_by(task_id=task.id).order_by(Run.scheduled_for, Run.id)
    return [(run.scheduled_for, run.source) for run in runs]


def missed(task) -> int:
    db.session.expire_all()
    return db.session.get(Task, task.id).missed_total


def test_one_lock_has_one_holder_and_a_standby_takes_it_once_it_lapses(app):
    # A TTL long enough that no pause of a loaded machine lapses it between two lines; the lapse is then made.
    leader, standby = LeaderLock(get_redis(), ttl_s=10), LeaderLock(get_redis(), ttl_s=10)
    assert leader.acquire_or_renew() and not standby.acquire_or_renew()
    assert leader.acquire_or_renew() and leader.holder() == leader.identity  # renewing keeps it
    assert 0 < get_redis().pttl(KEY) <= 10_000
    # The leader stops renewing (killed): Redis lets its lock go after the TTL, and only then can the standby lead.
    get_redis().pexpire(KEY, 50)
    wait_for(standby.acquire_or_renew, 5, 0.02, "the standby to take the lapsed lock")
    assert standby.holder() == standby.identity
    assert not leader.acquire_or_renew()  # back from a stall, the old leader does not take it back
    leader.release()
    assert standby.holder() == standby.identity  # nor can it release the new leader's lock
    standby.release()
    assert standby.holder() is None and leader.acquire_or_renew()  # a release hands over at once


def test_without_redis_nobody_leads(app):
    down = redis.Redis(port=free_port(), retry=Retry(ExponentialBackoff(cap=0.01, base=0.01), 0))
    assert not LeaderLock(down).acquire_or_renew()


def test_winning_the_lock_catches_up_before_firing_and_losing_it_stops_firing(app, caplog):
    calls = []
    firing = Firing()
    firing.calls = calls
    lock = LeaderLock(get_redis(), ttl_s=TTL_S)
    leadership = Leadership(lock, lambda: calls.append("catch up"), firing)
    with caplog.at_level(logging.INFO, logger="rebound.scheduler"):
        assert leadership.contend() and calls == ["catch up", "resume"]
        assert leadership.contend() and calls == ["catch up", "resume"]  # a renewal changes nothing
        get_redis().set(KEY, "another-host:1:abcd", px=10_000)  # it lapsed during a stall and another took it
        assert not leadership.contend() and calls == ["catch up", "resume", "pause"] and not firing.on
        assert not leadership.contend() and calls == ["catch up", "resume", "pause"]
    # Leading is every start's normal state, not a warning (helper 126); losing the lead is.
    assert [(r.levelname, r.getMessage().split()[-2:]) for r in caplog.records if "scheduler" in r.getMessage()] == [
        ("INFO", ["the", "leader"]), ("WARNING", ["lost", "leadership"])]


def test_a_leader_killed_after_a_firing_hands_over_with_nothing_twice_or_missed(app, task, clock):
    first, second = Member(app, clock), Member(app, clock)
    clock.set(MINUTE - timedelta(seconds=30))
    assert first.contend() and not second.contend()
    clock.set(MINUTE + timedelta(milliseconds=300))  # APScheduler delivers a little late
    first.cron_time()
    second.cron_time()  # the standby is paused: it fires nothing
    assert fired(task) == [(MINUTE, "cron")]
    # The leader is killed: no more renewals, so its lock lapses TTL_S later, and the standby's next pass leads.
    clock.advance(TTL_S)
    assert not second.contend()
    first.lapse()
    clock.advance(1)
    assert second.contend()  # it catches up first: nothing was missed, so nothing fires twice
    assert fired(task) == [(MINUTE, "cron")]
    clock.set(MINUTE + timedelta(minutes=1, milliseconds=300))
    second.cron_time()
    assert fired(task) == [(MINUTE, "cron"), (MINUTE + timedelta(minutes=1), "cron")]
    assert missed(task) == 0


def test_a_cron_time_that_passes_while_nobody_leads_is_fired_by_the_next_leader(app, task, clock):
    first, second = Member(app, clock), Member(app, clock)
    clock.set(MINUTE - timedelta(seconds=5))
    assert first.contend() and not second.contend()
    # The leader is killed 5 s before the cron time (or dies with the firing still in its buffer): nobody fires it.
    clock.set(MINUTE + timedelta(milliseconds=300))
    second.cron_time()
    assert fired(task) == []
    first.lapse()
    clock.set(MINUTE + timedelta(seconds=6))  # the lock lapsed; the standby's next pass
    assert second.contend()
    assert fired(task) == [(MINUTE, "catchup")]  # caught up within the task's grace
    clock.set(MINUTE + timedelta(minutes=1, milliseconds=300))
    second.cron_time()
    assert fired(task) == [(MINUTE, "catchup"), (MINUTE + timedelta(minutes=1), "cron")]
    assert missed(task) == 0


def test_a_stalled_leader_that_wakes_after_the_handover_fires_nothing_twice(app, task, clock):
    first, second = Member(app, clock), Member(app, clock)
    clock.set(MINUTE - timedelta(seconds=30))
    assert first.contend()
    # The leader stalls (a long pause) past its TTL and across the cron time; the standby leads and catches up.
    first.lapse()
    clock.set(MINUTE + timedelta(seconds=6))
    assert second.contend()
    assert fired(task) == [(MINUTE, "catchup")]
    # The old leader wakes up, still resumed, and delivers the firing it owed before its loop sees the lost lock.
    first.cron_time()
    assert fired(task) == [(MINUTE, "catchup")]  # the same firing twice is one run
    assert not first.contend() and not first.firing.on
    clock.set(MINUTE + timedelta(minutes=1, milliseconds=300))
    first.cron_time()
    second.cron_time()
    assert fired(task) == [(MINUTE, "catchup"), (MINUTE + timedelta(minutes=1), "cron")]
    assert missed(task) == 0
