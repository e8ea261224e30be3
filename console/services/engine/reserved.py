"""What capacity reservations hold at a moment, read for admission, submit and the planner."""

from datetime import datetime

from sqlalchemy import func, select

from console.domain import capacity
from console.extensions import db
from console.models import Reservation, Run, Tenant
from console.services.settings import setting


def active(now: datetime):
    """Return a query's WHERE clauses for the reservations in force at `now` (not cancelled, started, not ended)."""
    return (Reservation.cancelled_at.is_(None), Reservation.starts_at <= now, Reservation.ends_at > now)


def in_force(now: datetime, tenant_ids=None) -> dict[int, tuple[int, int]]:
    """Return {tenant id: (running slots, queued runs)} summed over the reservations in force at `now`."""
    query = (select(Reservation.tenant_id, func.sum(Reservation.running_slots), func.sum(Reservation.queued_runs))
             .where(*active(now)).group_by(Reservation.tenant_id))
    if tenant_ids is not None:
        query = query.where(Reservation.tenant_id.in_(list(tenant_ids)))
    return {tenant_id: (int(slots), int(queued)) for tenant_id, slots, queued in db.session.execute(query)}


def queued_allowance(tenant_id: int, max_queued: int, now: datetime) -> int:
    """Return the tenant's max_queued now: at least the queued runs its reservations in force hold."""
    held = in_force(now, [tenant_id]).get(tenant_id)
    return max(max_queued, held[1]) if held else max_queued


def hold(tenant_id: int, now: datetime) -> capacity.Hold | None:
    """Tell whether a run of this tenant must wait now so as not to take another tenant's unused reserved slot."""
    reserved = in_force(now)
    if not reserved:
        return None
    names = dict(db.session.execute(select(Tenant.id, Tenant.name).where(
        Tenant.id.in_(set(reserved) | {tenant_id}))).all())
    running = dict(db.session.execute(select(Run.tenant_id, func.count()).where(
        Run.status == "running", Run.tenant_id.in_(set(reserved) | {tenant_id})).group_by(Run.tenant_id)).all())
    total = db.session.execute(select(func.count()).select_from(Run).where(Run.status == "running")).scalar_one()
    return capacity.held_back(names[tenant_id], {names[t]: slots for t, (slots, _) in reserved.items()},
                              {names[t]: n for t, n in running.items()}, total, setting("CAPACITY_RUNNING"))
