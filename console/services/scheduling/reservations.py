"""Capacity reservations: a tenant holds running slots and queued runs for a time range; created, listed, cancelled."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from console.db import locks
from console.domain import capacity
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.words import agree, plural, said_back
from console.extensions import db
from console.models import Reservation, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import reserved
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound
from console.services.inputs import is_digits, is_id
from console.services.people import tenants
from console.services.settings import setting

MAX_QUEUED = 10_000_000
MAX_DAYS = 366
def shown(moment) -> str:
    """Write a time in a message as the console does (not ISO with microseconds), its year in four digits: the C
    library writes the year 1 as '1' (helper 155)."""
    return f"{moment.year:04d}-{moment:%m-%d %H:%M} UTC"
# A range "from now" typed into a form reaches the server a little later; that is not the past.
GRACE = timedelta(minutes=5)


def _when(raw, field: str) -> datetime:
    """Return an aware UTC moment from an ISO 8601 string (or a datetime); 422 naming the field otherwise."""
    if isinstance(raw, datetime):
        moment = raw
    elif isinstance(raw, str) and raw.strip():
        try:
            moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"{field} must be an ISO 8601 date and time such as 2026-12-31T18:00:00Z, "
                               f"got {said_back(raw)}", field) from None
    else:
        raise InvalidInput(f"give {field} as an ISO 8601 date and time such as 2026-12-31T18:00:00Z", field)
    if moment.tzinfo is None:
        raise InvalidInput(f"{field} needs a time zone (end it with Z for UTC), got {said_back(raw)}", field)
    return moment.astimezone(UTC)


def _count(raw, field: str, low: int, high: int) -> int:
    # None is a field left out: "got None" read as Python, not as what to send (helper 163).
    hint = f"{field} must be a whole number from {low} to {high}, " + (
        "and is required" if raw is None else f"got {said_back(raw)}")
    if isinstance(raw, str) and is_digits(raw.strip()) and len(raw.strip()) <= 9:
        raw = int(raw.strip())
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise InvalidInput(hint, field)
    return raw


def _spans(start: datetime, end: datetime):
    """Return (start, end, slots, tenant name) of the reservations not cancelled that overlap [start, end)."""
    query = (select(Reservation.starts_at, Reservation.ends_at, Reservation.running_slots, Tenant.name)
             .join(Tenant, Tenant.id == Reservation.tenant_id)
             .where(Reservation.cancelled_at.is_(None), Reservation.starts_at < end, Reservation.ends_at > start))
    return db.session.execute(query).all()


def snapshot(reservation: Reservation, tenant_name: str) -> dict:
    """Return a reservation as the API, the audit log and the pages show it."""
    return {"id": reservation.id, "tenant": tenant_name, "running_slots": reservation.running_slots,
            "queued_runs": reservation.queued_runs, "starts_at": reservation.starts_at.isoformat(),
            "ends_at": reservation.ends_at.isoformat(), "reason": reservation.reason,
            "created_by": reservation.created_by, "created_at": reservation.created_at.isoformat(),
            "cancelled_at": reservation.cancelled_at.isoformat() if reservation.cancelled_at else None,
            "cancelled_by": reservation.cancelled_by}


def holds(made: dict) -> str:
    """Say what a reservation (its snapshot) holds: "1 running slot and 200 queued runs"."""
    return f"{plural(made['running_slots'], 'running slot')} and {plural(made['queued_runs'], 'queued run')}"


def freed(cancelled: dict) -> str:
    """Say what cancelling a reservation (its snapshot) gave back: "its 3 running slots are free now"."""
    slots = cancelled["running_slots"]
    return f"its {plural(slots, 'running slot')} {agree(slots, 'is', 'are')} free now"


def _reserving_for(name, scope: int | None) -> Tenant:
    """The tenant a reservation is for: the one named (a 422 if none is), a tenant-limited caller's own."""
    name = name.strip() if isinstance(name, str) else name
    own = db.session.get(Tenant, scope) if scope is not None else None
    if own is not None and name in (None, "", own.name):  # as a submit without a tenant acts for the token's own
        return own
    if not isinstance(name, str) or not name:
        raise InvalidInput("give the tenant's name", "tenant")
    if own is not None:  # whether that tenant exists is not said
        raise Forbidden(f"you may reserve capacity only for tenant {own.name}", "tenant")
    return tenants.require(name)


def create(tenant_name, actor: Actor, *, running_slots, queued_runs=0, starts_at, ends_at, reason,
           scope: int | None = None, clock: Clock = SYSTEM_CLOCK) -> dict:
    """Reserve capacity for a tenant over [starts_at, ends_at); audited. 409 if it would promise more than exists."""
    tenant = _reserving_for(tenant_name, scope)
    now, promised = clock(), setting("CAPACITY_RUNNING")
    slots = _count(running_slots, "running_slots", 1, promised)
    queued = _count(0 if queued_runs in (None, "") else queued_runs, "queued_runs", 0, MAX_QUEUED)
    start, end = _when(starts_at, "starts_at"), _when(ends_at, "ends_at")
    if end <= start:
        raise InvalidInput(f"ends_at ({shown(end)}) must be after starts_at ({shown(start)})", "ends_at")
    if start < now - GRACE:
        raise InvalidInput(f"starts_at ({shown(start)}) is in the past; start it now ({shown(now)}) or later",
                           "starts_at")
    if end - start > timedelta(days=MAX_DAYS):
        raise InvalidInput(f"a reservation lasts at most {MAX_DAYS} days; shorten the range", "ends_at")
    # A reservation raises the tenant's quotas for its range; one limited to a tenant may not raise its own.
    if scope is not None and (slots > tenant.max_running or queued > tenant.max_queued):
        raise InvalidInput(f"a reservation made by someone limited to tenant {tenant.name} stays within its quotas "
                           f"(max_running {tenant.max_running}, max_queued {tenant.max_queued}); ask an admin of "
                           "every tenant for more", "running_slots" if slots > tenant.max_running else "queued_runs")
    if not isinstance(reason, str) or not reason.strip() or len(reason.strip()) > 255:
        raise InvalidInput("give a reason of 1-255 characters (who needs the capacity, for what)", "reason")
    # Check-then-insert across tenants: two reservations racing for the last slots must not both pass.
    locks.hold("reservations")
    spans = _spans(start, end)
    taken = capacity.peak([(s, e, n) for s, e, n, _ in spans], start, end)
    if taken + slots > promised:
        db.session.rollback()
        # Someone limited to a tenant learns how much is free, not which other tenants hold the rest.
        holders = sorted({name for *_, name in spans if scope is None or name == tenant.name})
        if scope is not None and len(holders) < len({name for *_, name in spans}):
            holders.append("other tenants")
        raise Conflict(f"over-reservation: between {start.isoformat()} and {end.isoformat()} up to {taken} of the "
                       f"{promised} running slots the system promises (REBOUND_CAPACITY_RUNNING) are reserved already "
                       f"(by {', '.join(holders)}); {promised - taken} {agree(promised - taken, 'is', 'are')} free "
                       f"then. Ask for at most "
                       f"{promised - taken} or choose another range.", "running_slots")
    reservation = Reservation(tenant_id=tenant.id, running_slots=slots, queued_runs=queued, starts_at=start,
                              ends_at=end, reason=reason.strip(), created_by=actor.name[:64], created_at=now)
    db.session.add(reservation)
    db.session.flush()
    after = snapshot(reservation, tenant.name)
    audit.record(db.session, actor, "capacity.reserve", "reservation", reservation.id, after=after,
                 tenant=tenant.name, clock=clock)
    db.session.commit()
    return after


def listing(scope: int | None, now: datetime, *, tenant_id: int | None = None, include_past: bool = False) -> list:
    """Return the reservations this scope may see (not cancelled, not ended unless asked), soonest first."""
    query = (select(Reservation, Tenant.name).join(Tenant, Tenant.id == Reservation.tenant_id)
             .order_by(Reservation.starts_at, Reservation.id))
    if not include_past:
        query = query.where(Reservation.cancelled_at.is_(None), Reservation.ends_at > now)
    for wall in (scope, tenant_id):
        if wall is not None:
            query = query.where(Reservation.tenant_id == wall)
    return [snapshot(reservation, name) for reservation, name in db.session.execute(query)]


def held_now(scope: int | None, now: datetime) -> dict[int, tuple[int, int]]:
    """Return {tenant id: (running slots, queued runs)} the reservations in force at `now` hold, within the scope."""
    return reserved.in_force(now, None if scope is None else [scope])


def between(start: datetime, end: datetime, tenant: str | None = None) -> list[dict]:
    """Return the reservations in force at some moment of [start, end), for the forecast."""
    query = (select(Reservation, Tenant.name).join(Tenant, Tenant.id == Reservation.tenant_id)
             .where(Reservation.cancelled_at.is_(None), Reservation.starts_at < end, Reservation.ends_at > start)
             .order_by(Reservation.starts_at, Reservation.id))
    if tenant:
        query = query.where(Tenant.name == tenant)
    return [snapshot(reservation, name) for reservation, name in db.session.execute(query)]


def _find(reservation_id, scope: int | None) -> tuple[Reservation, str]:
    """Return a reservation this scope may see, with its tenant's name; 404 otherwise."""
    if isinstance(reservation_id, str) and is_digits(reservation_id) and len(reservation_id) <= 12:
        reservation_id = int(reservation_id)
    found = db.session.execute(select(Reservation, Tenant.name).join(Tenant, Tenant.id == Reservation.tenant_id)
                               .where(Reservation.id == reservation_id)).one_or_none() \
        if is_id(reservation_id) else None
    if found is None or (scope is not None and found[0].tenant_id != scope):
        raise NotFound(f"no reservation {reservation_id}")
    return found[0], found[1]


def get(reservation_id, scope: int | None = None) -> dict:
    """Return one reservation as the API shows it (cancelled and ended ones too); 404 outside the scope."""
    return snapshot(*_find(reservation_id, scope))


def cancel(reservation_id, actor: Actor, *, scope: int | None = None, clock: Clock = SYSTEM_CLOCK) -> dict:
    """Cancel a reservation (its slots are free at once); audited. 404 outside the scope, 409 if cancelled already."""
    reservation, name = _find(reservation_id, scope)
    before = snapshot(reservation, name)
    now = clock()
    # Guarded: of two people cancelling at once, one does and the other is told.
    done = db.session.execute(update(Reservation).where(Reservation.id == reservation.id,
                                                        Reservation.cancelled_at.is_(None))
                              .values(cancelled_at=now, cancelled_by=actor.name[:64])
                              .execution_options(synchronize_session=False)).rowcount
    if not done:
        db.session.rollback()
        raise Conflict(f"reservation {reservation_id} was cancelled already")
    db.session.refresh(reservation)
    after = snapshot(reservation, name)
    audit.record(db.session, actor, "capacity.cancel", "reservation", reservation.id, before=before, after=after,
                 tenant=name, clock=clock)
    db.session.commit()
    return after
