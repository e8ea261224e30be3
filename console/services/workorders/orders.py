"""Work orders: one per open error group; acknowledged, assigned and closed by people, or closed by recovery."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.orm import aliased, joinedload

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, User, WorkOrder
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit
from console.services.delivery import channel_report as delivery_report
from console.services.delivery import dispatch, notice, outbox
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.people.permissions import OPERATE, can

ACTIVE = ("open", "acknowledged")
FILTERS = {"active": ACTIVE, "open": ("open",), "acknowledged": ("acknowledged",), "closed": ("closed",),
           "all": None}
PAGE_SIZE = 50
LETTERS_SHOWN = 100
COMPLETION_WINDOW = timedelta(days=7)
COMPLETION_TARGET = 0.95
MAX_NOTE_CHARS = 2000


@dataclass(frozen=True)
class Row:
    order: WorkOrder
    delivery: OutboxMessage | None  # the request to the external work-order system
    open_letters: int = 0


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    next_before: int | None


@dataclass(frozen=True)
class Completion:
    created: int
    closed: int
    window: timedelta

    @property
    def rate(self) -> float | None:
        return self.closed / self.created if self.created else None

    @property
    def on_target(self) -> bool:
        return self.rate is None or self.rate >= COMPLETION_TARGET


@dataclass(frozen=True)
class Detail:
    order: WorkOrder
    letters: list[DeadLetter]
    open_letters: int
    messages: list[OutboxMessage]
    deliveries: list
    request: OutboxMessage | None


def request_key(order_id: int) -> str:
    """Return the outbox key of the request that creates the work order in the external system."""
    return f"workorder:{order_id}"


def _requests(order_ids: list[int]) -> dict[int, OutboxMessage]:
    if not order_ids:
        return {}
    rows = db.session.execute(select(OutboxMessage).where(
        OutboxMessage.dedup_key.in_([request_key(i) for i in order_ids])).order_by(OutboxMessage.id)).scalars()
    return {int(row.dedup_key.split(":", 1)[1]): row for row in rows}


def of_task(task_id: int):
    """Work orders holding a dead letter of the task (what Reports counts as a task's)."""
    return exists().where(DeadLetter.work_order_id == WorkOrder.id, DeadLetter.task_id == task_id)


def page(status: str, tenant_id: int | None, before: int | None = None, assignee_id: int | None = None,
         limit: int = PAGE_SIZE, *, of_tenant: int | None = None, opened: tuple = (None, None),
         task_id: int | None = None) -> Page:
    """Return one page of work orders, newest first (keyset on id), with their delivery rows.

    `tenant_id` is the caller's scope; `of_tenant` a tenant asked for; `opened` a [since, until) of their creation;
    `task_id` a task whose dead letters they hold.
    """
    query = select(WorkOrder).options(joinedload(WorkOrder.assignee), joinedload(WorkOrder.tenant))
    statuses = FILTERS.get(status, ACTIVE)
    if statuses is not None:
        query = query.where(WorkOrder.status.in_(statuses))
    for wanted in (tenant_id, of_tenant):
        if wanted is not None:
            query = query.where(WorkOrder.tenant_id == wanted)
    since, until = opened
    if since is not None:
        query = query.where(WorkOrder.created_at >= since)
    if until is not None:
        query = query.where(WorkOrder.created_at < until)
    if assignee_id is not None:
        query = query.where(WorkOrder.assignee_id == assignee_id)
    if task_id is not None:
        query = query.where(of_task(task_id))
    if before is not None:
        query = query.where(WorkOrder.id < before)
    orders = db.session.execute(query.order_by(WorkOrder.id.desc()).limit(limit + 1)).scalars().all()
    more = len(orders) > limit
    orders = orders[:limit]
    ids = [order.id for order in orders]
    requests, still_open = _requests(ids), _open_letters(ids)
    return Page([Row(order, requests.get(order.id), still_open.get(order.id, 0)) for order in orders],
                orders[-1].id if more else None)


def row(order: WorkOrder) -> Row:
    return Row(order, _requests([order.id]).get(order.id), _open_letters([order.id]).get(order.id, 0))


def _open_letters(order_ids: list[int]) -> dict[int, int]:
    """Count each work order's open dead letters (by the open letters' partial index)."""
    if not order_ids:
        return {}
    return dict(db.session.execute(select(DeadLetter.work_order_id, func.count()).where(
        DeadLetter.work_order_id.in_(order_ids), DeadLetter.status == "open").group_by(DeadLetter.work_order_id)).all())


def counts(tenant_id: int | None) -> dict[str, int]:
    """Count open and acknowledged work orders (few: one per error group that is still open)."""
    query = select(WorkOrder.status, func.count()).where(WorkOrder.status.in_(ACTIVE)).group_by(WorkOrder.status)
    if tenant_id is not None:
        query = query.where(WorkOrder.tenant_id == tenant_id)
    found = dict(db.session.execute(query).all())
    return {status: found.get(status, 0) for status in ACTIVE}


def completion(now: datetime, tenant_id: int | None = None, window: timedelta = COMPLETION_WINDOW) -> Completion:
    """Return how many work orders created in the window are closed (seed 000: at least 95%)."""
    query = (select(func.count(), func.count().filter(WorkOrder.status == "closed"))
             .where(WorkOrder.created_at >= now - window))
    if tenant_id is not None:
        query = query.where(WorkOrder.tenant_id == tenant_id)
    created, closed = db.session.execute(query).one()
    return Completion(created, closed, window)


def get(order_id: int, tenant_id: int | None = None) -> WorkOrder:
    """Return a work order visible to this tenant scope, or raise NotFound."""
    order = db.session.get(WorkOrder, order_id)
    if order is None or (tenant_id is not None and order.tenant_id != tenant_id):
        raise NotFound(f"no work order with id {order_id}")
    return order


def detail(order_id: int, tenant_id: int | None = None) -> Detail:
    """Return a work order with its latest dead letters and everything sent about it."""
    order = get(order_id, tenant_id)
    letters = db.session.execute(
        select(DeadLetter).options(joinedload(DeadLetter.run)).where(DeadLetter.work_order_id == order.id)
        .order_by(DeadLetter.id.desc()).limit(LETTERS_SHOWN)).scalars().all()
    open_letters = _open_letters([order.id]).get(order.id, 0)
    alert_key = f"dead:{order.tenant_id}:{order.fingerprint}"
    candidates = db.session.execute(select(OutboxMessage).where(OutboxMessage.dedup_key.in_(
        (request_key(order.id), alert_key, f"resolve:{notice.work_order_incident(order.id)}")))
        .order_by(OutboxMessage.id.desc()).limit(60)).scalars().all()
    # The group's alerts are shared with earlier work orders of the same error: keep this one's lifetime.
    messages = [m for m in candidates if m.dedup_key != alert_key or (
        m.created_at >= order.created_at and (order.closed_at is None or m.created_at <= order.closed_at))][:20]
    request = next((m for m in messages if m.dedup_key == request_key(order.id)), None)
    return Detail(order, letters, open_letters, messages, delivery_report.deliveries_of([m.id for m in messages]),
                  request)


def assignable(order: WorkOrder) -> list[User]:
    """Return the active people who may work this order: operators and up, of its tenant or of every tenant."""
    people = db.session.execute(select(User).where(
        User.active.is_(True), or_(User.tenant_id.is_(None), User.tenant_id == order.tenant_id))
        .order_by(User.username)).scalars().all()
    return [person for person in people if can(person.role, OPERATE)]


def _move(order: WorkOrder, expected: tuple[str, ...], **values) -> None:
    """Change the work order only if it is still in an expected status (two people may act at once)."""
    changed = db.session.execute(update(WorkOrder).where(WorkOrder.id == order.id, WorkOrder.status.in_(expected))
                                 .values(**values).execution_options(synchronize_session=False)).rowcount
    if not changed:
        db.session.rollback()
        db.session.refresh(order)
        raise Conflict(f"work order #{order.id} is {order.status} now; look again", "status")
    db.session.refresh(order)


def acknowledge(order: WorkOrder, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> WorkOrder:
    """Say someone is on it; the person who acknowledges takes it if nobody has."""
    if order.status != "open":
        raise Conflict(f"work order #{order.id} is {order.status}; only open work orders can be acknowledged",
                       "status")
    before = {"status": order.status, "assignee": _name(order.assignee_id)}
    # Decided in SQL: an assignment made since this page was read is kept, not overwritten by the acknowledger.
    _move(order, ("open",), status="acknowledged", acknowledged_at=clock(),
          assignee_id=func.coalesce(WorkOrder.assignee_id, actor.id))
    audit.record(db.session, actor, "work_order.acknowledge", "work_order", order.id, before=before,
                 after={"status": order.status, "assignee": _name(order.assignee_id)}, tenant=order.tenant.name,
                 clock=clock)
    db.session.commit()
    return order


def _name(user_id: int | None) -> str | None:
    user = db.session.get(User, user_id) if user_id else None
    return user.username if user else None


def assign(order: WorkOrder, user_id: int | None, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> WorkOrder:
    """Give the work order to a person (or to nobody)."""
    if order.status == "closed":
        raise Conflict(f"work order #{order.id} is closed; reopen work happens on a new work order", "status")
    if user_id is not None and user_id not in {person.id for person in assignable(order)}:
        raise InvalidInput("pick an active operator who can see this tenant", "user")
    before = {"assignee": _name(order.assignee_id)}
    _move(order, ACTIVE, assignee_id=user_id)
    audit.record(db.session, actor, "work_order.assign", "work_order", order.id, before=before,
                 after={"assignee": _name(user_id)}, tenant=order.tenant.name, clock=clock)
    db.session.commit()
    return order


def _closed(order: WorkOrder, actor: Actor, note: str, now: datetime, before: str) -> None:
    """Audit a close and resolve its incident (PagerDuty), in the caller's transaction."""
    audit.record(db.session, actor, "work_order.close", "work_order", order.id, before={"status": before},
                 after={"status": "closed"}, tenant=order.tenant.name, note=note, clock=lambda: now)
    outbox.resolve(notice.work_order_incident(order.id), f"Work order #{order.id}: {order.title}",
                   f"Work order #{order.id} was closed by {actor.name}: {note}", now, tenant_id=order.tenant_id,
                   work_order_id=order.id)


def close(order: WorkOrder, note: str | None, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list[str]:
    """Close a work order by hand, saying what was done; return the channels its resolve goes to (may be none)."""
    note = (note or "").strip()
    if not note:
        raise InvalidInput("say what was done: a note is required to close a work order", "note")
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidInput(f"keep the note under {MAX_NOTE_CHARS} characters", "note")
    if order.status == "closed":
        raise Conflict(f"work order #{order.id} is already closed", "status")
    before, now = order.status, clock()
    _move(order, ACTIVE, status="closed", closed_at=now, closed_by=actor.name, close_note=note)
    _closed(order, actor, note, now, before)
    # The resolve just queued, or the pending one it was added to: the same kind, so the same channels.
    resolve = db.session.execute(select(OutboxMessage).where(
        OutboxMessage.dedup_key == f"resolve:{notice.work_order_incident(order.id)}")
        .order_by(OutboxMessage.id.desc()).limit(1)).scalar_one()
    told = dispatch.configured_routes(resolve)
    db.session.commit()
    return told


def _unsettled(order_id) -> exists:
    """A dead letter of the order still needs work: open, or replayed and its run not (yet) succeeded.

    A replayed letter whose run died again is superseded by the run's newer letter, which is judged instead
    (it is open, in this work order or in the one of its new error).
    """
    letter, newer = aliased(DeadLetter), aliased(DeadLetter)
    succeeded = exists().where(Run.id == letter.run_id, Run.status == "succeeded")
    superseded = exists().where(newer.run_id == letter.run_id, newer.id > letter.id)
    return exists().where(letter.work_order_id == order_id, or_(
        letter.status == "open", and_(letter.status == "replayed", ~succeeded, ~superseded)))


SETTLED_NOTE = "Every linked dead letter was discarded or resolved, or replayed and its run succeeded."


def close_if_resolved(work_order_id: int, now: datetime, by: Actor | None = None) -> bool:
    """Close the work order once each of its dead letters is settled (in the caller's transaction).

    Settled: discarded or resolved by a person, or replayed and its run succeeded. A replay alone settles
    nothing: the replayed run may die again.
    """
    db.session.flush()
    # Locked first, so a parker adding a letter to it (which holds the order's row until it commits) is waited
    # for, and the update below, a statement of its own, sees that letter on PostgreSQL too.
    order = db.session.get(WorkOrder, work_order_id, with_for_update=True, populate_existing=True)
    if order is None or order.status not in ACTIVE:
        return False
    before = order.status
    # The system closes it; a person whose action settled the last letter is named in the note.
    note = SETTLED_NOTE if by is None else f"{SETTLED_NOTE.rstrip('.')} (the last by {by.name})."
    changed = db.session.execute(
        update(WorkOrder).where(WorkOrder.id == work_order_id, WorkOrder.status.in_(ACTIVE),
                                ~_unsettled(work_order_id))
        .values(status="closed", closed_at=now, closed_by=SYSTEM.name, close_note=note)
        .execution_options(synchronize_session=False)).rowcount
    if not changed:
        return False
    db.session.refresh(order)
    _closed(order, SYSTEM, order.close_note, now, before)
    return True


def close_settled(clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """Close every active work order whose dead letters are all settled (replays that succeeded, discards)."""
    now = clock()
    settled = db.session.execute(select(WorkOrder.id).where(
        WorkOrder.status.in_(ACTIVE), ~_unsettled(WorkOrder.id))).scalars().all()
    closed = [order_id for order_id in settled if close_if_resolved(order_id, now)]
    db.session.commit()
    return closed
