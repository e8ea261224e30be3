"""While a handler runs: prove the worker is alive, and notice a cancel request."""

import threading

from flask import current_app
from sqlalchemy import select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run


class Heartbeat:
    """A background thread that touches the run's heartbeat_at and watches cancel_requested."""

    def __init__(self, run_id: int, attempt: int, interval_s: float, cancel_event: threading.Event):
        self.run_id, self.attempt, self.interval_s = run_id, attempt, interval_s
        self.cancel_event = cancel_event
        self._stop = threading.Event()
        self._app = current_app._get_current_object()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-run-{run_id}", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        return False

    def _beat(self) -> None:
        with self._app.app_context():
            while not self._stop.wait(self.interval_s):
                try:
                    with db.engine.begin() as connection:
                        connection.execute(update(Run).where(
                            Run.id == self.run_id, Run.status == "running", Run.attempt == self.attempt
                        ).values(heartbeat_at=utcnow()))
                        if connection.execute(select(Run.cancel_requested).where(Run.id == self.run_id)).scalar():
                            self.cancel_event.set()
                except Exception:  # noqa: BLE001,S110 - a missed beat is retried on the next tick
                    continue
