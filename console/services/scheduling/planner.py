"""Turn firings (cron, event, run-now) into runs: quota, mutex, window and debounce first, in batches."""

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.cron import as_utc, jitter_offset
from console.domain.windows import Window, opening_key
from console.extensions import db
from console.models import Run, RunEvent, Task, Tenant
from console.models.runs import live
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.delivery import outbox
from console.services.engine import queueing, reserved, transitions
from console.services.policies import versions as policies
from console.services.scheduling import bulk_runs

log = logging.getLogger("rebound.planner")
ACTIVE = ("pending", "running", "retry_wait")
# What the rules read of a task: plain columns, no ORM object per task.
_TASK_COLUMNS = (Task.id, Task.tenant_id, Task.policy_id, Task.policy_overrides, Task.mutex_key,
                 Task.concurrency_policy, Task.window, Task.paused, Task.deleted_at, Task.jitter_s, Task.created_at,
                 Task.cron, Task.timezone)


@dataclass(frozen=True)
class Firing:
    task_id: int
    scheduled_for: datetime
    source: str = "cron"  # cron | catchup | event | manual
    params: dict = field(default_factory=dict)
    key: str | None = None
    outside_window: bool = False  # a person asked for it now, though the task's execution window is closed
    schedule: tuple[str, str] | None = None  # (cron, time zone) of the schedule job that fired it


@dataclass
class Outcome:
    task_id: int
    run_id: int | None
    # created | duplicate | skipped | debounced | paused | released (a waiting run started now) | before_task (a
    # cron time before the task was created) | schedule_changed (fired by the schedule an edit just replaced)
    status: str
    reason: str | None = None


def cron_key(task_id: int, scheduled_for: datetime) -> str:
    """Name a cron firing, so two leaders (or a catch-up and a live firing) cannot create two runs."""
    return f"task:{task_id}:{scheduled_for.isoformat()}"


def _insert_ignoring_duplicates(rows: list[dict]) -> dict[str, int]:
    """Insert runs, skipping idempotency keys that exist; return {key: id} of the ones inserted."""
    if not rows:
        return {}
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(db.engine.dialect.name)
    statement = (dialect.insert(Run.__table__).on_conflict_do_nothing() if dialect else insert(Run.__table__))
    result = db.session.connection().execute(
        statement.returning(Run.__table__.c.id, Run.__table__.c.idempotency_key), rows)
    return {key: run_id for run_id, key in result}


class _Batch:
    """What one batch needs to know about tenants, mutexes and waiting counts, read once."""

    def __init__(self, tasks: dict[int, Task], now: datetime):
        tenant_ids = {task.tenant_id for task in tasks.values()}
        self.tenants = {t.id: t for t in db.session.execute(select(Tenant).where(Tenant.id.in_(tenant_ids))).scalars()}
        # During a reservation a tenant's max_queued is at least the queued runs it reserved.
        held = reserved.in_force(now, tenant_ids)
        self.max_queued = {t.id: max(t.max_queued, held.get(t.id, (0, 0))[1]) for t in self.tenants.values()}
        self.waiting = dict(db.session.execute(
            select(Run.tenant_id, func.count()).where(Run.tenant_id.in_(tenant_ids),
                                                      Run.status.in_(("pending", "retry_wait")), live())
            .group_by(Run.tenant_id)).all())
        keys = {task.mutex_key for task in tasks.values() if task.mutex_key}
        # A mutex key is its tenant's: another tenant's task naming the same word neither waits for nor cancels
        # this tenant's runs (a globex operator cancelled acme's payroll with a task of theirs; helper 106).
        self.busy: dict[tuple[int, str], list[Run]] = {}
        if keys:
            for run, key in db.session.execute(select(Run, Task.mutex_key).join(Task, Task.id == Run.task_id).where(
                    Task.mutex_key.in_(keys), Task.tenant_id.in_(tenant_ids), Run.status.in_(ACTIVE), live())):
                self.busy.setdefault((run.tenant_id, key), []).append(run)


def fire(firings: list[Firing], actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list[Outcome]:
    """Create the runs of a batch of firings in one transaction, then queue them in a few round trips."""
    if not firings:
        return []
    now = clock()
    # Quota and mutex are read-then-write across tasks and tenants: one planner decides at a time, on any database.
    locks.hold("planner", now)
    tasks = {t.id: t for t in db.session.execute(select(*_TASK_COLUMNS).where(
        Task.id.in_({f.task_id for f in firings})))}
    batch, versions = _Batch(tasks, now), _Versions()
    outcomes, others, plain, fired_for = [], [], {}, {}
    # Firings at one moment in task id order, as the forecast reads them: APScheduler's threads hand two schedules'
    # firings of one second over in either order, and a forbid task planned before an allow one sharing its mutex
    # ran beside it, where the forecast had said the forbid one is skipped (helper 151).
    order = sorted(range(len(firings)), key=lambda index: (firings[index].scheduled_for, firings[index].task_id))
    for firing in (firings[index] for index in order):
        task = tasks.get(firing.task_id)
        scheduled = firing.source in ("cron", "catchup")
        if task is None or task.deleted_at is not None or (task.paused and scheduled):
            outcomes.append(Outcome(firing.task_id, None, "paused"))
            continue
        if firing.schedule is not None and firing.schedule != (task.cron, task.timezone):
            # Fired by the schedule an edit replaced in the 2 s before the scheduler's sync saw it: the old cron's
            # minute ran after the edit (helper 151). The new schedule's firings since the edit are the catch-up's.
            outcomes.append(Outcome(task.id, None, "schedule_changed"))
            continue
        if scheduled and task.jitter_s and firing.scheduled_for < as_utc(task.created_at):
            # A jittered task fires each cron time up to its jitter later (a plain one fires at the time): one
            # created at 18:16 with an offset of 15 minutes was fired for 18:01, a time before it existed.
            outcomes.append(Outcome(task.id, None, "before_task"))
            continue
        if scheduled:
            fired_for.setdefault(firing.scheduled_for, []).append(task.id)
        joined = _waiting_run_joined(task, batch, now, firing)
        if joined is not None:
            outcomes.append(Outcome(task.id, joined, "duplicate", "window"))
            continue
        status, reason, start_at = _rules(task, batch, actor, now, firing.outside_window)
        outcome = Outcome(task.id, None, "created" if status == "pending" else "skipped", reason)
        outcomes.append(outcome)
        if scheduled and (status, reason, firing.params, firing.key, task.jitter_s) == ("pending", None, {}, None, 0):
            # The common case, a plain pending cron run: the database copies it from the task row.
            plain.setdefault((firing.scheduled_for, firing.source, versions.of(task)), []).append(outcome)
        else:
            others.append((firing, task, status, start_at, outcome))
    deferred = _insert_others(others, versions, actor, now)
    for (scheduled_for, source, version), group in plain.items():
        created = bulk_runs.insert_pending(sorted({o.task_id for o in group}), scheduled_for, source, version, now,
                                           actor.name)
        for outcome in group:
            # A task firing twice for one time in a batch gets one run; the other firing is its duplicate.
            outcome.run_id = created.pop(outcome.task_id, None)
    for outcome in outcomes:
        if outcome.status in ("created", "skipped") and outcome.run_id is None:
            outcome.status = "duplicate"
    # One UPDATE per distinct firing time, not one per task: a burst of 10k shares one minute.
    for scheduled_for, task_ids in fired_for.items():
        db.session.execute(update(Task).where(Task.id.in_(task_ids), or_(
            Task.last_fired_for.is_(None), Task.last_fired_for < scheduled_for)).values(last_fired_for=scheduled_for)
            .execution_options(synchronize_session=False))
    db.session.commit()
    # A window-deferred run (reason "window") is queued for the window's opening, everything else at once.
    _enqueue([(o.run_id, versions.timeout(tasks[o.task_id])) for o in outcomes
              if o.status == "created" and o.reason != "window"],
             [(o.run_id, start_at, versions.timeout(tasks[o.task_id])) for o, start_at in deferred
              if o.run_id is not None])
    # One outcome per firing, answered in the order the firings were given.
    rank = [0] * len(order)
    for position, index in enumerate(order):
        rank[index] = position
    return [outcomes[rank[index]] for index in range(len(firings))]


def _jittered(firing: Firing, task) -> datetime | None:
    """Return when a cron firing of a jittered task is due (the cron time plus its offset), else None."""
    if firing.source not in ("cron", "catchup") or not task.jitter_s:
        return None
    return firing.scheduled_for + jitter_offset(task.id, task.jitter_s)


def _insert_others(others: list[tuple], versions: "_Versions", actor: Actor, now: datetime) -> list[tuple]:
    """Insert the runs that are not plain (params, keys, reasons, manual and event firings) one row each.

    Sets each outcome's run_id (None for a duplicate); returns (outcome, start_at) of the window-deferred ones.
    """
    if not others:
        return []
    # Only these firings need the task's params and handler; a burst of plain cron firings never loads them.
    extra = {row.id: row for row in db.session.execute(select(Task.id, Task.handler, Task.params).where(
        Task.id.in_({task.id for _, task, *_ in others})))}
    rows, deferred = [], []
    for firing, task, status, start_at, outcome in others:
        key = firing.key or (
            # Cron firings outside the window wait for its opening in one run: an every-minute task closed for a
            # weekend queued 2,880 runs that all started at the opening.
            opening_key(task.id, start_at) if start_at is not None and firing.source in ("cron", "catchup")
            else cron_key(task.id, firing.scheduled_for) if firing.source in ("cron", "catchup")
            else f"{firing.source}:{task.id}:{uuid.uuid4().hex}")
        rows.append({
            "tenant_id": task.tenant_id, "task_id": task.id, "handler": extra[task.id].handler,
            "params": {**extra[task.id].params, **firing.params}, "policy_id": task.policy_id,
            "policy_version": versions.of(task), "policy_overrides": task.policy_overrides or {},
            "idempotency_key": key, "status": status, "status_reason": outcome.reason, "attempt": 0, "series": 1,
            "executions": 0, "progress": 0, "cancel_requested": False, "scheduled_for": firing.scheduled_for,
            # Deferred into its window: due when the window opens, so waiting for it is not lateness; a jittered
            # cron firing is due at its own offset past the cron time, when the scheduler fires it.
            "due_at": start_at or _jittered(firing, task), "enqueued_at": now, "created_at": now, "updated_at": now,
            "finished_at": now if status == "cancelled" else None, "trace_id": uuid.uuid4().hex,
            "source": firing.source})
        if start_at is not None:
            deferred.append((outcome, start_at))
    inserted = _insert_ignoring_duplicates(rows)
    _timeline(rows, inserted, actor, now)
    claimed = set()  # a key given twice in a batch makes one run; the second firing is its duplicate
    for (*_, outcome), row in zip(others, rows, strict=True):
        if row["idempotency_key"] in inserted and row["idempotency_key"] not in claimed:
            outcome.run_id = inserted[row["idempotency_key"]]
            claimed.add(row["idempotency_key"])
    return deferred


def _waiting_run_joined(task, batch: "_Batch", now: datetime, firing: Firing) -> int | None:
    """Return the run this firing joins: the task's own run waiting for its window, when only such runs hold its
    mutex key and this firing would wait for the window too (None: the rules decide).

    Forbid cancelled a run at every cron firing of a closed window ("another run with the same mutex key is active"
    of its own waiting run), and replace cancelled the waiting run; a second waiting run would start beside it."""
    if firing.outside_window or not task.window or not task.mutex_key or task.concurrency_policy == "allow":
        return None
    if Window.from_mapping(task.window).contains(now):
        return None
    holders = batch.busy.get((task.tenant_id, task.mutex_key)) or []
    own = [run.id for run in holders if run is not None and run.task_id == task.id and run.status_reason == "window"]
    return min(own) if own and len(own) == len(holders) else None


def _rules(task, batch: "_Batch", actor: Actor, now: datetime,
           outside_window: bool = False) -> tuple[str, str | None, datetime | None]:
    """Apply mutex, window (unless a person asked to run outside it) and quota to one firing; return (status,
    reason, start_at)."""
    status, reason, start_at = "pending", None, None
    window = Window.from_mapping(task.window) if task.window and not outside_window else None
    opening = window.next_opening(now) if window is not None and not window.contains(now) else None
    mutex = (task.tenant_id, task.mutex_key)
    holders = batch.busy.get(mutex) if task.mutex_key else None
    if holders:
        if task.concurrency_policy == "forbid":
            status, reason = "cancelled", "mutex_forbid"
        elif task.concurrency_policy == "replace":
            _replace(batch.busy.pop(mutex), actor, now)
    if status == "pending" and opening:
        reason, start_at = "window", opening
    tenant = batch.tenants[task.tenant_id]
    if status == "pending" and batch.waiting.get(tenant.id, 0) >= batch.max_queued[tenant.id]:
        # A scheduled firing is never dropped for quota: it waits, and someone is told.
        reason = reason or "quota"
        outbox.add("alert", f"quota:{tenant.id}", {
            "rule": "tenant_quota", "tenant_id": tenant.id, "waiting": batch.waiting[tenant.id],
            "max_queued": batch.max_queued[tenant.id], "task_id": task.id, "at": now.isoformat()}, now,
            tenant_id=tenant.id)
    if status == "pending":
        batch.waiting[tenant.id] = batch.waiting.get(tenant.id, 0) + 1
        if task.mutex_key:
            batch.busy.setdefault(mutex, []).append(None)
    return status, reason, start_at


class _Versions:
    """Each policy's version in force and timeout, read once per batch; keyed by (policy, overrides)."""

    def __init__(self):
        self._read: dict[tuple, tuple[int, object]] = {}
        self._of_task: dict[int, tuple[int, object]] = {}

    def _get(self, task) -> tuple[int, object]:
        if task.id not in self._of_task:
            key = (task.policy_id, str(task.policy_overrides or {}))
            if key not in self._read:
                self._read[key] = policies.effective(task.policy_id, task.policy_overrides)
            self._of_task[task.id] = self._read[key]
        return self._of_task[task.id]

    def of(self, task) -> int:
        return self._get(task)[0]

    def timeout(self, task) -> int:
        return self._get(task)[1].timeout_s


def _timeline(rows: list[dict], inserted: dict[str, int], actor: Actor, now: datetime) -> None:
    events = [{"run_id": inserted[row["idempotency_key"]], "at": now, "kind": "submitted", "to_status": "pending",
               "attempt": 0, "series": 1, "actor": actor.name, "reason": row["status_reason"],
               "data": {"source": row["source"], "scheduled_for": row["scheduled_for"].isoformat()}}
              for row in rows if row["idempotency_key"] in inserted]
    skipped = [{"run_id": inserted[row["idempotency_key"]], "at": now, "kind": "cancelled", "from_status": "pending",
                "to_status": "cancelled", "attempt": 0, "series": 1, "actor": actor.name,
                "reason": row["status_reason"], "message": "another run with the same mutex key was active"}
               for row in rows if row["idempotency_key"] in inserted and row["status"] == "cancelled"]
    # Two statements: an executemany needs every row to name the same columns.
    for rows_of_a_kind in (events, skipped):
        if rows_of_a_kind:
            db.session.connection().execute(insert(RunEvent.__table__), rows_of_a_kind)


REPLACED = "a newer firing of a task with concurrency_policy replace took over"


def _replace(active: list[Run | None], actor: Actor, now: datetime) -> None:
    """Cancel the runs a `replace` task supersedes: waiting ones now, running ones at their next check."""
    held = [run for run in active if run is not None]
    for source in ("pending", "retry_wait"):
        waiting = [run.id for run in held if run.status == source]
        transitions.move_many(source, "cancelled", waiting, now, reason="replaced", actor=actor.name, message=REPLACED,
                              finished_at=now, next_retry_at=None)
    for run in held:
        if run.status == "running":
            transitions.request_cancel(run, now, actor=actor.name, kind="replaced", reason="replaced", message=REPLACED)


def _enqueue(now_runs: list[tuple[int, int]], later: list[tuple[int, datetime, int]]) -> None:
    try:
        queueing.enqueue_first_attempts(now_runs)
        for run_id, when, timeout_s in later:
            queueing.enqueue_at(when, run_id, 1, 0, timeout_s)
    except Exception as error:  # noqa: BLE001 - the runs are committed; the reconciler queues them
        log.warning("%d runs committed but not queued (%s); the reconciler will queue them",
                    len(now_runs) + len(later), error)


def debounced_by(task: Task, key: str) -> str | None:
    """Return the key of the event this task's debounce_s holds, when one arrived within it (else remember this one
    and return None): the same key is the same event, sent again while its first send was still being answered."""
    if not task.debounce_s:
        return None
    try:
        redis = get_redis()
        name = f"rebound:debounce:{task.id}"
        if redis.set(name, key, nx=True, ex=task.debounce_s):
            return None
        held = redis.get(name)
    except Exception:  # noqa: BLE001 - without Redis, run every event rather than drop one
        return None
    # Expired between the two calls: another event's, gone; still debounced, as the SET found it.
    return held.decode() if held else ""
