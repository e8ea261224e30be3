"""Runs (one logical execution of a task) and their append-only timeline."""

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    and_,
    func,
    literal_column,
    or_,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.domain.statuses import ACTIVE, RunStatus
from console.extensions import db

# The statuses a run leaves by itself (the domain's ACTIVE), in a fixed order: the partial indexes' predicate is this
# text, and a query meets it by the same terms (`live()`); SQLite matches a predicate by its terms, not its meaning.
LIVE = ("pending", "retry_wait", "running", "compensating")
assert set(LIVE) == {status.value for status in ACTIVE}
LIVE_PREDICATE = " OR ".join(f"status = '{status}'" for status in LIVE)
LIVE_TASK_PREDICATE = f"({LIVE_PREDICATE}) AND task_id IS NOT NULL"
# The statuses a run rests in other than succeeded (dead, cancelled, failed, ...): a few of a million runs, which a
# tenant's list filtered to one of them must not find by walking all of that tenant's runs.
RARE = tuple(sorted(status.value for status in RunStatus if status not in ACTIVE and status != RunStatus.SUCCEEDED))
RARE_PREDICATE = " OR ".join(f"status = '{status}'" for status in RARE)


class Run(db.Model):
    __tablename__ = "runs"
    # Every index here costs each status change (PostgreSQL adds an entry to every index the new row belongs to; SQLite
    # rewrites each index holding a changed column), so each one serves queries the console runs at scale, and those
    # that only live runs need are partial on LIVE_PREDICATE: a run finishing leaves them. Which query reads which
    # index: docs/architecture.md, "The runs and dead letters' indexes".
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        # Newest-first lists by status, by tenant; the reconciler's pending, running and compensating scans.
        Index("ix_runs_status_id", "status", "id"),
        Index("ix_runs_tenant_id_id", "tenant_id", "id"),
        # A tenant's runs in a rare status, newest first; the hot path (pending → running → succeeded) never enters it.
        Index("ix_runs_rare_tenant_status_id", "tenant_id", "status", "id", sqlite_where=text(RARE_PREDICATE),
              postgresql_where=text(RARE_PREDICATE)),
        # A task's runs; a run without a task (an API submit) is not in it.
        Index("ix_runs_task_id_id", "task_id", "id", sqlite_where=text("task_id IS NOT NULL"),
              postgresql_where=text("task_id IS NOT NULL")),
        # Runs by error code in any case (codes keep the case they were raised in); a run that never failed is not in
        # it. The list's filter writes the same lower(error_code) and the predicate's term (`error_code_is`).
        Index("ix_runs_error_code_lower_id", text("lower(error_code)"), "id",
              sqlite_where=text("error_code IS NOT NULL"), postgresql_where=text("error_code IS NOT NULL")),
        # The Overview's "finished in the last 24 h" by status; the claim of a run leaves it alone.
        Index("ix_runs_status_finished_at", "status", "finished_at", sqlite_where=text("finished_at IS NOT NULL"),
              postgresql_where=text("finished_at IS NOT NULL")),
        # The live runs counted on every submit, attempt and planner batch: waiting per tenant, running per tenant,
        # per task (and quota class) and per handler, breaker hold-backs by reason, overdue retries.
        Index("ix_runs_live_tenant_status", "tenant_id", "status", sqlite_where=text(LIVE_PREDICATE),
              postgresql_where=text(LIVE_PREDICATE)),
        Index("ix_runs_live_task_status", "task_id", "status", sqlite_where=text(LIVE_TASK_PREDICATE),
              postgresql_where=text(LIVE_TASK_PREDICATE)),
        Index("ix_runs_live_handler_status", "handler", "status", "status_reason", sqlite_where=text(LIVE_PREDICATE),
              postgresql_where=text(LIVE_PREDICATE)),
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

    @property
    def by_worker(self) -> str | None:
        """Name the worker that did this, or None when a timer, a person or a replay did.

        Every event copies the run's last worker into worker_id; only a worker moves a run into or out of
        running or compensating, or reports its progress and heartbeats.
        """
        worker_moves = {"running", "compensating"}
        if self.from_status in worker_moves or self.to_status in worker_moves or self.kind in ("progress", "heartbeat"):
            return self.worker_id
        return None


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


def status_is(status: str, column=None):
    """Compare a run's status with a constant written into the SQL, so a partial index on live runs can serve it.

    A bound value would do for SQLite, but a PostgreSQL plan made for any value (a prepared statement's generic
    plan) cannot prove a parameter satisfies the index's predicate.
    """
    RunStatus(status)  # a status name only: this text goes into the SQL as written
    return (Run.status if column is None else column) == literal_column(f"'{status}'")


def live(column=None):
    """The live-runs predicate as a query term: a query over several live statuses adds it to use their indexes."""
    return _any_of(LIVE, Run.status if column is None else column)


def rare():
    """The rare statuses' predicate as a query term: a query for runs in rare statuses adds it to use their index."""
    return _any_of(RARE, Run.status)


def error_code_is(code: str):
    """Match an error code in any case, in the terms of its index: lower() of both sides, and the index's predicate."""
    return and_(Run.error_code.is_not(None), func.lower(Run.error_code) == func.lower(code))


def _any_of(statuses: tuple[str, ...], column):
    return or_(*(column == literal_column(f"'{status}'") for status in statuses))
