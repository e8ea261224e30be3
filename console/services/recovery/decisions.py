"""Decide requests: another person approves (the change runs once, both names kept) or rejects; roll back a change."""

from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Approval, Tenant, User
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, Forbidden, ServiceError
from console.services.people.permissions import APPROVE, can
from console.services.recovery import approvals
from console.services.recovery.approvals import FourEyes
from console.services.recovery.registry import KINDS

# How a rollback that left some rows as they are now says so, after the change's outcome.
ROLLED_BACK_IN_PART = "; rolled back in part: "


def rolled_back_in_part(approval: Approval) -> str | None:
    """Return what a rollback left as it is now, in words, if it left anything."""
    _, found, left = (approval.outcome or "").rpartition(ROLLED_BACK_IN_PART)
    return left if found else None


def _tenant_name(approval: Approval) -> str | None:
    tenant = db.session.get(Tenant, approval.tenant_id) if approval.tenant_id else None
    return tenant.name if tenant else None


def _note(note, *, required: bool) -> str | None:
    return inputs.note(note, "note", missing="say why in a note: the requester reads it" if required else None)


def _check_decider(approval: Approval, actor: Actor, action: str, now) -> None:
    """Refuse a decision by the requester (audited), by someone without the approve permission, or on a dead request."""
    user = db.session.get(User, actor.id) if actor.id is not None else None
    if user is None or not user.active or not can(user.role, APPROVE):
        raise Forbidden(f"only a person with the approve permission can {action} a request")
    _refuse_requester(approval, actor, action, f"{action} it", now)
    if approval.status == "pending" and approval.expires_at <= now:
        approvals.expire_due(clock=lambda: now)
        raise Conflict(f"request {approval.id} expired at {approval.expires_at:%Y-%m-%d %H:%M} UTC; file it again",
                       "status")
    if approval.status != "pending":
        raise Conflict(f"request {approval.id} is {approval.status.replace('_', ' ')}, no longer pending", "status")


def _refuse_requester(approval: Approval, actor: Actor, action: str, doing: str, now) -> None:
    """Refuse the requester their own request's decision or rollback: another person must look at it."""
    if approval.requested_by_id == actor.id:
        # Refused on the server for every path (page, API, CLI), and the attempt is kept.
        audit.record(db.session, actor, f"approval.{action}.refused", "approval", approval.id,
                     after={"reason": "four_eyes"}, tenant=_tenant_name(approval), clock=lambda: now)
        db.session.commit()
        raise FourEyes(f"you requested this change; another person with the approve permission must {doing}")


def _claim(approval: Approval, actor: Actor, status: str, note: str | None, now) -> None:
    """Move the request out of pending in one conditional UPDATE: of two deciders (or the expiry job) one wins."""
    won = db.session.execute(
        update(Approval).where(Approval.id == approval.id, Approval.status == "pending", Approval.expires_at > now,
                               Approval.requested_by_id != actor.id)
        .values(status=status, decided_by_id=actor.id, decided_at=now, decision_note=note,
                executed_at=now if status == "executed" else None)
        .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        db.session.rollback()
        current = db.session.execute(select(Approval.status).where(Approval.id == approval.id)).scalar_one()
        raise Conflict(f"request {approval.id} was decided meanwhile: it is {current.replace('_', ' ')}", "status")


def not_ready(approval: Approval) -> str | None:
    """Say why a pending request cannot be approved yet, or None."""
    check = KINDS[approval.kind].not_ready
    return check(approval) if check is not None else None


def on_behalf(approval: Approval, approver: Actor) -> Actor:
    """Return who an approved change is by: its requester, with the approver and the request beside them."""
    requester = db.session.execute(select(User.username).where(User.id == approval.requested_by_id)).scalar_one()
    return Actor(requester, approval.requested_by_id, approved_by=f"{approver.name}, request #{approval.id}")


def approve(approval_id: int, actor: Actor, note: str | None = None, *, tenant_id: int | None = None,
            clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Approve another person's request: its change runs now, once, in the same transaction as the decision."""
    now = clock()
    approval = approvals.get(approval_id, tenant_id)
    note = _note(note, required=False)
    _check_decider(approval, actor, "approve", now)
    kind = KINDS[approval.kind]
    if why := not_ready(approval):
        # Refused before anything is written: the request keeps waiting (it was closed as failed, its execution
        # cancelled, for a click made while the preview ran; helper 101).
        raise Conflict(why, "status")
    _claim(approval, actor, "executed", note, now)
    requester = on_behalf(approval, actor)
    try:
        applied = kind.apply(approval, requester, now)
    except approvals.Superseded as error:
        # Settled another way before anyone decided: closed as superseded (by nobody), as the job would have.
        db.session.rollback()
        if approvals.supersede(approval.id, error.detail, now):
            _close_refused(approval, "superseded", error.detail, now)
        db.session.commit()
        raise Conflict(f"request {approval.id} no longer needs deciding: {error.detail}; nothing ran",
                       error.field) from None
    except ServiceError as error:
        db.session.rollback()
        _failed(approval, kind, actor, note, error.detail, now)
        raise Conflict(f"approved, but the change could not be made: {error.detail}", error.field) from None
    db.session.execute(update(Approval).where(Approval.id == approval.id)
                       .values(backup=applied.backup, outcome=applied.outcome)
                       .execution_options(synchronize_session=False))
    # What was done, which is less than what was asked when some rows moved on meanwhile (a letter replayed).
    audit.record(db.session, actor, "approval.approve", "approval", approval.id, before={"status": "pending"},
                 after={"status": "executed", "kind": approval.kind, "requested_by": requester.name,
                        "change": applied.change if applied.change is not None else approval.after,
                        **({"outcome": applied.outcome} if applied.outcome else {})},
                 tenant=_tenant_name(approval), note=note, clock=lambda: now)
    db.session.commit()
    applied.after_commit()
    db.session.refresh(approval)
    return approval


def _failed(approval: Approval, kind, actor: Actor, note: str | None, error: str, now) -> None:
    db.session.execute(update(Approval).where(Approval.id == approval.id, Approval.status == "pending").values(
        status="failed", decided_by_id=actor.id, decided_at=now, decision_note=note, outcome=error)
        .execution_options(synchronize_session=False))
    if kind.refused is not None:  # what a refused request closes, a failed one closes too (a runbook's execution)
        kind.refused(approval, "failed", error, now)
    audit.record(db.session, actor, "approval.approve", "approval", approval.id, before={"status": "pending"},
                 after={"status": "failed", "error": error}, tenant=_tenant_name(approval), note=note,
                 clock=lambda: now)
    db.session.commit()


def reject(approval_id: int, actor: Actor, note: str | None, *, tenant_id: int | None = None,
           clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Reject another person's request with a note; it never runs."""
    now = clock()
    approval = approvals.get(approval_id, tenant_id)
    note = _note(note, required=True)
    _check_decider(approval, actor, "reject", now)
    _claim(approval, actor, "rejected", note, now)
    _close_refused(approval, "rejected", note, now)
    audit.record(db.session, actor, "approval.reject", "approval", approval.id, before={"status": "pending"},
                 after={"status": "rejected"}, tenant=_tenant_name(approval), note=note, clock=lambda: now)
    db.session.commit()
    db.session.refresh(approval)
    return approval


def _close_refused(approval: Approval, decided: str, note: str | None, now) -> None:
    refused = KINDS[approval.kind].refused
    if refused is not None:
        refused(approval, decided, note, now)


def withdraw(approval_id: int, actor: Actor, note: str | None = None, *, tenant_id: int | None = None,
             clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Take back one's own request while it waits (filed by mistake, or not needed any more); it never runs."""
    now = clock()
    approval = approvals.get(approval_id, tenant_id)
    note = _note(note, required=False)
    if approval.requested_by_id != actor.id:
        raise Forbidden("only the person who asked for this change can withdraw it; an approver rejects it instead")
    won = db.session.execute(
        update(Approval).where(Approval.id == approval.id, Approval.status == "pending", Approval.expires_at > now)
        .values(status="withdrawn", decided_by_id=actor.id, decided_at=now, decision_note=note)
        .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        db.session.rollback()
        approvals.expire_due(clock=lambda: now)  # an expired one only lacked its mark
        current = db.session.execute(select(Approval.status).where(Approval.id == approval.id)).scalar_one()
        raise Conflict(f"request {approval.id} is {current.replace('_', ' ')}, no longer pending: only a waiting "
                       "request can be withdrawn", "status")
    _close_refused(approval, "withdrawn", note, now)
    audit.record(db.session, actor, "approval.withdraw", "approval", approval.id, before={"status": "pending"},
                 after={"status": "withdrawn"}, tenant=_tenant_name(approval), note=note, clock=lambda: now)
    db.session.commit()
    db.session.refresh(approval)
    return approval


def rollback(approval_id: int, actor: Actor, note: str | None = None, *, tenant_id: int | None = None,
             clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Restore the rows an executed change kept a backup of; 409 if they changed since."""
    now = clock()
    approval = approvals.get(approval_id, tenant_id)
    note = _note(note, required=False)
    user = db.session.get(User, actor.id) if actor.id is not None else None
    if user is None or not user.active or not can(user.role, APPROVE):
        raise Forbidden("only a person with the approve permission can roll a change back")
    _refuse_requester(approval, actor, "rollback", "roll it back", now)  # undoing it is a change a second person checks
    kind = KINDS[approval.kind]
    if kind.rollback is None:
        raise Conflict(f"this kind of change ({kind.title[0].lower() + kind.title[1:]}) cannot be rolled back", "kind")
    if approval.status != "executed":
        raise Conflict(f"request {approval.id} is {approval.status.replace('_', ' ')}; only an executed change "
                       "can be rolled back", "status")
    won = db.session.execute(update(Approval).where(Approval.id == approval.id, Approval.status == "executed")
                             .values(status="rolled_back", rolled_back_by_id=actor.id, rolled_back_at=now,
                                     rollback_note=note)
                             .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        db.session.rollback()
        raise Conflict(f"request {approval.id} was rolled back meanwhile", "status")
    try:
        restored = kind.rollback(approval, actor, now)
    except ServiceError:
        db.session.rollback()  # the rows moved on since the change: nothing restored, the request stays executed
        raise
    if restored is not None and restored.left:
        # Said where the request's page and the API read it: not every row is as it was before the change.
        db.session.execute(update(Approval).where(Approval.id == approval.id)
                           .values(outcome=f"{approval.outcome or ''}{ROLLED_BACK_IN_PART}{restored.left}")
                           .execution_options(synchronize_session=False))
    audit.record(db.session, actor, "approval.rollback", "approval", approval.id,
                 before=restored.before if restored else approval.after,
                 after=restored.after if restored else approval.before, tenant=_tenant_name(approval),
                 note=" · ".join(part for part in (note, restored and restored.left) if part) or None,
                 clock=lambda: now)
    db.session.commit()
    db.session.refresh(approval)
    return approval
