"""Requests as the API and the CLI show them: plain JSON, with the kind's title and the status as it stands now."""

from datetime import datetime

from console.services.recovery import approvals
from console.services.recovery.registry import KINDS


def title(kind: str) -> str:
    """Return what the approver reads for a kind of change."""
    return KINDS[kind].title if kind in KINDS else kind


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def as_dict(found: approvals.Row, now: datetime) -> dict:
    """Return one request as JSON; a pending one past its time reads as expired."""
    a = found.approval
    return {"id": a.id, "kind": a.kind, "title": title(a.kind), "status": approvals.status_at(a, now),
            "tenant": found.tenant, "subject": {"type": a.subject_type, "id": a.subject_id},
            "requested_by": found.requested_by, "reason": a.reason, "before": a.before, "after": a.after,
            "expires_at": _iso(a.expires_at), "decided_by": found.decided_by, "note": a.decision_note,
            "outcome": a.outcome, "created_at": _iso(a.created_at), "decided_at": _iso(a.decided_at),
            "executed_at": _iso(a.executed_at), "rolled_back_at": _iso(a.rolled_back_at),
            "rollback_note": a.rollback_note}
