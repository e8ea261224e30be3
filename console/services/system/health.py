"""A cheap check of the two things every process depends on."""

import shutil
import sqlite3

import redis
from sqlalchemy import text

from console.db.sqlite import database_file
from console.extensions import db

# SQLite on a full disk still answers reads, so SELECT 1 said ok while every submit and outcome failed (a resilience
# walk filled the disk): below this much free space next to the database file, the database is reported full.
MIN_FREE_BYTES = 16 * 1024 * 1024


def check(redis_client) -> dict:
    """Ping the database and Redis; report each as ok or the error."""
    report = {}
    try:
        db.session.execute(text("SELECT 1"))
        report["database"] = _room() or _writable() or "ok"
    except Exception as exc:  # noqa: BLE001 - any failure is the answer we report
        report["database"] = f"error: {type(exc).__name__}"
        db.session.rollback()
    try:
        redis_client.ping()
        report["redis"] = "ok"
    except (redis.RedisError, OSError) as exc:
        report["redis"] = f"error: {type(exc).__name__}"
    report["status"] = "ok" if all(v == "ok" for v in report.values()) else "degraded"
    return report


def _room() -> str | None:
    """Say when a SQLite database's disk is (nearly) full; a PostgreSQL server's disk is not this host's to see."""
    engine = db.engine
    path = database_file(engine.url) if engine.dialect.name == "sqlite" else None
    if path is None:
        return None
    free = shutil.disk_usage(path.parent).free
    if free >= MIN_FREE_BYTES:
        return None
    return f"error: disk full ({free // 1024 // 1024} MiB free; writes fail until space is freed)"


def _writable() -> str | None:
    """Say when a SQLite database refuses writes: a lock held past a writer's wait answered SELECT 1 all along, so
    /healthz said ok while every submit was a 503 (helper 162). The write lock is taken and let go at once."""
    if db.engine.dialect.name != "sqlite":
        return None
    connection = db.engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute("ROLLBACK")
    except sqlite3.OperationalError as refused:
        return f"error: writes refused ({refused})"
    finally:
        connection.close()
    return None
