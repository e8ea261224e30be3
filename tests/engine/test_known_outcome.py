"""Invariant 7: once a handler has returned or raised, a bookkeeping failure never sends it round again."""

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.exc import MultipleResultsFound, OperationalError

from console.db import single_statements
from console.domain.clock import utcnow
from console.extensions import db
from console.services.engine import execute as engine
from console.services.engine import handler_kinds, known_outcomes, parking, reconcile, transitions
from console.services.engine.execute import execute

BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}
LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)


def failing(monkeypatch, target, attribute: str, times: int | None, error=None):
    """Make target.attribute raise a database error `times` times (None: always), then behave."""
    real, calls = getattr(target, attribute), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if times is None or len(calls) <= times:
            raise error or OperationalError("INSERT INTO work_orders", {}, Exception("database is locked"))
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attribute, flaky)
    return calls


def refuse(monkeypatch, target: str, times: int | None) -> list:
    """Make the database refuse to record a move to `target` `times` times (None: always), as a restarting server
    does; return the moves to it asked for (1 refused, 0 let through)."""
    real_move, asked = transitions.move, []

    def move(run, to, *args, **kwargs):
        if to == target and (times is None or len(asked) < times):
            asked.append(1)
            raise OperationalError("UPDATE runs", {}, Exception("the database system is shutting down"))
        if to == target:
            asked.append(0)
        return real_move(run, to, *args, **kwargs)

    monkeypatch.setattr(transitions, "move", move)
    return asked


def _stale(run_id: int, clock):
    """Ten minutes past the real time, with the run's last beat five minutes before: the reconciler's turn."""
    # A beat the worker's heartbeat thread copied before the attempt ended may still land (at the real time) after
    # the line below, and must read as stale too (make test saw it land once).
    clock.set(utcnow() + timedelta(minutes=10))
    db.session.execute(text("UPDATE runs SET heartbeat_at = :at WHERE id = :id"),
                       {"at": (clock() - timedelta(minutes=5)).replace(tzinfo=None), "id": run_id})
    db.session.commit()
    return clock


def test_a_failed_write_of_a_known_failure_is_retried_not_the_handler(runs, clock, monkeypatch):
    run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT)
    calls = failing(monkeypatch, parking, "park", times=1, error=MultipleResultsFound("two work orders"))
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.error_code, run.executions) == ("dead", "non_retryable",
                                                                               "bad_account", 1)
    assert len(calls) == 2 and len(runs.dead_letters(run_id)) == 1


def test_a_success_written_once_the_database_answers_again_is_recorded_as_it_ran(runs, clock, monkeypatch):
    """A PostgreSQL restart takes 0.5–2 s: three tries in 0.3 s made its successes dead letters and work orders."""
    run_id = runs.submit("demo.noop")
    refused = refuse(monkeypatch, "succeeded", times=6)  # some 3 s of pauses, within the worker's patience
    assert execute(run_id, 0, clock=clock) == "succeeded"
    run = runs.get(run_id)
    assert (run.status, run.executions, len(refused)) == ("succeeded", 1, 7)
    assert runs.dead_letters(run_id) == []


def test_the_time_each_refused_write_takes_counts_toward_the_workers_patience(runs, clock, monkeypatch):
    """On a write-locked SQLite each try waits 10 s for the lock: counting the pauses alone, the worker tried for
    minutes past its 15 s and logged "5.1 s so far" (helper 162)."""
    run_id = runs.submit("demo.noop")
    monkeypatch.setattr(engine, "BOOKKEEPING_PATIENCE_S", 0.5)
    real_move, asked = transitions.move, []

    def slow_refusal(run, to, *args, **kwargs):
        if to == "succeeded":
            asked.append(1)
            time.sleep(0.3)  # the lock's wait, inside the try
            raise OperationalError("UPDATE runs", {}, Exception("database is locked"))
        return real_move(run, to, *args, **kwargs)

    monkeypatch.setattr(transitions, "move", slow_refusal)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"  # kept for the reconciler once 0.5 s had passed
    assert len(asked) <= 4  # three tries and the look before keeping it; the pauses alone (0.1 s, 0.2 s, …) let five


def test_a_success_the_database_never_took_is_kept_and_recorded_by_the_reconciler_never_parked(
        runs, clock, monkeypatch):
    run_id = runs.submit("demo.noop")
    refuse(monkeypatch, "succeeded", times=None)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"  # waited its patience, then kept it in Redis
    assert runs.get(run_id).status == "running"
    assert known_outcomes.recall(run_id, 1)["result"] == {"ok": True}
    monkeypatch.undo()  # the database takes writes again
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.result, run.executions) == ("succeeded", "recorded_late", {"ok": True},
                                                                           1)
    assert run.finished_at < clock() - timedelta(minutes=5)  # when the handler ended, not when it was recorded
    assert runs.dead_letters(run_id) == [] and known_outcomes.recall(run_id, 1) is None


def test_a_result_that_is_not_json_is_stored_as_its_text_and_the_handler_runs_once(runs, clock, monkeypatch):
    # A handler returning a datetime (or bytes) left its run `running`: the database's JSON encoder refused it, the
    # error escaped the bookkeeping, and the reconciler sent the run round again as worker_lost.
    calls = []

    def returns_python_values(*args, **kwargs):
        calls.append(1)
        return {"charged_at": datetime(2026, 1, 5, 9, 0, tzinfo=UTC), "receipt": b"r-1", "amount": Decimal("9.50")}

    monkeypatch.setattr(engine, "call_handler", returns_python_values)
    run_id = runs.submit("demo.noop")
    assert execute(run_id, 0, clock=clock) == "succeeded"
    run = runs.get(run_id)
    assert run.result == {"charged_at": "2026-01-05 09:00:00+00:00", "receipt": "b'r-1'", "amount": "9.50"}
    assert (run.executions, len(calls)) == (1, 1)


def test_a_bookkeeping_error_that_is_not_the_databases_parks_the_run_too(runs, clock, monkeypatch):
    run_id = runs.submit("demo.noop")
    real_move = transitions.move

    def refuse_success(run, target, *args, **kwargs):
        if target == "succeeded":
            raise TypeError("Object of type Widget is not JSON serializable")
        return real_move(run, target, *args, **kwargs)

    monkeypatch.setattr(transitions, "move", refuse_success)
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert (run.status_reason, run.executions) == ("bookkeeping_failed", 1)
    assert "the handler succeeded" in run.error_message and "not JSON serializable" in run.error_message


def test_a_handler_that_cannot_be_resolved_fails_its_attempt_instead_of_holding_the_run(runs, clock, monkeypatch):
    # e.g. a commands file that no longer parses while a command: run waits: the attempt fails and is retried.
    monkeypatch.setattr(handler_kinds, "resolve", lambda name: (_ for _ in ()).throw(ValueError("bad YAML line 3")))
    run_id = runs.submit("demo.noop", policy={"max_attempts": 2, **LENIENT})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert run.status == "retry_wait" and "bad YAML line 3" in (run.error_message or "")


def test_a_failure_the_database_never_took_is_recorded_by_the_reconciler_as_its_worker_would_have(
        runs, clock, monkeypatch):
    run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT)
    failing(monkeypatch, parking, "park", times=None)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    assert runs.get(run_id).status == "running"
    assert known_outcomes.recall(run_id, 1)["code"] == "bad_account"
    monkeypatch.undo()  # the database is back
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.error_code, run.executions) == ("dead", "non_retryable",
                                                                               "bad_account", 1)
    assert "account 42 is closed" in run.error_message and len(runs.dead_letters(run_id)) == 1
    assert run.finished_at < clock() - timedelta(minutes=5)  # when the handler ended (it read the reconcile's time)
    assert known_outcomes.recall(run_id, 1) is None
    assert [e.kind for e in runs.events(run_id)].count("running") == 1  # the handler ran once


def test_a_retryable_failure_the_database_never_took_is_retried_by_its_policy_not_parked(runs, clock, monkeypatch):
    """A handler's transient error while the database was down past the worker's patience became a dead letter and
    a work order for a person, where its policy would have retried it."""
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy={**LENIENT, "max_attempts": 3, "jitter": 0})
    refuse(monkeypatch, "retry_wait", times=None)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    monkeypatch.undo()
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    run = runs.get(run_id)
    assert (run.status, run.attempt, run.executions) == ("retry_wait", 1, 1)
    assert runs.dead_letters(run_id) == []


def test_a_late_failures_retry_is_due_its_delay_after_the_handler_ended_not_after_the_reconcile(
        runs, clock, monkeypatch):
    # A Retry-After of 15 minutes given 10 minutes before the reconciler recorded it is 5 minutes away, not 15.
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy={**LENIENT, "max_attempts": 3, "jitter": 0,
                                                                  "base_delay_s": 900, "max_delay_s": 900})
    refuse(monkeypatch, "retry_wait", times=None)
    clock.set(utcnow())
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    ended = clock().replace(tzinfo=None)
    monkeypatch.undo()
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    reconcile.reconcile(_stale(run_id, clock))  # ten minutes later
    assert runs.get(run_id).next_retry_at.replace(tzinfo=None) == ended + timedelta(seconds=900)


def test_a_database_gone_even_for_the_cleanup_parks_the_run_rather_than_run_it_again(runs, clock, monkeypatch):
    """A PostgreSQL restart: the success's write failed, then so did leaving its single-statement unit (which asks
    the database); that error escaped the retries, the worker quit, and the reconciler ran the handler again."""
    run_id = runs.submit("demo.noop")
    real_call = engine.call_handler

    def call_then_lose_the_database(*args, **kwargs):
        result = real_call(*args, **kwargs)
        failing(monkeypatch, single_statements, "end", times=None,
                error=OperationalError("SET TRANSACTION", {}, Exception("the database system is shutting down")))
        return result

    refuse(monkeypatch, "succeeded", times=None)
    monkeypatch.setattr(engine, "call_handler", call_then_lose_the_database)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"  # kept in Redis: it escaped before
    run = runs.get(run_id)
    assert (run.status, run.executions) == ("running", 1)
    assert known_outcomes.recall(run_id, 1)["code"] == known_outcomes.SUCCEEDED


def test_an_outcome_whose_run_moved_on_while_its_worker_waited_for_the_database_is_dropped(runs, clock, monkeypatch):
    """The reconciler took the attempt for lost while its worker waited for the database: the late write finds the
    run moved on and drops the outcome, as any stale attempt's is; nothing is kept for the reconciler."""
    run_id = runs.submit("demo.noop")
    refused = refuse(monkeypatch, "succeeded", times=None)
    real_sleep = engine._sleep

    def moved_on_meanwhile(seconds):
        if len(refused) == 2:
            db.session.execute(text("UPDATE runs SET attempt = 2 WHERE id = :id"), {"id": run_id})
            db.session.commit()
        return real_sleep(seconds)

    monkeypatch.setattr(engine, "_sleep", moved_on_meanwhile)
    assert execute(run_id, 0, clock=clock) == "stale"
    assert known_outcomes.recall(run_id, 1) is None and known_outcomes.recall(run_id, 2) is None


def test_a_failure_with_an_undo_step_kept_for_the_reconciler_gets_its_undo_and_its_diagnostics(
        runs, clock, monkeypatch):
    """A handler with an undo step failed for good while the database was down past the worker's patience: it
    was parked as a dead letter, its undo never ran, and the attempt's traceback was lost."""
    from console.services.engine import compensation, diagnostics

    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable"})
    refuse(monkeypatch, "failed", times=None)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    monkeypatch.undo()
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    assert (runs.get(run_id).status, compensation.is_queued(run_id)) == ("compensating", True)
    assert compensation.execute(run_id) == "compensated"  # what its job runs
    run = runs.get(run_id)
    assert (run.status, run.executions, runs.dead_letters(run_id)) == ("compensated", 1, [])
    assert "CompensableError: compensable: flaky failure 1 of 1" in diagnostics.of_run(run_id)[(1, 1)].traceback


def test_a_claim_met_by_a_database_restart_waits_for_it_instead_of_failing_its_job(runs, clock, monkeypatch):
    """A restart of 0.23 s cut a busy worker's connection in its claim: the job failed at once and its run waited
    43 s for the reconciler while the rest of the queue ran."""
    from console.services.engine import claim

    run_id = runs.submit("demo.noop")
    failing(monkeypatch, claim, "claim", times=4,
            error=OperationalError("UPDATE runs", {}, Exception("the database system is starting up")))
    slept = []
    monkeypatch.setattr(engine, "_sleep", slept.append)
    assert execute(run_id, 0, clock=clock) == "succeeded"
    assert slept == [0.1, 0.2, 0.4]  # the first retry at once: a dropped connection is replaced
    assert runs.get(run_id).executions == 1


@pytest.mark.parametrize("seen, recorded", [(True, "cancelled"), (False, "succeeded")])
def test_a_success_recorded_late_after_someone_asked_to_cancel_is_what_its_worker_would_have_written(
        runs, clock, monkeypatch, seen, recorded):
    """The worker's own write says `cancelled` when the handler returned on seeing a cancel asked while it ran, and
    `succeeded` when it never looked (its work is done); the late record said `succeeded` for both."""
    run_id = runs.submit("demo.noop")
    refuse(monkeypatch, recorded, times=None)
    real_call = engine.call_handler

    def asked_to_cancel_meanwhile(*args, **kwargs):
        result = real_call(*args, **kwargs)
        transitions.request_cancel(runs.get(run_id), clock(), actor="alice")
        db.session.commit()
        args[1].cancel_event.set()  # what the heartbeat does when it reads the request
        if seen:
            assert args[1].cancelled()  # the handler looks, and stops
        return result

    monkeypatch.setattr(engine, "call_handler", asked_to_cancel_meanwhile)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    monkeypatch.undo()
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    run = runs.get(run_id)
    reason = "cancel_requested" if seen else known_outcomes.RECORDED_LATE
    assert (run.status, run.status_reason, run.result, run.executions) == (recorded, reason, {"ok": True}, 1)
    assert run.finished_at < clock() - timedelta(minutes=5)
    if not seen:
        assert runs.events(run_id, "succeeded")[-1].message == known_outcomes.FINISHED_ANYWAY


@pytest.mark.parametrize("handler, params, refused, counted", [
    ("demo.flaky", {"fail_times": 1}, "dead", True),  # a dependency's failure: the breaker counts it
    ("demo.flaky", BROKEN, "dead", False),  # a caller's bad input: it does not, as a worker's own record
])
def test_a_failure_recorded_late_counts_toward_its_breaker_as_its_workers_record_would(
        runs, clock, monkeypatch, handler, params, refused, counted):
    """A late failure counted nowhere: a dependency failing through a database outage never opened its breaker."""
    from console.services.engine import breakers

    policy = {"max_attempts": 1, "breaker": {"failure_threshold": 1, "open_s": 60, "success_threshold": 1}}
    run_id = runs.submit(handler, params, policy=policy)
    refuse(monkeypatch, refused, times=None)
    assert execute(run_id, 0, clock=clock) == "bookkeeping_failed"
    key = breakers.key_for(runs.get(run_id).handler, runs.get(run_id).tenant_id, "handler")
    assert breakers.state_of(key, clock()).state == "closed"  # its worker released the slot, counted nothing
    monkeypatch.undo()
    monkeypatch.setattr(engine, "_sleep", lambda seconds: None)
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    assert runs.get(run_id).status == "dead"
    assert (breakers.state_of(key, clock()).state == "open") is counted
    opened = [m for m in runs.outbox("alert") if m.payload["rule"] == "breaker_opened"]
    assert len(opened) == int(counted)


def test_a_failure_recorded_at_the_workers_last_try_counts_toward_its_breaker(runs, clock, monkeypatch):
    from console.services.engine import breakers

    policy = {"max_attempts": 1, "breaker": {"failure_threshold": 1, "open_s": 60, "success_threshold": 1}}
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy=policy)
    real_move, real_keep = transitions.move, engine._keep_for_the_reconciler
    refuse(monkeypatch, "dead", times=None)

    def back_for_the_last_try(*args, **kwargs):
        monkeypatch.setattr(transitions, "move", real_move)
        return real_keep(*args, **kwargs)

    monkeypatch.setattr(engine, "_keep_for_the_reconciler", back_for_the_last_try)
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert breakers.state_of(breakers.key_for(run.handler, run.tenant_id, "handler"), clock()).state == "open"
    assert known_outcomes.recall(run_id, 1) is None


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_run_asked_to_stop_whose_worker_died_is_cancelled_not_retried_or_parked(runs, clock, max_attempts):
    """A `replace` firing asked the running run to stop, then its worker died: the reconciler sent it to retry_wait
    (another run under the mutex), or, on its last attempt, to the DLQ with an alert for a run nobody wants (helper
    123)."""
    run_id = runs.submit("demo.sleep", {"seconds": 60}, policy={"max_attempts": max_attempts, "base_delay_s": 1})
    db.session.execute(text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": run_id})
    db.session.commit()
    assert transitions.request_cancel(runs.get(run_id), clock(), kind="replaced")
    db.session.commit()
    assert reconcile.reconcile(_stale(run_id, clock)).lost_workers == [run_id]
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.next_retry_at) == ("cancelled", "cancel_requested", None)
    assert "stopped sending heartbeats" in runs.events(run_id, "cancelled")[0].message
    assert runs.dead_letters(run_id) == []


@pytest.mark.parametrize("seen, recorded", [(True, "cancelled"), (False, "succeeded")])
def test_a_handler_asked_to_stop_reads_cancelled_only_if_it_looked(runs, clock, monkeypatch, seen, recorded):
    """One that never checks did its work whole: "cancelled" read as not done, with a Replay that would do it twice
    (helper 169)."""
    run_id = runs.submit("demo.noop")
    real_call = engine.call_handler

    def asked_to_cancel_meanwhile(*args, **kwargs):
        transitions.request_cancel(runs.get(run_id), clock(), actor="alice")
        db.session.commit()
        args[1].cancel_event.set()  # what the heartbeat does when it reads the request
        if seen:
            assert args[1].cancelled()
        return real_call(*args, **kwargs)

    monkeypatch.setattr(engine, "call_handler", asked_to_cancel_meanwhile)
    assert execute(run_id, 0, clock=clock) == recorded
    run = runs.get(run_id)
    assert (run.status, run.result) == (recorded, {"ok": True})
    note = runs.events(run_id, recorded)[-1].message
    assert (note == known_outcomes.FINISHED_ANYWAY) is (not seen)
