"""Undo a succeeded run because a person asks: a request a second person approves, then the compensation job runs."""

from datetime import datetime

from sqlalchemy import exists, select

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.notes import MAX_NOTE_CHARS
from console.extensions import db
from console.models import Approval, Run
from console.services.actor import Actor
from console.services.engine import compensation, control
from console.services.errors import Conflict, InvalidInput
from console.services.recovery import approvals
from console.services.recovery.kinds import Applied, FixKind

NAME = "run.compensate"


def pending(run_id: int) -> Approval | None:
    """Return the live request to compensate this run, if one waits."""
    return db.session.execute(select(Approval).where(
        Approval.kind == NAME, Approval.subject_type == "run", Approval.subject_id == str(run_id),
        Approval.status == "pending").order_by(Approval.id.desc()).limit(1)).scalar_one_or_none()


def request_compensation(run_id: int, cause, actor: Actor, *, tenant_id: int | None = None,
                         clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Ask for a succeeded run to be undone, the cause as the reason; a second person approves it."""
    run = control.get_run(run_id, tenant_id)
    cause = compensation.check(run, cause).strip()
    if not cause:
        raise InvalidInput("give the cause: what failed later, so the approver can judge the undo", "cause")
    now = clock()
    locks.hold(f"compensation:{run.id}", now)  # two people asking at once would each find none waiting and file one
    waiting = pending(run.id)
    if waiting is not None and waiting.expires_at > now:
        raise Conflict(f"request #{waiting.id} to compensate run {run.id} already waits for approval", "status")
    approval = approvals.request(
        NAME, actor, reason=cause, subject_type="run", subject_id=run.id,
        payload={"run_id": run.id, "cause": cause},
        before={"status": "succeeded"}, after={"status": "compensating"}, tenant=run.tenant, clock=lambda: now)
    db.session.commit()
    return approval


# A run in one of these was undone since the request was filed (its workflow's undo, another request, a person by
# hand), or its undo began and failed (dead: Retry the undo is its way on): approving could only fail, so the request
# closes as superseded.
UNDONE = ("compensating", "compensated", "compensation_failed", "resolved", "dead")


def _undone_since(run_id: int, status: str) -> str:
    return (f"run #{run_id} is {status.replace('_', ' ')} now: it was undone (or its undo began) another way since "
            "the request, so there is nothing left to compensate")


def supersede_undone(clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """The "compensations-supersede" maintenance job: close the requests to compensate a run that was undone another
    way meanwhile (a workflow undoing its steps, say); return their ids."""
    now, closed = clock(), []
    waiting = {int(subject): approval_id for approval_id, subject in db.session.execute(
        select(Approval.id, Approval.subject_id).where(Approval.kind == NAME, Approval.status == "pending"))}
    undone = db.session.execute(select(Run.id, Run.status).where(Run.id.in_(waiting), Run.status.in_(UNDONE))).all()
    for run_id, status in undone:
        approval_id = waiting[run_id]
        # Guarded by the run's status still being undone: a request approved at the same moment wins as a whole.
        if approvals.supersede(approval_id, _undone_since(run_id, status), now,
                               exists().where(Run.id == run_id, Run.status.in_(UNDONE))):
            closed.append(approval_id)
        db.session.commit()
    return closed


def _apply(approval: Approval, actor: Actor, now: datetime) -> Applied:
    run_id = approval.payload["run_id"]
    # Held until the commit: the transition below is guarded too, but this keeps the check and the move together.
    run = db.session.execute(select(Run).where(Run.id == run_id).with_for_update()
                             .execution_options(populate_existing=True)).scalar_one()
    if run.status in UNDONE:
        # Its workflow undid it meanwhile: the request stayed pending and approvable, and failed (helper 105).
        raise approvals.Superseded(_undone_since(run_id, run.status), "status")
    cause = f"{approval.payload['cause']} (approval #{approval.id})"[:MAX_NOTE_CHARS]
    compensation.start(run, actor, cause=cause, now=now, reason=compensation.REQUESTED)
    return Applied(backup={"run_id": run_id, "status": "succeeded"}, after_commit=lambda: compensation.enqueue(run_id),
                   outcome=f"run #{run_id} compensating: its undo step is queued")


# An undo step cannot be taken back: there is no rollback.
KIND = FixKind(NAME, "Compensate a succeeded run (run its handler's undo step)", _apply,
               no_rollback="an undo step's effects are the handler's own, outside Rebound, and a compensated run "
                           "is not retried; to do the work again, submit it as a new run")
