"""Read workflows for people and services: a page of them, or one with its steps' runs and its compensation trail."""

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import joinedload

from console.domain.saga import STEP_FAILED, Undo, WorkflowStatus
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, Workflow, WorkflowStep
from console.services.errors import InvalidInput, NotFound
from console.services.recovery.workflows import words

PAGE_SIZE = 50
STATUSES = tuple(status.value for status in WorkflowStatus)
# What an undo leaves on its run's timeline: asked for, each failed try, and how it ended.
UNDO_EVENTS = ("compensating", "compensation_attempt_failed", "compensated", "compensation_failed")


@dataclass(frozen=True)
class StepView:
    step: WorkflowStep
    run: Run | None
    undo_attempts: int  # tries of its undo step so far (0 when none ran)

    @property
    def status(self) -> str:
        """The step's run status, or not_started."""
        return self.run.status if self.run is not None else "not_started"


@dataclass(frozen=True)
class TrailEntry:
    """One thing that happened while undoing a step: asked for, a failed try, undone, or failed for good."""

    position: int
    run_id: int
    at: datetime
    kind: str
    actor: str | None
    error_code: str | None
    message: str | None
    number: int | None  # which try failed, or the one that undid it


@dataclass
class WorkflowDetail:
    workflow: Workflow
    steps: list[StepView]
    trail: list[TrailEntry] = field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The workflow's note, and what became of its failed step's run since (see shown_note)."""
        failed = self.workflow.failed_step
        run = next((view.run for view in self.steps if view.step.position == failed), None) if failed else None
        return shown_note(self.workflow, run, _settled_letters([run.id] if run is not None else []))


def shown_note(workflow: Workflow, failed_run, settled: dict | None = None) -> str | None:
    """Return a workflow's note, with what became of its failed step's run when a person replayed it alone after the
    workflow ended (the note was written when it failed), or of its dead letter when a person settled it without a
    replay; `failed_run` has the run's id and status, `settled` maps a run id to its settled letter."""
    note = workflow.note
    # The step that failed and stopped the workflow at once has its undo run at a person's word: not a replay.
    undoing_it = workflow.status == WorkflowStatus.COMPENSATING.value and workflow.current_step == workflow.failed_step
    if not note or failed_run is None or undoing_it or f"run #{failed_run.id} was replayed alone" in note:
        return note
    if failed_run.status in STEP_FAILED:
        letter = (settled or {}).get(failed_run.id)
        # Written when it failed; a discard since left no letter waiting for anyone (helper 160).
        return note.replace(words.FOR_A_PERSON, words.letter_settled(*letter)) if letter else note
    return f"{note}; {words.replayed_alone(failed_run)}"


def _settled_letters(run_ids: list[int]) -> dict[int, tuple]:
    """Return, for each of these runs whose latest dead letter was settled without a replay (discarded or resolved),
    that letter: run id → (letter id, status, by whom, when)."""
    if not run_ids:
        return {}
    latest = {}
    for row in db.session.execute(select(DeadLetter.run_id, DeadLetter.id, DeadLetter.status, DeadLetter.resolved_by,
                                         DeadLetter.resolved_at).where(DeadLetter.run_id.in_(run_ids))
                                  .order_by(DeadLetter.id)):
        latest[row.run_id] = tuple(row)[1:]
    return {run_id: letter for run_id, letter in latest.items() if letter[1] in ("discarded", "resolved")}


def notes(workflows: list[Workflow]) -> dict[int, str | None]:
    """Return each listed workflow's note as its page shows it, in one query for their failed steps' runs (the list
    said "run #4090 ended dead" where the page said it was replayed alone since and succeeded; helper 105)."""
    failed = {workflow.id: workflow.failed_step for workflow in workflows if workflow.failed_step and workflow.note}
    runs = {row.workflow_id: row for row in db.session.execute(
        select(Run.id, Run.status, Run.workflow_id, Run.workflow_step).where(Run.workflow_id.in_(list(failed))))
        if row.workflow_step == failed[row.workflow_id]} if failed else {}
    settled = _settled_letters([run.id for run in runs.values() if run.status in STEP_FAILED])
    return {workflow.id: shown_note(workflow, runs.get(workflow.id), settled) for workflow in workflows}


def get(workflow_id: int, scope: int | None = None) -> Workflow:
    """Return a workflow visible to this tenant scope, or NotFound (also for another tenant's)."""
    workflow = db.session.get(Workflow, workflow_id)
    if workflow is None or (scope is not None and workflow.tenant_id != scope):
        raise NotFound(f"no workflow with id {workflow_id}")
    return workflow


def detail(workflow: Workflow) -> WorkflowDetail:
    """Return the workflow with each step's run and the undo trail, oldest first."""
    steps = db.session.execute(select(WorkflowStep).where(WorkflowStep.workflow_id == workflow.id)
                               .order_by(WorkflowStep.position)).scalars().all()
    runs = {run.workflow_step: run for run in db.session.execute(
        select(Run).where(Run.workflow_id == workflow.id)).scalars()}
    position_of = {run.id: position for position, run in runs.items()}
    events = db.session.execute(select(RunEvent).where(RunEvent.run_id.in_(list(position_of)),
                                                       RunEvent.kind.in_((*UNDO_EVENTS, "resolved")))
                                .order_by(RunEvent.id)).scalars().all() if position_of else []
    # A resolution is part of the trail where it stood for the undo (undone by hand), not for a step that failed.
    by_hand = {step.position for step in steps if step.compensation_status == Undo.RESOLVED.value}
    trail = [TrailEntry(position_of[event.run_id], event.run_id, event.at, event.kind, event.actor, event.error_code,
                        event.message, _try_number(event.data or {})) for event in events
             if event.kind != "resolved" or position_of[event.run_id] in by_hand]
    tries: dict[int, int] = {}
    for entry in trail:
        if entry.kind in ("compensation_attempt_failed", "compensated"):
            tries[entry.position] = tries.get(entry.position, 0) + 1
    return WorkflowDetail(workflow, [StepView(step, runs.get(step.position), tries.get(step.position, 0))
                                     for step in steps], trail)


def _try_number(data: dict) -> int | None:
    return data.get("number") or data.get("compensation_attempts")


def rows(*, scope: int | None = None, status: str | None = None, before: int | None = None,
         limit: int = PAGE_SIZE, tenant_id: int | None = None, text: str | None = None) -> list[Workflow]:
    """Return workflows newest first, one keyset page at a time (pass the last id as `before` for the next);
    `text` finds it by its number (#12), or by a piece of its name or idempotency key."""
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}", "status")
    query = select(Workflow).options(joinedload(Workflow.tenant)).order_by(Workflow.id.desc()).limit(limit)
    if scope is not None:
        query = query.where(Workflow.tenant_id == scope)
    if tenant_id is not None:
        query = query.where(Workflow.tenant_id == tenant_id)
    if text:
        # "Where is the saga of order 7?": its key is how the caller knows it (helper 105).
        number = text.removeprefix("#")
        found = or_(Workflow.name.icontains(text, autoescape=True),
                    Workflow.idempotency_key.icontains(text, autoescape=True))
        query = query.where(or_(found, Workflow.id == int(number)) if number.isdigit() and len(number) < 19 else found)
    if status is not None:
        query = query.where(Workflow.status == status)
    if before is not None:
        query = query.where(Workflow.id < before)
    return db.session.execute(query).scalars().all()
