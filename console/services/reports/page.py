"""Everything the Reports page shows for a period: figures, their trend, tasks, the on-time heat map, errors."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select

from console.domain import deleted_names
from console.domain import figures as definitions
from console.domain.periods import Period
from console.extensions import db
from console.models import Task, Tenant
from console.services.reports import figures, read, rollup
from console.services.reports.figures import Summary
from console.services.reports.read import ErrorGroup, Scope

HEAT_TASKS = 15  # the heat map's rows: the tasks with the most late starts


@dataclass(frozen=True)
class TaskRow:
    """One task's (or, for runs without a task, one handler's) counts over the period."""

    tenant_id: int
    tenant: str
    task_id: int  # 0: runs submitted without a task
    task: str | None
    handler: str
    counts: Counter

    @property
    def failed(self) -> int:
        return self.counts["finished"] - self.counts["succeeded"]

    @property
    def late(self) -> int:
        return self.counts["starts"] - self.counts["on_time"]

    @property
    def success_rate(self) -> float | None:
        return self.counts["succeeded"] / self.counts["finished"] if self.counts["finished"] else None

    @property
    def on_time_rate(self) -> float | None:
        return self.counts["on_time"] / self.counts["starts"] if self.counts["starts"] else None


@dataclass(frozen=True)
class HeatMap:
    tasks: list[TaskRow]  # rows, most late first
    cells: dict[tuple[int, int], tuple[int, int]]  # (task id, hour of day) -> (starts, on time)

    def rate(self, task_id: int, hour: int) -> float | None:
        starts, on_time = self.cells.get((task_id, hour), (0, 0))
        return on_time / starts if starts else None


@dataclass(frozen=True)
class Report:
    summary: Summary
    trend: dict[datetime, dict]  # each hour or day of the period (oldest first) -> its figures
    trend_bases: dict[datetime, dict]  # -> its rates' (part, whole, what the whole counts)
    tasks: list[TaskRow]  # most failures first
    heat: HeatMap
    errors: list[ErrorGroup] = field(default_factory=list)

    @property
    def period(self) -> Period:
        return self.summary.period


def buckets_of(period: Period) -> list[datetime]:
    """Every hour (short periods) or day of the period, so a quiet one shows as a gap, not a missing point."""
    step = timedelta(hours=1) if period.hourly else timedelta(days=1)
    moment = period.start if period.hourly else period.start.replace(hour=0)
    found = []
    while moment < period.end:
        found.append(moment)
        moment += step
    return found


def task_rows(period: Period, scope: Scope) -> list[TaskRow]:
    """Return each task's counts, most failures first (then dead letters, then late starts)."""
    counts = read.per_task(period, scope)
    task_ids = {task_id for _, task_id, _ in counts if task_id}
    names = {task_id: deleted_names.shown(name) for task_id, name
             in db.session.execute(select(Task.id, Task.name).where(Task.id.in_(task_ids)))} if task_ids else {}
    tenants = dict(db.session.execute(select(Tenant.id, Tenant.name)).all())
    rows = [TaskRow(tenant_id, tenants.get(tenant_id, str(tenant_id)), task_id, names.get(task_id), handler, found)
            for (tenant_id, task_id, handler), found in counts.items()]
    rows.sort(key=lambda row: (-row.failed, -row.counts["dead_letters"], -row.late, -row.counts["finished"],
                               row.tenant, row.task or "", row.handler))
    return rows


def heat_map(period: Period, scope: Scope, rows: list[TaskRow]) -> HeatMap:
    """On-time per task and hour of day for the tasks with the most late starts (or the one task asked for)."""
    per_task: dict[int, TaskRow] = {}
    for row in rows:
        if row.task_id and row.counts["starts"]:
            per_task.setdefault(row.task_id, row)
    chosen = sorted(per_task.values(), key=lambda row: (-row.late, -row.counts["starts"], row.task or ""))
    chosen = chosen[:HEAT_TASKS]
    return HeatMap(chosen, read.on_time_by_hour_of_day(period, scope, [row.task_id for row in chosen]))


def build(period: Period, scope: Scope, now: datetime) -> Report:
    """Read the period once per grouping and put the page together."""
    buckets = read.per_bucket(period, scope)
    totals: Counter = Counter()
    for counts in buckets.values():
        totals.update(counts)
    first = rollup.first_hour()
    summary = figures.summary(period, scope, now, totals=totals, first=first)
    starts = buckets_of(period)
    inputs = figures.per_bucket_inputs({bucket: buckets.get(bucket, Counter()) for bucket in starts},
                                       figures.workorders_per_bucket(period, scope, starts))
    # An hour or day that ended before the first run anyone recorded measured nothing: not a zero on its chart.
    step = timedelta(hours=1) if period.hourly else timedelta(days=1)
    measured = {bucket: first is not None and bucket + step > first for bucket in inputs}
    trend = {bucket: definitions.values(each) if measured[bucket] else dict.fromkeys(definitions.values(each))
             for bucket, each in inputs.items()}
    bases = {bucket: definitions.bases(each) if measured[bucket] else {} for bucket, each in inputs.items()}
    rows = task_rows(period, scope)
    return Report(summary, trend, bases, rows, heat_map(period, scope, rows), read.fingerprints(period, scope))
