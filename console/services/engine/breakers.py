"""Circuit breakers per handler, kept in Redis so every worker sees the same state."""

import json
from datetime import datetime
from typing import NamedTuple

import redis

from console.domain import breaker
from console.domain.breaker import BreakerSettings, BreakerState
from console.redis_conn import get_redis

PREFIX = "rebound:breaker:"


def _key(handler: str) -> str:
    return PREFIX + handler


def _update(handler: str, change) -> tuple:
    """Read, change and write one breaker atomically (optimistic WATCH/MULTI); return change's result."""
    connection = get_redis()
    key = _key(handler)
    with connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(key)
                raw = pipe.get(key)
                state = BreakerState.from_dict(json.loads(raw)) if raw else BreakerState()
                new_state, *rest = change(state)
                pipe.multi()
                if new_state != state:
                    pipe.set(key, json.dumps(new_state.to_dict()))
                pipe.execute()
                return (new_state, *rest)
            except redis.WatchError:
                continue


def _closed_and_clean(handler: str) -> bool:
    """Tell, with one GET, whether the breaker is closed with no failures counted (the common case)."""
    raw = get_redis().get(_key(handler))
    if raw is None:
        return True
    state = BreakerState.from_dict(json.loads(raw))
    return state.state == breaker.BreakerMode.CLOSED and state.consecutive_failures == 0


class Verdict(NamedTuple):
    """Whether a call may go now, when to try again if not, and whether the breaker was closed and clean."""

    allowed: bool
    retry_at: datetime | None
    clean: bool


def allow(handler: str, now: datetime, settings: BreakerSettings) -> Verdict:
    """Ask whether a call to this handler may go now; if not, when to try again."""
    if _closed_and_clean(handler):
        return Verdict(True, None, True)  # a closed breaker lets everything through and changes nothing

    def change(state):
        allowed, new_state, retry_at = breaker.allow(state, now, settings)
        return new_state, allowed, retry_at

    _, allowed, retry_at = _update(handler, change)
    return Verdict(allowed, retry_at, False)


def record(handler: str, ok: bool, now: datetime, settings: BreakerSettings, *,
           clean_before: bool = False) -> str | None:
    """Record an outcome; return "opened", "half_opened" or "closed" when the mode changed.

    clean_before: the breaker was closed and clean when this call was allowed (Verdict.clean).
    """
    # A success of a call that began on a clean breaker changes nothing: there was nothing to reset then, and
    # failures other calls counted since began later, so this success is no proof that they have cleared.
    # Skipping the read keeps the hot path at one Redis round trip per attempt.
    if ok and (clean_before or _closed_and_clean(handler)):
        return None
    outcome = breaker.record_success if ok else breaker.record_failure

    def change(state):
        return outcome(state, now, settings)

    _, event = _update(handler, change)
    return event


def state_of(handler: str, now: datetime) -> BreakerState:
    """Return one breaker's state as of now."""
    raw = get_redis().get(_key(handler))
    return breaker.current(BreakerState.from_dict(json.loads(raw)) if raw else BreakerState(), now)


def all_states(now: datetime) -> dict[str, BreakerState]:
    """Return every breaker that has state, by handler."""
    connection = get_redis()
    keys = sorted(connection.scan_iter(match=PREFIX + "*", count=500))
    values = connection.mget(keys) if keys else []
    return {key.decode().removeprefix(PREFIX): breaker.current(BreakerState.from_dict(json.loads(raw)), now)
            for key, raw in zip(keys, values, strict=True) if raw}


def reset(handler: str) -> None:
    """Close a breaker by forgetting its state."""
    get_redis().delete(_key(handler))
