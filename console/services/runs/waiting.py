"""Why a waiting run waits, in words for its page: capacity (which policy or tenant), window, quota, breaker."""

from datetime import datetime

from console.models import Run

WAITING = ("pending", "retry_wait")


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "soon"


def why_waiting(run: Run) -> str | None:
    """Return why this run has not started (or started again) yet; None when it is not waiting."""
    if run.status not in WAITING:
        return None
    if run.status == "retry_wait":
        if run.status_reason == "breaker_open":
            return (f"circuit breaker: the breaker of handler {run.handler} is open; the next try is at "
                    f"{_at(run.next_retry_at)} (no attempt is spent)")
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
