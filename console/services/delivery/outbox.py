"""Alerts and work-order requests, written as rows in the same transaction as their cause."""

from datetime import datetime

from sqlalchemy import select, text, update

from console.db.upsert import insert_for
from console.extensions import db
from console.models import OutboxMessage
from console.models.recovery import PENDING_MESSAGE

OUTBOX = OutboxMessage.__table__


def add(kind: str, dedup_key: str, payload: dict, now: datetime, *, tenant_id: int | None = None,
        channel: str = "default", occurrences: int = 1) -> OutboxMessage | None:
    """Queue a message for delivery; a pending one with the same key counts `occurrences` more (and takes the
    newer payload). Return the new message, or None when it was merged into one already pending."""
    connection = db.session.connection()
    # Into the pending one first: an insert that finds it spends a number of PostgreSQL's sequence (a storm's next
    # message after #74 was #374; helper 143).
    if connection.execute(update(OUTBOX).where(OUTBOX.c.dedup_key == dedup_key, OUTBOX.c.status == "pending").values(
            occurrences=OUTBOX.c.occurrences + occurrences, payload=payload)).rowcount:
        return None
    # Else one statement against the unique index on pending keys: two writers cannot both insert (READ COMMITTED).
    statement = insert_for(connection)(OUTBOX).values(
        kind=kind, channel=channel, dedup_key=dedup_key, payload=payload, tenant_id=tenant_id, occurrences=occurrences,
        status="pending", attempts=0, created_at=now, next_attempt_at=now)
    statement = statement.on_conflict_do_update(
        index_elements=[OUTBOX.c.dedup_key], index_where=text(PENDING_MESSAGE),
        set_={"occurrences": OUTBOX.c.occurrences + occurrences, "payload": statement.excluded.payload})
    row = connection.execute(statement.returning(OUTBOX.c.id, OUTBOX.c.occurrences)).one()
    return db.session.get(OutboxMessage, row.id) if row.occurrences == occurrences else None


def dead_letters_key(tenant_id: int, fingerprint: str, work_order_id: int | None) -> str:
    """Name the alert of an error group's dead letters while one work order tracks them.

    The work order is in the key: a new work order's first letter merged into the pending repeat of its group's
    closed one, waited out that repeat's hold (minutes) and showed on the closed order's page (helper 108).
    """
    return f"dead:{tenant_id}:{fingerprint}:wo{work_order_id or 0}"


def resolve(key: str, title: str, summary: str, now: datetime, *, tenant_id: int | None = None,
            **details) -> OutboxMessage | None:
    """Queue a resolve for the incident `key` (PagerDuty resolve, a note in Slack), in the caller's transaction."""
    return add("resolve", f"resolve:{key}", {
        "rule": "resolved", "incident_key": key, "title": title, "summary": summary, "tenant_id": tenant_id,
        **details}, now, tenant_id=tenant_id)


def acknowledge(key: str, title: str, summary: str, now: datetime, *, tenant_id: int | None = None,
                **details) -> OutboxMessage | None:
    """Queue an acknowledgement of the incident `key` (PagerDuty acknowledge: its escalation stops), in the caller's
    transaction."""
    return add("acknowledge", f"acknowledge:{key}", {
        "rule": "acknowledged", "incident_key": key, "title": title, "summary": summary, "tenant_id": tenant_id,
        **details}, now, tenant_id=tenant_id)


def pending(limit: int = 100) -> list[OutboxMessage]:
    """Return messages waiting for delivery, oldest first."""
    return db.session.execute(select(OutboxMessage).where(OutboxMessage.status == "pending")
                              .order_by(OutboxMessage.id).limit(limit)).scalars().all()
