"""Mark dead runs resolved: a person decided they need no replay; their dead letters close, and so do work orders
left with none open."""

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select, update

from console.extensions import db
from console.models import DeadLetter, Run, Tenant, WorkOrder
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import transitions, waiting_fixes
from console.services.workorders import changes as workorders
from console.services.workorders.orders import ACTIVE

LETTERS = DeadLetter.__table__


@dataclass(frozen=True)
class Letter:
    id: int
    run_id: int
    work_order_id: int | None


@dataclass
class Plan:
    """What resolving these runs does: which are dead (and their tenants), their open letters, the orders that close."""

    runs: dict[int, str] = field(default_factory=dict)  # run id → tenant name, for the dead ones
    letters: list[Letter] = field(default_factory=list)
    closing: dict[int, str] = field(default_factory=dict)  # work orders left with no open letter → their status now
    skipped: dict[int, str] = field(default_factory=dict)  # run id → why it is left alone
    closed_fixes: list[int] = field(default_factory=list)  # params fixes that waited on the letters, now superseded


def plan(run_ids: list[int], tenant_id: int | None) -> Plan:
    """Work out what resolving these runs would change, reading only."""
    query = select(Run.id, Run.status, Tenant.name).join(Tenant, Tenant.id == Run.tenant_id).where(Run.id.in_(run_ids))
    if tenant_id is not None:
        query = query.where(Run.tenant_id == tenant_id)
    found = {run_id: (status, tenant) for run_id, status, tenant in db.session.execute(query)}
    result = Plan()
    for run_id in run_ids:
        status, tenant = found.get(run_id, (None, None))
        if status == "dead":
            result.runs[run_id] = tenant
        else:
            result.skipped[run_id] = (f"it is {status.replace('_', ' ')}; only a dead run can be marked resolved"
                                      if status else "no such run here")
    if not result.runs:
        return result
    result.letters = [Letter(*row) for row in db.session.execute(
        select(DeadLetter.id, DeadLetter.run_id, DeadLetter.work_order_id).where(
            DeadLetter.run_id.in_(result.runs), DeadLetter.status == "open").order_by(DeadLetter.id))]
    closing = {letter.work_order_id for letter in result.letters if letter.work_order_id}
    if closing:
        ours = {letter.id for letter in result.letters}
        still_open = db.session.execute(select(DeadLetter.work_order_id, func.count()).where(
            DeadLetter.work_order_id.in_(closing), DeadLetter.status == "open", DeadLetter.id.not_in(ours))
            .group_by(DeadLetter.work_order_id)).all()
        closing -= {order_id for order_id, count in still_open if count}
    if closing:
        result.closing = dict(db.session.execute(select(WorkOrder.id, WorkOrder.status).where(
            WorkOrder.id.in_(closing), WorkOrder.status.in_(ACTIVE)).order_by(WorkOrder.id)).all())
    return result


def note_of(note) -> str:
    """Return the reason kept on each resolved dead letter, or say what is wrong with it."""
    return inputs.note(note, "note", missing="say why these runs need no replay: a note is required")


def resolve(chosen: Plan, note: str, actor: Actor, now: datetime) -> Plan:
    """Resolve the planned runs in the caller's transaction; return what really changed (runs moved meanwhile skip)."""
    note = note_of(note)
    fixes = waiting_fixes.hold([letter.id for letter in chosen.letters])
    moved = transitions.move_many("dead", "resolved", list(chosen.runs), now, reason="resolved", actor=actor.name,
                                  message=note)
    done = Plan(runs={row.id: chosen.runs[row.id] for row in moved},
                skipped={run_id: "it changed meanwhile" for run_id in chosen.runs if run_id not in
                         {row.id for row in moved}} | chosen.skipped)
    if not done.runs:
        return done
    closed = db.session.connection().execute(
        update(LETTERS).where(LETTERS.c.run_id.in_(done.runs), LETTERS.c.status == "open")
        .values(status="resolved", resolved_at=now, resolved_by=actor.signature, resolution_note=note)
        .returning(LETTERS.c.id, LETTERS.c.run_id, LETTERS.c.work_order_id)).all()
    done.letters = sorted((Letter(*row) for row in closed), key=lambda letter: letter.id)
    for order_id in sorted({letter.work_order_id for letter in done.letters if letter.work_order_id}):
        status = db.session.get(WorkOrder, order_id).status
        if workorders.close_if_resolved(order_id, now, by=actor):
            done.closing[order_id] = status
    letters_of: dict[int, list[int]] = {}
    for letter in done.letters:
        letters_of.setdefault(letter.run_id, []).append(letter.id)
    audit.record_many(db.session, actor, "run.resolve", "run", [
        audit.Change(run_id, before={"status": "dead"}, after={"status": "resolved", "dead_letters": letters_of.get(
            run_id, [])}, tenant=tenant) for run_id, tenant in done.runs.items()], note=note, clock=lambda: now)
    done.closed_fixes = waiting_fixes.close(fixes, actor, now)
    return done
