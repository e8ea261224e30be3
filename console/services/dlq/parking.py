"""Park runs that cannot recover: a dead letter, a work order per error group, an alert."""

from datetime import datetime

from sqlalchemy import select

from console.domain.errors import Failure
from console.extensions import db
from console.models import DeadLetter, Run, WorkOrder
from console.services.delivery import outbox


def _work_order(run: Run, failure: Failure, now: datetime) -> WorkOrder:
    """Return the open work order of this error group, or open one."""
    order = db.session.execute(select(WorkOrder).where(
        WorkOrder.status.in_(("open", "acknowledged")), WorkOrder.fingerprint == failure.fingerprint,
        WorkOrder.tenant_id == run.tenant_id)).scalar_one_or_none()
    if order is None:
        order = WorkOrder(tenant_id=run.tenant_id, fingerprint=failure.fingerprint, created_at=now,
                          title=f"{run.handler}: {failure.code} — {failure.message[:160]}", dead_letter_count=0)
        db.session.add(order)
        db.session.flush()
        outbox.add("workorder", f"workorder:{order.id}", {
            "work_order_id": order.id, "title": order.title, "tenant_id": run.tenant_id, "handler": run.handler,
            "task_id": run.task_id, "error_code": failure.code, "reason": failure.message[:500],
            "first_run_id": run.id}, now, tenant_id=run.tenant_id)
    order.dead_letter_count += 1
    return order


def park(run: Run, failure: Failure, reason: str, now: datetime) -> DeadLetter:
    """Record a dead letter for the run (in the caller's transaction) with its work order and alert."""
    order = _work_order(run, failure, now)
    letter = DeadLetter(run_id=run.id, tenant_id=run.tenant_id, task_id=run.task_id, handler=run.handler,
                        series=run.series, attempts=run.attempt, reason=reason, error_code=failure.code,
                        error_message=failure.message, fingerprint=failure.fingerprint, work_order=order,
                        created_at=now)
    db.session.add(letter)
    db.session.flush()
    # One alert per error group while it is pending delivery; a storm becomes one alert with a count.
    outbox.add("alert", f"dead:{run.tenant_id}:{failure.fingerprint}", {
        "rule": "retry_limit_reached" if reason == "exhausted" else "dead_letter", "dead_letter_id": letter.id,
        "run_id": run.id, "tenant_id": run.tenant_id, "handler": run.handler, "task_id": run.task_id,
        "error_code": failure.code, "message": failure.message[:500], "attempts": run.attempt,
        "reason": reason, "work_order_id": order.id, "dead_at": now.isoformat()}, now, tenant_id=run.tenant_id)
    return letter
