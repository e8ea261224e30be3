"""Saga workflows: an ordered list of steps, each run as a normal run, undone backward if one fails for good."""

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from console.db.types import UTCDateTime
from console.domain.clock import utcnow
from console.extensions import db


class Workflow(db.Model):
    __tablename__ = "workflows"
    __table_args__ = (
        # A second submit with the same key is the same workflow.
        UniqueConstraint("tenant_id", "idempotency_key"),
        Index("ix_workflows_tenant_id_id", "tenant_id", "id"),
        # The reconcile pass looks at active workflows that have not moved for a while.
        Index("ix_workflows_status_updated_at", "status", "updated_at"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"))
    name: Mapped[str] = mapped_column(String(120))
    idempotency_key: Mapped[str] = mapped_column(String(200))
    # running → succeeded | compensating → compensated | compensation_failed (console/domain/saga.py)
    status: Mapped[str] = mapped_column(String(24), default="running")
    step_count: Mapped[int] = mapped_column(Integer)
    # Going forward: the step started last (0 before the first). Compensating: the step being undone (0: all done).
    current_step: Mapped[int] = mapped_column(Integer, default=0)
    failed_step: Mapped[int | None] = mapped_column(Integer)  # the step that failed for good
    note: Mapped[str | None] = mapped_column(Text)  # why it stopped or waits, for a person
    created_by: Mapped[str] = mapped_column(String(80))
    created_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    finished_at = mapped_column(UTCDateTime)
    tenant = relationship("Tenant")
    steps = relationship("WorkflowStep", order_by="WorkflowStep.position", back_populates="workflow")


class WorkflowStep(db.Model):
    __tablename__ = "workflow_steps"
    __table_args__ = (UniqueConstraint("workflow_id", "position"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    position: Mapped[int] = mapped_column(Integer)  # 1-based; the step's run carries it as runs.workflow_step
    handler: Mapped[str] = mapped_column(String(120))
    params = mapped_column(JSON, default=dict, nullable=False)
    policy = mapped_column(JSON)  # a policy name or an object of overrides, as POST /worker/tasks takes
    # None until the step is to be undone; then pending → compensating → compensated | failed | not_compensable,
    # or not_attempted; the step that failed, left in place for a person: manual_intervention or failed
    # (console/domain/saga.py Undo).
    compensation_status: Mapped[str | None] = mapped_column(String(24))
    compensation_started_at = mapped_column(UTCDateTime)
    compensation_finished_at = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)
    workflow = relationship(Workflow, back_populates="steps")
