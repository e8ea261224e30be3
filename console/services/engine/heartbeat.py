"""While handlers and their undo steps run: prove their worker is alive, and notice cancel requests."""

import threading
import time

from flask import current_app
from sqlalchemy import select, update

from console import metrics
from console.domain.clock import utcnow
from console.domain.statuses import IN_WORK
from console.extensions import db
from console.models import Run

# Held while a beat runs its SQL: a fork waits for it (engine/isolation.py), so no child starts with SQLite's
# process-wide mutexes taken by this thread.
BEATING = threading.Lock()


class _Beater:
    """One thread per process beats for every attempt running in it (no thread start per attempt)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.attempts: dict[int, tuple[int, threading.Event]] = {}
        self.thread: threading.Thread | None = None
        self.interval_s = 5.0
        self.app = None

    def add(self, app, run_id: int, attempt: int, cancel_event: threading.Event, interval_s: float) -> None:
        with self.lock:
            self.attempts[run_id] = (attempt, cancel_event)
            self.interval_s = interval_s
            # The latest app: one per worker process, but a test process makes one per test.
            self.app = app
            # After a fork the child has no thread even though the object says otherwise; is_alive() knows.
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
                self.thread.start()

    def remove(self, run_id: int) -> None:
        with self.lock:
            self.attempts.pop(run_id, None)

    def beating(self, run_id: int, attempt: int) -> bool:
        """Tell whether this attempt is still registered (a round's copy may hold one that has ended since)."""
        with self.lock:
            return self.attempts.get(run_id, (None,))[0] == attempt

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            with self.lock:
                attempts, app = dict(self.attempts), self.app
            if attempts:
                with BEATING, app.app_context():
                    self._beat(attempts)

    def _beat(self, attempts: dict) -> None:
        at = utcnow()
        metrics.PROGRESS_WRITES.inc_now(at=at, kind="heartbeat")
        try:
            with db.engine.begin() as connection:
                for run_id, (attempt, _) in attempts.items():
                    if not self.beating(run_id, attempt):
                        # Ended while this round checked out its connection: a beat now would make the run look
                        # alive after its worker let go of it (the reconciler would wait one more silence).
                        continue
                    connection.execute(update(Run.__table__).where(
                        Run.id == run_id, Run.status.in_(IN_WORK), Run.attempt == attempt
                    ).values(heartbeat_at=utcnow()))
                cancelling = set(connection.execute(select(Run.id).where(
                    Run.id.in_(attempts), Run.cancel_requested.is_(True))).scalars())
        except Exception:  # noqa: BLE001 - a missed beat is retried on the next tick
            metrics.PROGRESS_WRITE_FAILURES.inc_now(at=at, kind="heartbeat")
            return
        for run_id in cancelling:
            attempts[run_id][1].set()


_beater = _Beater()


class Heartbeat:
    """Keep one attempt's heartbeat_at fresh while the block runs; set cancel_event on a cancel request."""

    def __init__(self, run_id: int, attempt: int, interval_s: float, cancel_event: threading.Event):
        self.run_id, self.attempt, self.interval_s, self.cancel_event = run_id, attempt, interval_s, cancel_event

    def __enter__(self):
        _beater.add(current_app._get_current_object(), self.run_id, self.attempt, self.cancel_event, self.interval_s)
        return self

    def __exit__(self, *exc):
        _beater.remove(self.run_id)
        return False
