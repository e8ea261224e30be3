"""Read the audit log: filtered, newest first, one keyset page at a time."""

from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import String, and_, cast, or_, select

from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter
from console.services.inputs import MAX_ID, is_digits, row_id

# Sign-ins and sign-outs are written as auth.*: one row per person per login, so they drown out the changes.
SIGN_IN_ACTIONS = "auth."
FILTERS = ("actor", "action", "target")
DAYS = ("since", "until")


def from_args(args: Mapping) -> tuple[dict, list[str]]:
    """Return page()'s filters from a query string, and what in it cannot be used, each said with how to fix it."""
    filters = {key: str(args.get(key) or "").strip() for key in FILTERS}
    refused = []
    hide = str(args.get("hide_signins") or "")
    if hide not in ("", "1"):
        refused.append(f"hide_signins is 1 to hide sign-ins, or left out; got {_shown(hide)}")
    before = str(args.get("before") or "").strip()
    try:
        before_seq = row_id(before) if before else None
    except ValueError:
        # int() refuses more than 4,300 digits with a ValueError too: a huge number is this message, not a 500.
        before_seq = None
        refused.append(f"before={_shown(before)} is not an entry number: the Older link gives one (a whole number "
                       f"from 1 to {MAX_ID:,}); leave it out for the newest entries")
    since, until = (_day(args, name, refused) for name in DAYS)
    if since and until and until < since:
        refused.append("until is before since: give the first day, then the last")
    return {**filters, "hide_sign_ins": hide == "1", "before_seq": before_seq, "since": since, "until": until}, refused


def _day(args: Mapping, name: str, refused: list[str]) -> date | None:
    """Read a day (YYYY-MM-DD, UTC) from the query, or note why it cannot be one."""
    text = str(args.get(name) or "").strip()
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        day = None
    if day is None or not 1970 <= day.year <= 9998:  # a day either side must stay a date
        refused.append(f"{name}={_shown(text)} is not a day: write it as YYYY-MM-DD (UTC), e.g. 2026-12-01")
        return None
    return day


def _shown(text: str) -> str:
    return text[:20] + "…" if len(text) > 20 else text


def page(*, before_seq: int | None = None, limit: int = 50, **filters) -> tuple[list[AuditEntry], int | None]:
    """Return one page of entries, newest first, and the seq to continue from (None on the last page)."""
    query = _filtered(select(AuditEntry).order_by(AuditEntry.seq.desc()).limit(limit + 1), **filters)
    if before_seq:
        query = query.where(AuditEntry.seq < before_seq)
    rows = db.session.execute(query).scalars().all()
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, rows[-1].seq if more and rows else None


def batch(after_seq: int, *, size: int = 1000, **filters) -> list[AuditEntry]:
    """Return the next `size` entries the filters select after `after_seq`, oldest first (an export's batch)."""
    return db.session.execute(_filtered(select(AuditEntry).where(AuditEntry.seq > after_seq).order_by(AuditEntry.seq)
                                        .limit(size), **filters)).scalars().all()


def _about_run(run_id: int):
    """Rows about a run: its own, its dead letters', and the requests about it or them (a params fix, a compensation):
    searched by run, a params fix's rows were not found, being under its letter and its request (helper 149)."""
    letters = select(cast(DeadLetter.id, String)).where(DeadLetter.run_id == run_id)
    requests = select(cast(Approval.id, String)).where(or_(
        and_(Approval.subject_type == "run", Approval.subject_id == str(run_id)),
        and_(Approval.subject_type == "dead_letter", Approval.subject_id.in_(letters))))
    return or_(and_(AuditEntry.target_type == "run", AuditEntry.target_id == str(run_id)),
               and_(AuditEntry.target_type == "dead_letter", AuditEntry.target_id.in_(letters)),
               and_(AuditEntry.target_type == "approval", AuditEntry.target_id.in_(requests)))


def _filtered(query, *, actor: str = "", action: str = "", target: str = "", hide_sign_ins: bool = False,
              tenant: str | None = None, since: date | None = None, until: date | None = None):
    if actor:
        query = query.where(AuditEntry.actor.startswith(actor, autoescape=True))  # `_` and `%` as typed
    if action:
        query = query.where(AuditEntry.action.startswith(action, autoescape=True))
    if hide_sign_ins:
        query = query.where(~AuditEntry.action.startswith(SIGN_IN_ACTIONS))
    if target:
        kind, _, ident = target.partition(":")
        if kind == "run" and is_digits(ident):
            query = query.where(_about_run(int(ident)))
        else:
            query = query.where(AuditEntry.target_type == kind)
            if ident:
                query = query.where(AuditEntry.target_id == ident)
    if tenant is not None:
        # People limited to one tenant see that tenant's rows and nothing tenant-less.
        query = query.where(AuditEntry.tenant == tenant)
    if since:
        query = query.where(AuditEntry.at >= datetime.combine(since, time(), UTC))
    if until:  # the whole of its day
        query = query.where(AuditEntry.at < datetime.combine(until + timedelta(days=1), time(), UTC))
    return query
