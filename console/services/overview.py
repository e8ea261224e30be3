"""The numbers on the Overview page."""

from datetime import timedelta

from sqlalchemy import func, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run

LIVE_STATUSES = ("pending", "running", "retry_wait", "compensating")


def _scoped(query, model, tenant_id: int | None):
    return query if tenant_id is None else query.where(model.tenant_id == tenant_id)


def counters(tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> dict:
    """Count live runs by status, open dead letters, and the last day's outcomes."""
    live = dict.fromkeys(LIVE_STATUSES, 0)
    rows = db.session.execute(_scoped(
        select(Run.status, func.count()).where(Run.status.in_(LIVE_STATUSES)).group_by(Run.status),
        Run, tenant_id))
    live.update(dict(rows.all()))
    since = clock() - timedelta(hours=24)
    finished = dict(db.session.execute(_scoped(
        select(Run.status, func.count()).where(Run.finished_at >= since, Run.status.in_(
            ("succeeded", "dead", "compensated", "cancelled"))).group_by(Run.status),
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


def recent_dead_letters(tenant_id: int | None, limit: int = 8) -> list[DeadLetter]:
    """Return the newest open dead letters."""
    query = select(DeadLetter).where(DeadLetter.status == "open").order_by(DeadLetter.id.desc()).limit(limit)
    return db.session.execute(_scoped(query, DeadLetter, tenant_id)).scalars().all()
