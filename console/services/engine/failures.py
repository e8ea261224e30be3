"""What happens after an attempt fails: retry later, compensate, or park as a dead letter."""

import logging
import time
from datetime import timedelta

from sqlalchemy import func, select

from console import metrics
from console.db import locks
from console.domain.clock import Clock
from console.domain.errors import NOT_COMPENSABLE, Failure, NonRetryableError
from console.domain.policy import RetryPolicy, retry_delay
from console.domain.secrets import redact
from console.extensions import db
from console.models import Run, RunEvent
from console.services.delivery import outbox
from console.services.engine import diagnostics, queueing, transitions
from console.services.engine import parking as dead_letters

log = logging.getLogger("rebound.engine")
COMPENSATION_ATTEMPTS = 3
# Seed 004: an undo that fails waits 2^n s before the next try (1 s, then 2 s), as it may call an outside service.
COMPENSATION_BACKOFF_S = (1.0, 2.0)
# The undo runs inline in a worker (or in its own job): a Retry-After beyond this is not waited out in full.
UNDO_RETRY_AFTER_CAP_S = 30.0
# The status reason of a run compensating after its own attempt failed (the worker undoes it there and then).
AFTER_FAILURE = "compensate"


def _error_fields(failure: Failure) -> dict:
    return {"error_message": failure.message}


def fail(run: Run, failure: Failure, policy: RetryPolicy, now, *, duration_ms: int | None = None,
         compensate=None, ctx=None, clock=None, finished_at=None) -> str:
    """Move a running run on after a failed attempt; return its new status.

    finished_at: when the attempt ended, if that was before now (an outcome its worker could not write).
    """
    common = {"duration_ms": duration_ms, "message": failure.message[:2000]}
    if failure.retryable and (run.cancel_requested or (ctx is not None and ctx.cancel_event.is_set())):
        # Someone asked it to stop (a person's Cancel, a `replace` firing) before its worker died or its handler
        # failed: a retry would start what they stopped, and a last attempt's failure parked a run nobody wants.
        transitions.move(run, "cancelled", now, reason="cancel_requested", error_code=failure.code,
                         finished_at=finished_at or now, **common, **_error_fields(failure))
        db.session.commit()
        return "cancelled"
    if failure.retryable and run.attempt < policy.max_attempts:
        delay = retry_delay(policy, run.attempt, failure.retry_after_s)
        # A late outcome's wait counts from when its handler failed (a Retry-After was said then), never before now.
        next_at = max(now, (finished_at or now) + timedelta(seconds=delay))
        transitions.move(run, "retry_wait", now, reason="retryable", error_code=failure.code, next_retry_at=next_at,
                         data={"delay_s": round(delay, 3), "retry_after_s": failure.retry_after_s}, **common,
                         **_error_fields(failure))
        db.session.commit()
        try:
            queueing.enqueue_at(next_at, run.id, run.series, run.attempt, policy.timeout_s)
        except Exception as error:  # noqa: BLE001 - the reconciler enqueues due retries Redis lost
            log.warning("retry of run %s committed but not scheduled (%s)", run.id, error)
        return "retry_wait"
    if failure.retryable:
        return _dead(run, failure, "exhausted", now, common, finished_at)
    if failure.severity == 3:
        return _dead(run, failure, "manual_intervention", now, common, finished_at)
    if compensate is not None:
        begin_compensation(run, failure, now, duration_ms=duration_ms)
        return compensate_run(run, compensate, ctx, now, failure.code, clock=clock)
    return _dead(run, failure, "non_retryable", now, common, finished_at)


def undoes(failure: Failure) -> bool:
    """Tell whether a failed attempt goes to its handler's undo step, when it has one (fail's own rule)."""
    return not failure.retryable and failure.severity != 3


def _dead(run: Run, failure: Failure, reason: str, now, common: dict, finished_at=None) -> str:
    transitions.move(run, "dead", now, reason=reason, error_code=failure.code, finished_at=finished_at or now, **common,
                     **_error_fields(failure))
    letter = dead_letters.park(run, failure, reason, now)
    db.session.commit()
    log.warning("run %s parked as dead letter %s (%s)", run.id, letter.id, reason, extra={
        "run_id": run.id, "task_id": run.task_id, "tenant_id": run.tenant_id, "status": "dead", "reason": reason,
        "attempt": run.attempt, "dlq_flag": True, "dead_letter_id": letter.id, "workorder_id": letter.work_order_id,
        "error_code": failure.code, "trace_id": run.trace_id})
    return "dead"


def begin_compensation(run: Run, failure: Failure, now, *, duration_ms: int | None = None) -> None:
    """Move a run whose attempt failed for good to compensating (and commit); its undo step runs next."""
    common = {"duration_ms": duration_ms, "message": failure.message[:2000]}
    transitions.move(run, "failed", now, reason="non_retryable", error_code=failure.code, **common,
                     **_error_fields(failure))
    page = f"compensating:{run.tenant_id}:{failure.fingerprint}" if failure.severity == 2 else None
    # The page its undo opens is named on the timeline, so the undo's end resolves it.
    transitions.move(run, "compensating", now, reason=AFTER_FAILURE, data={"page": page} if page else None)
    if page:
        outbox.add("alert", page, {
            "rule": "compensation_started", "run_id": run.id, "tenant_id": run.tenant_id, "handler": run.handler,
            "error_code": failure.code, "message": failure.message[:500]}, now, tenant_id=run.tenant_id)
        metrics.RETRY_ESCALATED.inc(tenant=run.tenant_id, reason="compensation_alert")
    db.session.commit()


def _end_undo_page(run: Run, now, said: str, error_code: str | None) -> None:
    """Resolve the page a severity-2 failure's undo opened ("its undo is running"), once no undo it covers runs in the
    tenant: it stayed open in PagerDuty for good, and later failures of the group piled onto it (helper 160)."""
    data = db.session.execute(select(RunEvent.data).where(RunEvent.run_id == run.id, RunEvent.kind == "compensating")
                              .order_by(RunEvent.id.desc()).limit(1)).scalar()
    page = (data or {}).get("page")
    if not page:
        return
    # Two undos of the group ending at once would each count the other (its end not yet committed) and neither
    # resolve: held to the commit, the later one counts after the earlier one's end is committed.
    locks.hold(f"undo-page:{page}", now)
    still = db.session.execute(select(func.count()).select_from(Run).where(
        Run.tenant_id == run.tenant_id, Run.status == "compensating", Run.status_reason == AFTER_FAILURE,
        Run.error_code == error_code, Run.id != run.id)).scalar_one()
    if not still:
        outbox.resolve(f"rebound-{page}", f"{run.handler}: the undo has ended", said, now, tenant_id=run.tenant_id,
                       run_id=run.id)


def compensate_run(run: Run, compensate, ctx, now, cause: str, *, missing: Failure | None = None, clock=None,
                   sleep=None) -> str:
    """Run the undo step of a compensating run (idempotent; retried with backoff); return its new status.

    A retryable error (a 5xx, a timeout, any unexpected exception) is tried again, after the backoff or the
    error's Retry-After if longer (up to UNDO_RETRY_AFTER_CAP_S); a non-retryable one ends the undo at once, and
    the code `not_compensable` (a plugin answered 404) says there is no undo to try. With no step to run
    (compensate None), the compensation fails at once with `missing` (default: its handler is gone). With a
    `clock`, each try is stamped when it ends (the tries are seconds apart); else all at `now`. `sleep` waits
    between tries: by default the clock's (a test's frozen clock lets the time pass without waiting).
    """
    stamp = clock or (lambda: now)
    sleep = sleep or (clock.sleep if isinstance(clock, Clock) else time.sleep)
    if compensate is None:
        missing = missing or Failure("compensation_failed",
                                     f"no compensation step to run: handler {run.handler} is gone", retryable=False)
        return _compensation_failed(run, cause, missing.message, now, code=missing.code)
    last_error, code = "", "compensation_failed"
    # Counted across rounds: after "Retry the undo", the undo's first try of this round is its 4th, as the workflow
    # page counts it; a handler that escalates after N tries must see the real count, not 1 again. Its timeline and
    # the workflow's trail say the same number (their Try restarted at 1 beside "undo failure 4 of 5"; helper 105).
    earlier = db.session.execute(select(func.count()).select_from(RunEvent).where(
        RunEvent.run_id == run.id, RunEvent.kind == "compensation_attempt_failed")).scalar_one()
    for number in range(1, COMPENSATION_ATTEMPTS + 1):
        ctx.undo_attempt = earlier + number
        captured = diagnostics.Capture()
        try:
            with captured:
                compensate(ctx)
        except Exception as error:  # noqa: BLE001 - any failure of the undo is recorded and retried
            # Masked as a failure's message is: shown on the run, its dead letter and work order, to every viewer.
            last_error = redact(f"{type(error).__name__}: {error}")[:2000]
            # Its traceback and log lines go with the try's event, as an attempt's go beside it: a failing undo left
            # none anywhere but the worker's own log (helper 146).
            found = diagnostics.of(error, captured.lines)
            transitions.event(run, "compensation_attempt_failed", stamp(), message=last_error,
                              error_code=getattr(error, "code", None),
                              data={"number": ctx.undo_attempt, "traceback": found.traceback,
                                    "log_lines": found.log_lines})
            db.session.commit()
            if isinstance(error, NonRetryableError):
                code = NOT_COMPENSABLE if error.code == NOT_COMPENSABLE else code
                break  # trying the same undo again cannot help
            if number < COMPENSATION_ATTEMPTS:
                sleep(max(COMPENSATION_BACKOFF_S[number - 1],
                          min(getattr(error, "retry_after_s", None) or 0, UNDO_RETRY_AFTER_CAP_S)))
            continue
        done = stamp()
        transitions.move(run, "compensated", done, reason="compensated", finished_at=done,
                         data={"compensation_attempts": ctx.undo_attempt})
        _end_undo_page(run, done, f"Run #{run.id}'s undo worked: it is compensated.", run.error_code)
        db.session.commit()
        return "compensated"
    return _compensation_failed(run, cause, last_error, stamp(), code=code)


def _compensation_failed(run: Run, cause: str, last_error: str, now, *, code: str = "compensation_failed") -> str:
    failed_with = run.error_code
    transitions.move(run, "compensation_failed", now, reason="compensation_failed", error_code=code,
                     message=last_error)
    _end_undo_page(run, now, f"Run #{run.id}'s undo failed: its dead letter's work order and alert take it on.",
                   failed_with)
    failed = Failure(code=code, message=f"{cause}: {last_error}", retryable=False)
    return _dead(run, failed, "compensation_failed", now, {"message": last_error})
