"""Every table of the Reports page as CSV: raw numbers (rates as fractions, times in seconds), one row a line."""

import csv
import io
import re
from datetime import datetime

from flask import Response

from console.domain.figures import FIGURES, RATE_BASES
from console.domain.periods import Period
from console.domain.spreadsheets import BOM, as_text
from console.services.reports import breaches as breach_list
from console.services.reports import figures, page, read
from console.services.reports import scope as report_scope
from console.services.reports.read import Scope

TABLES = ("figures", "trend", "tasks", "heat", "errors", "breaches")


def _number(value) -> str:
    if isinstance(value, str):
        return as_text(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _figures(period: Period, scope: Scope, now: datetime, _breach: dict):
    yield ["figure", "label", "value", "previous", "target", "met", "unit", "definition", "part", "whole"]
    for name, value in figures.summary(period, scope, now).values.items():
        part, whole, _ = value.basis or (None, None, None)
        yield [name, value.figure.label, value.value, value.previous, value.figure.target, value.met,
               value.figure.unit, value.figure.definition, part, whole]


def _trend(period: Period, scope: Scope, now: datetime, _breach: dict):
    names = [figure.name for figure in FIGURES if figure.name != "dead_letters_open"]
    # Each rate's part and whole too: an hour reading 0.333 could not be weighed (1 of 3, or 100 of 300).
    rates = [name for name in names if name in RATE_BASES]
    counted = [f"{name}_{end}" for name in rates for end in ("part", "whole")]
    yield ["hour" if period.hourly else "day", *names, *counted]
    report = page.build(period, scope, now)
    for bucket, values in report.trend.items():
        bases = report.trend_bases[bucket]
        yield [bucket, *[values[name] for name in names],
               *(bases[name][index] if name in bases else None for name in rates for index in (0, 1))]


def _tasks(period: Period, scope: Scope, _now: datetime, _breach: dict):
    yield ["tenant", "task_id", "task", "handler", "finished", "succeeded", "failed", "success_rate", "starts",
           "on_time", "late", "on_time_rate", "dead_letters", "recovered", "sla_breaches", "duplicates"]
    for row in page.task_rows(period, scope):
        counts = row.counts
        yield [row.tenant, row.task_id or "", row.task or "", row.handler, counts["finished"], counts["succeeded"],
               row.failed, row.success_rate, counts["starts"], counts["on_time"], row.late, row.on_time_rate,
               counts["dead_letters"], counts["recovered"], counts["breaches"], counts["duplicates"]]


def _heat(period: Period, scope: Scope, _now: datetime, _breach: dict):
    yield ["tenant", "task_id", "task", "hour_of_day_utc", "starts", "on_time", "on_time_rate"]
    heat = page.heat_map(period, scope, page.task_rows(period, scope))
    for row in heat.tasks:
        for hour in range(24):
            starts, on_time = heat.cells.get((row.task_id, hour), (0, 0))
            if starts:
                yield [row.tenant, row.task_id, row.task, hour, starts, on_time, on_time / starts]


def _errors(period: Period, scope: Scope, _now: datetime, _breach: dict):
    yield ["fingerprint", "error_code", "message", "dead_letters"]
    for group in read.fingerprints(period, scope, limit=None):
        yield [group.fingerprint, group.error_code, group.message, group.letters]


def _breaches(period: Period, scope: Scope, _now: datetime, breach: dict):
    yield ["breach_id", "kind", "tenant", "task_id", "task", "run_id", "run_status", "due_at", "late_by_s",
           "detected_at", "escalated", "limit_s", "limit_at"]
    filters = breach_list.Filters(period.start, period.end, scope.tenant_id, scope.task_id, **breach)
    for row in breach_list.every(filters):
        breach = row.breach
        yield [breach.id, breach.kind, row.tenant, breach.task_id, row.task, breach.run_id, row.run_status, row.due,
               breach.late_by_s, breach.detected_at, breach.escalated, row.limit_s, row.limit_at]


WRITERS = {"figures": _figures, "trend": _trend, "tasks": _tasks, "heat": _heat, "errors": _errors,
           "breaches": _breaches}


def respond(table: str, period: Period, scope: Scope, now: datetime, breach: dict | None = None) -> Response:
    """Answer a CSV download of one table; `breach`: the breaches list's own filters (kind, hour)."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer)
    for row in WRITERS[table](period, scope, now, breach or {}):
        writer.writerow([_number(value) for value in row])
    covers = re.sub(r"[^A-Za-z0-9_.-]+", "-", report_scope.describe(scope)).strip("-")  # a file name's characters
    hour = (breach or {}).get("hour")
    only = f"-hour{hour:02d}" if table == "breaches" and hour is not None else ""  # a heat-map cell's list
    name = f"rebound-{table}-{covers}-{period.start:%Y%m%d%H}-{period.end:%Y%m%d%H}{only}.csv"
    return Response(buffer.getvalue(), mimetype="text/csv",  # Flask adds "; charset=utf-8"
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})

