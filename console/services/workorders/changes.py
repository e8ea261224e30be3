"""Every change to a work order: acknowledged, assigned and closed by people, or closed by recovery once settled."""

from datetime import datetime

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.orm import aliased

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, User, WorkOrder
from console.services import inputs
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit
from console.services.delivery import closed_orders, dispatch, notice, outbox
from console.services.errors import Conflict, InvalidInput
from console.services.workorders.orders import ACTIVE, assignable


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
    # Its PagerDuty incident kept escalating while someone was on it in Rebound (helper 154).
    outbox.acknowledge(notice.work_order_incident(order.id), f"Work order #{order.id}: {order.title}",
                       f"Work order #{order.id} was acknowledged by {actor.name} in Rebound.", clock(),
                       tenant_id=order.tenant_id, work_order_id=order.id)
    db.session.commit()
    return order


def _name(user_id: int | None) -> str | None:
    user = db.session.get(User, user_id) if user_id else None
    return user.username if user else None


AS_READ = object()  # assign()'s `seen` when the caller saw no page: the assignee as this request read it


def assign(order: WorkOrder, user_id: int | None, actor: Actor, *, seen=AS_READ,
           clock: Clock = SYSTEM_CLOCK) -> WorkOrder:
    """Give the work order to a person (or to nobody), from whoever the person saw had it (`seen`: a user id, or
    None for nobody); audited when that changes who has it. Taken meanwhile by someone else, it is refused."""
    if order.status == "closed":
        raise Conflict(f"work order #{order.id} is closed; reopen work happens on a new work order", "status")
    if user_id is not None and user_id not in {person.id for person in assignable(order)}:
        raise InvalidInput("pick an active operator who can see this tenant", "user")
    if user_id == order.assignee_id:
        return order  # nothing changes: no audit row saying "nobody → nobody"
    expected = order.assignee_id if seen is AS_READ else seen
    # Decided in SQL: three people pressing "Assign to me" at once were each told it was theirs, each audited as
    # taking it from nobody; a page drawn before someone took it took it from them unseen.
    changed = db.session.execute(update(WorkOrder).where(
        WorkOrder.id == order.id, WorkOrder.status.in_(ACTIVE), WorkOrder.assignee_id.is_not_distinct_from(expected))
        .values(assignee_id=user_id).execution_options(synchronize_session=False)).rowcount
    if not changed:
        db.session.rollback()
        db.session.refresh(order)
        if order.status not in ACTIVE:
            raise Conflict(f"work order #{order.id} is {order.status} now; look again", "status")
        raise Conflict(f"work order #{order.id} was assigned to {_name(order.assignee_id) or 'nobody'} meanwhile "
                       f"(the page showed {_name(expected) or 'nobody'}); look again", "user")
    db.session.refresh(order)
    audit.record(db.session, actor, "work_order.assign", "work_order", order.id,
                 before={"assignee": _name(expected)}, after={"assignee": _name(user_id)},
                 tenant=order.tenant.name, clock=clock)
    db.session.commit()
    return order


def _closed(order: WorkOrder, actor: Actor, note: str, now: datetime, before: str) -> None:
    """Audit a close and resolve its incident (PagerDuty), in the caller's transaction."""
    audit.record(db.session, actor, "work_order.close", "work_order", order.id, before={"status": before},
                 after={"status": "closed"}, tenant=order.tenant.name, note=note, clock=lambda: now)
    # The work-order system takes no close (POST /ops/workorders opens tickets): its ticket is closed by hand.
    ticket = (f" Close ticket {order.external_id} in the work-order system by hand: it is not told."
              if order.external_id else "")
    said = note.rstrip() if note.rstrip().endswith((".", "!", "?")) else f"{note.rstrip()}."
    outbox.resolve(notice.work_order_incident(order.id), f"Work order #{order.id}: {order.title}",
                   f"Work order #{order.id} was closed by {actor.name}: {said}{ticket}", now,
                   tenant_id=order.tenant_id, work_order_id=order.id)
    closed_orders.retire(order.id, now)


def close(order: WorkOrder, note: str | None, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list[str]:
    """Close a work order by hand, saying what was done; return the channels its resolve goes to (may be none)."""
    note = inputs.note(note, "note", missing="say what was done: a note is required to close a work order")
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


def _unsettled(order_id, settling: list[int] = ()) -> exists:
    """A dead letter of the order still needs work: open, or replayed and its run not (yet) succeeded; `settling`
    names letters taken as settled already (those a discard is about to settle).

    A replayed letter whose run died again is superseded by the run's newer letter, which is judged instead
    (it is open, in this work order or in the one of its new error). A run compensated has ended well too: a
    retried undo that worked, or a replayed run that failed and undid itself (it leaves no newer letter).
    """
    letter, newer = aliased(DeadLetter), aliased(DeadLetter)
    succeeded = exists().where(Run.id == letter.run_id, Run.status.in_(("succeeded", "compensated")))
    superseded = exists().where(newer.run_id == letter.run_id, newer.id > letter.id)
    return exists().where(letter.work_order_id == order_id, letter.id.not_in(list(settling)), or_(
        letter.status == "open", and_(letter.status == "replayed", ~succeeded, ~superseded)))


def closing_with(letter_ids: list[int]) -> list[int]:
    """Return the active work orders these dead letters, settled, leave with nothing to do: the next delivery round
    closes them (a bulk discard's runbook names them)."""
    if not letter_ids:
        return []
    orders = select(DeadLetter.work_order_id).where(DeadLetter.id.in_(letter_ids))
    return db.session.execute(select(WorkOrder.id).where(
        WorkOrder.id.in_(orders), WorkOrder.status.in_(ACTIVE), ~_unsettled(WorkOrder.id, letter_ids))
        .order_by(WorkOrder.id)).scalars().all()


# A replayed run that died again under another error left a letter in that error's work order, which tracks it now.
SETTLED_NOTE = ("Every linked dead letter was discarded or resolved, or replayed and its run ended well (succeeded, or "
                "compensated) or died again under another error, which that error's work order tracks.")


def settled_note(work_order_id: int) -> str:
    """Say how the order's dead letters were settled, by kind and count ("2 discarded; 1 replayed and its run
    succeeded"): the one sentence that covered every way read the same whatever happened (helper 108)."""
    newer = aliased(DeadLetter)
    superseded = exists().where(newer.run_id == DeadLetter.run_id, newer.id > DeadLetter.id)
    # Died again under the same error: its newer letter is in this order, and counted below (helper 160).
    superseded_here = exists().where(newer.run_id == DeadLetter.run_id, newer.id > DeadLetter.id,
                                     newer.work_order_id == work_order_id)
    kinds = db.session.execute(select(DeadLetter.status, Run.status, superseded, superseded_here, func.count())
                               .join(Run, Run.id == DeadLetter.run_id).where(DeadLetter.work_order_id == work_order_id)
                               .group_by(DeadLetter.status, Run.status, superseded, superseded_here)).all()
    counts: dict[str, int] = {}
    for letter, run, moved_on, here, count in kinds:
        if letter != "replayed":
            said = letter  # discarded, resolved
        elif here:
            said = "replayed and died again under the same error, its newer letter counted here"
        elif moved_on:
            said = "replayed and died again under another error, which that error's work order tracks"
        else:
            said = f"replayed and {run}"  # succeeded, or compensated
        counts[said] = counts.get(said, 0) + count
    parts = [f"{count} {said}" for said, count in sorted(counts.items(), key=lambda item: -item[1])]
    total = sum(counts.values())
    return (f"Every linked dead letter is settled ({total}): " + "; ".join(parts) + ".") if parts else SETTLED_NOTE


def close_if_resolved(work_order_id: int, now: datetime, by: Actor | None = None) -> bool:
    """Close the work order once each of its dead letters is settled (in the caller's transaction).

    Settled: discarded or resolved by a person, or replayed and its run ended well. A replay alone settles
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
    said = settled_note(work_order_id)
    note = said if by is None else f"{said.rstrip('.')} (the last by {by.name})."
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
