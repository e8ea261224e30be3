"""The alert a breaker's opening raises and the resolve its closing sends, keyed by the breaker."""

from datetime import datetime

from console.domain.breaker import BreakerSettings
from console.extensions import db
from console.models import Tenant
from console.services.delivery import outbox
from console.services.engine import breakers
from console.services.engine.breakers import BreakerKey


def opened(key: BreakerKey, settings: BreakerSettings, now: datetime) -> None:
    """Queue the "breaker opened" alert in the caller's transaction; it names a tenant only for a per-tenant breaker."""
    # A handler-wide breaker is everyone's outage: naming the tenant whose call tipped it over misled (issue 21).
    outbox.add("alert", key.alert_key, {
        "rule": "breaker_opened", "handler": key.handler, "scope": key.scope, "tenant_id": key.tenant_id,
        "open_s": settings.open_s, "at": now.isoformat()}, now, tenant_id=key.tenant_id)


def closed(key: BreakerKey, now: datetime, reset_by: str | None = None) -> None:
    """Queue the resolve of the incident the opening started (same key), in the caller's transaction; `reset_by`
    names the person who closed it by hand."""
    title = f"Circuit breaker opened: {key.handler}"
    summary = f"{key.handler} answers again: its circuit breaker closed."
    whose = ""
    if key.tenant_id is not None:
        tenant = db.session.get(Tenant, key.tenant_id)
        name = tenant.name if tenant else f"tenant {key.tenant_id}"
        whose = f" for {name}"
        title = f"Circuit breaker opened: {key.handler}{whose}"
        summary = f"{key.handler} answers {name} again: that tenant's circuit breaker closed."
    if reset_by:
        summary = f"{reset_by} reset the circuit breaker of {key.handler}{whose} by hand: it is closed."
    outbox.resolve(f"rebound-{key.alert_key}", title, summary, now, tenant_id=key.tenant_id, handler=key.handler,
                   scope=key.scope)


def count(key: BreakerKey, ok: bool, now: datetime, settings: BreakerSettings, *, clean_before: bool = False,
          run_id: int | None = None) -> bool:
    """Count an attempt's outcome (of run `run_id`) against its breaker; queue the alert an opening or closing raises,
    in the caller's transaction, and tell whether one was queued (the caller commits it)."""
    change = breakers.record(key, ok, now, settings, clean_before=clean_before, run_id=run_id)
    if change == "opened":
        opened(key, settings, now)
    elif change == "closed":
        # The cause has cleared: resolve the PagerDuty incident the "opened" alert started (same key).
        closed(key, now)
    return change in ("opened", "closed")
