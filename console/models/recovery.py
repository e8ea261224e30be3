"""Dead letters, work orders, approvals and runbook executions: the recovery side."""

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db

ACTIVE_WORK_ORDER = "status IN ('open', 'acknowledged')"
PENDING_MESSAGE = "status = 'pending'"
OPEN_LETTER = "status = 'open'"
PENDING_FIX = "status = 'pending' AND kind = 'dead_letter.fix_params'"  # the migration's text too


class WorkOrder(db.Model):
    __tablename__ = "work_orders"
    __table_args__ = (
        Index("ix_work_orders_status_fingerprint", "status", "fingerprint"),
        Index("ix_work_orders_status_id", "status", "id"),
        Index("ix_work_orders_tenant_status_id", "tenant_id", "status", "id"),
        # One active work order per error group, on any number of writers (parking inserts ON CONFLICT DO NOTHING).
        Index("uq_work_orders_active_group", "tenant_id", "fingerprint", unique=True,
              sqlite_where=text(ACTIVE_WORK_ORDER), postgresql_where=text(ACTIVE_WORK_ORDER)),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    fingerprint: Mapped[str] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default="open")
    dead_letter_count: Mapped[int] = mapped_column(Integer, default=0)
    assignee_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    external_id: Mapped[str | None] = mapped_column(String(120))
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
    acknowledged_at = mapped_column(UTCDateTime)
    closed_at = mapped_column(UTCDateTime)
    closed_by: Mapped[str | None] = mapped_column(String(80))
    close_note: Mapped[str | None] = mapped_column(Text)
    tenant = relationship("Tenant")
    assignee = relationship("User")


class WorkOrderNote(db.Model):
    """A person's note on a work order: what they tried, found or handed over, kept beside it in order."""

    __tablename__ = "work_order_notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    work_order_id: Mapped[int] = mapped_column(ForeignKey("work_orders.id"), index=True)
    author: Mapped[str] = mapped_column(String(80))
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    body: Mapped[str] = mapped_column(Text)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)


class DeadLetter(db.Model):
    __tablename__ = "dead_letters"
    __table_args__ = (
        # Each index costs every replay, discard and resolve (see runs'); docs/architecture.md says who reads which.
        Index("ix_dead_letters_status_id", "status", "id"),
        Index("ix_dead_letters_tenant_status_id", "tenant_id", "status", "id"),
        # A work order's open letters counted; a letter closing leaves it.
        Index("ix_dead_letters_open_work_order_id", "work_order_id", sqlite_where=text(OPEN_LETTER),
              postgresql_where=text(OPEN_LETTER)),
        Index("ix_dead_letters_work_order_id_id", "work_order_id", "id"),
        # One group's open letters newest first (the DLQ filtered by group): SQLite keeps an index's entries in id
        # order after its columns, so a page of a small group is read without walking every open letter.
        Index("ix_dead_letters_open_fingerprint", "fingerprint", sqlite_where=text(OPEN_LETTER),
              postgresql_where=text(OPEN_LETTER)),
        # Covers the grouped DLQ view: open letters grouped by fingerprint without touching the table; its first two
        # columns also count one group's letters.
        Index("ix_dead_letters_status_fingerprint_tenant_handler", "status", "fingerprint", "tenant_id", "handler",
              "error_code", "task_id", "created_at"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id"))
    handler: Mapped[str] = mapped_column(String(120))
    series: Mapped[int] = mapped_column(Integer, default=1)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(String(64))
    error_code: Mapped[str | None] = mapped_column(String(80))
    error_message: Mapped[str | None] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(32))
    # open → replayed | discarded | resolved
    status: Mapped[str] = mapped_column(String(16), default="open")
    work_order_id: Mapped[int | None] = mapped_column(ForeignKey("work_orders.id"))
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
    resolved_at = mapped_column(UTCDateTime)
    resolved_by: Mapped[str | None] = mapped_column(String(80))
    resolution_note: Mapped[str | None] = mapped_column(Text)
    run = relationship("Run")
    tenant = relationship("Tenant")
    work_order = relationship(WorkOrder)


class OutboxMessage(db.Model):
    """An alert, work order or escalation to deliver; written with the change that causes it."""

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_outbox_kind_delivered_at", "kind", "delivered_at"),
        Index("ix_outbox_kind_first_sent_at", "kind", "first_sent_at"),
        # One pending message per key: a storm becomes one message with a count (outbox.add upserts).
        Index("uq_outbox_pending_dedup_key", "dedup_key", unique=True, sqlite_where=text(PENDING_MESSAGE),
              postgresql_where=text(PENDING_MESSAGE)),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(32), default="default")
    dedup_key: Mapped[str] = mapped_column(String(200), index=True)
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"))
    payload = mapped_column(JSON, nullable=False)
    occurrences: Mapped[int] = mapped_column(Integer, default=1)
    # pending → sending (claimed; next_attempt_at is then the lease's end) → delivered | pending (retry) | failed;
    # skipped when no channel is configured for it.
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at = mapped_column(UTCDateTime, default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    delivered_at = mapped_column(UTCDateTime)  # when the last of its channels took it
    # When the first of its channels took it: a person was told. Alert latency ends here, also for a message another
    # channel then failed for good (it was left out while latency waited for delivered_at).
    first_sent_at = mapped_column(UTCDateTime)


class Approval(db.Model):
    """A change that needs a second person (four-eyes rule)."""

    __tablename__ = "approvals"
    __table_args__ = (
        Index("ix_approvals_status_expires_at", "status", "expires_at"),
        # The run page lists the requests about a run and its dead letters.
        Index("ix_approvals_subject_type_subject_id", "subject_type", "subject_id"),
        # One pending params fix per dead letter: a second could never run once the first changed the params.
        Index("ix_approvals_one_pending_fix", "subject_id", unique=True, sqlite_where=text(PENDING_FIX),
              postgresql_where=text(PENDING_FIX)),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"))
    subject_type: Mapped[str] = mapped_column(String(40))
    subject_id: Mapped[str] = mapped_column(String(80))
    payload = mapped_column(JSON, nullable=False)  # what the change does, read by its kind when approved
    before = mapped_column(JSON)  # the diff the approver reads: the rows' values now ...
    after = mapped_column(JSON)  # ... and what they become
    backup = mapped_column(JSON)  # the rows as they were when the change ran, for a rollback
    reason: Mapped[str] = mapped_column(Text, default="")
    # pending → executed (approved and run once) | failed (approved, could not run) | rejected | withdrawn (by its
    # requester) | expired | superseded (what it would change was settled otherwise before anyone decided);
    # executed → rolled_back
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    requested_by_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    decided_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    decision_note: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str | None] = mapped_column(Text)  # what an approved change did, or why it could not run
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    expires_at = mapped_column(UTCDateTime, nullable=False)
    decided_at = mapped_column(UTCDateTime)
    executed_at = mapped_column(UTCDateTime)
    rolled_back_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    rolled_back_at = mapped_column(UTCDateTime)
    rollback_note: Mapped[str | None] = mapped_column(Text)  # why it was rolled back, as the page shows it


class RunbookExecution(db.Model):
    """One run (or dry-run) of a runbook: its params, its log line by line, what it changed."""

    __tablename__ = "runbook_executions"
    __table_args__ = (
        Index("ix_runbook_executions_runbook_id", "runbook", "id"),
        Index("ix_runbook_executions_tenant_id_id", "tenant_id", "id"),
        # The reconciler's look for executions whose worker stopped beating.
        Index("ix_runbook_executions_status_heartbeat_at", "status", "heartbeat_at"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    runbook: Mapped[str] = mapped_column(String(60))
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id"))  # None: every tenant, or the system
    params = mapped_column(JSON, default=dict, nullable=False)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str | None] = mapped_column(Text)
    # awaiting_approval → queued → running → succeeded | failed; awaiting_approval → cancelled (rejected, expired)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    error: Mapped[str | None] = mapped_column(Text)  # why it failed or was cancelled
    log: Mapped[str] = mapped_column(Text, default="")
    # Changes made (a dry-run: found); their rows are kept up to a cap (runbook_context.MAX_CHANGES).
    changes_total: Mapped[int] = mapped_column(Integer, default=0)
    requested_by: Mapped[str] = mapped_column(String(120))
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    approval_id: Mapped[int | None] = mapped_column(ForeignKey("approvals.id"))
    worker_id: Mapped[str | None] = mapped_column(String(120))
    heartbeat_at = mapped_column(UTCDateTime)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    queued_at = mapped_column(UTCDateTime)
    # The dry-run an approver reads before a real run: started and finished while awaiting approval.
    preview_started_at = mapped_column(UTCDateTime)
    previewed_at = mapped_column(UTCDateTime)
    started_at = mapped_column(UTCDateTime)
    finished_at = mapped_column(UTCDateTime)
    tenant = relationship("Tenant")


class RunbookChange(db.Model):
    """One change a runbook made, or (planned) would make: {object, id, field, before, after}."""

    __tablename__ = "runbook_changes"
    __table_args__ = (Index("ix_runbook_changes_execution_id_planned_id", "execution_id", "planned", "id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("runbook_executions.id"))
    planned: Mapped[bool] = mapped_column(Boolean, default=False)  # found by a dry-run or the approver's preview
    object: Mapped[str] = mapped_column(String(40))
    object_id: Mapped[str] = mapped_column(String(200))
    field: Mapped[str] = mapped_column(String(80))
    before = mapped_column(JSON)
    after = mapped_column(JSON)


class RunbookBackup(db.Model):
    """A row as it was before a runbook changed it, kept in the same transaction as the change."""

    __tablename__ = "runbook_backups"
    id: Mapped[int] = mapped_column(primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("runbook_executions.id"), index=True)
    object: Mapped[str] = mapped_column(String(40))
    object_id: Mapped[str] = mapped_column(String(200))
    row = mapped_column(JSON, nullable=False)


class RunbookPolicy(db.Model):
    """An admin's rule for one runbook: its real runs wait for a second person's approval whatever its risk."""

    __tablename__ = "runbook_policies"
    runbook: Mapped[str] = mapped_column(String(60), primary_key=True)
    requires_approval: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_by: Mapped[str] = mapped_column(String(120))
