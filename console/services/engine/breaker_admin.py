"""Circuit breakers as people see and reset them: the state per breaker, runs held back, audited resets."""

import json
from dataclasses import dataclass, field
from datetime import datetime

import redis
from sqlalchemy import select

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
    # The runs the state names that this person may open (None when gone, or another tenant's): the half-open probe
    # in flight, and the run whose failure opened it.
    probe_run: int | None = None
    opened_by_run: int | None = None

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
    runs = _openable_runs({run for key in keys for run in (states[key].probe_run, states[key].opened_by_run)}, scope)
    rows = [BreakerRow(key, states[key], held.get(key, 0), names.get(key.tenant_id), *_whose(key, states[key]),
                       probe_run=_if_in(states[key].probe_run, runs),
                       opened_by_run=_if_in(states[key].opened_by_run, runs))
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


@dataclass(frozen=True)
class OpenBreakers:
    """The open breakers a person may see, to say which replays would wait for one (half open ones let probes by)."""

    keys: frozenset[BreakerKey] = frozenset()
    tenant_names: dict[int, str] = field(default_factory=dict)

    def name(self, key: BreakerKey) -> str:
        """Name a breaker as the Breakers page does: "demo.flaky", or "demo.flaky for globex"."""
        return key.handler if key.tenant_id is None else f"{key.handler} for {self.tenant_names.get(key.tenant_id)}"

    def of_group(self, runs) -> list[str]:
        """Name the open breakers a group's replayed runs would wait for, read from its newest letter of each tenant
        (by handler and tenant alone it named breakers none of its runs counts on; helper 141)."""
        return sorted({name for name in map(self.of_run, runs) if name})

    def of_run(self, run) -> str:
        """Name the open breaker a replay of this run would wait for, by its policy's breaker scope ("" for none)."""
        if not any(key.handler == run.handler for key in self.keys):
            return ""
        try:
            _, policy = policies.effective(run.policy_id, run.policy_overrides)
        except NotFound:
            return ""
        key = breakers.key_for(run.handler, run.tenant_id, policy.breaker_scope)
        return self.name(key) if key in self.keys else ""


def open_breakers(scope: int | None, now: datetime) -> OpenBreakers:
    """Return the breakers `scope` may see that are open now (raises Redis's error when it does not answer: the page
    decides what it shows then). Half open ones are left out: a replayed run may go through as their probe."""
    found = [key for key, state in breakers.all_states(now).items() if state.state == BreakerMode.OPEN]
    keys = frozenset(visible(found, scope))
    return OpenBreakers(keys, _tenant_names({key.tenant_id for key in keys} - {None}))


def visible(keys: list[BreakerKey], scope: int | None) -> list[BreakerKey]:
    """Keep the breakers a person limited to `scope` may see: its tenant's own, and handler-wide ones it runs."""
    if scope is None:
        return keys
    keys = [key for key in keys if key.tenant_id in (None, scope)]
    shared = {key.handler for key in keys if key.tenant_id is None}
    used = set(db.session.execute(select(Run.handler).distinct().where(
        Run.tenant_id == scope, Run.handler.in_(shared))).scalars()) if shared else set()
    return [key for key in keys if key.tenant_id is not None or key.handler in used]


def _openable_runs(ids: set[int | None], scope: int | None) -> set[int]:
    """Return which of these runs exist and are `scope`'s to open (a shared breaker counts every tenant's runs)."""
    ids = {each for each in ids if isinstance(each, int)}
    if not ids:
        return set()
    found = select(Run.id).where(Run.id.in_(ids))
    if scope is not None:
        found = found.where(Run.tenant_id == scope)
    return set(db.session.execute(found).scalars())


def _if_in(run_id: int | None, runs: set[int]) -> int | None:
    return run_id if run_id in runs else None


def _tenant_names(ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(db.session.execute(select(Tenant.id, Tenant.name).where(Tenant.id.in_(ids))).all())


def held_runs(keys: list[BreakerKey], scope: int | None = None) -> tuple[dict[BreakerKey, int], bool]:
    """Count runs waiting because a breaker was open (capped); tell whether the cap was hit.

    Each counts on the breaker its policy's scope names: its tenant's own, or the handler-wide one (a tenant's own
    breaker took every run of its tenant, so a closed one read as holding runs the shared one held; helper 136).
    """
    handlers = sorted({key.handler for key in keys})
    if not handlers:
        return {}, False
    waiting = select(Run.handler, Run.tenant_id, Run.policy_id, Run.policy_overrides).where(
        Run.status == "retry_wait", Run.status_reason == "breaker_open", Run.handler.in_(handlers))
    if scope is not None:
        waiting = waiting.where(Run.tenant_id == scope)
    rows = db.session.execute(waiting.limit(HELD_COUNT_CAP + 1)).all()
    shown, scopes, counts = set(keys), {}, {}
    for handler, tenant_id, policy_id, overrides in rows:
        which = (policy_id, json.dumps(overrides, sort_keys=True) if overrides else "")
        if which not in scopes:
            try:
                scopes[which] = policies.effective(policy_id, overrides)[1].breaker_scope
            except NotFound:
                scopes[which] = None  # its policy is gone: nothing says which breaker holds it
        if scopes[which] is None:
            continue
        key = breakers.key_for(handler, tenant_id, scopes[which])
        if key in shown:
            counts[key] = counts.get(key, 0) + 1
    return counts, len(rows) > HELD_COUNT_CAP


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
