"""Read tasks for the console: filtered, newest first, one keyset page at a time, each with its last run."""

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.orm import aliased, joinedload

from console.domain import cron
from console.domain.windows import Window
from console.extensions import db
from console.models import ConflictTemplate, Run, Task, Tenant

STATUSES = ("active", "paused")
HANDLER_LIST_LIMIT = 500


@dataclass(frozen=True)
class LastRun:
    id: int
    status: str
    status_reason: str | None
    at: datetime  # when it finished, else started, else was created


@dataclass(frozen=True)
class TaskRow:
    task: Task
    next_firing: datetime | None  # None when paused, event-only, or the expression no longer parses
    last_run: LastRun | None
    template: str | None  # the name of the conflict template it references
    starts_at: datetime | None = None  # when the task's window defers that firing: the UTC instant it opens


@dataclass(frozen=True)
class Firing:
    at: datetime  # in the task's time zone
    starts_at: datetime | None  # when a window defers it: the UTC instant the window opens; else None


@lru_cache(maxsize=1024)
def schedule(expression: str, timezone: str) -> cron.CronSchedule:
    """Return the parsed schedule (cached: a page shows the same few expressions many times)."""
    return cron.parse(expression, timezone)


def firing_times(task: Task, now: datetime, count: int = 5) -> list[datetime]:
    """Return when the scheduler next fires the task, in its time zone: each cron time plus the task's jitter offset
    (added in UTC, as the scheduler's trigger does); none without a cron it can read."""
    if not task.cron:
        return []
    offset = cron.jitter_offset(task.id, task.jitter_s)
    after = now - offset
    if offset and getattr(task, "created_at", None) is not None:
        after = max(after, cron.as_utc(task.created_at))  # the planner makes no run of a cron time before the task
    try:
        moments = schedule(task.cron, task.timezone).next_n(after, count)
    except (cron.CronError, ValueError):
        return []
    return [(cron.as_utc(moment) + offset).astimezone(moment.tzinfo) for moment in moments]


def next_firing(task: Task, now: datetime) -> Firing | None:
    """Return the task's next firing (with when its window lets it start), or None if it is paused or has no cron."""
    if task.paused:
        return None
    return next(iter(next_firings(task, now, 1)), None)


def next_firings(task: Task, now: datetime, count: int = 5) -> list[Firing]:
    """Return the next firings (firing_times), each with when its window lets it start."""
    moments = firing_times(task, now, count)
    window = Window.from_mapping(task.window) if task.window else None
    firings = []
    for moment in moments:
        opening = window.next_opening(moment) if window else None
        firings.append(Firing(moment, opening if opening is not None and opening != cron.as_utc(moment) else None))
    return firings


def window_opens(task: Task, now: datetime) -> datetime | None:
    """Return when the task's execution window next opens if it is closed now (a run started now waits for it)."""
    if not task.window:
        return None
    window = Window.from_mapping(task.window)
    return None if window.contains(now) else window.next_opening(now)


def listeners(task: Task) -> list[Task]:
    """The tasks of a task's tenant that an event of its type fires (paused ones too, to say they are skipped)."""
    if not task.event:
        return []
    return list(db.session.execute(select(Task).where(
        Task.tenant_id == task.tenant_id, Task.event == task.event, Task.deleted_at.is_(None))
        .order_by(Task.id)).scalars())


def page(*, scope: int | None = None, tenant: str = "", handler: str = "", status: str = "", text: str = "",
         before: int | None = None, now: datetime, limit: int = 50) -> tuple[list[TaskRow], int | None]:
    """Return one page of live tasks (newest first) and the id to continue from (None on the last page)."""
    query = (select(Task, ConflictTemplate.name).where(Task.deleted_at.is_(None))
             .outerjoin(ConflictTemplate, ConflictTemplate.id == Task.template_id)
             .options(joinedload(Task.tenant), joinedload(Task.policy))
             .order_by(Task.id.desc()).limit(limit + 1))
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    if tenant:
        query = query.where(Task.tenant_id == select(Tenant.id).where(Tenant.name == tenant).scalar_subquery())
    if handler:
        query = query.where(Task.handler == handler)
    if status in STATUSES:
        query = query.where(Task.paused.is_(status == "paused"))
    if text:
        query = query.where(Task.name.icontains(text, autoescape=True))
    if before:
        query = query.where(Task.id < before)
    found = db.session.execute(query).unique().all()
    more = len(found) > limit
    found = found[:limit]
    last = last_runs([task.id for task, _ in found])
    rows = []
    for task, template in found:
        firing = next_firing(task, now)
        rows.append(TaskRow(task, cron.as_utc(firing.at) if firing else None, last.get(task.id), template,
                            firing.starts_at if firing else None))
    return rows, found[-1][0].id if more and found else None


def last_runs(task_ids: list[int]) -> dict[int, LastRun]:
    """Return the newest run of each task, in one query (one index probe per task, whatever its history)."""
    if not task_ids:
        return {}
    # Per task, the newest id is one backwards step on ix_runs_task_id_id; then each run is a primary-key lookup.
    each = aliased(Run)
    newest = (select(each.id).where(each.task_id == Task.id).order_by(each.id.desc()).limit(1)
              .correlate(Task).scalar_subquery())
    query = (select(Run.task_id, Run.id, Run.status, Run.status_reason, Run.created_at, Run.started_at,
                    Run.finished_at)
             .where(Run.id.in_(select(newest).where(Task.id.in_(task_ids)))))
    return {row.task_id: LastRun(row.id, row.status, row.status_reason,
                                 row.finished_at or row.started_at or row.created_at)
            for row in db.session.execute(query)}


def handler_names(scope: int | None = None) -> list[str]:
    """Return the handlers tasks use (for the filter), by name."""
    query = select(Task.handler).distinct().order_by(Task.handler).limit(HANDLER_LIST_LIMIT)
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    return list(db.session.execute(query).scalars())


@dataclass(frozen=True)
class CronPreview:
    expression: str
    timezone: str
    description: str | None = None
    firings: tuple[datetime, ...] = ()  # in `timezone`
    error: str | None = None
    field: str | None = None  # "cron" or "timezone" when error is set


def preview(expression: str, timezone: str, now: datetime, count: int = 5) -> CronPreview:
    """Describe a cron expression in words with its next firings, or say what is wrong with it."""
    expression, timezone = (expression or "").strip(), (timezone or "").strip() or "UTC"
    if not expression:
        return CronPreview(expression, timezone)
    try:
        firings = schedule(expression, timezone).next_n(now, count)
    except cron.CronError as error:
        return CronPreview(expression, timezone, error=error.message, field=error.field)
    return CronPreview(expression, timezone, cron.describe(expression), tuple(firings))


def can_see(task_id: int, scope: int | None) -> bool:
    """Tell whether a task of this id exists for a person limited to `scope` (deleted ones too: their runs and
    letters remain); another tenant's task reads as none, so its existence is not told."""
    query = select(Task.id).where(Task.id == task_id)
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    return db.session.execute(query).first() is not None
