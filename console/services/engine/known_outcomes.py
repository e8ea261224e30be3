"""Outcomes a worker knows but the database refused: kept in Redis until the reconciler parks their runs."""

import json

from console.redis_conn import get_redis

KEY = "rebound:known-outcome:{}:{}"
KEEP_S = 7 * 24 * 3600


def remember(run_id: int, attempt: int, code: str, message: str) -> None:
    """Keep what attempt `attempt` of the run ended with, so no one retries it as a lost worker."""
    get_redis().set(KEY.format(run_id, attempt), json.dumps({"code": code, "message": message}), ex=KEEP_S)


def recall(run_id: int, attempt: int) -> dict | None:
    """Return the outcome a worker left for this attempt, if any."""
    raw = get_redis().get(KEY.format(run_id, attempt))
    return json.loads(raw) if raw else None


def forget(run_id: int, attempt: int) -> None:
    """Drop an outcome once the run is parked."""
    get_redis().delete(KEY.format(run_id, attempt))
