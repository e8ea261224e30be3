"""SQLite as Rebound uses it: WAL, foreign keys, and short lock waits on every connection."""

from pathlib import Path

from sqlalchemy import event

from console import private
from console.db import sqlite_busy
from console.extensions import db


def init_app(app) -> None:
    """Create the database file private to its owner, and set Rebound's pragmas on every new connection."""
    with app.app_context():
        engine = db.engine
    if engine.dialect.name != "sqlite":
        return
    path = database_file(engine.url)
    if path is not None:
        # SQLite would create it 0644 (less the umask); its -wal and -shm files take the database file's mode.
        private.create_file(path)
    if not event.contains(engine, "connect", _pragmas):
        event.listen(engine, "connect", _pragmas)


def database_file(url) -> Path | None:
    """Return the SQLite file of an engine URL, or None for an in-memory database."""
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or url.query.get("mode") == "memory":
        return None
    return Path(database)


def _pragmas(dbapi_connection, connection_record) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the web, workers and scheduler read while one of them writes.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
    if isinstance(dbapi_connection, sqlite_busy.Connection):  # not when REBOUND_SQLITE_BUSY_HANDLER=0
        sqlite_busy.install(dbapi_connection)
