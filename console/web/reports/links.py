"""Where each figure, chart point and table row of the Reports page leads: the runs, dead letters or breaches."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import url_for

from console.domain.periods import MINUTE, Period
from console.extensions import db
from console.models import Task
from console.services.dlq.filters import MOMENT, UNTASKED
from console.services.reports.read import Scope
from console.services.scheduling import sla
from console.web.runs.forms import TIME_FORMATS

# How the Runs page reads times in its query string; the DLQ's (MOMENT) and Reports' (MINUTE) are the same, which
# lets buckets() swap one chart's marks whichever page it opens (tests/reports/test_report_links.py holds them equal).
RUN_TIME = TIME_FORMATS[0]
# Stand-ins for a bucket's times in a link built once per chart (no real period starts in 1901).
_MARK_FROM, _MARK_TO = datetime(1901, 1, 1, 1, 1), datetime(1901, 2, 2, 2, 2)


@dataclass(frozen=True)
class Links:
    """Build links that keep the page's period, tenant and task."""

    period: Period
    scope: Scope
    tenant: str | None  # the tenant's name (the runs and DLQ pages filter by name)
    query: dict  # the Reports page's own filters

    def runs(self, *statuses: str, start: datetime | None = None, end: datetime | None = None,
             task_id: int | None = None, handler: str | None = None, tenant: str | None = None,
             failed: bool = False, retried: bool = False, late: bool = False, duplicated: bool = False,
             conflicted: bool = False, ended: bool = False) -> str:
        """The runs created in the period (`ended`: whose series, the failed one or the first, ended in it, as the
        success figures count); `handler`: those of a handler run without a task;
        `failed`: with a series that failed for good; `retried`: whose first series failed at least once; `late`: a
        task's that started past its limit; `duplicated`: whose handler succeeded twice; `conflicted`: held back by a
        conflict."""
        start, end = (start or self.period.start).strftime(RUN_TIME), (end or self.period.end).strftime(RUN_TIME)
        return url_for("runs.index", status=list(statuses) or None, task=task_id or self.scope.task_id,
                       tenant=tenant or self.tenant, created_from=None if ended else start,
                       created_to=None if ended else end, series_from=start if ended else None,
                       series_to=end if ended else None, handler=handler if handler and not task_id else None,
                       failed=1 if failed else None, retried=1 if retried else None, late=1 if late else None,
                       duplicated=1 if duplicated else None, conflicted=1 if conflicted else None)

    def late_starts(self, row) -> str:
        """A task row's late starts: its runs that started past the task's start limit."""
        return self.runs(task_id=row.task_id, tenant=row.tenant, late=True)

    def heat_cells(self, row) -> list[str]:
        """A heat-map row's 24 cells' late starts: the late-start breaches of runs that started in each hour of day,
        for a task whose late starts the SLA check records; else its runs that started late (the check records none
        for it, and its cells opened "0 breaches"). Its limit is read once for the row, not once a cell."""
        task = db.session.get(Task, row.task_id) if row.task_id else None
        if task is None or sla.records_late_starts(task):
            return [self.breaches("start_delay", row.task_id, hour=hour) for hour in range(24)]
        return [self.late_starts(row)] * 24

    def row_runs(self, row) -> str:
        """The failed runs behind a row of the tasks table (a task's, or a handler's run without one, in its tenant):
        whose failed series ended in the period, as the row counts them, whenever the run was created."""
        return self.runs(task_id=row.task_id or None, handler=None if row.task_id else row.handler,
                         tenant=row.tenant, failed=True, ended=True)

    def dlq(self, status: str = "open", task_id: int | None = None) -> str:
        task = task_id or self.scope.task_id
        return url_for("dlq.index", view="list", status=None if status == "open" else status,
                       task=str(task) if task else None, tenant=self.tenant)

    def dlq_recovered(self, start: datetime | None = None, end: datetime | None = None) -> str:
        """The replayed dead letters whose run succeeded in the period (what "recovered" counts)."""
        task = self.scope.task_id
        return url_for("dlq.index", view="list", status="replayed", task=str(task) if task else None,
                       tenant=self.tenant, recovered_since=(start or self.period.start).strftime(MOMENT),
                       recovered_until=(end or self.period.end).strftime(MOMENT))

    def dlq_alerted(self, start: datetime | None = None, end: datetime | None = None) -> str:
        """The dead letters whose own alert was delivered in the period (what alert latency times), whenever they
        were created."""
        task = self.scope.task_id
        return url_for("dlq.index", view="list", status="any", task=str(task) if task else None,
                       tenant=self.tenant, alerted_since=(start or self.period.start).strftime(MOMENT),
                       alerted_until=(end or self.period.end).strftime(MOMENT))

    def dlq_created(self, task_id: int | None = None, handler: str | None = None, tenant: str | None = None,
                    group: str | None = None, start: datetime | None = None, end: datetime | None = None) -> str:
        """The dead letters created in the period, whatever became of them (what the figures count); `group`: those
        of one error fingerprint."""
        # A row "handler (no task)" counts that handler's letters of runs without a task, not its tasks' too.
        task = str(task_id) if task_id else (f"{UNTASKED}{handler}" if handler else self.scope.task_id)
        return url_for("dlq.index", view="list", status="any", task=str(task) if task else None,
                       tenant=tenant or self.tenant, group=group, since=(start or self.period.start).strftime(MOMENT),
                       until=(end or self.period.end).strftime(MOMENT))

    def breaches(self, kind: str = "", task_id: int | None = None, start: datetime | None = None,
                 end: datetime | None = None, hour: int | None = None) -> str:
        """The breaches recorded in the period, or in [start, end) (a chart point's hour or day); `hour`: of runs
        that started in that hour of day (a heat-map cell)."""
        span = {"since": start.strftime(MINUTE), "until": end.strftime(MINUTE)} if start and end else {}
        return url_for("reports.breaches", **{**self.query, "task": task_id or self.query.get("task"), **span},
                       kind=kind or None, hour=hour)

    def workorders(self, start: datetime | None = None, end: datetime | None = None) -> str:
        """The work orders opened in the period, closed or not (the task's: holding one of its dead letters)."""
        return url_for("workorders.index", status="all", tenant=self.tenant, task=self.scope.task_id,
                       since=(start or self.period.start).strftime(MOMENT),
                       until=(end or self.period.end).strftime(MOMENT))

    def figure(self, name: str, start: datetime | None = None, end: datetime | None = None) -> str:
        """Return what lies behind one figure's card, or behind its trend's point for [start, end)."""
        if name == "on_time_rate" or name.startswith("trigger_delay"):
            return self.breaches("start_delay", start=start, end=end)
        if name == "sla_breaches":
            return self.breaches(start=start, end=end)
        if name == "execution_success_rate":
            return self.runs(start=start, end=end, failed=True, ended=True)
        if name == "retry_success_rate":
            return self.runs(start=start, end=end, retried=True, ended=True)
        if name == "duplicate_rate":
            return self.runs(start=start, end=end, duplicated=True)
        if name == "dead_letters_recovered" or name.startswith("recovery_time"):
            return self.dlq_recovered(start, end)
        if name == "dead_letters_created":
            return self.dlq_created(start=start, end=end)
        if name.startswith("alert_latency"):
            return self.dlq_alerted(start, end)
        if name == "dead_letters_open":
            return self.dlq()
        if name == "workorder_completion_rate":
            return self.workorders(start, end)
        if name == "conflict_warning_hit_rate":
            return self.runs(start=start, end=end, conflicted=True)
        return self.runs(start=start, end=end)

    def buckets(self, name: str, starts: list[datetime], hourly: bool) -> list[str]:
        """Return what the figure counts in each hour or day of a trend."""
        # One url_for per chart, not per point: building ~1,500 URLs through the router cost ~55 ms a page.
        template = self.figure(name, _MARK_FROM, _MARK_TO)
        step = timedelta(hours=1) if hourly else timedelta(days=1)
        return [template.replace(_MARK_FROM.strftime(MINUTE), start.strftime(MINUTE))
                .replace(_MARK_TO.strftime(MINUTE), (start + step).strftime(MINUTE)) for start in starts]
