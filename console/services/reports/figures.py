"""The figures of a period, beside the previous period of the same length and the seeds' targets.

Counts come from the rollups; three things are read live because they are about now, not about hours: work
orders (closed *now*), dead letters open now, and task runs still waiting past their start limit.
"""

from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from console.domain import figures as definitions
from console.domain.figures import FIGURES, HEADLINE, Figure, Inputs
from console.domain.periods import Period
from console.extensions import db
from console.models import DeadLetter, Run, WorkOrder
from console.models.runs import live
from console.services.reports import read, rollup, sources
from console.services.reports.read import Scope
from console.services.workorders import orders

# Runs still waiting are few by design (queues drain); past this many, the live count stops reading.
LATE_WAITING_CAP = 100_000


@dataclass(frozen=True)
class Value:
    figure: Figure
    value: float | int | None
    previous: float | int | None
    basis: tuple[int, int, str] | None = None  # a rate's (part, whole, what the whole counts) in the period

    @property
    def met(self) -> bool | None:
        return definitions.met(self.figure, self.value)

    @property
    def trend(self) -> str | None:
        return definitions.trend(self.value, self.previous, self.figure)

    @property
    def improved(self) -> bool | None:
        """Tell whether the move since the previous period is for the better (None: flat or unknown)."""
        direction, higher = self.trend, definitions.better(self.figure)
        if direction in (None, "flat") or higher is None:
            return None
        return (direction == "up") == higher

    def as_dict(self) -> dict:
        counted = {"part": self.basis[0], "whole": self.basis[1]} if self.basis else None
        return {"value": _significant(self.value), "previous": _significant(self.previous),
                "target": self.figure.target, "met": self.met, "unit": self.figure.unit, "counted": counted}


def _significant(value: float | int | None) -> float | int | None:
    """Keep 6 significant digits, as the CSV does: a percentile interpolated in a bucket is no finer than that."""
    return float(f"{value:.6g}") if isinstance(value, float) else value


@dataclass(frozen=True)
class Summary:
    period: Period
    scope: Scope
    values: dict[str, Value]
    as_of: datetime | None  # how far the rollups are computed

    def headline(self) -> list[Value]:
        return [self.values[name] for name in HEADLINE]

    def as_dict(self) -> dict:
        return {"period": {**self.period.as_dict(), "previous": self.period.previous.as_dict(),
                           "as_of": self.as_of.isoformat() if self.as_of else None,
                           "tenant_id": self.scope.tenant_id, "task_id": self.scope.task_id},
                "figures": {name: value.as_dict() for name, value in self.values.items()}}


def late_waiting(scope: Scope, now: datetime) -> int:
    """Count task runs not started yet whose start limit has passed (late now, whenever they start)."""
    query = (select(Run.task_id, Run.scheduled_for, Run.due_at)
             .where(Run.status.in_(("pending", "retry_wait")), live(), Run.started_at.is_(None),
                    Run.task_id.is_not(None), Run.scheduled_for.is_not(None))
             .limit(LATE_WAITING_CAP))
    if scope.tenant_id is not None:
        query = query.where(Run.tenant_id == scope.tenant_id)
    if scope.task_id is not None:
        query = query.where(Run.task_id == scope.task_id)
    rows = db.session.execute(query).all()
    if not rows:
        return 0
    limits, default = sources.start_limits(), definitions.DEFAULT_MAX_START_DELAY_S
    return sum(1 for task_id, scheduled_for, due_at in rows
               if (now - (due_at or scheduled_for)).total_seconds() > limits.get(task_id, default))


def _opened_in(query, period: Period, scope: Scope):
    """Narrow a select over work orders to those opened in the period, in the scope."""
    query = query.where(WorkOrder.created_at >= period.start, WorkOrder.created_at < period.end)
    if scope.tenant_id is not None:
        query = query.where(WorkOrder.tenant_id == scope.tenant_id)
    if scope.task_id is not None:
        query = query.where(orders.of_task(scope.task_id))
    return query


def workorders(period: Period, scope: Scope) -> tuple[int, int]:
    """Return (opened in the period, of those closed now)."""
    query = _opened_in(select(func.count(), func.count().filter(WorkOrder.status == "closed")), period, scope)
    created, closed = db.session.execute(query).one()
    return created, closed


def workorders_per_bucket(period: Period, scope: Scope, starts: list[datetime]) -> dict[datetime, tuple[int, int]]:
    """Return (opened, of those closed now) for each hour or day of the period (`starts`, oldest first)."""
    # Read live like the card (closed *now* is no rollup's), and put in buckets here: work orders are few (one
    # open per error group and tenant), and an hour or a day in SQL would be spelled once per database.
    found: dict[datetime, list[int]] = {}
    query = _opened_in(select(WorkOrder.created_at, WorkOrder.status), period, scope)
    for created_at, status in db.session.execute(query):
        counts = found.setdefault(starts[bisect_right(starts, created_at) - 1], [0, 0])
        counts[0] += 1
        counts[1] += status == "closed"
    return {bucket: (opened, closed) for bucket, (opened, closed) in found.items()}


# Figures read about now, not about the period they are shown beside.
ABOUT_NOW = frozenset({"dead_letters_open"})


def open_letters(scope: Scope) -> int:
    query = select(func.count()).select_from(DeadLetter).where(DeadLetter.status == "open")
    if scope.tenant_id is not None:
        query = query.where(DeadLetter.tenant_id == scope.tenant_id)
    if scope.task_id is not None:
        query = query.where(DeadLetter.task_id == scope.task_id)
    return db.session.execute(query).scalar_one()


def inputs(period: Period, scope: Scope, now: datetime, totals=None, current: bool = True) -> Inputs:
    """Gather what `values` needs for one period; `current` adds what is read about now."""
    created, closed = workorders(period, scope)
    includes_now = current and period.start <= now < period.end
    return Inputs(totals=read.totals(period, scope) if totals is None else totals, workorders_created=created,
                  workorders_completed=closed, dead_letters_open=open_letters(scope) if current else None,
                  late_waiting=late_waiting(scope, now) if includes_now else 0)


def summary(period: Period, scope: Scope, now: datetime, totals=None, first: datetime | None = ...) -> Summary:
    """Return every figure for the period beside the previous period's (`first`: the rollups' first hour, when the
    caller read it already)."""
    measured = inputs(period, scope, now, totals)
    now_values, now_bases = definitions.values(measured), definitions.bases(measured)
    first = rollup.first_hour() if first is ... else first
    if first is None or period.end <= first:  # it ended before the first recorded run: nothing measured, not zeros
        # But what is about now stands whatever the period (the open letters: it read "—" for last year).
        now_values = {name: value if name in ABOUT_NOW else None for name, value in now_values.items()}
    # A period before the first run anyone recorded is not a period of zeros: nothing was measured ("—", no arrow).
    before = (definitions.values(inputs(period.previous, scope, now, current=False))
              if first is not None and period.previous.end > first else dict.fromkeys(now_values))
    return Summary(period, scope, {figure.name: Value(figure, now_values[figure.name], before[figure.name],
                                                      now_bases.get(figure.name))
                                   for figure in FIGURES}, rollup.through())


def per_bucket_inputs(buckets: dict, workorders_by_bucket: dict | None = None) -> dict[datetime, Inputs]:
    """Return each hour's or day's inputs from its sums and its work orders (open letters and late waiting are
    about now, left out): its figures are definitions.values of them, its rates' counts definitions.bases."""
    inputs_of = {}
    for bucket, counts in buckets.items():
        opened, closed = (workorders_by_bucket or {}).get(bucket, (0, 0))
        inputs_of[bucket] = Inputs(totals=counts, workorders_created=opened, workorders_completed=closed)
    return inputs_of

