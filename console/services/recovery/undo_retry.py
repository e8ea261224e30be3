"""Run a dead run's undo at a person's word: a failed undo tried again, or the first undo of a run left for a person.

A run whose undo failed is dead with a dead letter (reason `compensation_failed`); one whose error had severity 3 is
dead with its undo not run (reason `manual_intervention`: a person looks first). A replay would run the run's
handler again, not its undo; this moves it dead → compensating instead, marks its letter replayed (settled, like a
replayed run's, only once the undo works: its work order stays open meanwhile), and queues the compensation job,
which tries the undo (three tries with backoff) and ends compensated, or dead with a new letter: in the same work
order for a retried undo (its words are the failed undo's again), in the undo error's own for a first one (whose
letter was the handler's error: that order closes, saying the run died again under another error). If the run
is the step whose undo stopped its saga workflow, the workflow goes back to undoing from that step: the steps before
it, left as they were, are undone after it.
"""

from dataclasses import dataclass

from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import NOT_COMPENSABLE
from console.domain.saga import Undo, WorkflowStatus
from console.extensions import db
from console.models import DeadLetter, Run, Workflow, WorkflowStep
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import compensation, control, transitions, waiting_fixes
from console.services.errors import Conflict
from console.services.recovery.workflows import advance

LETTERS, WORKFLOWS, STEPS = DeadLetter.__table__, Workflow.__table__, WorkflowStep.__table__
UNDO_FAILED = "compensation_failed"  # the dead letter's reason when a run's undo failed
LEFT_FOR_A_PERSON = "manual_intervention"  # its error's severity 3: dead, its undo not run


@dataclass(frozen=True)
class Retried:
    """What retrying the undo changed besides the run: its letters, workflow and waiting fixes."""

    letters: list[int]
    workflow_id: int | None  # the workflow that went back to undoing, if it had stopped at this step
    closed_fixes: list[int]


def parked_for(run: Run) -> str | None:
    """Return the reason of the run's open dead letter (its newest), or None."""
    return db.session.execute(select(DeadLetter.reason).where(
        DeadLetter.run_id == run.id, DeadLetter.status == "open").order_by(DeadLetter.id.desc()).limit(1)).scalar()


def offered(run: Run) -> str | None:
    """Return how this run's undo can be run now: "first" (its error's severity 3 left it for a person), "again"
    (its undo failed), or None (reading only)."""
    reason = parked_for(run) if run.status == "dead" else None
    return None if _refusal(run, reason) else "first" if reason == LEFT_FOR_A_PERSON else "again"


def why_not(run: Run) -> str | None:
    """Say why this run's undo cannot be run now, or None when it can (reading only)."""
    return _refusal(run, parked_for(run) if run.status == "dead" else None)


def _refusal(run: Run, reason: str | None) -> str | None:
    """Say why the undo of this run, its open letter parked for `reason`, cannot be run now, or None."""
    if run.status != "dead":
        return (f"run {run.id} is {run.status.replace('_', ' ')}; only a dead run whose undo failed, or that its "
                "error's severity 3 left for a person, can have its undo run")
    if reason is None:  # its letter was discarded or resolved: "replay it" would run the handler, not its undo
        return (f"run {run.id} has no open dead letter (it was discarded or resolved): undo it by hand, then mark "
                "the run resolved")
    if reason not in (UNDO_FAILED, LEFT_FOR_A_PERSON):
        return f"run {run.id} did not die undoing itself ({reason.replace('_', ' ')}); replay it instead"
    if run.error_code == NOT_COMPENSABLE or not compensation.has_undo_step(run.handler):
        return f"handler {run.handler} has no undo step to run: undo it by hand, then mark the run resolved"
    return None


def stopped_at(run: Run) -> Workflow | None:
    """Return the run's workflow if this step's failed undo stopped it (a retry turns it back to undoing)."""
    workflow = run.workflow if run.workflow_id is not None else None
    if workflow is None or workflow.status != WorkflowStatus.COMPENSATION_FAILED.value:
        return None
    return workflow if workflow.current_step == run.workflow_step else None


def retry(run_id: int, actor: Actor, *, tenant_id: int | None = None, clock: Clock = SYSTEM_CLOCK) -> Retried:
    """Move the dead run back to compensating (audited), settle its letters, commit, then queue its undo."""
    run = control.get_run(run_id, tenant_id)
    problem = why_not(run)
    if problem:
        raise Conflict(problem, "status")
    first = parked_for(run) == LEFT_FOR_A_PERSON  # its undo never ran: not a retry
    done = "undo run" if first else "undo retried"
    now = clock()
    # Locks in the order a replay, a resolve and a fix's approval take them: the waiting fixes, the run, its letters.
    fixes = waiting_fixes.hold(db.session.execute(select(DeadLetter.id).where(
        DeadLetter.run_id == run.id, DeadLetter.status == "open")).scalars())
    try:
        # A failed undo's error was the undo's: a new try starts clean, and records its own if it fails again. A
        # first undo keeps the handler's error: it is why the run is undone.
        transitions.move(run, "compensating", now, reason=compensation.CHECKED if first else compensation.RETRIED,
                         actor=actor.signature, message=f"{done} by {actor.name}", clear_error=not first)
    except transitions.StaleRun:
        raise Conflict(f"run {run.id} changed while you acted on it; look again", "status") from None
    # Replayed, not resolved: a new try of the same work settles nothing until it works (workorders._unsettled),
    # so the work order and its incident stay open instead of closing now and opening again if the undo fails.
    closed = db.session.execute(
        update(LETTERS).where(LETTERS.c.run_id == run.id, LETTERS.c.status == "open")
        .values(status="replayed", resolved_at=now, resolved_by=actor.signature, resolution_note=done)
        .returning(LETTERS.c.id)).scalars().all()
    if not closed:  # discarded or resolved by someone else since it was read: theirs stands
        db.session.rollback()
        raise Conflict(f"run {run.id}'s dead letter was settled meanwhile; look again", "status")
    workflow_id = _undo_again(run, now)
    audit.record(db.session, actor, "run.undo" if first else "run.retry_undo", "run", run.id,
                 before={"status": "dead"},
                 after={"status": "compensating", "dead_letters": sorted(closed),
                        **({"workflow": workflow_id} if workflow_id else {})}, tenant=run.tenant.name,
                 clock=lambda: now)
    retried = Retried(sorted(closed), workflow_id, waiting_fixes.close(fixes, actor, now))
    db.session.commit()
    compensation.enqueue(run.id)
    return retried


def _changed(workflow_id: int) -> Conflict:
    """Undo this call's writes (a racing change won) and say so."""
    db.session.rollback()
    return Conflict(f"workflow #{workflow_id} changed while you acted on it; look again", "status")


def _undo_again(run: Run, now) -> int | None:
    """Turn the run's workflow back to undoing if this step's failed undo stopped it; return its id if so."""
    workflow = stopped_at(run)
    if workflow is None:
        return None  # a workflow stopped elsewhere, or this step as the one that failed going forward: as it is
    if workflow.failed_step == run.workflow_step:  # the step that failed stopped it at once: its own undo runs now
        error = f" ({run.error_code}: {(run.error_message or '')[:300]})" if run.error_code else ""
        note = f"step {run.workflow_step} failed for good{error}: a person had its undo run (run #{run.id})"
    else:
        failed = db.session.execute(select(Run).where(Run.workflow_id == workflow.id,
                                                      Run.workflow_step == workflow.failed_step)).scalar_one_or_none()
        # Its note goes back to why it is being undone, as before the undo stopped (the trail shows the retry).
        note = advance.failure_note(workflow.failed_step, failed) if failed is not None else None
    # Guarded by the state the stop left (its status, this step current), as read: a race loses here.
    moved = db.session.execute(update(WORKFLOWS).where(
        WORKFLOWS.c.id == workflow.id, WORKFLOWS.c.status == WorkflowStatus.COMPENSATION_FAILED.value,
        WORKFLOWS.c.current_step == run.workflow_step).values(
        status=WorkflowStatus.COMPENSATING.value, finished_at=None, updated_at=now,
        note=note[:advance.NOTE_CHARS] if note else None)).rowcount
    if not moved:
        raise _changed(workflow.id)
    step = db.session.execute(update(STEPS).where(
        STEPS.c.workflow_id == workflow.id, STEPS.c.position == run.workflow_step,
        STEPS.c.compensation_status.in_((Undo.FAILED.value, Undo.MANUAL_INTERVENTION.value))).values(
        compensation_status=Undo.COMPENSATING.value, compensation_started_at=now, compensation_finished_at=None,
        note=None)).rowcount
    if not step:
        raise _changed(workflow.id)
    db.session.execute(update(STEPS).where(
        STEPS.c.workflow_id == workflow.id, STEPS.c.position < run.workflow_step,
        STEPS.c.compensation_status == Undo.NOT_ATTEMPTED.value).values(compensation_status=Undo.PENDING.value))
    return workflow.id
