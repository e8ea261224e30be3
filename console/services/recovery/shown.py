"""Requests as the API and the CLI show them: plain JSON, with the kind's title and the status as it stands now."""

from datetime import datetime

from sqlalchemy import select

from console.domain.secrets import mask_pair
from console.domain.words import said_back
from console.extensions import db
from console.models import Run, RunbookExecution
from console.services.errors import InvalidInput
from console.services.recovery import approvals
from console.services.recovery.registry import KINDS
from console.services.recovery.runbooks import KIND as RUNBOOK_RUN


def title(kind: str) -> str:
    """Return what the approver reads for a kind of change."""
    return KINDS[kind].title if kind in KINDS else kind


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _run_id(approval) -> int | None:
    """Return the run an executed params fix or compensation acted on (kept in its backup), if any."""
    run_id = (approval.backup or {}).get("run_id") if approval.executed_at else None
    return int(run_id) if isinstance(run_id, int | str) and str(run_id).isdigit() else None


def runs_acted_on(found: list[approvals.Row]) -> dict[int, dict]:
    """Return the runs these requests' changes acted on, as they stand now (one query for a page of requests)."""
    ids = {run_id for row in found if (run_id := _run_id(row.approval)) is not None}
    if not ids:
        return {}
    rows = db.session.execute(select(Run.id, Run.status, Run.series).where(Run.id.in_(ids)))
    return {run_id: {"id": run_id, "status": status, "series": series} for run_id, status, series in rows}


def _execution_id(approval) -> int | None:
    """Return the runbook execution a request to run a runbook asks for."""
    subject = approval.subject_id or ""
    return int(subject) if approval.kind == RUNBOOK_RUN and subject.isdigit() else None


def executions_asked(found: list[approvals.Row]) -> dict[int, dict]:
    """Return the runbook executions these requests ask to run, as they stand now (one query for a page)."""
    ids = {execution_id for row in found if (execution_id := _execution_id(row.approval)) is not None}
    if not ids:
        return {}
    rows = db.session.execute(select(RunbookExecution.id, RunbookExecution.status, RunbookExecution.changes_total,
                                     RunbookExecution.finished_at).where(RunbookExecution.id.in_(ids)))
    return {execution_id: {"id": execution_id, "status": status, "changes_total": changes, "finished_at": _iso(ended)}
            for execution_id, status, changes, ended in rows}


def as_dict(found: approvals.Row, now: datetime, runs: dict[int, dict] | None = None,
            executions: dict[int, dict] | None = None) -> dict:
    """Return one request as JSON, fields named like secrets in its before and after masked for everyone (an
    approver decides that a key changes, not to what: a changed one reads "*** (changed)" after); a pending one past
    its time reads as expired. `run` is how the run an executed change acted on stands now, `execution` how a
    runbook's execution does (`outcome` is what was said when it ran: a compensation's undo, a runbook's execution,
    was then queued)."""
    a = found.approval
    before, after = mask_pair(a.before, a.after)
    runs = runs_acted_on([found]) if runs is None else runs
    executions = executions_asked([found]) if executions is None else executions
    return {"id": a.id, "kind": a.kind, "title": title(a.kind), "status": approvals.status_at(a, now),
            "tenant": found.tenant, "subject": {"type": a.subject_type, "id": a.subject_id},
            "requested_by": found.requested_by, "reason": a.reason, "before": before, "after": after,
            "expires_at": _iso(a.expires_at), "decided_by": found.decided_by, "note": a.decision_note,
            "outcome": a.outcome, "created_at": _iso(a.created_at), "decided_at": _iso(a.decided_at),
            "executed_at": _iso(a.executed_at), "rolled_back_at": _iso(a.rolled_back_at),
            "rollback_note": a.rollback_note, "run": runs.get(_run_id(a)),
            "execution": executions.get(_execution_id(a))}


def check_kind(kind: str | None) -> str | None:
    """Return a list's kind filter, or a 422 naming the kinds there are."""
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"kind is one of {', '.join(KINDS)}, not {said_back(kind)}", "kind")
    return kind


def page(*, status: str | None, tenant_id: int | None, before: int | None, limit: int, now: datetime,
         kind: str | None = None) -> dict:
    """Return one keyset page of requests as `GET /api/approvals` answers it: {items, next_before}."""
    found = approvals.rows(status=status, tenant_id=tenant_id, before=before, limit=limit + 1, kind=check_kind(kind),
                           now=now)
    rows = found[:limit]
    runs, executions = runs_acted_on(rows), executions_asked(rows)
    return {"items": [as_dict(row, now, runs, executions) for row in rows],
            "next_before": found[limit - 1].approval.id if len(found) > limit else None}
