"""Conflict templates and their versions: planner rules that tasks reference instead of repeating them."""

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class ConflictTemplate(db.Model):
    """Shared by every tenant, like retry policies: one name, one set of rules."""

    __tablename__ = "conflict_templates"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(255), default="")
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)


class ConflictTemplateVersion(db.Model):
    __tablename__ = "conflict_template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("conflict_templates.id"))
    version: Mapped[int] = mapped_column(Integer)
    rules = mapped_column(JSON, nullable=False)
    created_by: Mapped[str] = mapped_column(String(80), default="system")
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    # How many tasks the save changed, as the editor saw it in the preview.
    tasks_changed: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
