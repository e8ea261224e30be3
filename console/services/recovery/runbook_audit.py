"""How a runbook execution that changes things ended, in the audit log beside its request and its approval.

The request and the decision were audited; what the execution then did (fewer changes than approved, a failure, a
cancel when its request expired) was told on its page only, so the log read as if everything approved was done.
"""

from datetime import datetime

from sqlalchemy import func, select

from console.extensions import db
from console.models import RunbookChange, RunbookExecution, Tenant
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit


def ended(execution_id: int, status: str, now: datetime, *, actor: Actor = SYSTEM, note: str | None = None,
          changes_made: int | None = None) -> None:
    """Audit the end of a real (not dry-run) execution in the caller's transaction: `runbook.finish`, or
    `runbook.cancel` for one that never ran; with the changes it made against those its approver read."""
    row = db.session.execute(select(RunbookExecution.runbook, RunbookExecution.dry_run, RunbookExecution.tenant_id,
                                    RunbookExecution.approval_id).where(RunbookExecution.id == execution_id)).one()
    if row.dry_run:
        return  # a dry-run changes nothing, and its request was not audited either
    after = {"runbook": row.runbook, "status": status, "approval_id": row.approval_id}
    if changes_made is not None:
        after["changes_made"] = changes_made
        if row.approval_id:
            after["changes_approved"] = db.session.execute(select(func.count()).where(
                RunbookChange.execution_id == execution_id, RunbookChange.planned.is_(True))).scalar_one()
    tenant = db.session.get(Tenant, row.tenant_id).name if row.tenant_id else None
    audit.record(db.session, actor, "runbook.cancel" if status == "cancelled" else "runbook.finish",
                 "runbook_execution", execution_id, after=after, note=note, tenant=tenant, clock=lambda: now)
