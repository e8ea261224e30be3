"""What a handler is given: its input, its identity for idempotency, and a way to report progress."""

import contextlib
import signal
import threading
from dataclasses import dataclass, field

from sqlalchemy import update

from console import metrics
from console.domain.clock import utcnow
from console.domain.statuses import IN_WORK
from console.extensions import db
from console.models import Run

PROGRESS_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '1s'"


@dataclass
class HandlerContext:
    run_id: int
    tenant: str
    task: str | None
    handler: str
    params: dict
    attempt: int
    series: int
    execution: int  # attempts over every series of this run
    idempotency_key: str
    retry_token: str
    trace_id: str
    timeout_s: int
    undo_attempt: int = 0  # which try of the undo step this is (1, 2, ...); 0 while the handler itself runs
    cancel_event: threading.Event = field(default_factory=threading.Event)
    progress_failures: int = 0
    # The handler saw a cancel (cancelled() told it so): its return then is a stop, not its work done.
    cancel_seen: bool = False

    def progress(self, percent: int, message: str = "") -> None:
        """Record progress (0-100) and a short message; visible in the console at once."""
        percent = max(0, min(100, int(percent)))
        # Attempts as well as failures, for the write-back failure rate (alert rule progress_write_failure_rate).
        at = utcnow()
        with _timeout_held():
            # Counted inside the hold too: the count's Redis write swallows its errors, the timeout's among them when
            # it landed there, and the handler ran on past its timeout (seen under load in session 47).
            metrics.PROGRESS_WRITES.inc_now(at=at, kind="progress")
            try:
                # Its own short transaction, so progress is visible while the handler still runs.
                with db.engine.begin() as connection:
                    if connection.dialect.name == "postgresql":
                        # The timeout is held while this runs: a row another writer holds long must cost a lost
                        # write, not the handler's timeout (SQLite's busy handler gives up by itself).
                        connection.exec_driver_sql(PROGRESS_LOCK_TIMEOUT)
                    # Compensation steps report through the same context while the run is compensating.
                    connection.execute(update(Run).where(Run.id == self.run_id, Run.status.in_(IN_WORK))
                                       .values(progress=percent, progress_message=message[:255]))
            except Exception:  # noqa: BLE001 - a lost progress write must not fail the work itself
                self.progress_failures += 1
                metrics.PROGRESS_WRITE_FAILURES.inc_now(at=at, kind="progress")

    def cancelled(self) -> bool:
        """Tell whether someone asked to cancel this run; long handlers should check it and stop."""
        if self.cancel_event.is_set():
            self.cancel_seen = True
            return True
        return False


@contextlib.contextmanager
def _timeout_held():
    """Hold back the handler's timeout (SIGALRM) for the block: it stops the handler right after, not inside it.

    The timeout raises an exception wherever the handler is. Raised inside a progress write, it was caught there as a
    lost write, and the handler ran on past its timeout (found in session 15); raised inside the pool or the driver it
    could leave either half-way. The signal's Python handler is swapped for one that only notes it, and the real one
    runs when the block ends. Blocking the signal in this thread was not enough: the kernel then hands it to another
    thread of the process, and Python still runs its handler here, inside the driver (a commit broken half-way left a
    timed-out run running, seen under load in session 41).
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGALRM) is None:
        yield  # Python runs its handlers in the main thread only, and cannot swap one it did not install
        return
    noted: list[tuple] = []
    stop = signal.signal(signal.SIGALRM, lambda *fired: noted.append(fired))
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, stop)
        if noted and callable(stop):
            stop(*noted[0])
        elif noted and stop == signal.SIG_DFL:
            signal.raise_signal(signal.SIGALRM)
