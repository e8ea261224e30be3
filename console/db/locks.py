"""Serialise a read-then-write section across processes, on either database, until the transaction ends."""

import time
from datetime import datetime

from sqlalchemy import text

from console import metrics
from console.domain.clock import utcnow
from console.extensions import db

TRY_ADVISORY = text("SELECT pg_try_advisory_xact_lock(hashtext(:name))")
ADVISORY = text("SELECT pg_advisory_xact_lock(hashtext(:name))")
# Any write statement, even one that matches no row, takes SQLite's one write lock until the commit.
SQLITE_WRITE_LOCK = text("UPDATE tenants SET id = id WHERE 0 = 1")
# SQLite cannot say "taken" without waiting: a wait this long for its write lock counts as contention. An
# uncontended take is well under 1 ms; a shorter wait behind another writer is not told apart from a slow disk.
SQLITE_CONTENDED_MS = 20


def hold(name: str, at: datetime | None = None) -> None:
    """Wait for, then hold until commit or rollback, the lock called `name`; the caller's reads after it are fresh.

    PostgreSQL: a transaction-scoped advisory lock (READ COMMITTED gives each later statement a new snapshot, so
    what the previous holder committed is seen). SQLite: the database's write lock, which is wider but the same.
    Each call counts an attempt, and a contended one if the lock was taken (scheduler_lock_*_total, label: the
    name before its first colon), when the transaction commits, at `at` (the caller's clock) for the alert window.
    """
    if db.engine.dialect.name == "postgresql":
        # Try first, so a miss is counted for what it is before waiting like before.
        contended = not db.session.execute(TRY_ADVISORY, {"name": name}).scalar_one()
        if contended:
            db.session.execute(ADVISORY, {"name": name})
    else:
        started = time.perf_counter()
        db.session.execute(SQLITE_WRITE_LOCK)
        contended = (time.perf_counter() - started) * 1000 > SQLITE_CONTENDED_MS
    lock, at = name.split(":", 1)[0], at or utcnow()
    metrics.LOCK_ATTEMPTS.inc(at=at, lock=lock)
    if contended:
        metrics.LOCK_CONTENDED.inc(at=at, lock=lock)


def fresh_row(model, ident):
    """Return the row (or None), held until the transaction ends and read after taking the hold: what a change
    audits as "before" is what it replaced, never what a change at the same moment read too.

    PostgreSQL: SELECT … FOR UPDATE. SQLite: its write lock first, since a SELECT there takes none and reads
    outside the transaction the write begins.
    """
    if db.engine.dialect.name != "postgresql":
        db.session.execute(SQLITE_WRITE_LOCK)
    return db.session.get(model, ident, with_for_update=True, populate_existing=True)
