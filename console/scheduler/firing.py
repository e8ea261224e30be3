"""Collect firings from APScheduler's threads and hand them to the planner in batches."""

import logging
import threading
import time
from collections import Counter
from datetime import datetime, timedelta

from sqlalchemy import select, update

from console import metrics
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Task
from console.services.actor import Actor
from console.services.scheduling import planner

log = logging.getLogger("rebound.scheduler")
SCHEDULER = Actor("scheduler")
RETRY_PAUSES_S = (1.0, 2.0, 5.0, 10.0)  # then every 10 s while the database refuses


class FiringBuffer:
    """A batching queue: many simultaneous firings become a few transactions and Redis round trips.

    A batch the database refuses (locked, restarting) is tried again until it takes it, each task's firings then
    coalesced to its latest within its misfire grace, the rest counted missed: dropped, the firing was lost without a
    trace, as the live firing after it moved the catch-up's mark past it (helper 162).
    """

    def __init__(self, app, max_batch: int = 2000, linger_s: float = 0.05, clock: Clock = SYSTEM_CLOCK,
                 pauses_s: tuple[float, ...] = RETRY_PAUSES_S):
        self.app, self.max_batch, self.linger_s, self.clock, self.pauses_s = app, max_batch, linger_s, clock, pauses_s
        self._items: list[planner.Firing] = []
        self._ready = threading.Condition()
        self._stop = False
        self._failures = 0
        self._thread = threading.Thread(target=self._run, name="firing-flusher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._ready:
            self._stop = True
            self._ready.notify()
        self._thread.join(10)

    def add(self, firing: planner.Firing) -> None:
        self.add_many([firing])

    def add_many(self, firings: list[planner.Firing]) -> None:
        with self._ready:
            self._items.extend(firings)
            self._ready.notify()

    def _take(self) -> list[planner.Firing]:
        with self._ready:
            while not self._items and not self._stop:
                self._ready.wait(1.0)
            batch, self._items = self._items[: self.max_batch], self._items[self.max_batch:]
            return batch

    def _run(self) -> None:
        while not self._stop or self._items:
            batch = self._take()
            if not batch:
                continue
            if len(batch) < self.max_batch:
                time.sleep(self.linger_s)  # let a burst of simultaneous firings arrive
                with self._ready:
                    extra, self._items = self._items[: self.max_batch - len(batch)], self._items[
                        self.max_batch - len(batch):]
                batch += extra
            self.flush(batch)

    def flush(self, batch: list[planner.Firing]) -> bool:
        """Hand a batch to the planner; on failure put it back to be tried again after a pause. Return whether the
        planner took it."""
        with self.app.app_context():
            try:
                if self._failures:
                    batch = within_grace(batch, self.clock())
                planner.fire(batch, SCHEDULER, self.clock)
            except Exception:  # noqa: BLE001 - whatever the database said, the firings wait for it
                db.session.rollback()
                self._failures += 1
                if self._failures == 1:
                    log.exception("a batch of %d firings failed; tried again until the database takes them",
                                  len(batch))
                if self._stop:
                    # Left to the next leader's catch-up: nothing fired after them, so its mark is still before them.
                    log.warning("stopping with %d firings not recorded; the next leader catches them up", len(batch))
                    return False
                with self._ready:
                    self._items[:0] = batch
                    self._ready.wait(self.pauses_s[min(self._failures, len(self.pauses_s)) - 1])
                return False
        if self._failures:
            log.warning("the firings went through after %d tries", self._failures + 1)
            self._failures = 0
        return True


def within_grace(batch: list[planner.Firing], now: datetime) -> list[planner.Firing]:
    """Keep, of firings that waited for the database, each task's latest within its misfire grace (as a catch-up
    fires once); count the others in the task's missed_total."""
    cron_firings = [firing for firing in batch if firing.source == "cron"]
    tasks = {task_id: (grace_s, tenant_id) for task_id, grace_s, tenant_id in db.session.execute(
        select(Task.id, Task.misfire_grace_s, Task.tenant_id).where(
            Task.id.in_({firing.task_id for firing in cron_firings}))).all()}
    latest: dict[int, planner.Firing] = {}
    for firing in cron_firings:
        if firing.task_id not in latest or firing.scheduled_for > latest[firing.task_id].scheduled_for:
            latest[firing.task_id] = firing
    kept = {task_id: firing for task_id, firing in latest.items()
            if task_id in tasks and now - firing.scheduled_for <= timedelta(seconds=tasks[task_id][0])}
    missed = Counter(firing.task_id for firing in cron_firings if kept.get(firing.task_id) is not firing)
    for task_id, count in missed.items():
        if task_id in tasks:  # a task deleted meanwhile counts nothing
            db.session.execute(update(Task).where(Task.id == task_id).values(missed_total=Task.missed_total + count)
                               .execution_options(synchronize_session=False))
            metrics.SCHEDULER_MISSED.inc(count, tenant=tasks[task_id][1], at=now)
    db.session.commit()
    if missed:
        log.warning("%d firings waited for the database past their grace: counted missed", sum(missed.values()))
    return [firing for firing in batch if firing.source != "cron" or kept.get(firing.task_id) is firing]
