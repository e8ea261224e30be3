"""Fork workers call each handler in a child process: what the handler did or raised reaches the run unchanged."""

import fcntl
import gc
import io
import logging
import os
import select
import termios
import threading
import time
import weakref
from datetime import timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import text

from console import metrics
from console.extensions import db
from console.services.actor import Actor
from console.services.engine import control, heartbeat
from console.services.engine.execute import execute
from console.services.engine.isolation import call_forked
from tests.helpers import wait_for

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}


@pytest.fixture
def isolated(app):
    app.config["ISOLATE_HANDLERS"] = True


def test_a_handler_that_kills_its_process_only_kills_the_child(runs, clock, isolated):
    run_id = runs.submit("demo.crash", policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"  # this test's process is still here to see it
    run = runs.get(run_id)
    assert run.error_code == "handler_crashed"
    assert "killed by signal 9 (SIGKILL)" in run.error_message
    assert run.next_retry_at is not None


def test_results_and_progress_come_back_from_the_child(runs, clock, isolated):
    run_id = runs.submit("demo.sleep", {"seconds": 0.2})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    run = runs.get(run_id)
    assert run.result == {"slept_s": 0.2}
    assert run.progress == 100 and run.attempt == 1


def test_retry_after_crosses_the_process_boundary(runs, clock, isolated):
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "retry_after_s": 7, "code": "rate_limited"},
                         policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert (run.error_code, run.next_retry_at - clock()) == ("rate_limited", timedelta(seconds=7))


def test_non_retryable_and_unexpected_errors_are_classified_as_in_process(runs, clock, isolated):
    fatal = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "code": "bad_input"})
    assert execute(fatal, 0, clock=clock) == "dead"
    assert runs.get(fatal).error_code == "bad_input"
    unexpected = runs.submit("demo.sleep", {"seconds": "soon"}, policy=NO_JITTER)
    assert execute(unexpected, 0, clock=clock) == "retry_wait"  # float("soon"): a ValueError, retried
    run = runs.get(unexpected)
    assert run.error_code == "ValueError" and "soon" in run.error_message


def test_compensation_runs_in_a_child_too(runs, clock, isolated):
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable"})
    assert execute(run_id, 0, clock=clock) == "compensated"
    assert [event.kind for event in runs.events(run_id)][-3:] == ["failed", "compensating", "compensated"]


def test_a_hung_handler_is_killed_at_its_timeout(runs, clock, isolated):
    run_id = runs.submit("demo.sleep", {"seconds": 30}, policy={**NO_JITTER, "timeout_s": 1})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert run.error_code == "timeout" and "1 s timeout" in run.error_message
    assert runs.events(run_id, "retry_wait")[0].duration_ms < 5000


def test_a_fork_worker_survives_a_crashing_handler_and_passes_on_a_cancel(runs, workers):
    worker = workers("fork")
    crashed = runs.submit("demo.crash", policy={"max_attempts": 1})
    assert runs.wait(crashed, "dead").error_code == "handler_crashed"
    sleeping = runs.submit("demo.sleep", {"seconds": 20})
    run = runs.wait(sleeping, "running")
    assert run.worker_id.endswith(f".{worker.pid}")  # bookkeeping is the worker's own, not a child's
    control.cancel(run, Actor("ops"))
    run = runs.wait(sleeping, "cancelled", timeout_s=10)
    assert run.result["cancelled"] is True and run.result["slept_s"] < 20
    assert worker.poll() is None  # the worker itself never went down


# A fork copies every lock as it is: one another thread holds stays held in the child, where no thread will ever
# release it. These tests fork while the worker's other threads are mid-way through what they do.
HOLD_S = 0.3  # how long the other thread stays in its critical section once the fork has been asked for


def _context():
    return SimpleNamespace(cancel_event=threading.Event())


def _holding(lock, held: threading.Event, released_at: list):
    """Take the lock, say so, keep it HOLD_S (a beat's SQL, say), note when it was let go."""
    with lock:
        held.set()
        time.sleep(HOLD_S)
        released_at.append(time.monotonic())


def test_a_fork_waits_for_a_heartbeat_beat_in_flight(app):
    held, released_at = threading.Event(), []
    beat = threading.Thread(target=_holding, args=(heartbeat.BEATING, held, released_at))
    beat.start()
    held.wait(5)
    # A child started mid-beat would inherit SQLite's process-wide mutexes as the beat held them.
    started_at = call_forked(lambda ctx: time.monotonic(), _context(), 5)
    beat.join()
    assert started_at >= released_at[0]


def _unread(fd: int) -> int:
    count = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return int.from_bytes(count, "little")


def test_a_child_can_log_while_another_thread_is_mid_way_through_a_log_line(app):
    reader, writer = os.pipe()
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(writer, "w")), write_through=True)
    logger = logging.getLogger("rebound.test.fork")
    logger.addHandler(handler := logging.StreamHandler(stream))
    logger.propagate = False
    # More than a pipe holds: the writing thread blocks inside the write, holding the stream's buffer lock.
    writing = threading.Thread(target=logger.warning, args=("x" * 200_000,))
    writing.start()
    wait_for(lambda: _unread(reader) >= 65536, what="the pipe to fill")
    read, done = [], threading.Event()

    def drain():
        time.sleep(HOLD_S)  # the fork is asked for while the line is still being written
        while not done.is_set():
            if select.select([reader], [], [], 0.05)[0]:
                read.append(os.read(reader, 65536))

    drainer = threading.Thread(target=drain)
    drainer.start()
    try:
        assert call_forked(lambda ctx: logger.warning("from the child") or "logged", _context(), 5) == "logged"
    finally:
        writing.join()
        done.set()
        drainer.join()
        logger.removeHandler(handler)
        stream.close()
        os.close(reader)
    assert b"from the child" in b"".join(read)


def test_a_child_sends_its_counts_though_another_thread_held_the_metrics_lock(app):
    held, released_at = threading.Event(), []
    flusher = threading.Thread(target=_holding, args=(metrics._batch.lock, held, released_at))
    flusher.start()
    held.wait(5)
    # The child flushes its counts before it leaves; the answer only arrives once it has left.
    assert call_forked(lambda ctx: "counted", _context(), 5) == "counted"
    flusher.join()


def test_a_child_neither_uses_nor_closes_the_parents_connections(app):
    db.session.execute(text("SELECT 1"))
    db.session.commit()  # the connection goes back to the pool, idle
    parents_pool = weakref.ref(db.engine.pool)

    def still_there(ctx):
        gc.collect()  # a collected pool closes its connections: SQLite's close, in the child, on the parent's file
        return parents_pool() is not None and db.engine.pool is not parents_pool()

    # A backstop, not the assertion: a full collection in a child of a big test process took over 5 s at load 8.
    assert call_forked(still_there, _context(), 60)
