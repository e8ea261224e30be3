"""Discarding dead letters: one or many, with a reason, and a rolled-back bulk discard's letters opened again."""

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import exists, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run, Tenant, WorkOrder
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq.groups import MAX_SELECTED
from console.services.engine import parking, waiting_fixes
from console.services.errors import Conflict, InvalidInput


def reason_of(reason: str | None, what: str = "these dead letters are") -> str:
    return inputs.note(reason, "reason", missing=f"say why {what} discarded: a reason is required")


def _after(run_id: int, actor: Actor) -> dict:
    """A discard's audited outcome; one an approval let through names its approver in a field of its own, which the
    hourly allowance reads (the note's "approved by" is after a reason anyone may type; helper 149)."""
    approved = {"approved_by": actor.approved_by} if actor.approved_by else {}
    return {"status": "discarded", "run_id": run_id, **approved}


def _discard(letter: DeadLetter, reason: str, actor: Actor, now: datetime) -> bool:
    # Conditional, so a replay that wins the race is not overwritten by a discard.
    changed = db.session.execute(
        update(DeadLetter).where(DeadLetter.id == letter.id, DeadLetter.status == "open")
        .values(status="discarded", resolved_at=now, resolved_by=actor.signature, resolution_note=reason)
        .execution_options(synchronize_session=False)).rowcount
    if changed != 1:
        return False
    db.session.refresh(letter)
    audit.record(db.session, actor, "dead_letter.discard", "dead_letter", letter.id, before={"status": "open"},
                 after=_after(letter.run_id, actor), tenant=letter.tenant.name, note=reason, clock=lambda: now)
    return True


def discard(letter: DeadLetter, reason: str | None, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """Close one open dead letter without replaying it, saying why; return the params fixes waiting on it that this
    closed."""
    reason = reason_of(reason, "this dead letter is")
    now = clock()
    fixes = waiting_fixes.hold([letter.id])
    if not _discard(letter, reason, actor, now):
        db.session.rollback()
        db.session.refresh(letter)
        raise Conflict(f"dead letter {letter.id} is already {letter.status}", "status")
    closed = waiting_fixes.close(fixes, actor, now)
    db.session.commit()
    return closed


class Discarded(NamedTuple):
    """The dead letters a discard closed, and the params fixes waiting on them it closed."""

    ids: list[int]
    closed_fixes: list[int]


def discard_open(ids: list[int], reason: str, actor: Actor, now: datetime, *,
                 tenant_id: int | None = None) -> Discarded:
    """Discard those of the dead letters still open (one guarded UPDATE), each audited, closing the params fixes
    waiting on them, in the caller's transaction."""
    fixes = waiting_fixes.hold(ids)
    query = update(DeadLetter).where(DeadLetter.id.in_(ids), DeadLetter.status == "open")
    if tenant_id is not None:
        query = query.where(DeadLetter.tenant_id == tenant_id)
    # Guarded by status, so a replay that wins the race is not overwritten by a discard.
    done = db.session.execute(
        query.values(status="discarded", resolved_at=now, resolved_by=actor.signature, resolution_note=reason)
        .returning(DeadLetter.id, DeadLetter.run_id, DeadLetter.tenant_id)
        .execution_options(synchronize_session=False)).all()
    if done:
        names = dict(db.session.execute(select(Tenant.id, Tenant.name)).all())
        audit.record_many(db.session, actor, "dead_letter.discard", "dead_letter", [
            audit.Change(letter_id, before={"status": "open"}, after=_after(run_id, actor), tenant=names.get(tenant))
            for letter_id, run_id, tenant in sorted(done)],
            note=reason, clock=lambda: now)
    return Discarded(sorted(letter_id for letter_id, _, _ in done), waiting_fixes.close(fixes, actor, now))


def reopen(ids: list[int], discarded_at: datetime, actor: Actor, now: datetime, *, approval_id: int) -> list[int]:
    """Open again those of the dead letters still discarded at `discarded_at` (not settled otherwise since) whose run
    is still dead in the letter's series (not retried since), each in an active work order, audited."""
    # The runs first, in id order (the run's lock, then its letter's, as replays take them): a retry committing
    # meanwhile is waited for, and the guard below, a statement of its own, sees its run no longer dead.
    db.session.execute(select(Run.id).join(DeadLetter, DeadLetter.run_id == Run.id)
                       .where(DeadLetter.id.in_(ids)).order_by(Run.id).with_for_update(of=Run)).all()
    still_dead = exists().where(Run.id == DeadLetter.run_id, Run.status == "dead", Run.series == DeadLetter.series)
    done = db.session.execute(
        update(DeadLetter).where(DeadLetter.id.in_(ids), DeadLetter.status == "discarded",
                                 DeadLetter.resolved_at == discarded_at, still_dead)
        .values(status="open", resolved_at=None, resolved_by=None, resolution_note=None)
        .returning(DeadLetter.id, DeadLetter.tenant_id, DeadLetter.work_order_id)
        .execution_options(synchronize_session=False)).all()
    if not done:
        return []
    note = f"rollback of approval #{approval_id}"
    order_of = {letter_id: order_id for letter_id, _, order_id in done}
    names = dict(db.session.execute(select(Tenant.id, Tenant.name)).all())
    for moved in parking.rejoin(sorted(order_of), now, approval_id=approval_id, settled_at=discarded_at):
        order_of.update(dict.fromkeys(moved.letter_ids, moved.work_order_id))
        if moved.reopened:
            audit.record(db.session, actor, "work_order.reopen", "work_order", moved.work_order_id,
                         before={"status": "closed"}, after={
                             "status": db.session.get(WorkOrder, moved.work_order_id, populate_existing=True).status,
                             "dead_letters": moved.letter_ids},
                         tenant=names.get(moved.tenant_id),
                         note=f"{note}: it had closed because these dead letters were discarded", clock=lambda: now)
        elif moved.opened:
            audit.record(db.session, actor, "work_order.open", "work_order", moved.work_order_id,
                         after={"status": "open", "dead_letters": moved.letter_ids},
                         tenant=names.get(moved.tenant_id),
                         note=f"{note}: reopened letters of closed work order #{moved.closed_id}",
                         clock=lambda: now)
    audit.record_many(db.session, actor, "dead_letter.reopen", "dead_letter", [
        audit.Change(letter_id, before={"status": "discarded"},
                     after={"status": "open", "work_order_id": order_of[letter_id]}, tenant=names.get(tenant))
        for letter_id, tenant, _ in sorted(done)], note=note, clock=lambda: now)
    return sorted(order_of)


def selection(ids: list[int]) -> list[int]:
    """Return the selected ids, each once, or say what is wrong with the selection."""
    ids = sorted(set(ids))
    if not ids:
        raise InvalidInput("select the dead letters to discard", "id")
    if len(ids) > MAX_SELECTED:
        raise InvalidInput(f"select at most {MAX_SELECTED} dead letters at once", "id")
    return ids


def discard_many(ids: list[int], reason: str | None, actor: Actor, tenant_id: int | None,
                 clock: Clock = SYSTEM_CLOCK) -> tuple[int, int, list[int]]:
    """Discard the selected open dead letters; return (discarded, skipped because no longer open or unseen, the
    params fixes waiting on them it closed)."""
    ids = selection(ids)  # first: asked for a reason with nothing ticked, a person looks for the wrong fix
    reason = reason_of(reason)
    discarded = discard_open(ids, reason, actor, clock(), tenant_id=tenant_id)
    db.session.commit()
    return len(discarded.ids), len(ids) - len(discarded.ids), discarded.closed_fixes
