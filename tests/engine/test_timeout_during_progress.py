"""A handler's timeout that fires while it reports progress stops the handler once the write is done: never lost."""

import os
import signal
import threading
import time

import pytest
import redis
from rq.timeouts import JobTimeoutException
from sqlalchemy import event, select

from console import metrics
from console.extensions import db
from console.models import Run
from console.services.engine import transitions
from console.services.engine.execute import context_for


@pytest.fixture
def alarm_raises():
    """SIGALRM raises JobTimeoutException, as RQ's death penalty (and the handler's own alarm) makes it do."""
    def stop(*_):
        raise JobTimeoutException("timed out")

    previous = signal.signal(signal.SIGALRM, stop)
    yield
    signal.signal(signal.SIGALRM, previous)


def _claimed(runs, clock):
    """Submit a run and move it to running (progress is written for a run in work); return it and its context."""
    run_id = runs.submit()
    run = runs.get(run_id)
    transitions.move(run, "running", clock(), attempt=1)
    db.session.commit()
    return run_id, context_for(run, timeout_s=1)


def _stopped_in_the_write(ctx, in_the_write) -> None:
    """Report progress with `in_the_write` called as its statement goes out; the timeout must stop it after."""
    event.listen(db.engine, "before_cursor_execute", in_the_write)
    try:
        with pytest.raises(JobTimeoutException):
            ctx.progress(40, "part way")
    finally:
        event.remove(db.engine, "before_cursor_execute", in_the_write)


def test_a_timeout_arriving_during_a_progress_write_is_raised_after_it_not_swallowed(runs, clock, alarm_raises):
    run_id, ctx = _claimed(runs, clock)
    fired = []

    def alarm_in_the_write(conn, cursor, statement, *_):
        if statement.startswith("UPDATE") and not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGALRM)  # the timeout, in the middle of the database call

    _stopped_in_the_write(ctx, alarm_in_the_write)
    # The write finished before the timeout stopped the handler, and was not counted as a lost one.
    assert fired and ctx.progress_failures == 0
    db.session.rollback()  # a fresh read: the write was the context's own transaction
    assert (runs.get(run_id).progress, runs.get(run_id).progress_message) == (40, "part way")


def test_a_timeout_arriving_while_the_progress_write_is_counted_is_raised_after_it(runs, clock, alarm_raises,
                                                                                  monkeypatch):
    # The count's Redis write, made at once when metrics are not batched, swallows its errors: the timeout landing
    # there was lost and the handler ran on (a 3 s sleep under a 1 s timeout succeeded, seen under load).
    run_id, ctx = _claimed(runs, clock)
    monkeypatch.setattr(metrics._batch, "interval_s", 0)
    sent = redis.client.Pipeline.execute

    def alarm_in_the_count(pipe, *args, **kwargs):
        signal.raise_signal(signal.SIGALRM)
        return sent(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", alarm_in_the_count)
    with pytest.raises(JobTimeoutException):
        ctx.progress(40, "part way")


def test_a_timeout_another_thread_receives_during_a_progress_write_is_raised_after_it(runs, clock, alarm_raises):
    # Blocked in the main thread only, the alarm went to another thread of the process (a worker has several), and
    # Python ran its handler in the main thread inside the driver: a commit broken half-way left a timed-out run
    # running (session 41, under load on PostgreSQL).
    run_id, ctx = _claimed(runs, clock)
    ask, sent = threading.Event(), threading.Event()

    def other_thread():
        ask.wait(10)
        os.kill(os.getpid(), signal.SIGALRM)  # the process's alarm; this thread, not blocking it, takes it
        sent.set()

    def alarm_in_the_write(conn, cursor, statement, *_):
        if statement.startswith("UPDATE") and not ask.is_set():
            ask.set()
            assert sent.wait(10)  # Python's handler for it is due in this thread from here on

    helper = threading.Thread(target=other_thread)
    helper.start()
    try:
        _stopped_in_the_write(ctx, alarm_in_the_write)
    finally:
        ask.set()
        helper.join(10)
    assert sent.is_set() and ctx.progress_failures == 0
    db.session.rollback()
    assert runs.get(run_id).progress == 40


def test_a_progress_write_waiting_on_a_held_row_gives_up_soon_and_counts_a_lost_write(runs, clock):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's lock_timeout; SQLite's writers wait in its busy handler, which gives up by itself")
    run_id, ctx = _claimed(runs, clock)
    with db.engine.connect() as holder:
        # Without a lock timeout the write would wait forever on this very thread: the holder lets go after 10 s.
        holder.exec_driver_sql("SET idle_in_transaction_session_timeout = '10s'")
        holder.execute(select(Run.id).where(Run.id == run_id).with_for_update())  # another writer holds the row
        started = time.monotonic()
        ctx.progress(40, "part way")
        waited = time.monotonic() - started
        holder.invalidate()
    assert ctx.progress_failures == 1
    assert waited < 5, f"the write waited {waited:.1f} s on the held row"
