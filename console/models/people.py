"""People, their roles, API tokens and tenants."""

from enum import StrEnum

from flask_login import UserMixin
from sqlalchemy import Boolean, ForeignKey, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    APPROVER = "approver"
    MANAGER = "manager"
    ADMIN = "admin"


class Tenant(db.Model):
    __tablename__ = "tenants"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    max_running: Mapped[int] = mapped_column(Integer, default=100)
    max_queued: Mapped[int] = mapped_column(Integer, default=10_000)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)


class User(UserMixin, db.Model):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default=Role.VIEWER)
    # None means every tenant; set, the person sees only that tenant's data.
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    last_login_at = mapped_column(UTCDateTime)
    # Part of every session's user id: raising it (logout, password, role, disable) ends every session of the user.
    session_generation: Mapped[int] = mapped_column(Integer, default=0, server_default="0", nullable=False)
    # When the person last read their own requests: answers after it are counted beside Approvals for them.
    requests_seen_at = mapped_column(UTCDateTime)
    # Set by an admin's reset: the password is one another person has seen, so the console asks for a new one first.
    must_change_password: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(),
                                                       nullable=False)
    tenant = relationship(Tenant)

    @property
    def is_active(self) -> bool:
        return self.active

    # This request's session (a random id given at login), not a column: its logout ends it alone.
    session_id = None

    def get_id(self) -> str:
        """Return what a session keeps: the id, the generation (so a cookie outlives no password or role change)
        and the session's own id (so one logout ends that session, and a copy of its cookie, only)."""
        return f"{self.id}:{self.session_generation}" + (f":{self.session_id}" if self.session_id else "")


class EndedSession(db.Model):
    """A console session someone logged out of: its cookie, and any copy of it, is refused from then on."""

    __tablename__ = "ended_sessions"
    session_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    # Kept as long as a cookie of it could still be accepted (the session lifetime), then pruned.
    ended_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)


class ApiToken(db.Model):
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(80), default="")
    # Only a SHA-256 of the token is kept; the prefix lets people tell tokens apart.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"))
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    last_used_at = mapped_column(UTCDateTime)
    revoked_at = mapped_column(UTCDateTime)
    expires_at = mapped_column(UTCDateTime)  # None: until revoked
    # The console form that issued it: the same form sent again (a reload) finds this token instead of a second one.
    issue_key: Mapped[str | None] = mapped_column(String(32), unique=True, index=True)
    user = relationship(User)
    tenant = relationship(Tenant)
