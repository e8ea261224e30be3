"""Where alerts and work orders go: channel settings saved in the console, and every delivery attempt."""

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class ChannelSetting(db.Model):
    """A channel's target as set in Admin → Channels; an empty field falls back to the REBOUND_* variable."""

    __tablename__ = "channel_settings"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    # Sealed like the secret: a Slack incoming webhook's URL is its credential.
    url: Mapped[str | None] = mapped_column(Text)
    # PagerDuty's routing key or the webhook's HMAC secret, sealed (console/services/sealing.py); never rendered,
    # never logged. Text: the sealed form of a 500-character secret is about 770 characters.
    secret: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_by: Mapped[str] = mapped_column(String(80), default="")


class Delivery(db.Model):
    """One attempt to hand one outbox message to one channel (or a hold of a repeated alert)."""

    __tablename__ = "deliveries"
    __table_args__ = (Index("ix_deliveries_channel_id", "channel", "id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    outbox_id: Mapped[int] = mapped_column(ForeignKey("outbox.id"), index=True)
    channel: Mapped[str] = mapped_column(String(32))
    attempt: Mapped[int] = mapped_column(Integer)
    # sent | failed | held (a repeat of an alert delivered moments ago, kept back to gather its count) | not_tried (the
    # channel gave no answer moments ago: this attempt did not wait on it)
    outcome: Mapped[str] = mapped_column(String(16))
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
