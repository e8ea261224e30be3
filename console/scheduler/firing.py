"""Collect firings from APScheduler's threads and hand them to the planner in batches."""

import logging
import threading
import time

from console.services.actor import Actor
from console.services.scheduling import planner

log = logging.getLogger("rebound.scheduler")
SCHEDULER = Actor("scheduler")


class FiringBuffer:
    """A batching queue: many simultaneous firings become a few transactions and Redis round trips."""

    def __init__(self, app, max_batch: int = 2000, linger_s: float = 0.05):
        self.app, self.max_batch, self.linger_s = app, max_batch, linger_s
        self._items: list[planner.Firing] = []
        self._ready = threading.Condition()
        self._stop = False
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
            with self.app.app_context():
                try:
                    planner.fire(batch, SCHEDULER)
                except Exception:
                    log.exception("a batch of %d firings failed; their tasks fire again at the next tick", len(batch))
