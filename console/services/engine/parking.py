"""Park runs that cannot recover: a dead letter, a work order per error group, an alert."""

from datetime import datetime

from sqlalchemy import text, update

from console.db.upsert import insert_for
from console.domain.errors import Failure
from console.extensions import db
from console.models import DeadLetter, Run, WorkOrder
from console.models.recovery import ACTIVE_WORK_ORDER
from console.services.delivery import outbox

ORDERS = WorkOrder.__table__
# A found work order may be closed between our insert and our count (close_settled); then we insert again.
OPEN_ORDER_TRIES = 3


def _work_order(run: Run, failure: Failure, now: datetime) -> int:
    """Return the id of this error group's active work order, opening one if there is none; count the letter."""
    connection = db.session.connection()
    active = (ORDERS.c.tenant_id == run.tenant_id, ORDERS.c.fingerprint == failure.fingerprint,
              ORDERS.c.status.in_(("open", "acknowledged")))
    for _ in range(OPEN_ORDER_TRIES):
        # The unique index on active orders per group decides between concurrent parkers: one inserts, the others
        # wait for its commit and find its order (no SELECT-then-INSERT, which forked work orders on PostgreSQL).
        title = f"{run.handler}: {failure.code} — {failure.message[:160]}"
        order_id = connection.execute(
            insert_for(connection)(ORDERS).values(
                tenant_id=run.tenant_id, fingerprint=failure.fingerprint, status="open", dead_letter_count=1,
                created_at=now, title=title)
            .on_conflict_do_nothing(index_elements=[ORDERS.c.tenant_id, ORDERS.c.fingerprint],
                                    index_where=text(ACTIVE_WORK_ORDER))
            .returning(ORDERS.c.id)).scalar_one_or_none()
        if order_id is not None:
            outbox.add("workorder", f"workorder:{order_id}", {
                "work_order_id": order_id, "title": title, "tenant_id": run.tenant_id, "handler": run.handler,
                "task_id": run.task_id, "error_code": failure.code, "reason": failure.message[:500],
                "first_run_id": run.id}, now, tenant_id=run.tenant_id)
            return order_id
        # Counted in SQL (a read-modify-write lost counts on PostgreSQL) and only while the order is active. The
        # update locks the order until our letter commits, so close_if_resolved, which locks it first, sees the
        # letter; an order closed since we looked counts nothing, and the next try opens a new one.
        order_id = connection.execute(
            update(ORDERS).where(*active)  # one at most: the unique index on active orders per group
            .values(dead_letter_count=ORDERS.c.dead_letter_count + 1).returning(ORDERS.c.id)).scalar_one_or_none()
        if order_id is not None:
            return order_id
    raise RuntimeError(f"could not open or find the work order of group {failure.fingerprint}")


def park(run: Run, failure: Failure, reason: str, now: datetime) -> DeadLetter:
    """Record a dead letter for the run (in the caller's transaction) with its work order and alert."""
    order_id = _work_order(run, failure, now)
    letter = DeadLetter(run_id=run.id, tenant_id=run.tenant_id, task_id=run.task_id, handler=run.handler,
                        series=run.series, attempts=run.attempt, reason=reason, error_code=failure.code,
                        error_message=failure.message, fingerprint=failure.fingerprint, work_order_id=order_id,
                        created_at=now)
    db.session.add(letter)
    db.session.flush()
    # One alert per error group while it is pending delivery; a storm becomes one alert with a count.
    outbox.add("alert", f"dead:{run.tenant_id}:{failure.fingerprint}", {
        "rule": "retry_limit_reached" if reason == "exhausted" else "dead_letter", "dead_letter_id": letter.id,
        "run_id": run.id, "tenant_id": run.tenant_id, "handler": run.handler, "task_id": run.task_id,
        "error_code": failure.code, "message": failure.message[:500], "attempts": run.attempt,
        "reason": reason, "work_order_id": order_id, "dead_at": now.isoformat()}, now, tenant_id=run.tenant_id)
    return letter
