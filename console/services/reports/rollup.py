"""Keep the report rollups: per task per hour, summed per day; recomputed a window at a time, never added to.

The "rollups" maintenance job (every minute, on the leading scheduler) recomputes the hours from the last
pass (less MARGIN, for transactions that committed after their events' time) up to the current one, and the
days they fall in. Each hour is recomputed whole from its source rows and written with an upsert, so a pass
that runs twice, or beside `rebuild`, writes the same numbers; nothing reads a count to add to it. What writes facts
at their own past time (an import of failures) recomputes those days itself (`recompute_days`).
"""

from collections import Counter, defaultdict
from datetime import datetime, timedelta

from sqlalchemy import delete, func, literal, select
from sqlalchemy.dialects import postgresql, sqlite

from console.db.types import UTCDateTime
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.figures import MEASURES
from console.extensions import db
from console.models import ReportState, Run
from console.models.reports import ALL_TASKS, report_days, report_error_days, report_error_hours, report_hours
from console.services.reports import sources
from console.services.reports.sources import floor_hour

HOUR, DAY = timedelta(hours=1), timedelta(days=1)
# Events carry the time their transaction began; one that commits later than this after it is missed by
# the pass that finishes its hour (a rebuild still counts it).
MARGIN = timedelta(minutes=2)
# A pass computes at most this much history, so a first start on an old database catches up a day a minute.
CATCH_UP = timedelta(days=1)
STATE = "rollups"
RUN_KEYS = ("tenant_id", "task_id", "handler")
ERROR_KEYS = ("tenant_id", "task_id", "fingerprint")


def floor_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _insert(table):
    dialect = {"sqlite": sqlite, "postgresql": postgresql}[db.engine.dialect.name]
    return dialect.insert(table)


def _upsert(table, keys: tuple[str, ...], rows=None, from_select=None) -> None:
    """INSERT ... ON CONFLICT DO UPDATE: the row computed last wins, whoever inserted it first."""
    statement = _insert(table)
    if from_select is not None:
        statement = statement.from_select([c.name for c in table.c], from_select)
    statement = statement.on_conflict_do_update(
        index_elements=[c.name for c in table.primary_key.columns],
        set_={c.name: statement.excluded[c.name] for c in table.c if c.name not in keys and not c.primary_key})
    if from_select is not None:
        db.session.connection().execute(statement)
    elif rows:
        db.session.connection().execute(statement, rows)


def recompute(start: datetime, end: datetime) -> None:
    """Recompute the hours of [start, end) from the source rows, then the days they fall in (caller commits)."""
    cells = sources.collect(start, end)
    _add_tenant_totals(cells)
    connection = db.session.connection()
    connection.execute(delete(report_hours).where(report_hours.c.hour >= start, report_hours.c.hour < end))
    connection.execute(delete(report_error_hours).where(report_error_hours.c.hour >= start,
                                                        report_error_hours.c.hour < end))
    _upsert(report_hours, ("hour", *RUN_KEYS), rows=[
        {"hour": hour, "tenant_id": tenant_id, "task_id": task_id, "handler": handler, "hour_of_day": hour.hour,
         **{name: counts.get(name, 0) for name in MEASURES}}
        for (hour, tenant_id, task_id, handler), counts in cells.runs.items()])
    _upsert(report_error_hours, ("hour", *ERROR_KEYS), rows=[
        {"hour": hour, "tenant_id": tenant_id, "task_id": task_id, "fingerprint": fingerprint, "error_code": code,
         "message": message, "letters": letters}
        for (hour, tenant_id, task_id, fingerprint), (code, message, letters) in cells.errors.items()])
    day = floor_day(start)
    while day < end:
        _recompute_day(day)
        day += DAY


def _add_tenant_totals(cells) -> None:
    """Add each tenant's sum per hour as the row of task ALL_TASKS (what a report over every task reads)."""
    totals: dict = defaultdict(Counter)
    for (hour, tenant_id, _, _), counts in cells.runs.items():
        totals[(hour, tenant_id, ALL_TASKS, "")].update(counts)
    cells.runs.update(totals)


def _recompute_day(day: datetime) -> None:
    """Sum a day's hours into its day rows (the 90-day report reads days, not 2,160 hours per task)."""
    connection = db.session.connection()
    connection.execute(delete(report_days).where(report_days.c.day == day))
    connection.execute(delete(report_error_days).where(report_error_days.c.day == day))
    hours = report_hours.c
    when = literal(day, UTCDateTime()).label("day")
    _upsert(report_days, ("day", *RUN_KEYS), from_select=select(
        when, hours.tenant_id, hours.task_id, hours.handler,
        *[func.sum(hours[name]).label(name) for name in MEASURES])
        .where(hours.hour >= day, hours.hour < day + DAY).group_by(hours.tenant_id, hours.task_id, hours.handler))
    errors = report_error_hours.c
    _upsert(report_error_days, ("day", *ERROR_KEYS), from_select=select(
        when, errors.tenant_id, errors.task_id, errors.fingerprint,
        func.max(errors.error_code), func.max(errors.message), func.sum(errors.letters))
        .where(errors.hour >= day, errors.hour < day + DAY)
        .group_by(errors.tenant_id, errors.task_id, errors.fingerprint))


def through() -> datetime | None:
    """Return how far the rollups have been computed."""
    return db.session.execute(select(ReportState.through).where(ReportState.name == STATE)).scalar_one_or_none()


def first_hour() -> datetime | None:
    """Return the first hour the rollups hold (the report history's start), or None before any run."""
    return db.session.execute(select(func.min(report_hours.c.hour))).scalar()


def _set_through(moment: datetime) -> None:
    _upsert(ReportState.__table__, ("name",), rows=[{"name": STATE, "through": moment}])


def _first_moment() -> datetime | None:
    # Every counted fact belongs to a run, and none is older than its run.
    return db.session.execute(select(func.min(Run.created_at))).scalar()


def tick(clock: Clock = SYSTEM_CLOCK) -> tuple[datetime, datetime] | None:
    """Recompute the hours since the last pass (and the current one); return the span recomputed."""
    now = clock()
    done = through() or _first_moment()
    if done is None:
        _set_through(now)
        db.session.commit()
        return None
    start = floor_hour(min(done, now) - MARGIN)
    end = min(floor_hour(now) + HOUR, start + CATCH_UP)
    recompute(start, end)
    _set_through(min(now, end))
    db.session.commit()
    return start, end


def recompute_days(moments, clock: Clock = SYSTEM_CLOCK) -> int:
    """Recompute the whole days these moments fall in, a day per transaction (facts written after their own time,
    as an import's failures are, lie behind what the minute's pass reads); return the number of days."""
    end = floor_hour(clock()) + HOUR
    days = sorted({floor_day(moment) for moment in moments if moment is not None and moment < end})
    for day in days:
        recompute(day, min(day + DAY, end))
        db.session.commit()
    return len(days)


def rebuild(clock: Clock = SYSTEM_CLOCK, progress=None) -> int:
    """Recompute every rollup from the runs, a day per transaction, each day's rows replaced in its own; return the
    number of days. Stopped half-way (Ctrl-C, a closed pipe), each day holds its old figures or its new ones: the
    tables were emptied first, and the reports read nothing for the days not yet done (helper 172)."""
    now = clock()
    first, days = _first_moment(), 0
    start = end = floor_hour(now) + HOUR
    if first is not None:
        day = start = floor_day(first)
        while day < end:
            recompute(day, min(day + DAY, end))
            db.session.commit()
            days += 1
            if progress:
                progress(day)
            day += DAY
    # What lies outside the runs' span counts nothing the runs still hold, so it goes with the last day.
    hours, day_rows = (report_hours, report_error_hours), (report_days, report_error_days)
    for table in hours:
        db.session.connection().execute(delete(table).where((table.c.hour < start) | (table.c.hour >= end)))
    for table in day_rows:
        db.session.connection().execute(delete(table).where((table.c.day < start) | (table.c.day >= end)))
    _set_through(now)
    db.session.commit()
    return days
