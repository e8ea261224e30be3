"""Alerts and work-order requests, written as rows in the same transaction as their cause."""

from datetime import datetime

from sqlalchemy import select, update

from console.extensions import db
from console.models import OutboxMessage


def add(kind: str, dedup_key: str, payload: dict, now: datetime, *, tenant_id: int | None = None,
        channel: str = "default") -> OutboxMessage | None:
    """Queue a message for delivery; a pending one with the same key just counts one more occurrence."""
    bumped = db.session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.dedup_key == dedup_key, OutboxMessage.status == "pending")
        .values(occurrences=OutboxMessage.occurrences + 1, payload=payload)
        .execution_options(synchronize_session=False)
    )
    if bumped.rowcount:
        return None
    message = OutboxMessage(kind=kind, channel=channel, dedup_key=dedup_key, payload=payload, tenant_id=tenant_id,
                            created_at=now, next_attempt_at=now)
    db.session.add(message)
    return message


def resolve(key: str, title: str, summary: str, now: datetime, *, tenant_id: int | None = None,
            **details) -> OutboxMessage | None:
    """Queue a resolve for the incident `key` (PagerDuty resolve, a note in Slack), in the caller's transaction."""
    return add("resolve", f"resolve:{key}", {
        "rule": "resolved", "incident_key": key, "title": title, "summary": summary, "tenant_id": tenant_id,
        **details}, now, tenant_id=tenant_id)


def pending(limit: int = 100) -> list[OutboxMessage]:
    """Return messages waiting for delivery, oldest first."""
    return db.session.execute(select(OutboxMessage).where(OutboxMessage.status == "pending")
                              .order_by(OutboxMessage.id).limit(limit)).scalars().all()
