"""Requests that need a second person (four eyes): filed with a reason and a before → after diff, read back."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import String, and_, cast, exists, func, or_, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.secrets import mask_pair
from console.extensions import db
from console.models import Approval, AuditEntry, Tenant, User
from console.services import inputs
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound
from console.services.settings import setting

STATUSES = ("pending", "executed", "failed", "rejected", "withdrawn", "expired", "superseded", "rolled_back")
PAGE_SIZE = 50


class FourEyes(Forbidden):
    """The requester of a change tried to approve (or reject) it themselves."""

    code = "four_eyes"


class Superseded(Conflict):
    """What a request would change was settled another way before its approval: it closes as superseded."""


@dataclass(frozen=True)
class Row:
    approval: Approval
    requested_by: str
    decided_by: str | None
    tenant: str | None
    rolled_back_by: str | None = None


def reason_of(text) -> str:
    """Return a requester's reason, or say what is wrong with it (it is required)."""
    return inputs.note(text, "reason", missing="give a reason: the approver reads it before deciding")


def request(kind: str, actor: Actor, *, reason: str, subject_type: str, subject_id, payload: dict, before: dict,
            after: dict, tenant: Tenant | None, clock: Clock = SYSTEM_CLOCK) -> Approval:
    """File a change for a second person to approve, audited, in the caller's transaction (not committed)."""
    if actor.id is None:
        raise Forbidden("a change that needs approval must be requested by a person (or a person's token)")
    now = clock()
    approval = Approval(kind=kind, tenant_id=tenant.id if tenant else None, subject_type=subject_type,
                        subject_id=str(subject_id), payload=payload, before=before, after=after,
                        reason=reason_of(reason), status="pending", requested_by_id=actor.id, created_at=now,
                        expires_at=now + timedelta(seconds=setting("APPROVAL_TTL_S")))
    db.session.add(approval)
    db.session.flush()
    shown_before, shown_after = mask_pair(before, after)  # a secret that changes says so, without its value
    audit.record(db.session, actor, "approval.request", "approval", approval.id, after={
        "kind": kind, "subject": f"{subject_type}:{subject_id}", "before": shown_before, "after": shown_after},
        tenant=tenant.name if tenant else None, note=approval.reason, clock=lambda: now)
    return approval


def get(approval_id: int, tenant_id: int | None = None) -> Approval:
    """Return one request, or NotFound (also for another tenant's, to a tenant-scoped caller)."""
    approval = db.session.get(Approval, approval_id) if isinstance(approval_id, int) else None
    if approval is None or (tenant_id is not None and approval.tenant_id != tenant_id):
        raise NotFound(f"no approval request with id {approval_id}")
    return approval


def rows(*, status: str | None = None, tenant_id: int | None = None, requested_by_id: int | None = None,
         decidable_by: int | None = None, live_at: datetime | None = None, before: int | None = None,
         limit: int = PAGE_SIZE, kind: str | None = None, now: datetime | None = None) -> list[Row]:
    """Return requests newest first, one keyset page at a time, with the names people read.

    decidable_by leaves out that person's own requests; live_at leaves out those expired by then. `status` is the
    status as it stands at `now` (status_at): a request past its time is expired before the job marks it.
    """
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status must be all, or one of {', '.join(STATUSES)}", "status")
    requester, decider, undoer = db.aliased(User), db.aliased(User), db.aliased(User)
    query = (select(Approval, requester.username, decider.username, Tenant.name, undoer.username)
             .join(requester, requester.id == Approval.requested_by_id)
             .outerjoin(decider, decider.id == Approval.decided_by_id)
             .outerjoin(Tenant, Tenant.id == Approval.tenant_id)
             .outerjoin(undoer, undoer.id == Approval.rolled_back_by_id)
             .order_by(Approval.id.desc()).limit(limit))
    if status is not None:
        # As the rows show it: pending filtered by the stored status listed a request shown "expired", and expired
        # left it out, for up to a minute (helper 167).
        now = now or SYSTEM_CLOCK()
        if status == "expired":
            query = query.where(or_(Approval.status == "expired",
                                    and_(Approval.status == "pending", Approval.expires_at <= now)))
        elif status == "pending":
            query = query.where(Approval.status == "pending", Approval.expires_at > now)
        else:
            query = query.where(Approval.status == status)
    if kind is not None:
        query = query.where(Approval.kind == kind)
    if tenant_id is not None:
        query = query.where(Approval.tenant_id == tenant_id)
    if requested_by_id is not None:
        query = query.where(Approval.requested_by_id == requested_by_id)
    if decidable_by is not None:
        query = query.where(Approval.requested_by_id != decidable_by)
    if live_at is not None:
        query = query.where(Approval.expires_at > live_at)
    if before is not None:
        query = query.where(Approval.id < before)
    return [Row(*found) for found in db.session.execute(query)]


def row(approval: Approval) -> Row:
    """Return one request with the names people read."""
    names = dict(db.session.execute(select(User.id, User.username).where(
        User.id.in_([approval.requested_by_id, approval.decided_by_id or approval.requested_by_id]))).all())
    tenant = db.session.get(Tenant, approval.tenant_id) if approval.tenant_id else None
    return Row(approval, names.get(approval.requested_by_id, "?"), names.get(approval.decided_by_id),
               tenant.name if tenant else None)


def status_at(approval: Approval, now: datetime) -> str:
    """Return a request's status as it stands at `now`: pending past its time is expired (the job marks it soon)."""
    if approval.status == "pending" and approval.expires_at <= now:
        return "expired"
    return approval.status


def about(subjects: list[tuple[str, object]], limit: int = 20) -> list[Approval]:
    """Return the newest requests about any of these (subject type, subject id) pairs."""
    if not subjects:
        return []
    query = select(Approval).where(or_(*(and_(Approval.subject_type == kind, Approval.subject_id == str(subject))
                                         for kind, subject in subjects)))
    return list(db.session.execute(query.order_by(Approval.id.desc()).limit(limit)).scalars())


def waiting_for(actor_id: int | None, tenant_id: int | None, now: datetime) -> int:
    """Count the live requests this person could decide: pending, not expired, not their own."""
    query = select(func.count()).select_from(Approval).where(
        Approval.status == "pending", Approval.expires_at > now)
    if actor_id is not None:
        query = query.where(Approval.requested_by_id != actor_id)
    if tenant_id is not None:
        query = query.where(Approval.tenant_id == tenant_id)
    return db.session.execute(query).scalar_one()


def seen_at(user: User) -> datetime:
    """Return when the person last read their own requests (when their account began, if never)."""
    return user.requests_seen_at or user.created_at


def _answered_since_seen(user: User, now: datetime, seen: datetime | None = None):
    """The condition of the person's own requests someone else (or the system: expiry, superseding) closed or rolled
    back since `seen` (by default since they last read their requests)."""
    seen = seen or seen_at(user)
    # A request their own act settled (they replayed the letter their fix waited on) is closed by nobody, and its
    # audit row names them: no news to them (helper 98).
    settled_by_them = exists().where(AuditEntry.at > seen, AuditEntry.action == "approval.supersede",
                                     AuditEntry.target_type == "approval",
                                     AuditEntry.target_id == cast(Approval.id, String), AuditEntry.actor_id == user.id)
    by_another = and_(or_(Approval.decided_by_id.is_(None), Approval.decided_by_id != user.id), ~settled_by_them)
    # Expiry is news when the time runs out, as the lists show it, not when the job marks it up to a minute later
    # (whose mark, after the person looked, would make it news twice).
    expired = and_(Approval.status.in_(("pending", "expired")), Approval.expires_at > seen, Approval.expires_at <= now)
    decided = and_(Approval.status != "expired", Approval.decided_at > seen, by_another)
    return and_(Approval.requested_by_id == user.id, or_(decided, expired, Approval.rolled_back_at > seen))


def answered_since_seen(user: User, now: datetime) -> int:
    """Count the person's own requests answered since they last read their requests."""
    return db.session.execute(select(func.count()).select_from(Approval).where(
        _answered_since_seen(user, now))).scalar_one()


def answered_ids_since(user: User, seen: datetime, now: datetime) -> set[int]:
    """Return the ids of the person's own requests answered between `seen` and `now`."""
    return set(db.session.execute(select(Approval.id).where(_answered_since_seen(user, now, seen))).scalars())


def mark_requests_seen(user: User, now: datetime) -> None:
    """Note that the person has read their own requests as they stand at `now`, and commit."""
    db.session.execute(update(User).where(User.id == user.id).values(requests_seen_at=now))
    db.session.commit()


def supersede(approval_id: int, outcome: str, now: datetime, *conditions) -> bool:
    """Close a pending request nobody needs to decide any more (what it would change was settled first), saying why,
    audited as the system's, in the caller's transaction; tell whether this call closed it.

    One guarded statement (with any further `conditions`): an approver deciding at the same moment wins or loses as
    a whole, and nothing read before it can have changed under it.
    """
    closed = db.session.execute(update(Approval).where(Approval.id == approval_id, Approval.status == "pending",
                                                       *conditions)
                                .values(status="superseded", decided_at=now, outcome=outcome)
                                .returning(Approval.tenant_id)).first()
    if closed is None:
        return False
    tenant = db.session.get(Tenant, closed.tenant_id) if closed.tenant_id else None
    audit.record(db.session, SYSTEM, "approval.supersede", "approval", approval_id, before={"status": "pending"},
                 after={"status": "superseded"}, note=outcome, tenant=tenant.name if tenant else None,
                 clock=lambda: now)
    return True


def fail_executed(approval_id: int, outcome: str, now: datetime) -> bool:
    """Mark an approved request whose change could not be made after all (its runbook refused to run) failed, saying
    why, audited as the system's, and commit; tell whether this call changed it."""
    failed = db.session.execute(update(Approval).where(Approval.id == approval_id, Approval.status == "executed")
                                .values(outcome=outcome, status="failed").returning(Approval.tenant_id)).first()
    if failed is not None:
        tenant = db.session.get(Tenant, failed.tenant_id) if failed.tenant_id else None
        audit.record(db.session, SYSTEM, "approval.fail", "approval", approval_id, before={"status": "executed"},
                     after={"status": "failed"}, note=outcome, tenant=tenant.name if tenant else None,
                     clock=lambda: now)
    db.session.commit()
    return failed is not None


def expire_due(clock: Clock = SYSTEM_CLOCK) -> int:
    """The "approvals-expire" maintenance job: mark pending requests past their time expired; they never run."""
    now = clock()
    expired = db.session.execute(
        update(Approval).where(Approval.status == "pending", Approval.expires_at <= now)
        .values(status="expired", decided_at=now).returning(Approval.id, Approval.tenant_id)).all()
    if expired:
        # Each row under its request's tenant, as the request's other rows: that tenant's people read it expire.
        names = dict(db.session.execute(select(Tenant.id, Tenant.name).where(
            Tenant.id.in_({tenant_id for _, tenant_id in expired if tenant_id}))).all())
        audit.record_many(db.session, Actor("system"), "approval.expire", "approval", [
            audit.Change(approval_id, before={"status": "pending"}, after={"status": "expired"},
                         tenant=names.get(tenant_id)) for approval_id, tenant_id in expired], clock=lambda: now)
    db.session.commit()
    return len(expired)
