"""Circuit breakers as people see and reset them: the state per handler, runs held back, audited resets."""

from dataclasses import dataclass, field
from datetime import datetime

import redis
from sqlalchemy import func, select

from console.domain.breaker import BreakerMode, BreakerState
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import breakers
from console.services.errors import NotFound
from console.services.policies import versions as policies

# Counting held-back runs stops here, so an outage with a huge backlog cannot slow the page down.
HELD_COUNT_CAP = 10_000
_ORDER = {BreakerMode.OPEN: 0, BreakerMode.HALF_OPEN: 1, BreakerMode.CLOSED: 2}


@dataclass(frozen=True)
class BreakerRow:
    handler: str
    state: BreakerState
    held_runs: int = 0


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
    """Return every breaker that has state, open ones first; limited to the handlers a tenant runs, if scoped."""
    threshold = policies.effective(None, None)[1].breaker_failure_threshold
    try:
        states = breakers.all_states(now)
    except (redis.RedisError, OSError) as error:
        return BreakerBoard(error=f"{type(error).__name__}: {error}", failure_threshold=threshold)
    handlers = list(states)
    if scope is not None and handlers:
        used = set(db.session.execute(select(Run.handler).distinct().where(
            Run.tenant_id == scope, Run.handler.in_(handlers))).scalars())
        handlers = [handler for handler in handlers if handler in used]
    held, capped = held_runs(handlers, scope)
    rows = [BreakerRow(handler, states[handler], held.get(handler, 0)) for handler in handlers]
    rows.sort(key=lambda row: (_ORDER[row.state.state], -row.state.consecutive_failures, row.handler))
    return BreakerBoard(rows, None, threshold, capped)


def held_runs(handlers: list[str], scope: int | None = None) -> tuple[dict[str, int], bool]:
    """Count runs waiting because a handler's breaker was open (capped); tell whether the cap was hit."""
    if not handlers:
        return {}, False
    waiting = select(Run.handler).where(Run.status == "retry_wait", Run.status_reason == "breaker_open",
                                        Run.handler.in_(handlers))
    if scope is not None:
        waiting = waiting.where(Run.tenant_id == scope)
    sample = waiting.limit(HELD_COUNT_CAP + 1).subquery()
    counts = dict(db.session.execute(select(sample.c.handler, func.count()).group_by(sample.c.handler)).all())
    return counts, sum(counts.values()) > HELD_COUNT_CAP


def reset(handler: str, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> BreakerState:
    """Close a handler's breaker and forget its counts, audited with the state before; return that state."""
    now = clock()
    if not get_redis().exists(breakers.PREFIX + handler):
        raise NotFound(f"the breaker of {handler} has no state to reset: it is closed with no failures counted")
    before = breakers.state_of(handler, now)
    # The audit row waits in the transaction: if Redis refuses the reset, it is rolled back with it.
    audit.record(db.session, actor, "breaker.reset", "breaker", handler, before=before.to_dict(),
                 after=BreakerState().to_dict(), note=f"was {before.state.value}", clock=clock)
    db.session.flush()
    try:
        breakers.reset(handler)
    except Exception:
        db.session.rollback()
        raise
    db.session.commit()
    return before
