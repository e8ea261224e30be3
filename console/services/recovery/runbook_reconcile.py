"""No runbook execution waits forever: fail those whose worker died, queue those Redis lost, close refused ones."""

import logging
from datetime import timedelta

from sqlalchemy import case, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.words import plural
from console.extensions import db
from console.models import Approval, RunbookExecution
from console.services.engine import queueing
from console.services.recovery import runbook_audit, runbooks
from console.services.settings import setting

log = logging.getLogger("rebound.runbooks")
EX = RunbookExecution
BATCH = 200
WAITING_JOB = ("queued", "started", "scheduled", "deferred")
REFUSED = ("rejected", "withdrawn", "expired", "failed", "superseded")


def _appended(line: str):
    """Return the log with one more line, in SQL (the execution's worker may be writing it too)."""
    return case((EX.log == "", line), else_=EX.log + "\n" + line)


def reconcile(clock: Clock = SYSTEM_CLOCK) -> dict[str, list[int]]:
    """The "runbooks-reconcile" maintenance job: run every repair once and report the executions each touched."""
    now = clock()
    report = {"lost": _fail_lost(now), "requeued": _requeue_lost_jobs(now)}
    report.update(_settle_waiting(now))
    db.session.commit()
    if any(report.values()):
        log.warning("runbook executions reconciled: %s", {key: value for key, value in report.items() if value})
    return report


def _fail_lost(now) -> list[int]:
    """Running executions whose heartbeat stopped: their worker was killed. Failed, saying so; never left running."""
    stale = now - timedelta(seconds=setting("STALE_AFTER_S"))
    lost = db.session.execute(select(EX.id, EX.worker_id, EX.heartbeat_at, EX.changes_total).where(
        EX.status == "running", EX.heartbeat_at <= stale).order_by(EX.id).limit(BATCH)).all()
    failed = []
    for execution_id, worker, beat, made in lost:
        # Its log is written a second behind its work: the lines of its last commit may be missing, its changes not.
        error = (f"worker lost: {worker or 'its worker'} stopped sending heartbeats at {beat:%H:%M:%S} UTC (killed or "
                 f"cut off) while running it. What it committed before ({plural(made or 0, 'change')}) is listed in "
                 "its changes, with the rows' backup, even where the log above ends before it; nothing was rolled "
                 "back. Check them, then run it again.")
        won = db.session.execute(update(EX).where(EX.id == execution_id, EX.status == "running",
                                                  EX.heartbeat_at <= stale)
                                 .values(status="failed", error=error, finished_at=now,
                                         log=_appended(f"{now:%H:%M:%S} Failed: {error}"))
                                 .execution_options(synchronize_session=False)).rowcount
        if won:
            runbook_audit.ended(execution_id, "failed", now, note=error)
            failed.append(execution_id)
    return failed


def _requeue_lost_jobs(now) -> list[int]:
    """Queued executions whose job Redis no longer holds are queued again (a second delivery finds nothing to claim)."""
    cutoff = now - timedelta(seconds=setting("REQUEUE_AFTER_S"))
    waiting = db.session.execute(select(EX.id).where(EX.status == "queued", EX.queued_at <= cutoff)
                                 .order_by(EX.id).limit(BATCH)).scalars().all()
    requeued = [execution_id for execution_id in waiting
                if queueing.status_of(runbooks.run_job_id(execution_id)) not in WAITING_JOB]
    for execution_id in requeued:
        runbooks.enqueue_run(execution_id)
    return requeued


def cancel_refused(execution_id: int, approval_id: int, decided: str, note: str | None, now) -> bool:
    """Cancel an execution whose approval was refused (in the caller's transaction); tell whether this call did."""
    how = "approved, but it could not start" if decided == "failed" else decided
    error = f"approval request #{approval_id} was {how}" + (f": {note}" if note else "")
    cancelled = bool(db.session.execute(update(EX).where(EX.id == execution_id, EX.status == "awaiting_approval")
                                        .values(status="cancelled", error=f"{error}; it never ran", finished_at=now,
                                                log=_appended(f"{now:%H:%M:%S} Cancelled: {error}; it never ran."))
                                        .execution_options(synchronize_session=False)).rowcount)
    if cancelled:
        runbook_audit.ended(execution_id, "cancelled", now, note=f"{error}; it never ran")
    return cancelled


def _settle_waiting(now) -> dict[str, list[int]]:
    """Executions awaiting approval: cancel refused ones; preview again those whose preview was lost."""
    stale = now - timedelta(seconds=setting("STALE_AFTER_S"))
    cutoff = now - timedelta(seconds=setting("REQUEUE_AFTER_S"))
    rows = db.session.execute(select(EX, Approval.status, Approval.decision_note).join(
        Approval, Approval.id == EX.approval_id).where(EX.status == "awaiting_approval")
        .order_by(EX.id).limit(BATCH)).all()
    cancelled, previews = [], []
    for execution, decided, note in rows:
        if decided in REFUSED:
            if cancel_refused(execution.id, execution.approval_id, decided, note, now):
                cancelled.append(execution.id)
        elif execution.previewed_at is None and _preview_lost(execution, stale, cutoff):
            runbooks.enqueue_preview(execution.id)
            previews.append(execution.id)
    return {"cancelled": cancelled, "previews_requeued": previews}


def _preview_lost(execution: RunbookExecution, stale, cutoff) -> bool:
    if execution.preview_started_at is not None:
        return execution.heartbeat_at is None or execution.heartbeat_at <= stale  # its worker died mid-preview
    return (execution.created_at <= cutoff
            and queueing.status_of(runbooks.preview_job_id(execution.id)) not in WAITING_JOB)
