"""What a runbook's code is given: typed params, dry-run or not, its tenant, and the means to log and record changes."""

import json
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import insert, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.secrets import redact
from console.extensions import db
from console.models import RunbookBackup, RunbookChange, RunbookExecution
from console.services.actor import Actor

MAX_LINES = 5000
MAX_LINE_CHARS = 2000
# Change rows kept per execution; a bulk runbook may touch more, and those are counted, not listed.
MAX_CHANGES = 10_000


def plain(value):
    """Return a value as JSON can store it (moments as ISO 8601 text)."""
    return json.loads(json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))


class RunbookContext:
    """One execution as its runbook sees it; a real run calls commit() after each piece of work (not the session's)."""

    def __init__(self, execution_id: int, *, dry_run: bool, tenant_id: int | None, actor: Actor, reason: str | None,
                 params: dict | None = None, lines: list[str] | None = None, clock: Clock = SYSTEM_CLOCK,
                 on_line: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic, requested_at: datetime | None = None):
        self.execution_id = execution_id
        self.dry_run = dry_run
        self.tenant_id = tenant_id  # None: every tenant (an unscoped person), or a system runbook
        self.actor = actor
        self.reason = reason
        self.params = params or {}
        self.lines = list(lines or [])
        self.clock = clock
        self.changes_total = 0
        self._on_line = on_line
        self._sleep = sleep
        self._requested_at = requested_at
        self.monotonic = monotonic  # the clock a runbook paces by; tests pass one that only their sleep moves
        self._kept = 0
        self._changes: list[dict] = []
        self._backups: list[dict] = []

    @property
    def now(self) -> datetime:
        return self.clock()

    @property
    def asked_at(self) -> datetime:
        """When the execution was requested: "older than N days" counts from here, so the run an approver allows
        hours later takes what its preview listed, not what crossed the line while the request waited."""
        return self._requested_at or self.now

    def log(self, message: str) -> None:
        """Write one line of the execution's log (the page shows it within a second)."""
        line = f"{self.clock():%H:%M:%S} {redact(str(message)[:MAX_LINE_CHARS])}"  # people read it: no secrets
        if len(self.lines) < MAX_LINES:
            self.lines.append(line)
        elif len(self.lines) == MAX_LINES:
            self.lines.append(f"… the log keeps its first {MAX_LINES} lines; later ones are not stored")
        if self._on_line is not None:
            self._on_line(line)

    def change(self, obj: str, object_id, field: str, before=None, after=None) -> None:
        """Record one change: made (a real run, kept with the next commit) or that would be made (a dry-run)."""
        self._changes.append({"object": obj, "object_id": str(object_id), "field": field, "before": plain(before),
                              "after": plain(after)})

    def recorded(self) -> list[dict]:
        """Return the changes recorded and not yet written (all of a dry-run's, until it finishes)."""
        return list(self._changes)

    def backup(self, obj: str, object_id, row: dict) -> None:
        """Keep a row as it was before this run changed it (a real run; kept with the next commit)."""
        if not self.dry_run:
            self._backups.append({"object": obj, "object_id": str(object_id), "row": plain(row)})

    def commit(self) -> None:
        """Commit the work done since the last commit together with the record of it; a dry-run commits nothing."""
        if self.dry_run:
            return
        self.write_records(planned=False)
        db.session.commit()

    def rollback(self) -> None:
        """Undo the work since the last commit; what it recorded did not happen either."""
        db.session.rollback()
        if not self.dry_run:
            self._changes.clear()
            self._backups.clear()

    def sleep(self, seconds: float) -> None:
        """Wait (pacing a rate); tests pass their own sleep."""
        if seconds > 0:
            self._sleep(seconds)

    def write_records(self, *, planned: bool) -> None:
        """Add the pending changes and backups to the caller's transaction, and the execution's count of changes."""
        room = max(0, MAX_CHANGES - self._kept)
        kept = [{"execution_id": self.execution_id, "planned": planned, **change} for change in self._changes[:room]]
        if kept:
            db.session.execute(insert(RunbookChange), kept)
        if self._backups:
            db.session.execute(insert(RunbookBackup), [{"execution_id": self.execution_id, **row}
                                                       for row in self._backups])
        self._kept += len(kept)
        self.changes_total += len(self._changes)
        if self._changes:
            db.session.execute(update(RunbookExecution).where(RunbookExecution.id == self.execution_id)
                               .values(changes_total=self.changes_total).execution_options(synchronize_session=False))
        self._changes.clear()
        self._backups.clear()
