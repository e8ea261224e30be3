"""While a runbook runs: prove its worker is alive and keep its stored log current; keep a dry-run from writing."""

import contextlib
import logging
import threading

from flask import current_app
from sqlalchemy import event, update

from console.domain.clock import utcnow
from console.extensions import PINNED, db
from console.models import RunbookExecution
from console.services.errors import Conflict
from console.services.settings import setting

log = logging.getLogger("rebound.runbooks")
EXECUTIONS = RunbookExecution.__table__
WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "CREATE", "DROP", "ALTER", "TRUNCATE"})
# The page polls every second; the log reaches the database at least that often.
MAX_INTERVAL_S = 1.0


class DryRunWrote(Conflict):
    """A dry-run's code tried to write to the database; the write was refused, so nothing changed."""


class Beat:
    """A thread that writes the execution's heartbeat and new log lines on its own connection, every second.

    Its own connection and transaction: the log stays current while the runbook's work waits to commit, and a
    chunk that rolls back does not take the lines that explain it along.
    """

    def __init__(self, execution_id: int, ctx, status: str):
        self.execution_id, self.ctx, self.status = execution_id, ctx, status
        self.stop = threading.Event()
        self.written = -1
        self.thread: threading.Thread | None = None

    def __enter__(self):
        app = current_app._get_current_object()
        self.interval_s = min(MAX_INTERVAL_S, float(setting("HEARTBEAT_S")))
        self.thread = threading.Thread(target=self._run, args=(app,), name=f"runbook-{self.execution_id}",
                                       daemon=True)
        self.thread.start()
        return self

    def _run(self, app) -> None:
        with app.app_context():
            while not self.stop.wait(self.interval_s):
                self.flush()

    def flush(self) -> None:
        """Write the heartbeat, and the log if it grew, unless the execution left the status it runs in."""
        count = len(self.ctx.lines)
        values = {"heartbeat_at": utcnow()}
        if count != self.written:
            values["log"] = "\n".join(self.ctx.lines[:count])
        try:
            with db.engine.begin() as connection:
                connection.execute(update(EXECUTIONS).where(EXECUTIONS.c.id == self.execution_id,
                                                            EXECUTIONS.c.status == self.status).values(values))
            self.written = count
        except Exception as error:  # noqa: BLE001 - a missed beat is retried on the next tick
            log.debug("runbook execution %s: beat not written (%s)", self.execution_id, error)

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
        return False


def _refuse_writes(connection, cursor, statement, parameters, context, executemany) -> None:
    verb = statement.lstrip().split(None, 1)[0].upper() if statement and statement.strip() else ""
    if verb in WRITES:
        raise DryRunWrote(f"a dry-run may not change anything, and its code tried to ({statement.strip()[:120]}); "
                          "the write was refused and nothing changed: this is a bug in the runbook")


@contextlib.contextmanager
def read_only():
    """Run the block on a database connection that refuses every write: a dry-run changes nothing, whatever its code."""
    session = db.session()
    session.rollback()
    previous = session.info.get(PINNED)
    with db.engine.connect() as connection:
        event.listen(connection, "before_cursor_execute", _refuse_writes)
        session.info[PINNED] = connection
        try:
            yield
        finally:
            session.rollback()
            if previous is None:
                session.info.pop(PINNED, None)
            else:
                session.info[PINNED] = previous
            event.remove(connection, "before_cursor_execute", _refuse_writes)
