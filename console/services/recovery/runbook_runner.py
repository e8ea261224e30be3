"""Run an execution (a worker's job, or the CLI in its own process): claim it, run its runbook, record the outcome.

A dry-run runs on a connection that refuses writes; a real run commits its work with the record of it, chunk by
chunk. The log and heartbeat are written beside, every second, by runbook_live.Beat.
"""

import logging
import os
import socket
import time
from datetime import timedelta

from sqlalchemy import or_, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.runbooks import ParamErrors, parse
from console.domain.secrets import held_in, holding, redact
from console.extensions import db
from console.models import Approval, RunbookChange, RunbookExecution, User
from console.services.actor import Actor
from console.services.errors import ServiceError
from console.services.recovery import approvals, runbook_audit, runbook_drift, runbook_registry
from console.services.recovery.runbook_context import RunbookContext
from console.services.recovery.runbook_live import Beat, read_only
from console.services.settings import setting

log = logging.getLogger("rebound.runbooks")
EX = RunbookExecution
# The approver reads this many changes in the request itself; the execution's page lists them all.
DIFF_SHOWN = 200


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim(execution_id: int, where, values) -> RunbookExecution | None:
    """Take the execution in one conditional UPDATE: of two deliveries of its job, one runs it."""
    won = db.session.execute(update(EX).where(EX.id == execution_id, *where).values(**values)
                             .execution_options(synchronize_session=False)).rowcount
    db.session.commit()
    if not won:
        return None
    execution = db.session.get(EX, execution_id)
    db.session.refresh(execution)
    return execution


def execute(execution_id: int, *, clock: Clock = SYSTEM_CLOCK, on_line=None, sleep=time.sleep,
            monotonic=time.monotonic) -> str:
    """Run a queued execution; return its final status ("skipped" when it was not queued: a late duplicate)."""
    now = clock()
    execution = _claim(execution_id, (EX.status == "queued",),
                       {"status": "running", "started_at": now, "heartbeat_at": now, "worker_id": worker_name()})
    if execution is None:
        return "skipped"
    return _run(execution, preview=False, clock=clock, on_line=on_line, sleep=sleep, monotonic=monotonic)


def preview(execution_id: int, *, clock: Clock = SYSTEM_CLOCK, on_line=None, sleep=time.sleep,
            monotonic=time.monotonic) -> str:
    """Dry-run an execution that awaits approval, so the approver reads what it would change; return the status."""
    now = clock()
    stale = now - timedelta(seconds=setting("STALE_AFTER_S"))
    # Also a preview whose worker died (stale heartbeat): a dry-run is safe to run again.
    execution = _claim(execution_id, (EX.status == "awaiting_approval", EX.previewed_at.is_(None), or_(
        EX.preview_started_at.is_(None), EX.heartbeat_at <= stale)),
        {"preview_started_at": now, "heartbeat_at": now, "worker_id": worker_name()})
    if execution is None:
        return "skipped"
    return _run(execution, preview=True, clock=clock, on_line=on_line, sleep=sleep, monotonic=monotonic)


def _approver(execution: RunbookExecution) -> str | None:
    """Name who approved the execution and in which request, kept beside the requester on what it changes."""
    if not execution.approval_id:
        return None
    name = db.session.execute(select(User.username).join(Approval, Approval.decided_by_id == User.id)
                              .where(Approval.id == execution.approval_id)).scalar_one_or_none()
    return f"{name}, request #{execution.approval_id}" if name else None


def _describe(error: BaseException) -> str:
    if isinstance(error, ServiceError):
        return error.detail
    if isinstance(error, KeyboardInterrupt):
        return "interrupted (Ctrl-C) while running; what it committed before is listed in its changes"
    return redact(f"{type(error).__name__}: {error}")  # shown on the execution's page and in the API


def _run(execution: RunbookExecution, *, preview: bool, clock: Clock, on_line, sleep, monotonic) -> str:
    runbook = runbook_registry.get(execution.runbook)
    dry_run = execution.dry_run or preview
    actor = Actor(execution.requested_by, execution.requested_by_id,
                  approved_by=None if dry_run else _approver(execution),
                  via=f"runbook {execution.runbook}, execution #{execution.id}")
    ctx = RunbookContext(execution.id, dry_run=dry_run, tenant_id=execution.tenant_id, actor=actor,
                         reason=execution.reason,
                         lines=execution.log.splitlines() if execution.log else [], clock=clock, on_line=on_line,
                         sleep=sleep, monotonic=monotonic, requested_at=execution.created_at)
    if preview:
        ctx.log("Preview for the approver: a dry-run, nothing changes until a second person approves.")
    elif execution.approval_id:
        ctx.log(f"Approved (request #{execution.approval_id}); running for real.")
    ctx.log(f"{'Dry-run' if dry_run else 'Run'} of {execution.runbook} by {execution.requested_by}"
            f"{' on ' + execution.worker_id if execution.worker_id else ''}.")
    error = None
    # Its secret params masked by value in its log, its error and the server's log line (helper 120).
    with Beat(execution.id, ctx, "awaiting_approval" if preview else "running"), holding(held_in(execution.params)):
        try:
            if runbook is None:
                raise ServiceError(f"runbook {execution.runbook} is not installed where this ran")
            ctx.params = parse(runbook.params, execution.params)
            if dry_run:
                with read_only():
                    runbook.run(ctx)
            else:
                if execution.approval_id:  # what the approver saw bounds what it does
                    runbook_drift.check(runbook, execution, ctx)
                runbook.run(ctx)
                ctx.commit()
        except BaseException as caught:
            ctx.rollback()
            error = _describe(caught) if not isinstance(caught, ParamErrors) else f"its params no longer fit: {caught}"
            if not isinstance(caught, ServiceError | ParamErrors):
                log.error("runbook execution %s failed", execution.id, exc_info=caught)
            ctx.log(f"Failed: {error}")
            if not isinstance(caught, Exception):
                _finish(execution.id, ctx, error, preview=preview, clock=clock)
                raise
    return _finish(execution.id, ctx, error, preview=preview, clock=clock)


def _finish(execution_id: int, ctx: RunbookContext, error: str | None, *, preview: bool, clock: Clock) -> str:
    """Write the outcome, the whole log and (a dry-run's) the changes it found, in one transaction."""
    now = clock()
    if ctx.dry_run:
        ctx.write_records(planned=True)
    if preview:
        status = "failed" if error else "awaiting_approval"
        if not error:
            ctx.log(f"Preview done: {_count(ctx.changes_total)} for the approver to read.")
        values = {"status": "failed", "error": f"the preview for the approver failed: {error}",
                  "finished_at": now} if error else {"previewed_at": now}
        written = _write(execution_id, "awaiting_approval", ctx, values)
        if written and not error:
            _show_diff_to_approver(execution_id, ctx.changes_total)
            if not ctx.changes_total:
                status = _nothing_to_approve(execution_id, ctx, now)
    else:
        status = "failed" if error else "succeeded"
        if not error:
            ctx.log(f"{'Dry-run done' if ctx.dry_run else 'Done'}: {_count(ctx.changes_total)}"
                    f"{' would be made' if ctx.dry_run else ' made'}.")
        written = _write(execution_id, "running", ctx,
                         {"status": status, "error": error, "finished_at": now, "changes_total": ctx.changes_total})
        if written:
            runbook_audit.ended(execution_id, status, now, actor=ctx.actor, note=error,
                                changes_made=ctx.changes_total)
    if not written:
        # The reconciler took it for lost meanwhile (no heartbeat for too long): keep the truth in its log.
        ctx.log(f"This worker finished it after all ({status}); the status above stays as the reconciler left it.")
        db.session.execute(update(EX).where(EX.id == execution_id).values(log="\n".join(ctx.lines))
                           .execution_options(synchronize_session=False))
        status = db.session.get(EX, execution_id).status
    db.session.commit()
    return status


def _write(execution_id: int, expected: str, ctx: RunbookContext, values: dict) -> bool:
    return db.session.execute(
        update(EX).where(EX.id == execution_id, EX.status == expected)
        .values(log="\n".join(ctx.lines), heartbeat_at=ctx.now, **values)
        .execution_options(synchronize_session=False)).rowcount == 1


def _count(number: int) -> str:
    return f"{number} change{'' if number == 1 else 's'}"


def _nothing_to_approve(execution_id: int, ctx: RunbookContext, now) -> str:
    """Close a request whose preview found nothing to change (approved, it would do nothing): no approver's time is
    asked for it. Returns the execution's status."""
    approval_id = db.session.execute(select(EX.approval_id).where(EX.id == execution_id)).scalar_one()
    outcome = ("its dry-run found nothing to change, so there was nothing to approve; ask again if that changes "
               "(the dry-run's log says what it looked at)")
    if not approvals.supersede(approval_id, outcome, now):
        return "awaiting_approval"  # decided meanwhile: the decision stands
    ctx.log(f"Nothing to change: request #{approval_id} closed without asking an approver.")
    if db.session.execute(update(EX).where(EX.id == execution_id, EX.status == "awaiting_approval").values(
            status="cancelled", error=outcome, finished_at=now, log="\n".join(ctx.lines))
            .execution_options(synchronize_session=False)).rowcount:
        runbook_audit.ended(execution_id, "cancelled", now, note=outcome)
    return "cancelled"


def _show_diff_to_approver(execution_id: int, total: int) -> None:
    """Put the preview's changes in the approval request as before → after, while it is still pending."""
    approval_id = db.session.execute(select(EX.approval_id).where(EX.id == execution_id)).scalar_one()
    if not approval_id:
        return
    rows = db.session.execute(select(RunbookChange).where(
        RunbookChange.execution_id == execution_id, RunbookChange.planned.is_(True)).order_by(
        RunbookChange.id).limit(DIFF_SHOWN)).scalars().all()
    before, after = {}, {}
    for row in rows:
        key = f"{row.object} #{row.object_id} {row.field}"
        before[key], after[key] = row.before, row.after
    if not rows:
        before["changes"] = after["changes"] = "none: the dry-run found nothing to change"
    elif total > len(rows):
        before["…"] = after["…"] = f"{total - len(rows)} more: see runbook execution #{execution_id}"
    db.session.execute(update(Approval).where(Approval.id == approval_id, Approval.status == "pending")
                       .values(before=before, after=after).execution_options(synchronize_session=False))
