"""Run statuses and the one table that says which status change is legal."""

from enum import Enum


class RunStatus(str, Enum):  # noqa: UP042 - the style guide's form, as RQ's JobStatus
    """Where one run of a task stands."""

    PENDING = "pending"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    CANCELLED = "cancelled"
    # A person decided a dead run needs no replay (its dead letter closes with their reason).
    RESOLVED = "resolved"

    def __str__(self) -> str:
        return self.value


S = RunStatus

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    # retry_wait from pending: the breaker was open or the planner deferred, no attempt spent.
    S.PENDING: frozenset({S.RUNNING, S.CANCELLED, S.RETRY_WAIT}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.RETRY_WAIT, S.DEAD, S.FAILED, S.CANCELLED}),
    S.RETRY_WAIT: frozenset({S.PENDING, S.CANCELLED}),
    # failed → pending is a manual retry; failed → dead when there is nothing to compensate.
    S.FAILED: frozenset({S.COMPENSATING, S.DEAD, S.PENDING}),
    # A later step of the same workflow failed, so a success has to be undone.
    S.SUCCEEDED: frozenset({S.COMPENSATING}),
    # Compensation retries its own attempts inside this status, hence no self-loop.
    S.COMPENSATING: frozenset({S.COMPENSATED, S.COMPENSATION_FAILED}),
    S.COMPENSATION_FAILED: frozenset({S.DEAD}),
    # Replay: a new attempt series under the same idempotency key; or a person marks it resolved; or, when its undo
    # failed, a person has the undo tried again (console/services/recovery/undo_retry.py).
    S.DEAD: frozenset({S.PENDING, S.RESOLVED, S.COMPENSATING}),
    S.CANCELLED: frozenset({S.PENDING}),
    S.COMPENSATED: frozenset(),
    S.RESOLVED: frozenset(),
}

# Terminal means "nothing will happen unless a person or a later workflow step acts":
# succeeded, dead and cancelled still have outgoing edges (compensate, replay, retry).
TERMINAL = frozenset({S.SUCCEEDED, S.DEAD, S.COMPENSATED, S.CANCELLED, S.RESOLVED})
ACTIVE = frozenset({S.PENDING, S.RUNNING, S.RETRY_WAIT, S.COMPENSATING})
ACTIVE_VALUES = frozenset(status.value for status in ACTIVE)  # as stored, for pages that follow a run at work
# A worker runs code for the run: its handler, or its undo step (heartbeats and progress reports apply).
IN_WORK = (S.RUNNING.value, S.COMPENSATING.value)
# Neither terminal nor active: failed and compensation_failed wait for the next decision.
NEEDS_ATTENTION = frozenset(set(RunStatus) - TERMINAL - ACTIVE)
# running → retry_wait for an attempt its worker was stopped during (a restart, a deploy): not a failure, and the same
# attempt runs again.
INTERRUPTED = "interrupted"

del S


class IllegalTransition(ValueError):
    """A status change the transition table does not allow."""

    def __init__(self, current: object, target: object, reason: str = ""):
        self.current = current
        self.target = target
        super().__init__(reason or f"illegal transition: {current} → {target}")


def to_status(value: str | RunStatus) -> RunStatus:
    """Turn a status name into a RunStatus, raising ValueError for unknown names."""
    try:
        return RunStatus(value)
    except ValueError:
        raise ValueError(f"unknown run status {value!r}") from None


def can_transition(current: str | RunStatus, target: str | RunStatus) -> bool:
    """Tell whether the table allows moving from current to target."""
    try:
        return to_status(target) in TRANSITIONS[to_status(current)]
    except ValueError:
        return False


def check_transition(current: str | RunStatus, target: str | RunStatus) -> None:
    """Raise IllegalTransition unless the table allows moving from current to target."""
    try:
        source, dest = to_status(current), to_status(target)
    except ValueError as exc:
        raise IllegalTransition(current, target, f"illegal transition {current} → {target}: {exc}") from None
    if dest not in TRANSITIONS[source]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[source])) or "nothing"
        raise IllegalTransition(
            source, dest, f"illegal transition: {source} → {dest} (from {source}: {allowed})"
        )
