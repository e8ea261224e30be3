"""Task definitions: what to run, where, when and under which policy."""

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class Task(db.Model):
    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(String(120))
    handler: Mapped[str] = mapped_column(String(120), index=True)
    params = mapped_column(JSON, default=dict, nullable=False)
    policy_id: Mapped[int | None] = mapped_column(ForeignKey("retry_policies.id"), index=True)
    policy_overrides = mapped_column(JSON, default=dict, nullable=False)
    cron: Mapped[str | None] = mapped_column(String(120))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    event: Mapped[str | None] = mapped_column(String(120), index=True)
    mutex_key: Mapped[str | None] = mapped_column(String(120))
    concurrency_policy: Mapped[str] = mapped_column(String(16), default="allow")
    window = mapped_column(JSON)
    jitter_s: Mapped[int] = mapped_column(Integer, default=0)
    debounce_s: Mapped[int] = mapped_column(Integer, default=0)
    sla = mapped_column(JSON)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # The conflict template the task references (no foreign key: SQLite adds the column without copying the table;
    # a template in use cannot be deleted, under the lock its saves take). The rule columns above hold the values in
    # force; `inherits` names those taken from the template, which a template save rewrites.
    template_id: Mapped[int | None] = mapped_column(Integer, index=True)
    inherits = mapped_column(JSON)
    # The quota class whose running slots the task's runs share (by name, like a template rule); admission counts
    # the running runs of the class's tasks, so it is indexed.
    quota_class: Mapped[str | None] = mapped_column(String(64), index=True)
    # A firing missed while no scheduler ran is caught up once if it is at most this old.
    misfire_grace_s: Mapped[int] = mapped_column(Integer, default=300, server_default="300")
    last_fired_for = mapped_column(UTCDateTime)
    # When its schedule last started: a resume, or a change of its cron or zone. The catch-up counts firings from here
    # on, as a pause skips the ones before and a new schedule's earlier firings were never due.
    resumed_at = mapped_column(UTCDateTime)
    missed_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    deleted_at = mapped_column(UTCDateTime)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    tenant = relationship("Tenant")
    policy = relationship("RetryPolicyRecord")


class SlaBreach(db.Model):
    """A run that started too late or did not succeed in time."""

    __tablename__ = "sla_breaches"
    __table_args__ = (UniqueConstraint("run_id", "kind"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), index=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    kind: Mapped[str] = mapped_column(String(16))  # start_delay | deadline
    late_by_s: Mapped[int] = mapped_column(Integer)
    detected_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
    escalated: Mapped[bool] = mapped_column(Boolean, default=False)


class EventReceipt(db.Model):
    """An event sent with an idempotency key that a task did not fire for (paused, debounced): what it answered.

    A run holds its key when the task fired; without these, the same event sent again after a resume or after the
    debounce fired the task the first send had not (helper 151)."""

    __tablename__ = "event_receipts"
    __table_args__ = (UniqueConstraint("tenant_id", "task_id", "idempotency_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    idempotency_key: Mapped[str] = mapped_column(String(200))  # the sender's own key
    status: Mapped[str] = mapped_column(String(16))  # paused | debounced
    received_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
