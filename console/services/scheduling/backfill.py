"""Backfill a task: one run per cron firing in a past range that has none, under the firing's own idempotency key."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select

from console.domain import cron
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run, Task
from console.services.actor import Actor
from console.services.errors import InvalidInput
from console.services.scheduling import planner, tasks

MAX_FIRINGS = 1000
SOURCE = "backfill"
KEYS_PER_QUERY = 500


@dataclass(frozen=True)
class Backfill:
    task: Task
    firings: list[datetime]  # every cron firing in the range
    missing: list[datetime]  # those without a run (by the key `task:{id}:{scheduled_for}`)


def plan(task_id: int, start: datetime, end: datetime, now: datetime, tenant_id: int | None,
         limit: int = MAX_FIRINGS) -> Backfill:
    """Find the task's cron firings from start to end (both included) and which of them have no run yet."""
    task = tasks.get(task_id, tenant_id)
    if not task.cron:
        raise InvalidInput(f"task {task.name} has no cron schedule; a backfill re-creates missed cron firings", "task")
    if end <= start:
        raise InvalidInput("end must be after start", "end")
    if end > now:
        raise InvalidInput(f"end is in the future ({end:%Y-%m-%d %H:%M} UTC); the scheduler fires those itself", "end")
    schedule = cron.parse(task.cron, task.timezone)
    # fires_between starts strictly after its first moment; a firing exactly at `start` belongs to the range.
    firings = list(schedule.fires_between(start - timedelta(microseconds=1), end, max_count=limit + 1))
    if len(firings) > limit:
        raise InvalidInput(f"that range holds more than {limit} firings of '{task.cron}'; backfill a shorter one",
                           "end")
    keys = {planner.cron_key(task.id, moment): moment for moment in firings}
    names = list(keys)
    existing: set[str] = set()
    for offset in range(0, len(names), KEYS_PER_QUERY):
        existing.update(db.session.execute(select(Run.idempotency_key).where(
            Run.tenant_id == task.tenant_id, Run.idempotency_key.in_(names[offset:offset + KEYS_PER_QUERY])))
            .scalars())
    return Backfill(task, firings, [moment for key, moment in keys.items() if key not in existing])


def fire(backfill: Backfill, moments: list[datetime], actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list:
    """Create (commit, queue) one run per firing through the planner; a firing that has a run by now is a duplicate."""
    task_id = backfill.task.id
    return planner.fire([planner.Firing(task_id, moment, source=SOURCE, key=planner.cron_key(task_id, moment))
                         for moment in moments], actor, clock)
