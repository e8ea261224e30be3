"""Execute one attempt: claim the run, call its handler under a timeout, record what happened."""

import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass, replace

from sqlalchemy import bindparam, select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from console.db import single_statements
from console.domain.breaker import BreakerSettings
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import Failure, classify
from console.domain.secrets import held_in, holding, mask_held
from console.extensions import db
from console.models import Run
from console.services.engine import (
    breaker_alerts,
    breakers,
    claim,
    diagnostics,
    handler_kinds,
    known_outcomes,
    names,
    transitions,
)
from console.services.engine.calling import call_handler, undo_call
from console.services.engine.claim import RunRow
from console.services.engine.context import HandlerContext
from console.services.engine.failures import fail
from console.services.engine.heartbeat import Heartbeat
from console.services.engine.results import json_safe
from console.services.settings import setting

log = logging.getLogger("rebound.engine")
BOOKKEEPING_TRIES = 3
BOOKKEEPING_BACKOFF_S = 0.1
# A database that does not answer (a PostgreSQL restart takes 0.5–2 s, a failover longer) is waited for this long,
# the pauses doubling up to BOOKKEEPING_MAX_PAUSE_S, before the outcome is kept in Redis for the reconciler: three
# tries in 0.3 s turned every restart's successes into dead letters and work orders.
BOOKKEEPING_PATIENCE_S = 15.0
BOOKKEEPING_MAX_PAUSE_S = 2.0
_sleep = time.sleep  # tests replace it


def this_worker() -> str:
    """Name this process in a run's bookkeeping (host.pid), read at each call: a process forked after the import is
    a worker of its own, not its parent (the tests' launcher forks workers from one that imported this)."""
    return f"{socket.gethostname()}.{os.getpid()}"


# The hot path reads the run as a plain row: the ORM's loading machinery cost more than SQLite's read (18% of an
# attempt). A failure loads the ORM object, which dead letters and compensation work with.
_RUN_ROW = select(Run.__table__).where(Run.__table__.c.id == bindparam("run_id"))


def _load(run_id: int) -> RunRow | None:
    row = db.session.connection().execute(_RUN_ROW, {"run_id": run_id}).one_or_none()
    return None if row is None else RunRow(**row._mapping)


def execute(run_id: int, expected_attempt: int, *, clock: Clock = SYSTEM_CLOCK, worker_id: str | None = None) -> str:
    """Claim and run one attempt; return what became of the run (or why nothing was done)."""
    worker_id = worker_id or this_worker()
    # From a pending run, the claim (or the deferral, or the cancel) is one write: on PostgreSQL the reads and it
    # need no transaction around them (console/db/single_statements.py).
    # A busy worker keeps its connection and pings it only after an idle second (console/processes/worker.py): one
    # the server dropped meanwhile fails here, before the handler. The claim is guarded, so it is tried again on a
    # new connection, as the pool's pre-ping would have given, and while the database restarts for as long as an
    # outcome's write waits (failing at once, its run waited up to a minute for the reconciler).
    tries, waited = 0, 0.0
    while True:
        tries += 1
        try:
            with single_statements.unit():
                claimed = claim.claim(run_id, expected_attempt, clock, worker_id)
            break
        except DBAPIError as error:
            if not (error.connection_invalidated or _unanswered(error)) or waited >= BOOKKEEPING_PATIENCE_S:
                raise
            _abandon_write()
            if tries > 1:  # the first retry goes at once: a dropped connection is replaced, nothing may be down
                pause = min(BOOKKEEPING_BACKOFF_S * 2 ** (tries - 2), BOOKKEEPING_MAX_PAUSE_S,
                            BOOKKEEPING_PATIENCE_S - waited)
                _sleep(pause)
                waited += pause
    return claimed if isinstance(claimed, str) else _perform(*claimed, clock)


def _note_dropped_success(run: RunRow, now, duration_ms: int) -> None:
    """Record that a handler succeeded in an attempt the engine had given up: a later success repeats its effect."""
    # The duplicate-execution figure counts these; the run's status stays what the engine made it.
    transitions.event(run, "stale_success", now, duration_ms=duration_ms,
                      message="the handler succeeded after this attempt was given up; its result was dropped")
    db.session.commit()


def _as_orm(row: RunRow) -> Run:
    """Return the ORM object of a run read as a row, if it still is as the row says; else raise StaleRun."""
    run = db.session.get(Run, row.id)
    if (run.status, run.attempt, run.series) != (row.status, row.attempt, row.series):
        raise transitions.StaleRun(f"run {row.id} is no longer {row.status} at attempt {row.attempt}")
    return run


def context_for(run: Run | RunRow, timeout_s: int) -> HandlerContext:
    """Return what the run's handler (or its compensation) is given."""
    return HandlerContext(
        run_id=run.id, tenant=names.tenant(run.tenant_id), task=names.task(run.task_id),
        handler=run.handler, params=dict(run.params or {}), attempt=run.attempt, series=run.series,
        execution=run.executions, idempotency_key=run.idempotency_key, retry_token=run.retry_token or "",
        trace_id=run.trace_id, timeout_s=timeout_s)


@dataclass(frozen=True)
class Outcome:
    """What the handler did: its result or its error, and how long it took."""

    result: object
    error: Exception | None
    duration_ms: int
    invocation: object
    log_lines: tuple[str, ...] = ()


def _record(run, outcome: Outcome, policy, ctx: HandlerContext, now, clock: Clock) -> Run | RunRow:
    """Write the attempt's outcome; guarded by status and attempt (StaleRun if the run moved on meanwhile)."""
    if outcome.error is None:
        if ctx.cancel_seen:  # it stopped because it was asked to: what it returns is where it stopped
            transitions.move(run, "cancelled", now, reason="cancel_requested", finished_at=now,
                             result=kept_result(outcome.result), duration_ms=outcome.duration_ms)
        else:
            # A handler that never looked did its work whole, asked to stop or not: "cancelled" read as not done,
            # with a Replay button that would do it twice (helper 169).
            transitions.move(run, "succeeded", now, reason=None, finished_at=now, result=kept_result(outcome.result),
                             progress=100, duration_ms=outcome.duration_ms,
                             message=known_outcomes.FINISHED_ANYWAY if ctx.cancel_event.is_set() else None)
        db.session.commit()
        return run
    single_statements.end()  # a failure writes many rows: one transaction
    run = _as_orm(run)  # the failure paths (dead letters, compensation) work on the ORM object
    # With the failure, in its transaction: the attempt's story is there as soon as its status is.
    diagnostics.store(run.id, run.series, run.attempt, diagnostics.of(outcome.error, list(outcome.log_lines)), now)
    # A compensation runs here, inline: its heartbeat tells the reconciler whether this worker still lives.
    with Heartbeat(run.id, run.attempt, setting("HEARTBEAT_S"), ctx.cancel_event):
        fail(run, classify(outcome.error, policy), policy, now, duration_ms=outcome.duration_ms,
             compensate=undo_call(outcome.invocation, policy.timeout_s), ctx=ctx, clock=clock)
    return run


def _reread(run) -> RunRow:
    """Read the run afresh after a rolled-back write; StaleRun if it is no longer at this attempt."""
    fresh = _load(run.id)
    if fresh is None or (fresh.status, fresh.attempt, fresh.series) != ("running", run.attempt, run.series):
        raise transitions.StaleRun(f"run {run.id} is no longer running attempt {run.attempt}")
    return fresh


def _abandon_write() -> None:
    """Roll back a failed write of an outcome and leave its unit; with the database gone this fails too, harmlessly."""
    # A PostgreSQL restart: leaving the unit asks the database again, and that error, escaping here, skipped the
    # retries and the parking below; the worker quit, and the reconciler ran the handler again.
    try:
        db.session.rollback()
        single_statements.end()
    except Exception as also:  # noqa: BLE001 - the next try, or the parking (Redis if need be), copes
        log.warning("cleaning up after a failed outcome write failed too: %s", also)
        with contextlib.suppress(Exception):
            db.session.rollback()


def _unanswered(error: BaseException) -> bool:
    """Tell whether a write failed because the database did not answer (restarting, gone, busy, out of disk)."""
    return isinstance(error, OperationalError | InterfaceError) or (
        isinstance(error, DBAPIError) and error.connection_invalidated)


def _keep_for_the_reconciler(run, outcome: Outcome, policy, ctx: HandlerContext, now, clock: Clock
                             ) -> Run | RunRow | str:
    """The database did not answer for the whole patience: one last try the usual way (return the run it recorded),
    else keep the outcome in Redis for the reconciler to record as this would have (a retryable failure parked for a
    person had made a dead letter of a run its policy would retry, and a success a dead letter a person would
    replay) and return why nothing was recorded."""
    try:
        return _record(_reread(run), outcome, policy, ctx, now, clock)
    except transitions.StaleRun:
        return "stale"
    except Exception as still:  # noqa: BLE001 - kept below, whatever it was
        _abandon_write()
        log.warning("run %s: the database still did not answer: %s", run.id, still)
    if outcome.error is None:
        known_outcomes.keep_success(run.id, ctx.attempt, kept_result(outcome.result), now, outcome.duration_ms,
                                    stopped=ctx.cancel_seen)
    else:
        known_outcomes.keep_failure(run.id, ctx.attempt, classify(outcome.error, policy),
                                    diagnostics.of(outcome.error, list(outcome.log_lines)), now, outcome.duration_ms)
    return known_outcomes.BOOKKEEPING_FAILED


def _park_known_outcome(run_id: int, attempt: int, outcome: Outcome, policy, bookkeeping_error, now) -> str:
    """Park the run for a person with the handler's real outcome: never a retry that would run it again."""
    if outcome.error is None:
        failure = Failure(code=known_outcomes.BOOKKEEPING_FAILED, retryable=False, message=(
            f"the handler succeeded (result {str(kept_result(outcome.result))[:200]}) but recording it failed: "
            f"{bookkeeping_error}"[:2000]))
    else:
        real = classify(outcome.error, policy)
        failure = replace(real, retryable=False, message=(
            f"{real.message} — and recording this outcome failed: {bookkeeping_error}"[:2000]))
    return known_outcomes.park(run_id, attempt, failure, now, duration_ms=outcome.duration_ms)


def kept_result(result) -> object:
    """Return a handler's result as the run keeps it: JSON, its secret-named fields and the run's secrets masked."""
    return mask_held(json_safe(result))


def _perform(run: RunRow, policy, breaker: breakers.BreakerKey, settings: BreakerSettings,
             verdict: breakers.Verdict, clock: Clock) -> str:
    """Run the attempt with the run's secret params masked by value in all it records and logs."""
    with holding(held_in(run.params)):
        return _attempt(run, policy, breaker, settings, verdict, clock)


def _attempt(run: RunRow, policy, breaker: breakers.BreakerKey, settings: BreakerSettings,
             verdict: breakers.Verdict, clock: Clock) -> str:
    # The context's reads and, when the handler succeeds, its record are one statement each (see execute).
    single_statements.begin()
    ctx = context_for(run, policy.timeout_s)
    try:
        invocation = handler_kinds.resolve(run.handler)
    except Exception as error:  # noqa: BLE001 - e.g. a commands file that no longer parses: this attempt's failure
        invocation, resolve_error = None, error
    started = time.monotonic()
    result, error = None, None
    if invocation is None:
        error = resolve_error
    else:
        with Heartbeat(run.id, run.attempt, setting("HEARTBEAT_S"), ctx.cancel_event), \
                diagnostics.Capture() as captured:
            try:
                result = call_handler(invocation.run, ctx, policy.timeout_s)
            except Exception as exc:  # noqa: BLE001 - every handler error is classified, none is swallowed
                error = exc
    duration_ms = int((time.monotonic() - started) * 1000)
    now = clock()
    outcome = Outcome(result, error, duration_ms, invocation, tuple(captured.lines) if invocation else ())
    # The handler has run: from here on, nothing may send it round again (invariant 7). A failure of the
    # bookkeeping is retried on a fresh read (while the database does not answer, for BOOKKEEPING_PATIENCE_S); if
    # it keeps failing, the run is parked for a person, or a success kept for the reconciler to record.
    attempt, waited, began = 0, 0.0, time.monotonic()
    while True:
        attempt += 1
        try:
            run = _record(_reread(run) if attempt > 1 else run, outcome, policy, ctx, now, clock)
            break
        except transitions.StaleRun:
            log.warning("run %s moved on while attempt %s ran; its outcome is dropped", run.id, ctx.attempt)
            if error is None:
                _note_dropped_success(run, now, duration_ms)
            breakers.release_probe(breaker, verdict)  # a dropped outcome is counted nowhere, a held slot would be
            return "stale"
        except Exception as bookkeeping_error:  # noqa: BLE001 - the database's, or any other: never a re-run
            _abandon_write()
            # The time a try itself took counts too: on a write-locked SQLite each try waits 10 s for the lock, and
            # pauses alone read "5.1 s so far" after minutes (helper 162).
            spent = max(waited, time.monotonic() - began)
            pause = min(BOOKKEEPING_BACKOFF_S * 2 ** (attempt - 1), BOOKKEEPING_MAX_PAUSE_S,
                        max(0.0, BOOKKEEPING_PATIENCE_S - spent))
            patient = _unanswered(bookkeeping_error) and pause > 0
            log.warning("run %s: recording the outcome of attempt %s failed (try %s, %.1f s so far): %s", run.id,
                        ctx.attempt, attempt, spent, bookkeeping_error)
            if attempt >= BOOKKEEPING_TRIES and not patient:
                kept = (_keep_for_the_reconciler(run, outcome, policy, ctx, now, clock)
                        if _unanswered(bookkeeping_error) else None)
                if not isinstance(kept, str | None):
                    run = kept  # recorded at the last try: its breaker counts it below, as any
                    break
                breakers.release_probe(breaker, verdict)  # the reconciler counts a kept outcome; a parked one no one
                return kept or _park_known_outcome(run.id, ctx.attempt, outcome, policy, bookkeeping_error, now)
            _sleep(pause)
            waited += pause
    single_statements.end()
    if error is not None and (not classify(error, policy).retryable or ctx.cancel_event.is_set()):
        # A caller's bad input (non-retryable) says nothing about the dependency's health, nor does an attempt
        # stopped on a person's cancel: the breaker ignores them, but a probe's slot is freed at once, or every run
        # of the handler would wait out the probe timeout.
        breakers.release_probe(breaker, verdict)
        return run.status
    if breaker_alerts.count(breaker, error is None, now, settings, clean_before=verdict.clean, run_id=run.id):
        db.session.commit()
    return run.status
