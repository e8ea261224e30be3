"""The conflicts a task edit creates: the forecast of its tenant before and after, compared (for the task form)."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from console.extensions import db
from console.models import Task, Tenant
from console.services.scheduling.forecast import forecast

HOURS = 24
# Past this many cron tasks in a tenant, a save forecasts only the task and those sharing its mutex key (quota
# pressure needs every task of the tenant): two forecasts of a large tenant would make a save take seconds.
WHOLE_TENANT_UP_TO = 300
# (one, many) of each kind of conflict, in the unit the conflict forecast page counts it: overlaps of two firings,
# firings, minutes.
KIND_WORDS = {"mutex": ("mutex overlap", "mutex overlaps"),
              "window": ("firing outside its window", "firings outside their window"),
              "quota": ("minute over max_running", "minutes over max_running"),
              "quota_class": ("minute over a quota class's max_running", "minutes over a quota class's max_running")}

Marks = frozenset[tuple[str, int, int, datetime]]


def _scope(tenant: Tenant, mutex_key: str | None, task_id: int | None) -> list[int] | None:
    """Return the task ids to forecast, or None for the whole tenant."""
    crons = Task.cron.is_not(None), Task.paused.is_(False), Task.deleted_at.is_(None), Task.tenant_id == tenant.id
    if db.session.execute(select(func.count()).select_from(Task).where(*crons)).scalar_one() <= WHOLE_TENANT_UP_TO:
        return None
    ids = {task_id} if task_id else set()
    if mutex_key:
        ids |= set(db.session.execute(select(Task.id).where(*crons, Task.mutex_key == mutex_key)).scalars())
    return sorted(ids)


def marks(tenant: Tenant, now: datetime, *, mutex_key: str | None = None, task_id: int | None = None) -> Marks:
    """Return the conflicts forecast for the tenant's next 24 h: (kind, tenant, task or 0, minute) each, but a mutex
    overlap, which is (mutex, first task, second task, the second's start: when it meets the key held)."""
    only = _scope(tenant, mutex_key, task_id)
    if only == []:
        return frozenset()
    result = forecast(now, HOURS, tenant.name, only=only)
    # One mark per overlap, not the forecast's warning on each of its two firings: a save then counts overlaps, as
    # the forecast page does, and not the minutes they touch. By the second firing: a run held long meets several
    # (an every-minute task's 5-minute run, four), which its own start would have counted as one.
    overlaps = {("mutex", o["first_task_id"], o["second_task_id"], datetime.fromisoformat(o["second_at"]))
                for o in result.mutex_overlaps}
    return frozenset(mark for mark in result.warnings if mark[0] != "mutex") | overlaps


@dataclass(frozen=True)
class Created:
    """What a save added to the forecast, counted by kind, with the first minute each happens."""

    counts: dict[str, int]
    first: dict[str, datetime]

    def sentence(self) -> str:
        parts = [f"{count} {KIND_WORDS[kind][count != 1]} (first at {self.first[kind]:%Y-%m-%d %H:%M} UTC)"
                 for kind, count in sorted(self.counts.items())]
        return "; ".join(parts)


def created(before: Marks, after: Marks) -> Created | None:
    """Return what is forecast after a save and was not before; None when the save created no conflict."""
    new = after - before
    if not new:
        return None
    distinct = {_counted_as(mark) for mark in new}
    counts = Counter(kind for kind, *_ in distinct)
    first = {kind: min(at for k, _, _, at in new if k == kind) for kind in counts}
    return Created(dict(counts), first)


def _counted_as(mark: tuple) -> tuple:
    """Return what a mark counts as: an overlap of two firings, one task's window deferral, or a minute."""
    kind, _, task, at = mark
    if kind == "mutex":
        return mark
    return kind, task if kind == "window" else 0, at
