"""Keep one APScheduler job per distinct schedule of the enabled cron tasks; catch up missed firings."""

import functools
import hashlib
import logging
import threading
from datetime import datetime, timedelta

from sqlalchemy import select, update

from console import metrics
from console.domain import cron
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.cron import jitter_offset
from console.extensions import db
from console.models import Task
from console.scheduler.firing import SCHEDULER, FiringBuffer
from console.scheduler.triggers import TaskTrigger
from console.services.scheduling import planner, tasks

log = logging.getLogger("rebound.scheduler")
PREFIX = "schedule:"
# A firing APScheduler is about to deliver is not a missed one; leave it this long before catching up.
CATCH_UP_MARGIN = timedelta(seconds=5)


def job_id(schedule: tuple) -> str:
    """Name the APScheduler job of one schedule (cron, time zone, jitter offset, grace), stable across syncs."""
    return PREFIX + hashlib.sha1(repr(schedule).encode()).hexdigest()[:16]


class TaskJobs:
    """Mirror the tasks table into APScheduler jobs, one per schedule that fans out to its tasks."""

    def __init__(self, app, scheduler, buffer: FiringBuffer, clock: Clock = SYSTEM_CLOCK):
        self.app, self.scheduler, self.buffer, self.clock = app, scheduler, buffer, clock
        self.fingerprint = None
        self.schedules: dict[int, tuple] = {}  # task id -> its schedule
        # Tasks sharing a schedule share one APScheduler job: 10,000 `* * * * *` tasks are one trigger that
        # fires once and hands the planner one batch, instead of 10,000 jobs through APScheduler's executor.
        self.members: dict[tuple, set[int]] = {}
        self._lock = threading.Lock()  # sync changes members while a schedule's job reads them

    def job_for(self, task_id: int):
        """Return the APScheduler job that fires this task, or None."""
        schedule = self.schedules.get(task_id)
        return self.scheduler.get_job(job_id(schedule)) if schedule else None

    def sync(self, force: bool = False) -> int:
        """Add, move and remove tasks (and their schedules' jobs) to match the tasks table; return tasks changed."""
        fingerprint = tasks.schedule_fingerprint()
        if fingerprint == self.fingerprint and not force:
            return 0
        rows = db.session.execute(select(Task.id, Task.cron, Task.timezone, Task.jitter_s, Task.misfire_grace_s)
                                  .where(Task.cron.is_not(None), Task.paused.is_(False),
                                         Task.deleted_at.is_(None))).all()
        wanted = {row.id: (row.cron, row.timezone, jitter_offset(row.id, row.jitter_s), row.misfire_grace_s)
                  for row in rows}
        changed = [task_id for task_id in set(self.schedules) | set(wanted)
                   if self.schedules.get(task_id) != wanted.get(task_id)]
        with self._lock:
            for task_id in changed:
                if task_id in self.schedules:
                    self._leave(task_id, self.schedules.pop(task_id))
                if task_id in wanted:
                    self._join(task_id, wanted[task_id])
        self.fingerprint = fingerprint
        if changed:
            log.info("synced %d task changes (%d enabled cron tasks on %d schedules)", len(changed), len(wanted),
                     len(self.members))
        return len(changed)

    def _join(self, task_id: int, schedule: tuple) -> None:
        self.schedules[task_id] = schedule
        if schedule in self.members:
            self.members[schedule].add(task_id)
            return
        expression, timezone, offset, grace_s = schedule
        self.members[schedule] = {task_id}
        self.scheduler.add_job(self._fire, TaskTrigger(cron.parse(expression, timezone), offset), args=(schedule,),
                               id=job_id(schedule), name=f"cron {expression} {timezone} +{offset.total_seconds()}s",
                               replace_existing=True, misfire_grace_time=max(1, grace_s), coalesce=True)

    def _leave(self, task_id: int, schedule: tuple) -> None:
        members = self.members.get(schedule, set())
        members.discard(task_id)
        if not members:
            self.members.pop(schedule, None)
            self.scheduler.remove_job(job_id(schedule))

    def _fire(self, schedule: tuple) -> None:
        job = self.scheduler.get_job(job_id(schedule))
        with self._lock:
            task_ids = sorted(self.members.get(schedule, ()))
        if job is None or not task_ids:
            return
        grace = timedelta(seconds=job.misfire_grace_time or 60) + timedelta(minutes=1)
        nominal = job.trigger.nominal_time(self.clock(), grace)
        if nominal is not None:
            self.buffer.add_many([planner.Firing(task_id, nominal, schedule=schedule[:2]) for task_id in task_ids])

    def catch_up(self) -> tuple[int, int]:
        """Fire once for tasks that missed firings within their grace; count the rest as missed."""
        now = self.clock()
        fired, missed_total = 0, 0
        rows = db.session.execute(select(Task.id, Task.tenant_id, Task.cron, Task.timezone, Task.jitter_s,
                                         Task.misfire_grace_s, Task.last_fired_for, Task.created_at, Task.resumed_at)
                                  .where(Task.cron.is_not(None), Task.paused.is_(False),
                                         Task.deleted_at.is_(None))).all()
        firings = []
        for task in rows:
            # A pause skipped the firings before its resume: none is caught up or counted missed.
            since = max(task.last_fired_for or task.created_at, task.resumed_at or task.created_at)
            until = now - jitter_offset(task.id, task.jitter_s) - CATCH_UP_MARGIN
            if until <= since:
                continue
            latest, count = _due(task.cron, task.timezone, since, until)
            if not count:
                continue
            missed = count - 1
            if now - latest <= timedelta(seconds=task.misfire_grace_s):
                firings.append(planner.Firing(task.id, latest, source="catchup"))
            else:
                missed += 1
            if missed:
                # Counted only by the scheduler that moves last_fired_for on from what it read: two catching up at
                # once (a failover's overlap) would both count the same missed firings.
                if not db.session.execute(update(Task).where(
                        Task.id == task.id, Task.last_fired_for.is_not_distinct_from(task.last_fired_for))
                        .values(missed_total=Task.missed_total + missed, last_fired_for=latest)
                        .execution_options(synchronize_session=False)).rowcount:
                    continue
                missed_total += missed
                metrics.SCHEDULER_MISSED.inc(missed, tenant=task.tenant_id, at=now)
        db.session.commit()
        _due.cache_clear()
        if firings:
            fired = sum(1 for o in planner.fire(firings, SCHEDULER, self.clock) if o.status == "created")
        if fired or missed_total:  # a warning only when some firings are lost for good
            log.log(logging.WARNING if missed_total else logging.INFO,
                    "caught up %d task firings; %d missed beyond their grace", fired, missed_total)
        return fired, missed_total


@functools.lru_cache(maxsize=4096)
def _due(expression: str, timezone: str, since: datetime, until: datetime) -> tuple[datetime | None, int]:
    """Return the latest firing in (since, until] and how many there were."""
    # Tasks that share a schedule and last fired together ask the same question: with 10,000 of them a pass
    # costs one answer, not 10,000 parses and scans holding the GIL while a burst may be firing.
    due = list(cron.parse(expression, timezone).fires_between(since, until, max_count=100_000))
    return (due[-1] if due else None), len(due)
