"""Triggers whose incident was resolved before they went (a work order closed, a breaker closed): not sent, so a
resolved incident stays resolved."""

from datetime import datetime

from sqlalchemy import select, update

from console.extensions import db
from console.models import OutboxMessage, WorkOrder
from console.services.delivery import losses, notice


def closed_before_sent(message: OutboxMessage) -> str | None:
    """Say why a trigger need not go: its work order was closed (and its resolve queued) since it was queued, or its
    circuit breaker closed (or was reset) since it last opened.

    A dead-letter alert held back to gather a storm, a breaker's reopening held as a repeat, or a work-order request
    not yet delivered, would otherwise open the incident or the ticket again after the close resolved it (None: it
    must go out)."""
    payload = message.payload or {}
    if message.kind == "alert" and payload.get("rule") == "breaker_opened" and not payload.get("alert_rule"):
        return _breaker_closed_since(message)
    order_id = payload.get("work_order_id")
    triggers = message.kind == "workorder" or (message.kind == "alert" and payload.get("rule") in notice.DEAD_RULES)
    if not triggers or not order_id:
        return None
    closed_at = db.session.execute(select(WorkOrder.closed_at).where(
        WorkOrder.id == order_id, WorkOrder.status == "closed")).scalar_one_or_none()
    if closed_at is None:
        return None
    what = "its request to the work-order system" if message.kind == "workorder" else "this alert"
    return (f"work order #{order_id} was closed at {closed_at:%Y-%m-%d %H:%M} UTC and its incident resolved: {what} "
            "would open it again")


def _breaker_closed_since(message: OutboxMessage) -> str | None:
    """Say that the breaker closed after the opening this alert tells of (its latest, merged in), else None."""
    # A reopening held as a repeat went out minutes after a person's reset had resolved the incident: PagerDuty
    # was paged for a breaker already closed, and nothing would resolve it again (helper 108).
    opened_at = (message.payload or {}).get("at")
    resolved_at = db.session.execute(select(OutboxMessage.created_at).where(
        OutboxMessage.dedup_key == f"resolve:{notice.incident_key(message)}")
        .order_by(OutboxMessage.created_at.desc()).limit(1)).scalar_one_or_none()
    if resolved_at is None or opened_at is None or resolved_at < datetime.fromisoformat(opened_at):
        return None
    return (f"the circuit breaker closed at {resolved_at:%Y-%m-%d %H:%M:%S} UTC, after this opening, and its incident "
            "was resolved: this alert would open it again")


def retire(order_id: int, now) -> None:
    """Retire a closing work order's triggers that failed for good (in the caller's transaction): they are never
    sent now, so they are no longer lost, and the "delivery failed" incident they held open is resolved once nothing
    else of their kind is lost (it stayed open for good, its Send again refused)."""
    failed = db.session.execute(select(OutboxMessage).where(
        OutboxMessage.status == "failed", OutboxMessage.kind.in_(("workorder", "alert")),
        OutboxMessage.payload["work_order_id"].as_integer() == order_id)).scalars().all()
    kinds = set()
    for message in failed:
        reason = closed_before_sent(message)
        # Guarded: a Send again pressed meanwhile moved it on, and keeps it.
        if reason and db.session.execute(
                update(OutboxMessage).where(OutboxMessage.id == message.id, OutboxMessage.status == "failed")
                .values(status="skipped", last_error=f"not sent: {reason}")
                .execution_options(synchronize_session=False)).rowcount:
            kinds.add(message.kind)
    for kind in sorted(kinds):
        losses.after_resent(kind, now, repaired="has been sent again and delivered, or was for a work order closed "
                                                 "since")
