"""Keep one APScheduler job per enabled cron task, in step with the tasks table; catch up missed firings."""

import logging
from datetime import timedelta

from sqlalchemy import select, update

from console import metrics
from console.domain import cron
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Task
from console.scheduler.firing import SCHEDULER, FiringBuffer
from console.scheduler.triggers import TaskTrigger, jitter_offset
from console.services import planner, tasks

log = logging.getLogger("rebound.scheduler")
PREFIX = "task:"
# A firing APScheduler is about to deliver is not a missed one; leave it this long before catching up.
CATCH_UP_MARGIN = timedelta(seconds=5)


class TaskJobs:
    """Mirror the tasks table into APScheduler jobs; fire into a batching buffer."""

    def __init__(self, app, scheduler, buffer: FiringBuffer, clock: Clock = SYSTEM_CLOCK):
        self.app, self.scheduler, self.buffer, self.clock = app, scheduler, buffer, clock
        self.fingerprint = None
        self.signatures: dict[int, tuple] = {}

    def sync(self, force: bool = False) -> int:
        """Add, replace and remove jobs to match the tasks table; return how many jobs changed."""
        fingerprint = tasks.schedule_fingerprint()
        if fingerprint == self.fingerprint and not force:
            return 0
        rows = db.session.execute(select(Task.id, Task.cron, Task.timezone, Task.jitter_s, Task.misfire_grace_s)
                                  .where(Task.cron.is_not(None), Task.paused.is_(False),
                                         Task.deleted_at.is_(None))).all()
        wanted = {row.id: (row.cron, row.timezone, row.jitter_s, row.misfire_grace_s) for row in rows}
        changed = 0
        for task_id in set(self.signatures) - set(wanted):
            self.scheduler.remove_job(f"{PREFIX}{task_id}")
            del self.signatures[task_id]
            changed += 1
        for task_id, signature in wanted.items():
            if self.signatures.get(task_id) == signature:
                continue
            expression, timezone, jitter_s, grace_s = signature
            trigger = TaskTrigger(cron.parse(expression, timezone), jitter_offset(task_id, jitter_s))
            self.scheduler.add_job(self._fire, trigger, args=(task_id,), id=f"{PREFIX}{task_id}",
                                   name=f"task {task_id}", replace_existing=True,
                                   misfire_grace_time=max(1, grace_s), coalesce=True)
            self.signatures[task_id] = signature
            changed += 1
        self.fingerprint = fingerprint
        if changed:
            log.info("synced %d task jobs (%d enabled cron tasks)", changed, len(wanted))
        return changed

    def _fire(self, task_id: int) -> None:
        job = self.scheduler.get_job(f"{PREFIX}{task_id}")
        if job is None:
            return
        now = self.clock()
        grace = timedelta(seconds=job.misfire_grace_time or 60) + timedelta(minutes=1)
        nominal = job.trigger.nominal_time(now, grace)
        if nominal is not None:
            self.buffer.add(planner.Firing(task_id, nominal))

    def catch_up(self) -> tuple[int, int]:
        """Fire once for tasks that missed firings within their grace; count the rest as missed."""
        now = self.clock()
        fired, missed_total = 0, 0
        rows = db.session.execute(select(Task).where(Task.cron.is_not(None), Task.paused.is_(False),
                                                     Task.deleted_at.is_(None))).scalars().all()
        firings = []
        for task in rows:
            since = task.last_fired_for or task.created_at
            until = now - jitter_offset(task.id, task.jitter_s) - CATCH_UP_MARGIN
            if until <= since:
                continue
            due = list(cron.parse(task.cron, task.timezone).fires_between(since, until, max_count=100_000))
            if not due:
                continue
            latest, missed = due[-1], len(due) - 1
            if now - latest <= timedelta(seconds=task.misfire_grace_s):
                firings.append(planner.Firing(task.id, latest, source="catchup"))
            else:
                missed += 1
            if missed:
                db.session.execute(update(Task).where(Task.id == task.id).values(
                    missed_total=Task.missed_total + missed, last_fired_for=latest)
                    .execution_options(synchronize_session=False))
                missed_total += missed
                metrics.SCHEDULER_MISSED.inc(missed, tenant=task.tenant_id, at=now)
        db.session.commit()
        if firings:
            fired = sum(1 for o in planner.fire(firings, SCHEDULER, self.clock) if o.status == "created")
        if fired or missed_total:
            log.warning("caught up %d task firings; %d missed beyond their grace", fired, missed_total)
        return fired, missed_total
