"""A cheap check of the two things every process depends on."""

import redis
from sqlalchemy import text

from console.extensions import db


def check(redis_client) -> dict:
    """Ping the database and Redis; report each as ok or the error."""
    report = {}
    try:
        db.session.execute(text("SELECT 1"))
        report["database"] = "ok"
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
