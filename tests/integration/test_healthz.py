"""/healthz: what a load balancer or the supervisor learns from it."""

from collections import namedtuple

import pytest

from console.services.system import health

Usage = namedtuple("Usage", "total used free")


def test_healthz_says_ok_when_the_database_and_redis_answer(client):
    response = client.get("/healthz")
    assert (response.status_code, response.json) == (200, {"database": "ok", "redis": "ok", "status": "ok"})


@pytest.mark.sqlite_only
def test_a_full_disk_under_sqlite_is_degraded_though_reads_still_work(client, monkeypatch):
    """SELECT 1 answered on a full disk, so /healthz said ok while every submit and outcome failed."""
    real = health.shutil.disk_usage
    monkeypatch.setattr(health.shutil, "disk_usage", lambda path: Usage(real(path).total, real(path).total,
                                                                      3 * 1024 * 1024))
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json["database"] == "error: disk full (3 MiB free; writes fail until space is freed)"
    assert response.json["status"] == "degraded"


@pytest.mark.sqlite_only
def test_a_write_lock_held_past_a_writers_wait_is_degraded_though_reads_still_work(client, app, monkeypatch):
    """SELECT 1 answered through a 90-s write lock, so /healthz said ok while every submit was a 503 (helper 162)."""
    import sqlite3

    from console.db import sqlite_busy
    from console.db.sqlite import database_file
    from console.extensions import db

    monkeypatch.setattr(sqlite_busy, "TIMEOUT_S", 0.2)  # a writer's wait, shortened
    holder = sqlite3.connect(database_file(db.engine.url), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        response = client.get("/healthz")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert response.status_code == 503
    assert response.json["database"] == "error: writes refused (database is locked)"
    assert client.get("/healthz").json["database"] == "ok"
