"""Settings an admin changes in the console (Admin → Settings); code declares each one and its default."""

from sqlalchemy import JSON, String
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class ConsoleSetting(db.Model):
    """One saved value; a setting without a row has its declared default."""

    __tablename__ = "console_settings"
    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    value = mapped_column(JSON, nullable=False)
    updated_by: Mapped[str] = mapped_column(String(80), default="")
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
