"""Why a waiting run waits, in words for its page: capacity (which policy or tenant), window, quota, breaker."""

from datetime import datetime

import redis

from console.domain.breaker import BreakerMode, BreakerState
from console.domain.policy import RetryPolicy
from console.domain.words import plural
from console.models import Run
from console.services.engine import breaker_policies, breakers
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
            return (f"circuit breaker: the breaker of handler {run.handler} was open when its turn came; the next try "
                    f"is at {_at(run.next_retry_at)} (no attempt is spent){_breaker_now(run, now)}")
        return f"retry backoff: attempt {run.attempt} failed; the next attempt is at {_at(run.next_retry_at)}"
    if run.cancel_requested:
        return "cancel requested: it is cancelled when a worker picks it up"
    # What the engine found when it last put the run off is the most precise: it names the limit and the counts.
    if run.wait_reason:
        return run.wait_reason
    if run.status_reason == "window":
        return f"execution window: it starts when its task's window opens at {_at(run.due_at or run.next_retry_at)}"
    if run.status_reason == "quota":
        return (f"tenant quota: tenant {run.tenant.name} already had its max_queued {run.tenant.max_queued} runs "
                "waiting when this one fired; it was kept, not dropped, and waits its turn")
    return "queued: waiting for a free worker"


def breaker_of(run: Run, now: datetime) -> BreakerState | None:
    """Return the state now of the breaker a run's calls count against; None when it cannot be read."""
    found = _breaker_and_policy(run, now)
    return found[0] if found else None


def _breaker_and_policy(run: Run, now: datetime) -> tuple[BreakerState, int, RetryPolicy] | None:
    """Return the run's breaker's state now, and the run's policy version and policy; None when unreadable."""
    try:
        version, policy = policies.effective(run.policy_id, run.policy_overrides)
        key = breakers.key_for(run.handler, run.tenant_id, policy.breaker_scope)
        return breakers.state_of(key, now), version, policy
    except (NotFound, redis.RedisError, OSError):
        return None  # a reason or a notice stands on its own; the breaker's state is a hint


def _breaker_now(run: Run, now: datetime | None) -> str:
    """Say what the run's breaker is now: it may have closed or half-opened since the run was put off."""
    found = _breaker_and_policy(run, now) if now is not None else None
    if found is None:
        return ""
    state = found[0]
    if state.state == BreakerMode.OPEN:
        return f". The breaker is still open, until {_at(state.open_until)}.{_opened_by(run, *found)}"
    if state.state == BreakerMode.HALF_OPEN:
        return (". The breaker is now half-open: one probe call goes through, and its outcome closes or opens it "
                f"again.{_opened_by(run, *found)}")
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
