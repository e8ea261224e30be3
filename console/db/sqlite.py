"""SQLite as Rebound uses it: WAL, foreign keys, and short lock waits on every connection."""

from sqlalchemy import event

from console.db import sqlite_busy
from console.extensions import db


def init_app(app) -> None:
    """Set Rebound's pragmas on every new SQLite connection of the app's engine."""
    with app.app_context():
        engine = db.engine
    if engine.dialect.name == "sqlite" and not event.contains(engine, "connect", _pragmas):
        event.listen(engine, "connect", _pragmas)


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
