"""What the newer alert rules measure: lock contention, progress write-back failures, timeout anomalies."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, select

from console import metrics
from console.extensions import db
from console.models import Run, RunEvent

# A rate over fewer events than this is noise (one failure of two attempts is not an incident).
MIN_EVENTS = 10
# The locks whose contention suggests scaling out: the planner's (every firing takes it) and the leader's.
CONTENDED_LOCKS = ("planner", "leader")
# A handler's usual timeout rate is read over this long before the window.
TIMEOUT_BASELINE_S = 7 * 86_400
# Fewer timeouts than this in the window is never an anomaly, whatever the usual rate.
MIN_TIMEOUTS = 5
FAILED_ATTEMPT = ("retry_wait", "dead", "failed")


@dataclass(frozen=True)
class Measure:
    value: float
    detail: str  # what was counted, in words: "4 of 20 attempts failed"
    enough: bool = True  # False: too few events for a rate to mean anything


def lock_contention(now: datetime, window_s: int | None) -> Measure:
    """Return the worst share of lock requests that found the lock taken, of the locks with enough requests."""
    fields = {(lock, counter): counter.window_field(lock=lock) for lock in CONTENDED_LOCKS
              for counter in (metrics.LOCK_ATTEMPTS, metrics.LOCK_CONTENDED)}
    totals = metrics.window_totals(list(fields.values()), now, window_s)
    worst, parts, enough = 0.0, [], False
    for lock in CONTENDED_LOCKS:
        tried = totals[fields[lock, metrics.LOCK_ATTEMPTS]]
        taken = totals[fields[lock, metrics.LOCK_CONTENDED]]
        parts.append(f"{lock} lock {taken} of {tried}")
        if tried >= MIN_EVENTS:
            enough, worst = True, max(worst, taken / tried)
    return Measure(worst, "requests that found the lock taken: " + ", ".join(parts), enough)


def progress_write_failure_rate(now: datetime, window_s: int | None) -> Measure:
    """Return the share of progress and heartbeat write-backs that failed in the window."""
    names = [metrics.PROGRESS_WRITE_FAILURES.name, metrics.PROGRESS_WRITES.name]
    totals = metrics.window_totals(names, now, window_s)
    failed, tried = totals[names[0]], totals[names[1]]
    return Measure(failed / tried if tried else 0.0, f"{failed} of {tried} progress and heartbeat writes failed",
                   tried >= MIN_EVENTS)


def timeout_anomaly(now: datetime, window_s: int | None) -> Measure:
    """Return the worst handler's timeouts in the window as a multiple of its usual count for that long."""
    since = now - timedelta(seconds=window_s or 0)
    recent = func.sum(case((RunEvent.at >= since, 1), else_=0))
    rows = db.session.execute(
        select(Run.handler, recent, func.count()).join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.kind.in_(FAILED_ATTEMPT), RunEvent.at >= since - timedelta(seconds=TIMEOUT_BASELINE_S),
               RunEvent.at <= now, RunEvent.from_status == "running", RunEvent.error_code == "timeout")
        .group_by(Run.handler)).all()
    worst = (0.0, None, 0, 0.0)
    for handler, in_window, total in rows:
        in_window = int(in_window or 0)
        if in_window < MIN_TIMEOUTS:
            continue
        # The usual count for a window this long; at least one, so a handler that never timed out needs
        # threshold-many timeouts (and MIN_TIMEOUTS) rather than firing on its first.
        usual = max((total - in_window) * (window_s or 0) / TIMEOUT_BASELINE_S, 1.0)
        if in_window / usual > worst[0]:
            worst = (in_window / usual, handler, in_window, usual)
    multiple, handler, count, usual = worst
    if handler is None:
        return Measure(0.0, f"no handler timed out {MIN_TIMEOUTS} times or more")
    return Measure(multiple, f"{handler} timed out {count} times, {multiple:.1f}× its usual {usual:.1f} "
                             f"(over the 7 days before)")
