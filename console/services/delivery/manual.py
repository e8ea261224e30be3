"""What admins do to delivery by hand: send a test alert to one channel, send a failed message again."""

import uuid

from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Delivery, OutboxMessage, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.delivery import closed_orders, outbox, targets
from console.services.delivery.dispatch import claim_next, configured_routes, deliver, route
from console.services.errors import Conflict, NotFound


def send_test(name: str, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> tuple[OutboxMessage, Delivery | None]:
    """Send a test alert to one channel now; return the message and its delivery (None if another deliverer took it)."""
    target = targets.get(name)
    if not target.configured:
        raise Conflict(f"{target.spec.label} is not configured: {target.missing}")
    now = clock()
    message = outbox.add("test", f"test:{name}:{uuid.uuid4().hex}", {"rule": "test", "requested_by": actor.name},
                         now, channel=name)
    db.session.flush()
    audit.record(db.session, actor, "channel.test", "channel", name, after={"target": target.masked_url,
                                                                            "outbox_id": message.id}, clock=clock)
    db.session.commit()
    message_id = message.id
    claim = claim_next(now, message_id=message_id)
    if claim is not None:
        deliver(claim, clock, probe=True)  # a test tries a channel even while it is silent
    db.session.expire_all()
    last = db.session.execute(select(Delivery).where(Delivery.outbox_id == message_id)
                              .order_by(Delivery.id.desc()).limit(1)).scalar_one_or_none()
    return db.session.get(OutboxMessage, message_id), last


def redeliver(message_id: int, actor: Actor, *, tenant_id: int | None = None,
              clock: Clock = SYSTEM_CLOCK) -> OutboxMessage:
    """Send a failed (or skipped) message again from its first attempt, e.g. once its channel is fixed."""
    message = db.session.get(OutboxMessage, message_id)
    if message is None or (tenant_id is not None and message.tenant_id != tenant_id):
        raise NotFound(f"no outbox message with id {message_id}")
    if message.kind == "test":
        # A test checks a channel as it is now; sending an old one again would pass it off as an alert.
        raise Conflict(f"message {message_id} is a test alert; send a new test from its channel instead", "kind")
    if closed := closed_orders.closed_before_sent(message):
        raise Conflict(f"{closed}; it is not sent again", "status")
    if not configured_routes(message):
        # It would be skipped again at once, after a page saying it goes out within seconds (helper 142).
        raise Conflict(f"no channel it goes to is set up ({', '.join(route(message)) or 'none'}): an admin sets "
                       "one up under Admin → Channels; then send it again", "channel")
    before = message.status
    waiting = db.session.execute(select(OutboxMessage.id).where(
        OutboxMessage.dedup_key == message.dedup_key, OutboxMessage.status == "pending",
        OutboxMessage.id != message_id)).scalar_one_or_none()
    if waiting is not None:
        # One pending message per key (a unique index): the one waiting already carries this alert's news.
        raise Conflict(f"message #{waiting} with the same key is already waiting to be sent; it goes out in this "
                       "one's place", "status")
    changed = db.session.execute(
        update(OutboxMessage).where(OutboxMessage.id == message_id, OutboxMessage.status.in_(("failed", "skipped")))
        # Marked, so its delivery resolves the "delivery failed" incident it caused once nothing of its kind is lost.
        .values(status="pending", attempts=0, next_attempt_at=clock(), last_error=None,
                payload={**(message.payload or {}), "resent_by": actor.name})
        .execution_options(synchronize_session=False)).rowcount
    if not changed:
        db.session.rollback()
        raise Conflict(f"message {message_id} is {before}; only failed or skipped messages can be sent again", "status")
    tenant = db.session.get(Tenant, message.tenant_id) if message.tenant_id else None
    audit.record(db.session, actor, "outbox.redeliver", "outbox", message_id, before={"status": before},
                 after={"status": "pending", "kind": message.kind}, tenant=tenant.name if tenant else None,
                 clock=clock)
    db.session.commit()
    db.session.refresh(message)
    return message
