"""Circuit breakers as people see and reset them: the state per breaker, runs held back, audited resets."""

from dataclasses import dataclass, field
from datetime import datetime

import redis
from sqlalchemy import func, select

from console.domain.breaker import BreakerMode, BreakerState
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import breaker_alerts, breaker_policies, breakers
from console.services.engine.breaker_policies import PolicyBreaker
from console.services.engine.breakers import BreakerKey
from console.services.errors import Forbidden, NotFound
from console.services.policies import versions as policies

# Counting held-back runs stops here, so an outage with a huge backlog cannot slow the page down.
HELD_COUNT_CAP = 10_000
_ORDER = {BreakerMode.OPEN: 0, BreakerMode.HALF_OPEN: 1, BreakerMode.CLOSED: 2}


@dataclass(frozen=True)
class BreakerRow:
    key: BreakerKey
    state: BreakerState
    held_runs: int = 0
    tenant: str | None = None  # the tenant's name, for a per-tenant breaker
    opened_by: PolicyBreaker | None = None  # whose settings opened it (and hold back every run that shares it)
    shared: tuple[PolicyBreaker, ...] = ()  # the policies sharing it, when their settings differ
    thresholds: tuple[int, ...] = ()  # the failures in a row that open it, by the policies counting here (lowest first)

    @property
    def handler(self) -> str:
        return self.key.handler

    @property
    def scope(self) -> str:
        return self.key.scope


@dataclass(frozen=True)
class BreakerBoard:
    """Every breaker with state, or why they could not be read."""

    rows: list[BreakerRow] = field(default_factory=list)
    error: str | None = None
    failure_threshold: int = 5
    held_capped: bool = False

    @property
    def open_count(self) -> int:
        return sum(1 for row in self.rows if row.state.state != BreakerMode.CLOSED)


def board(now: datetime, scope: int | None = None) -> BreakerBoard:
    """Return every breaker that has state, open ones first.

    A person limited to a tenant sees that tenant's own breakers and the handler-wide ones of handlers it runs.
    """
    threshold = policies.effective(None, None)[1].breaker_failure_threshold
    try:
        states = breakers.all_states(now)
    except (redis.RedisError, OSError) as error:
        return BreakerBoard(error=f"{type(error).__name__}: {error}", failure_threshold=threshold)
    keys = visible(list(states), scope)
    held, capped = held_runs(keys, scope)
    names = _tenant_names({key.tenant_id for key in keys} - {None})
    rows = [BreakerRow(key, states[key], held.get(key, 0), names.get(key.tenant_id), *_whose(key, states[key]))
            for key in keys]
    rows.sort(key=lambda row: (_ORDER[row.state.state], -row.state.consecutive_failures, row.handler,
                               row.tenant or ""))
    return BreakerBoard(rows, None, threshold, capped)


def _whose(key: BreakerKey, state: BreakerState) -> tuple[PolicyBreaker | None, tuple[PolicyBreaker, ...],
                                                          tuple[int, ...]]:
    """Return the policy that opened it, the policies sharing it when their settings differ, and their thresholds."""
    opened_by = breaker_policies.opener(state)
    used = breaker_policies.in_use(key, opened_by)
    differ = len({(each.failure_threshold, each.open_s) for each in used}) > 1
    return opened_by, tuple(used) if differ else (), tuple(sorted({each.failure_threshold for each in used}))


def not_closed_handlers(scope: int | None, now: datetime) -> set[str]:
    """Name the handlers with a breaker `scope` may see that is open or half open: their replayed runs wait for it
    (raises Redis's error when it does not answer: the page decides what it shows then)."""
    held = [key for key, state in breakers.all_states(now).items() if state.state != BreakerMode.CLOSED]
    return {key.handler for key in visible(held, scope)}


def visible(keys: list[BreakerKey], scope: int | None) -> list[BreakerKey]:
    """Keep the breakers a person limited to `scope` may see: its tenant's own, and handler-wide ones it runs."""
    if scope is None:
        return keys
    keys = [key for key in keys if key.tenant_id in (None, scope)]
    shared = {key.handler for key in keys if key.tenant_id is None}
    used = set(db.session.execute(select(Run.handler).distinct().where(
        Run.tenant_id == scope, Run.handler.in_(shared))).scalars()) if shared else set()
    return [key for key in keys if key.tenant_id is not None or key.handler in used]


def _tenant_names(ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(db.session.execute(select(Tenant.id, Tenant.name).where(Tenant.id.in_(ids))).all())


def held_runs(keys: list[BreakerKey], scope: int | None = None) -> tuple[dict[BreakerKey, int], bool]:
    """Count runs waiting because a breaker was open (capped); tell whether the cap was hit.

    A run held by its tenant's own breaker counts there; the handler-wide breaker counts the other tenants' runs.
    """
    handlers = sorted({key.handler for key in keys})
    if not handlers:
        return {}, False
    waiting = select(Run.handler, Run.tenant_id).where(
        Run.status == "retry_wait", Run.status_reason == "breaker_open", Run.handler.in_(handlers))
    if scope is not None:
        waiting = waiting.where(Run.tenant_id == scope)
    sample = waiting.limit(HELD_COUNT_CAP + 1).subquery()
    groups = db.session.execute(select(sample.c.handler, sample.c.tenant_id, func.count())
                                .group_by(sample.c.handler, sample.c.tenant_id)).all()
    shown = set(keys)
    counts: dict[BreakerKey, int] = {}
    for handler, tenant_id, count in groups:
        own = BreakerKey(handler, tenant_id)
        key = own if own in shown else BreakerKey(handler)
        if key in shown:
            counts[key] = counts.get(key, 0) + count
    return counts, sum(count for *_, count in groups) > HELD_COUNT_CAP


def describe(key: BreakerKey) -> str:
    """Name a breaker for people: "demo.flaky", or "demo.flaky for globex" for a tenant's own."""
    if key.tenant_id is None:
        return key.handler
    tenant = db.session.get(Tenant, key.tenant_id)
    return f"{key.handler} for {tenant.name if tenant else f'tenant {key.tenant_id}'}"


def reset(key: BreakerKey, actor: Actor, clock: Clock = SYSTEM_CLOCK, scope: int | None = None) -> BreakerState:
    """Close a breaker and forget its counts, audited with the state before; return that state.

    A person limited to a tenant may reset only that tenant's own breakers: a handler-wide one is every tenant's.
    """
    now = clock()
    tenant = None
    if key.tenant_id is not None:
        if scope is not None and key.tenant_id != scope:
            # Said the same way whether that tenant exists or not: the wall hides other tenants.
            raise NotFound(f"you act for one tenant only; tenant {key.tenant_id}'s breakers are not yours to reset")
        tenant = db.session.get(Tenant, key.tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant with id {key.tenant_id}")
    elif scope is not None:
        raise Forbidden(f"the breaker of {key.handler} is shared by every tenant; resetting it needs an account not "
                        "limited to a tenant")
    if not breakers.exists(key):
        raise NotFound(f"the breaker of {describe(key)} has no state to reset: it is closed with no failures counted")
    before = breakers.state_of(key, now)
    # The audit row waits in the transaction: if Redis refuses the reset, it is rolled back with it.
    audit.record(db.session, actor, "breaker.reset", "breaker", key.handler, before={**before.to_dict(),
                 "scope": key.scope}, after={**BreakerState().to_dict(), "scope": key.scope},
                 tenant=tenant.name if tenant else None, note=f"was {before.state.value}", clock=clock)
    if before.state != BreakerMode.CLOSED:
        breaker_alerts.closed(key, now, reset_by=actor.name)  # the incident its opening started ends here too
    db.session.flush()
    try:
        breakers.reset(key)
    except Exception:
        db.session.rollback()
        raise
    db.session.commit()
    return before
