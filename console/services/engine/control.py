"""What people and services do to runs: cancel, retry now, replay dead letters."""

from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import replays, transitions, waiting_fixes
from console.services.engine import submit as submitting
from console.services.errors import Conflict, NotFound
from console.services.policies import versions as policies
from console.services.policies.tenant_overrides import keep_breaker_to_tenant

RETRYABLE_BY_HAND = ("dead", "failed", "cancelled")


def get_run(run_id: int, tenant_id: int | None = None) -> Run:
    """Return a run visible to this tenant scope, or raise NotFound."""
    run = db.session.get(Run, run_id)
    if run is None or (tenant_id is not None and run.tenant_id != tenant_id):
        raise NotFound(f"no run with id {run_id}")
    return run


WAITING = ("pending", "retry_wait")


def cancel(run: Run, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> Run:
    """Cancel a waiting run at once, or ask a running one to stop at its next check."""
    now = clock()
    if run.status in WAITING:
        cancel_waiting(run, actor, now)
    elif run.status == "running":
        if not transitions.request_cancel(run, now, actor=actor.name):
            raise Conflict(f"run {run.id} changed while cancelling; look again")
        _audit_cancel(run, actor, "running", now)
    else:
        raise Conflict(f"run {run.id} is {run.status}; only pending, retry_wait and running runs can be cancelled",
                       "status")
    db.session.commit()
    return run


def cancel_waiting(run: Run, actor: Actor, now) -> None:
    """Cancel a pending or retry_wait run, audited, in the caller's transaction; a Conflict (its transaction rolled
    back) when it moved on meanwhile (a running one is asked to stop by cancel(), never by a bulk cancel)."""
    before = run.status
    _move_waiting(run, WAITING, "cancelled", "cancelling", now, reason="cancelled_by_person", actor=actor.name,
                  finished_at=now, next_retry_at=None)
    _audit_cancel(run, actor, before, now)


def _audit_cancel(run: Run, actor: Actor, before: str, now) -> None:
    audit.record(db.session, actor, "run.cancel", "run", run.id, before={"status": before},
                 after={"status": run.status, "cancel_requested": run.cancel_requested}, tenant=run.tenant.name,
                 clock=lambda: now)


def pull_forward(run: Run, actor: Actor, now) -> None:
    """Start a run waiting for its retry now, audited, in the caller's transaction (queue it after the commit); a
    Conflict (its transaction rolled back) when it moved on meanwhile."""
    _move_waiting(run, ("retry_wait",), "pending", "retrying", now, reason="manual_retry", actor=actor.name,
                  next_retry_at=None, enqueued_at=now)
    audit.record(db.session, actor, "run.retry", "run", run.id, before={"status": "retry_wait", "series": run.series},
                 after={"status": run.status, "series": run.series}, tenant=run.tenant.name, clock=lambda: now)


def _move_waiting(run: Run, waiting: tuple[str, ...], target: str, doing: str, now, **values) -> None:
    """Move a run still in one of these statuses, or raise a Conflict naming what it is now."""
    if run.status not in waiting:
        raise Conflict(f"run {run.id} is {run.status}, no longer {' or '.join(waiting)}", "status")
    try:
        transitions.move(run, target, now, **values)
    except transitions.StaleRun:
        raise Conflict(f"run {run.id} changed while {doing}; look again") from None


def _restart(run: Run, actor: Actor, now, kind: str) -> None:
    """Start a new attempt series on the same run and idempotency key (queued by the caller after its commit)."""
    transitions.move(run, "pending", now, reason=kind, actor=actor.name, series=run.series + 1, enqueued_at=now,
                     clear_error=True, **replays.RESTART_VALUES)


def retry_now(run: Run, actor: Actor, *, policy=None, clock: Clock = SYSTEM_CLOCK) -> tuple[Run, list[int]]:
    """Retry a dead, failed or cancelled run now (a new series), or pull a waiting retry forward; return the run and
    the params fixes this closed (a dead run's letters close, and so do the fixes waiting on them)."""
    now = clock()
    fixes = waiting_fixes.hold(db.session.execute(select(DeadLetter.id).where(
        DeadLetter.run_id == run.id, DeadLetter.status == "open")).scalars()) if run.status == "dead" else []
    before = {"status": run.status, "series": run.series, "policy_id": run.policy_id,
              "policy_overrides": run.policy_overrides}
    if policy is not None:
        keep_breaker_to_tenant(policy, actor)
        policy_id, overrides = submitting._policy_choice(policy, None)
        policy_id = policy_id or run.policy_id
        submitting.effective_policy(policy_id, overrides)
        db.session.execute(update(Run).where(Run.id == run.id).values(policy_id=policy_id, policy_overrides=overrides))
        run.policy_id, run.policy_overrides = policy_id, overrides
    if run.status in RETRYABLE_BY_HAND:
        if run.status == "dead":
            _close_dead_letters(run, actor, now, "replayed")
        _restart(run, actor, now, "manual_retry")
    elif run.status == "retry_wait":
        transitions.move(run, "pending", now, reason="manual_retry", actor=actor.name, next_retry_at=None,
                         enqueued_at=now)
    else:
        raise Conflict(f"run {run.id} is {run.status}; retry applies to dead, failed, cancelled and retry_wait runs",
                       "status")
    audit.record(db.session, actor, "run.retry", "run", run.id, before=before,
                 after={"status": run.status, "series": run.series, "policy_id": run.policy_id,
                        "policy_overrides": run.policy_overrides}, tenant=run.tenant.name, clock=clock)
    closed = waiting_fixes.close(fixes, actor, now)
    db.session.commit()
    submitting.enqueue(run, policies.effective(run.policy_id, run.policy_overrides)[1].timeout_s)
    return run, closed


def _close_dead_letters(run: Run, actor: Actor, now, status: str) -> None:
    # One guarded UPDATE: a letter someone discarded since it was read stays discarded. The work order stays open
    # until the retried run succeeds (the "outbox" job closes it then).
    db.session.execute(update(DeadLetter).where(DeadLetter.run_id == run.id, DeadLetter.status == "open")
                       .values(status=status, resolved_at=now, resolved_by=actor.signature)
                       .execution_options(synchronize_session="fetch"))


def replay(dead_letter: DeadLetter, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> tuple[Run, list[int]]:
    """Replay one open dead letter through its original queue, keeping the run's idempotency key; return its run and
    the params fixes waiting on the letter that this closed."""
    if dead_letter.status != "open":
        raise Conflict(f"dead letter {dead_letter.id} is already {dead_letter.status}", "status")
    run = dead_letter.run
    if run.status != "dead":
        raise Conflict(f"run {run.id} is {run.status}, not dead", "status")
    replayed = replays.replay_many([dead_letter.id], actor, clock=clock)
    if not replayed.runs:
        raise Conflict(f"dead letter {dead_letter.id} changed while replaying; look again", "status")
    return db.session.get(Run, run.id, populate_existing=True), replayed.closed_fixes
