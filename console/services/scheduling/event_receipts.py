"""What an event sent with an idempotency key answered for the tasks it did not fire, so a resend answers the same."""

from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import EventReceipt

KEPT = ("paused", "debounced")  # a fired task's run holds the key itself
# A sender retries within minutes or hours; a week covers a long outage of its own (Stripe keeps its keys 24 h).
KEEP_DAYS = 7
TABLE = EventReceipt.__table__


def answered(tenant_id: int, task_ids: list[int], key: str) -> dict[int, str]:
    """Return what the event with this key answered before for these tasks, within the week: task id → status."""
    if not task_ids:
        return {}
    return dict(db.session.execute(select(EventReceipt.task_id, EventReceipt.status).where(
        EventReceipt.tenant_id == tenant_id, EventReceipt.idempotency_key == key,
        EventReceipt.task_id.in_(task_ids))).all())


def keep(tenant_id: int, key: str, answers: list[tuple[int, str]], now: datetime) -> None:
    """Record (task id, status) answers in the caller's transaction; one sent at the same moment keeps the first."""
    if not answers:
        return
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(db.engine.dialect.name)
    statement = dialect.insert(TABLE).on_conflict_do_nothing() if dialect else insert(TABLE)
    db.session.execute(statement, [{"tenant_id": tenant_id, "task_id": task_id, "idempotency_key": key,
                                    "status": status, "received_at": now} for task_id, status in answers])


def expire(clock: Clock = SYSTEM_CLOCK) -> int:
    """Forget answers older than the week (the scheduler's maintenance, hourly); return how many."""
    result = db.session.execute(delete(EventReceipt).where(
        EventReceipt.received_at < clock() - timedelta(days=KEEP_DAYS)))
    db.session.commit()
    return result.rowcount
