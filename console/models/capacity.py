"""Capacity reservations: running slots and queued runs a tenant holds for a time range."""

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.extensions import db


class Reservation(db.Model):
    __tablename__ = "capacity_reservations"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    running_slots: Mapped[int] = mapped_column(Integer)
    queued_runs: Mapped[int] = mapped_column(Integer, default=0)
    starts_at = mapped_column(UTCDateTime, nullable=False)
    ends_at = mapped_column(UTCDateTime, nullable=False)
    reason: Mapped[str] = mapped_column(String(255))
    created_by: Mapped[str] = mapped_column(String(64))
    created_at = mapped_column(UTCDateTime, nullable=False)
    # Cancelled reservations stay as history; every reader asks for cancelled_at IS NULL.
    cancelled_at = mapped_column(UTCDateTime, nullable=True)
    cancelled_by: Mapped[str | None] = mapped_column(String(64), nullable=True)

    # Admission asks "which reservations hold now" on every claim: seek by end, then filter by start.
    __table_args__ = (Index("ix_capacity_reservations_ends_at", "ends_at", "starts_at"),)
