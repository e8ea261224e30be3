"""Circuit-breaker rules as pure functions over an immutable state a service stores elsewhere."""

from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import Enum

from console.domain.policy import RetryPolicy

# While a probe runs, others are told to come back this soon at most, so they notice its result quickly.
PROBE_WAIT_S = 5


class BreakerMode(str, Enum):  # noqa: UP042 - same form as RunStatus
    """Whether calls to a handler flow (closed), stop (open) or are being probed (half_open)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class BreakerSettings:
    """How touchy one breaker is, and whose settings these are."""

    failure_threshold: int = 5
    open_s: int = 30
    success_threshold: int = 3
    # A probe whose worker died must not hold the half-open slot forever; after this it is presumed lost.
    probe_timeout_s: int = 300
    # The policy (id and version) they come from: runs of several policies share one breaker, and the settings of
    # whichever opens it hold back them all, so an opening records whose they were.
    policy_id: int | None = None
    policy_version: int | None = None

    def __post_init__(self) -> None:
        for name in _TUNING:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    @classmethod
    def from_policy(cls, policy: RetryPolicy, policy_id: int | None = None,
                    policy_version: int | None = None) -> "BreakerSettings":
        """Take the breaker settings of a retry policy; a probe may run as long as the task's timeout."""
        return cls(
            failure_threshold=policy.breaker_failure_threshold,
            open_s=policy.breaker_open_s,
            success_threshold=policy.breaker_success_threshold,
            probe_timeout_s=policy.timeout_s,
            policy_id=policy_id,
            policy_version=policy_version,
        )


_TUNING = ("failure_threshold", "open_s", "success_threshold", "probe_timeout_s")


@dataclass(frozen=True)
class Opener:
    """Whose settings opened a breaker: the policy (id and version; None if not known), its threshold and open time."""

    policy_id: int | None
    policy_version: int | None
    failure_threshold: int
    open_s: int

    @classmethod
    def of(cls, settings: BreakerSettings) -> "Opener":
        return cls(settings.policy_id, settings.policy_version, settings.failure_threshold, settings.open_s)


@dataclass(frozen=True)
class BreakerState:
    """One breaker's state; services store it as to_dict() and never mutate it."""

    state: BreakerMode = BreakerMode.CLOSED
    consecutive_failures: int = 0
    consecutive_successes: int = 0
    opened_at: datetime | None = None
    open_until: datetime | None = None
    probe_in_flight: bool = False
    probe_expires_at: datetime | None = None
    opened_by: Opener | None = None  # kept while open and half-open; a state stored before it was recorded has none
    # While closed: the failure threshold of the settings the last failure was counted under (its policy's), so a
    # page says "6 of 50" by the rule that counted them; None before any failure, or in a state stored before it.
    counted_against: int | None = None
    # Opened again by a failed half-open probe, not by a run of failures: a page says so (it read "5 of 50 … opened
    # by policy demo: 50 failures in a row").
    reopened_by_probe: bool = False
    # The run holding the half-open probe slot, and the run whose failure opened the breaker: the Breakers page links
    # them, so whoever watches a breaker open again and again can read the error that keeps doing it.
    probe_run: int | None = None
    opened_by_run: int | None = None

    def to_dict(self) -> dict:
        """Return a JSON-able form with ISO-8601 times."""
        data = asdict(self)
        data["state"] = self.state.value
        for key in _TIMES:
            data[key] = data[key].isoformat() if data[key] else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "BreakerState":
        """Rebuild a state from to_dict() output; missing keys take their defaults."""
        known = {key: value for key, value in data.items() if key in _FIELDS}
        if "state" in known:
            known["state"] = BreakerMode(known["state"])
        if known.get("opened_by"):
            known["opened_by"] = Opener(**{key: known["opened_by"].get(key) for key in _OPENER_FIELDS})
        for key in _TIMES:
            if known.get(key):
                moment = datetime.fromisoformat(known[key])
                known[key] = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return cls(**known)


DEFAULT_SETTINGS = BreakerSettings()
_FIELDS = frozenset(BreakerState.__dataclass_fields__)
_OPENER_FIELDS = tuple(Opener.__dataclass_fields__)
_TIMES = ("opened_at", "open_until", "probe_expires_at")
_EVENTS = {BreakerMode.OPEN: "opened", BreakerMode.HALF_OPEN: "half_opened", BreakerMode.CLOSED: "closed"}


def mode_event(before: BreakerState, after: BreakerState) -> str | None:
    """Name the mode change between two states ("opened", "half_opened", "closed"), or None."""
    return None if before.state == after.state else _EVENTS[after.state]


def _event(stored: BreakerState, now_state: BreakerState, after: BreakerState) -> str | None:
    # Prefer the change this outcome caused; fall back to the one time caused (open → half_open).
    return mode_event(now_state, after) or mode_event(stored, after)


def current(state: BreakerState, now: datetime) -> BreakerState:
    """Return the state as of now: an open breaker past open_until reads as half_open."""
    if state.state == BreakerMode.OPEN and state.open_until is not None and now >= state.open_until:
        return replace(
            state,
            state=BreakerMode.HALF_OPEN,
            consecutive_successes=0,
            probe_in_flight=False,
            probe_expires_at=None,
            probe_run=None,
        )
    return state


def allow(
    state: BreakerState, now: datetime, settings: BreakerSettings = DEFAULT_SETTINGS, run_id: int | None = None
) -> tuple[bool, BreakerState, datetime | None]:
    """Decide whether one call (of run `run_id`) may go now; return (allowed, new state, when to try again if
    denied)."""
    state = current(state, now)
    if state.state == BreakerMode.CLOSED:
        return True, state, None
    if state.state == BreakerMode.OPEN:
        return False, state, state.open_until
    if state.probe_in_flight and state.probe_expires_at is not None and now < state.probe_expires_at:
        return False, state, now + timedelta(seconds=min(settings.open_s, PROBE_WAIT_S))
    probing = replace(
        state, probe_in_flight=True, probe_expires_at=now + timedelta(seconds=settings.probe_timeout_s),
        probe_run=run_id,
    )
    return True, probing, None


def release_probe(state: BreakerState, probe_until: datetime) -> BreakerState:
    """Free the half-open probe slot a call held without counting its outcome (the call said nothing)."""
    # Only the call that took the slot may free it: its expiry is the slot's identity.
    if state.probe_in_flight and state.probe_expires_at == probe_until:
        return replace(state, probe_in_flight=False, probe_expires_at=None, probe_run=None)
    return state


def record_success(
    state: BreakerState, now: datetime, settings: BreakerSettings = DEFAULT_SETTINGS
) -> tuple[BreakerState, str | None]:
    """Count a successful call; return the new state and the mode-change event, if any."""
    stored, state = state, current(state, now)
    if state.state == BreakerMode.OPEN:
        # A late result of a call started before the breaker opened says nothing about recovery now.
        return state, None
    successes = state.consecutive_successes + 1
    if state.state == BreakerMode.HALF_OPEN and successes < settings.success_threshold:
        # Free the probe slot so the next probe may go.
        after = replace(
            state,
            consecutive_failures=0,
            consecutive_successes=successes,
            probe_in_flight=False,
            probe_expires_at=None,
            probe_run=None,
        )
    else:
        after = BreakerState(consecutive_successes=successes if state.state == BreakerMode.CLOSED else 0)
    return after, _event(stored, state, after)


def record_failure(
    state: BreakerState, now: datetime, settings: BreakerSettings = DEFAULT_SETTINGS, run_id: int | None = None
) -> tuple[BreakerState, str | None]:
    """Count a failed call (of run `run_id`); return the new state and the mode-change event, if any."""
    stored, state = state, current(state, now)
    failures = state.consecutive_failures + 1
    if state.state == BreakerMode.OPEN:
        # Late failures must not push open_until forward, or a backlog would keep it open forever.
        after = replace(state, consecutive_failures=failures)
    elif state.state == BreakerMode.HALF_OPEN or failures >= settings.failure_threshold:
        after = BreakerState(
            state=BreakerMode.OPEN,
            consecutive_failures=failures,
            opened_at=now,
            open_until=now + timedelta(seconds=settings.open_s),
            opened_by=Opener.of(settings),
            reopened_by_probe=state.state == BreakerMode.HALF_OPEN,
            opened_by_run=run_id,
        )
    else:
        after = replace(state, consecutive_failures=failures, consecutive_successes=0,
                        counted_against=settings.failure_threshold)
    return after, _event(stored, state, after)
