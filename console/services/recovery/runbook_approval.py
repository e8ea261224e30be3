"""Run a runbook for real once a second person approves: the request shows the changes its dry-run preview found."""

from datetime import datetime

from sqlalchemy import update

from console.extensions import db
from console.models import Approval, RunbookExecution
from console.services.actor import Actor
from console.services.engine import waiting_fixes
from console.services.errors import Conflict
from console.services.recovery import approvals, params_fix, runbook_reconcile, runbooks
from console.services.recovery.kinds import Applied, FixKind

EX = RunbookExecution


def _apply(approval: Approval, actor: Actor, now: datetime) -> Applied:
    """Queue the execution (in the decision's transaction); a worker runs it once the decision commits."""
    execution_id = approval.payload["execution_id"]
    gone = params_fix.settled(approval)
    if gone is not None:  # a fix_params_and_replay whose letter was settled another way: it could only fail
        raise approvals.Superseded(waiting_fixes.nothing_left(*gone), "status")
    queued = db.session.execute(
        update(EX).where(EX.id == execution_id, EX.status == "awaiting_approval", EX.previewed_at.is_not(None))
        .values(status="queued", queued_at=now).execution_options(synchronize_session=False)).rowcount
    if queued != 1:
        execution = db.session.get(EX, execution_id)
        status = execution.status.replace("_", " ") if execution is not None else "gone"
        raise Conflict(f"runbook execution #{execution_id} is {status}, no longer waiting for approval", "status")
    return Applied(backup={"execution_id": execution_id}, after_commit=lambda: runbooks.enqueue_run(execution_id),
                   outcome=f"runbook execution #{execution_id} queued for a worker")


def _not_ready(approval: Approval) -> str | None:
    """Say why the request cannot be approved yet: its dry-run preview, what the approver judges, has not finished."""
    execution = db.session.get(EX, approval.payload["execution_id"])
    if execution is None or execution.status != "awaiting_approval" or execution.previewed_at is not None:
        return None
    waits = "a worker is dry-running it" if execution.preview_started_at else "its dry-run waits for a worker"
    return (f"runbook execution #{execution.id}'s preview has not finished ({waits}), so there is no list of changes "
            "to approve yet; approve once the request shows them. It still waits for you")


def _refused(approval: Approval, decided: str, note: str | None, now: datetime) -> None:
    """Cancel the execution at once, so its page stops saying it awaits approval (the reconciler would, later)."""
    runbook_reconcile.cancel_refused(approval.payload["execution_id"], approval.id, decided, note, now)


KIND = FixKind(runbooks.KIND, "Run a runbook for real", _apply, refused=_refused, not_ready=_not_ready,
               no_rollback="what a runbook changes is its own code's to undo; its execution's page lists each change "
                           "with the row as it was before (its backup), to put back by hand or with a runbook")
