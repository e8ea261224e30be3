"""Prometheus metrics, counted where things happen and kept in Redis, so every process adds to one total.

Counters and the histogram count when the database transaction that caused them commits (a rolled-back
change counts nothing) and are added to Redis, so the web, every worker on every host and the scheduler
add to the same totals and /metrics in any web process serves them all. Long-running processes (web,
worker, scheduler: see start_batching) send them in one round trip every REBOUND_METRICS_FLUSH_S instead
of one per commit; everything else writes at commit. Gauges are read at scrape time from the database and
RQ (console/services/system/observability.py). Labels are bounded: tenant and handler at most, never run ids or
messages. A tenant is stored by id and named at scrape time.
"""

import atexit
import collections
import logging
import os
import threading
import time
from datetime import datetime

from sqlalchemy import event
from sqlalchemy.orm import Session

from console.domain.statuses import INTERRUPTED
from console.extensions import db
from console.redis_conn import get_redis

log = logging.getLogger("rebound.metrics")
PREFIX = "rebound:metrics:"
WINDOW_PREFIX = "rebound:metrics:window:"
# Per-minute buckets of the windowed counters, for the alert rules (the longest window is a day).
WINDOW_TTL_S = 26 * 3600
SEP = "\x1f"
PENDING = "rebound.metrics"
TENANT = "tenant"

REGISTRY: dict[str, "Counter | Histogram"] = {}


class Counter:
    """A counter whose increments reach Redis when the caller's transaction commits."""

    kind = "counter"

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = (), *, window: bool = False,
                 window_by_labels: bool = False):
        self.name, self.documentation, self.labels, self.window = name, documentation, labels, window
        # Per-minute buckets keep one field per label set (bounded labels only), not just the total.
        self.window_by_labels = window_by_labels
        REGISTRY[name] = self

    def field(self, labels: dict) -> str:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {tuple(labels)}")
        return SEP.join(str(labels[name]).replace(SEP, " ") for name in self.labels)

    def inc(self, amount: int = 1, *, at: datetime | None = None, **labels) -> None:
        """Count when the current database transaction commits (nothing if it rolls back)."""
        if amount:
            _pending().append((self, self.field(labels), amount, at))

    def inc_now(self, amount: int = 1, *, at: datetime | None = None, **labels) -> None:
        """Count without waiting for a commit: for events outside any transaction (a failed write, a lost beat)."""
        _record([(self, self.field(labels), amount, at)])

    def window_field(self, **labels) -> str:
        """Name this series in the per-minute buckets, for window_totals()."""
        return f"{self.name}{SEP}{self.field(labels)}" if self.window_by_labels else self.name


# Milliseconds a run waited in its queue before a worker claimed it.
WAIT_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000, 900_000)


class Histogram(Counter):
    """A histogram stored as per-bucket counts, a sum and a count; cumulated at scrape time."""

    kind = "histogram"

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = (),
                 buckets: tuple[float, ...] = WAIT_BUCKETS_MS):
        super().__init__(name, documentation, labels)
        self.buckets = buckets

    def observe(self, value: float, **labels) -> None:
        """Record one observation when the current database transaction commits."""
        _pending().append((self, self.field(labels), float(value), None))


def _pending() -> list:
    return db.session().info.setdefault(PENDING, [])


def _bucket(histogram: Histogram, value: float) -> str:
    for index, bound in enumerate(histogram.buckets):
        if value <= bound:
            return str(index)
    return "inf"


_last_warning = 0.0


class _Batch:
    """Counts waiting for the next flush in this process, by Redis client (one per app)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries: dict[int, tuple[object, list]] = {}
        self.interval_s = 0.0  # 0: write at every commit
        self.thread: threading.Thread | None = None


_batch = _Batch()


def start_batching(interval_s: float) -> None:
    """Send this process's counts every interval_s seconds instead of at each commit (0 turns batching off)."""
    _batch.interval_s = max(0.0, float(interval_s))
    # Registered now, after the embedded Redis's own exit handler, so this one runs first.
    atexit.register(flush)


def _record(entries: list) -> None:
    client = get_redis()
    if not _batch.interval_s:
        _write(client, entries)
        return
    with _batch.lock:
        _batch.entries.setdefault(id(client), (client, []))[1].extend(entries)
        if _batch.thread is None or not _batch.thread.is_alive():
            _batch.thread = threading.Thread(target=_flush_every, name="metrics-flush", daemon=True)
            _batch.thread.start()


def _flush_every() -> None:
    while True:
        time.sleep(_batch.interval_s or 1.0)
        flush()


def flush() -> None:
    """Send every count this process holds now (before a scrape, an evaluation, or the process's exit)."""
    with _batch.lock:
        waiting, _batch.entries = list(_batch.entries.values()), {}
    for client, entries in waiting:
        _write(client, entries)


def _forget_after_fork() -> None:
    # A forked child (RQ's work horse) must not send its parent's counts a second time.
    _batch.lock, _batch.entries, _batch.thread = threading.Lock(), {}, None


os.register_at_fork(after_in_child=_forget_after_fork)


def _write(client, entries: list) -> None:
    """Add the entries to Redis in one round trip; a Redis outage loses them, never the caller's work."""
    global _last_warning
    # A batch repeats the same few series: add them up first, one command per series.
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    sums: dict[tuple[str, str], float] = {}
    for metric, field, amount, at in entries:
        key = PREFIX + metric.name
        if isinstance(metric, Histogram):
            counts[key, f"{field}{SEP}b{_bucket(metric, amount)}"] += 1
            counts[key, f"{field}{SEP}count"] += 1
            sums[key, f"{field}{SEP}sum"] = sums.get((key, f"{field}{SEP}sum"), 0.0) + amount
            continue
        counts[key, field] += int(amount)
        if metric.window and at is not None:
            name = f"{metric.name}{SEP}{field}" if metric.window_by_labels else metric.name
            counts[f"{WINDOW_PREFIX}{int(at.timestamp() // 60)}", name] += int(amount)
    try:
        with client.pipeline(transaction=False) as pipe:
            for (key, field), amount in counts.items():
                pipe.hincrby(key, field, amount)
                if key.startswith(WINDOW_PREFIX):
                    pipe.expire(key, WINDOW_TTL_S)
            for (key, field), amount in sums.items():
                pipe.hincrbyfloat(key, field, amount)
            pipe.execute()
    except Exception as error:  # noqa: BLE001 - metrics must never break the work they count
        if time.monotonic() - _last_warning > 60:
            _last_warning = time.monotonic()
            log.warning("metrics not recorded: Redis is unreachable (%s)", error)


def init_app(app) -> None:
    """Count at commit: send what a transaction recorded once it commits, drop it on a rollback."""
    if not event.contains(Session, "after_commit", _after_commit):
        event.listen(Session, "after_commit", _after_commit)
        event.listen(Session, "after_rollback", _after_rollback)


def _after_commit(session) -> None:
    entries = session.info.pop(PENDING, None)
    if entries:
        _record(entries)


def _after_rollback(session) -> None:
    session.info.pop(PENDING, None)


def snapshot() -> dict[str, dict[str, float]]:
    """Return every counter's and histogram's stored fields (this process's first), in one round trip."""
    flush()
    with get_redis().pipeline(transaction=False) as pipe:
        for name in REGISTRY:
            pipe.hgetall(PREFIX + name)
        rows = pipe.execute()
    return {name: {k.decode(): float(v) for k, v in row.items()} for name, row in zip(REGISTRY, rows, strict=True)}


def window_totals(names: list[str], now: datetime, window_s: int) -> dict[str, int]:
    """Sum windowed counters over the minutes that overlap the last window_s seconds before now."""
    flush()
    last = int(now.timestamp() // 60)
    first = int((now.timestamp() - window_s) // 60) + 1
    with get_redis().pipeline(transaction=False) as pipe:
        for minute in range(first, last + 1):
            pipe.hmget(f"{WINDOW_PREFIX}{minute}", names)
        rows = pipe.execute()
    return {name: sum(int(row[i] or 0) for row in rows) for i, name in enumerate(names)}


# Seed 000: retries and the dead-letter queue.
RETRY_SCHEDULED = Counter("task_retry_scheduled_total", "Failed attempts scheduled for another attempt.",
                          (TENANT, "handler"))
RETRY_SUCCESS = Counter("task_retry_success_total", "Runs that succeeded after at least one retry.",
                        (TENANT, "handler"))
RETRY_FAILURE = Counter("task_retry_failure_total", "Retry attempts (attempt 2 or later) that failed.",
                        (TENANT, "handler"))
RETRY_DLQ = Counter("task_retry_dlq_total", "Runs parked as dead letters, by reason.", (TENANT, "handler", "reason"))
RETRY_ESCALATED = Counter("task_retry_escalated_total",
                          "Failures handed to a person: manual intervention, a severity-2 compensation alert, "
                          "three SLA breaches in a row.", (TENANT, "reason"))
# Seed 001: scheduling.
SCHEDULER_MISSED = Counter("task_scheduler_missed_total",
                           "Cron firings missed beyond their grace while no scheduler led.", (TENANT,), window=True)
EXECUTION_SUCCESS = Counter("task_execution_success_total", "Runs of scheduled tasks that succeeded.",
                            (TENANT, "handler"))
EXECUTION_RETRY = Counter("task_execution_retry_total", "Retry attempts of scheduled tasks' runs started.",
                          (TENANT, "handler"))
SLA_BREACHES = Counter("task_sla_breach_total", "SLA breaches recorded (late start or missed deadline).",
                       (TENANT, "kind"))
# Seed 003: the worker.
QUEUE_WAIT = Histogram("worker_queue_wait_ms",
                       "Milliseconds from enqueueing (or a retry falling due) to a worker claiming the run.", (TENANT,))
WORKER_SUCCESS = Counter("worker_task_success_total", "Attempts that succeeded.", (TENANT, "handler"), window=True)
WORKER_RETRY = Counter("worker_task_retry_total", "Attempts that failed and were scheduled to retry.",
                       (TENANT, "handler"))
WORKER_TIMEOUT = Counter("worker_task_timeout_total", "Attempts stopped at their timeout.", (TENANT, "handler"))
WORKER_FAILURE = Counter("worker_task_failure_total", "Attempts that failed, whatever came next.",
                         (TENANT, "handler"), window=True)
PROGRESS_WRITE_FAILURES = Counter("worker_progress_write_failure_total",
                                  "Progress or heartbeat write-backs that failed.", ("kind",), window=True)
PROGRESS_WRITES = Counter("worker_progress_write_total", "Progress or heartbeat write-backs attempted.", ("kind",),
                          window=True)
# Seed 001 again: how often a lock is found taken (console/db/locks.py, console/services/system/leader.py).
LOCK_ATTEMPTS = Counter("scheduler_lock_attempts_total",
                        "Requests for a lock: the planner's (and other named) locks, the leader's renewals.",
                        ("lock",), window=True, window_by_labels=True)
LOCK_CONTENDED = Counter("scheduler_lock_contended_total",
                         "Lock requests that found the lock taken by another process and had to wait (or lost it).",
                         ("lock",), window=True, window_by_labels=True)

FAILED_ATTEMPT = frozenset({"retry_wait", "dead", "failed"})


def transition(run, source: str, target: str, now: datetime, reason: str | None, error_code: str | None,
               values: dict) -> None:
    """Count what a run's status change means; called by transitions.move() before the run is updated."""
    attempt = values.get("attempt", run.attempt)
    tenant, handler = run.tenant_id, run.handler
    if target == "running":
        due = run.next_retry_at or run.enqueued_at
        if due is not None:
            QUEUE_WAIT.observe(max(0.0, (now - due).total_seconds() * 1000), tenant=tenant)
        if attempt > 1 and run.task_id is not None:
            EXECUTION_RETRY.inc(tenant=tenant, handler=handler)
    elif target == "succeeded":
        WORKER_SUCCESS.inc(tenant=tenant, handler=handler, at=now)
        if run.task_id is not None:
            EXECUTION_SUCCESS.inc(tenant=tenant, handler=handler)
        if attempt > 1:
            RETRY_SUCCESS.inc(tenant=tenant, handler=handler)
    if source == "running" and target in FAILED_ATTEMPT and reason != INTERRUPTED:
        WORKER_FAILURE.inc(tenant=tenant, handler=handler, at=now)
        if attempt > 1:
            RETRY_FAILURE.inc(tenant=tenant, handler=handler)
        if error_code == "timeout":
            WORKER_TIMEOUT.inc(tenant=tenant, handler=handler)
        if target == "retry_wait":
            RETRY_SCHEDULED.inc(tenant=tenant, handler=handler)
            WORKER_RETRY.inc(tenant=tenant, handler=handler)
    if target == "dead":
        RETRY_DLQ.inc(tenant=tenant, handler=handler, reason=reason or "unknown")
        if reason == "manual_intervention":
            RETRY_ESCALATED.inc(tenant=tenant, reason="manual_intervention")
