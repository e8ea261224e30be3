"""Quota classes: named limits on how many runs of the tasks in a class run at once, across tasks and tenants."""

from sqlalchemy import CheckConstraint, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class QuotaClass(db.Model):
    """Shared by every tenant, like conflict templates; tasks name it in `tasks.quota_class`."""

    __tablename__ = "quota_classes"
    __table_args__ = (CheckConstraint("max_running >= 1", name="max_running_positive"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    max_running: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(255), default="")
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
