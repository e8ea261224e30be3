"""The append-only, hash-chained audit log."""

from sqlalchemy import JSON, Integer, String, Text, event
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class AuditEntry(db.Model):
    __tablename__ = "audit_log"
    # The chain position is the row's identity: a surrogate id assigned by the database after the MAC is
    # computed could not be covered by it, and every column is (console/services/audit/chain.py).
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
    actor: Mapped[str] = mapped_column(String(80))
    actor_id: Mapped[int | None] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(80), index=True)
    target_type: Mapped[str] = mapped_column(String(40))
    target_id: Mapped[str] = mapped_column(String(80), default="")
    tenant: Mapped[str | None] = mapped_column(String(64))
    before = mapped_column(JSON)
    after = mapped_column(JSON)
    remote_addr: Mapped[str | None] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    note: Mapped[str | None] = mapped_column(Text)


class AuditHead(db.Model):
    """One row whose update serialises appends, so the chain never forks."""

    __tablename__ = "audit_head"
    id: Mapped[int] = mapped_column(primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    hash: Mapped[str] = mapped_column(String(64), default="0" * 64)
    # Rows before this seq were chained with the unkeyed SHA-256 of before the switch (legacy rows).
    keyed_from: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


@event.listens_for(AuditEntry, "before_update")
@event.listens_for(AuditEntry, "before_delete")
def _refuse_rewrite(mapper, connection, target):
    raise PermissionError("the audit log is append-only")
