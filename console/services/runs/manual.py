"""A run a person submits from the console: the API's submit, plus the audit row a person's change gets."""

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine.submit import submit


def submit_by_hand(tenant: Tenant, actor: Actor, *, handler: str, params: dict, policy: str | None,
                   idempotency_key: str, clock: Clock = SYSTEM_CLOCK) -> tuple[Run, bool]:
    """Submit one run as the API does (same checks, same 4xx); audit it when it was created, not when deduplicated."""
    run, created = submit(tenant, actor, handler=handler, params=params, policy=policy or None,
                          idempotency_key=idempotency_key, source="console", clock=clock)
    if created:
        # After the run's own commit, as a task's "run now" does: the run and its timeline row exist either way.
        audit.record(db.session, actor, "run.submit", "run", run.id, after={
            "handler": run.handler, "params": run.params, "policy": policy or "default",
            "idempotency_key": run.idempotency_key}, tenant=tenant.name, clock=clock)
        db.session.commit()
    return run, created
