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
