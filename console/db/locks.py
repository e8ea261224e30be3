"""Serialise a read-then-write section across processes, on either database, until the transaction ends."""

from sqlalchemy import text

from console.extensions import db

ADVISORY = text("SELECT pg_advisory_xact_lock(hashtext(:name))")
# Any write statement, even one that matches no row, takes SQLite's one write lock until the commit.
SQLITE_WRITE_LOCK = text("UPDATE tenants SET id = id WHERE 0 = 1")


def hold(name: str) -> None:
    """Wait for, then hold until commit or rollback, the lock called `name`; the caller's reads after it are fresh.

    PostgreSQL: a transaction-scoped advisory lock (READ COMMITTED gives each later statement a new snapshot, so
    what the previous holder committed is seen). SQLite: the database's write lock, which is wider but the same.
    """
    if db.engine.dialect.name == "postgresql":
        db.session.execute(ADVISORY, {"name": name})
    else:
        db.session.execute(SQLITE_WRITE_LOCK)
