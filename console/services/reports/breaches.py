"""SLA breaches as people read them: a filtered list, and the marks on a run's and a task's page."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select

from console.domain import deleted_names
from console.extensions import db
from console.models import Run, SlaBreach, Task, Tenant
from console.services.errors import InvalidInput
from console.services.inputs import is_digits
from console.services.scheduling import sla

PAGE_SIZE = 50
EXPORT_CAP = 50_000
KINDS = {"start_delay": "late start", "deadline": "missed deadline"}


@dataclass(frozen=True)
class Filters:
    start: datetime
    end: datetime
    tenant_id: int | None = None
    task_id: int | None = None
    kind: str = ""  # "" | start_delay | deadline
    hour: int | None = None  # the hour of day (UTC) the runs started in: a heat-map cell's column


@dataclass(frozen=True)
class Row:
    breach: SlaBreach
    task: str
    tenant: str
    run_status: str
    due: datetime | None  # when the run was due to start (its window's opening, if deferred into one)
    # The task's limit of this kind (max start delay, or deadline), as it stands now: due + limit + late by add up.
    limit_s: int | None = None

    @property
    def kind_text(self) -> str:
        return KINDS.get(self.breach.kind, self.breach.kind)

    @property
    def limit_at(self) -> datetime | None:
        """When the run had to start (a late start) or to succeed (a missed deadline) by."""
        return self.due + timedelta(seconds=self.limit_s) if self.due and self.limit_s is not None else None


def _query(filters: Filters):
    query = (select(SlaBreach, Task.name, Tenant.name, Run.status, Run.scheduled_for, Run.due_at, Task.sla,
                    Task.policy_id, Task.policy_overrides)
             .join(Task, Task.id == SlaBreach.task_id).join(Tenant, Tenant.id == SlaBreach.tenant_id)
             .join(Run, Run.id == SlaBreach.run_id)
             .where(SlaBreach.detected_at >= filters.start, SlaBreach.detected_at < filters.end))
    if filters.tenant_id is not None:
        query = query.where(SlaBreach.tenant_id == filters.tenant_id)
    if filters.task_id is not None:
        query = query.where(SlaBreach.task_id == filters.task_id)
    if filters.kind in KINDS:
        query = query.where(SlaBreach.kind == filters.kind)
    if filters.hour is not None:
        query = query.where(func.extract("hour", Run.started_at) == filters.hour)
    return query


def kind_of(text: str | None) -> str:
    """Read the `kind` filter: a breach kind, or "" for both; anything else is a 422 naming the kinds."""
    text = (text or "").strip()
    if text and text not in KINDS:
        raise InvalidInput(f"kind is {' or '.join(KINDS)} (or leave it out for both), not {text[:40]!r}", "kind")
    return text


def hour_of_day(text: str | None) -> int | None:
    """Read the `hour` filter (a heat-map cell's column); None when it is not given."""
    text = (text or "").strip()
    if not text:
        return None
    if not (is_digits(text) and len(text) <= 2 and int(text) < 24):
        raise InvalidInput(f"hour is an hour of day from 0 to 23 (UTC), not {text[:20]!r}", "hour")
    return int(text)


def _rows(result) -> list[Row]:
    limits: dict[int, tuple[int | None, int | None]] = {}  # by task: its policy is read once a page
    rows = []
    for breach, task, tenant, status, scheduled_for, due_at, task_sla, policy_id, overrides in result:
        if breach.task_id not in limits:
            limits[breach.task_id] = sla.limits_of(task_sla, policy_id, overrides)
        limit = limits[breach.task_id][0 if breach.kind == "start_delay" else 1]
        rows.append(Row(breach, deleted_names.shown(task), tenant, status, due_at or scheduled_for, limit))
    return rows


def page(filters: Filters, before: int | None = None, limit: int = PAGE_SIZE) -> tuple[list[Row], int | None]:
    """Return one page of breaches, newest first (keyset on id), and the id to page on from."""
    query = _query(filters)
    if before is not None:
        query = query.where(SlaBreach.id < before)
    rows = _rows(db.session.execute(query.order_by(SlaBreach.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, rows[-1].breach.id if more and rows else None


def count(filters: Filters) -> int:
    """Return how many breaches the filters select, all pages together."""
    return db.session.execute(select(func.count()).select_from(_query(filters).subquery())).scalar_one()


def every(filters: Filters) -> list[Row]:
    """Return the breaches for an export, newest first (at most EXPORT_CAP)."""
    return _rows(db.session.execute(_query(filters).order_by(SlaBreach.id.desc()).limit(EXPORT_CAP)))


def of_run(run_id: int) -> list[SlaBreach]:
    """Return the run's breaches: a late start, a missed deadline, or both."""
    return db.session.execute(select(SlaBreach).where(SlaBreach.run_id == run_id).order_by(SlaBreach.kind)
                              ).scalars().all()


def of_runs(run_ids: list[int]) -> dict[int, list[SlaBreach]]:
    """Return the breaches of these runs, by run (for lists of runs)."""
    found: dict[int, list[SlaBreach]] = {}
    if run_ids:
        for breach in db.session.execute(select(SlaBreach).where(SlaBreach.run_id.in_(run_ids))).scalars():
            found.setdefault(breach.run_id, []).append(breach)
    return found


@dataclass(frozen=True)
class TaskBreaches:
    late_starts: int
    missed_deadlines: int
    window: timedelta
    latest: list[SlaBreach]


def of_task(task_id: int, now: datetime, window: timedelta = timedelta(days=7)) -> TaskBreaches:
    """Count the task's breaches in the last week and return the latest few of them."""
    in_window = SlaBreach.task_id == task_id, SlaBreach.detected_at >= now - window
    counts = dict(db.session.execute(select(SlaBreach.kind, func.count()).where(*in_window)
                                     .group_by(SlaBreach.kind)).all())
    # Of the week too: "last 7 days: 3 late starts" listed five, two of them older (helper 106).
    latest = db.session.execute(select(SlaBreach).where(*in_window)
                                .order_by(SlaBreach.id.desc()).limit(5)).scalars().all()
    return TaskBreaches(counts.get("start_delay", 0), counts.get("deadline", 0), window, latest)
