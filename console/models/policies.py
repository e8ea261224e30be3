"""Retry policies and their versions (a run records the version it used)."""

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class RetryPolicyRecord(db.Model):
    __tablename__ = "retry_policies"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(255), default="")
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    versions = relationship("PolicyVersion", back_populates="policy", order_by="PolicyVersion.version")


class PolicyVersion(db.Model):
    __tablename__ = "policy_versions"
    __table_args__ = (UniqueConstraint("policy_id", "version"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    policy_id: Mapped[int] = mapped_column(ForeignKey("retry_policies.id"))
    version: Mapped[int] = mapped_column(Integer)
    spec = mapped_column(JSON, nullable=False)
    created_by: Mapped[str] = mapped_column(String(80), default="system")
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    policy = relationship(RetryPolicyRecord, back_populates="versions")
