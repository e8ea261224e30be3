"""Circuit breakers per handler (or per handler and tenant), kept in Redis so every worker sees the same state."""

import json
from datetime import datetime
from typing import NamedTuple

import redis

from console.domain import breaker
from console.domain.breaker import BreakerSettings, BreakerState, Opener
from console.redis_conn import get_redis

PREFIX = "rebound:breaker:"
# A per-tenant breaker's key puts the tenant id first: handler names hold ':' themselves (plugin:billing.charge).
TENANT_PREFIX = "rebound:breaker-tenant:"


class BreakerKey(NamedTuple):
    """Which breaker: a handler's, shared by every tenant (tenant_id None), or one tenant's of that handler."""

    handler: str
    tenant_id: int | None = None

    @property
    def redis_key(self) -> str:
        if self.tenant_id is None:
            return PREFIX + self.handler
        return f"{TENANT_PREFIX}{self.tenant_id}:{self.handler}"

    @property
    def alert_key(self) -> str:
        """The outbox key of its "opened" alert; resolving `rebound-<alert_key>` closes that incident."""
        own = "" if self.tenant_id is None else f"@tenant:{self.tenant_id}"
        return f"breaker:{self.handler}{own}"

    @property
    def scope(self) -> str:
        return "handler" if self.tenant_id is None else "handler_and_tenant"

    @classmethod
    def from_redis_key(cls, key: str) -> "BreakerKey":
        if key.startswith(TENANT_PREFIX):
            tenant, _, handler = key.removeprefix(TENANT_PREFIX).partition(":")
            return cls(handler, int(tenant))
        return cls(key.removeprefix(PREFIX))


def key_for(handler: str, tenant_id: int, scope: str) -> BreakerKey:
    """Return the breaker a run's calls count against, by its policy's breaker_scope."""
    return BreakerKey(handler, tenant_id if scope == "handler_and_tenant" else None)


def _key(key: BreakerKey | str) -> str:
    # A bare handler name means the handler-wide breaker.
    return (key if isinstance(key, BreakerKey) else BreakerKey(key)).redis_key


def _update(key: BreakerKey | str, change) -> tuple:
    """Read, change and write one breaker atomically (optimistic WATCH/MULTI); return change's result."""
    connection = get_redis()
    name = _key(key)
    with connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(name)
                raw = pipe.get(name)
                state = BreakerState.from_dict(json.loads(raw)) if raw else BreakerState()
                new_state, *rest = change(state)
                pipe.multi()
                if new_state != state and _clean(new_state):
                    pipe.delete(name)  # closed with no failure counted has no state (exists, the Breakers page)
                elif new_state != state:
                    pipe.set(name, json.dumps(new_state.to_dict()))
                pipe.execute()
                return (new_state, *rest)
            except redis.WatchError:
                continue


def _clean(state: BreakerState) -> bool:
    return state.state == breaker.BreakerMode.CLOSED and state.consecutive_failures == 0


def _closed_and_clean(key: BreakerKey | str) -> bool:
    """Tell, with one GET, whether the breaker is closed with no failures counted (the common case)."""
    raw = get_redis().get(_key(key))
    return raw is None or _clean(BreakerState.from_dict(json.loads(raw)))


class Verdict(NamedTuple):
    """Whether a call may go now, when to try again if not, whether the breaker was closed and clean,
    until when this call holds the half-open probe slot (None when it is no probe), and whose settings opened it."""

    allowed: bool
    retry_at: datetime | None
    clean: bool
    probe_until: datetime | None = None
    opened_by: Opener | None = None


def allow(key: BreakerKey | str, now: datetime, settings: BreakerSettings, run_id: int | None = None) -> Verdict:
    """Ask whether a call (of run `run_id`) counted against this breaker may go now; if not, when to try again."""
    if _closed_and_clean(key):
        return Verdict(True, None, True)  # a closed breaker lets everything through and changes nothing

    def change(state):
        allowed, new_state, retry_at = breaker.allow(state, now, settings, run_id)
        return new_state, allowed, retry_at, allowed and new_state.probe_in_flight

    after, allowed, retry_at, probing = _update(key, change)
    return Verdict(allowed, retry_at, False, after.probe_expires_at if probing else None, after.opened_by)


def refused_until(key: BreakerKey | str, now: datetime, settings: BreakerSettings) -> datetime | None:
    """Tell when to ask again if the breaker would refuse a call now; None if it would let one go. Reads only: it
    takes no probe slot (allow() does, for the call that goes)."""
    raw = get_redis().get(_key(key))
    if raw is None:
        return None
    allowed, _, retry_at = breaker.allow(BreakerState.from_dict(json.loads(raw)), now, settings)
    return None if allowed else retry_at


def release_probe(key: BreakerKey | str, verdict: Verdict) -> None:
    """Free the probe slot this call held, if it was the probe, without counting its outcome."""
    if verdict.probe_until is None:
        return
    _update(key, lambda state: (breaker.release_probe(state, verdict.probe_until),))


def record(key: BreakerKey | str, ok: bool, now: datetime, settings: BreakerSettings, *,
           clean_before: bool = False, run_id: int | None = None) -> str | None:
    """Record an outcome (of run `run_id`); return "opened", "half_opened" or "closed" when the mode changed.

    clean_before: the breaker was closed and clean when this call was allowed (Verdict.clean).
    """
    # A success of a call that began on a clean breaker changes nothing: there was nothing to reset then, and
    # failures other calls counted since began later, so this success is no proof that they have cleared.
    # Skipping the read keeps the hot path at one Redis round trip per attempt.
    if ok and (clean_before or _closed_and_clean(key)):
        return None

    def change(state):
        if ok:
            return breaker.record_success(state, now, settings)
        return breaker.record_failure(state, now, settings, run_id)

    _, event = _update(key, change)
    return event


def state_of(key: BreakerKey | str, now: datetime) -> BreakerState:
    """Return one breaker's state as of now."""
    raw = get_redis().get(_key(key))
    return breaker.current(BreakerState.from_dict(json.loads(raw)) if raw else BreakerState(), now)


def exists(key: BreakerKey | str) -> bool:
    """Tell whether a breaker has state (a closed one with no failures counted has none)."""
    return bool(get_redis().exists(_key(key)))


def all_states(now: datetime) -> dict[BreakerKey, BreakerState]:
    """Return every breaker that has state, handler-wide and per tenant alike."""
    connection = get_redis()
    keys = sorted({*connection.scan_iter(match=PREFIX + "*", count=500),
                   *connection.scan_iter(match=TENANT_PREFIX + "*", count=500)})
    values = connection.mget(keys) if keys else []
    return {BreakerKey.from_redis_key(key.decode()): breaker.current(BreakerState.from_dict(json.loads(raw)), now)
            for key, raw in zip(keys, values, strict=True) if raw}


def reset(key: BreakerKey | str) -> None:
    """Close a breaker by forgetting its state."""
    get_redis().delete(_key(key))
