"""How a request reads on the pages: its kind, its subject with a link, its status now, its changed fields."""

from dataclasses import dataclass

from flask import url_for
from sqlalchemy import select

from console.domain import diff
from console.domain.runbooks import NOUNS, references
from console.extensions import db
from console.models import Approval, DeadLetter, Run, RunbookExecution
from console.services.engine import control
from console.services.recovery import (
    approvals,
    bulk_discard,
    decisions,
    params_fix,
    run_compensation,
    runbook_registry,
    runbooks,
    shown,
)
from console.services.recovery.registry import KINDS
from console.services.recovery.runbook_registry import Runbook
from console.services.recovery.workflows.words import workflow_compensation, workflow_replay
from console.web.runbooks.present import value_text


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
    if approval.subject_type == "runbook_execution" and approval.subject_id.isdigit():
        acts_on = _objects_named(payload.get("runbook", ""), payload.get("params") or {})
        return Subject(f"runbook {payload.get('runbook', '?')}{acts_on} · execution #{approval.subject_id}",
                       url_for("runbooks.execution", execution_id=int(approval.subject_id)))
    if approval.subject_type == "dead_letters":
        count = len(payload.get("ids", []))
        return Subject(f"{count} dead letter{'s' if count != 1 else ''}", url_for("dlq.index", view="list"))
    return Subject(f"{approval.subject_type.replace('_', ' ')} {approval.subject_id}", None)


def _objects_named(name: str, params: dict, shown: int = 3) -> str:
    """Say which runs, dead letters or task a runbook's params name (" on dead letter #77"), so a request in the list
    says what it touches; "" when they name none (a filter)."""
    runbook = runbook_registry.get(name)
    parts = [f"{NOUNS[kind]}{'s' if len(ids) > 1 else ''} "
             + ", ".join(f"#{one}" for one in ids[:shown]) + (" …" if len(ids) > shown else "")
             for kind, ids in (references(runbook.params, params) if runbook else [])]
    return f" on {'; '.join(parts)}" if parts else ""


def letters(approval: Approval) -> list[DeadLetter]:
    """Return the dead letters a request acts on, as they stand now (a bulk discard's, a params fix's one)."""
    if approval.kind == bulk_discard.NAME:
        return bulk_discard.letters(approval)
    return params_fix.letters(approval) if approval.kind == params_fix.NAME else []


@dataclass(frozen=True)
class RunbookRequest:
    """A request to run a runbook for real: what runs, with which params, and what its dry-run found."""

    execution: RunbookExecution
    runbook: Runbook | None  # None once its code is gone
    planned: list
    planned_count: int


def runbook_request(approval: Approval) -> RunbookRequest | None:
    """Return what an approver of a runbook run needs to judge it, or None for another kind of request."""
    if approval.kind != runbooks.KIND or not approval.subject_id.isdigit():
        return None
    execution = runbooks.get(int(approval.subject_id))  # the request's tenant scope holds for its execution
    planned, planned_count = runbooks.changes(execution.id, planned=True)
    return RunbookRequest(execution, runbook_registry.get(execution.runbook), planned, planned_count)


@dataclass(frozen=True)
class RunOutcome:
    """How the run an approved change acted on stands now: its link, its status, and what that says of the change."""

    run: Run
    words: str
    letter_id: int | None = None  # its open dead letter, when it died again: where to act next


def _open_letter(run: Run) -> int | None:
    return db.session.execute(select(DeadLetter.id).where(DeadLetter.run_id == run.id, DeadLetter.status == "open")
                              .order_by(DeadLetter.id.desc()).limit(1)).scalar() if run.status == "dead" else None


def run_outcome(approval: Approval) -> RunOutcome | None:
    """Return how an executed params fix's or compensation's run stands now, or None for other requests."""
    backup = approval.backup or {}
    if approval.status not in ("executed", "rolled_back") or "run_id" not in backup:
        return None
    run = control.get_run(backup["run_id"])  # the request's tenant scope holds for its run
    if approval.kind == params_fix.NAME:
        # Rolled back before its replay started, the replay runs with the params as they were, not the fix's.
        params = "the params as they were (rolled back)" if approval.status == "rolled_back" else "the fixed params"
        series = backup.get("series")
        if series is None:
            return RunOutcome(run, f"replayed with {params}; now", _open_letter(run))
        moved = f", and has since moved on to series {run.series}" if run.series != series else ""
        return RunOutcome(run, f"replayed as series {series} with {params}{moved}; now", _open_letter(run))
    if approval.kind == run_compensation.NAME:
        words = {"compensating": "its undo step is queued or running", "compensated": "its undo step succeeded"}
        return RunOutcome(run, "— " + words.get(run.status, "its undo step did not succeed") + "; now",
                          _open_letter(run))
    return None


def run_to_undo(approval: Approval) -> Run | None:
    """Return the run a compensation request undoes (what the approver judges: its handler, params and result)."""
    if approval.kind != run_compensation.NAME:
        return None
    return db.session.get(Run, approval.payload["run_id"])


def can_roll_back(approval: Approval) -> bool:
    """Tell whether an executed change has a way back."""
    return approval.status == "executed" and approval.kind in KINDS and KINDS[approval.kind].rollback is not None


def no_rollback(approval: Approval) -> str | None:
    """Say why an executed change of a kind without a way back has none (None: it has one, or is not executed)."""
    kind = KINDS.get(approval.kind)
    return kind.no_rollback if approval.status == "executed" and kind is not None and kind.rollback is None else None


def why_kept(approval: Approval) -> str | None:
    """Say why an executed change that has a way back would be refused one now (None: it may be tried)."""
    kind = KINDS[approval.kind]
    return kind.why_kept(approval) if kind.why_kept else None


def helpers() -> dict:
    """What the Approvals templates (and the pages that link to requests) use."""
    return {"subject_of": subject, "state_of": approvals.status_at, "kind_title": shown.title, "changes": diff.changes,
            "shown": diff.shown, "value_text": value_text, "rolled_back_in_part": decisions.rolled_back_in_part}


def workflow_note(approval: Approval) -> str:
    """Say what the request does to the saga workflow its run is a step of (the approver is the last to decide):
    a compensation undoes that step alone, a params fix replays it alone; '' for any other request or run, and once
    it is decided: read from the workflow as it is now, an executed compensation said it would leave the workflow as
    it was beside a workflow its undo had gone on undoing (helper 160); its outcome says what happened."""
    words = {run_compensation.NAME: workflow_compensation, params_fix.NAME: workflow_replay}.get(approval.kind)
    if words is None or approval.status != "pending":
        return ""
    run = db.session.get(Run, approval.payload["run_id"])
    return words(run) if run is not None else ""
