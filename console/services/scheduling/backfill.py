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
    firings = _firings(task, start, end, limit)
    if len(firings) > limit:
        raise InvalidInput(too_many(task, limit), "end")
    keys = {planner.cron_key(task.id, moment): moment for moment in firings}
    names = list(keys)
    existing: set[str] = set()
    for offset in range(0, len(names), KEYS_PER_QUERY):
        existing.update(db.session.execute(select(Run.idempotency_key).where(
            Run.tenant_id == task.tenant_id, Run.idempotency_key.in_(names[offset:offset + KEYS_PER_QUERY])))
            .scalars())
    return Backfill(task, firings, [moment for key, moment in keys.items() if key not in existing])


def _firings(task: Task, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """Return the task's cron firings from start to end, both included, up to limit + 1 of them."""
    schedule = cron.parse(task.cron, task.timezone)
    # fires_between starts strictly after its first moment; a firing exactly at `start` belongs to the range.
    return list(schedule.fires_between(start - timedelta(microseconds=1), end, max_count=limit + 1))


def too_many(task: Task, limit: int = MAX_FIRINGS) -> str:
    """Say that a range holds more firings than one backfill creates."""
    return f"that range holds more than {limit} firings of '{task.cron}'; backfill a shorter one"


def over_the_limit(task_id: int, start: datetime, end: datetime, limit: int = MAX_FIRINGS) -> str | None:
    """Say, when a backfill is asked for, that its range holds too many firings (None when it does not, or when the
    task has no schedule: the run says so): it was said only on the worker, after a 202 (helper 165)."""
    task = db.session.get(Task, task_id)
    if task is None or not task.cron or end <= start:
        return None
    return too_many(task, limit) if len(_firings(task, start, end, limit)) > limit else None


def fire(backfill: Backfill, moments: list[datetime], actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list:
    """Create (commit, queue) one run per firing through the planner; a firing that has a run by now is a duplicate."""
    task_id = backfill.task.id
    return planner.fire([planner.Firing(task_id, moment, source=SOURCE, key=planner.cron_key(task_id, moment))
                         for moment in moments], actor, clock)
