"""Undo a run that succeeded, because a later step of its workflow failed or a person asked (approved):
succeeded → compensating → ...

The same job also finishes a compensation a worker started after a failed attempt and died during.
"""

import logging
from datetime import datetime

from rq import Queue
from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import NOT_COMPENSABLE, Failure, NonRetryableError
from console.domain.notes import MAX_NOTE_CHARS, too_long
from console.domain.secrets import held_in, holding
from console.extensions import db
from console.models import DeadLetter, Run
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import handler_kinds, queueing, transitions
from console.services.engine.calling import undo_call
from console.services.engine.execute import context_for
from console.services.engine.failures import AFTER_FAILURE, compensate_run
from console.services.engine.heartbeat import Heartbeat
from console.services.errors import Conflict, InvalidInput
from console.services.policies import versions as policies
from console.services.settings import setting

log = logging.getLogger("rebound.engine")
ENTRY_POINT = "jobs.compensate.compensate"
REASON = "workflow_step_failed"
REQUESTED = "compensation_requested"  # a person asked for it (and another approved), on a run in no workflow or any
RETRIED = "undo_retried"  # a person had a failed undo tried again (console/services/recovery/undo_retry.py)
CHECKED = "undo_after_review"  # a person ran the undo its error's severity 3 left for them (the same module)
# Compensations that run as a job of their own, not by the worker after an attempt.
ASKED = (REASON, REQUESTED, RETRIED, CHECKED)


def job_id(run_id: int) -> str:
    """Name the compensation job of a run, so queueing it twice cannot make two jobs."""
    return f"compensate-{run_id}"


def can_compensate(run: Run) -> bool:
    """Tell whether a person may ask for this run to be undone now."""
    return run.status == "succeeded" and has_undo_step(run.handler)


def has_undo_step(handler: str) -> bool:
    """Tell whether the handler (still registered) has an undo step to run."""
    return _undo_step(handler) is not None


def check(run: Run, cause) -> str:
    """Return the cause, or say why this run cannot be compensated now."""
    if not isinstance(cause, str):
        raise InvalidInput("cause must be text", "cause")
    if len(cause) > MAX_NOTE_CHARS:
        raise InvalidInput(too_long("cause"), "cause")
    if run.status != "succeeded":
        held = run.status == "dead" and run.status_reason == "manual_intervention"
        undo = "run its undo (Run the undo, on its page), " if _undo_step(run.handler) is not None else ""
        raise Conflict(f"run {run.id} is {run.status}; only a succeeded run can be compensated (" + (
            f"its error's severity 3 left it for a person, with no undo run: replay it, {undo}or resolve it saying "
            "what was done by hand" if held else
            "a failed one is compensated automatically when its handler has an undo step") + ")", "status")
    if _undo_step(run.handler) is None:
        raise Conflict(f"handler {run.handler} has no compensation step to run", "handler")
    return cause


def start(run: Run, actor: Actor, *, cause: str = "", now, reason: str = REASON) -> None:
    """Move a succeeded run to compensating (audited) in the caller's transaction; `enqueue` after the commit."""
    cause = check(run, cause)
    try:
        transitions.move(run, "compensating", now, reason=reason, actor=actor.signature, message=cause or None)
    except transitions.StaleRun:
        raise Conflict(f"run {run.id} changed while asking for its compensation; look again", "status") from None
    audit.record(db.session, actor, "run.compensate", "run", run.id, before={"status": "succeeded"},
                 after={"status": "compensating", "cause": cause[:500]}, tenant=run.tenant.name, clock=lambda: now)


def request(run: Run, actor: Actor, *, cause: str = "", clock: Clock = SYSTEM_CLOCK) -> Run:
    """Start undoing a succeeded run at once (audited); a worker runs its handler's compensation.

    Services call this (a workflow undoing its own steps); a person's request waits for approval instead
    (recovery/run_compensation.py).
    """
    start(run, actor, cause=cause, now=clock())
    db.session.commit()
    enqueue(run.id)
    return run


def start_for_workflow(run: Run, *, actor: str, cause: str, clock: Clock = SYSTEM_CLOCK) -> bool:
    """Start undoing a succeeded step of a failed workflow (its workflow's advance asks); tell whether it started.

    Unlike `request`, a handler with no undo step is not refused: its compensation fails at once as
    `not_compensable`, with a dead letter, so a person learns the step needs undoing by hand.
    """
    try:
        transitions.move(run, "compensating", clock(), reason=REASON, actor=actor,
                         message=cause[:MAX_NOTE_CHARS] or None)
    except transitions.StaleRun:
        return False  # another advance asked first, or the run moved on
    db.session.commit()
    enqueue(run.id)
    return True


def enqueue(run_id: int) -> None:
    """Queue a compensation job; if Redis is down the reconciler queues it later."""
    try:
        # At the front of the runs' queue, as a workflow's advance: an undo (a refund) is recovery, ahead of every
        # queued run (the queues take turns), not at the back of the maintenance queue's own backlog.
        Queue(queueing.RUN_QUEUE, connection=get_redis()).enqueue(
            ENTRY_POINT, run_id, job_id=job_id(run_id), result_ttl=60, failure_ttl=24 * 3600, at_front=True)
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("compensation of run %s committed but not queued (%s); the reconciler will queue it", run_id,
                    error)


def is_queued(run_id: int) -> bool:
    """Tell whether Redis holds a queued or running compensation job for the run."""
    return queueing.status_of(job_id(run_id)) in ("queued", "started")


def job_state(run_id: int) -> tuple[str | None, datetime | None]:
    """Return the status RQ holds for the run's compensation job and when a worker took it."""
    return queueing.state_of(job_id(run_id))


def release_abandoned(run_id: int) -> None:
    """Take the compensation job a dead worker held out of RQ's started registry, before it is queued again."""
    queueing.release(job_id(run_id))


def execute(run_id: int, *, clock: Clock = SYSTEM_CLOCK) -> str:
    """Run a compensation as its own job (one asked for, or one whose worker died); return what became of the run."""
    run = db.session.get(Run, run_id)
    if run is None or run.status != "compensating" or run.status_reason not in (*ASKED, AFTER_FAILURE):
        return "skipped"  # finished already
    timeout_s = policies.effective(run.policy_id, run.policy_overrides)[1].timeout_s
    missing = None
    try:
        invocation = handler_kinds.resolve(run.handler)
        if invocation.compensate is None:
            missing = Failure(NOT_COMPENSABLE, f"handler {run.handler} has no undo step", retryable=False)
    except NonRetryableError:
        invocation = None  # the handler is gone since the undo was asked for: compensate_run records that
    cause = run.status_reason if run.status_reason in ASKED else run.error_code or "non_retryable"
    if cause == CHECKED:  # undone for its own error, as a severity 1 or 2 is at once
        cause = run.error_code or CHECKED
    elif cause == RETRIED:
        cause = _retried_cause(run.id)
    ctx = context_for(run, timeout_s)
    # Beaten at once, not a beat later: the reconciler takes a job a worker started with no fresh beat since for one
    # whose worker died (RQ's own cleanup frees it only after 10 minutes; helper 160).
    db.session.execute(update(Run).where(Run.id == run.id, Run.status == "compensating")
                       .values(heartbeat_at=clock()).execution_options(synchronize_session=False))
    db.session.commit()
    try:
        with Heartbeat(run.id, run.attempt, setting("HEARTBEAT_S"), ctx.cancel_event), holding(held_in(run.params)):
            return compensate_run(run, undo_call(invocation, timeout_s, asked=True), ctx, clock(), cause,
                                  missing=missing, clock=clock)
    except transitions.StaleRun:
        return "skipped"


def _retried_cause(run_id: int) -> str:
    """Return why the undo a person retried had been asked for, as its dead letter says: failing again, the new
    letter then reads the same and joins the same error group and work order (its fingerprint is of the words)."""
    said = db.session.execute(select(DeadLetter.error_message).where(
        DeadLetter.run_id == run_id, DeadLetter.reason == "compensation_failed").order_by(DeadLetter.id.desc())
        .limit(1)).scalar()
    cause = (said or "").split(": ", 1)[0]
    return cause if said and cause != said else RETRIED


def _undo_step(handler: str):
    try:
        return handler_kinds.resolve(handler).compensate
    except NonRetryableError:
        return None  # the handler is gone: nothing to run
