"""Alert rules: what is watched, the threshold an admin set, and whether it is firing now."""

from sqlalchemy import Boolean, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class AlertRule(db.Model):
    """One rule, evaluated every minute; its state flips between ok and firing, with an alert each way."""

    __tablename__ = "alert_rules"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(255))
    threshold: Mapped[float] = mapped_column(Float)
    # None for rules that look at the present only (e.g. the dead-letter queue's length).
    window_s: Mapped[int | None] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    state: Mapped[str] = mapped_column(String(16), default="ok")  # ok | firing
    # None until measured, while off, or when too few events were seen to judge a rate.
    last_value: Mapped[float | None] = mapped_column(Float)
    # What the last measurement counted, in words ("3 of 40 attempts failed").
    detail: Mapped[str | None] = mapped_column(String(255))
    changed_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    evaluated_at = mapped_column(UTCDateTime)
