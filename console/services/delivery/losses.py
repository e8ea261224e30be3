"""The "delivery failed" alert: raised when a message fails for good, dropped or resolved once what was lost got
through (an admin sent it again)."""

import logging
from datetime import datetime

from sqlalchemy import and_, func, or_, select

from console.domain.words import listed
from console.extensions import db
from console.models import AlertRule, OutboxMessage
from console.services.delivery import outbox
from console.services.delivery.targets import SPOKEN

log = logging.getLogger("rebound.delivery")
RULE = "delivery_failed"
WORK_ORDER_RULE = "workorder_failed"


def key(kind: str, channels: list[str]) -> str:
    return f"{RULE}:{kind}:{','.join(channels)}"


def raise_for(message_id: int, attempt: int, now: datetime, errors: dict[str, str], error: str,
              title: str | None) -> None:
    """Queue a "delivery failed" alert, except for a failed "delivery failed" alert: that stops here."""
    message = db.session.get(OutboxMessage, message_id)
    payload = message.payload or {}
    if payload.get("rule") == RULE:
        log.error("outbox %s: the 'delivery failed' alert itself could not be delivered: %s", message.id, error)
        return
    failed = sorted(errors)
    log.error("outbox %s (%s) failed for good after %s attempts: %s", message.id, message.kind, attempt, error)
    if message.kind == "workorder" and _rule_pages_for_work_orders():
        return  # one outage, one page: the "work-order creation failed" rule counts it and alerts
    outbox.add("alert", key(message.kind, failed), {
        "rule": RULE, "failed_outbox_id": message.id, "failed_kind": message.kind,
        "failed_rule": payload.get("rule"), "failed_title": title or payload.get("title"),
        "failed_channels": failed, "skip_channels": failed, "attempts": attempt, "error": error[:500],
        "work_order_id": payload.get("work_order_id") if message.kind == "workorder" else None,
        "tenant_id": message.tenant_id}, now, tenant_id=message.tenant_id)


def _rule_pages_for_work_orders() -> bool:
    """Tell whether the "work-order creation failed" alert rule is on: then it, not this alert, pages for them."""
    return bool(db.session.execute(select(AlertRule.enabled).where(AlertRule.key == WORK_ORDER_RULE)).scalar())


def overtaken(message: OutboxMessage) -> str | None:
    """Say why a "delivery failed" alert need not go out: every message of its kind that was lost has been sent
    again and got through before it did (None: it must go out)."""
    payload = message.payload or {}
    kind = payload.get("failed_kind")
    if payload.get("rule") != RULE or kind is None or _still_lost(kind):
        return None
    return (f"not sent: every {kind} message it tells of (#{payload.get('failed_outbox_id')}, the last) was sent "
            "again and delivered first")


def _still_lost(kind: str) -> bool:
    """Tell whether a message of this kind is failed, or sent again and not delivered yet."""
    resent = OutboxMessage.payload["resent_by"].as_string().is_not(None)
    return db.session.execute(select(OutboxMessage.id).where(
        OutboxMessage.kind == kind, OutboxMessage.payload["rule"].as_string().is_distinct_from(RULE),
        or_(OutboxMessage.status == "failed",
            and_(OutboxMessage.status.in_(("pending", "sending")), resent))).limit(1)).first() is not None


def after_resent(kind: str, now: datetime, repaired: str = "has been sent again and delivered") -> None:
    """Resolve the "delivery failed" incidents of a kind of message once a re-sent one got through (or a closed work
    order retired one) and no message of that kind stays failed: what they told of is repaired. Call in the
    transaction that records the delivery or the close."""
    if _still_lost(kind):
        return
    told = dict(db.session.execute(
        select(OutboxMessage.dedup_key, func.max(OutboxMessage.delivered_at))
        .where(OutboxMessage.kind == "alert", OutboxMessage.status == "delivered",
               OutboxMessage.dedup_key.startswith(f"{RULE}:{kind}:", autoescape=True))
        .group_by(OutboxMessage.dedup_key)).all())
    if not told:
        return
    resolves = {name.removeprefix("resolve:rebound-"): at for name, at in db.session.execute(
        select(OutboxMessage.dedup_key, func.max(OutboxMessage.created_at))
        .where(OutboxMessage.kind == "resolve",
               OutboxMessage.dedup_key.in_([f"resolve:rebound-{name}" for name in told]))
        .group_by(OutboxMessage.dedup_key)).all()}
    for name, delivered_at in told.items():
        if name in resolves and resolves[name] >= delivered_at:
            continue  # resolved since it last went out
        failed = name.split(":", 2)[2].split(",")
        title, what = (("Work order creation failed", "work order requests") if kind == "workorder"
                       else ("Alert delivery failed", "alerts"))
        outbox.resolve(f"rebound-{name}", title, f"Every one of the {what} that could not be delivered to "
                       f"{listed([SPOKEN.get(one, one) for one in failed])} {repaired}.", now, skip_channels=failed)
