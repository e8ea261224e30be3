"""Read the audit log: filtered, newest first, one keyset page at a time."""

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry

# Sign-ins and sign-outs are written as auth.*: one row per person per login, so they drown out the changes.
SIGN_IN_ACTIONS = "auth."


def page(*, actor: str = "", action: str = "", target: str = "", hide_sign_ins: bool = False,
         before_seq: int | None = None, tenant: str | None = None,
         limit: int = 50) -> tuple[list[AuditEntry], int | None]:
    """Return one page of entries and the seq to continue from (None on the last page)."""
    query = select(AuditEntry).order_by(AuditEntry.seq.desc()).limit(limit + 1)
    if actor:
        query = query.where(AuditEntry.actor.startswith(actor))
    if action:
        query = query.where(AuditEntry.action.startswith(action))
    if hide_sign_ins:
        query = query.where(~AuditEntry.action.startswith(SIGN_IN_ACTIONS))
    if target:
        kind, _, ident = target.partition(":")
        query = query.where(AuditEntry.target_type == kind)
        if ident:
            query = query.where(AuditEntry.target_id == ident)
    if tenant is not None:
        # People limited to one tenant see that tenant's rows and nothing tenant-less.
        query = query.where(AuditEntry.tenant == tenant)
    if before_seq:
        query = query.where(AuditEntry.seq < before_seq)
    rows = db.session.execute(query).scalars().all()
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, rows[-1].seq if more and rows else None
