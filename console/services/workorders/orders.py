"""Work orders as people read them: one per open error group, listed, counted, with their letters and completion."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import joinedload

from console.domain import periods
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, User, WorkOrder
from console.services.delivery import channel_report as delivery_report
from console.services.delivery import notice, outbox
from console.services.errors import NotFound
from console.services.people.permissions import OPERATE, can

ACTIVE = ("open", "acknowledged")
FILTERS = {"active": ACTIVE, "open": ("open",), "acknowledged": ("acknowledged",), "closed": ("closed",),
           "all": None}
PAGE_SIZE = 50
LETTERS_SHOWN = 100
COMPLETION_TARGET = 0.95


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
    window: timedelta | None  # None: opened before a time, with no start
    narrowed: bool = False  # to the list's tenant, task or span rather than the last 7 days

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


def assigned_active(user_id: int, tenant_id: int | None) -> int:
    """Count the open or acknowledged work orders assigned to this person, within their scope."""
    query = select(func.count()).select_from(WorkOrder).where(WorkOrder.assignee_id == user_id,
                                                              WorkOrder.status.in_(ACTIVE))
    if tenant_id is not None:
        query = query.where(WorkOrder.tenant_id == tenant_id)
    return db.session.execute(query).scalar_one()


def page(status: str, tenant_id: int | None, before: int | None = None, assignee_id: int | None = None,
         limit: int = PAGE_SIZE, *, of_tenant: int | None = None, opened: tuple = (None, None),
         task_id: int | None = None) -> Page:
    """Return one page of work orders, newest first (keyset on id), with their delivery rows.

    `tenant_id` is the caller's scope; `of_tenant` a tenant asked for; `opened` a [since, until) of their creation;
    `task_id` a task whose dead letters they hold.
    """
    query = _narrowed(select(WorkOrder).options(joinedload(WorkOrder.assignee), joinedload(WorkOrder.tenant)),
                      tenant_id, of_tenant, opened, task_id)
    statuses = FILTERS.get(status, ACTIVE)
    if statuses is not None:
        query = query.where(WorkOrder.status.in_(statuses))
    if assignee_id is not None:
        query = query.where(WorkOrder.assignee_id == assignee_id)
    if before is not None:
        query = query.where(WorkOrder.id < before)
    orders = db.session.execute(query.order_by(WorkOrder.id.desc()).limit(limit + 1)).scalars().all()
    more = len(orders) > limit
    orders = orders[:limit]
    ids = [order.id for order in orders]
    requests, still_open = _requests(ids), _open_letters(ids)
    return Page([Row(order, requests.get(order.id), still_open.get(order.id, 0)) for order in orders],
                orders[-1].id if more else None)


def _narrowed(query, tenant_id: int | None, of_tenant: int | None, opened: tuple, task_id: int | None):
    """Return the query kept to the caller's scope, a tenant asked for, a [since, until) of creation and a task."""
    for wanted in (tenant_id, of_tenant):
        if wanted is not None:
            query = query.where(WorkOrder.tenant_id == wanted)
    since, until = opened
    if since is not None:
        query = query.where(WorkOrder.created_at >= since)
    if until is not None:
        query = query.where(WorkOrder.created_at < until)
    if task_id is not None:
        query = query.where(of_task(task_id))
    return query


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


def completion(now: datetime, tenant_id: int | None = None, *, of_tenant: int | None = None,
               opened: tuple = (None, None), task_id: int | None = None) -> Completion:
    """Return how many work orders created in the last 7 UTC days (today's included, as Reports' 7 d period reads
    them, so the two pages agree), or in the list's narrowing (a Reports card's link), are closed (seed 000: at
    least 95%)."""
    narrowed = any(opened) or of_tenant is not None or task_id is not None
    if not any(opened):
        period = periods.preset("7d", now)
        opened = (period.start, period.end)
    query = _narrowed(select(func.count(), func.count().filter(WorkOrder.status == "closed")), tenant_id, of_tenant,
                      opened, task_id)
    created, closed = db.session.execute(query).one()
    since, until = opened
    return Completion(created, closed, (until or now) - since if since else None, narrowed)


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
    # Before alerts were keyed by work order, a group's were shared with its earlier work orders: this one's lifetime.
    shared_key = f"dead:{order.tenant_id}:{order.fingerprint}"
    candidates = db.session.execute(select(OutboxMessage).where(OutboxMessage.dedup_key.in_(
        (request_key(order.id), outbox.dead_letters_key(order.tenant_id, order.fingerprint, order.id), shared_key,
         f"resolve:{notice.work_order_incident(order.id)}")))
        .order_by(OutboxMessage.id.desc()).limit(60)).scalars().all()
    messages = [m for m in candidates if m.dedup_key != shared_key or (
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
