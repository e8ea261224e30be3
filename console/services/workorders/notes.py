"""People's notes on a work order: what was tried, found or handed over, in order, each audited."""

from sqlalchemy import select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import WorkOrder, WorkOrderNote
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit

MAX_SHOWN = 200  # a work order's page and answer show its newest notes, at most this many


def add(order: WorkOrder, text, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> WorkOrderNote:
    """Add a note to the work order (closed ones too: what was learned afterwards), audited; commit."""
    body = inputs.note(text, "note", missing="write the note: what you tried, found or hand over")
    now = clock()
    note = WorkOrderNote(work_order_id=order.id, author=actor.signature, author_id=actor.id, body=body, created_at=now)
    db.session.add(note)
    db.session.flush()
    audit.record(db.session, actor, "work_order.note", "work_order", order.id, after={"note_id": note.id},
                 tenant=order.tenant.name, note=body, clock=lambda: now)
    db.session.commit()
    return note


def of(order_id: int) -> list[WorkOrderNote]:
    """Return the work order's notes, oldest first (its newest MAX_SHOWN)."""
    newest = db.session.execute(select(WorkOrderNote).where(WorkOrderNote.work_order_id == order_id)
                                .order_by(WorkOrderNote.id.desc()).limit(MAX_SHOWN)).scalars().all()
    return newest[::-1]
