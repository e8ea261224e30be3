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
# (one, many) of each kind of conflict, counted in distinct minutes: an overlap marks both of its firings.
KIND_WORDS = {"mutex": ("minute with a mutex overlap", "minutes with mutex overlaps"),
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
    """Return the conflicts forecast for the tenant's next 24 h, as (kind, tenant, task or 0, minute)."""
    only = _scope(tenant, mutex_key, task_id)
    if only == []:
        return frozenset()
    return frozenset(forecast(now, HOURS, tenant.name, only=only).warnings)


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
    # A window deferral is one task's firing; an overlap or a quota minute is counted once per minute.
    distinct = {(kind, task if kind == "window" else 0, at) for kind, _, task, at in new}
    counts = Counter(kind for kind, _, _ in distinct)
    first = {kind: min(at for k, _, _, at in new if k == kind) for kind in counts}
    return Created(dict(counts), first)
