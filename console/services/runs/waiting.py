"""Why a waiting run waits, in words for its page: capacity (which policy or tenant), window, quota, breaker."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import redis
from sqlalchemy import select

from console.domain.breaker import BreakerMode, BreakerState
from console.domain.policy import RetryPolicy
from console.domain.statuses import INTERRUPTED
from console.domain.words import plural
from console.extensions import db
from console.models import AuditEntry, Run, RunEvent, Tenant
from console.redis_conn import read_or
from console.services.engine import breaker_policies, breakers, queueing
from console.services.errors import NotFound
from console.services.policies import versions as policies

WAITING = ("pending", "retry_wait")


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "soon"


def why_waiting(run: Run, now: datetime | None = None) -> str | None:
    """Return why this run has not started (or started again) yet; None when it is not waiting.

    Given `now`, a run put off by its breaker also says what the breaker is now.
    """
    if run.status not in WAITING:
        return None
    if run.status == "retry_wait":
        if run.status_reason == "breaker_open":
            return (f"circuit breaker: the breaker of handler {run.handler} was open when its turn came"
                    f"{_turned_away_since(run)}; the next try is at {_at(run.next_retry_at)} (no attempt is spent)"
                    f"{_breaker_now(run, now)}")
        if run.status_reason == INTERRUPTED:
            return (f"interrupted: its worker was stopped (a restart or a deploy) during attempt {run.attempt + 1}, "
                    "which runs again from its start as soon as a worker is free (no attempt is spent)")
        if now is not None and run.next_retry_at is not None and run.next_retry_at <= now:
            # Its timer went off: the retry is in the queue, behind the runs the workers are busy with.
            return (f"queued: attempt {run.attempt} failed and its retry came due at {_at(run.next_retry_at)}; it "
                    "waits for a free worker")
        return f"retry backoff: attempt {run.attempt} failed; the next attempt is at {_at(run.next_retry_at)}"
    if run.cancel_requested:
        return "cancel requested: it is cancelled when a worker picks it up"
    # What the engine found when it last put the run off is the most precise: it names the limit and the counts.
    if run.wait_reason:
        return run.wait_reason
    if run.status_reason == "window":
        return f"execution window: it starts when its task's window opens at {_at(run.due_at or run.next_retry_at)}"
    if run.status_reason == "quota":
        return (f"tenant quota: tenant {run.tenant.name} already had its max_queued "
                f"{plural(run.tenant.max_queued, 'run')} waiting when this one fired; it was kept, not dropped, and "
                "waits its turn")
    return _in_the_queue(run) if now is not None else "queued: waiting for a free worker"


UNSEEN = object()  # Redis did not answer


def _in_the_queue(run: Run) -> str:
    """Say whether a pending run's job is in the queue: one submitted while Redis did not answer is in the database
    only, and its page said "waiting for a free worker" with workers idle (helper 133)."""
    status = read_or(lambda: queueing.job_status(run.id, run.series, run.attempt), UNSEEN)
    if status is UNSEEN:
        return ("queued in the database: Redis is unreachable, so no worker can take it; it is queued there once "
                "Redis answers (the reconciler, within a minute)")
    if status is None:
        return ("queued in the database, not yet in Redis (it was unreachable, or lost the job): the reconciler "
                "queues it within a minute")
    return "queued: waiting for a free worker"


def _turned_away_since(run: Run) -> str:
    """Say when a held run was last turned away, when it asked again after its hold's one timeline entry."""
    # The engine notes a hold once (a row at every ask buried the attempts); without this the page's one entry and a
    # next try that keeps moving read as a run the engine forgot.
    held_at = db.session.scalar(
        select(RunEvent.at).where(RunEvent.run_id == run.id, RunEvent.to_status == "retry_wait",
                                  RunEvent.reason == "breaker_open").order_by(RunEvent.id.desc()).limit(1))
    if held_at is None or run.updated_at is None or run.updated_at <= held_at:
        return ""
    return f" at {_at(held_at)}, and was still open when it asked again at {_at(run.updated_at)}"


def breaker_of(run: Run, now: datetime) -> BreakerState | None:
    """Return the state now of the breaker a run's calls count against; None when it cannot be read."""
    found = _breaker_and_policy(run, now)
    return found[0] if found else None


def held_again_by_breaker(run: Run, now: datetime) -> str | None:
    """Say that a run sent on now will be held again by its open breaker, and where to reset it; None otherwise."""
    state = breaker_of(run, now)
    if state is None or state.state != BreakerMode.OPEN:
        return None
    return (f"its handler's breaker is open until {state.open_until:%H:%M:%S} UTC, so it waits for it again; "
            "reset it on the Breakers page to let it go now")


def _breaker_and_policy(run: Run, now: datetime) -> tuple[BreakerState, int, RetryPolicy] | None:
    """Return the run's breaker's state now, and the run's policy version and policy; None when unreadable."""
    try:
        version, policy = policies.effective(run.policy_id, run.policy_overrides)
        key = breakers.key_for(run.handler, run.tenant_id, policy.breaker_scope)
        return breakers.state_of(key, now), version, policy
    except (NotFound, redis.RedisError, OSError):
        return None  # a reason or a notice stands on its own; the breaker's state is a hint


def _breaker_now(run: Run, now: datetime | None) -> str:
    """Say what the run's breaker is now: it may have closed, half-opened or been reset since the run was put off."""
    if now is None:
        return ""
    reset = breaker_resets([run]).get(run.id)
    was_reset = f". The breaker was reset at {_at(reset.at)} by {reset.by}" if reset else ""
    found = _breaker_and_policy(run, now)
    if found is None:
        return f"{was_reset}." if reset else ""
    state = found[0]
    if state.state == BreakerMode.OPEN:
        again = "is open again" if reset else "is still open"
        return f"{was_reset}. The breaker {again}, until {_at(state.open_until)}.{_opened_by(run, *found)}"
    if state.state == BreakerMode.HALF_OPEN:
        return (f"{was_reset}. The breaker is now half-open: one probe call goes through, and its outcome closes or "
                f"opens it again.{_opened_by(run, *found)}")
    if reset:
        return f"{was_reset}: the run goes at its next try."
    return ". The breaker is now closed: the run goes at its next try."


def _opened_by(run: Run, state: BreakerState, version: int, policy: RetryPolicy) -> str:
    """Say whose settings opened the breaker, and the run's own when they differ: runs of several policies share it."""
    opener = breaker_policies.opener(state)
    if opener is None:
        return ""
    own = breaker_policies.PolicyBreaker(
        breaker_policies.policy_label(run.policy_id, version, bool(run.policy_overrides)),
        policy.breaker_failure_threshold, policy.breaker_open_s)
    if own == opener:
        return f" It was opened by this run's policy, {opener}."
    return (f" It was opened by policy {opener}; this run's policy {own.policy} opens it after "
            f"{plural(own.failure_threshold, 'failure')} in a row, for {own.open_s} s.")


@dataclass(frozen=True)
class Reset:
    """A person's reset of the breaker that put a run off, made after it did."""

    at: datetime
    by: str


def _held(run) -> bool:
    return run.status == "retry_wait" and run.status_reason == "breaker_open"


def breaker_resets(runs: Iterable) -> dict[int, Reset]:
    """Return, by run id, the latest reset of the breaker that put each run off, for the runs reset since.

    Such a run still waits for its retry time, but its breaker is no longer open: its badge says it was reset.
    `runs` are runs, or rows with their id, status and status_reason (Tasks' newest runs). A run put off again
    after the reset waits for the breaker anew and is left out. No query unless a run was put off by its breaker.
    """
    held = [run if isinstance(run, Run) else db.session.get(Run, run.id) for run in runs if _held(run)]
    if not held:
        return {}
    entries = db.session.execute(
        select(AuditEntry.at, AuditEntry.actor, AuditEntry.target_id, AuditEntry.tenant, AuditEntry.before)
        .where(AuditEntry.action == "breaker.reset", AuditEntry.target_id.in_({run.handler for run in held}),
               AuditEntry.at >= min(run.updated_at for run in held))
        .order_by(AuditEntry.seq)).all()
    if not entries:
        return {}
    names = dict(db.session.execute(select(Tenant.id, Tenant.name).where(
        Tenant.id.in_({run.tenant_id for run in held}))).all())
    scopes: dict[tuple, str | None] = {}
    found = {}
    for run in held:
        scope = _scope(run, scopes)
        tenant = None if scope == "handler" else names.get(run.tenant_id)
        for at, actor, handler, tenant_name, before in entries:  # oldest first: the latest reset wins
            if (handler, tenant_name, (before or {}).get("scope", "handler")) == (run.handler, tenant, scope) and \
                    at >= run.updated_at:
                found[run.id] = Reset(at, actor)
    return found


def _scope(run: Run, known: dict[tuple, str | None]) -> str | None:
    """Return the breaker scope of the run's policy (None if its policy is gone), once per policy and overrides."""
    key = (run.policy_id, json.dumps(run.policy_overrides or {}, sort_keys=True))
    if key not in known:
        try:
            known[key] = policies.effective(run.policy_id, run.policy_overrides)[1].breaker_scope
        except NotFound:
            known[key] = None
    return known[key]
