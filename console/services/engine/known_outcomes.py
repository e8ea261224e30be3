"""Outcomes known but not recorded: park the run for a person, or keep the outcome in Redis until the reconciler can.

Invariant 7: once a handler has returned or raised, a failure of the bookkeeping around it never sends the
handler round again.
"""

import json
import logging
from dataclasses import asdict
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError

from console.domain.breaker import BreakerSettings
from console.domain.errors import Failure, NonRetryableError
from console.extensions import db
from console.models import Run
from console.redis_conn import get_redis
from console.services.engine import breaker_alerts, breakers, diagnostics, handler_kinds, parking, transitions
from console.services.engine.calling import undo_call
from console.services.engine.diagnostics import Diagnostics
from console.services.policies import versions as policies

log = logging.getLogger("rebound.engine")
BOOKKEEPING_FAILED = "bookkeeping_failed"
SUCCEEDED = "succeeded"  # a kept outcome that is a success: recorded as one, never parked
RECORDED_LATE = "recorded_late"  # the timeline's reason for a success written after its worker could not
RECORDED_LATE_NOTE = "recorded after its worker could not write it"
FAIL = "fail"  # a kept failure the reconciler records as any failure is (retried if the policy says so)
KEY = "rebound:known-outcome:{}:{}"
KEEP_S = 7 * 24 * 3600


def park(run_id: int, attempt: int, failure: Failure, now, duration_ms: int | None = None) -> str:
    """Park a running attempt whose outcome is known; if the database refuses, keep the outcome in Redis."""
    try:
        run = db.session.get(Run, run_id, populate_existing=True)
        if (run.status, run.attempt) != ("running", attempt):
            return "stale"
        park_for_a_person(run, failure, now, duration_ms=duration_ms)
    except SQLAlchemyError as still_failing:
        db.session.rollback()
        # The database refuses even this: the reconciler looks here before it would retry a silent attempt.
        remember(run_id, attempt, failure.code, failure.message)
        log.error("run %s: attempt %s's outcome is known (%s) but cannot be written (%s); the reconciler parks it",
                  run_id, attempt, failure.code, still_failing)
        return BOOKKEEPING_FAILED
    log.error("run %s parked after its outcome could not be recorded: %s", run_id, failure.message)
    return "dead"


# The success's timeline line when a cancel was asked for while a handler that never checks for one ran on.
FINISHED_ANYWAY = "asked to stop while it ran; it finished first (its handler does not check for a cancel)"


def keep_success(run_id: int, attempt: int, result, ended_at, duration_ms: int | None = None, *,
                 stopped: bool = False) -> None:
    """Keep a success the database did not take, for the reconciler to record (never parked: a person would replay
    work that was done); `stopped`: the handler returned because it saw a cancel."""
    remember(run_id, attempt, SUCCEEDED, f"the handler succeeded (result {str(result)[:200]})", result=result,
             duration_ms=duration_ms, finished_at=ended_at.isoformat(), stopped=stopped)
    log.error("run %s: attempt %s succeeded but cannot be recorded yet; the reconciler records it", run_id, attempt)


def keep_failure(run_id: int, attempt: int, failure: Failure, found: Diagnostics, ended_at,
                 duration_ms: int | None = None) -> None:
    """Keep a failure the database did not take, for the reconciler to record as any failure is."""
    remember(run_id, attempt, failure.code, failure.message, then=FAIL, failure=asdict(failure),
             diagnostics=asdict(found), duration_ms=duration_ms, finished_at=ended_at.isoformat())
    log.error("run %s: attempt %s failed (%s) but cannot be recorded yet; the reconciler records it", run_id,
              attempt, failure.code)


def record_failure(run: Run, kept: dict, now) -> None:
    """Record a kept failure as the worker would have: its diagnostics, then a retry, an undo or a dead letter, and
    a retryable one against its breaker."""
    # Imported here: compensation and failures import the engine's execute, which imports this module.
    from console.services.engine import compensation
    from console.services.engine.failures import begin_compensation, fail, undoes

    failure = Failure(**kept["failure"])
    policy = policies.effective(run.policy_id, run.policy_overrides)[1]
    if kept.get("diagnostics"):
        diagnostics.store(run.id, run.series, run.attempt, Diagnostics(**kept["diagnostics"]), now)
    if undoes(failure) and _undo_after_failure(run, policy) is not None:
        # Its undo runs as a job of its own, as one a worker began after a failed attempt and died during.
        begin_compensation(run, failure, now, duration_ms=kept.get("duration_ms"))
        compensation.enqueue(run.id)
        return
    fail(run, failure, policy, now, duration_ms=kept.get("duration_ms"), finished_at=_ended(kept))
    if failure.retryable:  # the worker's rule: a caller's bad input says nothing of the dependency's health
        _count_toward_breaker(run, policy, False, now)


def _ended(kept: dict):
    return datetime.fromisoformat(kept["finished_at"]) if kept.get("finished_at") else None


def _undo_after_failure(run: Run, policy):
    try:
        return undo_call(handler_kinds.resolve(run.handler), policy.timeout_s)
    except NonRetryableError:
        return None  # the handler is gone: nothing to undo with


def record_success(run: Run, kept: dict, now) -> None:
    """Record a kept success as the worker would have, later than it happened: succeeded (cancelled if its handler
    stopped on a cancel), counted toward its breaker; commit."""
    ended, duration_ms = _ended(kept) or now, kept.get("duration_ms")
    # One kept before the handler's own look was noted counts any cancel asked, as the worker's write did then.
    if kept.get("stopped", run.cancel_requested):
        transitions.move(run, "cancelled", now, reason="cancel_requested", finished_at=ended, result=kept.get("result"),
                         duration_ms=duration_ms, message=RECORDED_LATE_NOTE)
    else:
        transitions.move(run, "succeeded", now, reason=RECORDED_LATE, finished_at=ended, result=kept.get("result"),
                         progress=100, duration_ms=duration_ms,
                         message=FINISHED_ANYWAY if run.cancel_requested else None)
    db.session.commit()
    _count_toward_breaker(run, policies.effective(run.policy_id, run.policy_overrides)[1], True, now)


def _count_toward_breaker(run: Run, policy, ok: bool, now) -> None:
    """Count a late outcome against the run's breaker (its worker released the slot it held); commit any alert."""
    settings = BreakerSettings.from_policy(policy, run.policy_id, run.policy_version)
    if breaker_alerts.count(breakers.key_for(run.handler, run.tenant_id, policy.breaker_scope), ok, now, settings,
                            run_id=run.id):
        db.session.commit()


def park_for_a_person(run: Run, failure: Failure, now, duration_ms: int | None = None) -> None:
    """Move a running run whose outcome is known to dead, with its dead letter, and commit."""
    transitions.move(run, "dead", now, reason=BOOKKEEPING_FAILED, error_code=failure.code, finished_at=now,
                     error_message=failure.message, duration_ms=duration_ms)
    parking.park(run, failure, BOOKKEEPING_FAILED, now)
    db.session.commit()


def remember(run_id: int, attempt: int, code: str, message: str, **kept) -> None:
    """Keep what attempt `attempt` of the run ended with, so no one retries it as a lost worker."""
    get_redis().set(KEY.format(run_id, attempt), json.dumps({"code": code, "message": message, **kept}),
                    ex=KEEP_S)


def recall(run_id: int, attempt: int) -> dict | None:
    """Return the outcome a worker left for this attempt, if any."""
    raw = get_redis().get(KEY.format(run_id, attempt))
    return json.loads(raw) if raw else None


def forget(run_id: int, attempt: int) -> None:
    """Drop an outcome once the run is parked."""
    get_redis().delete(KEY.format(run_id, attempt))
