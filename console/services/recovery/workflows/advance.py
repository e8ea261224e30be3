"""Move workflows on: start the next step, or undo the succeeded steps backward once one fails for good.

Called by the RQ job `jobs.workflows.advance` (the engine queues it when a step's run finishes), right after a
submit, and by the reconcile pass for workflows whose job was lost. Any number of callers may race, on any
database: every change is one conditional UPDATE guarded by the state it was decided from (the workflow's status
and step, the step's undo status, the run's status), committed before its side effect (a run submitted, an undo
asked for). A step's run is created under the key `workflow:<id>:step:<n>`, which the engine keeps unique, and
an undo is asked for by the guarded move succeeded → compensating, so neither can happen twice.
"""

import logging
from datetime import timedelta

from sqlalchemy import and_, case, exists, func, or_, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import NOT_COMPENSABLE
from console.domain.saga import (
    ACTIVE,
    LEFT_IN_PLACE,
    MAX_STEPS,
    STEP_FAILED,
    STILL_WORKING,
    STOPPED_AT,
    UNDO_DONE,
    Undo,
    WorkflowStatus,
    step_key,
    step_outcome,
)
from console.extensions import db
from console.models import Run, RunEvent, Workflow, WorkflowStep
from console.services.actor import Actor
from console.services.engine import compensation
from console.services.engine import submit as engine_submit
from console.services.errors import QueueFull, ServiceError
from console.services.recovery.workflows import words
from console.services.settings import setting

log = logging.getLogger("rebound.workflows")
WORKFLOWS, STEPS, RUNS = Workflow.__table__, WorkflowStep.__table__, Run.__table__
EVENTS = RunEvent.__table__
RUNNING, SUCCEEDED = WorkflowStatus.RUNNING.value, WorkflowStatus.SUCCEEDED.value
COMPENSATING, COMPENSATED = WorkflowStatus.COMPENSATING.value, WorkflowStatus.COMPENSATED.value
COMPENSATION_FAILED = WorkflowStatus.COMPENSATION_FAILED.value
# Each pass of the loop makes one change or returns: start or finish each step, then undo each one.
MAX_MOVES = 3 * MAX_STEPS + 3
BATCH = 200
NOTE_CHARS = 2000


def actor_name(workflow_id: int) -> str:
    """Name the workflow as the actor on its runs' timelines."""
    return f"workflow #{workflow_id}"


def advance(workflow_id: int, *, clock: Clock = SYSTEM_CLOCK) -> str:
    """Move the workflow on as far as its steps allow; return its status, or what stopped this call."""
    _undone_by_people(workflow_id, clock)
    for _ in range(MAX_MOVES):
        workflow = _read(Workflow, Workflow.id == workflow_id)
        if workflow is None:
            return "missing"
        if workflow.status == RUNNING:
            stopped = _forward(workflow, clock)
        elif workflow.status == COMPENSATING:
            stopped = _backward(workflow, clock)
        elif workflow.status == COMPENSATION_FAILED:
            stopped = _resume_if_resolved(workflow, clock)
        else:
            return workflow.status
        if stopped is not None:
            db.session.commit()  # end the read transaction: nothing held while waiting
            return stopped
    return "busy"  # a workflow cannot make more moves than this; another call carries on


def _undone_by_people(workflow_id: int, clock: Clock) -> None:
    """Record the undo of steps a person had compensated outside the workflow's own walk (Compensate on a run
    page): the workflow's walk then passes them by. A step the walk has asked to undo keeps its own record, and so
    does the step that failed (a run that failed and undid itself is that step's failure, not an undo asked for)."""
    compensated = select(RUNS.c.workflow_step).where(RUNS.c.workflow_id == workflow_id,
                                                     RUNS.c.status == "compensated").scalar_subquery()
    # Going forward, a compensated run of the current step is that step failing (it is about to be failed_step).
    failed_step = select(case((WORKFLOWS.c.status == RUNNING, WORKFLOWS.c.current_step),
                              else_=func.coalesce(WORKFLOWS.c.failed_step, 0))).where(WORKFLOWS.c.id == workflow_id)
    marked = db.session.execute(update(STEPS).where(
        STEPS.c.workflow_id == workflow_id, STEPS.c.position.in_(compensated),
        STEPS.c.position != failed_step.scalar_subquery(),
        or_(STEPS.c.compensation_status.is_(None), STEPS.c.compensation_status == Undo.NOT_ATTEMPTED.value))
        .values(compensation_status=Undo.COMPENSATED.value, compensation_started_at=_undo_time("compensating"),
                compensation_finished_at=func.coalesce(_undo_time("compensated"), clock()))).rowcount
    db.session.commit()
    if marked:
        log.info("workflow %s: %s compensated by a person recorded", workflow_id, marked)


def _undo_time(kind: str):
    """The latest `kind` event on the timeline of the step's run (the step the UPDATE is at), as a subquery."""
    return (select(func.max(EVENTS.c.at)).select_from(EVENTS.join(RUNS, RUNS.c.id == EVENTS.c.run_id))
            .where(RUNS.c.workflow_id == STEPS.c.workflow_id, RUNS.c.workflow_step == STEPS.c.position,
                   EVENTS.c.kind == kind).scalar_subquery())


def _read(model, *conditions):
    # Always the stored row: another process may have moved it since this session last looked.
    return db.session.execute(select(model).where(*conditions).execution_options(populate_existing=True)
                              ).scalar_one_or_none()


def _step_run(workflow: Workflow, position: int) -> Run | None:
    return _read(Run, Run.workflow_id == workflow.id, Run.workflow_step == position)


def _step(workflow: Workflow, position: int) -> WorkflowStep:
    return _read(WorkflowStep, WorkflowStep.workflow_id == workflow.id, WorkflowStep.position == position)


def _move(workflow: Workflow, expected_status: str, expected_step: int, run_statuses=None, run_reason=None,
          **values) -> bool:
    """Change the workflow if it still is as read (and its step's run in one of run_statuses, for run_reason if
    given); tell whether it was."""
    statement = update(WORKFLOWS).where(WORKFLOWS.c.id == workflow.id, WORKFLOWS.c.status == expected_status,
                                        WORKFLOWS.c.current_step == expected_step)
    if run_statuses is not None:
        statement = statement.where(exists().where(
            RUNS.c.workflow_id == workflow.id, RUNS.c.workflow_step == expected_step,
            RUNS.c.status.in_(sorted(run_statuses)),
            *([RUNS.c.status_reason == run_reason] if run_reason is not None else [])))
    return db.session.execute(statement.values(**values)).rowcount == 1


def _raced() -> str:
    db.session.rollback()
    return "raced"  # another call changed it first and carries on from there


# Going forward.

def _forward(workflow: Workflow, clock: Clock) -> str | None:
    position = workflow.current_step
    if position == 0:
        return _claim(workflow, 1, clock)
    run = _step_run(workflow, position)
    if run is None:
        return _start(workflow, position, clock)  # claimed, but its run was not created (a caller died between)
    outcome = step_outcome(run.status)
    if outcome == "waiting":
        return "waiting"
    if outcome == "failed":
        if run.status == "dead" and run.status_reason in LEFT_IN_PLACE:
            return _hold(workflow, run, clock)
        return _fail(workflow, position, clock, failure_note(position, run), run_statuses=STEP_FAILED)
    now = clock()
    if position == workflow.step_count:
        if not _move(workflow, RUNNING, position, {"succeeded"}, status=SUCCEEDED, updated_at=now, finished_at=now,
                     note=None):
            return _raced()
        db.session.commit()
        return None
    return _claim(workflow, position + 1, clock, run_statuses={"succeeded"})


def _claim(workflow: Workflow, position: int, clock: Clock, run_statuses=None) -> str | None:
    """Make `position` the workflow's current step; the caller that wins the UPDATE starts it."""
    if not _move(workflow, RUNNING, position - 1, run_statuses, current_step=position, updated_at=clock(), note=None):
        return _raced()
    db.session.commit()  # write-ahead: the claim is durable before the run is created
    return _start(workflow, position, clock)


def _start(workflow: Workflow, position: int, clock: Clock) -> str | None:
    """Create the step's run through the engine (once: its key is unique), or fail the step if it cannot run."""
    step = _step(workflow, position)
    try:
        run, _ = engine_submit.submit(
            workflow.tenant, Actor(actor_name(workflow.id)), handler=step.handler, params=step.params,
            policy=step.policy, idempotency_key=step_key(workflow.id, position), source="workflow",
            workflow_id=workflow.id, workflow_step=position, clock=clock)
    except QueueFull as error:
        db.session.rollback()
        if _move(workflow, RUNNING, position, note=f"step {position} waits to start: {error.detail}"[:NOTE_CHARS]):
            db.session.commit()
        return "waiting"  # the reconcile pass tries again
    except ServiceError as error:  # its handler or policy is gone: the step can never run
        db.session.rollback()
        return _fail(workflow, position, clock, f"step {position} could not start: {error.detail}")
    if (run.workflow_id, run.workflow_step) != (workflow.id, position):
        return _fail(workflow, position, clock, f"step {position} could not start: run #{run.id}, outside this "
                                                f"workflow, already holds its idempotency key")
    return "started"


def failure_note(position: int, run: Run) -> str:
    """Say why the workflow turned to undoing: which step failed for good, and how (read again later, its run may
    have been replayed alone since: then the note says so rather than that it ended well)."""
    # The first step leaves nothing to undo: "compensated" alone read as if something had been (helper 105).
    nothing = "; no step before it had succeeded, so there was nothing to undo" if position == 1 else ""
    if run.status == "cancelled":
        # A cancel is a person's (or a mutex's) word, not a failure: an earlier attempt's error is not its cause.
        by = _cancelled_by(run.id)
        return f"step {position} was cancelled{f' by {by}' if by else ''}: run #{run.id} ended cancelled{nothing}"
    error = f" ({run.error_code}: {(run.error_message or '')[:300]})" if run.error_code else ""
    if run.status in STEP_FAILED:
        return f"step {position} failed for good: run #{run.id} ended {run.status.replace('_', ' ')}{error}{nothing}"
    return f"step {position} failed for good; {words.replayed_alone(run)}"


def _cancelled_by(run_id: int) -> str | None:
    """Name who cancelled the run (or asked it to stop), from its timeline; None when nobody is named."""
    return db.session.execute(select(EVENTS.c.actor).where(
        EVENTS.c.run_id == run_id, EVENTS.c.actor.is_not(None),
        or_(EVENTS.c.to_status == "cancelled", EVENTS.c.kind == "cancel_requested"))
        .order_by(EVENTS.c.id.desc()).limit(1)).scalar_one_or_none()


def _fail(workflow: Workflow, position: int, clock: Clock, note: str, run_statuses=None) -> str | None:
    """Turn the workflow to undoing the steps before `position`, from the last one back."""
    now = clock()
    if not _move(workflow, RUNNING, position, run_statuses, status=COMPENSATING, failed_step=position,
                 current_step=position - 1, updated_at=now, note=note[:NOTE_CHARS]):
        return _raced()
    db.session.execute(update(STEPS).where(STEPS.c.workflow_id == workflow.id, STEPS.c.position < position,
                                           STEPS.c.compensation_status.is_(None))
                       .values(compensation_status=Undo.PENDING.value))
    db.session.commit()
    log.warning("workflow %s: %s; undoing steps %s..1", workflow.id, note, position - 1)
    return None


def _hold(workflow: Workflow, run: Run, clock: Clock) -> str | None:
    """Stop the workflow at the step that failed, before undoing anything: its run may still be in place (its
    error's severity 3 left it for a person, or its own undo failed), and undoing the steps before it under it could
    do harm, as under an earlier step whose undo failed. A person runs or retries its undo, or resolves its run."""
    now, position = clock(), run.workflow_step
    undo = Undo.NOT_COMPENSABLE.value if run.error_code == NOT_COMPENSABLE else LEFT_IN_PLACE[run.status_reason]
    if undo == Undo.MANUAL_INTERVENTION.value:
        why = f"{run.error_code}: {run.error_message or ''}".rstrip(": ")
        if compensation.has_undo_step(run.handler):
            what = "waits for a person: its error's severity 3 left it with its undo not run"
        else:  # "its undo not run" promised one (helper 150): a person undoes it by hand and resolves its run
            undo, what = Undo.NOT_COMPENSABLE.value, ("waits for a person: its error's severity 3 left it for a "
                                                      "person, and its handler has no undo step")
    else:  # the run's error is its undo's, after why it was undone ("card_declined: RuntimeError: ...")
        what, why = "could not be undone by its own undo step", run.error_message or ""
    note = (f"step {position} failed for good and {what} (run #{run.id}{words.FOR_A_PERSON}"
            + ("; steps before it were left as they are" if position > 1 else "") + (f". {why[:300]}" if why else ""))
    if not _move(workflow, RUNNING, position, {"dead"}, run_reason=run.status_reason, status=COMPENSATION_FAILED,
                 failed_step=position, updated_at=now, finished_at=now, note=note[:NOTE_CHARS]):
        return _raced()
    db.session.execute(update(STEPS).where(STEPS.c.workflow_id == workflow.id, STEPS.c.position == position)
                       .values(compensation_status=undo, note=(why or what)[:NOTE_CHARS]))
    db.session.execute(update(STEPS).where(STEPS.c.workflow_id == workflow.id, STEPS.c.position < position,
                                           STEPS.c.compensation_status.is_(None))
                       .values(compensation_status=Undo.NOT_ATTEMPTED.value))
    db.session.commit()
    log.warning("workflow %s: %s; stopped for a person", workflow.id, note)
    return None


# Undoing backward.

def _backward(workflow: Workflow, clock: Clock) -> str | None:
    position = workflow.current_step
    now = clock()
    if position == 0:
        if not _move(workflow, COMPENSATING, 0, status=COMPENSATED, updated_at=now, finished_at=now):
            return _raced()
        db.session.commit()
        return None
    step, run = _step(workflow, position), _step_run(workflow, position)
    undo = step.compensation_status
    if undo in (Undo.COMPENSATED.value, Undo.RESOLVED.value):  # a person undid it already: on to the step before
        if not _move(workflow, COMPENSATING, position, current_step=position - 1, updated_at=now):
            return _raced()
        db.session.commit()
        return None
    if undo == Undo.PENDING.value:
        claimed = db.session.execute(update(STEPS).where(
            STEPS.c.id == step.id, STEPS.c.compensation_status == Undo.PENDING.value).values(
            compensation_status=Undo.COMPENSATING.value, compensation_started_at=now)).rowcount
        if not claimed:
            return _raced()
        db.session.commit()  # write-ahead: the step is marked before its undo is asked for
        undo = Undo.COMPENSATING.value
    if undo != Undo.COMPENSATING.value:
        return "waiting"
    if run.status == "succeeded":
        cause = f"step {workflow.failed_step} of workflow #{workflow.id} ({workflow.name}) failed"
        started = compensation.start_for_workflow(run, actor=actor_name(workflow.id), cause=cause, clock=clock)
        return "undoing" if started else None
    if run.status not in UNDO_DONE:
        return "waiting"
    return _undone(workflow, step, run, clock)


def _undone(workflow: Workflow, step: WorkflowStep, run: Run, clock: Clock) -> str | None:
    """Record how a step's undo ended; go on to the step before it, or stop for a person."""
    now, position = clock(), step.position
    # The run's error reads "<why it was undone>: <what went wrong>"; the workflow says the first part itself.
    error = run.error_message or ""
    for asked in compensation.ASKED:
        error = error.removeprefix(f"{asked}: ")
    if run.status == "compensated":
        result, note = Undo.COMPENSATED.value, None
    elif run.error_code == NOT_COMPENSABLE:
        result, note = Undo.NOT_COMPENSABLE.value, (error or "its handler has no undo step")[:NOTE_CHARS]
    else:
        result, note = Undo.FAILED.value, (error or "its undo step kept failing")[:NOTE_CHARS]
    marked = db.session.execute(update(STEPS).where(
        STEPS.c.id == step.id, STEPS.c.compensation_status == Undo.COMPENSATING.value).values(
        compensation_status=result, compensation_finished_at=now, note=note)).rowcount
    if not marked:
        return _raced()
    if result == Undo.COMPENSATED.value:
        moved = _move(workflow, COMPENSATING, position, {"compensated"}, current_step=position - 1, updated_at=now)
    else:
        # Undoing an earlier step under one that is still in place could do harm: a person decides what next.
        what = "is not compensable" if result == Undo.NOT_COMPENSABLE.value else "could not be undone"
        why = _sentence(note)  # its own sentence after the workflow's
        moved = _move(workflow, COMPENSATING, position, UNDO_DONE, status=COMPENSATION_FAILED, updated_at=now,
                      finished_at=now, note=(f"step {position} {what} (run #{run.id}{words.FOR_A_PERSON}"
                                             + ("; steps before it were left as they are" if position > 1 else "")
                                             + f". {why}.")[:NOTE_CHARS])
        db.session.execute(update(STEPS).where(
            STEPS.c.workflow_id == workflow.id, STEPS.c.position < position,
            STEPS.c.compensation_status == Undo.PENDING.value).values(compensation_status=Undo.NOT_ATTEMPTED.value))
    if not moved:
        return _raced()
    db.session.commit()
    return None


def _sentence(text: str) -> str:
    """Make an undo's error its own sentence: capitalised, unless it starts with an error code ("card_declined: …"
    read "Card_declined: …"; helper 150), without a full stop of its own."""
    first = text.split(" ", 1)[0]
    code = first.endswith(":") or "_" in first
    return (text if code else text[:1].upper() + text[1:]).rstrip(".")


def _resume_if_resolved(workflow: Workflow, clock: Clock) -> str | None:
    """Go on undoing once the step whose undo stopped the workflow is undone after all: a person resolved its run
    (undone by hand), or its run, replayed since, was compensated at a person's request."""
    position = workflow.current_step
    run = _step_run(workflow, position) if position else None
    if run is None or run.status not in ("resolved", "compensated"):
        return workflow.status  # a person decides what next
    now = clock()
    # A replayed step compensated later stayed "failed" here, the workflow stuck for good (helper 105).
    undone = Undo.RESOLVED.value if run.status == "resolved" else Undo.COMPENSATED.value
    marked = db.session.execute(update(STEPS).where(
        STEPS.c.workflow_id == workflow.id, STEPS.c.position == position,
        STEPS.c.compensation_status.in_(STOPPED_AT))
        .values(compensation_status=undone, compensation_finished_at=now,
                # Compensated at a person's request: its undo started then ("Undo started" read "—"; helper 150).
                compensation_started_at=func.coalesce(STEPS.c.compensation_started_at, _undo_time("compensating"))
                if undone == Undo.COMPENSATED.value else STEPS.c.compensation_started_at)).rowcount
    if not marked:
        return _raced()
    failed = _step_run(workflow, workflow.failed_step)
    note = failure_note(workflow.failed_step, failed) if failed is not None else None
    if not _move(workflow, COMPENSATION_FAILED, position, {run.status}, status=COMPENSATING, current_step=position - 1,
                 updated_at=now, finished_at=None, note=note[:NOTE_CHARS] if note else None):
        return _raced()
    db.session.execute(update(STEPS).where(
        STEPS.c.workflow_id == workflow.id, STEPS.c.position < position,
        STEPS.c.compensation_status == Undo.NOT_ATTEMPTED.value).values(compensation_status=Undo.PENDING.value))
    db.session.commit()
    log.warning("workflow %s: step %s was %s; undoing steps %s..1", workflow.id, position,
                "resolved by a person" if run.status == "resolved" else "compensated at last", position - 1)
    return None


def reconcile(clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """The "workflows" maintenance job: advance active workflows that have not moved though they could.

    Their advance job was lost (Redis down or flushed) or its caller died between a claim and its side effect.
    A workflow whose current step's run is still at work is left alone: the engine's reconciler tends the run.
    So is one stopped for a person, until the step that stopped it is resolved or, replayed since, compensated.
    """
    cutoff = clock() - timedelta(seconds=setting("REQUEUE_AFTER_S"))
    current = and_(RUNS.c.workflow_id == WORKFLOWS.c.id, RUNS.c.workflow_step == WORKFLOWS.c.current_step)
    stop_still_marked = exists().where(
        STEPS.c.workflow_id == WORKFLOWS.c.id, STEPS.c.position == WORKFLOWS.c.current_step,
        STEPS.c.compensation_status.in_(STOPPED_AT))
    resolved_stop = and_(WORKFLOWS.c.status == COMPENSATION_FAILED, RUNS.c.status.in_(["compensated", "resolved"]),
                         stop_still_marked)
    ids = db.session.execute(
        select(WORKFLOWS.c.id).select_from(WORKFLOWS.outerjoin(RUNS, current))
        .where(or_(WORKFLOWS.c.status.in_(ACTIVE), resolved_stop), WORKFLOWS.c.updated_at <= cutoff,
               or_(RUNS.c.id.is_(None), and_(RUNS.c.status.not_in(sorted(STILL_WORKING)), RUNS.c.updated_at <= cutoff)))
        .order_by(WORKFLOWS.c.id).limit(BATCH)).scalars().all()
    db.session.commit()
    for workflow_id in ids:
        advance(workflow_id, clock=clock)
    if ids:
        log.warning("reconciled workflows %s: their advance was lost", ids)
    return list(ids)
