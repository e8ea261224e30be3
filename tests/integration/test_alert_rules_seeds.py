"""The seeds' last alerts: lock contention (seed 001), progress write-back failures and timeout anomalies (seed 003)."""

import threading
from datetime import timedelta

import pytest

from console import metrics
from console.db import locks
from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import context as context_module
from console.services.engine import transitions
from console.services.engine.context import HandlerContext
from console.services.engine.execute import execute
from console.services.system import alert_rules
from console.services.system.leader import LeaderLock
from tests.factories import Runs
from tests.integration.test_alert_rules import assert_clears, assert_fires, rule

ADMIN = Actor("test-admin")


@pytest.fixture
def runs(app):
    return Runs()


def lock_counts(lock: str, clock) -> tuple[int, int]:
    fields = [metrics.LOCK_ATTEMPTS.window_field(lock=lock), metrics.LOCK_CONTENDED.window_field(lock=lock)]
    totals = metrics.window_totals(fields, clock(), 60)
    return totals[fields[0]], totals[fields[1]]


def test_two_threads_racing_for_the_planner_lock_count_one_contended_attempt(app, clock, monkeypatch):
    # SQLite tells contention by the wait (20 ms): on a loaded CI box an uncontended take once took longer and
    # counted (2, 2). The wait behind the holder is 300 ms, so a 150 ms line still tells them apart, with room.
    monkeypatch.setattr(locks, "SQLITE_CONTENDED_MS", 150)
    held, done = threading.Event(), threading.Event()

    def first():
        with app.app_context():
            locks.hold("planner", clock())
            held.set()
            # Hold it long enough that the other thread's wait is unmistakable on SQLite (a timed wait there).
            done.wait(0.3)
            db.session.commit()

    holder = threading.Thread(target=first)
    holder.start()
    assert held.wait(10)
    locks.hold("planner", clock())  # waits for the first thread's commit
    db.session.commit()
    holder.join(10)
    assert lock_counts("planner", clock) == (2, 1)
    locks.hold("planner", clock())  # free now: an attempt, not contention
    db.session.commit()
    assert lock_counts("planner", clock) == (3, 1)
    series = metrics.snapshot()[metrics.LOCK_CONTENDED.name]
    assert series == {"planner": 1.0}


def test_a_rolled_back_hold_counts_nothing(app, clock):
    locks.hold("planner", clock())
    db.session.rollback()
    assert lock_counts("planner", clock) == (0, 0)


def test_the_leader_counts_its_renewals_and_a_lost_lock_as_contended_a_standby_nothing(app, clock):
    leader = LeaderLock(get_redis(), ttl_s=10, clock=clock)
    standby = LeaderLock(get_redis(), ttl_s=10, clock=clock)
    assert leader.acquire_or_renew() and not standby.acquire_or_renew()
    assert lock_counts("leader", clock) == (0, 0)  # winning it at first, or a standby finding it taken
    assert leader.acquire_or_renew() and not standby.acquire_or_renew()
    assert lock_counts("leader", clock) == (1, 0)
    get_redis().delete(leader.key)  # the leader stalled past its TTL and the standby took over
    assert standby.acquire_or_renew() and not leader.acquire_or_renew()
    assert lock_counts("leader", clock) == (2, 1)


def test_lock_contention_fires_over_70_percent_suggesting_scaling_out_and_clears(app, clock):
    spec = alert_rules.RULES["lock_contention"]
    assert (spec.threshold, spec.window_s) == (0.7, 600) and "scaling out" in spec.title
    metrics.LOCK_ATTEMPTS.inc_now(9, at=clock(), lock="planner")
    metrics.LOCK_CONTENDED.inc_now(8, at=clock(), lock="planner")
    metrics.LOCK_ATTEMPTS.inc_now(200, at=clock(), lock="leader")  # the leader's many calm renewals do not dilute it
    assert alert_rules.evaluate(clock) == {}  # 8 of 9 planner requests: too few to judge
    metrics.LOCK_ATTEMPTS.inc_now(1, at=clock(), lock="planner")
    alert = assert_fires("lock_contention", clock, 0.8)
    assert alert.payload["title"] == "Lock contention high: consider scaling out"
    assert rule("lock_contention").detail == ("requests that found the lock taken: planner lock 8 of 10, "
                                              "leader lock 0 of 200")
    clock.advance(11 * 60)
    metrics.LOCK_ATTEMPTS.inc_now(10, at=clock(), lock="planner")
    metrics.LOCK_CONTENDED.inc_now(7, at=clock(), lock="planner")
    assert_clears("lock_contention", clock)  # 70% is not over 70%


def test_progress_write_failure_rate_fires_over_1_percent_and_clears(runs, clock, monkeypatch):
    run_id = runs.submit("demo.noop")
    db.session.commit()
    ctx = HandlerContext(run_id=run_id, tenant="default", task=None, handler="demo.noop", params={}, attempt=1,
                         series=1, execution=1, idempotency_key="k", retry_token="t", trace_id="x", timeout_s=30)
    for percent in range(99):
        ctx.progress(percent)
    clock.set(utcnow())  # the writes count at the real time, like every worker's: evaluate just after them
    assert alert_rules.evaluate(clock) == {}
    assert rule("progress_write_failure_rate").detail == "0 of 99 progress and heartbeat writes failed"

    def broken(*args, **kwargs):
        raise RuntimeError("database unreachable")

    monkeypatch.setattr(context_module, "update", broken)
    ctx.progress(99)
    ctx.progress(100)
    monkeypatch.undo()
    assert ctx.progress_failures == 2
    clock.set(utcnow())
    alert = assert_fires("progress_write_failure_rate", clock, 2 / 101)
    assert alert.payload["summary"].startswith("2 of 101 progress and heartbeat writes failed in the last 10 min")
    execute(run_id, 0, clock=clock)  # its job would otherwise wait past queue_wait's 5 min below
    clock.advance(11 * 60)
    for _ in range(10):  # too few to judge keeps it firing: writes that went through in the new window clear it
        metrics.PROGRESS_WRITES.inc_now(at=clock(), kind="progress")
    assert_clears("progress_write_failure_rate", clock)


def timed_out(runs, clock, handler: str = "demo.noop") -> None:
    """Run one attempt that ends at its timeout, through the one status writer, as the worker would."""
    run_id = runs.submit(handler, clock=clock)
    run = db.session.get(Run, run_id)
    transitions.move(run, "running", clock(), attempt=1)
    run = runs.get(run_id)
    transitions.move(run, "dead", clock(), reason="timeout", error_code="timeout")
    db.session.commit()


def test_timeout_anomaly_fires_when_a_handler_times_out_well_above_its_usual_rate_and_clears(runs, clock):
    spec = alert_rules.RULES["timeout_anomaly"]
    assert (spec.threshold, spec.window_s, spec.unit) == (3, 3600, "multiple")
    alert_rules.update_rule("timeout_anomaly", {"window_s": 86_400}, ADMIN, clock=clock)  # a day: fewer rows to make
    alert_rules.update_rule("retry_failure_rate", {"enabled": False}, ADMIN, clock=clock)  # every attempt here fails
    start = clock()
    clock.set(start - timedelta(days=2))
    for _ in range(14):  # usually two a day
        timed_out(runs, clock)
    clock.set(start)
    for _ in range(4):
        timed_out(runs, clock, "demo.flaky")  # never timed out before, but four are under the minimum of five
    for _ in range(5):
        timed_out(runs, clock)
    assert alert_rules.evaluate(clock) == {}  # five today is 2.5 times the usual two
    assert rule("timeout_anomaly").detail == ("python:demo.noop timed out 5 times, 2.5× its usual 2.0 "
                                              "(over the 7 days before)")
    for _ in range(2):
        timed_out(runs, clock)
    alert = assert_fires("timeout_anomaly", clock, 3.5)
    assert alert.payload["summary"].endswith("in the last 24 h (3.5×; threshold 3×).")
    clock.advance(86_401)  # today's timeouts become part of the usual rate
    assert_clears("timeout_anomaly", clock)


def _beater_without_thread(monkeypatch):
    """A fresh beater in place of the process's: a beat thread an earlier test left alive ticks on the old one."""
    from console.services.engine import heartbeat

    beater = heartbeat._Beater()
    monkeypatch.setattr(heartbeat, "_beater", beater)
    return beater


def test_a_heartbeat_counts_one_write_per_beat_and_a_failed_one_as_failed(runs, monkeypatch):
    from console.services.engine import heartbeat

    run_id = runs.submit("demo.noop")
    registered = {run_id: (0, threading.Event())}
    beater = _beater_without_thread(monkeypatch)
    beater.attempts = dict(registered)  # as Heartbeat registers it
    beater._beat(registered)
    monkeypatch.setattr(heartbeat, "update", lambda *args: 1 / 0)
    beater._beat(registered)
    counts = metrics.snapshot()
    assert counts[metrics.PROGRESS_WRITES.name] == {"heartbeat": 2.0}
    assert counts[metrics.PROGRESS_WRITE_FAILURES.name] == {"heartbeat": 1.0}


def test_a_round_that_copied_an_attempt_before_it_ended_writes_no_beat_for_it(runs, monkeypatch):
    from sqlalchemy import update

    from console.extensions import db
    from console.models import Run

    run_id = runs.submit("demo.noop")
    db.session.execute(update(Run).where(Run.id == run_id).values(status="running", attempt=1, heartbeat_at=None))
    db.session.commit()
    copied = {run_id: (1, threading.Event())}  # the round's copy, taken while the attempt still ran
    beater = _beater_without_thread(monkeypatch)  # ... and the attempt has ended since: nothing registered
    beater._beat(copied)
    db.session.expire_all()
    assert db.session.get(Run, run_id).heartbeat_at is None  # a late beat would make it look alive
    beater.attempts = dict(copied)
    beater._beat(copied)
    db.session.expire_all()
    assert db.session.get(Run, run_id).heartbeat_at is not None
