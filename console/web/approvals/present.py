"""How a request reads on the pages: its kind, its subject with a link, its status now, its changed fields."""

from dataclasses import dataclass

from flask import url_for

from console.domain import diff
from console.models import Approval
from console.services.recovery import approvals, shown
from console.services.recovery.registry import KINDS


@dataclass(frozen=True)
class Subject:
    label: str
    url: str | None


def subject(approval: Approval) -> Subject:
    """Name what a request changes, with a link to where people read it."""
    payload = approval.payload or {}
    if approval.subject_type == "dead_letter" and payload.get("run_id"):
        return Subject(f"dead letter #{approval.subject_id} · run #{payload['run_id']}",
                       url_for("runs.show", run_id=payload["run_id"]))
    if approval.subject_type == "run" and approval.subject_id.isdigit():
        return Subject(f"run #{approval.subject_id}", url_for("runs.show", run_id=int(approval.subject_id)))
    if approval.subject_type == "dead_letters":
        count = len(payload.get("ids", []))
        return Subject(f"{count} dead letter{'s' if count != 1 else ''}", url_for("dlq.index", view="list"))
    return Subject(f"{approval.subject_type.replace('_', ' ')} {approval.subject_id}", None)


def can_roll_back(approval: Approval) -> bool:
    """Tell whether an executed change has a way back."""
    return approval.status == "executed" and approval.kind in KINDS and KINDS[approval.kind].rollback is not None


def helpers() -> dict:
    """What the Approvals templates (and the pages that link to requests) use."""
    return {"subject_of": subject, "state_of": approvals.status_at, "kind_title": shown.title, "changes": diff.changes,
            "shown": diff.shown}
