"""The numbers on the Overview page."""

from datetime import timedelta

import redis
from sqlalchemy import func, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, SlaBreach
from console.models.runs import RARE
from console.models.runs import live as live_runs
from console.services.engine import breaker_admin, breakers
from console.services.reports import read

LIVE_STATUSES = ("pending", "running", "retry_wait", "compensating")


def _scoped(query, model, tenant_id: int | None):
    return query if tenant_id is None else query.where(model.tenant_id == tenant_id)


def counters(tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> dict:
    """Count live runs by status, open dead letters, and the last day's outcomes."""
    live = dict.fromkeys(LIVE_STATUSES, 0)
    rows = db.session.execute(_scoped(
        select(Run.status, func.count()).where(Run.status.in_(LIVE_STATUSES), live_runs()).group_by(Run.status),
        Run, tenant_id))
    live.update(dict(rows.all()))
    since = clock() - timedelta(hours=24)
    # Every status a run ends in: succeeded, or one of the rare ones (failed, dead, cancelled, compensated, …).
    ended = ("succeeded", *RARE)
    finished = dict(db.session.execute(_scoped(
        select(Run.status, func.count()).where(Run.finished_at >= since, Run.status.in_(ended))
        .group_by(Run.status),
        Run, tenant_id)).all())
    dead_open = db.session.execute(_scoped(
        select(func.count()).select_from(DeadLetter).where(DeadLetter.status == "open"),
        DeadLetter, tenant_id)).scalar_one()
    done = sum(finished.values())
    return {
        **live,
        "dead_open": dead_open,
        "succeeded_24h": finished.get("succeeded", 0),
        "dead_24h": finished.get("dead", 0),
        "success_rate_24h": round(100 * finished.get("succeeded", 0) / done, 1) if done else None,
    }


def breakers_open(scope: int | None = None, clock: Clock = SYSTEM_CLOCK) -> int | None:
    """Count breakers not closed that the Breakers page shows to `scope`, or None when Redis cannot be read."""
    try:
        states = breakers.all_states(clock())
    except (redis.RedisError, OSError):
        return None
    return sum(1 for key in breaker_admin.visible(list(states), scope) if states[key].state != "closed")


def sla_breaches_today(tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> int:
    """Count SLA breaches recorded since midnight UTC."""
    midnight = clock().replace(hour=0, minute=0, second=0, microsecond=0)
    return db.session.execute(_scoped(select(func.count()).select_from(SlaBreach).where(
        SlaBreach.detected_at >= midnight), SlaBreach, tenant_id)).scalar_one()


FAILURE_KINDS = ("retry_wait", "dead", "failed")


def failures_per_minute(tenant_id: int | None, clock: Clock = SYSTEM_CLOCK, minutes: int = 60) -> list[dict]:
    """Count failed attempts per minute over the last hour, by kind (for the Overview chart)."""
    now = clock().replace(second=0, microsecond=0)
    since = now - timedelta(minutes=minutes - 1)
    query = select(RunEvent.at, RunEvent.kind).where(RunEvent.at >= since, RunEvent.kind.in_(FAILURE_KINDS),
                                                     RunEvent.reason != "breaker_open")
    if tenant_id is not None:
        query = query.join(Run, Run.id == RunEvent.run_id).where(Run.tenant_id == tenant_id)
    buckets = {since + timedelta(minutes=i): dict.fromkeys(FAILURE_KINDS, 0) for i in range(minutes)}
    for at, kind in db.session.execute(query.limit(200_000)):
        minute = at.replace(second=0, microsecond=0)
        if minute in buckets:
            buckets[minute][kind] += 1
    return [{"minute": minute, **counts} for minute, counts in buckets.items()]


def recent_dead_letters(tenant_id: int | None, limit: int = 8) -> list[DeadLetter]:
    """Return the newest open dead letters."""
    query = select(DeadLetter).where(DeadLetter.status == "open").order_by(DeadLetter.id.desc()).limit(limit)
    return db.session.execute(_scoped(query, DeadLetter, tenant_id)).scalars().all()


HISTORY = {"24h": 24, "7d": 7 * 24}
HISTORY_MEASURES = ("succeeded", "attempts_failed", "dead")


def history(window: str, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> list[dict]:
    """Runs succeeded, attempts failed and runs dead per hour over the last 24 h or 7 d, from the rollups."""
    hours = HISTORY.get(window, HISTORY["24h"])
    end = clock().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=hours)
    found = read.hourly(start, end, tenant_id, HISTORY_MEASURES)
    empty = dict.fromkeys(HISTORY_MEASURES, 0)
    return [{"hour": start + timedelta(hours=i), **found.get(start + timedelta(hours=i), empty)} for i in range(hours)]
