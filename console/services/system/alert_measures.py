"""What each alert rule measures, in words and a number: counted from the database or the metrics' buckets."""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from rq import Queue, Worker
from rq.job import Job
from sqlalchemy import case, func, select

from console import metrics
from console.domain.figures import duration
from console.domain.words import agree, plural
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, RunEvent
from console.redis_conn import get_redis
from console.services.engine import queueing
from console.services.engine.queueing import QUEUES
from console.services.system import observability

log = logging.getLogger("rebound.alerts")

# Late start for the scheduling rule, as the issue defines it.
LATE_START_S = 60
# A rate over fewer events than this is noise (one failure of two attempts is not an incident).
MIN_EVENTS = 10
# The locks whose contention suggests scaling out: the planner's (every firing takes it) and the leader's.
CONTENDED_LOCKS = ("planner", "leader")
# A handler's usual timeout rate is read over this long before the window.
TIMEOUT_BASELINE_S = 7 * 86_400
# Fewer timeouts than this in the window is never an anomaly, whatever the usual rate.
MIN_TIMEOUTS = 5
FAILED_ATTEMPT = ("retry_wait", "dead", "failed")
# A queued job whose run is in one of these is still wanted; others ended meanwhile (a worker drops their job).
WAITING = ("pending", "retry_wait")
# Jobs read from a queue's head a round trip at a time, at most QUEUE_SCAN_MAX in all: jobs of runs that ended (a
# mass cancel) ahead of a wanted one must not hide it, and a queue of a million stale jobs must not cost a million.
QUEUE_SCAN, QUEUE_SCAN_MAX = 200, 2000


@dataclass(frozen=True)
class Measure:
    value: float
    detail: str  # what was counted, in words: "4 of 20 attempts failed"
    enough: bool = True  # False: too few events for a rate to mean anything


def _since(now: datetime, window_s: int | None) -> datetime:
    return now - timedelta(seconds=window_s or 0)


def _prefix(column, prefix: str):
    # A range instead of LIKE, so the dedup_key index serves it on SQLite and PostgreSQL alike.
    return (column >= prefix) & (column < prefix[:-1] + chr(ord(prefix[-1]) + 1))


def _outbox_occurrences(prefix: str, since: datetime) -> int:
    return db.session.execute(select(func.coalesce(func.sum(OutboxMessage.occurrences), 0)).where(
        _prefix(OutboxMessage.dedup_key, prefix), OutboxMessage.created_at >= since)).scalar_one()


def retry_failure_rate(now: datetime, window_s: int | None) -> Measure:
    totals = metrics.window_totals([metrics.WORKER_FAILURE.name, metrics.WORKER_SUCCESS.name], now, window_s)
    failed, ended = totals[metrics.WORKER_FAILURE.name], sum(totals.values())
    return Measure(failed / ended if ended else 0.0, f"{failed} of {plural(ended, 'attempt')} failed",
                   ended >= MIN_EVENTS)


def dlq_length(now: datetime, window_s: int | None) -> Measure:
    count = db.session.execute(select(func.count()).select_from(DeadLetter).where(
        DeadLetter.status == "open")).scalar_one()
    return Measure(count, f"{plural(count, 'dead letter')} {agree(count, 'is', 'are')} open")


def queue_wait(now: datetime, window_s: int | None) -> Measure:
    """How long the oldest job still wanted in a queue the workers serve has waited: workers down, stuck or too few."""
    connection = get_redis()
    waits = []
    for name in QUEUES:
        if (waited := _oldest_wanted(Queue(name, connection=connection), now)) is not None:
            waits.append((name, waited))
    workers = plural(Worker.count(connection=connection), "worker")
    if not waits:
        return Measure(0, f"no job waits in a queue; {workers} registered")
    name, waited = max(waits, key=lambda wait: wait[1])
    return Measure(int(waited), f"the oldest job in {name} has waited {duration(waited)}; {workers} registered")


def _oldest_wanted(queue: Queue, now: datetime) -> float | None:
    """Return how long the queue's oldest job whose run still waits has waited (a job of a run that ended since
    is left for a worker to drop), or None; read from the queue's head, QUEUE_SCAN jobs at a time."""
    for start in range(0, QUEUE_SCAN_MAX, QUEUE_SCAN):
        ids = queue.get_job_ids(start, QUEUE_SCAN)  # offset, length
        runs = {job_id: parsed[0] for job_id in ids if (parsed := queueing.parse_job_id(job_id))}
        waiting = set(db.session.execute(select(Run.id).where(Run.id.in_(set(runs.values())),
                                                              Run.status.in_(WAITING))).scalars()) if runs else set()
        wanted = [job_id for job_id in ids if job_id not in runs or runs[job_id] in waiting]
        for job in Job.fetch_many(wanted[:1], connection=queue.connection):
            if job is not None and job.enqueued_at is not None:
                return max(0.0, (now - job.enqueued_at.replace(tzinfo=UTC)).total_seconds())
        if len(ids) < QUEUE_SCAN:
            break
    return None


def scheduling_failure_rate(now: datetime, window_s: int | None) -> Measure:
    late, due = observability.start_punctuality(now, window_s, limit_s=LATE_START_S)
    try:
        missed = metrics.window_totals([metrics.SCHEDULER_MISSED.name], now, window_s)[metrics.SCHEDULER_MISSED.name]
    except Exception as error:  # noqa: BLE001 - the runs in the database still tell most of the story
        log.warning("alert rules: missed firings unknown, Redis unreachable (%s)", error)
        missed = 0
    failed, total = late + missed, due + missed
    return Measure(failed / total if total else 0.0,
                   f"{late} of {plural(due, 'due run')} started over {LATE_START_S} s late and "
                   f"{plural(missed, 'firing')} {agree(missed, 'was', 'were')} missed",
                   total >= MIN_EVENTS)


def sla_escalations(now: datetime, window_s: int | None) -> Measure:
    """Count the tasks escalated in the window: one breaching on and on escalates every third run, still one task."""
    count = db.session.execute(select(func.count(func.distinct(OutboxMessage.payload["task_id"].as_integer())))
                               .where(_prefix(OutboxMessage.dedup_key, "sla-escalation:"),
                                      OutboxMessage.created_at >= _since(now, window_s))).scalar_one()
    return Measure(count, f"{plural(count, 'task')} breached {agree(count, 'its', 'their')} SLA three runs in a row")


def queue_overflow(now: datetime, window_s: int | None) -> Measure:
    count = _outbox_occurrences("queue_overflow:", _since(now, window_s))
    return Measure(count, f"{plural(count, 'submission')} {agree(count, 'was', 'were')} refused because a queue was "
                          "full")


def retry_limit_reached(now: datetime, window_s: int | None) -> Measure:
    count = db.session.execute(select(func.count()).select_from(DeadLetter).where(
        DeadLetter.created_at >= _since(now, window_s), DeadLetter.reason == "exhausted",
        DeadLetter.status == "open")).scalar_one()
    return Measure(count, f"{plural(count, 'run')} used up {agree(count, 'its', 'their')} retries and "
                          f"{agree(count, 'waits', 'wait')} in the dead-letter queue")


def workorder_failed(now: datetime, window_s: int | None) -> Measure:
    """Count the work-order requests failed for good, naming the last one and why (this rule is their page)."""
    failed = (OutboxMessage.status == "failed", OutboxMessage.kind == "workorder")
    count = db.session.execute(select(func.count()).select_from(OutboxMessage).where(*failed)).scalar_one()
    detail = f"{plural(count, 'work order')} could not be created in the work-order system"
    last = db.session.execute(select(OutboxMessage.payload["work_order_id"].as_integer(), OutboxMessage.last_error)
                              .where(*failed).order_by(OutboxMessage.id.desc()).limit(1)).first()
    if last is not None:
        error = (last[1] or "no error recorded").removeprefix("workorder: ")  # its one channel, said already
        detail += f"; the last, work order #{last[0]}: {error[:120]}"
    return Measure(count, detail)


def breaker_opened(now: datetime, window_s: int | None) -> Measure:
    count = _outbox_occurrences("breaker:", _since(now, window_s))
    return Measure(count, f"circuit breakers opened {plural(count, 'time')}")


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
    return Measure(failed / tried if tried else 0.0,
                   f"{failed} of {plural(tried, 'progress and heartbeat write')} failed",
                   tried >= MIN_EVENTS)


def timeout_anomaly(now: datetime, window_s: int | None) -> Measure:
    """Return the worst handler's timeouts in the window as a multiple of its usual count for that long."""
    since = now - timedelta(seconds=window_s or 0)
    recent = func.sum(case((RunEvent.at >= since, 1), else_=0))
    rows = db.session.execute(
        select(Run.handler, recent, func.count()).join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.kind.in_(FAILED_ATTEMPT), RunEvent.at >= since - timedelta(seconds=TIMEOUT_BASELINE_S),
               RunEvent.at <= now, RunEvent.from_status == "running", RunEvent.error_code == "timeout")
        .group_by(Run.handler).order_by(Run.handler)).all()  # a tie names the same handler on every database
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
