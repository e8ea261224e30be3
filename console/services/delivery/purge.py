"""Purge settled outbox messages older than a cut-off: each goes to a JSON-lines export with its delivery attempts,
then is deleted with them."""

from datetime import datetime

from sqlalchemy import delete, select

from console.extensions import db
from console.models import Delivery, OutboxMessage
from console.services.system import exports

MESSAGES = OutboxMessage.__table__
DELIVERIES = Delivery.__table__
ID = MESSAGES.c.id
# Told (delivered) or never to be told (skipped: no channel was set for it). A failed message waits for a person's
# resend and the "work orders not delivered" rule counts it; pending and sending ones are still in flight.
SETTLED = ("delivered", "skipped")


def purgeable(cutoff: datetime, tenant_id: int | None):
    """Select the ids a purge with this cut-off would remove (one tenant's, or every tenant's for None)."""
    query = select(MESSAGES.c.id).where(MESSAGES.c.status.in_(SETTLED), MESSAGES.c.created_at < cutoff)
    if tenant_id is not None:
        query = query.where(MESSAGES.c.tenant_id == tenant_id)
    return query


def export_and_delete(message_ids: list[int], cutoff: datetime, out) -> list[dict]:
    """In the caller's transaction: write each message still purgeable to `out` (one JSON line with its deliveries,
    synced to disk), then delete it and them. Return the messages as exported; the caller commits, or truncates `out`
    and rolls back."""
    messages = exports.hold(MESSAGES, message_ids, MESSAGES.c.status.in_(SETTLED) & (MESSAGES.c.created_at < cutoff),
                            touch="status")  # a skipped message an admin resends meanwhile turns pending
    if not messages:
        return []
    held = [message["id"] for message in messages]
    connection = db.session.connection()
    attempts: dict[int, list[dict]] = {}
    for row in connection.execute(select(DELIVERIES).where(DELIVERIES.c.outbox_id.in_(held))
                                  .order_by(DELIVERIES.c.id)):
        attempts.setdefault(row.outbox_id, []).append(exports.plain(row))
    exports.write_synced(out, [{"message": message, "deliveries": attempts.get(message["id"], [])}
                               for message in messages])
    connection.execute(delete(DELIVERIES).where(DELIVERIES.c.outbox_id.in_(held)))
    connection.execute(delete(MESSAGES).where(MESSAGES.c.id.in_(held)))
    return messages
