"""Where each figure, chart point and table row of the Reports page leads: the runs, dead letters or breaches."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import url_for

from console.domain.periods import Period
from console.services.dlq.filters import MOMENT
from console.services.reports.read import Scope
from console.web.runs.forms import TIME_FORMATS

RUN_TIME = TIME_FORMATS[0]  # how the Runs page reads times in its query string
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
             conflicted: bool = False) -> str:
        """The runs created in the period; `handler`: those of a handler run without a task;
        `failed`: with a series that failed for good; `retried`: whose first series failed at least once; `late`: a
        task's that started past its limit; `duplicated`: whose handler succeeded twice; `conflicted`: held back by a
        conflict."""
        start, end = start or self.period.start, end or self.period.end
        return url_for("runs.index", status=list(statuses) or None, task=task_id or self.scope.task_id,
                       tenant=tenant or self.tenant, created_from=start.strftime(RUN_TIME),
                       created_to=end.strftime(RUN_TIME), handler=handler if handler and not task_id else None,
                       failed=1 if failed else None, retried=1 if retried else None, late=1 if late else None,
                       duplicated=1 if duplicated else None, conflicted=1 if conflicted else None)

    def late_starts(self, row) -> str:
        """A task row's late starts: its runs that started past the task's start limit."""
        return self.runs(task_id=row.task_id, tenant=row.tenant, late=True)

    def row_runs(self, row) -> str:
        """The failed runs behind a Top failing tasks row (a task's, or a handler's run without one, in its tenant)."""
        return self.runs(task_id=row.task_id or None, handler=None if row.task_id else row.handler,
                         tenant=row.tenant, failed=True)

    def dlq(self, status: str = "open", task_id: int | None = None) -> str:
        task = task_id or self.scope.task_id
        return url_for("dlq.index", view="list", status=None if status == "open" else status,
                       task=str(task) if task else None, tenant=self.tenant)

    def dlq_recovered(self) -> str:
        """The replayed dead letters whose run succeeded in the period (what "recovered" counts)."""
        task = self.scope.task_id
        return url_for("dlq.index", view="list", status="replayed", task=str(task) if task else None,
                       tenant=self.tenant, recovered_since=self.period.start.strftime(MOMENT),
                       recovered_until=self.period.end.strftime(MOMENT))

    def dlq_created(self, task_id: int | None = None, handler: str | None = None, tenant: str | None = None,
                    group: str | None = None) -> str:
        """The dead letters created in the period, whatever became of them (what the figures count); `group`: those
        of one error fingerprint."""
        task = str(task_id) if task_id else (f"handler:{handler}" if handler else self.scope.task_id)
        return url_for("dlq.index", view="list", status="any", task=str(task) if task else None,
                       tenant=tenant or self.tenant, group=group, since=self.period.start.strftime(MOMENT),
                       until=self.period.end.strftime(MOMENT))

    def breaches(self, kind: str = "", task_id: int | None = None) -> str:
        return url_for("reports.breaches", **{**self.query, "task": task_id or self.query.get("task")},
                       kind=kind or None)

    def figure(self, name: str) -> str:
        """Return what lies behind one figure's card."""
        if name == "on_time_rate" or name.startswith("trigger_delay"):
            return self.breaches("start_delay")
        if name == "sla_breaches":
            return self.breaches()
        if name == "execution_success_rate":
            return self.runs(failed=True)
        if name == "retry_success_rate":
            return self.runs(retried=True)
        if name == "duplicate_rate":
            return self.runs(duplicated=True)
        if name == "dead_letters_recovered" or name.startswith("recovery_time"):
            return self.dlq_recovered()
        # An alert is about a dead letter: the letters of the period are the ones whose alerts are timed.
        if name == "dead_letters_created" or name.startswith("alert_latency"):
            return self.dlq_created()
        if name == "dead_letters_open":
            return self.dlq()
        if name == "workorder_completion_rate":  # the work orders opened in the period, closed or not
            return url_for("workorders.index", status="all", tenant=self.tenant,
                           since=self.period.start.strftime(MOMENT), until=self.period.end.strftime(MOMENT))
        if name == "conflict_warning_hit_rate":
            return self.runs(conflicted=True)
        return self.runs()

    def buckets(self, name: str, starts: list[datetime], hourly: bool) -> list[str]:
        """Return the runs of each hour or day of a trend."""
        # One url_for per chart, not per point: building ~1,500 URLs through the router cost ~55 ms a page.
        template = self.runs(start=_MARK_FROM, end=_MARK_TO, failed=name == "execution_success_rate",
                             retried=name == "retry_success_rate", duplicated=name == "duplicate_rate")
        step = timedelta(hours=1) if hourly else timedelta(days=1)
        return [template.replace(_MARK_FROM.strftime(RUN_TIME), start.strftime(RUN_TIME))
                .replace(_MARK_TO.strftime(RUN_TIME), (start + step).strftime(RUN_TIME)) for start in starts]
