"""Park runs that cannot recover: a dead letter, a work order per error group, an alert."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, select, text, update
from sqlalchemy.exc import IntegrityError

from console.db.upsert import insert_for
from console.domain.errors import Failure, shown_message
from console.extensions import db
from console.models import DeadLetter, Run, WorkOrder
from console.models.recovery import ACTIVE_WORK_ORDER
from console.services.actor import SYSTEM
from console.services.delivery import outbox

ORDERS = WorkOrder.__table__
# A found work order may be closed between our insert and our count (close_settled); then we insert again.
OPEN_ORDER_TRIES = 3
TITLE_CHARS = ORDERS.c.title.type.length  # 255


def _work_order(run: Run, failure: Failure, now: datetime) -> int:
    """Return the id of this error group's active work order, opening one if there is none; count the letter."""
    # The group's words, not its first letter's: "order 'ord_00001x' customer 1@example.com" named one customer
    # (and put their address in the title) for a work order about all of them (helper 164).
    title = f"{run.handler}: {failure.code} — {shown_message(failure.message)[:160]}"
    return group_work_order(run.tenant_id, failure.fingerprint, title, now, notice={
        "handler": run.handler, "task_id": run.task_id, "error_code": failure.code,
        "reason": failure.message[:500], "first_run_id": run.id})[0]


def group_work_order(tenant_id: int, fingerprint: str, title: str, now: datetime, *, notice: dict,
                     count: int = 1) -> tuple[int, bool]:
    """Return (id, opened) of the group's active work order, opening one (its notice queued) if there is none;
    count `count` letters in it. In the caller's transaction."""
    # A long handler, code and message made more than the column holds: PostgreSQL refused the letter's whole
    # bookkeeping (SQLite does not check lengths).
    title = title if len(title) <= TITLE_CHARS else title[:TITLE_CHARS - 1] + "…"
    connection = db.session.connection()
    active = (ORDERS.c.tenant_id == tenant_id, ORDERS.c.fingerprint == fingerprint,
              ORDERS.c.status.in_(("open", "acknowledged")))
    for _ in range(OPEN_ORDER_TRIES):
        # Counted in SQL (a read-modify-write lost counts on PostgreSQL) and only while the order is active. The
        # update locks the order until our letter commits, so close_if_resolved, which locks it first, sees the
        # letter; an order closed since we looked counts nothing, and the insert below opens a new one. Tried
        # first: each insert that finds the order there spends a number of PostgreSQL's sequence, and a storm's
        # next work order after #36 was #636 (helper 143).
        order_id = connection.execute(
            update(ORDERS).where(*active)  # one at most: the unique index on active orders per group
            .values(dead_letter_count=ORDERS.c.dead_letter_count + count).returning(ORDERS.c.id)).scalar_one_or_none()
        if order_id is not None:
            return order_id, False
        # The unique index on active orders per group decides between concurrent parkers: one inserts, the others
        # wait for its commit and count into its order on the next round (no SELECT-then-INSERT, which forked work
        # orders on PostgreSQL).
        order_id = connection.execute(
            insert_for(connection)(ORDERS).values(
                tenant_id=tenant_id, fingerprint=fingerprint, status="open", dead_letter_count=count,
                created_at=now, title=title)
            .on_conflict_do_nothing(index_elements=[ORDERS.c.tenant_id, ORDERS.c.fingerprint],
                                    index_where=text(ACTIVE_WORK_ORDER))
            .returning(ORDERS.c.id)).scalar_one_or_none()
        if order_id is not None:
            outbox.add("workorder", f"workorder:{order_id}", {
                "work_order_id": order_id, "title": title, "tenant_id": tenant_id, **notice}, now, tenant_id=tenant_id)
            return order_id, True
    raise RuntimeError(f"could not open or find the work order of group {fingerprint}")


def park(run: Run, failure: Failure, reason: str, now: datetime, *, learned_at: datetime | None = None,
         imported_from: str | None = None) -> DeadLetter:
    """Record a dead letter for the run (in the caller's transaction) with its work order and alert.

    `learned_at`: when Rebound learned of a failure that happened at `now` (an import of old failures): its work
    order opens and its alert is queued then, so neither reads months old and alert latency times Rebound alone.
    `imported_from`: the function an imported failure's job ran, which its alert names.
    """
    order_id = _work_order(run, failure, learned_at or now)
    letter = DeadLetter(run_id=run.id, tenant_id=run.tenant_id, task_id=run.task_id, handler=run.handler,
                        series=run.series, attempts=run.attempt, reason=reason, error_code=failure.code,
                        error_message=failure.message, fingerprint=failure.fingerprint, work_order_id=order_id,
                        created_at=now)
    db.session.add(letter)
    db.session.flush()
    # One alert per error group while it is pending delivery; a storm becomes one alert with a count.
    outbox.add("alert", outbox.dead_letters_key(run.tenant_id, failure.fingerprint, order_id), {
        "rule": "retry_limit_reached" if reason == "exhausted" else "dead_letter", "dead_letter_id": letter.id,
        "run_id": run.id, "tenant_id": run.tenant_id, "handler": run.handler, "task_id": run.task_id,
        "error_code": failure.code, "message": failure.message[:500], "attempts": run.attempt,
        "reason": reason, "work_order_id": order_id, "dead_at": now.isoformat(),
        **({"imported_from": imported_from} if imported_from else {})}, learned_at or now,
        tenant_id=run.tenant_id)
    return letter


@dataclass(frozen=True)
class Rejoined:
    """Reopened letters back in an active work order: the one that closed for them, or their group's."""

    work_order_id: int
    tenant_id: int
    closed_id: int | None  # the work order they were in, closed meanwhile
    letter_ids: list[int]
    opened: bool  # a new work order, not one the group already had
    reopened: bool = False  # their own work order, open again: it had closed only because they were settled


def rejoin(letter_ids: list[int], now: datetime, *, approval_id: int, settled_at: datetime) -> list[Rejoined]:
    """Give reopened dead letters (settled at `settled_at`) whose work order closed meanwhile an active one again, in
    the caller's transaction: their own, when the system closed it after they were settled (the reason it closed is
    gone); else their group's active one, opened if there is none (a notice queued as parking queues it)."""
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.id.in_(letter_ids)).order_by(DeadLetter.id)
                                 .execution_options(populate_existing=True)).scalars().all()
    # Locked in id order before reading their status, as close_if_resolved locks an order before its check: a close
    # deciding now is waited for and read as closed; one deciding after us sees these letters open.
    orders = {order.id: order for order in db.session.execute(
        select(WorkOrder).where(WorkOrder.id.in_({letter.work_order_id for letter in letters if letter.work_order_id}))
        .order_by(WorkOrder.id).with_for_update().execution_options(populate_existing=True)).scalars()}
    groups: dict[tuple, list[DeadLetter]] = {}
    for letter in letters:
        order = orders.get(letter.work_order_id)
        if order is None or order.status not in ("open", "acknowledged"):
            groups.setdefault((letter.tenant_id, letter.fingerprint, letter.work_order_id), []).append(letter)
    rejoined = []
    for (tenant_id, fingerprint, closed_id), moving in groups.items():
        first, ids = moving[0], [letter.id for letter in moving]
        closed = orders.get(closed_id)
        reopened = closed is not None and _reopen(closed, settled_at)
        opened = False
        if not reopened:
            title = closed.title if closed is not None else f"{first.handler}: {first.error_code}"
            order_id, opened = group_work_order(tenant_id, fingerprint, title, now, count=len(moving), notice={
                "handler": first.handler, "task_id": first.task_id, "error_code": first.error_code,
                "reason": (first.error_message or "")[:500], "first_run_id": first.run_id})
            db.session.execute(update(DeadLetter).where(DeadLetter.id.in_(ids)).values(work_order_id=order_id)
                               .execution_options(synchronize_session=False))
        else:
            order_id = closed_id
        if opened or reopened:  # the group's incident was resolved when its order closed: page about the work again
            outbox.add("alert", outbox.dead_letters_key(tenant_id, fingerprint, order_id), {
                "rule": "dead_letter", "dead_letter_id": first.id, "run_id": first.run_id, "tenant_id": tenant_id,
                "handler": first.handler, "task_id": first.task_id, "error_code": first.error_code,
                "message": (first.error_message or "")[:500], "reason": first.reason, "work_order_id": order_id,
                "reopened": len(ids), "approval_id": approval_id, "dead_at": now.isoformat()}, now, tenant_id=tenant_id)
        rejoined.append(Rejoined(order_id, tenant_id, closed_id, ids, opened, reopened))
    return rejoined


def _reopen(order: WorkOrder, settled_at: datetime) -> bool:
    """Open again, as it was before it closed, a work order the system closed once its letters were settled, if that
    was after `settled_at` and its group has no other active order; tell if it did (in the caller's transaction)."""
    if order.closed_by != SYSTEM.name or order.closed_at is None or order.closed_at < settled_at:
        return False  # a person closed it, or it closed before these letters were settled: it stays as they left it
    others = select(ORDERS.c.id).where(ORDERS.c.tenant_id == order.tenant_id, ORDERS.c.fingerprint == order.fingerprint,
                                       ORDERS.c.status.in_(("open", "acknowledged")))
    try:
        # A savepoint: a parker opening the group's order at this moment (not committed yet, so not in `others`)
        # makes ours break the one-active-order index when it commits; the letters then join its order instead.
        with db.session.begin_nested():
            return db.session.execute(
                update(ORDERS).where(ORDERS.c.id == order.id, ORDERS.c.status == "closed", ~others.exists())
                .values(status=case((ORDERS.c.acknowledged_at.is_(None), "open"), else_="acknowledged"),
                        closed_at=None, closed_by=None, close_note=None)).rowcount == 1
    except IntegrityError:
        return False
