"""Claim a run for one attempt, or put it off (its window, capacity, a reservation, its breaker) or cancel it."""

import uuid
from datetime import timedelta
from types import SimpleNamespace

from sqlalchemy import bindparam, update

from console.db import single_statements
from console.domain.breaker import BreakerSettings, Opener
from console.domain.clock import Clock
from console.domain.windows import Window
from console.extensions import db
from console.models import Run, Task
from console.services.engine import admission, breaker_policies, breakers, names, queueing, reserved, transitions
from console.services.errors import NotFound
from console.services.policies import versions as policies

DEFER_S = 1.0


class RunRow(SimpleNamespace):
    """A run's columns as attributes, read on the hot path; transitions.move() keeps them current."""


def _opened_by(opener: Opener | None) -> str | None:
    """Say, on a run the breaker puts off, whose settings opened it: runs of several policies may share one."""
    if opener is None or opener.policy_id is None:
        return None
    policy = breaker_policies.PolicyBreaker(f"{names.policy(opener.policy_id)} v{opener.policy_version}",
                                            opener.failure_threshold, opener.open_s)
    return f"the breaker was opened by policy {policy}"


# A deferred pending run notes when it is due: the reconciler finds the deferral's job by it (queueing.job_id).
_NOTE_DUE = (update(Run.__table__)
             .where(Run.id == bindparam("run_id"), Run.status == "pending",
                    Run.attempt == bindparam("expected_attempt"))
             .values(next_retry_at=bindparam("due"), wait_reason=bindparam("why")))


def _defer(run: RunRow, when, timeout_s: int, why: str) -> None:
    """Put a pending run off until `when` without spending an attempt, saying why (shown on its page)."""
    db.session.connection().execute(_NOTE_DUE, {"run_id": run.id, "expected_attempt": run.attempt, "due": when,
                                                 "why": why[:255]})
    db.session.commit()
    queueing.enqueue_at(when, run.id, run.series, run.attempt, timeout_s, deferral=True)


# A run the breaker holds, asking again while it still refuses: only its due time moves (and updated_at, which tells a
# breaker reset before this hold from one after it).
_HOLD_AGAIN = (update(Run.__table__)
               .where(Run.id == bindparam("run_id"), Run.status == "retry_wait", Run.status_reason == "breaker_open",
                      Run.attempt == bindparam("expected_attempt"))
               .values(next_retry_at=bindparam("due"), updated_at=bindparam("now")))


def _held_again(run: RunRow, now, due, timeout_s: int) -> bool:
    """Put a run the breaker holds off again with no timeline entry: its hold is noted once, not at every ask."""
    moved = db.session.connection().execute(_HOLD_AGAIN, {"run_id": run.id, "expected_attempt": run.attempt,
                                                          "due": due, "now": now}).rowcount
    db.session.commit()
    if moved:
        queueing.enqueue_at(due, run.id, run.series, run.attempt, timeout_s, deferral=True)
    return bool(moved)


def claim(run_id: int, expected_attempt: int, clock: Clock, worker_id: str):
    """Claim the run for this attempt: return what the attempt needs, or a word saying why nothing is to be run."""
    now = clock()
    found = admission.read(run_id, now)
    if found is None:
        return "missing"
    columns, admitted = found
    run = RunRow(**columns)
    if run.attempt != expected_attempt or run.status not in ("pending", "retry_wait"):
        return "skipped"  # a duplicate or stale delivery: someone already took this attempt
    if admitted.policy_version is None:
        raise NotFound(f"retry policy {run.policy_id or policies.DEFAULT} is missing")
    version = admitted.policy_version
    policy = policies.of_version(admitted.policy_id, version, run.policy_overrides)
    try:
        if run.cancel_requested:
            transitions.move(run, "cancelled", now, reason="cancel_requested", finished_at=now)
            db.session.commit()
            return "cancelled"
        settings = BreakerSettings.from_policy(policy, admitted.policy_id, version)
        breaker = breakers.key_for(run.handler, run.tenant_id, policy.breaker_scope)
        held = run.status == "retry_wait" and run.status_reason == "breaker_open"
        if held:
            # Asked again while its breaker still refuses (a probe in flight, a job back early): a pair of timeline
            # rows at every ask read 28 rows for 2 attempts.
            due = breakers.refused_until(breaker, now, settings)
            if due is not None:
                return "breaker_open" if _held_again(run, now, due, policy.timeout_s) else "skipped"
        if run.status == "retry_wait":
            single_statements.end()  # the timer's move and what follows it are one transaction
            transitions.move(run, "pending", now, reason="timer")
        task = db.session.get(Task, run.task_id) if run.status_reason == "window" and run.task_id else None
        if task is not None and task.window:
            # Deferred to its window; a job that arrives early (a re-queue after a Redis loss) waits again.
            opening = Window.from_mapping(task.window).next_opening(now)
            if opening > now:
                _defer(run, opening, policy.timeout_s,
                       f"execution window: it starts when the window opens at {opening:%Y-%m-%d %H:%M} UTC")
                return "deferred:window"
        full, ahead = admission.over_capacity(admitted, policy.concurrency), 0
        if not full and admission.near_a_limit(admitted, policy.concurrency):
            # Counted again under the limits' locks, held to the claim's commit: two workers that both counted one
            # slot left cannot both take it.
            single_statements.end()
            admission.hold_limits(run.tenant_id, run.task_id, run.handler, admitted.quota_class)
            # Read after the wait for the locks: a claim that waited behind another's start and finish would record a
            # start before it (its run then seemed to have started ahead of an older one).
            now = clock()
            found = admission.read(run_id, now)
            if found is None:
                db.session.rollback()
                return "missing"
            admitted = found[1]
            full = admission.over_capacity(admitted, policy.concurrency)
            if not full and (queued := admission.queued_ahead(run, admitted, policy.concurrency)):
                full, ahead = queued
        if full:
            why = admission.explain(full, admitted, policy.concurrency, tenant=names.tenant(run.tenant_id),
                                    policy=names.policy(admitted.policy_id), handler=run.handler,
                                    by_task=run.task_id is not None, tenant_id=run.tenant_id, ahead=ahead)
            if full == "quota_class" and not (run.wait_reason or "").startswith(admission.CLASS_WAIT):
                # A conflict the forecast can name (its class overflows): on the timeline once, for the Reports
                # page's early-warning figure; a run waiting on, deferred again, adds nothing (one whose wait went
                # elsewhere and came back notes it again, and Reports counts a run's first note only).
                single_statements.end()  # the note and the deferral are one transaction
                transitions.event(run, "deferred", now, reason="quota_class", message=why[:255])
            _defer(run, now + timedelta(seconds=DEFER_S), policy.timeout_s, why)
            return f"deferred:{full}"
        reservation = reserved.hold(run.tenant_id, now) if admitted.reservations else None
        if reservation is not None:
            _defer(run, now + timedelta(seconds=DEFER_S), policy.timeout_s, reservation.explain())
            return "deferred:reserved"
        verdict = breakers.allow(breaker, now, settings, run.id)
        if not verdict.allowed and held:
            # Another run took the half-open probe between this one's look and its ask (runs held together come due
            # together): still held, so the timer's move is taken back and the hold noted once.
            db.session.rollback()
            return "breaker_open" if _held_again(run, now, verdict.retry_at, policy.timeout_s) else "skipped"
        if not verdict.allowed:
            transitions.move(run, "retry_wait", now, reason="breaker_open", next_retry_at=verdict.retry_at,
                             message=_opened_by(verdict.opened_by))
            db.session.commit()
            queueing.enqueue_at(verdict.retry_at, run.id, run.series, run.attempt, policy.timeout_s, deferral=True)
            return "breaker_open"
        token = uuid.uuid4().hex
        transitions.move(run, "running", now, attempt=run.attempt + 1, executions=run.executions + 1,
                         retry_token=token, worker_id=worker_id, started_at=run.started_at or now, heartbeat_at=now,
                         policy_version=version, progress=0, progress_message=None, next_retry_at=None,
                         wait_reason=None, data={"policy_version": version})
        db.session.commit()  # write-ahead: the claim is durable before the handler's side effects
    except transitions.StaleRun:
        return "skipped"
    return run, policy, breaker, settings, verdict

