"""What the console shows about delivery: each channel's last attempt, the backlog, failures and alert latency."""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select

from console.extensions import db
from console.models import Delivery, OutboxMessage
from console.services.delivery import targets
from console.services.delivery.notice import DEAD_RULES

LATENCY_WINDOW = timedelta(hours=24)
LATENCY_ROWS_CAP = 2_000  # the latest alerts of the window: plenty for a p95
# The dead letter whose alert an outbox row is (JSON element access, the same on SQLite and PostgreSQL).
ALERTED_LETTER = OutboxMessage.payload["dead_letter_id"].as_integer()


@dataclass(frozen=True)
class ChannelState:
    target: targets.Target
    last: Delivery | None  # of an alert or work order: a test alert is no delivery people count on
    last_sent: Delivery | None
    last_test: Delivery | None  # of the latest "Send test alert"

    @property
    def failing(self) -> bool:
        """Tell whether the channel's latest attempt, real or a test, failed: set up, yet not getting through."""
        latest = max((d for d in (self.last, self.last_test) if d is not None), key=lambda d: d.id, default=None)
        return latest is not None and latest.outcome not in ("sent", "held")


@dataclass(frozen=True)
class Latency:
    """Dead letter → delivered alert, over the first alert of each group (held repeats are left out)."""

    count: int
    p50_s: float | None
    p95_s: float | None
    max_s: float | None


@dataclass(frozen=True)
class Backlog:
    pending: int  # due now: the next tick sends them
    held: int  # repeats of an alert just delivered, waiting to go out with their count
    retrying: int
    sending: int
    failed_24h: int


def channels() -> list[ChannelState]:
    """Return each channel with its settings, its latest attempt and its latest test (three index lookups each)."""
    states = []
    for target in targets.all_targets().values():
        # Walks the channel's attempts newest first to the first that is not a test's: tests are a few of them. An
        # attempt that did not wait on it (silent since a timeout) is left out: the timeout is what people need.
        recent = (select(Delivery).join(OutboxMessage, OutboxMessage.id == Delivery.outbox_id)
                  .where(Delivery.channel == target.name, OutboxMessage.kind != "test",
                         Delivery.outcome != "not_tried")
                  .order_by(Delivery.id.desc()).limit(1))
        last = db.session.execute(recent).scalar_one_or_none()
        last_sent = last if last is not None and last.outcome == "sent" else db.session.execute(
            recent.where(Delivery.outcome == "sent")).scalar_one_or_none()
        states.append(ChannelState(target, last, last_sent, _last_test(target.name)))
    return states


def _last_test(channel: str) -> Delivery | None:
    # From the test messages (on the kind index): the channel's attempts may hold no test at all.
    message = (select(OutboxMessage.id).where(OutboxMessage.kind == "test", OutboxMessage.channel == channel)
               .order_by(OutboxMessage.id.desc()).limit(1).scalar_subquery())
    return db.session.execute(select(Delivery).where(Delivery.outbox_id == message)
                              .order_by(Delivery.id.desc()).limit(1)).scalar_one_or_none()


def _percentile(values: list[float], share: float) -> float | None:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return None
    return values[max(0, math.ceil(share * len(values)) - 1)]


def timed_alerts(start: datetime | None = None, end: datetime | None = None) -> list:
    """Return the conditions on outbox rows of the dead letters' alerts first taken by a channel in [start, end)
    whose latency is timed (here and in Reports): each raised by a dead letter itself, repeats held back to gather a
    count left out."""
    held = select(Delivery.id).where(Delivery.outbox_id == OutboxMessage.id, Delivery.outcome == "held").exists()
    # Latency ends when a person was first told: the first channel that took it. Not the last: a webhook that hung
    # for minutes made alerts PagerDuty had paged in a second read as minutes late; nor only delivered ones: an
    # alert another channel then failed for good was left out, so the card missed exactly the troubled hours.
    # An alert rule that counts dead letters carries no dead_letter_id: it times no letter's alert.
    found = [OutboxMessage.kind == "alert", OutboxMessage.first_sent_at.is_not(None),
             OutboxMessage.payload["rule"].as_string().in_(DEAD_RULES), ALERTED_LETTER.is_not(None), ~held]
    if start is not None:
        found.append(OutboxMessage.first_sent_at >= start)
    if end is not None:
        found.append(OutboxMessage.first_sent_at < end)
    return found


def latency(now: datetime, tenant_id: int | None = None, window: timedelta = LATENCY_WINDOW) -> Latency:
    """Return p50/p95 of alert latency (dead letter created → its alert's first channel took it) over the window's
    latest alerts."""
    query = (select(OutboxMessage.created_at, OutboxMessage.first_sent_at)
             .where(*timed_alerts(now - window)).order_by(OutboxMessage.first_sent_at.desc()).limit(LATENCY_ROWS_CAP))
    if tenant_id is not None:
        query = query.where(OutboxMessage.tenant_id == tenant_id)
    values = sorted(max(0.0, (told - created).total_seconds()) for created, told in db.session.execute(query))
    return Latency(len(values), _percentile(values, 0.5), _percentile(values, 0.95), values[-1] if values else None)


def backlog(now: datetime) -> Backlog:
    """Count messages due, held, retrying, in flight, and failed in the last 24 h (all on the status index)."""
    def count(*where) -> int:
        return db.session.execute(select(func.count()).select_from(OutboxMessage).where(*where)).scalar_one()

    return Backlog(
        pending=count(OutboxMessage.status == "pending", OutboxMessage.attempts == 0,
                      OutboxMessage.next_attempt_at <= now, OutboxMessage.last_error.is_(None)),
        held=count(OutboxMessage.status == "pending", OutboxMessage.attempts == 0, OutboxMessage.next_attempt_at > now,
                   OutboxMessage.last_error.is_(None)),
        # An attempt given back (its channel silent, never asked) leaves attempts at 0 and says why in last_error.
        retrying=count(OutboxMessage.status == "pending", or_(OutboxMessage.attempts > 0,
                                                               OutboxMessage.last_error.is_not(None))),
        sending=count(OutboxMessage.status == "sending"),
        # A failed test alert checked a channel; no alert was lost, so it counts on its channel only.
        failed_24h=count(OutboxMessage.status == "failed", OutboxMessage.next_attempt_at >= now - LATENCY_WINDOW,
                         OutboxMessage.kind != "test"))


def recent_failures(limit: int = 20) -> list[OutboxMessage]:
    """Return the latest messages that failed for good, newest first; a failed test shows on its channel instead."""
    return db.session.execute(select(OutboxMessage)
                              .where(OutboxMessage.status == "failed", OutboxMessage.kind != "test")
                              .order_by(OutboxMessage.next_attempt_at.desc()).limit(limit)).scalars().all()


def deliveries_of(message_ids: list[int], limit: int = 50) -> list[Delivery]:
    """Return the attempts made for these messages, newest first."""
    if not message_ids:
        return []
    return db.session.execute(select(Delivery).where(Delivery.outbox_id.in_(message_ids))
                              .order_by(Delivery.id.desc()).limit(limit)).scalars().all()
