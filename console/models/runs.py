"""Runs (one logical execution of a task) and their append-only timeline."""

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class Run(db.Model):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        Index("ix_runs_status_next_retry_at", "status", "next_retry_at"),
        Index("ix_runs_tenant_status_id", "tenant_id", "status", "id"),
        Index("ix_runs_task_id_id", "task_id", "id"),
        Index("ix_runs_tenant_handler_status", "tenant_id", "handler", "status"),
        Index("ix_runs_task_status", "task_id", "status"),
        # Newest-first lists by status, by tenant and by error code; breaker hold-back counts.
        Index("ix_runs_status_id", "status", "id"),
        Index("ix_runs_tenant_id_id", "tenant_id", "id"),
        Index("ix_runs_error_code_id", "error_code", "id"),
        Index("ix_runs_status_reason_handler", "status", "status_reason", "handler"),
        # The Overview's "finished in the last 24 h" by status.
        Index("ix_runs_status_finished_at", "status", "finished_at"),
        # One run per workflow step: two advances racing to start a step cannot make two. Partial, so the runs
        # outside workflows (nearly all) cost the index nothing; a plain column with no foreign key, so adding it
        # does not make SQLite copy the runs table.
        Index("ix_runs_workflow_id_workflow_step", "workflow_id", "workflow_step", unique=True,
              sqlite_where=text("workflow_id IS NOT NULL"), postgresql_where=text("workflow_id IS NOT NULL")),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    task_id: Mapped[int | None] = mapped_column(ForeignKey("tasks.id"))
    handler: Mapped[str] = mapped_column(String(120))
    params = mapped_column(JSON, default=dict, nullable=False)
    policy_id: Mapped[int | None] = mapped_column(ForeignKey("retry_policies.id"))
    # The version the latest attempt used: a policy change takes effect from the next attempt.
    policy_version: Mapped[int | None] = mapped_column(Integer)
    policy_overrides = mapped_column(JSON, default=dict, nullable=False)
    idempotency_key: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(24), default="pending")
    status_reason: Mapped[str | None] = mapped_column(String(64))
    # Why a pending run was last put off without a status change (capacity of which policy or tenant, its
    # window), in words for the run page; cleared when an attempt claims the run.
    wait_reason: Mapped[str | None] = mapped_column(String(255))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    # A replay starts a new attempt series on the same run and idempotency key.
    series: Mapped[int] = mapped_column(Integer, default=1)
    # Attempts over every series; demo.flaky counts these so a replay can recover.
    executions: Mapped[int] = mapped_column(Integer, default=0)
    retry_token: Mapped[str | None] = mapped_column(String(64))
    next_retry_at = mapped_column(UTCDateTime)
    scheduled_for = mapped_column(UTCDateTime)
    # When a run the planner deferred into its execution window was due to start (the opening); None means
    # scheduled_for. On-time figures and the SLA check measure lateness from here.
    due_at = mapped_column(UTCDateTime)
    enqueued_at = mapped_column(UTCDateTime)
    started_at = mapped_column(UTCDateTime)
    finished_at = mapped_column(UTCDateTime)
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False, index=True)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    heartbeat_at = mapped_column(UTCDateTime)
    worker_id: Mapped[str | None] = mapped_column(String(120))
    progress: Mapped[int] = mapped_column(Integer, default=0)
    progress_message: Mapped[str | None] = mapped_column(String(255))
    result = mapped_column(JSON)
    error_code: Mapped[str | None] = mapped_column(String(80))
    error_message: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    trace_id: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16), default="api")
    # A step of a saga workflow; when such a run finishes, the engine queues its workflow's advance.
    workflow_id: Mapped[int | None] = mapped_column(Integer)
    workflow_step: Mapped[int | None] = mapped_column(Integer)
    tenant = relationship("Tenant")
    task = relationship("Task")
    policy = relationship("RetryPolicyRecord")
    workflow = relationship("Workflow", primaryjoin="foreign(Run.workflow_id) == Workflow.id", viewonly=True)


class RunEvent(db.Model):
    __tablename__ = "run_events"
    # Failures per minute and alert-rule windows read recent events of a few kinds.
    __table_args__ = (Index("ix_run_events_kind_at", "kind", "at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    kind: Mapped[str] = mapped_column(String(32))
    from_status: Mapped[str | None] = mapped_column(String(24))
    to_status: Mapped[str | None] = mapped_column(String(24))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    series: Mapped[int] = mapped_column(Integer, default=1)
    # Attempts over every series; demo.flaky counts these so a replay can recover.
    executions: Mapped[int] = mapped_column(Integer, default=0)
    retry_token: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(String(64))
    error_code: Mapped[str | None] = mapped_column(String(80))
    message: Mapped[str | None] = mapped_column(Text)
    next_retry_at = mapped_column(UTCDateTime)
    worker_id: Mapped[str | None] = mapped_column(String(120))
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    progress: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str | None] = mapped_column(String(80))
    data = mapped_column(JSON)
    run = relationship(Run)


class AttemptDiagnostics(db.Model):
    """What a failed attempt left behind: its traceback and the handler's last log lines, bounded and masked."""

    __tablename__ = "attempt_diagnostics"
    # One per attempt: a bookkeeping retry of the same outcome inserts nothing new (ON CONFLICT DO NOTHING).
    __table_args__ = (UniqueConstraint("run_id", "series", "attempt"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    series: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    traceback: Mapped[str | None] = mapped_column(Text)
    log_lines = mapped_column(JSON, default=list, nullable=False)
