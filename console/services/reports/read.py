"""Read the rollups for a period: whole days from the day rows, the hours at either edge from the hour rows."""

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select

from console.domain.figures import MEASURES
from console.domain.periods import Period
from console.extensions import db
from console.models.reports import ALL_TASKS, report_days, report_error_days, report_error_hours, report_hours

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Scope:
    """Whose figures: a tenant (or every tenant the reader may see) and a task (or all)."""

    tenant_id: int | None = None
    task_id: int | None = None


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def parts(start: datetime, end: datetime) -> list[tuple[bool, datetime, datetime]]:
    """Split [start, end) into (daily?, from, to): whole days read day rows, the edges hour rows."""
    first_day = _day(start) if start == _day(start) else _day(start) + DAY
    last_day = _day(end)
    if first_day >= last_day:
        return [(False, start, end)]
    found = [(False, start, first_day)] if start < first_day else []
    found.append((True, first_day, last_day))
    if last_day < end:
        found.append((False, last_day, end))
    return found


def _where(table, time_column, start, end, scope: Scope, per_task: bool = False):
    """Rows of the span and scope: a task's own rows, every task's (per_task), or the tenants' totals."""
    conditions = [time_column >= start, time_column < end]
    if scope.tenant_id is not None:
        conditions.append(table.c.tenant_id == scope.tenant_id)
    if scope.task_id is not None:
        conditions.append(table.c.task_id == scope.task_id)
    elif per_task:
        conditions.append(table.c.task_id != ALL_TASKS)
    elif "handler" in table.c:
        conditions.append(table.c.task_id == ALL_TASKS)
    return conditions


# What the tasks table shows (a narrower sum reads faster than all of MEASURES).
TASK_MEASURES = ("finished", "succeeded", "starts", "on_time", "dead_letters", "recovered", "breaches", "duplicates")


def _query(period: Period, scope: Scope, group: str | None, measures=MEASURES) -> dict:
    """Sum measures over the period, grouped by `group` (None, "bucket" or "task"); {group key: Counter}."""
    found: dict = defaultdict(Counter)
    # An hourly trend reads hour rows only: a date range of a day or two holds whole days, whose day rows put each
    # day's total on its midnight hour (helper 124).
    hourly = group == "bucket" and period.hourly
    for daily, start, end in [(False, period.start, period.end)] if hourly else parts(period.start, period.end):
        table = report_days if daily else report_hours
        when = table.c.day if daily else table.c.hour
        keys = {None: [], "bucket": [when], "task": [table.c.tenant_id, table.c.task_id, table.c.handler]}[group]
        query = (select(*keys, *[func.sum(table.c[name]).label(name) for name in measures])
                 .where(*_where(table, when, start, end, scope, per_task=group == "task")))
        if keys:
            query = query.group_by(*keys)
        for row in db.session.execute(query):
            values = row._mapping
            key = tuple(values[k.name] for k in keys) if keys else None
            counts = found[key[0] if group == "bucket" else key]
            for name in measures:
                counts[name] += values[name] or 0
    return found


def totals(period: Period, scope: Scope) -> Counter:
    """Sum every measure over the period."""
    return _query(period, scope, None).get(None, Counter())


def per_bucket(period: Period, scope: Scope) -> dict[datetime, Counter]:
    """Sum every measure per hour (periods of two days or less) or per day, oldest first."""
    rows = _query(period, scope, "bucket")
    found: dict = defaultdict(Counter)
    for bucket, counts in rows.items():
        found[bucket if period.hourly else _day(bucket)].update(counts)
    return dict(sorted(found.items()))


def per_task(period: Period, scope: Scope) -> dict[tuple[int, int, str], Counter]:
    """Sum the tasks table's measures per (tenant, task, handler); task 0 is runs submitted without a task."""
    return dict(_query(period, scope, "task", TASK_MEASURES))


def on_time_by_hour_of_day(period: Period, scope: Scope, task_ids: list[int]) -> dict[tuple[int, int], tuple]:
    """Return {(task id, hour of day): (starts, on time)} for these tasks, from the hour rows."""
    if not task_ids:
        return {}
    hours = report_hours.c
    query = (select(hours.task_id, hours.hour_of_day, func.sum(hours.starts), func.sum(hours.on_time))
             .where(*_where(report_hours, hours.hour, period.start, period.end, scope, per_task=True),
                    hours.task_id.in_(task_ids),
                    hours.starts > 0)
             .group_by(hours.task_id, hours.hour_of_day))
    return {(task_id, hour): (starts, on_time) for task_id, hour, starts, on_time in db.session.execute(query)}


@dataclass(frozen=True)
class ErrorGroup:
    fingerprint: str
    error_code: str
    message: str  # normalised: ids and numbers replaced
    letters: int


def fingerprints(period: Period, scope: Scope, limit: int | None = 10) -> list[ErrorGroup]:
    """Return the error fingerprints with the most dead letters created in the period, most first."""
    found: Counter = Counter()
    named: dict[str, tuple[str, str]] = {}
    for daily, start, end in parts(period.start, period.end):
        table = report_error_days if daily else report_error_hours
        when = table.c.day if daily else table.c.hour
        query = (select(table.c.fingerprint, func.max(table.c.error_code), func.max(table.c.message),
                        func.sum(table.c.letters))
                 .where(*_where(table, when, start, end, scope)).group_by(table.c.fingerprint))
        for fingerprint, code, message, letters in db.session.execute(query):
            found[fingerprint] += letters
            named[fingerprint] = max(named.get(fingerprint, ("", "")), (code, message))
    # Most first, ties by fingerprint: the database returns groups in no promised order.
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    return [ErrorGroup(fingerprint, *named[fingerprint], letters) for fingerprint, letters in ranked[:limit]]


def hourly(start: datetime, end: datetime, tenant_id: int | None, measures: tuple[str, ...]) -> dict[datetime, dict]:
    """Sum a few measures per hour of [start, end) over every task (the Overview's history)."""
    hours = report_hours.c
    query = (select(hours.hour, *[func.sum(hours[name]).label(name) for name in measures])
             .where(*_where(report_hours, hours.hour, start, end, Scope(tenant_id))).group_by(hours.hour))
    return {row.hour: {name: row._mapping[name] or 0 for name in measures} for row in db.session.execute(query)}
